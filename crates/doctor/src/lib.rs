//! stallscope's doctor: the diagnosis of a recording of a stalled JVM — which thread held the
//! world, what the kernel was doing to it, and what fixes it. The recording itself (its files,
//! writer and reader) is the `recording` crate's.
//!
//! ```
//! // A recording made by `stallscope run` of a JVM that was frozen with SIGSTOP for 500 ms.
//! let rec = recording::Recording::read("../../tests/fixtures/recordings/jdk17-idle-frozen-500ms", None)?;
//! let report = doctor::diagnose(&rec);
//! let stall = report.stalls.iter().max_by_key(|s| s.duration_ns).expect("one stall");
//! assert_eq!(stall.findings[0].cause, doctor::Cause::Frozen);
//! println!("{} stalls, the longest {} ns: {}", report.stalls.len(), stall.duration_ns, stall.findings[0].title);
//! # Ok::<(), recording::Error>(())
//! ```
//!
//! Reading and deciding are separate: `recording::Recording::read` is the only function that
//! touches the file system, and [`diagnose()`] is a pure function of what it read, so the same
//! recording always gives the same [`Report`] (the live `stallscope run` prints exactly what
//! `stallscope report DIR` prints later).
//!
//! Layers, each usable alone: [`wait`] (what a thread waited in, from one sample), [`evidence`]
//! (one stall's samples rebuilt into each thread's time by what it did), [`signals`] (what the
//! machine, the cgroups and the recorder did meanwhile), [`classify`] (evidence to causes and
//! shares), [`causes`] (each cause's name, fix and page), [`code`] (a culprit's Java code, from
//! the JVM's own stack samples), and [`report`] (the result).
//!
//! Depends on the recording and its readers' types (procwatch, hotspot-log) only: it reads a
//! recording and decides, and knows no command.

pub mod causes;
pub mod classify;
pub mod code;
pub mod confidence;
mod diagnose;
pub mod evidence;
pub mod flight;
pub mod instigator;
pub mod kernel;
pub mod report;
mod safepoints;
pub mod signals;
mod spans;
mod summary;
pub mod wait;

pub use causes::Cause;
pub use classify::segments;
pub use diagnose::{Carry, diagnose, diagnose_stalls, wall_of};
pub use flight::{GcLog, diagnose_flight, flight_safepoints};
pub use report::{
    Confidence, CpuShare, CulpritView, Finding, Instigator, InstigatorKind, Report, SafepointView,
    StallReport, Summary, ThreadLine, TimeoutCulprit,
};
