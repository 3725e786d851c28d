//! One sample of every thread of a process, from `/proc/<pid>/task/<tid>/{stat,schedstat,
//! wchan,syscall}`.
//!
//! Invariant: files stay open between samples and are re-read with `pread` at offset 0, so a
//! sample costs one syscall per file; `syscall` (the most expensive, and only interesting for a
//! thread not parked in a known wait) is read only when `wchan` does not already say where the
//! thread waits. A thread that has not run since the last sample (same state, same CPU time and
//! timeslice count in `schedstat`) cannot have moved in the kernel, so its `wchan` and `syscall`
//! are carried over instead of read again: a stall of a mostly blocked 200-thread JVM costs two
//! reads per thread per sample, not four.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Where a thread is with respect to system calls (`/proc/<pid>/task/<tid>/syscall`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Syscall {
    /// On a CPU right now; the kernel cannot say.
    Running,
    /// Blocked inside system call `nr`, whose first argument is `arg0` (a file descriptor, for
    /// the calls `syscalls::takes_fd` names).
    In {
        nr: i64,
        #[serde(default, skip_serializing_if = "is_zero")]
        arg0: u64,
        sp: u64,
        pc: u64,
    },
    /// Blocked, but not in a system call: in a page fault or similar (`-1 sp pc`).
    NotInSyscall { sp: u64, pc: u64 },
    /// Not read (the thread was parked in a known wait, or the file was unreadable).
    #[default]
    Unknown,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One thread at one instant. (`Default` is for building samples in tests: tid 0, state NUL,
/// every counter 0.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSample {
    pub tid: i32,
    pub comm: String,
    /// `R`, `S`, `D`, `T`, `t`, `Z`, `X`, `I`.
    pub state: char,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub minflt: u64,
    pub majflt: u64,
    /// CPU it last ran on.
    pub processor: i32,
    /// schedstat: time on CPU, time waiting on a run queue, timeslices.
    pub exec_ns: u64,
    pub run_delay_ns: u64,
    pub timeslices: u64,
    /// Kernel function it sleeps in (`0` when running).
    pub wchan: String,
    pub syscall: Syscall,
    /// The file behind the descriptor of a file read, write or flush it is blocked in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The fields of a `/proc/PID/stat` line that stallscope reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    /// `R`, `S`, `D`, `T`…
    pub state: char,
    pub minflt: u64,
    pub majflt: u64,
    /// Clock ticks ([`clock_ticks`]).
    pub utime: u64,
    pub stime: u64,
    /// The CPU it last ran on, or -1 when the line does not say.
    pub processor: i32,
    /// When it started, in clock ticks since boot.
    pub starttime: u64,
}

/// Parses a `stat` line: `pid (comm) S ppid …`. The comm can hold spaces and parentheses,
/// so the fields are split after the last `)`.
pub fn parse_stat(s: &str) -> Option<Stat> {
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s.get(open + 1..close)?;
    // Fields after comm, 0-based: state 0, minflt 7, majflt 9, utime 11, stime 12,
    // starttime 19, processor 36. Walked once, without collecting them: every thread of a
    // stalled JVM is parsed at the sampling rate.
    let mut f = s.get(close + 2..)?.split(' ');
    let state = f.next()?.chars().next()?;
    // After state (0), the nth field: nth skips those in between.
    let mut at = 0;
    let mut next = |i: usize| -> Option<&str> {
        let v = f.nth(i - at - 1);
        at = i;
        v
    };
    let num = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    let minflt = num(next(7))?;
    let majflt = num(next(9))?;
    let utime = num(next(11))?;
    let stime = num(next(12))?;
    let starttime = num(next(19))?;
    let processor = next(36).and_then(|v| v.parse().ok()).unwrap_or(-1);
    Some(Stat { comm: comm.to_string(), state, minflt, majflt, utime, stime, processor, starttime })
}

/// Parses `syscall`: `running`, `-1 sp pc`, or `nr a1 … a6 sp pc`.
pub fn parse_syscall(s: &str) -> Syscall {
    let s = s.trim();
    if s == "running" {
        return Syscall::Running;
    }
    let hex = |v: &str| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok();
    let f: Vec<&str> = s.split_whitespace().collect();
    match f.as_slice() {
        ["-1", sp, pc] => match (hex(sp), hex(pc)) {
            (Some(sp), Some(pc)) => Syscall::NotInSyscall { sp, pc },
            _ => Syscall::Unknown,
        },
        [nr, a0, .., sp, pc] if f.len() == 9 => {
            match (nr.parse::<i64>(), hex(a0), hex(sp), hex(pc)) {
                (Ok(nr), Some(arg0), Some(sp), Some(pc)) => Syscall::In { nr, arg0, sp, pc },
                _ => Syscall::Unknown,
            }
        }
        _ => Syscall::Unknown,
    }
}

/// When process `pid` started, on CLOCK_MONOTONIC (its start time is kept on the boot clock,
/// to the clock tick: 10 ms).
pub fn process_start_mono_ns(pid: i32) -> Option<u64> {
    let ticks = process_starttime(pid)?;
    let boot = ticks.checked_mul(1_000_000_000)? / clock_ticks().max(1);
    let read = |clock| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: a valid timespec to fill.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    // The boot clock runs ahead of the monotonic one by the time the machine was suspended.
    let suspended = read(libc::CLOCK_BOOTTIME).saturating_sub(read(libc::CLOCK_MONOTONIC));
    Some(boot.saturating_sub(suspended))
}

/// Whether process `pid` is stopped (state `T`, or `t` under a tracer).
pub fn stopped(pid: i32) -> bool {
    crate::procfile::read(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| parse_stat(&s))
        .is_some_and(|f| matches!(f.state, 'T' | 't'))
}

/// A process's state letter and its tracer's pid (0: none), from its `status`.
pub fn state_and_tracer(pid: i32) -> Option<(char, i32)> {
    state_and_tracer_via(pid, None)
}

/// The same, its `status` read through a descriptor `kept` open.
pub fn state_and_tracer_via(pid: i32, kept: Option<&crate::procfile::Kept>) -> Option<(char, i32)> {
    let path = format!("/proc/{pid}/status");
    let s = match kept {
        Some(k) => k.read(path).ok()?,
        None => crate::procfile::read(path).ok()?,
    };
    let state = s.lines().find_map(|l| l.strip_prefix("State:"))?.trim().chars().next()?;
    let tracer =
        s.lines().find_map(|l| l.strip_prefix("TracerPid:")).and_then(|v| v.trim().parse().ok());
    Some((state, tracer.unwrap_or(0)))
}

/// Kernel functions where a thread waits inside a system call it made on purpose (parked on a
/// futex, polling, sleeping). For these the `syscall` file adds nothing worth its cost.
pub fn parked_wchan(w: &str) -> bool {
    w.starts_with("futex_")
        || w.starts_with("do_epoll_wait")
        || w.starts_with("ep_poll")
        || w.starts_with("do_nanosleep")
        || w.starts_with("hrtimer_nanosleep")
        || w.starts_with("do_select")
        || w.starts_with("do_sys_poll")
        || w.starts_with("pipe_read")
        || w.starts_with("unix_stream_read")
        || w.starts_with("inet_csk_accept")
        || w.starts_with("wait_woken")
        || w.starts_with("do_wait")
        || w.starts_with("do_sigtimedwait")
}

struct TaskFiles {
    stat: File,
    schedstat: Option<File>,
    wchan: Option<File>,
    syscall: Option<File>,
    /// The thread's last sample read from its files, and when that read began
    /// (CLOCK_MONOTONIC ns): where a thread that has not moved since still waits ([`unmoved`]),
    /// and what one that has not run since is ([`Still`]).
    last: Option<(u64, TaskSample)>,
    /// When its files were last read (CLOCK_MONOTONIC ns; `last` may be carried on since).
    read_at: u64,
}

/// Says whether thread `tid` (of the sampled process, `pid`) has not run, nor been woken, since
/// `since` (CLOCK_MONOTONIC ns), when its last read began: `(pid, tid, since, asleep_then)`,
/// the last saying whether that read found it off a CPU (not R). Such a thread's files would
/// read as they did then, so they are not read again (the kernel's scheduler events answer this,
/// see `offcpu::Entries`). Must answer false whenever it cannot tell.
pub type Still = Box<dyn Fn(i32, i32, u64, bool) -> bool + Send>;

/// Says since when thread `tid` (of the sampled process, `pid`) has been on a CPU without a
/// break, if since before `since` (CLOCK_MONOTONIC ns): `(pid, tid, since)`. Such a thread has
/// only run on since its read then: its CPU time grew by the time elapsed, and its state (R),
/// CPU, run delay and switch count are as that read found them (the kernel's scheduler events
/// answer this, see `offcpu::Entries::on_cpu_since`). Must answer None whenever it cannot tell.
pub type OnCpu = Box<dyn Fn(i32, i32, u64) -> Option<u64> + Send>;

/// How many thread reads a sampler made and how many it left out, the thread not having run
/// since its last read ([`TaskSampler::set_still`]), since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    pub read: u64,
    pub still: u64,
    /// Left out because the thread was on a CPU without a break since its last read (only
    /// where [`TaskSampler::carry_on_cpu`] is set).
    pub on_cpu: u64,
}

/// Whether a thread has not moved since its `last` sample (same state, not running, its
/// schedstat counters unchanged), so that what that sample read of where it waits still holds.
/// A wchan read as the thread woke ("0", or none: it was on a run queue between the reads of its
/// state and of its wchan) is read again though the thread did not move: kept, it would stand
/// for the whole wait that follows (a thread woken and put back to sleep on a contended
/// mmap_lock, its counters unchanged, showed "0" for the 28 ms it then waited).
fn unmoved(last: Option<&TaskSample>, state: char, exec_ns: u64, timeslices: u64) -> bool {
    last.is_some_and(|l| {
        state != 'R'
            && l.state == state
            && l.exec_ns == exec_ns
            && l.timeslices == timeslices
            && !l.wchan.is_empty()
            && l.wchan != "0"
    })
}

/// Samples every thread of one process, keeping each thread's files open.
pub struct TaskSampler {
    pid: i32,
    tasks: HashMap<i32, TaskFiles>,
    buf: Vec<u8>,
    samples_since_scan: u32,
    /// Re-list the task directory every this many samples (threads come and go).
    pub rescan_every: u32,
    /// The slowest single read of the last sample: which file of which thread, and how long.
    pub slowest: Option<SlowRead>,
    still: Option<Still>,
    on_cpu: Option<OnCpu>,
    /// Whether a thread on a CPU without a break since its last read is carried on from that
    /// read ([`OnCpu`]) rather than read: what its counters of faults and of user and kernel
    /// time did meanwhile is then left to the next read. Set by the recorder between a stall's
    /// first and last looks, which read every thread that ran.
    pub carry_on_cpu: bool,
    /// One clock tick (`USER_HZ`), ns: the longest a thread is carried on unread.
    tick_ns: u64,
    pub reads: Reads,
}

/// One read of a thread's `/proc` file that took long: what waits is the observer's business
/// (the recorder says which read held it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowRead {
    /// None: the task directory (listed, and new threads' files opened).
    pub tid: Option<i32>,
    pub file: &'static str,
    pub ns: u64,
}

impl SlowRead {
    fn note(slowest: &mut Option<SlowRead>, tid: Option<i32>, file: &'static str, from: u64) {
        let ns = crate::clock::mono_ns().saturating_sub(from);
        if slowest.is_none_or(|s| ns > s.ns) {
            *slowest = Some(SlowRead { tid, file, ns });
        }
    }
}

fn read_at0(f: &File, buf: &mut Vec<u8>) -> io::Result<usize> {
    buf.resize(4096, 0);
    let n = f.read_at(buf, 0)?;
    Ok(n)
}

impl TaskSampler {
    pub fn new(pid: i32) -> io::Result<TaskSampler> {
        let mut s = TaskSampler {
            pid,
            tasks: HashMap::new(),
            buf: vec![0; 4096],
            samples_since_scan: 0,
            rescan_every: 50,
            slowest: None,
            still: None,
            on_cpu: None,
            carry_on_cpu: false,
            tick_ns: 1_000_000_000 / clock_ticks().max(1),
            reads: Reads::default(),
        };
        s.rescan()?;
        Ok(s)
    }

    fn task_dir(&self, tid: i32) -> PathBuf {
        PathBuf::from(format!("/proc/{}/task/{tid}", self.pid))
    }

    /// Lists the process's threads, opening files for new ones and forgetting gone ones.
    pub fn rescan(&mut self) -> io::Result<()> {
        // A set: a JVM of thousands of threads made this quadratic.
        let mut seen = std::collections::HashSet::new();
        for e in std::fs::read_dir(format!("/proc/{}/task", self.pid))? {
            let Ok(e) = e else { continue };
            let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else {
                continue;
            };
            seen.insert(tid);
            if self.tasks.contains_key(&tid) {
                continue;
            }
            let d = self.task_dir(tid);
            let Ok(stat) = File::open(d.join("stat")) else { continue };
            self.tasks.insert(
                tid,
                TaskFiles {
                    stat,
                    schedstat: File::open(d.join("schedstat")).ok(),
                    wchan: File::open(d.join("wchan")).ok(),
                    syscall: File::open(d.join("syscall")).ok(),
                    last: None,
                    read_at: 0,
                },
            );
        }
        self.tasks.retain(|t, _| seen.contains(t));
        self.samples_since_scan = 0;
        Ok(())
    }

    pub fn threads(&self) -> usize {
        self.tasks.len()
    }

    /// From now on, a thread `still` says has not run since its last read is not read again:
    /// its last sample stands (see [`Still`]).
    pub fn set_still(&mut self, still: Still) {
        self.still = Some(still);
    }

    /// What says a thread has been on a CPU since its last read (used where
    /// [`Self::carry_on_cpu`] is set).
    pub fn set_on_cpu(&mut self, on_cpu: OnCpu) {
        self.on_cpu = Some(on_cpu);
    }

    /// Samples every thread. A process that has exited gives an error; threads that exited
    /// since the last sample are dropped silently.
    pub fn sample(&mut self, out: &mut Vec<TaskSample>) -> io::Result<()> {
        self.samples_since_scan += 1;
        let mut slowest = None;
        if self.samples_since_scan >= self.rescan_every {
            let from = crate::clock::mono_ns();
            self.rescan()?;
            SlowRead::note(&mut slowest, None, "task", from);
        }
        out.clear();
        let mut gone = Vec::new();
        let mut buf = std::mem::take(&mut self.buf);
        for (&tid, files) in self.tasks.iter_mut() {
            let began = crate::clock::mono_ns();
            if let (Some(still), Some((at, last))) = (&self.still, &files.last)
                && still(self.pid, tid, *at, last.state != 'R')
            {
                self.reads.still += 1;
                out.push(last.clone());
                continue;
            }
            // Read at least once a clock tick: its user and kernel times count in ticks, so a
            // read more often shows them no finer, but a stretch of a stall longer than a tick
            // sees them move (the doctor tells a loop in user mode from one in the kernel by
            // them).
            if self.carry_on_cpu
                && began.saturating_sub(files.read_at) < self.tick_ns
                && let (Some(on_cpu), Some((at, last))) = (&self.on_cpu, &files.last)
                && last.state == 'R'
                && on_cpu(self.pid, tid, *at).is_some()
            {
                self.reads.on_cpu += 1;
                // On a CPU throughout: its CPU time grew by the time since that read began.
                let carried = TaskSample {
                    exec_ns: last.exec_ns + began.saturating_sub(*at),
                    ..last.clone()
                };
                files.last = Some((began, carried.clone()));
                out.push(carried);
                continue;
            }
            self.reads.read += 1;
            let from = began;
            let read = read_at0(&files.stat, &mut buf);
            SlowRead::note(&mut slowest, Some(tid), "stat", from);
            let Ok(n) = read else {
                gone.push(tid);
                continue;
            };
            let line = String::from_utf8_lossy(&buf[..n]);
            let Some(Stat { comm, state, minflt, majflt, utime, stime, processor, .. }) =
                parse_stat(line.trim_end())
            else {
                continue;
            };
            let (mut exec_ns, mut run_delay_ns, mut timeslices) = (0, 0, 0);
            let mut have_schedstat = false;
            let from = crate::clock::mono_ns();
            if let Some(f) = &files.schedstat
                && let Ok(n) = read_at0(f, &mut buf)
            {
                SlowRead::note(&mut slowest, Some(tid), "schedstat", from);
                let s = String::from_utf8_lossy(&buf[..n]);
                let mut it = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
                exec_ns = it.next().unwrap_or(0);
                run_delay_ns = it.next().unwrap_or(0);
                timeslices = it.next().unwrap_or(0);
                have_schedstat = true;
            }
            let last = files.last.as_ref().map(|(_, l)| l);
            let unmoved = have_schedstat && unmoved(last, state, exec_ns, timeslices);
            let (wchan, syscall, file) = if unmoved {
                let l = last.expect("checked above");
                (l.wchan.clone(), l.syscall, l.file.clone())
            } else {
                let from = crate::clock::mono_ns();
                let wchan = match (&files.wchan, state) {
                    (Some(f), s) if s != 'R' => read_at0(f, &mut buf)
                        .map(|n| String::from_utf8_lossy(&buf[..n]).trim().to_string())
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                SlowRead::note(&mut slowest, Some(tid), "wchan", from);
                let from = crate::clock::mono_ns();
                let syscall = match &files.syscall {
                    Some(f) if state != 'R' && !parked_wchan(&wchan) => read_at0(f, &mut buf)
                        .map(|n| parse_syscall(&String::from_utf8_lossy(&buf[..n])))
                        .unwrap_or(Syscall::Unknown),
                    _ if state == 'R' => Syscall::Running,
                    _ => Syscall::Unknown,
                };
                SlowRead::note(&mut slowest, Some(tid), "syscall", from);
                let from = crate::clock::mono_ns();
                // Which file a blocked read, write or flush is about: one readlink, only for a
                // thread that has just entered such a call.
                let file = match syscall {
                    Syscall::In { nr, arg0, .. }
                        if crate::syscalls::takes_fd(nr) && arg0 < (1 << 31) =>
                    {
                        std::fs::read_link(format!("/proc/{}/fd/{arg0}", self.pid))
                            .ok()
                            .map(|p| p.to_string_lossy().into_owned())
                    }
                    _ => None,
                };
                SlowRead::note(&mut slowest, Some(tid), "fd", from);
                (wchan, syscall, file)
            };
            let sample = TaskSample {
                tid,
                comm,
                state,
                utime_ticks: utime,
                stime_ticks: stime,
                minflt,
                majflt,
                processor,
                exec_ns,
                run_delay_ns,
                timeslices,
                wchan,
                syscall,
                file,
            };
            files.last = Some((began, sample.clone()));
            files.read_at = began;
            out.push(sample);
        }
        self.buf = buf;
        self.slowest = slowest;
        for t in gone {
            self.tasks.remove(&t);
        }
        if out.is_empty() && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("pid {} has exited", self.pid),
            ));
        }
        // Only zombies left: it has exited and waits to be reaped.
        if !out.is_empty() && out.iter().all(|t| matches!(t.state, 'Z' | 'X')) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("pid {} has exited (a zombie)", self.pid),
            ));
        }
        Ok(())
    }
}

/// How much of a process's memory is resident and how much is in swap (`VmRSS`, `VmSwap` of
/// `/proc/<pid>/status`), in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    pub rss_kb: u64,
    pub swap_kb: u64,
}

pub fn process_memory(pid: i32) -> Option<ProcessMemory> {
    let s = crate::procfile::read(format!("/proc/{pid}/status")).ok()?;
    let kb = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(ProcessMemory { rss_kb: kb("VmRSS:")?, swap_kb: kb("VmSwap:").unwrap_or(0) })
}

/// `/proc/<pid>/status` context-switch counters of one thread (voluntary, involuntary).
pub fn context_switches(pid: i32, tid: i32) -> Option<(u64, u64)> {
    let s = crate::procfile::read(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let get =
        |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).and_then(|v| v.trim().parse().ok());
    Some((get("voluntary_ctxt_switches:")?, get("nonvoluntary_ctxt_switches:")?))
}

/// Field 22 of `/proc/<pid>/stat`: when the process started, in clock ticks since boot. With
/// the pid, it names a process across pid reuse.
pub fn process_starttime(pid: i32) -> Option<u64> {
    let s = crate::procfile::read(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(s.trim_end()).map(|p| p.starttime)
}

/// A pidfd of process `pid` (Linux 5.3+): it stays that process's, whatever the pid is reused
/// for. None if it cannot be opened.
pub fn pidfd_open(pid: i32) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags; it returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    // SAFETY: a descriptor just returned to us and owned by nobody else.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Clock ticks per second (for utime/stime).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_hostile_comm() {
        let line = "4242 (a) b) S (c) R 1 4242 4242 0 -1 4194560 100 0 3 0 57 12 0 0 20 0 1 0 9876 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "a) b) S (c");
        assert_eq!(
            (s.state, s.minflt, s.majflt, s.utime, s.stime, s.processor, s.starttime),
            ('R', 100, 3, 57, 12, 1, 9876)
        );
        assert!(parse_stat("garbage").is_none());
    }

    /// The first version, which collected every field: the reference for the one in use.
    fn parse_stat_collected(s: &str) -> Option<Stat> {
        let open = s.find('(')?;
        let close = s.rfind(')')?;
        let comm = s.get(open + 1..close)?.to_string();
        let f: Vec<&str> = s.get(close + 2..)?.split(' ').collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        Some(Stat {
            comm,
            state: f.first()?.chars().next()?,
            minflt: num(7)?,
            majflt: num(9)?,
            utime: num(11)?,
            stime: num(12)?,
            processor: f.get(36).and_then(|v| v.parse().ok()).unwrap_or(-1),
            starttime: num(19)?,
        })
    }

    proptest::proptest! {
        /// Any line, and lines shaped like a stat line with some fields missing or not numbers,
        /// parse as the collecting version did, and never panic.
        #[test]
        fn a_stat_line_parses_as_the_collecting_parser_did(
            comm in "[a-z() ]{0,12}",
            fields in proptest::collection::vec("[0-9]{1,4}|-1|x|", 0..45),
            state in "[RSDTtZI]",
            junk in ".{0,80}",
        ) {
            let line = format!("4242 ({comm}) {state} {}", fields.join(" "));
            proptest::prop_assert_eq!(parse_stat(&line), parse_stat_collected(&line));
            proptest::prop_assert_eq!(parse_stat(&junk), parse_stat_collected(&junk));
        }
    }

    #[test]
    fn a_wchan_read_as_the_thread_woke_is_read_again() {
        let last = |w: &str| TaskSample {
            state: 'D',
            exec_ns: 100,
            timeslices: 7,
            wchan: w.to_string(),
            ..Default::default()
        };
        assert!(unmoved(Some(&last("do_mprotect_pkey")), 'D', 100, 7));
        assert!(!unmoved(Some(&last("0")), 'D', 100, 7));
        assert!(!unmoved(Some(&last("")), 'D', 100, 7));
        assert!(!unmoved(Some(&last("do_mprotect_pkey")), 'D', 101, 7), "it ran");
        assert!(!unmoved(Some(&last("do_mprotect_pkey")), 'D', 100, 8), "it was scheduled");
        assert!(!unmoved(Some(&last("do_mprotect_pkey")), 'S', 100, 7), "its state changed");
        assert!(!unmoved(None, 'D', 100, 7));
        let running = TaskSample {
            state: 'R',
            exec_ns: 100,
            timeslices: 7,
            syscall: Syscall::Running,
            ..Default::default()
        };
        assert!(!unmoved(Some(&running), 'R', 100, 7));
    }

    #[test]
    fn syscall_shapes() {
        assert_eq!(parse_syscall("running\n"), Syscall::Running);
        assert_eq!(
            parse_syscall("-1 0x7ffd1234 0x7f00abcd\n"),
            Syscall::NotInSyscall { sp: 0x7ffd1234, pc: 0x7f00abcd }
        );
        assert_eq!(
            parse_syscall("202 0x7f 0x80 0x0 0x0 0x0 0x0 0x7ffd0 0x7f001\n"),
            Syscall::In { nr: 202, arg0: 0x7f, sp: 0x7ffd0, pc: 0x7f001 }
        );
        assert_eq!(parse_syscall(""), Syscall::Unknown);
    }

    #[test]
    fn samples_this_process() {
        let pid = std::process::id() as i32;
        let h = std::thread::Builder::new()
            .name("sleepy-sampled".into())
            .spawn(|| std::thread::sleep(std::time::Duration::from_millis(500)))
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut s = TaskSampler::new(pid).unwrap();
        let mut v = Vec::new();
        s.sample(&mut v).unwrap();
        let sleepy =
            v.iter().find(|t| t.comm == "sleepy-sampled").expect("the named thread is sampled");
        assert_eq!(sleepy.state, 'S');
        assert!(
            sleepy.wchan.contains("nanosleep")
                || sleepy.wchan.contains("hrtimer")
                || !sleepy.wchan.is_empty(),
            "{sleepy:?}"
        );
        assert!(v.iter().any(|t| t.tid == pid && t.exec_ns > 0));
        h.join().unwrap();
        assert!(process_starttime(pid).unwrap() > 0);
        assert!(process_memory(pid).unwrap().rss_kb > 0);
    }

    #[test]
    fn a_thread_said_still_since_its_last_read_is_not_read_and_keeps_its_last_sample() {
        let pid = std::process::id() as i32;
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::Builder::new()
            .name("still-sampled".into())
            .spawn(move || {
                tx.send(unsafe { libc::gettid() }).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(400))
            })
            .unwrap();
        let sleepy: i32 = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut s = TaskSampler::new(pid).unwrap();
        // Asked about the sleeping thread only, with the moment its last read began.
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let a = asked.clone();
        s.set_still(Box::new(move |p, tid, since, asleep| {
            a.lock().unwrap().push((p, tid, since));
            tid == sleepy && asleep
        }));
        let mut first = Vec::new();
        s.sample(&mut first).unwrap();
        assert!(asked.lock().unwrap().is_empty(), "a thread never read is read");
        // (Other tests' threads may exit between a read's count and the read.)
        assert!(s.reads.read >= first.len() as u64 && s.reads.still == 0, "{:?}", s.reads);
        let read = s.reads.read;
        let mut second = Vec::new();
        s.sample(&mut second).unwrap();
        let was = first.iter().find(|t| t.tid == sleepy).unwrap();
        let now = second.iter().find(|t| t.tid == sleepy).unwrap();
        assert_eq!(was, now, "its last sample stands");
        assert_eq!(s.reads.still, 1, "{:?}", s.reads);
        assert!(s.reads.read - read >= second.len() as u64 - 1, "the others are read");
        let asked = asked.lock().unwrap();
        assert!(asked.iter().all(|(p, _, since)| *p == pid && *since > 0), "{asked:?}");
        drop(asked);
        h.join().unwrap();
    }

    #[test]
    fn a_thread_on_a_cpu_since_its_last_read_is_carried_on_only_where_asked() {
        let pid = std::process::id() as i32;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s2 = stop.clone();
        let h = std::thread::Builder::new()
            .name("spinning".into())
            .spawn(move || {
                tx.send(unsafe { libc::gettid() }).unwrap();
                while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .unwrap();
        let spinner: i32 = rx.recv().unwrap();
        let mut s = TaskSampler::new(pid).unwrap();
        // Says the spinner has been on a CPU since time 1 (a mock of the kernel's events).
        s.set_on_cpu(Box::new(move |_, tid, _| (tid == spinner).then_some(1)));
        let of = |v: &[TaskSample]| v.iter().find(|t| t.tid == spinner).cloned();
        let mut v = Vec::new();
        // Until it is read once as running, it is read.
        let mut first = None;
        for _ in 0..200 {
            s.sample(&mut v).unwrap();
            first = of(&v).filter(|t| t.state == 'R');
            if first.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let first = first.expect("the spinning thread read as running");
        // Not asked: read as before.
        s.sample(&mut v).unwrap();
        assert_eq!(s.reads.on_cpu, 0, "{:?}", s.reads);
        // Asked, within a clock tick of its last read: carried on from that read, its CPU time
        // grown by the time since. (Tried again if this busy machine made the tick pass.)
        let mut carried = None;
        for _ in 0..50 {
            s.carry_on_cpu = false;
            s.sample(&mut v).unwrap();
            let read = of(&v).unwrap();
            s.carry_on_cpu = true;
            std::thread::sleep(std::time::Duration::from_millis(1));
            let before = s.reads.on_cpu;
            s.sample(&mut v).unwrap();
            if s.reads.on_cpu > before {
                carried = Some((read, of(&v).unwrap()));
                break;
            }
        }
        let (read, carried) = carried.expect("carried on within a tick at least once in 50 tries");
        assert!(carried.exec_ns >= read.exec_ns + 1_000_000, "{read:?} then {carried:?}");
        let same = TaskSample { exec_ns: read.exec_ns, ..carried.clone() };
        assert_eq!(same, read, "all but its CPU time as that read found it");
        // A tick after its last read, it is read again, carried or not.
        std::thread::sleep(std::time::Duration::from_millis(2 * 1000 / clock_ticks().max(1)));
        let (on_cpu, read_before) = (s.reads.on_cpu, s.reads.read);
        s.sample(&mut v).unwrap();
        s.carry_on_cpu = false;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        assert_eq!(s.reads.on_cpu, on_cpu, "read again after a tick: {:?}", s.reads);
        assert!(s.reads.read > read_before);
        assert!(first.exec_ns <= carried.exec_ns);
    }

    #[test]
    fn a_thread_blocked_in_write_shows_the_call_and_its_descriptor() {
        // A thread blocked in write(2) on a pipe nobody reads shows the write's number and fd.
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // Fill the pipe so the next write blocks.
        unsafe { libc::fcntl(fds[1], libc::F_SETFL, libc::O_NONBLOCK) };
        let buf = [0u8; 4096];
        while unsafe { libc::write(fds[1], buf.as_ptr() as *const libc::c_void, buf.len()) } > 0 {}
        unsafe { libc::fcntl(fds[1], libc::F_SETFL, 0) };
        let w = fds[1];
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(unsafe { libc::gettid() }).unwrap();
            let b = [1u8; 1];
            unsafe { libc::write(w, b.as_ptr() as *const libc::c_void, 1) };
        });
        let tid = rx.recv().unwrap();
        let mut seen = None;
        for _ in 0..200 {
            let s =
                crate::procfile::read(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
            if let Syscall::In { nr, arg0, .. } = parse_syscall(&s) {
                seen = Some((nr, arg0));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (nr, arg0) = seen.expect("the writer blocks in a system call");
        assert_eq!(crate::syscalls::name(nr), Some("write"));
        assert!(crate::syscalls::takes_fd(nr));
        assert_eq!(arg0, w as u64);
        unsafe { libc::close(fds[0]) };
        h.join().unwrap();
        unsafe { libc::close(fds[1]) };
    }

    #[test]
    fn our_own_start_is_in_the_past_on_the_monotonic_clock() {
        let start = process_start_mono_ns(std::process::id() as i32).unwrap();
        let now = crate::clock::mono_ns();
        assert!(start <= now && now - start < 3_600_000_000_000, "{start} {now}");
    }
}
