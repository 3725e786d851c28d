//! What each thread did during one stall, rebuilt from the delta-encoded samples: its time by
//! what it was doing (on a CPU in user or kernel mode, waiting for one, stopped, or waiting in
//! the kernel, by what for), where it slept, whether it was inside a system call, and how its
//! counters moved.
//!
//! Invariant: pure arithmetic over recorded samples; a thread absent from a delta sample keeps
//! its previous values, exactly as the recorder meant. Time on a CPU and on a run queue comes
//! from the thread's own counters (schedstat), which are exact; the samples split the rest.

use crate::wait::{Seen, Wait, seen};
use recording::Sample;
use recording::disk::{Syscall, TaskSample};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

pub use procwatch::jvm_threads::{jvm_internal, stallscope_own, vm_operation_thread};

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
    /// How long it had been waiting on a run queue when its first sample was read, at least: the
    /// kernel adds a wait to `run_delay` only when it ends, so run delay a later sample shows
    /// beyond the time elapsed since the first one was waited before it, in one stretch up to
    /// it (see [`rebuild`]).
    pub queued_at_first_ns: u64,
    /// The part of that wait inside the window (after its start): run-queue time before the
    /// first sample, which the samples alone leave unaccounted.
    pub lead_queued_ns: u64,
    pub majflt: u64,
    pub minflt: u64,
    /// From the baseline before the stall to the end (faults count when they complete).
    pub majflt_since_baseline: u64,
    /// The span between its first and last sample.
    pub span_ns: u64,
    /// Clock ticks of user and kernel CPU time, from its first to its last sample.
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Sampled time by what the samples showed (each sample stands for the time to the next).
    pub seen_ns: BTreeMap<Seen, u64>,
    /// The files of the reads and writes it was seen blocked in, with how many samples.
    pub files: BTreeMap<String, usize>,
}

/// A thread's time over a window, by what it was doing. On-CPU and run-queue time come from
/// its counters; the samples split the rest by what it waited for.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Account {
    pub span_ns: u64,
    /// On a CPU in user mode, and in kernel mode (from the tick counters' split).
    pub user_ns: u64,
    pub kernel_ns: u64,
    /// On a CPU, when the window was too short for the tick counters to split it.
    pub cpu_ns: u64,
    /// Runnable, waiting on a run queue (schedstat run delay).
    pub run_queue_ns: u64,
    /// Seen runnable, but its counters did not move enough to say whether it ran or waited.
    pub runnable_ns: u64,
    pub stopped_ns: u64,
    pub waits: BTreeMap<Wait, u64>,
}

impl Account {
    /// All of its time but what it spent parked.
    pub fn active_ns(&self) -> u64 {
        self.span_ns.saturating_sub(self.waits.get(&Wait::Parked).copied().unwrap_or(0))
    }

    pub fn on_cpu_ns(&self) -> u64 {
        self.user_ns + self.kernel_ns + self.cpu_ns
    }

    pub fn wait_ns(&self, w: Wait) -> u64 {
        self.waits.get(&w).copied().unwrap_or(0)
    }
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

    /// The same thread without the run-queue wait proven before its first sample: what its
    /// samples alone show.
    pub fn without_lead(&self) -> ThreadEvidence {
        ThreadEvidence { queued_at_first_ns: 0, lead_queued_ns: 0, ..self.clone() }
    }

    /// Its time by what it was doing (see [`Account`]), from the window's start when its
    /// counters prove it was waiting for a CPU from then until its first sample.
    pub fn account(&self, tick_ns: u64) -> Account {
        let span: u64 = self.seen_ns.values().sum();
        let runnable = self.seen_ns.get(&Seen::Runnable).copied().unwrap_or(0);
        let stopped = self.seen_ns.get(&Seen::Stopped).copied().unwrap_or(0);
        let cpu = self.cpu_ns.min(span);
        // The wait under way at the first sample is in the counters' movement; the part of it
        // before that sample is no time between the samples.
        let rq = self.run_delay_ns.saturating_sub(self.queued_at_first_ns).min(span - cpu);
        // Samples see R for time the counters do not fully cover (sampling is coarse): the
        // rest of the R time goes to CPU and queue in their proportion, when the counters moved
        // enough to give one; otherwise it stays unresolved.
        let (cpu, rq, unresolved) = if cpu + rq < runnable {
            let extra = runnable - cpu - rq;
            if (cpu + rq) * 4 < runnable {
                (cpu, rq, extra)
            } else {
                (cpu + extra * cpu / (cpu + rq), rq + extra * rq / (cpu + rq), 0)
            }
        } else {
            (cpu, rq, 0)
        };
        let off = span.saturating_sub(cpu + rq + unresolved);
        // Off-CPU time, split by what the samples saw the thread wait for.
        let mut off_seen: Vec<(Option<Wait>, u64)> = self
            .seen_ns
            .iter()
            .filter_map(|(s, ns)| match s {
                Seen::Waiting(w) => Some((Some(*w), *ns)),
                Seen::Stopped => Some((None, *ns)),
                Seen::Runnable => None,
            })
            .collect();
        let sampled_off: u64 = off_seen.iter().map(|x| x.1).sum();
        let mut a = Account {
            span_ns: span + self.lead_queued_ns,
            run_queue_ns: rq + self.lead_queued_ns,
            runnable_ns: unresolved,
            ..Account::default()
        };
        if sampled_off == 0 && off > 0 {
            // Off the CPU between samples that all saw it runnable: not known what for.
            off_seen.push((Some(Wait::Other), off));
        }
        let sampled_off = off_seen.iter().map(|x| x.1).sum::<u64>().max(1);
        for (w, ns) in off_seen {
            let share = (ns as u128 * off as u128 / sampled_off as u128) as u64;
            match w {
                Some(w) => *a.waits.entry(w).or_default() += share,
                None => a.stopped_ns += share,
            }
        }
        let _ = stopped;
        // User or kernel: the tick counters, when they moved enough to tell.
        let ticks = self.utime_ticks + self.stime_ticks;
        if ticks >= 2 && ticks * tick_ns >= cpu / 4 {
            a.user_ns = (cpu as u128 * self.utime_ticks as u128 / ticks as u128) as u64;
            a.kernel_ns = cpu - a.user_ns;
        } else {
            a.cpu_ns = cpu;
        }
        a
    }

    /// The file it was seen reading or writing most.
    pub fn file(&self) -> Option<&str> {
        self.files.iter().max_by_key(|(_, n)| **n).map(|(f, _)| f.as_str())
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

impl StallEvidence {
    /// The same evidence without the run-queue waits proven before each thread's first sample:
    /// for a segment with no sample of its own that borrows the whole stall's, since such a
    /// wait lies just before the sample, wherever that fell.
    pub fn without_leads(&self) -> StallEvidence {
        let threads = self.threads.iter().map(ThreadEvidence::without_lead).collect();
        StallEvidence { threads, ..self.clone() }
    }
}

/// Rebuilds the per-thread picture of a stall from its samples (baseline first, if any). Only
/// samples up to `end_ns` (when the stall ended) describe what threads did during it; the
/// sample taken just after, once threads run again, counts only for major faults, which the
/// kernel counts when the fault completes, and for the run-queue wait under way at a thread's
/// first sample, which the kernel adds to `run_delay` when it ends.
///
/// That wait: every wait `run_delay` counts between a thread's first sample and a later one
/// ended in between, and they do not overlap; all but the one under way at the first sample
/// lie wholly between the two reads. So what the counter gained beyond the time between the
/// reads was waited before the first, in one stretch ending at it. A sample's reads all happen
/// before the next sample begins, so that time is bounded by the next sample's `t`: the
/// stretch found is a lower bound, never an estimate. The part of it after `start_ns` is the
/// thread's run-queue time before its first sample in the window (`lead_queued_ns`).
pub fn rebuild(samples: &[&Sample], clock_ticks: u64, start_ns: u64, end_ns: u64) -> StallEvidence {
    let tick_ns = 1_000_000_000 / clock_ticks.max(1);
    let baseline: HashMap<i32, &TaskSample> = samples
        .iter()
        .filter(|s| s.baseline)
        .flat_map(|s| s.threads.iter().map(|t| (t.tid, t)))
        .collect();
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
        /// The previous sample in the window: when, and what it showed.
        prev: Option<(u64, Seen)>,
        seen_ns: BTreeMap<Seen, u64>,
        files: BTreeMap<String, usize>,
        /// Its run delay at its latest sample, until a later sample bounds when that was read.
        unbounded_rd: Option<u64>,
        /// The longest wait proven under way at its first sample.
        queued_at_first: u64,
    }
    let mut acc: HashMap<i32, Acc> = HashMap::new();
    let mut ev = StallEvidence::default();
    // Each sample's picture of a thread stands for the time until the next sample.
    let mut close_at: Option<u64> = None;
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
        // The previous sample was read before this one began.
        for a in acc.values_mut() {
            if let Some(rd) = a.unbounded_rd.take() {
                let gained = rd.saturating_sub(a.first.run_delay_ns);
                a.queued_at_first =
                    a.queued_at_first.max(gained.saturating_sub(s.t.saturating_sub(a.first_t)));
            }
        }
        if s.t > end_ns {
            close_at.get_or_insert(s.t.min(end_ns));
            for t in current.values() {
                if let Some(a) = acc.get_mut(&t.tid) {
                    a.latest = t.clone();
                    a.unbounded_rd = Some(t.run_delay_ns);
                }
            }
            continue;
        }
        ev.sample_times.push(s.t);
        let stopped =
            current.values().filter(|t| crate::wait::seen(t) == crate::wait::Seen::Stopped).count();
        ev.stopped_share.push(if current.is_empty() {
            0.0
        } else {
            stopped as f64 / current.len() as f64
        });
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
                prev: None,
                seen_ns: BTreeMap::new(),
                files: BTreeMap::new(),
                unbounded_rd: None,
                queued_at_first: 0,
            });
            if let Some((pt, ps)) = a.prev {
                *a.seen_ns.entry(ps).or_default() += s.t.saturating_sub(pt);
            }
            a.prev = Some((s.t, seen(t)));
            if let Some(f) = &t.file {
                *a.files.entry(f.clone()).or_default() += 1;
            }
            a.last = t.clone();
            a.last_t = s.t;
            a.latest = t.clone();
            a.unbounded_rd = Some(t.run_delay_ns);
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
    // The last picture of each thread lasts until the stall ended (or the next look after it).
    let last_t = ev.sample_times.last().copied().unwrap_or(0);
    let close = close_at
        .unwrap_or(if end_ns == u64::MAX { last_t } else { end_ns.max(last_t) })
        .max(last_t);
    for a in acc.values_mut() {
        if let Some((pt, ps)) = a.prev.take() {
            *a.seen_ns.entry(ps).or_default() += close.saturating_sub(pt);
        }
    }
    for (tid, a) in acc {
        let cpu = |t: &TaskSample| t.exec_ns.max((t.utime_ticks + t.stime_ticks) * tick_ns);
        let base_majflt = baseline.get(&tid).map_or(a.first.majflt, |b| b.majflt);
        ev.threads.push(ThreadEvidence {
            tid,
            comm: a.last.comm.clone(),
            samples: a.n,
            wchan: a
                .wchans
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(w, _)| w.clone())
                .unwrap_or_default(),
            wchans: a.wchans,
            states: a.states,
            not_in_syscall: a.not_in,
            fault_pc: a.pc,
            first_blocked_t: a.first_blocked,
            syscall_nr: a.syscalls.iter().max_by_key(|(_, n)| **n).map(|(nr, _)| *nr),
            cpu_ns: cpu(&a.last).saturating_sub(cpu(&a.first)),
            run_delay_ns: a.last.run_delay_ns.saturating_sub(a.first.run_delay_ns),
            queued_at_first_ns: a.queued_at_first,
            lead_queued_ns: a.queued_at_first.min(a.first_t.saturating_sub(start_ns)),
            majflt: a.last.majflt.saturating_sub(a.first.majflt),
            minflt: a.last.minflt.saturating_sub(a.first.minflt),
            majflt_since_baseline: a.latest.majflt.saturating_sub(base_majflt),
            span_ns: a.last_t.saturating_sub(a.first_t),
            utime_ticks: a.last.utime_ticks.saturating_sub(a.first.utime_ticks),
            stime_ticks: a.last.stime_ticks.saturating_sub(a.first.stime_ticks),
            seen_ns: a.seen_ns,
            files: a.files,
        });
    }
    ev.threads.sort_by_key(|t| t.tid);
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use recording::disk::Syscall;

    const MS: u64 = 1_000_000;

    fn task(state: char, exec_ns: u64, run_delay_ns: u64) -> TaskSample {
        TaskSample {
            tid: 7,
            comm: "busy-0".into(),
            state,
            exec_ns,
            run_delay_ns,
            syscall: Syscall::Running,
            ..Default::default()
        }
    }

    fn sample(t_ms: u64, t: TaskSample) -> Sample {
        Sample {
            t: t_ms * MS,
            stall: 1,
            full: true,
            baseline: false,
            threads: vec![t],
            gone: vec![],
        }
    }

    fn thread(samples: &[Sample], start_ms: u64, end_ms: u64) -> ThreadEvidence {
        let refs: Vec<&Sample> = samples.iter().collect();
        rebuild(&refs, 100, start_ms * MS, end_ms * MS).threads.remove(0)
    }

    #[test]
    fn run_delay_beyond_the_time_since_the_first_sample_was_waited_before_it() {
        // The stall began at 2 ms, the first look came at 10 ms: the thread was runnable, its
        // run delay still; at 14 ms it had grown by 11 ms (the kernel adds a wait when it ends).
        // The 14 ms look was read before the next began (16 ms): at most 6 ms of the 11 lie
        // after the first look, so 5 ms at least were waited in one stretch up to it.
        let s = [
            sample(10, task('R', 50 * MS, 100 * MS)),
            sample(12, task('R', 50 * MS, 100 * MS)),
            sample(14, task('R', 50 * MS + 20_000, 111 * MS)),
            sample(16, task('S', 50 * MS + 30_000, 111 * MS)),
        ];
        let t = thread(&s, 2, 15);
        assert_eq!((t.queued_at_first_ns, t.lead_queued_ns), (5 * MS, 5 * MS));
        let a = t.account(10 * MS);
        assert_eq!(
            a.span_ns,
            10 * MS,
            "5 ms from the first look to the end, and the 5 ms before it"
        );
        assert!(a.run_queue_ns >= 5 * MS, "{a:?}");
        // Never before the window's start: from 8 ms, 2 ms of it.
        assert_eq!(thread(&s, 8, 15).lead_queued_ns, 2 * MS);
    }

    #[test]
    fn run_delay_that_fits_between_the_samples_proves_nothing_before_them() {
        // 3 ms gained between looks 4 ms apart: it may all lie between them.
        let s = [
            sample(10, task('R', 50 * MS, 100 * MS)),
            sample(12, task('R', 50 * MS, 103 * MS)),
            sample(14, task('R', 51 * MS, 103 * MS)),
        ];
        assert_eq!(thread(&s, 2, 15).lead_queued_ns, 0);
        // The last look of all has no later sample to bound when it was read: not used.
        let s =
            [sample(10, task('R', 50 * MS, 100 * MS)), sample(12, task('S', 50 * MS, 130 * MS))];
        assert_eq!(thread(&s, 2, 15).queued_at_first_ns, 0);
    }

    #[test]
    fn a_look_after_the_stall_bounds_the_wait_before_the_first() {
        // One look in the stall (8 ms after it began, the thread runnable), then two after it
        // ended at 11 ms: the first of those shows 14.7 ms more run delay, 3.6 ms later, read
        // before 4.1 ms had passed: 10.6 ms of waiting up to the first look, 8 ms of it in the
        // stall. The counters inside the stall moved not at all.
        let after = task('S', 36 * MS, 245 * MS + 700_000);
        let s = [
            sample(8, task('R', 36 * MS, 231 * MS)),
            Sample { t: 11_600_000, ..sample(0, after.clone()) },
            Sample { t: 12_100_000, ..sample(0, after) },
        ];
        let t = thread(&s, 0, 11);
        assert_eq!(t.run_delay_ns, 0);
        assert_eq!(t.queued_at_first_ns, 14_700_000 - 4_100_000);
        assert_eq!(t.lead_queued_ns, 8 * MS);
    }
}
