//! What the machine, the target's cgroups and the recorder itself did during one stall, from
//! the recorder's system samples: rates and deltas of TLB shootdowns, steal, CPU pressure and
//! throttling; swap, reclaim and memory-cgroup limits; and the recorder's own wait for a CPU.
//!
//! Invariant: pure arithmetic over two samples (the first and last taken during the stall, or
//! the baseline before it); a counter either sample lacks gives `None`, never zero.

use recording::{Meta, SystemSample};

/// PSI totals move in coarse steps: a window shorter than this says nothing.
const PSI_MIN_WINDOW_NS: u64 = 20_000_000;
/// Rates need at least this much time between two readings.
const RATE_MIN_WINDOW_NS: u64 = 1_000_000;

/// Machine-wide and per-cgroup signals around one stall.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SystemSignals {
    /// TLB shootdowns per second during the stall and just before it.
    pub tlb_rate_during: Option<f64>,
    pub tlb_rate_before: Option<f64>,
    /// CPU time the hypervisor stole, per CPU.
    pub steal_ns: Option<u64>,
    /// Time the target's CPU cgroup was throttled.
    pub throttled_ns: Option<u64>,
    /// PSI `cpu some`: the share of the time some task waited for a CPU.
    pub psi_cpu_during: Option<f64>,
    pub psi_cpu_before: Option<f64>,
    pub memory: MemorySignals,
    pub recorder: RecorderSignals,
}

/// What memory management did during the stall.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemorySignals {
    /// Pages swapped in and out, machine-wide.
    pub pswpin: Option<u64>,
    pub pswpout: Option<u64>,
    /// How much of the target's memory came back from swap (its `VmSwap` fell), KiB.
    pub swapped_in_kb: Option<u64>,
    /// The target's swapped-out memory at the start, KiB.
    pub swap_kb_before: Option<u64>,
    /// Direct reclaim entries, pages scanned by it, and compaction stalls, machine-wide.
    pub allocstall: Option<u64>,
    pub pgscan_direct: Option<u64>,
    pub compact_stall: Option<u64>,
    /// Refaults of file pages (machine-wide): pages reclaimed and read back.
    pub refault_file: Option<u64>,
    /// The target's memory cgroup: times it hit its limit or went over `memory.high`, pages its
    /// reclaim scanned, anonymous refaults (swap-ins), major faults.
    pub memcg_limit_hits: Option<u64>,
    pub memcg_high_events: Option<u64>,
    pub memcg_pgscan: Option<u64>,
    pub memcg_refault_anon: Option<u64>,
    pub memcg_pgmajfault: Option<u64>,
    /// The cgroup's use against its limit at the end (bytes), when it has one.
    pub memcg_usage: Option<u64>,
    pub memcg_limit: Option<u64>,
    /// Share of the stall every task of the target's cgroup (or, without one, of the machine)
    /// waited for memory (PSI `memory full`), and some task did (`some`).
    pub psi_full: Option<f64>,
    pub psi_some: Option<f64>,
    /// Share of the stall some task waited for I/O (PSI `io some`).
    pub psi_io_some: Option<f64>,
    /// The most pages under writeback machine-wide at any look during the stall (a gauge).
    pub writeback_pages: Option<u64>,
}

impl MemorySignals {
    /// Whether pages of the target came back from swap during the stall.
    pub fn swapped_in(&self) -> bool {
        self.swapped_in_kb.is_some_and(|k| k >= 64)
            || self.memcg_refault_anon.is_some_and(|n| n >= 16)
            || self.pswpin.is_some_and(|n| n >= 16) && self.swap_kb_before.is_some_and(|k| k > 0)
    }

    /// Whether memory was being reclaimed for the target (its cgroup at its limits, or direct
    /// reclaim machine-wide).
    pub fn reclaiming(&self) -> bool {
        // Pages go out to swap only when reclaim pushes them.
        self.pswpout.is_some_and(|n| n >= 16)
            || self.memcg_limit_hits.is_some_and(|n| n > 0)
            || self.memcg_high_events.is_some_and(|n| n > 0)
            || self.memcg_pgscan.is_some_and(|n| n > 0)
            || self.allocstall.is_some_and(|n| n > 0)
            || self.pgscan_direct.is_some_and(|n| n > 0)
            || self.compact_stall.is_some_and(|n| n > 0)
    }
}

/// The recorder's own position during the stall: did it wait for a CPU, was its cgroup
/// throttled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecorderSignals {
    /// The watch thread's time on a run queue during the stall.
    pub run_delay_ns: Option<u64>,
    /// Throttling of the recorder's own CPU cgroup during the stall.
    pub throttled_ns: Option<u64>,
}

fn delta<T>(
    a: Option<&SystemSample>,
    b: Option<&SystemSample>,
    get: impl Fn(&SystemSample) -> Option<T>,
    sub: impl Fn(T, T) -> u64,
) -> Option<u64> {
    Some(sub(get(a?)?, get(b?)?))
}

/// The system samples of one stall (its baseline and those taken during it) as signals.
pub fn system_signals(meta: &Meta, sys: &[&SystemSample]) -> SystemSignals {
    let base = sys.iter().find(|s| s.baseline).copied();
    let during: Vec<&SystemSample> = sys.iter().filter(|s| !s.baseline).copied().collect();
    let (first, last) = (during.first().copied(), during.last().copied());
    // Counters that move when a stall begins (the first sample is taken after it began) are
    // read from the baseline before it when there is one.
    let from = base.or(first);
    let tlb_sum = |s: &SystemSample| s.tlb.as_ref().map(|v| v.iter().sum::<u64>());
    let rate = |a: &SystemSample, b: &SystemSample| -> Option<f64> {
        let dt = b.t.checked_sub(a.t).filter(|d| *d >= RATE_MIN_WINDOW_NS)? as f64 / 1e9;
        Some(tlb_sum(b)?.saturating_sub(tlb_sum(a)?) as f64 / dt)
    };
    let psi_share = |a: &SystemSample,
                     b: &SystemSample,
                     get: &dyn Fn(&SystemSample) -> Option<u64>|
     -> Option<f64> {
        let dt = b.t.checked_sub(a.t).filter(|d| *d >= PSI_MIN_WINDOW_NS)?;
        Some(((get(b)?.saturating_sub(get(a)?) * 1000) as f64 / dt as f64).min(1.0))
    };
    let tick_ns = 1_000_000_000 / meta.clock_ticks.max(1);
    let sub = |a: u64, b: u64| b.saturating_sub(a);
    let vm =
        |f: fn(&recording::disk::VmStat) -> u64| move |s: &SystemSample| s.vmstat.as_ref().map(f);
    let mc =
        |f: fn(&recording::disk::Memory) -> u64| move |s: &SystemSample| s.memcg.as_ref().map(f);
    // Memory pressure of the target's own cgroup when it has one, else of the machine.
    let own_psi = last.is_some_and(|l| l.cgroup_pressure.is_some());
    let mem_full = move |s: &SystemSample| {
        if own_psi {
            s.cgroup_pressure.and_then(|p| p.memory_full_us)
        } else {
            s.psi_memory_full_us
        }
    };
    let mem_some = move |s: &SystemSample| {
        if own_psi { s.cgroup_pressure.and_then(|p| p.memory_some_us) } else { s.psi_memory_us }
    };
    let io_some = move |s: &SystemSample| {
        if own_psi { s.cgroup_pressure.and_then(|p| p.io_some_us) } else { s.psi_io_us }
    };
    let psi_over = |get: &dyn Fn(&SystemSample) -> Option<u64>| {
        from.zip(last).and_then(|(a, b)| psi_share(a, b, get))
    };
    let memory = MemorySignals {
        pswpin: delta(from, last, vm(|v| v.pswpin), sub),
        pswpout: delta(from, last, vm(|v| v.pswpout), sub),
        swapped_in_kb: delta(
            from,
            last,
            |s| s.process.map(|p| p.swap_kb),
            |a, b| a.saturating_sub(b),
        ),
        swap_kb_before: from.and_then(|s| s.process.map(|p| p.swap_kb)),
        allocstall: delta(from, last, vm(|v| v.allocstall), sub),
        pgscan_direct: delta(from, last, vm(|v| v.pgscan_direct), sub),
        compact_stall: delta(from, last, vm(|v| v.compact_stall), sub),
        refault_file: delta(from, last, vm(|v| v.refault_file), sub),
        memcg_limit_hits: delta(from, last, mc(|m| m.limit_hits), sub),
        memcg_high_events: delta(from, last, mc(|m| m.high_events), sub),
        memcg_pgscan: delta(from, last, mc(|m| m.pgscan), sub),
        memcg_refault_anon: delta(from, last, mc(|m| m.refault_anon), sub),
        memcg_pgmajfault: delta(from, last, mc(|m| m.pgmajfault), sub),
        memcg_usage: last.and_then(|s| s.memcg.map(|m| m.usage)),
        memcg_limit: last.and_then(|s| s.memcg.and_then(|m| m.limit.or(m.high))),
        psi_full: psi_over(&mem_full),
        psi_some: psi_over(&mem_some),
        psi_io_some: psi_over(&io_some),
        writeback_pages: during
            .iter()
            .filter_map(|s| s.vmstat.as_ref().map(|v| v.nr_writeback))
            .max(),
    };
    // Throttling (of the JVM's cgroup, or the recorder's own) mostly happens before the first
    // look: a throttled recorder cannot look. Counted from the baseline, like memory.
    let recorder = RecorderSignals {
        run_delay_ns: delta(first, last, |s| s.recorder.map(|r| r.run_delay_ns), sub),
        throttled_ns: delta(from, last, |s| s.recorder.and_then(|r| r.throttled_ns), sub),
    };
    SystemSignals {
        tlb_rate_during: first.zip(last).and_then(|(a, b)| rate(a, b)),
        tlb_rate_before: base.zip(first).and_then(|(a, b)| rate(a, b)),
        steal_ns: first.zip(last).and_then(|(a, b)| {
            Some(b.cpu?.steal.saturating_sub(a.cpu?.steal) * tick_ns / meta.cpus.max(1) as u64)
        }),
        throttled_ns: from.zip(last).and_then(|(a, b)| {
            Some(b.throttling?.throttled_ns.saturating_sub(a.throttling?.throttled_ns))
        }),
        psi_cpu_during: first
            .zip(last)
            .and_then(|(a, b)| psi_share(a, b, &|s: &SystemSample| s.psi_cpu_us)),
        psi_cpu_before: base
            .zip(first)
            .and_then(|(a, b)| psi_share(a, b, &|s: &SystemSample| s.psi_cpu_us)),
        memory,
        recorder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recording::disk::ProcessMemory;
    use recording::disk::{CpuTimes, VmStat};

    const MS: u64 = 1_000_000;

    fn meta() -> Meta {
        Meta { cpus: 2, clock_ticks: 100, ..Meta::default() }
    }

    fn sys(t_ms: u64, baseline: bool, tlb: u64, steal: u64, psi_us: u64) -> SystemSample {
        SystemSample {
            t: t_ms * MS,
            stall: 1,
            baseline,
            tlb: Some(vec![tlb, 0]),
            cpu: Some(CpuTimes { steal, ..CpuTimes::default() }),
            psi_cpu_us: Some(psi_us),
            ..SystemSample::default()
        }
    }

    #[test]
    fn system_signals_are_rates_over_the_stall_and_before_it() {
        let (a, b, c) = (
            sys(1000, true, 100, 0, 0),
            sys(2000, false, 200, 0, 100_000),
            sys(2100, false, 1200, 10, 180_000),
        );
        let s = system_signals(&meta(), &[&a, &b, &c]);
        assert_eq!(s.tlb_rate_before, Some(100.0));
        assert_eq!(s.tlb_rate_during, Some(10_000.0), "1000 shootdowns in 100 ms");
        assert_eq!(s.steal_ns, Some(50 * MS), "10 ticks of 10 ms over 2 CPUs");
        assert_eq!(s.psi_cpu_during, Some(0.8));
        assert_eq!(s.throttled_ns, None, "no cgroup counters, no throttling claim");
        assert!(!s.memory.swapped_in() && !s.memory.reclaiming(), "no counters, no claims");
    }

    #[test]
    fn swap_ins_are_seen_in_the_targets_own_swap_falling() {
        // As measured here: a full GC paging a swapped heap back in.
        let mut a = sys(1000, true, 0, 0, 0);
        a.vmstat = Some(VmStat { pswpin: 149_071, ..VmStat::default() });
        a.process = Some(ProcessMemory { rss_kb: 168_440, swap_kb: 475_416 });
        let mut b = sys(3600, false, 0, 0, 0);
        b.vmstat = Some(VmStat { pswpin: 297_583, ..VmStat::default() });
        b.process = Some(ProcessMemory { rss_kb: 530_000, swap_kb: 109_772 });
        let s = system_signals(&meta(), &[&a, &b]);
        assert_eq!((s.memory.pswpin, s.memory.swapped_in_kb), (Some(148_512), Some(365_644)));
        assert!(s.memory.swapped_in());
        assert!(!s.memory.reclaiming());
    }
}
