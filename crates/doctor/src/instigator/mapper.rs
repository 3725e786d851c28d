//! The thread that mapped, unmapped or protected memory while the others waited for `mmap_lock`
//! or its TLB shootdowns.

use super::*;

/// The system calls that map, unmap or change the protection of memory (x86_64): mmap,
/// mprotect, munmap, brk, mremap, madvise, mlock, munlock, mlockall, munlockall.
pub(super) const MEMORY_CALLS: [i64; 10] = [9, 10, 11, 12, 25, 28, 149, 150, 151, 152];

/// Samples (or traced write locks) that make a thread the one mapping memory.
pub(super) const MAPPER_MIN: usize = 2;

/// A wait for mmap_lock at least this long, traced, is one another thread held it through.
pub(super) const LOCK_WAIT_MIN_NS: u64 = 1_000_000;

/// Who held mmap_lock while others waited for it, from the mmap_lock tracepoints: for each wait
/// of at least [`LOCK_WAIT_MIN_NS`] overlapping the stall, the thread that last took the lock
/// (to read or to write) before the wait began; by the waiting time it explains.
pub(super) fn lock_holders(inp: &WhoInputs) -> HashMap<i32, u64> {
    use recording::disk::TraceEvent::{MmapLockAcquired, MmapLockStart};
    let mut ev: Vec<&recording::disk::TraceEvent> = inp
        .trace
        .iter()
        .filter(|e| matches!(e, MmapLockStart { .. } | MmapLockAcquired { .. }))
        .collect();
    ev.sort_by_key(|e| e.t());
    let mut held: HashMap<i32, u64> = HashMap::new();
    for (i, e) in ev.iter().enumerate() {
        let MmapLockStart { t: began, tid: waiter, .. } = **e else { continue };
        let got = ev[i..].iter().find_map(|x| match x {
            MmapLockAcquired { t, tid, .. } if *tid == waiter => Some(*t),
            _ => None,
        });
        let until = got.unwrap_or(inp.end_ns);
        let waited = until.min(inp.end_ns).saturating_sub(began.max(inp.start_ns));
        if until.saturating_sub(began) < LOCK_WAIT_MIN_NS || waited == 0 {
            continue;
        }
        let holder = ev[..i].iter().rev().find_map(|x| match x {
            MmapLockAcquired { tid, success: true, .. } if *tid != waiter => Some(*tid),
            _ => None,
        });
        if let Some(h) = holder {
            *held.entry(h).or_default() += waited;
        }
    }
    held
}

/// The thread of the JVM that mapped, unmapped or protected memory during the stall: the one
/// that held mmap_lock while others waited (traced), or one seen inside those system calls and
/// not waiting for the lock itself.
pub fn memory_mapper(inp: &WhoInputs, culprits: &[i32], cause: Cause) -> Option<Instigator> {
    let mut seen: HashMap<i32, (usize, String)> = HashMap::new();
    let mut comms: HashMap<i32, String> = HashMap::new();
    for s in inp.samples.iter().filter(|s| !s.baseline && s.t >= inp.start_ns && s.t <= inp.end_ns)
    {
        for t in &s.threads {
            comms.entry(t.tid).or_insert_with(|| t.comm.clone());
            let in_call = matches!(t.syscall, Syscall::In { nr, .. } if MEMORY_CALLS.contains(&nr));
            // A thread waiting for the lock is a victim, not the one mapping.
            let waiting =
                crate::wait::seen(t) == crate::wait::Seen::Waiting(crate::wait::Wait::MmapLock);
            if in_call && !waiting {
                seen.entry(t.tid).or_insert((0, t.comm.clone())).0 += 1;
            }
        }
    }
    let held = lock_holders(inp);
    let (tid, hits, held_ns) = seen
        .keys()
        .chain(held.keys())
        .filter(|t| !culprits.contains(t))
        .map(|t| (*t, seen.get(t).map_or(0, |x| x.0), held.get(t).copied().unwrap_or(0)))
        .max_by_key(|(t, n, h)| (*h, *n, -*t))?;
    if held_ns == 0 && hits < MAPPER_MIN {
        return None;
    }
    let comm = comms.get(&tid).cloned().unwrap_or_default();
    let name = inp.names.get(&tid).cloned().filter(|n| !n.is_empty()).unwrap_or(comm);
    let name = if name.is_empty() { format!("tid {tid}") } else { name };
    let what = if cause == Cause::TlbShootdown {
        "its unmaps and protection changes make the TLB shootdowns every other thread pays for"
    } else {
        "the others waited for mmap_lock behind it"
    };
    let did = if held_ns > 0 {
        format!(
            "thread \"{name}\" held mmap_lock, mapping or unmapping memory, while other threads waited {} for it (mmap_lock tracepoints{})",
            fmt_ns(held_ns),
            if hits > 0 {
                format!("; seen in mmap, munmap or mprotect in {hits} samples")
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "thread \"{name}\" mapped, unmapped or protected memory through the stall (seen in mmap, munmap or mprotect in {hits} samples): {what}"
        )
    };
    Some(Instigator {
        did,
        tid: Some(tid),
        source: if held_ns > 0 {
            "the mmap_lock tracepoints (who took the lock last before each wait began) and the stall's samples".into()
        } else {
            "the stall's samples of every thread (the system call it was in)".into()
        },
        fix: format!(
            "stop \"{name}\" from mapping, unmapping and mprotecting memory beside latency-critical threads: reuse its mappings and buffers (a pool, pread into a buffer), keep files mapped once, fix the heap size (-Xms = -Xmx)"
        ),
        ..blank(InstigatorKind::MemoryMapper, name.clone())
    })
}
