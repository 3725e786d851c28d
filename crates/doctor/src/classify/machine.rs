//! What the machine and the process's memory say around a stall, beside the threads: swap and
//! reclaim counters, CPU pressure, TLB shootdowns, mapped files not in the page cache, and the
//! tracepoints' page faults and mmap_lock waits.
//!
//! Invariant: lookups over [`Inputs`] only; a counter that was not read says nothing (never
//! zero).

use super::evidence_kind::{Evidence, Swap};
use super::inputs::Inputs;

/// Data files less resident than this are "cold": where a major fault reads from.
const COLD_RESIDENCY: f64 = 0.9;
/// PSI `cpu some` at which the machine's CPUs count as saturated.
const PSI_SATURATED: f64 = 0.5;
/// TLB shootdowns per second that count as a storm, and how much above the rate before.
const TLB_STORM_RATE: f64 = 5_000.0;
const TLB_STORM_FACTOR: f64 = 3.0;

/// Data files mapped and (mostly) not in the page cache: where a major fault reads from. Not
/// the JVM's own code, wherever the JDK lives: its launcher and libraries (any file the target
/// maps executable), its class archive and modules. A JDK outside /usr is seldom all in the page
/// cache, and its code is not where a page wait of the application's threads is.
pub(super) fn cold_files(inp: &Inputs) -> Vec<String> {
    let code = |p: &str| {
        system_file(p)
            || inp.maps.iter().any(|m| m.path == p && m.perms.as_bytes().get(2) == Some(&b'x'))
    };
    inp.mapped_files
        .iter()
        .filter(|(p, _, _)| {
            !["/proc/", "/sys/", "/dev/"].iter().any(|sys| p.starts_with(sys)) && !code(p)
        })
        .filter(|(_, resident, total)| {
            *total > 0 && (*resident as f64) < COLD_RESIDENCY * *total as f64
        })
        .map(|(p, r, t)| format!("{p} ({:.0}% in page cache)", *r as f64 * 100.0 / *t as f64))
        .collect()
}

/// The target's file mappings that are shared and writable (`rw-s`): where a write fault can
/// wait for a page's writeback. One path per file, in address order.
pub(super) fn shared_writable_files(inp: &Inputs) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Files under /dev (/dev/shm: tmpfs, shared memory) are never written back to a disk.
    // Nor are files the recorder found on tmpfs or ramfs (a /tmp on tmpfs holds hsperfdata).
    let writable = |m: &&recording::disk::Mapping| {
        m.is_shared_writable_file()
            && !m.path.starts_with("/dev/")
            && !inp.in_memory_files.contains(&m.path)
    };
    for m in inp.maps.iter().filter(writable) {
        if !out.contains(&m.path) {
            out.push(m.path.clone());
        }
    }
    out
}

/// The JVM's perf-counter file, `/tmp/hsperfdata_<user>/<pid>`.
pub(super) fn perf_data_file(path: &str) -> bool {
    path.contains("/hsperfdata_")
}

/// How long before a thread's first blocked sample its traced writeback wait may have begun
/// and still be that wait (the wait began before the stall was noticed).
const WAIT_BEGAN_BEFORE_NS: u64 = 1_000_000_000;

/// The file a thread's traced writeback wait was on, when it began within the thread's blocked
/// time and on a file the JVM maps shared and writable (the tracepoint names the inode; the
/// maps, the file). The tracepoint also fires in fsync and reclaim: those waits, on files not
/// mapped so, or long before, name nothing.
pub(super) fn traced_writeback(
    t: &crate::evidence::ThreadEvidence,
    inp: &Inputs,
) -> Option<String> {
    use recording::disk::TraceEvent;
    let since = t.first_blocked_t.unwrap_or(inp.start_ns).saturating_sub(WAIT_BEGAN_BEFORE_NS);
    inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::WritebackWait { tid, t: at, ino, .. } if *tid == t.tid && *at >= since => inp
            .maps
            .iter()
            .find(|m| m.inode == *ino && m.is_shared_writable_file())
            .map(|m| m.path.clone()),
        _ => None,
    })
}

/// What the tracepoints say about a thread's last page fault before `until`: (address, ip).
pub(super) fn traced_fault(tid: i32, until: u64, inp: &Inputs) -> Option<(u64, u64)> {
    use recording::disk::TraceEvent;
    inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, address, ip, .. } if *t == tid && *at <= until => {
            Some((*address, *ip))
        }
        _ => None,
    })
}

/// Whether the fault [`traced_fault`] finds was a read, by its error code (x86: bit 1 clear);
/// None where the tracepoint gave no code (recordings before 2026-11-29).
pub(super) fn traced_fault_read(tid: i32, until: u64, inp: &Inputs) -> Option<bool> {
    use recording::disk::TraceEvent;
    inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, error_code, .. } if *t == tid && *at <= until => {
            Some(error_code.map(|c| c & 2 == 0))
        }
        _ => None,
    })?
}

/// A thread's mmap_lock waits from the tracepoints, in order: each one's start, and its end if
/// the trace holds it.
fn traced_lock_waits(tid: i32, inp: &Inputs) -> Vec<(u64, Option<u64>)> {
    use recording::disk::TraceEvent;
    let mut waits = Vec::new();
    let mut started = None;
    for e in inp.trace {
        match e {
            TraceEvent::MmapLockStart { tid: t, t: at, .. } if *t == tid => started = Some(*at),
            TraceEvent::MmapLockAcquired { tid: t, t: at, .. } if *t == tid => {
                if let Some(s) = started.take() {
                    waits.push((s, Some(*at)));
                }
            }
            _ => {}
        }
    }
    waits.extend(started.map(|s| (s, None)));
    waits
}

/// The longest mmap_lock wait of a thread, from the tracepoints. A wait still open at the end
/// of the stall lasted at least until then.
pub(super) fn traced_lock_wait(tid: i32, inp: &Inputs) -> Option<u64> {
    traced_lock_waits(tid, inp)
        .into_iter()
        .map(|(s, e)| e.unwrap_or(inp.end_ns).saturating_sub(s))
        .max()
}

/// How much of the stall a thread spent waiting for mmap_lock, from the tracepoints: each wait
/// counted only where it overlaps the stall, and a wait with no end seen only if it began
/// inside the stall (the trace starts before the stall, and a full ring buffer loses events
/// per CPU, so an old start can have lost its end).
pub(super) fn traced_lock_wait_in_stall(tid: i32, inp: &Inputs) -> u64 {
    let (from, to) = (inp.start_ns, inp.end_ns);
    traced_lock_waits(tid, inp)
        .into_iter()
        .filter(|(s, e)| e.is_some() || *s >= from)
        .map(|(s, e)| e.unwrap_or(to).min(to).saturating_sub(s.max(from)))
        .sum()
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
pub(super) fn swap(inp: &Inputs) -> Swap {
    let mem = &inp.signals.memory;
    Swap {
        bytes: mem.swapped_in_kb.filter(|k| *k > 0).map(|k| k * 1024),
        pages: mem.pswpin.filter(|n| *n > 0),
    }
}

/// The counters that show memory being reclaimed for the target.
pub(super) fn reclaim_lines(inp: &Inputs) -> Vec<Evidence> {
    let m = &inp.signals.memory;
    let mut v = Vec::new();
    if let Some(pages) = m.pswpout.filter(|n| *n >= 16) {
        v.push(Evidence::PagesSwappedOut { pages });
    }
    if let Some(times) = m.memcg_limit_hits.filter(|n| *n > 0) {
        v.push(Evidence::CgroupLimitHit { times, using: m.memcg_usage.zip(m.memcg_limit) });
    }
    if let Some(pages) = m.memcg_pgscan.filter(|n| *n > 0) {
        v.push(Evidence::CgroupReclaimScanned { pages });
    }
    if let Some(count) = m.allocstall.filter(|n| *n > 0) {
        v.push(Evidence::DirectReclaims { count });
    }
    if let Some(count) = m.compact_stall.filter(|n| *n > 0) {
        v.push(Evidence::CompactionStalls { count });
    }
    if let Some(share) = m.psi_full.filter(|p| *p > 0.05) {
        v.push(Evidence::PsiMemoryFull { share });
    }
    v
}

/// Whether the machine's CPUs were saturated around the stall, and the evidence line saying so.
pub(super) fn cpu_pressure(inp: &Inputs) -> (bool, Option<Evidence>) {
    let s = inp.signals;
    let psi = s.psi_cpu_during.or(s.psi_cpu_before);
    let line = match (s.psi_cpu_during, s.psi_cpu_before) {
        (Some(share), _) => Some(Evidence::PsiCpuDuring { share }),
        (None, Some(share)) => Some(Evidence::PsiCpuBefore { share }),
        _ => None,
    };
    (psi.is_some_and(|p| p >= PSI_SATURATED), line)
}

/// A storm of TLB shootdowns during the stall, well above the rate before it: its evidence.
pub(super) fn tlb_storm(inp: &Inputs) -> Option<Vec<Evidence>> {
    let s = inp.signals;
    let during = s.tlb_rate_during?;
    let storm = during >= TLB_STORM_RATE
        && s.tlb_rate_before.is_none_or(|b| during >= TLB_STORM_FACTOR * b);
    if !storm {
        return None;
    }
    let mut evid = vec![Evidence::TlbRate { per_s: during }];
    if let Some(per_s) = s.tlb_rate_before {
        evid.push(Evidence::TlbRateBefore { per_s });
    }
    Some(evid)
}
