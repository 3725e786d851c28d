//! What the machine and the process's memory say around a stall, beside the threads: swap and
//! reclaim counters, CPU pressure, TLB shootdowns, mapped files not in the page cache, and the
//! tracepoints' page faults and mmap_lock waits.
//!
//! Invariant: lookups over [`Inputs`] only; a counter that was not read says nothing (never
//! zero).

use super::inputs::Inputs;
use super::words::{fmt_bytes, plural};

/// Data files less resident than this are "cold": where a major fault reads from.
const COLD_RESIDENCY: f64 = 0.9;
/// PSI `cpu some` at which the machine's CPUs count as saturated.
const PSI_SATURATED: f64 = 0.5;
/// TLB shootdowns per second that count as a storm, and how much above the rate before.
const TLB_STORM_RATE: f64 = 5_000.0;
const TLB_STORM_FACTOR: f64 = 3.0;

/// Data files mapped and (mostly) not in the page cache: where a major fault reads from.
pub(super) fn cold_files(inp: &Inputs) -> Vec<String> {
    inp.mapped_files
        .iter()
        .filter(|(p, _, _)| {
            !["/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/"]
                .iter()
                .any(|sys| p.starts_with(sys))
        })
        .filter(|(_, resident, total)| {
            *total > 0 && (*resident as f64) < COLD_RESIDENCY * *total as f64
        })
        .map(|(p, r, t)| format!("{p} ({:.0}% in page cache)", *r as f64 * 100.0 / *t as f64))
        .collect()
}

/// What the tracepoints say about a thread's last page fault before `until`: (address, ip).
pub(super) fn traced_fault(tid: i32, until: u64, inp: &Inputs) -> Option<(u64, u64)> {
    use procwatch::trace::TraceEvent;
    inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, address, ip } if *t == tid && *at <= until => {
            Some((*address, *ip))
        }
        _ => None,
    })
}

/// The longest mmap_lock wait of a thread, from the tracepoints.
pub(super) fn traced_lock_wait(tid: i32, inp: &Inputs) -> Option<u64> {
    use procwatch::trace::TraceEvent;
    let mut longest = None;
    let mut started = None;
    for e in inp.trace {
        match e {
            TraceEvent::MmapLockStart { tid: t, t: at, .. } if *t == tid => started = Some(*at),
            TraceEvent::MmapLockAcquired { tid: t, t: at, .. } if *t == tid => {
                if let Some(s) = started.take() {
                    longest = Some(longest.unwrap_or(0).max(at - s));
                }
            }
            _ => {}
        }
    }
    // A wait still open at the end of the stall lasted at least until then.
    if let Some(s) = started {
        longest = Some(longest.unwrap_or(0).max(inp.end_ns.saturating_sub(s)));
    }
    longest
}

/// The JDK's and the system's own files (code, the class archive, libraries), not the
/// application's data.
pub(super) fn system_file(path: &str) -> bool {
    ["/usr/", "/lib", "/opt/java", "/etc/"].iter().any(|p| path.starts_with(p))
        || path.ends_with(".so")
        || path.contains(".so.")
        || path.ends_with(".jsa")
        || path.ends_with("/modules")
}

/// The counters that show the target's memory coming back from swap.
pub(super) fn swap_lines(inp: &Inputs) -> Vec<String> {
    let mem = &inp.signals.memory;
    let mut v = Vec::new();
    if let Some(k) = mem.swapped_in_kb.filter(|k| *k > 0) {
        v.push(format!(
            "{} of the JVM's memory came back from swap during the stall",
            fmt_bytes(k * 1024)
        ));
    }
    if let Some(n) = mem.pswpin.filter(|n| *n > 0) {
        v.push(format!("{} swapped in machine-wide", plural(n, "page")));
    }
    v
}

/// The counters that show memory being reclaimed for the target.
pub(super) fn reclaim_lines(inp: &Inputs) -> Vec<String> {
    let m = &inp.signals.memory;
    let mut v = Vec::new();
    if let Some(n) = m.pswpout.filter(|n| *n >= 16) {
        v.push(format!("{} pushed out to swap machine-wide", plural(n, "page")));
    }
    if let Some(n) = m.memcg_limit_hits.filter(|n| *n > 0) {
        let at = match (m.memcg_usage, m.memcg_limit) {
            (Some(u), Some(l)) => format!(" (using {} of {})", fmt_bytes(u), fmt_bytes(l)),
            _ => String::new(),
        };
        v.push(format!(
            "its memory cgroup hit its limit {} during the stall{at}",
            plural(n, "time")
        ));
    }
    if let Some(n) = m.memcg_pgscan.filter(|n| *n > 0) {
        v.push(format!("reclaim scanned {} in its memory cgroup", plural(n, "page")));
    }
    if let Some(n) = m.allocstall.filter(|n| *n > 0) {
        v.push(format!("{} machine-wide", plural(n, "direct reclaim")));
    }
    if let Some(n) = m.compact_stall.filter(|n| *n > 0) {
        v.push(format!("{} machine-wide", plural(n, "compaction stall")));
    }
    if let Some(p) = m.psi_full.filter(|p| *p > 0.05) {
        v.push(format!(
            "all of its tasks waited for memory during {:.0}% of the stall (PSI memory full)",
            p * 100.0
        ));
    }
    v
}

/// Whether the machine's CPUs were saturated around the stall, and the evidence line saying so.
pub(super) fn cpu_pressure(inp: &Inputs) -> (bool, Option<String>) {
    let s = inp.signals;
    let psi = s.psi_cpu_during.or(s.psi_cpu_before);
    let line = match (s.psi_cpu_during, s.psi_cpu_before) {
        (Some(p), _) => Some(format!(
            "some task waited for a CPU during {:.0}% of the stall (PSI cpu)",
            p.min(1.0) * 100.0
        )),
        (None, Some(p)) => Some(format!(
            "some task waited for a CPU during {:.0}% of the time just before the stall (PSI cpu)",
            p.min(1.0) * 100.0
        )),
        _ => None,
    };
    (psi.is_some_and(|p| p >= PSI_SATURATED), line)
}

/// A storm of TLB shootdowns during the stall, well above the rate before it: its evidence.
pub(super) fn tlb_storm(inp: &Inputs) -> Option<Vec<String>> {
    let s = inp.signals;
    let during = s.tlb_rate_during?;
    let storm = during >= TLB_STORM_RATE
        && s.tlb_rate_before.is_none_or(|b| during >= TLB_STORM_FACTOR * b);
    if !storm {
        return None;
    }
    let mut evid = vec![format!("{:.0} TLB shootdowns per second during the stall", during)];
    if let Some(b) = s.tlb_rate_before {
        evid.push(format!("{:.0} per second just before", b));
    }
    Some(evid)
}
