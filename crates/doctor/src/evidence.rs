//! What each thread did during one stall, rebuilt from the delta-encoded samples: time in each
//! state, where it slept, whether it was inside a system call, and how its counters moved.
//!
//! Invariant: pure arithmetic over recorded samples; a thread absent from a delta sample keeps
//! its previous values, exactly as the recorder meant.

use crate::recording::Sample;
use procwatch::task::{Syscall, TaskSample};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Kernel sleeps that mean "waiting for a page to come in from a file or the disk".
pub fn fault_wait(wchan: &str) -> bool {
    const W: [&str; 16] = [
        "folio_wait",
        "__folio_lock",
        "wait_on_page",
        "__lock_page",
        "request_wait_answer",
        "fuse_",
        "filemap_",
        "do_read_cache",
        "read_pages",
        "io_schedule",
        "submit_bio_wait",
        "blk_mq_",
        "swap_read",
        "swap_readpage",
        "__wait_on_bit",
        "do_swap_page",
    ];
    W.iter().any(|p| wchan.starts_with(p))
}

/// Kernel sleeps on the mmap read-write semaphore.
pub fn mmap_lock_wait(wchan: &str) -> bool {
    wchan.starts_with("rwsem_down") || wchan.starts_with("down_read") || wchan.starts_with("down_write") || wchan.contains("mmap_lock") || wchan.starts_with("lock_mm_and_find_vma")
}

/// JVM-internal threads that run (or look busy) during safepoints without holding them up.
pub fn jvm_internal(comm: &str) -> bool {
    ["VM Thread", "GC Thread", "G1 ", "VM Periodic", "C1 CompilerThre", "C2 CompilerThre", "Signal Dispatch", "Service Thread", "Monitor Deflati", "Common-Cleaner", "Notification Th", "Sweeper", "ZWorker", "ZDriver", "Shenandoah", "stallscope-"]
        .iter()
        .any(|p| comm.starts_with(p))
}

/// The JVM threads that run a safepoint's operation: the VM Thread and the GC workers.
pub fn vm_operation_thread(comm: &str) -> bool {
    comm == "VM Thread" || ["GC Thread", "G1 ", "ZWorker", "Shenandoah"].iter().any(|p| comm.starts_with(p))
}

/// One thread over one stall.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadEvidence {
    pub tid: i32,
    pub comm: String,
    /// How many samples saw it, and in which states.
    pub samples: usize,
    pub states: BTreeMap<char, usize>,
    /// The kernel function it slept in most often (empty when it ran).
    pub wchan: String,
    pub wchans: BTreeMap<String, usize>,
    /// Samples that found it blocked outside any system call (a page fault), and the last pc.
    pub not_in_syscall: usize,
    pub fault_pc: Option<u64>,
    /// When it was first seen blocked outside a system call (the fault was under way by then).
    pub first_blocked_t: Option<u64>,
    /// The system call it was blocked in most often, if any.
    pub syscall_nr: Option<i64>,
    /// Counter movements from its first to its last sample in the stall.
    pub cpu_ns: u64,
    pub run_delay_ns: u64,
    pub majflt: u64,
    pub minflt: u64,
    /// From the baseline before the stall to the end (faults count when they complete).
    pub majflt_since_baseline: u64,
    /// The span between its first and last sample.
    pub span_ns: u64,
}

impl ThreadEvidence {
    /// Samples in which it was in `state`.
    pub fn count(&self, state: char) -> usize {
        *self.states.get(&state).unwrap_or(&0)
    }

    pub fn share(&self, state: char) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            *self.states.get(&state).unwrap_or(&0) as f64 / self.samples as f64
        }
    }

    pub fn dominant_state(&self) -> char {
        self.states.iter().max_by_key(|(_, n)| **n).map_or('?', |(s, _)| *s)
    }

    /// A compact picture of its states, `R×120 D×3`.
    pub fn state_line(&self) -> String {
        let mut v: Vec<_> = self.states.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        v.iter().map(|(s, n)| format!("{s}×{n}")).collect::<Vec<_>>().join(" ")
    }
}

/// All threads over one stall, plus how many samples there were and when.
#[derive(Debug, Clone, Default)]
pub struct StallEvidence {
    pub threads: Vec<ThreadEvidence>,
    pub sample_times: Vec<u64>,
    /// Per sample: the share of threads in state T or t (stopped).
    pub stopped_share: Vec<f64>,
}

/// Rebuilds the per-thread picture of a stall from its samples (baseline first, if any). Only
/// samples up to `end_ns` (when the stall ended) describe what threads did during it; the
/// sample taken just after, once threads run again, counts only for major faults, which the
/// kernel counts when the fault completes.
pub fn rebuild(samples: &[&Sample], clock_ticks: u64, start_ns: u64, end_ns: u64) -> StallEvidence {
    let tick_ns = 1_000_000_000 / clock_ticks.max(1);
    let baseline: HashMap<i32, &TaskSample> = samples.iter().filter(|s| s.baseline).flat_map(|s| s.threads.iter().map(|t| (t.tid, t))).collect();
    let mut current: HashMap<i32, TaskSample> = HashMap::new();
    struct Acc {
        first: TaskSample,
        first_t: u64,
        last: TaskSample,
        last_t: u64,
        /// The last sample of all, after the stall too.
        latest: TaskSample,
        states: BTreeMap<char, usize>,
        wchans: BTreeMap<String, usize>,
        syscalls: BTreeMap<i64, usize>,
        not_in: usize,
        pc: Option<u64>,
        first_blocked: Option<u64>,
        n: usize,
    }
    let mut acc: HashMap<i32, Acc> = HashMap::new();
    let mut ev = StallEvidence::default();
    for s in samples.iter().filter(|s| !s.baseline) {
        if s.full {
            current.clear();
        }
        for g in &s.gone {
            current.remove(g);
        }
        for t in &s.threads {
            current.insert(t.tid, t.clone());
        }
        if s.t < start_ns {
            continue;
        }
        if s.t > end_ns {
            for t in current.values() {
                if let Some(a) = acc.get_mut(&t.tid) {
                    a.latest = t.clone();
                }
            }
            continue;
        }
        ev.sample_times.push(s.t);
        let stopped = current.values().filter(|t| matches!(t.state, 'T' | 't')).count();
        ev.stopped_share.push(if current.is_empty() { 0.0 } else { stopped as f64 / current.len() as f64 });
        for t in current.values() {
            let a = acc.entry(t.tid).or_insert_with(|| Acc {
                first: t.clone(),
                first_t: s.t,
                last: t.clone(),
                last_t: s.t,
                latest: t.clone(),
                states: BTreeMap::new(),
                wchans: BTreeMap::new(),
                syscalls: BTreeMap::new(),
                not_in: 0,
                pc: None,
                first_blocked: None,
                n: 0,
            });
            a.last = t.clone();
            a.last_t = s.t;
            a.latest = t.clone();
            a.n += 1;
            *a.states.entry(t.state).or_default() += 1;
            if !t.wchan.is_empty() && t.wchan != "0" {
                *a.wchans.entry(t.wchan.clone()).or_default() += 1;
            }
            match t.syscall {
                Syscall::NotInSyscall { pc, .. } => {
                    a.not_in += 1;
                    a.pc = Some(pc);
                    a.first_blocked.get_or_insert(s.t);
                }
                Syscall::In { nr, .. } => *a.syscalls.entry(nr).or_default() += 1,
                _ => {}
            }
        }
    }
    for (tid, a) in acc {
        let cpu = |t: &TaskSample| t.exec_ns.max((t.utime_ticks + t.stime_ticks) * tick_ns);
        let base_majflt = baseline.get(&tid).map_or(a.first.majflt, |b| b.majflt);
        ev.threads.push(ThreadEvidence {
            tid,
            comm: a.last.comm.clone(),
            samples: a.n,
            wchan: a.wchans.iter().max_by_key(|(_, n)| **n).map(|(w, _)| w.clone()).unwrap_or_default(),
            wchans: a.wchans,
            states: a.states,
            not_in_syscall: a.not_in,
            fault_pc: a.pc,
            first_blocked_t: a.first_blocked,
            syscall_nr: a.syscalls.iter().max_by_key(|(_, n)| **n).map(|(nr, _)| *nr),
            cpu_ns: cpu(&a.last).saturating_sub(cpu(&a.first)),
            run_delay_ns: a.last.run_delay_ns.saturating_sub(a.first.run_delay_ns),
            majflt: a.last.majflt.saturating_sub(a.first.majflt),
            minflt: a.last.minflt.saturating_sub(a.first.minflt),
            majflt_since_baseline: a.latest.majflt.saturating_sub(base_majflt),
            span_ns: a.last_t.saturating_sub(a.first_t),
        });
    }
    ev.threads.sort_by_key(|t| t.tid);
    ev
}
