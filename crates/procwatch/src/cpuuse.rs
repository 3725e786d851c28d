//! What every process on the machine has run, read twice to say who took the CPUs between the
//! two reads (`top` in two looks): each process's user and system time from `/proc/PID/stat`,
//! and that of its children that ended (`cutime`, `cstime`), so that a build's short-lived
//! compiler processes are counted at the `make` or `cargo` that ran them.
//!
//! Invariant: one read of `stat` per process, no per-thread reads (a machine's thousands of
//! threads would make a look cost milliseconds per stall); the resolution is the clock tick
//! (`CLK_TCK`, 10 ms), said where it is used.

/// One process's CPU use so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcCpu {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    /// Its start in clock ticks since boot: with the pid, it names this process.
    pub starttime: u64,
    /// User and system time, in clock ticks.
    pub ticks: u64,
    /// User and system time of its children that it waited for, in clock ticks.
    pub child_ticks: u64,
    /// Bytes it read from and sent to storage so far (`/proc/PID/io` `read_bytes`,
    /// `write_bytes`: pages dirtied count as written when dirtied, through a mapping too),
    /// when this user may read that file (its own processes; root: all).
    pub io: Option<(u64, u64)>,
}

/// `read_bytes` and `write_bytes` of a `/proc/PID/io` (or a thread's) text.
pub fn parse_io(text: &str) -> Option<(u64, u64)> {
    let field = |k: &str| {
        text.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(':')?.trim().parse::<u64>().ok())
    };
    Some((field("read_bytes")?, field("write_bytes")?))
}

/// The storage reads and writes of each thread of `pid` so far: `(tid, comm, read, written)`.
pub fn thread_io(pid: i32) -> Vec<(i32, String, u64, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return vec![] };
    dir.flatten()
        .filter_map(|e| {
            let tid: i32 = e.file_name().to_str()?.parse().ok()?;
            let (r, w) = parse_io(&std::fs::read_to_string(e.path().join("io")).ok()?)?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            Some((tid, comm.trim_end().to_string(), r, w))
        })
        .collect()
}

/// The fields of one `/proc/PID/stat`.
pub fn parse(pid: i32, stat: &str) -> Option<ProcCpu> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let f: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the comm: state (3), ppid (4) … utime (14), stime (15), cutime (16), cstime (17),
    // starttime (22).
    let n = |field: usize| -> Option<u64> { f.get(field - 3)?.parse().ok() };
    Some(ProcCpu {
        pid,
        ppid: f.get(1)?.parse().ok()?,
        comm,
        starttime: n(22)?,
        ticks: n(14)? + n(15)?,
        child_ticks: n(16)? + n(17)?,
        io: None,
    })
}

/// A kernel thread (`PF_KTHREAD` in its `stat` flags, field 9): it does no I/O of its own.
fn kernel_thread(stat: &str) -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    stat.rfind(')')
        .and_then(|c| stat[c + 1..].split_whitespace().nth(6))
        .and_then(|f| f.parse::<u64>().ok())
        .is_some_and(|f| f & PF_KTHREAD != 0)
}

/// A small `/proc` file read whole into `buf` ([`crate::procfile::read_into`]).
fn read_small<'a>(path: &str, buf: &'a mut Vec<u8>) -> Option<&'a str> {
    crate::procfile::read_into(path, buf).ok()
}

/// Every process's CPU use now (kernel threads too: `kswapd` taking a CPU is news), and, with
/// `with_io`, its storage I/O where this user may read it (not for kernel threads, which have
/// none): a second file a process, as much again as the first.
pub fn snapshot(with_io: bool) -> Vec<ProcCpu> {
    let mut buf = Vec::with_capacity(4096);
    crate::jvms::pids()
        .into_iter()
        .filter_map(|pid| {
            let s = read_small(&format!("/proc/{pid}/stat"), &mut buf)?;
            let kernel = kernel_thread(s);
            let mut p = parse(pid, s)?;
            if with_io && !kernel {
                p.io = read_small(&format!("/proc/{pid}/io"), &mut buf).and_then(parse_io);
            }
            Some(p)
        })
        .collect()
}

/// What one process ran between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub pid: i32,
    pub comm: String,
    /// Its own time in the window, in clock ticks.
    pub ticks: u64,
    /// Its children's that ended in the window (their time before it taken out where the first
    /// snapshot saw them).
    pub child_ticks: u64,
    /// Bytes it read from and sent to storage in the window, where both snapshots could say.
    pub io: Option<(u64, u64)>,
}

/// Who ran between `before` and `after`, the most first; processes that ran nothing are left
/// out. A process in `after` only started in between: all its time counts. A process in
/// `before` only ended in between: its time in the window is in its parent's children's time,
/// from which its time before the window is taken out.
pub fn taken(before: &[ProcCpu], after: &[ProcCpu]) -> Vec<Taken> {
    use std::collections::HashMap;
    let key = |p: &ProcCpu| (p.pid, p.starttime);
    let old: HashMap<(i32, u64), &ProcCpu> = before.iter().map(|p| (key(p), p)).collect();
    let new: HashMap<(i32, u64), &ProcCpu> = after.iter().map(|p| (key(p), p)).collect();
    // Time before the window of processes that ended in it, by parent.
    let mut ended_before: HashMap<i32, u64> = HashMap::new();
    for p in before.iter().filter(|p| !new.contains_key(&key(p))) {
        *ended_before.entry(p.ppid).or_default() += p.ticks + p.child_ticks;
    }
    let mut out: Vec<Taken> = after
        .iter()
        .filter_map(|p| {
            let (ticks, child_ticks) = match old.get(&key(p)) {
                Some(o) => (
                    p.ticks.saturating_sub(o.ticks),
                    p.child_ticks
                        .saturating_sub(o.child_ticks)
                        .saturating_sub(ended_before.get(&p.pid).copied().unwrap_or(0)),
                ),
                None => (p.ticks, p.child_ticks),
            };
            let io = match (old.get(&key(p)).map(|o| o.io), p.io) {
                (Some(Some((r0, w0))), Some((r1, w1))) => {
                    Some((r1.saturating_sub(r0), w1.saturating_sub(w0)))
                }
                (None, io) => io,
                _ => None,
            };
            let did_io = io.is_some_and(|(r, w)| r + w > 0);
            (ticks + child_ticks > 0 || did_io).then(|| Taken {
                pid: p.pid,
                comm: p.comm.clone(),
                ticks,
                child_ticks,
                io,
            })
        })
        .collect();
    out.sort_by_key(|t| std::cmp::Reverse((t.ticks + t.child_ticks, -t.pid)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, start: u64, ticks: u64, child: u64) -> ProcCpu {
        ProcCpu {
            pid,
            ppid,
            comm: format!("p{pid}"),
            starttime: start,
            ticks,
            child_ticks: child,
            io: None,
        }
    }

    #[test]
    fn stat_fields_are_read_past_the_comm() {
        let s = "4242 (rustc (x)) R 4000 4242 4242 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 98765 0 0";
        assert_eq!(
            parse(4242, s),
            Some(ProcCpu {
                pid: 4242,
                ppid: 4000,
                comm: "rustc (x)".into(),
                starttime: 98765,
                ticks: 200,
                child_ticks: 10,
                io: None
            })
        );
        assert_eq!(parse(1, "1 (x) S 0"), None);
        assert!(kernel_thread("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 0"));
        assert!(!kernel_thread(s));
        let mut buf = Vec::new();
        let me = read_small("/proc/self/stat", &mut buf).unwrap().to_string();
        assert!(parse(1, &me).is_some(), "{me}");
    }

    #[test]
    fn what_each_process_took_counts_new_ones_whole_and_ended_ones_at_their_parent() {
        let before = vec![p(1, 0, 1, 100, 0), p(10, 1, 50, 40, 5), p(11, 10, 60, 30, 0)];
        let after = vec![
            p(1, 0, 1, 100, 0),
            // pid 11 ended: 30 ticks before the window, 20 in it, reaped by 10.
            p(10, 1, 50, 45, 5 + 50),
            p(12, 10, 70, 60, 0),
            // A pid reused by a new process is a new process.
            p(11, 1, 90, 3, 0),
        ];
        let t = taken(&before, &after);
        assert_eq!(
            t,
            vec![
                Taken { pid: 12, comm: "p12".into(), ticks: 60, child_ticks: 0, io: None },
                Taken { pid: 10, comm: "p10".into(), ticks: 5, child_ticks: 20, io: None },
                Taken { pid: 11, comm: "p11".into(), ticks: 3, child_ticks: 0, io: None },
            ]
        );
    }

    #[test]
    fn io_counts_are_read_and_a_process_that_only_wrote_is_among_those_that_took() {
        let text = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io(text), Some((4096, 8192)));
        assert_eq!(parse_io("garbage"), None);
        let mut a = p(5, 1, 9, 10, 0);
        a.io = Some((0, 100));
        let mut b = a.clone();
        b.io = Some((0, 1 << 20));
        let t = taken(&[a], &[b]);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].io, Some((0, (1 << 20) - 100)));
        assert!(
            thread_io(std::process::id() as i32).iter().any(|x| x.0 == std::process::id() as i32)
        );
    }

    #[test]
    fn this_machine_has_processes_and_we_are_among_them() {
        let me = std::process::id() as i32;
        let s = snapshot(false);
        assert!(s.iter().any(|p| p.pid == me && p.io.is_none()), "no storage I/O asked for");
        let s = snapshot(true);
        assert!(s.iter().any(|p| p.pid == me && p.io.is_some()), "our own I/O is readable");
    }
}
