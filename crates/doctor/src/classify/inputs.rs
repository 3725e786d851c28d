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
    /// Every process's CPU time while the stall lasted, as the recorder counted it.
    pub cpu_use: Option<CpuUse>,
    pub clock_ticks: u64,
    /// The recording knows the JVM's safepoints (its log, its counters) and none of them
    /// overlaps the stall: it was outside any safepoint for certain (not one unseen, nor one
    /// given to the stall before).
    pub outside_safepoints: bool,
    /// How long in the stall the JVM's GC locker held a collection back (its flag, read at the
    /// recorder's looks; 0: never seen set, or not read).
    pub gc_locker_held_ns: u64,
}

/// The machine's CPU time while a stall lasted (`who`'s cpu-use line): how much of it the target
/// used and how much every other process did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuUse {
    /// The time counted over, in ns.
    pub over_ns: u64,
    pub cpus: usize,
    pub target_ns: u64,
    pub others_ns: u64,
    /// Counted to the ns by the kernel's switches (BPF), not in clock ticks from `/proc`.
    pub exact: bool,
}

/// Others' CPU time, as a share of the CPUs over the stall, below which they did not take the
/// CPUs (the JVM's own threads, or nobody, kept its threads waiting): no neighbour starved the
/// JVM, and the instigator names none either.
pub(crate) const NEIGHBOURS_MIN_SHARE: f64 = 0.25;
const OTHERS_AT_MOST: f64 = NEIGHBOURS_MIN_SHARE;
/// At least this share of the machine's CPUs used by the target, and twice what others used: it
/// was its own contention. (The count leaves stallscope out and begins when the stall is
/// noticed: 8 GC threads on 2 CPUs with nothing else running counted 0.39–0.72 of them.)
const TARGET_AT_LEAST: f64 = 0.3;
/// Counted in clock ticks, a count over less than this is too coarse to say.
const TICKED_AT_LEAST_NS: u64 = 200_000_000;

impl CpuUse {
    /// From a stall's cpu-use line, if it has one.
    pub fn of(who: &recording::Who) -> Option<CpuUse> {
        match who {
            recording::Who::CpuUse { from, to, cpus, target_ns, others_ns, counted, .. } => {
                Some(CpuUse {
                    over_ns: to.saturating_sub(*from),
                    cpus: *cpus,
                    target_ns: *target_ns,
                    others_ns: *others_ns,
                    exact: counted == "bpf",
                })
            }
            _ => None,
        }
    }

    /// The machine's CPUs over the count, in ns.
    fn capacity_ns(&self) -> f64 {
        self.over_ns as f64 * self.cpus.max(1) as f64
    }

    /// (the target's share, other processes' share) of the machine's CPUs, where the count can
    /// tell.
    pub fn shares(&self) -> Option<(f64, f64)> {
        if self.over_ns == 0 || (!self.exact && self.over_ns < TICKED_AT_LEAST_NS) {
            return None;
        }
        let c = self.capacity_ns();
        Some((self.target_ns as f64 / c, self.others_ns as f64 / c))
    }

    /// The target used more of the machine's CPUs than every other process together, and those
    /// others under a third of them.
    pub fn target_ahead(&self) -> bool {
        self.shares().is_some_and(|(target, others)| target > others && others < 1.0 / 3.0)
    }

    /// The target's own threads held the machine's CPUs through the stall, nobody else did:
    /// a wait for a CPU in it was for the target's own threads.
    pub fn held_by_target(&self) -> bool {
        self.shares().is_some_and(|(target, others)| {
            target >= TARGET_AT_LEAST && others < OTHERS_AT_MOST && target >= 2.0 * others
        })
    }
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
