//! The plain data a log yields: one `Safepoint` per stop-the-world pause, with the threads a
//! SafepointTimeout named.

use crate::formats::Format;
use crate::stamps::Stamps;
use serde::Serialize;
use std::sync::Arc;

/// Where a record came from: the input's index (in the order files were read) and its
/// 1-based line number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Source {
    pub file: u32,
    pub line: u64,
}

/// A thread that SafepointTimeout named as not having reached the safepoint in time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Culprit {
    pub name: String,
    pub java_id: Option<u64>,
    /// Native thread id (`nid`), the `tid` under `/proc/<pid>/task/`.
    pub os_tid: Option<u64>,
    pub daemon: bool,
    /// HotSpot's state word from the thread line (`runnable`, `waiting on condition` …).
    pub state: Option<String>,
    /// `java.lang.Thread.State` when it was printed.
    pub java_state: Option<String>,
    /// Where the timeout block named it.
    pub source: Source,
    pub stamps: Stamps,
}

/// One safepoint: the time to reach it (TTSP), the time at it, and what ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Safepoint {
    /// The VM operation, or `"unknown"` when the log does not say (JDK 8 without statistics).
    pub op: Arc<str>,
    /// Time to safepoint ("Reaching safepoint", "Stopping threads took", statistics `sync`).
    /// JDK 13–16 include cleanup here. `None` when the log does not say (early JDK 8).
    pub ttsp_ns: Option<u64>,
    pub cleanup_ns: Option<u64>,
    /// The VM operation's own time ("At safepoint", statistics `vmop`).
    pub at_safepoint_ns: Option<u64>,
    pub leaving_ns: Option<u64>,
    /// All of it: the time application threads were stopped.
    pub total_ns: u64,
    /// Application time since the previous safepoint.
    pub since_last_ns: Option<u64>,
    pub threads_total: Option<u32>,
    /// Threads still running when the safepoint began ("runnable" on JDK 22+,
    /// "initially running" in statistics).
    pub threads_running: Option<u32>,
    pub page_traps: Option<u32>,
    /// The stamps of the line that closed the record, which HotSpot prints when the safepoint
    /// ends; [`Safepoint::start`] is derived from it.
    pub end: Stamps,
    /// The shape the timings were read from (a statistics row merged into a line keeps the
    /// line's shape).
    pub format: Format,
    pub source: Source,
    /// Threads a SafepointTimeout block named while this safepoint was being reached.
    pub culprits: Vec<Culprit>,
}

impl Safepoint {
    /// When the safepoint began, on each clock the log has.
    pub fn start(&self) -> Stamps {
        self.end.minus(self.total_ns)
    }

    /// TTSP if known, otherwise zero (for sums and comparisons).
    pub fn ttsp_or_zero(&self) -> u64 {
        self.ttsp_ns.unwrap_or(0)
    }
}
