//! The stacks agent (`crates/stacks-agent`, `libstallscope_stacks.so`): where the recorder finds
//! it, how `run` loads it, and the signaller the sampling loop calls after each look at the threads
//! in a stall. The signalled thread's handler takes its Java stack where it stands, with no
//! safepoint (docs/frames.md); the agent writes it to `stacks.jsonl`.
//!
//! Invariants:
//! - No thread is signalled before the agent's `stacks.ready` names the signal its handler is
//!   on: the default action of a real-time signal ends the process.
//! - Only an application thread on a CPU or in uninterruptible sleep (a page fault, a blocked
//!   disk read or write) is signalled: a thread asleep in an interruptible wait would see the
//!   call interrupted. At most [`PER_LOOK`] threads a look; each thread at most once per
//!   [`GAP_NS`] for its first [`EARLY`] stacks of a stall, then once per [`LATE_GAP_NS`]; and at
//!   most [`PER_SECOND`] signals a second in all (a burst of [`BURST`]): a stall of 100 ms gives
//!   its culprit about ten stacks, and a starved JVM of many running threads, whose every
//!   thread is worth a stack, costs its CPUs little more.
//! - A thread signalled in uninterruptible sleep is not signalled again until a look sees it out
//!   of it: it takes the signal only when it wakes, and real-time signals queue, so more would
//!   give it the same stack over and over when its fault is over.

use procwatch::task::TaskSample;
use recording::files;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub const LIB: &str = "libstallscope_stacks.so";

/// One thread is signalled at most this often, for its first [`EARLY`] stacks of a stall.
pub const GAP_NS: u64 = 10_000_000;
pub const EARLY: u32 = 10;
/// And then at most this often.
pub const LATE_GAP_NS: u64 = 100_000_000;
/// At most this many threads are signalled after one look.
pub const PER_LOOK: usize = 4;
/// At most this many signals a second, in bursts of at most [`BURST`].
pub const PER_SECOND: u64 = 400;
pub const BURST: u64 = 40;
/// How often, until the agent is ready, its ready file is looked for.
const READY_CHECK_NS: u64 = 100_000_000;

/// `$STALLSCOPE_STACKS_AGENT`, next to the executable, `../lib/` (the `make dist` layout); cargo
/// builds the library beside the binary.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STALLSCOPE_STACKS_AGENT") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let dir = std::env::current_exe().ok()?.canonicalize().ok()?.parent()?.to_path_buf();
    [dir.join(LIB), dir.join("../lib").join(LIB)]
        .into_iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

/// The launch option for `run`: the agent writes into the recording directory `dir`.
pub fn launch_option(lib: &Path, dir: &Path) -> String {
    format!("-agentpath:{}=dir={}", lib.display(), dir.display())
}

/// Whether a thread in a look is worth a stack (a signal here, or a thread dump,
/// `dumps::worth_a_dump`): an application thread on a CPU or in uninterruptible sleep.
pub fn worth_a_stack(t: &TaskSample) -> bool {
    matches!(t.state, 'R' | 'D')
        && !procwatch::jvm_threads::jvm_internal(&t.comm)
        && !t.comm.starts_with("JFR ")
        && t.comm != "Attach Listener"
}

/// Signals the threads worth a stack, once the agent in JVM `pid` is ready.
pub struct Signaller {
    pid: i32,
    ready: PathBuf,
    signal: Option<i32>,
    checked_at: Option<u64>,
    /// Per thread: when it was last signalled, and how often in this stall.
    last: HashMap<i32, (u64, u32)>,
    /// Threads signalled in uninterruptible sleep (D) and not seen out of it since.
    pending: std::collections::HashSet<i32>,
    stall: u32,
    /// The token bucket: signals that may go now, and when it was last filled.
    tokens: u64,
    filled_at: u64,
    /// Signals sent.
    pub sent: u64,
}

impl Signaller {
    pub fn new(pid: i32, dir: &Path) -> Signaller {
        Signaller {
            pid,
            ready: dir.join(files::STACKS_READY),
            signal: None,
            checked_at: None,
            last: HashMap::new(),
            pending: Default::default(),
            stall: 0,
            tokens: BURST,
            filled_at: 0,
            sent: 0,
        }
    }

    /// The agent's signal, once its ready file says it.
    fn signal(&mut self, t: u64) -> Option<i32> {
        if self.signal.is_none()
            && self.checked_at.is_none_or(|c| t.saturating_sub(c) >= READY_CHECK_NS)
        {
            self.checked_at = Some(t);
            self.signal = std::fs::read_to_string(&self.ready)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .filter(|s| (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(s));
        }
        self.signal
    }

    /// After a look at `threads` at `t` (CLOCK_MONOTONIC) in stall `stall`.
    pub fn look(&mut self, threads: &[TaskSample], t: u64, stall: u32) {
        let Some(sig) = self.signal(t) else { return };
        if stall != self.stall {
            self.stall = stall;
            self.last.clear();
            self.pending.retain(|tid| threads.iter().any(|th| th.tid == *tid));
        }
        for th in threads.iter().filter(|th| th.state != 'D') {
            self.pending.remove(&th.tid);
        }
        self.tokens = (self.tokens + t.saturating_sub(self.filled_at) * PER_SECOND / 1_000_000_000)
            .min(BURST);
        self.filled_at = t;
        let mut n = 0;
        for th in threads.iter().filter(|th| worth_a_stack(th)) {
            if n == PER_LOOK || self.tokens == 0 {
                break;
            }
            if self.pending.contains(&th.tid) {
                continue;
            }
            let (last, count) = self.last.get(&th.tid).copied().unwrap_or((0, 0));
            let gap = if count < EARLY { GAP_NS } else { LATE_GAP_NS };
            if count > 0 && t.saturating_sub(last) < gap {
                continue;
            }
            if queue(self.pid, th.tid, sig, procwatch::clock::mono_ns()) {
                self.sent += 1;
            }
            self.last.insert(th.tid, (t, count + 1));
            if th.state == 'D' {
                self.pending.insert(th.tid);
            }
            self.tokens -= 1;
            n += 1;
        }
    }
}

/// Sends `sig` to thread `tid` of process `pid` with the time it is sent as its value
/// (`rt_tgsigqueueinfo`, SI_QUEUE), which the agent's handler reads: a thread in a page fault
/// takes the signal only when the fault is over.
fn queue(pid: i32, tid: i32, sig: i32, now: u64) -> bool {
    // siginfo_t for SI_QUEUE: signo, errno, code, then (at 16) pid, uid and (at 24) the value.
    let mut info = [0u8; 128];
    info[0..4].copy_from_slice(&sig.to_ne_bytes());
    info[8..12].copy_from_slice(&libc::SI_QUEUE.to_ne_bytes());
    // SAFETY: getpid and getuid have no preconditions.
    info[16..20].copy_from_slice(&unsafe { libc::getpid() }.to_ne_bytes());
    info[20..24].copy_from_slice(&unsafe { libc::getuid() }.to_ne_bytes());
    info[24..32].copy_from_slice(&now.to_ne_bytes());
    // SAFETY: a 128-byte siginfo the kernel copies in; a thread gone since the look gets ESRCH,
    // and the thread-group check keeps a reused tid of another process out.
    unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, pid, tid, sig, info.as_ptr()) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tid: i32, comm: &str, state: char) -> TaskSample {
        TaskSample { tid, comm: comm.into(), state, ..Default::default() }
    }

    #[test]
    fn only_application_threads_on_a_cpu_or_in_a_fault() {
        assert!(worth_a_stack(&thread(1, "counted-loop", 'R')));
        assert!(worth_a_stack(&thread(1, "reader", 'D')));
        assert!(!worth_a_stack(&thread(1, "main", 'S')));
        assert!(!worth_a_stack(&thread(1, "VM Thread", 'R')));
        assert!(!worth_a_stack(&thread(1, "C2 CompilerThre", 'R')));
        assert!(!worth_a_stack(&thread(1, "stallscope-stac", 'R')));
        assert!(!worth_a_stack(&thread(1, "JFR Periodic Ta", 'R')));
    }

    #[test]
    fn nothing_is_signalled_before_the_agent_is_ready() {
        // This process has no handler on any real-time signal: a signal would end the test.
        let dir = std::env::temp_dir().join(format!("stallscope-stacks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id() as i32;
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let mut s = Signaller::new(me, &dir);
        s.look(&[thread(tid, "worker", 'R')], 1_000_000_000, 1);
        assert_eq!(s.sent, 0);
        std::fs::write(dir.join(files::STACKS_READY), "not a signal\n").unwrap();
        s.look(&[thread(tid, "worker", 'R')], 2_000_000_000, 1);
        assert_eq!(s.sent, 0, "a ready file that names no real-time signal is not trusted");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_thread_at_most_once_per_gap_and_a_few_per_look() {
        let dir =
            std::env::temp_dir().join(format!("stallscope-stacks-gap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A real-time signal this process ignores: the signals sent are counted and harmless.
        let sig = libc::SIGRTMAX() - 1;
        // SAFETY: SIG_IGN on a signal nothing else in the test binary uses.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
        std::fs::write(dir.join(files::STACKS_READY), format!("{sig}\n")).unwrap();
        // Sixty threads of this process, waiting.
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let done_rx = std::sync::Arc::new(std::sync::Mutex::new(done_rx));
        let handles: Vec<_> = (0..60)
            .map(|_| {
                let (tx, done) = (tx.clone(), done_rx.clone());
                // SAFETY: gettid has no preconditions.
                std::thread::spawn(move || {
                    tx.send(unsafe { libc::gettid() }).unwrap();
                    let _ = done.lock().unwrap().recv();
                })
            })
            .collect();
        let tids: Vec<i32> = (0..60).map(|_| rx.recv().unwrap()).collect();
        let mut s = Signaller::new(std::process::id() as i32, &dir);
        let one = [thread(tids[0], "worker", 'R')];
        let ms = 1_000_000u64;
        let t0 = 1_000 * ms;
        s.look(&one, t0, 1);
        assert_eq!(s.sent, 1);
        s.look(&one, t0 + 5 * ms, 1);
        assert_eq!(s.sent, 1, "within the gap");
        for k in 1..EARLY as u64 {
            s.look(&one, t0 + k * 10 * ms, 1);
        }
        assert_eq!(s.sent, EARLY as u64, "every 10 ms for the first stacks of a stall");
        s.look(&one, t0 + EARLY as u64 * 10 * ms, 1);
        assert_eq!(s.sent, EARLY as u64, "then less often");
        s.look(&one, t0 + (EARLY as u64 - 1) * 10 * ms + LATE_GAP_NS, 1);
        assert_eq!(s.sent, EARLY as u64 + 1);
        // In uninterruptible sleep: one signal until a look sees the thread out of it.
        let asleep = [thread(tids[1], "reader", 'D')];
        let before = s.sent;
        for k in 0..5 {
            s.look(&asleep, t0 + 500 * ms + k * 20 * ms, 1);
        }
        assert_eq!(s.sent - before, 1, "the signal waits for the fault to end");
        s.look(&[thread(tids[1], "reader", 'S')], t0 + 700 * ms, 1);
        s.look(&asleep, t0 + 720 * ms, 1);
        assert_eq!(s.sent - before, 2, "seen out of D, then in it again: signalled again");
        // A new stall starts each thread afresh.
        let t1 = t0 + 2000 * ms;
        s.look(&one, t1, 2);
        assert_eq!(s.sent, EARLY as u64 + 4, "the reader's two, and this one");
        // Sixty threads worth a stack: at most PER_LOOK a look.
        let all: Vec<TaskSample> = tids.iter().map(|t| thread(*t, "worker", 'R')).collect();
        let before = s.sent;
        s.look(&all, t1 + 10 * ms, 2);
        assert_eq!(s.sent - before, PER_LOOK as u64, "at most PER_LOOK a look");
        // Looks one after another: the bucket lets BURST go at once, then PER_SECOND a second.
        let mut m = Signaller::new(std::process::id() as i32, &dir);
        let t2 = 10_000 * ms;
        for k in 0..100 {
            m.look(&all, t2 + k * 10_000, 1);
        }
        assert_eq!(m.sent, BURST, "a burst of at most BURST within 1 ms");
        let at = m.sent;
        for k in 0..1000u64 {
            m.look(&all, t2 + 2 * ms + k * ms, 1);
        }
        assert!(m.sent - at <= PER_SECOND + 1, "at most PER_SECOND a second: {}", m.sent - at);
        drop(done_tx);
        for h in handles {
            h.join().unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
