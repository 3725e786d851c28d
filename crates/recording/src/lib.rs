//! stallscope's recording format: the directory one run of the recorder fills, one
//! append-only file per source, the plain types its lines hold, the writer the recorder uses and
//! the reader the diagnosis uses. Documented in `docs/formats/recording.md`.
//!
//! ```
//! // A recording made by `stallscope run` of a JVM that was frozen with SIGSTOP for 500 ms.
//! let rec = recording::Recording::read("../../tests/fixtures/recordings/jdk17-idle-frozen-500ms", None)?;
//! assert_eq!(rec.meta.mode, "run");
//! println!("{} events, {} safepoints", rec.events.len(), rec.safepoints.len());
//! # Ok::<(), recording::Error>(())
//! ```
//!
//! Layers: [`files`] (the names), [`schema`] (what each line holds), [`disk`] (the recording's
//! own types for what the readers produced, converted from theirs), [`writer`] (the recorder's
//! side), [`read`] (everything into one [`Recording`]), [`hlog`] (the HdrHistogram interval
//! logs of the hiccup and control meters), [`counters`] (safepoints from the JVM's perf
//! counters, where its log says nothing), [`units`] (durations as people type and read
//! them), [`who`] (who set each stall off, as the recorder saw it), [`stamps`] (a line's
//! stall and time, from its text) and [`live`] (the recording kept in memory as it is written).
//!
//! Invariant: a recording is read by [`Recording::read`] (or, while it is being written, built
//! by [`Recording::from_live`] from what its writer kept, line for line the same) and nothing
//! else, so every command (`report`, `watch`, `attach`, the lab) diagnoses the same recording
//! from the same input.
//!
//! Depends on procwatch and hotspot-log only, and names none of their types in its own: the
//! recorder converts the readers' values (`recorder::to_disk`). It calls a few of procwatch's
//! functions on plain values (a mapping's kind, a process's label, the counters' safepoints).

pub mod counters;
pub mod disk;
pub mod files;
pub mod hlog;
pub mod live;
pub mod notice;
pub mod read;
pub mod schema;
pub mod stamps;
pub mod units;
pub mod verify;
pub mod who;
pub mod writer;

pub use live::Live;
pub use notice::{Notice, Notices};
pub use read::{
    FlightRecordings, Place, ReadFrom, Recording, read_lines, read_lines_noting, read_meta,
};
pub use schema::*;
pub use who::{CpuTaker, Freezer, IoTaker, Named, Who, WhoProcess, WhoThread};
pub use writer::{Appender, Barrier, Writer, create_new};

use std::path::{Path, PathBuf};

/// The version of the recording format this build writes and the newest it reads. Raise it when
/// what is on disk changes meaning or shape (a field renamed, retyped or removed; a new field
/// that older readers must not ignore), and say what changed in docs/formats/recording.md.
/// `tests/format.rs` pins the field names of every record type.
pub const FORMAT: u32 = 2;

/// What can go wrong reading or writing a recording; each names the file (and line) to look at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: no meta.json here; is this a stallscope recording directory?", dir.display())]
    NotARecording { dir: PathBuf, source: std::io::Error },
    #[error("{}: not a valid recording header ({reason})", path.display())]
    BadHeader { path: PathBuf, reason: String },
    #[error("{}:{line}: not a valid record ({reason}); the recording is damaged", path.display())]
    Damaged { path: PathBuf, line: usize, reason: String },
    #[error("{}: {what}", path.display())]
    Io { path: PathBuf, what: &'static str, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    SafepointLog { path: PathBuf, reason: String },
    #[error("{}: recording format {found}, newer than this stallscope reads ({FORMAT}); read it with the stallscope that made it ({made_by}) or a newer one", path.display())]
    TooNew { path: PathBuf, found: u32, made_by: String },
    #[error("{}: not a regular file (a FIFO, socket or device?); a recording holds plain files only", path.display())]
    NotAFile { path: PathBuf },
}

impl Error {
    pub(crate) fn io(path: &Path, what: &'static str, source: std::io::Error) -> Error {
        Error::Io { path: path.to_path_buf(), what, source }
    }
}
