//! What the doctor knows about one stall, gathered by the diagnosis and read by every step of
//! the classification.
//!
//! Invariant: plain data, borrowed; nothing here decides anything.

use super::segment::Segment;
use crate::evidence::{StallEvidence, ThreadEvidence};
use crate::report::SafepointView;
use crate::signals::SystemSignals;
use recording::Shares;
use recording::disk::Mapping;
use std::collections::HashMap;

/// What the doctor knows about one stall.
pub struct Inputs<'a> {
    pub duration_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Evidence over the whole stall.
    pub evidence: &'a StallEvidence,
    /// The stall cut into segments, in time order, covering it.
    pub segments: &'a [Segment],
    /// The safepoints the stall overlaps, in time order (segments index into this).
    pub safepoints: &'a [SafepointView],
    pub control_max_late_ns: u64,
    /// How much of its worst late wake-up the recorder spent on a run queue, when measured.
    pub control_queued_ns: Option<u64>,
    pub signals: &'a SystemSignals,
    /// Which of the target's limits bind the recorder too.
    pub shares: Shares,
    pub names: &'a HashMap<i32, String>,
    pub maps: &'a [Mapping],
    pub mapped_files: &'a [(String, u64, u64)],
    /// Files mapped shared and writable that live in memory (tmpfs): never written back.
    pub in_memory_files: &'a [String],
    /// Files mapped shared and writable: (path, dirty pages, pages under writeback) as the
    /// stall began (`cachestat`; empty before Linux 6.5 and in older recordings).
    pub writeback_files: &'a [(String, u64, u64)],
    pub meter_tid: Option<i32>,
    /// Tracepoint events around the stall (root only).
    pub trace: &'a [recording::disk::TraceEvent],
    /// The kernel's waits of the JVM's threads in the stall (the BPF recorder, root only).
    pub kwaits: Option<&'a recording::StallKernelWaits>,
    pub clock_ticks: u64,
}

impl Inputs<'_> {
    /// A thread's name: its Java name when known, else its `comm`.
    pub(super) fn name_of(&self, t: &ThreadEvidence) -> String {
        self.names.get(&t.tid).cloned().unwrap_or_else(|| t.comm.clone())
    }

    /// One clock tick, in ns.
    pub(super) fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.clock_ticks.max(1)
    }
}
