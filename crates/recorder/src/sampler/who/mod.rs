//! Who set a stall off, looked for while it lasts, off the sampling loop: the VM operation the VM
//! thread runs and the thread that asked for it (`procwatch::vmops`), the process at the other
//! end of the attach listener when that thread is the listener (`procwatch::attachers`), how the
//! process is stopped and by whom (its state, its tracer, a cgroup freezer; with root, the
//! signals sent to it and the freezes written, `procwatch::trace`), and which processes ran
//! while it stalled (`procwatch::cpuuse`). Written to `who.jsonl` (`recording::who`).
//!
//! Invariants:
//! - The sampling loop never waits for this thread, except at a stall's end, for at most
//!   [`END_PATIENCE`], so that the stall's lines are written before its end event.
//! - Only reads: the JVM's memory, `/proc`, tracefs. Nothing is asked of the JVM.
//! - Bounded: one look per [`poll`] interval while a stall lasts (10 ms in its first second,
//!   less and less often after; while the process is seen stopped, no more often than
//!   [`STOPPED_POLL`] nor than a tenth of the stall's age), nothing between stalls; the attach
//!   listener's clients are looked for at most [`ATTACH_TRIES`] times a stall; every process
//!   on the host at most three times a stall (for CPU time, then storage too, then at the end),
//!   and, unless the machine was contended as it began, only once the kernel's pressure shows
//!   somebody waited ([`Pressure`]): its CPU time (read with every look) when somebody waited
//!   for a CPU or memory, its storage I/O when memory was short or somebody waited for storage
//!   while a thread of the target waited uninterruptibly (`D`); every line is written once per
//!   change.

use procwatch::clock::mono_ns;
use procwatch::vmops::{VmOperation, VmOps};
use recording::{Appender, CpuTaker, Freezer, IoTaker, Who, WhoProcess, WhoThread};
use std::collections::HashSet;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

mod jvm;
mod takers;

use takers::*;

/// How often the VM operation and the process's state are looked at while a stall lasts: every
/// 10 ms for its first second (most stalls), then less and less often (an operation or a stop
/// that lasts is seen by then; a change is seen within a tenth of what it lasted so far).
fn poll(age_ns: u64) -> Duration {
    match age_ns {
        a if a < 1_000_000_000 => Duration::from_millis(10),
        a if a < 10_000_000_000 => Duration::from_millis(50),
        _ => Duration::from_millis(250),
    }
}
/// The least wait between looks at a process seen stopped (by a signal, a tracer or a freezer)
/// while it stays so, a tenth of the stall's age after (`stall::stopped_every`, up to 250 ms):
/// nothing in it can change until it is let go (its VM operation, its safepoint, who asked), so
/// only its resumption is waited for, and the stall's end message wakes this thread at once. Measured on a 200-thread JVM
/// frozen 5 s under `run`: this thread, reading its state and its cgroups' freezer files every 10 ms,
/// was 29% of the sidecar's perf samples (one 5 s window).
const STOPPED_POLL: Duration = Duration::from_millis(50);
/// How long the sampling loop waits at a stall's end for that stall's lines.
const END_PATIENCE: Duration = Duration::from_millis(100);
/// Looks for the attach listener's clients in one stall (a client may connect a moment after
/// the operation is seen, or be gone).
const ATTACH_TRIES: u32 = 5;
/// Processes kept of those that took the CPUs in a stall.
const MAX_TAKERS: usize = 8;
/// The least share of the CPUs over a stall (percent) a process kept among those that took them
/// used to be described (command line, cgroup, user: four files); below it, its pid and name
/// only. The doctor names a process in words from 2%.
const DESCRIBED_PERCENT: u64 = 1;
/// Threads and processes kept of those that read or wrote storage in a stall, and the least
/// they read or wrote to be kept.
const MAX_IO: usize = 8;
const MIN_IO_BYTES: u64 = 1 << 20;
/// A look at every process this recent at a stall's begin is its first (the last stall's end).
const REUSE_LOOK_NS: u64 = 100_000_000;
/// How far before a stall signals to the process are looked for (a SIGSTOP comes first).
const SIGNALS_BEFORE_NS: u64 = 2_000_000_000;
/// How far back the SIGQUIT behind a thread dump the signal dispatcher asked for is looked for:
/// the dispatcher handles it only once a safepoint under way (held by a loop, say) is over.
const QUIT_BEFORE_NS: u64 = 60_000_000_000;
/// Some task waited this long for a CPU, storage or memory since a stall began, machine-wide,
/// before every process is looked at for who took them.
const WAITED_US: u64 = 1_000;
/// Somebody waited this share of the last 10 s (percent, PSI's `avg10`) as a stall begins: the
/// machine is contended now, and every process is looked at from the stall's first look.
const BUSY_AVG10: f64 = 1.0;

/// The kernel's pressure stall totals, machine-wide (`/proc/pressure/{cpu,io,memory}`, `some`):
/// how long, in µs, at least one task waited for a CPU, for storage, for memory. Nobody took the
/// CPUs (or storage) from the target in a stall in which nobody waited for one: every process's
/// CPU time (its `stat`, about 10 µs of CPU a process here) is read at a stall's first look only
/// when the machine was short of CPUs or memory in the last seconds (`busy`), else once somebody
/// waited for one; its storage I/O (its `io`, as much again) the same way for storage or memory.
/// Measured (`bench/watch_overhead.sh`, 30 idle JVMs and one whose safepoints wait on a loop, a
/// stall every 300 ms on a machine short of CPUs): reading both files for every process twice a
/// stall was 80% of this thread's time, 2% of a core.
///
/// Storage is asked of the target too: nobody took storage from it unless a thread of it waited
/// uninterruptibly (`D`: a page read in, a writeback, an fsync) in the stall (`storage`, from the
/// sampling loop's looks), or memory was short. Measured (`watch` over one JVM whose safepoints
/// wait on a loop three times a second, the machine's storage pressure above 1% from the
/// recording's own writes): both looks at every process's storage I/O were 30% of `watch`'s
/// perf samples, for stalls in which the JVM waited for no storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pressure {
    cpu_us: u64,
    io_us: u64,
    memory_us: u64,
    busy: Busy,
}

/// Somebody waited this share of the last 10 s as a stall began ([`BUSY_AVG10`]), for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Busy {
    cpu: bool,
    io: bool,
    memory: bool,
}

/// What of every process is worth reading: its CPU time, its storage I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Wants {
    cpu: bool,
    io: bool,
}

impl Wants {
    fn any(self) -> bool {
        self.cpu || self.io
    }
}

impl Pressure {
    /// Now, without the CPU's (0, not busy) unless `cpu`: where the BPF recorder counts who
    /// took the CPUs, whether anybody waited for one does not matter.
    fn now_of(cpu: bool) -> Option<Pressure> {
        let read = |r: &str| procwatch::procfile::read(format!("/proc/pressure/{r}")).ok();
        let cpu = if cpu { Some(read("cpu")?) } else { None };
        let (io, memory) = (read("io")?, read("memory")?);
        let total = procwatch::system::psi_some_total_us;
        let busy = |t: &str| procwatch::system::psi_some_avg10(t).unwrap_or(0.0) >= BUSY_AVG10;
        Some(Pressure {
            cpu_us: cpu.as_deref().map_or(Some(0), total)?,
            io_us: total(&io)?,
            memory_us: total(&memory)?,
            busy: Busy {
                cpu: cpu.as_deref().is_some_and(busy),
                io: busy(&io),
                memory: busy(&memory),
            },
        })
    }

    /// What the machine was short of as the stall began: CPUs or memory (reclaim takes CPUs),
    /// storage (where the target waited for it, `storage`) or memory (reclaim writes and reads
    /// swap).
    fn busy(self, storage: bool) -> Wants {
        let b = self.busy;
        Wants { cpu: b.cpu || b.memory, io: (b.io && storage) || b.memory }
    }

    /// Somebody waited since `self` (read at a stall's begin) as `now` reads: for a CPU or
    /// memory, for storage (where the target waited for it, `storage`) or memory.
    fn waited_by(self, now: Pressure, storage: bool) -> Wants {
        let grew = |a: u64, b: u64| b.saturating_sub(a) >= WAITED_US;
        let memory = grew(self.memory_us, now.memory_us);
        Wants {
            cpu: grew(self.cpu_us, now.cpu_us) || memory,
            io: (grew(self.io_us, now.io_us) && storage) || memory,
        }
    }
}

/// What one process ran in a stall: its own CPU time and its children's that ended (ns).
#[derive(Default)]
struct Use {
    pid: i32,
    comm: String,
    own_ns: u64,
    children_ns: u64,
}

/// A thread of the target's storage reads and writes so far: `(tid, comm, read, written)`.
type ThreadIo = (i32, String, u64, u64);

/// Every process's use at some look, from which what each took is counted (shared by the CPU
/// and the storage baselines when one look gave both).
#[derive(Clone)]
struct Baseline {
    /// When it was read.
    from: u64,
    procs: std::rc::Rc<Vec<procwatch::cpuuse::ProcCpu>>,
}

enum Msg {
    Begin {
        stall: u32,
        t: u64,
    },
    /// A thread of the target waits uninterruptibly in the stall (first seen by the loop).
    Storage {
        stall: u32,
    },
    End {
        stall: u32,
        t: u64,
        done: Sender<()>,
    },
}

/// The thread, and what is sent to it.
pub(super) struct WhoWriter {
    tx: Option<Sender<Msg>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl WhoWriter {
    /// Looks for who set off the stalls of `pid`, into `path`; `signals` reads who sent it
    /// signals and froze its cgroups (root only); `tally` counts every process's CPU time while
    /// a stall lasts (the BPF recorder), instead of reading each process's `stat` at both ends.
    pub(super) fn start(
        pid: i32,
        path: &std::path::Path,
        signals: Option<procwatch::trace::WhoReader>,
        tally: Option<offcpu::CpuTally>,
        live: Option<&recording::Live>,
    ) -> anyhow::Result<WhoWriter> {
        let mut out = Appender::open(path)?;
        if let Some(l) = live {
            l.keep_who(&mut out);
        }
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let thread =
            std::thread::Builder::new().name("stallscope-who".into()).spawn(move || {
                Looker::new(pid, out, signals, tally).run(rx);
            })?;
        Ok(WhoWriter { tx: Some(tx), thread: Some(thread) })
    }

    pub(super) fn begin(&self, stall: u32) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Begin { stall, t: mono_ns() });
        }
    }

    /// A thread of the target was seen waiting uninterruptibly (`D`) in stall `stall`: who
    /// took storage is worth counting.
    pub(super) fn storage(&self, stall: u32) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Storage { stall });
        }
    }

    /// Ends stall `stall`: waits (briefly) until its lines are written.
    pub(super) fn end(&self, stall: u32) {
        let (done, wait) = std::sync::mpsc::channel();
        if let Some(tx) = &self.tx
            && tx.send(Msg::End { stall, t: mono_ns(), done }).is_ok()
        {
            let _ = wait.recv_timeout(END_PATIENCE);
        }
    }
}

impl Drop for WhoWriter {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The stall being looked at.
struct Open {
    stall: u32,
    /// The stall's first look.
    t: u64,
    /// Every process's CPU time from when it is counted: the stall's first look, the last
    /// stall's end look (just before), or the later look after somebody waited (see
    /// [`Pressure`]); None until taken.
    cpu: Option<Baseline>,
    /// The same for storage I/O (every process's, read with its CPU time, and the target's
    /// threads').
    io: Option<(Baseline, Vec<ThreadIo>)>,
    /// With the BPF recorder, every process's CPU time counted from the stall's first look
    /// (`cpu` is then None): counting on, and its first look.
    counted: Option<(offcpu::Counting, offcpu::TallyLook)>,
    /// The kernel's pressure at the stall's first look (None: not known, everything is looked
    /// at then).
    pressure: Option<Pressure>,
    /// A thread of the target was seen waiting uninterruptibly (`Msg::Storage`).
    storage: bool,
    /// The last VM operation written (its class and caller), and its caller's name; the last
    /// stop state.
    last_op: Option<(String, Option<i32>)>,
    last_caller_comm: String,
    /// The process's `/proc/PID/cgroup`, read at the stall's first look (where its freezer is).
    cgroups: Option<String>,
    last_stop: Option<(char, i32, Option<String>)>,
    last_sync: Option<procwatch::vmops::SafepointState>,
    /// Whether the GC locker held a collection back at the last look.
    last_gc_locker: Option<bool>,
    /// It was seen stopped or frozen at some look.
    saw_stop: bool,
    attach_tries: u32,
    attach_found: bool,
    signals_seen: HashSet<(u64, i32, i32)>,
}

struct Looker {
    pid: i32,
    out: Appender<Who>,
    ops: Option<Result<VmOps, String>>,
    signals: Option<procwatch::trace::WhoReader>,
    mounts: Vec<(String, String, std::path::PathBuf)>,
    open: Option<Open>,
    noted: HashSet<String>,
    /// Names the processes seen, each once.
    describer: procwatch::process::Describer,
    /// The last look at every process (with storage I/O or not): the next stall's first, if it
    /// begins soon.
    last_look: Option<(Baseline, bool)>,
    /// Counts every process's CPU time while a stall lasts (the BPF recorder).
    tally: Option<offcpu::CpuTally>,
    /// The CPUs the takers' time is a share of, read once (std reads the cgroup's quota files
    /// at each call: a tenth of this thread's time a stall, in a profile of `watch`).
    cpus: usize,
    /// The process's `status` and its cgroups' freezer files, kept open while it is watched:
    /// each of a stall's looks reads them.
    kept: procwatch::procfile::Kept,
    /// The cgroups (`/proc/PID/cgroup`) whose files `kept` holds.
    kept_for: Option<String>,
}

impl Looker {
    fn new(
        pid: i32,
        out: Appender<Who>,
        signals: Option<procwatch::trace::WhoReader>,
        tally: Option<offcpu::CpuTally>,
    ) -> Looker {
        Looker {
            pid,
            out,
            ops: None,
            signals,
            mounts: procwatch::cgroup::mounts(),
            open: None,
            noted: HashSet::new(),
            describer: procwatch::process::Describer::default(),
            last_look: None,
            tally,
            cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            kept: procwatch::procfile::Kept::default(),
            kept_for: None,
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        // What the VM operation is read with: read once, before the first stall needs it.
        self.ops = Some(VmOps::open(self.pid).map_err(|e| e.to_string()));
        loop {
            let msg = if let Some(o) = &self.open {
                let wait = poll(mono_ns().saturating_sub(o.t));
                let wait = if o.last_stop.is_some() {
                    let age = mono_ns().saturating_sub(o.t);
                    let floor = STOPPED_POLL.as_nanos() as u64;
                    wait.max(Duration::from_nanos(super::stall::stopped_every(age, floor)))
                } else {
                    wait
                };
                match rx.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => return,
                }
            };
            match msg {
                Some(Msg::Begin { stall, t }) => {
                    // A new operation may sit where the last stall's did (on its caller's stack).
                    if let Some(Ok(ops)) = self.ops.as_mut() {
                        ops.forget();
                    }
                    self.open = Some(Open {
                        stall,
                        t,
                        cpu: None,
                        io: None,
                        counted: None,
                        pressure: None,
                        storage: false,
                        last_op: None,
                        last_caller_comm: String::new(),
                        cgroups: None,
                        last_stop: None,
                        last_sync: None,
                        last_gc_locker: None,
                        saw_stop: false,
                        attach_tries: 0,
                        attach_found: false,
                        signals_seen: HashSet::new(),
                    });
                    // The VM operation first: a short stall (a 7 ms System.gc()) may be over
                    // before a look at every process (milliseconds under load) is done, and
                    // the operation with it.
                    self.look();
                    let counted = self.count_cpu(stall);
                    let pressure = Pressure::now_of(counted.is_none());
                    // The last stall's end look, if it was just now (a storm of stalls) and read
                    // what is wanted: one look at every process a stall, not two. Otherwise
                    // every process is looked at now only where the kernel's pressure cannot
                    // say later whether anybody waited (look_at_takers).
                    let mut wants =
                        pressure.map_or(Wants { cpu: true, io: true }, |p| p.busy(false));
                    wants.cpu &= counted.is_none();
                    let recent = self.last_look.take().filter(|(b, with_io)| {
                        t.saturating_sub(b.from) < REUSE_LOOK_NS && (*with_io || !wants.io)
                    });
                    let (cpu, io) = match recent {
                        Some((b, with_io)) => (Some(b), with_io),
                        None if wants.any() => (Some(look_at_all(t, wants.io)), wants.io),
                        None => (None, false),
                    };
                    let io = io.then(|| {
                        let b = cpu.clone().expect("read with the CPU time");
                        (b, procwatch::cpuuse::thread_io(self.pid))
                    });
                    if let Some(o) = self.open.as_mut() {
                        // Counted by the BPF recorder: the look (taken for storage) not needed.
                        let cpu = cpu.filter(|_| counted.is_none());
                        (o.cpu, o.io, o.counted, o.pressure) = (cpu, io, counted, pressure);
                    }
                }
                Some(Msg::Storage { stall }) => {
                    if let Some(o) = self.open.as_mut().filter(|o| o.stall == stall) {
                        o.storage = true;
                        self.look_at_takers();
                    }
                }
                Some(Msg::End { stall, t, done }) => {
                    if self.open.as_ref().is_some_and(|o| o.stall == stall) {
                        self.look();
                        // Signals matter to a stall the process was stopped in (the ring is
                        // read then, too: this catches one sent after that read).
                        if self.open.as_ref().is_some_and(|o| o.saw_stop) {
                            self.signals(t);
                        }
                        self.use_to(t);
                        self.open = None;
                    }
                    let _ = done.send(());
                }
                None => {
                    self.look();
                    self.look_at_takers();
                }
            }
        }
    }

    fn line(&mut self, w: &Who) {
        let _ = self.out.line(w);
    }

    /// Says once why something could not be looked for.
    fn note(&mut self, stall: u32, note: String) {
        if self.noted.insert(note.clone()) {
            self.line(&Who::Note { t: mono_ns(), stall, note });
        }
    }

    /// One look: the VM operation, where the safepoint stands, the GC locker, and the process's
    /// stop state.
    fn look(&mut self) {
        let Some(stall) = self.open.as_ref().map(|o| o.stall) else { return };
        // The JVM's statics together (one system call), then the operation they point at.
        let look = match self.ops.as_ref() {
            Some(Ok(ops)) => ops.look(),
            _ => None,
        };
        let op = match self.ops.as_mut() {
            Some(Ok(ops)) => look.and_then(|l| ops.current_at(l.op).ok().flatten()),
            Some(Err(e)) => {
                let e = e.clone();
                self.note(stall, format!("the VM operation and who asked for it cannot be read from the JVM's memory: {e}"));
                None
            }
            None => None,
        };
        if let Some(op) = op {
            self.vm_operation(stall, op);
        }
        if let Some(l) = look {
            self.safepoint_state(stall, l.sync);
            self.gc_locker(stall, l.gc_held_back);
        }
        self.stop_state(stall);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn somebody_waited_once_either_pressure_grew_by_a_millisecond() {
        let none = Wants::default();
        let idle = Busy::default();
        let at = Pressure { cpu_us: 5_000, io_us: 9_000, memory_us: 100, busy: idle };
        let p = |cpu_us, io_us, memory_us| Pressure { cpu_us, io_us, memory_us, busy: idle };
        assert_eq!(at.waited_by(at, true), none);
        assert_eq!(at.waited_by(p(5_999, 9_999, 1_099), true), none);
        // A CPU wait asks for every process's CPU time, a storage wait for its storage I/O, a
        // memory wait (reclaim takes CPUs and storage) for both.
        assert_eq!(at.waited_by(p(6_000, 9_000, 100), true), Wants { cpu: true, io: false });
        assert_eq!(at.waited_by(p(5_000, 10_000, 100), true), Wants { cpu: false, io: true });
        assert_eq!(at.waited_by(p(5_000, 9_000, 1_100), true), Wants { cpu: true, io: true });
        // Storage others waited for, where the target waited for none: nobody took it from it.
        assert_eq!(at.waited_by(p(5_000, 10_000, 100), false), none);
        assert_eq!(at.waited_by(p(5_000, 9_000, 1_100), false), Wants { cpu: true, io: true });
        // Totals that went back (another pressure file, a reset) are no wait.
        assert_eq!(at.waited_by(p(0, 0, 0), true), none);
        // Short of storage as the stall began: worth reading only once the target waits for it;
        // short of memory, at once.
        let storage = Pressure { busy: Busy { io: true, ..idle }, ..at };
        assert_eq!(storage.busy(false), none);
        assert_eq!(storage.busy(true), Wants { cpu: false, io: true });
        let memory = Pressure { busy: Busy { memory: true, ..idle }, ..at };
        assert_eq!(memory.busy(false), Wants { cpu: true, io: true });
        // Read here: this kernel has pressure stall information.
        assert!(Pressure::now_of(true).is_some());
    }
}
