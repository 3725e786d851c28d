//! Who wrote, read or flushed the storage a stall waited for (the writer behind writeback and
//! reclaim, the flusher).

use super::*;

/// The system calls that start writeback and wait for it (x86_64): msync, fsync, fdatasync,
/// sync, syncfs, sync_file_range.
pub(super) const FLUSH_CALLS: [i64; 6] = [26, 74, 75, 162, 306, 277];
/// The least a thread or process must have read or written during a stall to be named for it.
pub(super) const WRITER_MIN_BYTES: u64 = 1 << 20;

/// Who wrote or flushed what the stall waited on: a thread of the JVM seen flushing (in msync,
/// fsync …: it started the writeback a store to a shared mapping then waits for), else the
/// thread or process that read or wrote the most storage during the stall (dirtying the pages
/// that were written back, or filling the page cache the kernel had to reclaim).
pub fn writer(inp: &WhoInputs, culprits: &[i32], search: Writer) -> Option<Instigator> {
    let base = |name: String| blank(InstigatorKind::Writer, name);
    let mut flushing: HashMap<i32, (usize, String, i64)> = HashMap::new();
    for s in inp.samples.iter().filter(|s| !s.baseline && s.t >= inp.start_ns && s.t <= inp.end_ns)
    {
        for t in s.threads.iter().filter(|t| !culprits.contains(&t.tid)) {
            if let Syscall::In { nr, .. } = t.syscall
                && FLUSH_CALLS.contains(&nr)
            {
                let e = flushing.entry(t.tid).or_insert((0, t.comm.clone(), nr));
                e.0 += 1;
            }
        }
    }
    if search.flusher_first
        && let Some((tid, (n, comm, nr))) =
            flushing.into_iter().max_by_key(|(tid, (n, _, _))| (*n, -*tid))
    {
        let name = inp.names.get(&tid).cloned().unwrap_or(comm);
        let call = procwatch::syscalls::name(nr).unwrap_or("a flush");
        return Some(Instigator {
            tid: Some(tid),
            did: format!(
                "thread \"{name}\" flushed ({call}, seen in {n} samples): it started the writeback the stores to the shared mapping waited for (MappedByteBuffer.force() is msync)"
            ),
            source: "the stall's samples of every thread (the system call it was in)".into(),
            fix: format!(
                "each flush by \"{name}\" makes the pages it writes back wait for the disk: flush less often or off the hot pages, or write with FileChannel.write and force() that instead"
            ),
            ..base(name)
        });
    }
    let takers = inp.lines.iter().find_map(|w| match w {
        Who::IoUse { takers, .. } => Some(takers),
        _ => None,
    })?;
    // One that did most of the storage I/O in the stall (two thirds of what every thread and
    // process listed did), and at least a megabyte of it: not one of many.
    let all: u64 = takers.iter().map(|t| t.read_bytes + t.write_bytes).sum();
    let t = takers.iter().max_by_key(|t| t.read_bytes + t.write_bytes)?;
    let bytes = t.read_bytes + t.write_bytes;
    if bytes < WRITER_MIN_BYTES || bytes * 3 < all * 2 {
        return None;
    }
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let what = match (t.write_bytes * 10 >= bytes, t.read_bytes * 10 >= bytes) {
        (true, true) => format!("wrote {} and read {}", mb(t.write_bytes), mb(t.read_bytes)),
        (true, false) => format!("wrote {} (pages dirtied)", mb(t.write_bytes)),
        _ => format!("read {}", mb(t.read_bytes)),
    };
    let why = search.why;
    let (name, who) = match t.tid {
        Some(tid) => {
            let n = inp.names.get(&tid).cloned().unwrap_or_else(|| t.comm.clone());
            (n.clone(), format!("thread \"{n}\" of the JVM"))
        }
        None => (t.comm.clone(), format!("{} (pid {})", t.comm, t.pid)),
    };
    let fix = match t.tid {
        Some(_) if search.cgroup_fix => format!(
            "\"{name}\" streams file data through the JVM's memory cgroup: write it with O_DIRECT or drop what it wrote from the page cache (posix_fadvise DONTNEED, or FileChannel and no caching library), or give the cgroup headroom for it"
        ),
        None => format!(
            "{name} (pid {}) {what} during the stall: keep its I/O off the JVM's disk and memory cgroup (another disk, io.weight or io.max for its cgroup, a memory cgroup of its own)",
            t.pid
        ),
        _ => format!(
            "\"{name}\" {what} during the stall: write less there, or off the storage and memory the JVM needs"
        ),
    };
    Some(Instigator {
        pid: Some(t.pid),
        tid: t.tid,
        command: Some(t.named.cmdline.join(" ")).filter(|c| !c.is_empty()),
        user: t.named.user.clone(),
        cgroup: Some(t.named.cgroup.clone()).filter(|c| !c.is_empty()),
        container: t.named.container.clone(),
        did: format!("{who} {what} during the stall, {why}"),
        source: "every thread's and process's storage reads and writes (/proc/*/io) from the stall's first look to its end".into(),
        fix,
        ..base(name)
    })
}
