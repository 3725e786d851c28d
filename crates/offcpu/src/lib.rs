//! Event-driven off-CPU evidence (root, or CAP_BPF with CAP_PERFMON): a BPF program on the
//! scheduler's tracepoints (`sched_switch`, and `sched_waking`, which fires in the waker's own
//! context) records, for the
//! threads of the target processes only, every interval a thread spends off a CPU that lasts at
//! least `min_ns`: when it began and ended (CLOCK_MONOTONIC ns), the state it left in, its kernel
//! stack, the thread that woke it (and that thread's kernel stack), and for a preempted thread
//! who held its CPU longest while it waited, and for how long. The filter is in the kernel (a map of tgids), so other processes pay only
//! the tracepoints' hash lookup; every map and the ring buffer are bounded.
//!
//! The ring buffer does not wake the reader per record: a thread of ours empties it every
//! [`DRAIN`] into a window of the last [`Options::keep_ns`], which [`OffCpu::waits`] reads when
//! a stall ends.
//!
//! Invariant: nothing outlives the process. The programs are attached through BPF links held
//! only by file descriptors (nothing is pinned), so the kernel detaches and frees them when the
//! process exits, even by SIGKILL (tests/offcpu.rs checks with the kernel's list of programs).

mod alarm;
mod counters;
mod entries;
mod ksyms;
mod program;
mod raw;
mod safepoints;
mod said;
mod slots;
mod tally;

pub use alarm::{Alarm, Woke};
pub use counters::{Counters, TlbRow, cpu_list};
pub use entries::Entries;

pub use ksyms::Ksyms;
pub use program::now_ns;
use program::*;
pub use raw::{RawWait, RawWaker, parse_entry, parse_event, state_letter};
pub use safepoints::*;
pub use tally::{Counting, CpuTally, Look as TallyLook, ProcTime, taken as tally_taken};

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod skel {
    #![allow(clippy::all, clippy::pedantic, missing_docs, non_camel_case_types, dead_code)]
    include!(concat!(env!("OUT_DIR"), "/offcpu.skel.rs"));
}

/// How often the ring buffer is emptied into the window.
pub const DRAIN: Duration = Duration::from_millis(100);

/// The programs' names as the kernel lists them (`bpftool prog show`: the first 15 bytes of the
/// function's name), as loaded on a kernel with BTF tracepoints that pass `prev_state` (5.18+).
/// Elsewhere `on_switch`, the classic tracepoint's, stands in for `on_switch_btf`.
/// The JVM's safepoint probes' programs load with them, attached only when asked
/// ([`Reader::watch_safepoints`]).
pub const PROGRAM_NAMES: [&str; 4] = ["on_switch_btf", "on_waking", "on_sp_begin", "on_sp_end"];

#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Shorter intervals off a CPU are not recorded.
    pub min_ns: u64,
    /// The kernel stack of a wait, and its waker's, are taken only for waits at least this
    /// long (shorter ones are recorded with their times, state and waker).
    pub stack_ns: u64,
    pub waker_stack_ns: u64,
    /// How long finished waits are kept for a stall to ask for them.
    pub keep_ns: u64,
    /// The most waits kept (oldest dropped first).
    pub keep_max: usize,
    /// Which waits of a process that is not armed (no stall of its under way) are recorded
    /// when they end. An armed process's are all recorded, and those still going on are read
    /// as ever, whatever this says.
    pub record_unarmed: Unarmed,
    /// Hand out the watchdog's alarms ([`Reader::alarm`]): it fires when the meter thread named
    /// with [`Reader::watch_meter`] stops ticking, so the recorder need not look once per
    /// threshold (`run`). It runs in `on_switch_btf`; where the kernel lacks that program (no
    /// `prev_state` in the BTF sched_switch: before 5.18) the classic `on_switch` loads instead,
    /// without it, and [`Reader::alarm`] says so.
    pub watchdog: bool,
    /// Read `sched_switch` through the classic tracepoint, as a kernel before 5.18 must (no
    /// watchdog then): for the tests of that path.
    pub classic_switch: bool,
    /// Entries in the array that holds a target thread's wait at the low bits of its tid (a
    /// power of two; a thread whose index another holds is kept in a hash instead). 1: every
    /// thread but one in the hash, for the tests of that path.
    pub entry_slots: u32,
    /// Count TLB shootdowns in the kernel ([`Counters`]), aligned to the `TLB` row this reads,
    /// once the programs are loaded (None: not counted; the file is read).
    pub tlb_row: Option<TlbRow>,
}

/// Which finished waits of a process not armed go through the ring buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unarmed {
    /// None: a stall's waits that ended before it was armed are not seen (`watch`).
    Nothing,
    /// Those the thread did not choose: preempted, uninterruptible, stopped; not an
    /// interruptible sleep (a futex, a socket, a timer), which an idle JVM's threads do
    /// hundreds of times a second (`run`).
    Involuntary,
    /// Every one.
    Everything,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            min_ns: 1_000_000,
            stack_ns: 4_000_000,
            waker_stack_ns: 4_000_000,
            keep_ns: 60_000_000_000,
            keep_max: 50_000,
            record_unarmed: Unarmed::Involuntary,
            watchdog: false,
            classic_switch: false,
            entry_slots: 16384,
            tlb_row: None,
        }
    }
}

/// One wait, its stacks named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub start: u64,
    /// None while it goes on (the thread is still off a CPU).
    pub end: Option<u64>,
    pub woken: Option<u64>,
    /// The state it left the CPU in: `R` (preempted), `S`, `D`, `T`, `t`, `I` …
    pub state: char,
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
    pub cpu: u32,
    /// Its kernel stack where it left the CPU, innermost first.
    pub stack: Vec<String>,
    pub waker: Option<Waker>,
    /// A preempted thread's: who held the CPU it left longest while it waited for one (at
    /// first, who took it from it; see `held` in the program).
    pub instead: Option<(i32, String)>,
    /// How long `instead` held that CPU (None: the wait ended before it left it).
    pub instead_ns: Option<u64>,
}

/// A thread off a CPU now, not by its own choice: preempted (`R`, waiting for a CPU), in an
/// uninterruptible wait (`D`: a fault, I/O, a lock in the kernel), or stopped (`T`, `t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub tid: i32,
    pub comm: String,
    /// When it left the CPU (CLOCK_MONOTONIC ns).
    pub start: u64,
    pub state: char,
}

/// Whether a thread that left a CPU in `state` was held there rather than waiting by choice
/// (an interruptible sleep: a futex, a socket, a timer, which a process asks for itself).
pub fn involuntary(state: char) -> bool {
    matches!(state, 'R' | 'D' | 'T' | 't')
}

/// Whether this kernel and these privileges let the program load, and if not, why: checked
/// before a process is started whose stalls only the program can find.
pub fn available() -> Result<(), String> {
    check_layout()?;
    Ksyms::load().map(|_| ())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waker {
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
    pub stack: Vec<String>,
}

enum Cmd {
    Stop,
    /// Record `tgid`'s threads; armed (true) or not: whether their waits' stacks are taken.
    Arm(i32, bool),
    Add(i32),
    Remove(i32),
    /// Watch this meter thread (host tid; 0: none): alarm `after_ns` after its last tick (read
    /// at that address in its process; 0: after its last sleep).
    Watch(u32, u64, u64),
    /// Attach the safepoint probes of this libjvm.so in this process (slot 0).
    Safepoints {
        pid: i32,
        libjvm: std::path::PathBuf,
        reply: mpsc::Sender<Result<(), String>>,
    },
    /// Watch this JVM's safepoints in a slot of its own (1 on), with its own watchdog timer
    /// alarming `after_ns` into one; the probes of its libjvm.so attached in every process.
    SafepointsOf {
        pid: i32,
        libjvm: std::path::PathBuf,
        after_ns: u64,
        reply: mpsc::Sender<Result<(usize, u64), String>>,
    },
    /// Attach the probes of this libjvm.so in every process now, if not yet (no answer: a
    /// later [`Cmd::SafepointsOf`] says why they could not be).
    Prepare(std::path::PathBuf),
    /// Stop watching this JVM's safepoints in this slot (free again, unless the JVM has another
    /// slot by now: watched again).
    Unslot(i32, usize, u64),
    /// The threads of this process held off a CPU now, not by their own choice.
    Held {
        tgid: i32,
        reply: mpsc::Sender<Vec<Held>>,
    },
    /// Waits of these processes overlapping `[from, to]`, and those going on now.
    Read {
        tgids: Vec<i32>,
        from: u64,
        to: u64,
        reply: mpsc::Sender<Vec<RawWait>>,
    },
}

/// The loaded, attached program and the thread that drains it. Dropping it detaches everything.
pub struct OffCpu {
    tx: Option<mpsc::Sender<Cmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
    reader: Reader,
    /// Cleared as it is dropped (the program detached): see [`Entries`].
    live: Arc<std::sync::atomic::AtomicBool>,
}

/// A handle that reads waits from another thread (the recorder's writer); it reads nothing once
/// the [`OffCpu`] is dropped.
#[derive(Clone)]
pub struct Reader {
    tx: mpsc::Sender<Cmd>,
    ksyms: Arc<Ksyms>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    /// The watchdog's alarm ring, or why there is none.
    alarms: Arc<Result<std::os::fd::OwnedFd, String>>,
    /// The safepoint probes' state, mapped.
    sp: Arc<Option<SpMap>>,
    /// Every process's CPU time while a stall is under way (the BTF program only).
    tally: Option<CpuTally>,
    /// The target threads' entries, mapped (None where the kernel refused the mapping).
    entries: Option<Arc<Entries>>,
}

impl OffCpu {
    /// Loads and attaches the program, recording the threads of `tgids` (more can be added).
    /// The error says what is missing: privilege, BPF, the tracepoints, or kernel symbols.
    pub fn start(tgids: &[i32], opts: Options) -> Result<OffCpu, String> {
        check_layout()?;
        let ksyms = Ksyms::load()?;
        let (tx, rx) = mpsc::channel::<Cmd>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Ready, String>>();
        let lost = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let lost2 = lost.clone();
        let first: Vec<i32> = tgids.to_vec();
        // Whether the program still runs: entries read after it is gone would say every thread
        // is still, forever.
        let live = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let registered = entries::Registered::default();
        let registered2 = registered.clone();
        let thread = std::thread::Builder::new()
            .name("stallscope-bpf".into())
            .spawn(move || run(first, opts, rx, ready_tx, lost2, registered2))
            .map_err(|e| format!("could not start the BPF reader thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok((alarms, sp, tally, toff))) => {
                let alarms = Arc::new(alarms);
                let sp = Arc::new(sp.as_ref().and_then(SpMap::open));
                let tally = tally.map(CpuTally::new);
                let ksyms = Arc::new(ksyms);
                let entries = toff
                    .and_then(|fd| Entries::open(&fd, entry_slots(&opts), live.clone(), registered))
                    .map(Arc::new);
                let reader = Reader { tx: tx.clone(), ksyms, lost, alarms, sp, tally, entries };
                Ok(OffCpu { tx: Some(tx), thread: Some(thread), reader, live })
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err("the BPF reader thread ended before loading the program".into())
            }
        }
    }

    /// See [`Reader::arm`].
    pub fn arm(&self, tgid: i32, armed: bool) {
        self.reader.arm(tgid, armed);
    }

    /// A handle for reading from another thread.
    pub fn reader(&self) -> Reader {
        self.reader.clone()
    }

    /// Records the ring buffer had no room for, since the start.
    pub fn lost(&self) -> u64 {
        self.reader.lost()
    }

    /// See [`Reader::waits`].
    pub fn waits(&self, tgids: &[i32], from: u64, to: u64) -> Vec<Wait> {
        self.reader.waits(tgids, from, to)
    }
}

/// One JVM's safepoints watched beside others' ([`Reader::watch_safepoints_of`]); dropped, it
/// stops watching them.
pub struct SafepointSlot {
    reader: Reader,
    pid: i32,
    slot: usize,
    /// Which watching of the slot this is (a slot freed is reused for another JVM).
    generation: u64,
    since: u64,
}

impl SafepointSlot {
    /// Its safepoints as its probes report them; None once the recorder is gone, the JVM is
    /// no longer recorded, or it is watched in another slot since.
    pub fn read(&self) -> Option<Safepoints> {
        self.reader.sp.as_ref().as_ref()?.read(self.slot, Some(self.generation))
    }

    /// When watching began (CLOCK_MONOTONIC ns): a safepoint under way then is not seen by the
    /// probes (its begin came before they were in).
    pub fn since(&self) -> u64 {
        self.since
    }
}

impl Drop for SafepointSlot {
    fn drop(&mut self) {
        let _ = self.reader.tx.send(Cmd::Unslot(self.pid, self.slot, self.generation));
    }
}

impl std::fmt::Debug for SafepointSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offcpu::SafepointSlot({} in slot {})", self.pid, self.slot)
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("offcpu::Reader")
    }
}

impl Reader {
    /// Records the threads of `tgid` too (`watch`: a JVM it guards).
    pub fn add(&self, tgid: i32) {
        let _ = self.tx.send(Cmd::Add(tgid));
    }

    /// While a stall of `tgid` is under way (armed), the waits of its threads that end get
    /// their kernel stacks and their wakers'; unarmed, only their times, states and wakers.
    pub fn arm(&self, tgid: i32, armed: bool) {
        let _ = self.tx.send(Cmd::Arm(tgid, armed));
    }

    /// Stops recording `tgid`'s threads.
    pub fn remove(&self, tgid: i32) {
        let _ = self.tx.send(Cmd::Remove(tgid));
    }

    /// Watches the meter thread `tid` (host numbering): an alarm `after_ns` (its resolution
    /// plus the threshold) after its last tick, whose CLOCK_MONOTONIC ns the meter keeps at
    /// `tick_addr` in its own process (the heartbeat's `last_tick_ns`), or, with `tick_addr` 0
    /// or unreadable, after it last went to sleep. `tid` 0 stops watching.
    pub fn watch_meter(&self, tid: u32, after_ns: u64, tick_addr: u64) {
        let _ = self.tx.send(Cmd::Watch(tid, after_ns, tick_addr));
    }

    /// Attaches the safepoint probes of `libjvm` (see [`libjvm_of`]) in the JVM `pid`: from
    /// then on [`Reader::safepoints`] reads its safepoints as they begin and end, and the
    /// watchdog alarms once one has lasted `after_ns` (once a thread of the JVM leaves a CPU
    /// after that: the VM thread waiting, a thread blocking at it, the meter at its next tick).
    /// One JVM at a time; why not, when the probes cannot be attached.
    pub fn watch_safepoints(
        &self,
        pid: i32,
        libjvm: &std::path::Path,
        after_ns: u64,
    ) -> Result<(), String> {
        let Some(sp) = self.sp.as_ref() else {
            return Err("the BPF program's safepoint map could not be mapped".into());
        };
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Cmd::Safepoints { pid, libjvm: libjvm.to_path_buf(), reply })
            .map_err(|_| "the BPF reader has stopped".to_string())?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the BPF reader did not answer".to_string())??;
        sp.word(0, SP_AFTER).store(after_ns, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Starts attaching the probes of `libjvm` (see [`libjvm_of`]) in every process that maps
    /// it, without waiting: the first JVM of a libjvm.so takes some 15 ms to attach (its notes
    /// read twice), which a JVM just started should not spend unwatched. Asked as a JVM is
    /// found, so that they are attached while its counters are still being made; a later
    /// [`Reader::watch_safepoints_of`] then finds them attached (or says why they are not).
    pub fn prepare_safepoints(&self, libjvm: &std::path::Path) {
        if self.sp.is_some() {
            let _ = self.tx.send(Cmd::Prepare(libjvm.to_path_buf()));
        }
    }

    /// Watches the safepoints of the JVM `pid` (one of the processes recorded, [`Reader::add`])
    /// in a slot of its own, beside others' (`watch`): its `libjvm` (see [`libjvm_of`]) has its
    /// probes attached in every process that maps it (once per file), the program keeping only
    /// the JVMs watched; the watchdog's alarm ([`Reader::alarm`]) fires once one of its
    /// safepoints has lasted `after_ns` (at the first switch of one of its threads after the
    /// safepoint began, or later). Dropping the handle stops watching. Why not, when no slot is
    /// free or the probes cannot be attached.
    pub fn watch_safepoints_of(
        &self,
        pid: i32,
        libjvm: &std::path::Path,
        after_ns: u64,
    ) -> Result<SafepointSlot, String> {
        if self.sp.is_none() {
            return Err("the BPF program's safepoint map could not be mapped".into());
        }
        let (reply, rx) = mpsc::channel();
        self.tx
            .send(Cmd::SafepointsOf { pid, libjvm: libjvm.to_path_buf(), after_ns, reply })
            .map_err(|_| "the BPF reader has stopped".to_string())?;
        let since = now_ns();
        let (slot, generation) = rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the BPF reader did not answer".to_string())??;
        Ok(SafepointSlot { reader: self.clone(), pid, slot, generation, since })
    }

    /// The watched JVM's safepoints, as its probes report them; None before
    /// [`Reader::watch_safepoints`] succeeded.
    pub fn safepoints(&self) -> Option<Safepoints> {
        self.sp.as_ref().as_ref()?.read(0, None)
    }

    /// A reader of the watchdog's alarms, or why there is none (not asked for in [`Options`],
    /// or refused by this kernel).
    pub fn alarm(&self) -> Result<Alarm, String> {
        match &*self.alarms {
            Ok(fd) => Alarm::open(fd),
            Err(e) => Err(e.clone()),
        }
    }

    /// The threads of `tgid` held off a CPU now, not by their own choice ([`involuntary`]),
    /// whatever for how long; empty once the recorder is gone. Reads only the map of threads off
    /// a CPU, not the window.
    pub fn held(&self, tgid: i32) -> Vec<Held> {
        let (reply, rx) = mpsc::channel();
        if self.tx.send(Cmd::Held { tgid, reply }).is_err() {
            return vec![];
        }
        rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default()
    }

    /// The target threads' entries, to tell which have not run since some moment (see
    /// [`Entries`]); None where the kernel would not map them.
    pub fn entries(&self) -> Option<Arc<Entries>> {
        self.entries.clone()
    }

    /// Every process's CPU time, counted while a stall is under way; None with the classic
    /// tracepoint's program (a kernel before 5.18), which does not count it.
    pub fn cpu_tally(&self) -> Option<CpuTally> {
        self.tally.clone()
    }

    /// Records the ring buffer had no room for, since the start.
    pub fn lost(&self) -> u64 {
        self.lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The waits of `tgids`' threads that overlap `[from, to]` (finished, oldest first), and
    /// those still going on, their stacks named. Empty once the recorder is gone.
    pub fn waits(&self, tgids: &[i32], from: u64, to: u64) -> Vec<Wait> {
        let (reply, rx) = mpsc::channel();
        if self.tx.send(Cmd::Read { tgids: tgids.to_vec(), from, to, reply }).is_err() {
            return vec![];
        }
        let raw = rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
        raw.into_iter().map(|r| self.named(r)).collect()
    }

    fn named(&self, r: RawWait) -> Wait {
        let names = |f: &[u64]| f.iter().map(|&a| self.ksyms.name(a)).collect::<Vec<_>>();
        Wait {
            start: r.start,
            end: r.end,
            woken: r.woken,
            state: state_letter(r.state),
            tid: r.tid,
            tgid: r.tgid,
            comm: r.comm,
            cpu: r.cpu,
            stack: names(&r.frames),
            waker: r.waker.map(|w| Waker {
                tid: w.tid,
                tgid: w.tgid,
                comm: w.comm,
                stack: names(&w.frames),
            }),
            instead: r.instead,
            instead_ns: r.instead_ns,
        }
    }
}

impl Drop for OffCpu {
    fn drop(&mut self) {
        self.live.store(false, std::sync::atomic::Ordering::Release);
        // Readers hold senders too: say stop rather than wait for every sender to go.
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Cmd::Stop);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
