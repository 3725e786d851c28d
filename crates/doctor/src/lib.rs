//! stallscope's doctor as a library: the recording format a stalled JVM is captured in, and the
//! diagnosis of it — which thread held the world, what the kernel was doing to it, and what
//! fixes it.
//!
//! ```
//! // A recording made by `stallscope run` of a JVM that was frozen with SIGSTOP for 500 ms.
//! let recording = doctor::Recording::read("../../tests/fixtures/recordings/jdk17-idle-frozen-500ms")?;
//! let report = doctor::diagnose(&recording);
//! let stall = report.stalls.iter().max_by_key(|s| s.duration_ns).expect("one stall");
//! assert_eq!(stall.findings[0].cause, doctor::Cause::Frozen);
//! println!("{} stalls, the longest {} ns: {}", report.stalls.len(), stall.duration_ns, stall.findings[0].title);
//! # Ok::<(), doctor::Error>(())
//! ```
//!
//! Reading and deciding are separate: [`Recording::read`] is the only function that touches
//! the file system, and [`diagnose()`] is a pure function of what it read, so the same recording
//! always gives the same [`Report`] (the live `stallscope run` prints exactly what
//! `stallscope report DIR` prints later).
//!
//! Layers, each usable alone: [`recording`] (the directory's files and the plain types their
//! lines hold, with the writer the recorder uses), [`hlog`] (HdrHistogram interval logs),
//! [`wait`] (what a thread waited in, from one sample), [`evidence`] (one stall's samples
//! rebuilt into each thread's time by what it did), [`signals`] (what the machine, the cgroups
//! and the recorder did meanwhile), [`classify`] (evidence to causes and shares), [`causes`]
//! (each cause's name, fix and page), [`code`] (a culprit's Java code, from the JVM's own stack samples), [`report`] (the result), and [`units`] (durations as
//! people type and read them).

pub mod causes;
pub mod classify;
pub mod code;
pub mod counters;
mod diagnose;
pub mod evidence;
pub mod hlog;
pub mod recording;
pub mod report;
pub mod signals;
pub mod units;
pub mod wait;

pub use causes::Cause;
pub use classify::segments;
pub use diagnose::{diagnose, wall_of};
pub use recording::Recording;
pub use report::{
    Confidence, CulpritView, Finding, Report, SafepointView, StallReport, Summary, ThreadLine,
    TimeoutCulprit,
};

use std::path::{Path, PathBuf};

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
    #[error("{}: not a regular file (a FIFO, socket or device?); a recording holds plain files only", path.display())]
    NotAFile { path: PathBuf },
}

impl Error {
    pub(crate) fn io(path: &Path, what: &'static str, source: std::io::Error) -> Error {
        Error::Io { path: path.to_path_buf(), what, source }
    }
}
