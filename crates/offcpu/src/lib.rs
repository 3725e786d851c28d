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
mod entries;
mod ksyms;
mod raw;
mod said;
mod slots;
mod tally;

pub use alarm::{Alarm, Woke};
pub use entries::Entries;

pub use ksyms::Ksyms;
pub use raw::{RawWait, RawWaker, parse_entry, parse_event, state_letter};
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

/// The program's `sp` map (SP_SLOTS `sp_state`s), mapped into our memory: read and written in
/// place.
struct SpMap {
    words: *mut AtomicU64,
    len: usize,
}

// SAFETY: the mapping is owned by the SpMap and only touched through atomics.
unsafe impl Send for SpMap {}
unsafe impl Sync for SpMap {}

impl SpMap {
    fn open(fd: &std::os::fd::OwnedFd) -> Option<SpMap> {
        use std::os::fd::AsRawFd;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (SP_SLOTS * SP_WORDS * 8).div_ceil(page) * page;
        // SAFETY: maps the array map's values (BPF_F_MMAPABLE), checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(SpMap { words: p.cast(), len })
    }

    /// Word `i` of slot `slot`'s `sp_state`.
    fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        assert!(i < SP_WORDS && slot < SP_SLOTS);
        // SAFETY: the map is SP_SLOTS `sp_state`s of SP_WORDS u64s each (a multiple of 8 bytes,
        // so laid out back to back) at the start of the live mapping.
        unsafe { &*self.words.add(slot * SP_WORDS + i) }
    }

    /// Clears a slot: not watched first (a reader then reads nothing), then the rest.
    fn clear(&self, slot: usize) {
        use std::sync::atomic::Ordering::Release;
        self.word(slot, SP_AFTER).store(0, Release);
        self.word(slot, SP_GEN).store(0, Release);
        for i in 0..SP_WORDS {
            self.word(slot, i).store(0, Release);
        }
    }

    /// Slot `slot`'s safepoints; None while it is not watched, or (`generation`) watched again since
    /// (another JVM's now).
    fn read(&self, slot: usize, generation: Option<u64>) -> Option<Safepoints> {
        use std::sync::atomic::Ordering::Acquire;
        if self.word(slot, SP_AFTER).load(Acquire) == 0
            || generation.is_some_and(|g| self.word(slot, SP_GEN).load(Acquire) != g)
        {
            return None;
        }
        // The probes write without a lock: read until the begin count holds still around it.
        loop {
            let count = self.word(slot, SP_SEQ).load(Acquire);
            let open = self.word(slot, SP_OPEN).load(Acquire);
            let mut recent = [(0, None); SP_RING];
            for (i, r) in recent.iter_mut().enumerate().take(count.min(SP_RING as u64) as usize) {
                let k = (count - 1 - i as u64) as usize % SP_RING;
                let end = self.word(slot, 4 + 2 * k + 1).load(Acquire);
                *r = (self.word(slot, 4 + 2 * k).load(Acquire), (end != 0).then_some(end));
            }
            if self.word(slot, SP_SEQ).load(Acquire) == count {
                return Some(Safepoints { open_since: (open != 0).then_some(open), count, recent });
            }
        }
    }
}

impl Drop for SpMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, unmapped once.
        unsafe { libc::munmap(self.words.cast(), self.len) };
    }
}

/// `struct sp_state`'s words: open_since, seq, after_ns, gen, then SP_RING (begin, end) pairs.
const SP_RING: usize = 8;
/// Slots in the `sp` map: `run`'s one JVM in slot 0, `watch`'s JVMs from 1.
const SP_SLOTS: usize = 255;
const SP_WORDS: usize = 4 + 2 * SP_RING;
const SP_OPEN: usize = 0;
const SP_SEQ: usize = 1;
const SP_AFTER: usize = 2;
const SP_GEN: usize = 3;

/// The JVM's safepoints as its own probes report them (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Safepoints {
    /// The safepoint under way began then.
    pub open_since: Option<u64>,
    /// How many have begun since the probes were attached.
    pub count: u64,
    /// The last few to begin, newest first: (begin, end), end None while it lasts.
    pub recent: [(u64, Option<u64>); SP_RING],
}

impl Safepoints {
    /// When the safepoint begun at `begin` ended, if it did and is still among the recent.
    pub fn end_of(&self, begin: u64) -> Option<u64> {
        self.recent.iter().find(|(b, _)| *b == begin).and_then(|(_, e)| *e)
    }

    /// The last to begin: (begin, end).
    pub fn last(&self) -> Option<(u64, Option<u64>)> {
        (self.count > 0).then_some(self.recent[0])
    }
}

/// The libjvm.so a running JVM loaded, as a path that reaches it from here (through the
/// process's root, so a container's does too).
pub fn libjvm_of(pid: i32) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    // A library replaced since the JVM loaded it (`… libjvm.so (deleted)`, after an upgrade)
    // is not the file at its path now: its probes there would never fire.
    let path = maps.lines().find_map(|l| {
        let mut f = l.split_whitespace().skip(5);
        let p = f.next()?;
        (p.ends_with("/libjvm.so") && f.next().is_none()).then(|| p.to_string())
    })?;
    Some(std::path::PathBuf::from(format!("/proc/{pid}/root{path}")))
}

/// Whether this libjvm.so has HotSpot's safepoint probes (`hs_private:safepoint__begin`, a
/// USDT note in every JDK 8-25 build looked at: OpenJDK, Debian's and Temurin's).
pub fn has_safepoint_probes(libjvm: &std::path::Path) -> bool {
    // A note's description ends with the provider's and the probe's names, NUL-terminated.
    const NEEDLE: &[u8] = b"hs_private\0safepoint__begin\0";
    std::fs::read(libjvm).is_ok_and(|b| b.windows(NEEDLE.len()).any(|w| w == NEEDLE))
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

/// The tracepoints' record layout the program reads (offsets as `tracefs` prints them).
const LAYOUT: [(&str, &[&str]); 1] = [(
    "sched/sched_switch",
    &[
        "char prev_comm[16];\toffset:8;",
        "prev_pid;\toffset:24;\tsize:4;",
        "long prev_state;\toffset:32;\tsize:8;",
        "char next_comm[16];\toffset:40;",
        "next_pid;\toffset:56;\tsize:4;",
    ],
)];

fn tracefs() -> Option<std::path::PathBuf> {
    let found = || {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.join("events/sched").is_dir())
    };
    found().or_else(|| {
        // Not mounted (a boot without systemd's mount of it): mounted here, as procwatch's
        // tracer does, by whoever may load BPF programs at all.
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        found()
    })
}

/// Checks that this kernel's scheduler tracepoints lay their records out as the program reads
/// them.
fn check_layout() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: no BPF off-CPU evidence (kernel stacks, wakers); rerun with sudo, or grant CAP_BPF, CAP_PERFMON and CAP_SYSLOG".into());
    }
    // on_waking is a BTF tracepoint that reads the woken task's pid by CO-RE.
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err("this kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF): no BPF off-CPU evidence".into());
    }
    let Some(fs) = tracefs() else {
        return Err("no tracefs with the sched events at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)".into());
    };
    for (event, fields) in LAYOUT {
        let p = fs.join("events").join(event).join("format");
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if let Some(f) = fields.iter().find(|f| !text.contains(*f)) {
            return Err(format!(
                "{}: the record's layout differs from what stallscope's BPF program reads (no `{}`); off-CPU evidence is off on this kernel",
                p.display(),
                f.replace('\t', " ")
            ));
        }
    }
    Ok(())
}

/// The watchdog's alarm ring (a duplicate of its fd), or why there is none.
type Alarms = Result<OwnedFd, String>;
use std::os::fd::OwnedFd;

/// The size of the program's array of entries: [`Options::entry_slots`] as a power of two, at
/// most 2^20.
fn entry_slots(opts: &Options) -> u32 {
    opts.entry_slots.clamp(1, 1 << 20).next_power_of_two()
}

fn load(
    storage: &mut std::mem::MaybeUninit<libbpf_rs::OpenObject>,
    opts: Options,
    classic: bool,
) -> Result<skel::OffcpuSkel<'_>, String> {
    use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
    said::keep();
    said::forget();
    let mut open = skel::OffcpuSkelBuilder::default()
        .open(storage)
        .map_err(|e| format!("could not open the BPF program: {e}"))?;
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.min_ns = opts.min_ns;
        ro.stack_ns = opts.stack_ns;
        ro.waker_stack_ns = opts.waker_stack_ns;
        ro.toff_mask = entry_slots(&opts) - 1;
        ro.record_unarmed = match opts.record_unarmed {
            Unarmed::Nothing => 0,
            Unarmed::Involuntary => 1,
            Unarmed::Everything => 2,
        };
    }
    open.maps
        .toff
        .set_max_entries(entry_slots(&opts))
        .map_err(|e| format!("could not size the BPF program's entries: {e}"))?;
    // The maps read here, as this build's parsers lay them out: a C struct changed without its
    // reader would otherwise read as nothing, silently.
    let m = &open.maps;
    for (name, size, want) in [
        ("toff", m.toff.value_size(), raw::ENTRY_SIZE),
        ("off", m.off.value_size(), raw::ENTRY_SIZE),
        ("tslots", m.tslots.value_size(), 8),
    ] {
        if size as usize != want {
            return Err(format!(
                "the BPF program's `{name}` values are {size} bytes, this build reads {want}: \
                 a mismatched build; rebuild stallscope"
            ));
        }
    }
    // The BTF tracepoint, or the classic one where the kernel refused it.
    open.progs.on_switch_btf.set_autoload(!classic);
    open.progs.on_switch.set_autoload(classic);
    let mut sk = open.load().map_err(|e| {
        format!(
            "the kernel refused the BPF program ({e}); it needs root, or CAP_BPF and CAP_PERFMON{}",
            said::words(20)
        )
    })?;
    sk.attach().map_err(|e| {
        format!("could not attach to the scheduler tracepoints: {e}{}", said::words(5))
    })?;
    Ok(sk)
}

/// What the reader thread hands back once the program is loaded: the alarm ring (or why none),
/// the safepoint map, the CPU time tally's maps, the threads' entries (`toff`).
type Ready = (Alarms, Option<OwnedFd>, Option<tally::Maps>, Option<OwnedFd>);

/// The reader thread: loads, attaches, then drains the ring buffer into the window every
/// [`DRAIN`] and answers commands, until the sender is dropped.
fn run(
    first: Vec<i32>,
    opts: Options,
    rx: mpsc::Receiver<Cmd>,
    ready: mpsc::Sender<Result<Ready, String>>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    registered: entries::Registered,
) {
    use libbpf_rs::MapCore;
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut again = std::mem::MaybeUninit::uninit();
    let (loaded, refused) = match load(&mut storage, opts, opts.classic_switch) {
        Err(e) if !opts.classic_switch => (load(&mut again, opts, true), Some(e)),
        Ok(sk) if opts.classic_switch => (Ok(sk), Some("the classic one asked for".into())),
        other => (other, None),
    };
    let sk = match loaded {
        Ok(sk) => sk,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let btf = refused.is_none();
    let toff_mask = entry_slots(&opts) - 1;
    let alarms: Alarms = if let Some(e) = refused {
        Err(format!("no BPF watchdog on this kernel (its BTF sched_switch was refused: {e})"))
    } else if !opts.watchdog {
        Err("no BPF watchdog asked for".into())
    } else {
        use std::os::fd::AsFd;
        sk.maps.alarms.as_fd().try_clone_to_owned().map_err(|e| format!("the BPF alarm ring: {e}"))
    };
    // Each target's level (0: not a target; 1: recorded; 2: recorded and armed) and its slot
    // in `sp` (None: its safepoints not watched), as the program's `targets` holds them.
    // The program finds them in `tslots` and, where their index is shared, `targets`.
    let mut targets: HashMap<i32, (u8, Option<usize>)> = HashMap::new();
    let slots = std::cell::RefCell::new(slots::Slots::default());
    let put = |targets: &mut HashMap<i32, (u8, Option<usize>)>, tgid: i32| {
        if targets.get(&tgid).is_some_and(|t| t.0 == 0) {
            targets.remove(&tgid);
        }
        let values: HashMap<u32, u32> = targets
            .iter()
            .map(|(&t, &(level, slot))| {
                (t as u32, level as u32 | (slot.map_or(0, |s| s as u32 + 1) << 8))
            })
            .collect();
        let w = slots.borrow_mut().set(tgid as u32, &values);
        let any = libbpf_rs::MapFlags::ANY;
        for (t, v) in &w.spilled {
            let _ = sk.maps.targets.update(&t.to_ne_bytes(), &v.to_ne_bytes(), any);
        }
        let entry = [w.entry[0].to_ne_bytes(), w.entry[1].to_ne_bytes()].concat();
        let _ = sk.maps.tslots.update(&w.slot.to_ne_bytes(), &entry, any);
        for t in &w.unspilled {
            let _ = sk.maps.targets.delete(&t.to_ne_bytes());
        }
    };
    let set = |targets: &mut HashMap<i32, (u8, Option<usize>)>, tgid: i32, level: u8| {
        targets.entry(tgid).or_insert((0, None)).0 = level;
        put(targets, tgid);
        // From now on the program makes an entry at each of its threads' first event: only
        // the BTF switch program, which knows the next thread's process (Entries::still).
        registered.set(tgid, level > 0 && btf);
    };
    for t in &first {
        set(&mut targets, *t, 1);
    }
    let window: Arc<Mutex<VecDeque<RawWait>>> = Arc::default();
    let w2 = window.clone();
    let mut b = libbpf_rs::RingBufferBuilder::new();
    let added = b.add(&sk.maps.events, move |d: &[u8]| {
        if let Some(r) = parse_event(d)
            && let Ok(mut w) = w2.lock()
        {
            w.push_back(r);
        }
        0
    });
    let ring = match added.map(|_| ()).and_then(|()| b.build()) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(format!("could not read the BPF ring buffer: {e}")));
            return;
        }
    };
    let sp = {
        use std::os::fd::AsFd;
        sk.maps.sp.as_fd().try_clone_to_owned().ok()
    };
    // This thread's own mapping of it, to reset it before the probes are attached.
    let sp_map = sp.as_ref().and_then(SpMap::open);
    // The CPU time tally: the BTF program's alone.
    let tally = btf.then(|| {
        Some(tally::Maps {
            on: libbpf_rs::MapHandle::try_from(&sk.maps.tally_on).ok()?,
            cputime: libbpf_rs::MapHandle::try_from(&sk.maps.cputime).ok()?,
            oncpu: libbpf_rs::MapHandle::try_from(&sk.maps.oncpu).ok()?,
        })
    });
    let toff = {
        use std::os::fd::AsFd;
        sk.maps.toff.as_fd().try_clone_to_owned().ok()
    };
    let _ = ready.send(Ok((alarms, sp, tally.flatten(), toff)));
    // The safepoint probes' links, while attached: slot 0's (one process), and those attached
    // in every process, once per libjvm.so (its device and inode).
    let mut probes: Vec<libbpf_rs::Link> = Vec::new();
    let mut everywhere: HashMap<(u64, u64), Vec<libbpf_rs::Link>> = HashMap::new();
    // The last generation handed out (slots watched, one after the other).
    let mut gens = 0u64;
    let attach = |prog: &libbpf_rs::ProgramMut, pid: i32, libjvm: &std::path::Path, name: &str| {
        said::forget();
        prog.attach_usdt(pid, libjvm, "hs_private", name).map_err(|e| {
            format!(
                "could not attach the JVM's safepoint probe hs_private:{name} in {} (pid {pid}): {e}{}",
                libjvm.display(),
                said::words(3)
            )
        })
    };
    // Once per libjvm.so file (its device and inode): the end probe first, as a begin seen
    // without its end would hold a safepoint open until the next one.
    let attach_everywhere = |everywhere: &mut HashMap<(u64, u64), Vec<libbpf_rs::Link>>,
                             meta: &std::fs::Metadata,
                             libjvm: &std::path::Path|
     -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        if let std::collections::hash_map::Entry::Vacant(v) =
            everywhere.entry((meta.dev(), meta.ino()))
        {
            let e = attach(&sk.progs.on_sp_end, -1, libjvm, "safepoint__end")?;
            let b = attach(&sk.progs.on_sp_begin, -1, libjvm, "safepoint__begin")?;
            v.insert(vec![e, b]);
        }
        Ok(())
    };
    let drain = |window: &Mutex<VecDeque<RawWait>>| {
        let _ = ring.consume();
        let now = now_ns();
        if let Ok(mut w) = window.lock() {
            while w.len() > opts.keep_max
                || w.front().is_some_and(|f| f.end.unwrap_or(now) + opts.keep_ns < now)
            {
                w.pop_front();
            }
        }
        let zero = 0u32.to_ne_bytes();
        if let Ok(Some(v)) = sk.maps.lost.lookup_percpu(&zero, libbpf_rs::MapFlags::ANY) {
            let n: u64 = v
                .iter()
                .filter_map(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map(u64::from_ne_bytes)
                .sum();
            lost.store(n, std::sync::atomic::Ordering::Relaxed);
        }
    };
    loop {
        match rx.recv_timeout(DRAIN) {
            Ok(Cmd::Stop) => break,
            Ok(Cmd::Add(t)) => set(&mut targets, t, 1),
            Ok(Cmd::Arm(t, armed)) => set(&mut targets, t, if armed { 2 } else { 1 }),
            Ok(Cmd::Remove(t)) => {
                // Out of the program's targets first, so its probes write there no more.
                let slot = targets.get(&t).and_then(|t| t.1);
                set(&mut targets, t, 0);
                if let (Some(slot), Some(m)) = (slot, sp_map.as_ref()) {
                    m.clear(slot);
                }
                forget_waits(&sk.maps.toff, &sk.maps.off, toff_mask, t);
            }
            Ok(Cmd::Unslot(t, held, generation)) => {
                let current = sp_map.as_ref().is_some_and(|m| {
                    m.word(held, SP_GEN).load(std::sync::atomic::Ordering::Acquire) == generation
                });
                if current
                    && let Some((_, slot)) = targets.get_mut(&t)
                    && *slot == Some(held)
                {
                    *slot = None;
                    put(&mut targets, t);
                    if let Some(m) = sp_map.as_ref() {
                        m.clear(held);
                    }
                }
            }
            Ok(Cmd::SafepointsOf { pid, libjvm, after_ns, reply }) => {
                let r = (|| {
                    let m =
                        sp_map.as_ref().ok_or("the BPF program's safepoint map is not mapped")?;
                    let level = targets.get(&pid).map_or(0, |t| t.0);
                    if level == 0 {
                        return Err(format!("pid {pid} is not recorded"));
                    }
                    let meta = std::fs::metadata(&libjvm)
                        .map_err(|e| format!("{}: {e}", libjvm.display()))?;
                    // A fresh slot, also for a JVM watched again (its old handle, until dropped,
                    // reads nothing: its slot is cleared).
                    let used: Vec<usize> = targets.values().filter_map(|t| t.1).collect();
                    let slot = (1..SP_SLOTS).find(|s| !used.contains(s)).ok_or_else(|| {
                        format!("{} JVMs' safepoints are watched already", SP_SLOTS - 1)
                    })?;
                    attach_everywhere(&mut everywhere, &meta, &libjvm)?;
                    m.clear(slot);
                    gens += 1;
                    m.word(slot, SP_GEN).store(gens, std::sync::atomic::Ordering::Release);
                    m.word(slot, SP_AFTER).store(after_ns, std::sync::atomic::Ordering::Release);
                    let old = targets.get_mut(&pid).and_then(|t| t.1.replace(slot));
                    put(&mut targets, pid);
                    // Its old slot (a JVM watched again), now that the new one is in.
                    if let Some(old) = old {
                        m.clear(old);
                    }
                    Ok((slot, gens))
                })();
                let _ = reply.send(r);
            }
            Ok(Cmd::Prepare(libjvm)) => {
                if let Ok(meta) = std::fs::metadata(&libjvm) {
                    let _ = attach_everywhere(&mut everywhere, &meta, &libjvm);
                }
            }
            Ok(Cmd::Watch(tid, after_ns, tick_addr)) => {
                let mut v = [0u8; 24];
                v[..4].copy_from_slice(&tid.to_ne_bytes());
                v[8..16].copy_from_slice(&after_ns.to_ne_bytes());
                v[16..].copy_from_slice(&tick_addr.to_ne_bytes());
                let _ = sk.maps.watch.update(&0u32.to_ne_bytes(), &v, libbpf_rs::MapFlags::ANY);
            }
            Ok(Cmd::Safepoints { pid, libjvm, reply }) => {
                probes.clear();
                // Forget any other JVM's, then the end probe first: a begin seen without its
                // end would hold a safepoint open until the next one.
                if let Some(m) = sp_map.as_ref() {
                    m.clear(0);
                }
                let had: Vec<i32> =
                    targets.iter().filter(|(_, t)| t.1 == Some(0)).map(|(p, _)| *p).collect();
                for p in had {
                    if let Some(t) = targets.get_mut(&p) {
                        t.1 = None;
                    }
                    put(&mut targets, p);
                }
                let e = targets.entry(pid).or_insert((1, None));
                e.1 = Some(0);
                put(&mut targets, pid);
                let r = attach(&sk.progs.on_sp_end, pid, &libjvm, "safepoint__end").and_then(|e| {
                    attach(&sk.progs.on_sp_begin, pid, &libjvm, "safepoint__begin")
                        .map(|b| probes = vec![e, b])
                });
                let _ = reply.send(r);
            }
            Ok(Cmd::Held { tgid, reply }) => {
                let out = off_now(&sk.maps.toff, &sk.maps.off, toff_mask, tgid)
                    .filter(|r| involuntary(state_letter(r.state)))
                    .map(|r| Held {
                        tid: r.tid,
                        comm: r.comm,
                        start: r.start,
                        state: state_letter(r.state),
                    })
                    .collect();
                let _ = reply.send(out);
            }
            Ok(Cmd::Read { tgids, from, to, reply }) => {
                drain(&window);
                let mut out: Vec<RawWait> = window
                    .lock()
                    .map(|w| {
                        w.iter()
                            .filter(|r| tgids.contains(&r.tgid))
                            .filter(|r| r.start <= to && r.end.unwrap_or(u64::MAX) >= from)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                // Those still off a CPU now.
                for &tgid in &tgids {
                    for mut r in off_now(&sk.maps.toff, &sk.maps.off, toff_mask, tgid)
                        .filter(|r| r.start <= to)
                    {
                        r.end = None;
                        out.push(r);
                    }
                }
                let _ = reply.send(out);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => drain(&window),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// The threads of `tgid` off a CPU now, as the program's entries hold them (an entry whose
/// start is 0 is of a thread that runs: entries are kept from wait to wait): looked up by the
/// process's threads listed in /proc (in `toff` at the tid's index, else in `off`), not by
/// walking the maps, which hold every target's threads (`watch`: hundreds, two system calls
/// each).
fn off_now<'a>(
    toff: &'a impl libbpf_rs::MapCore,
    off: &'a impl libbpf_rs::MapCore,
    toff_mask: u32,
    tgid: i32,
) -> impl Iterator<Item = RawWait> + 'a {
    let any = libbpf_rs::MapFlags::ANY;
    threads_of(tgid).into_iter().filter_map(move |tid| {
        let index = (tid & toff_mask).to_ne_bytes();
        let held = toff.lookup(&index, any).ok().flatten().and_then(|v| parse_entry(&v));
        let r = match held {
            Some(r) if r.tid as u32 == tid => r,
            _ => parse_entry(&off.lookup(&tid.to_ne_bytes(), any).ok()??)?,
        };
        // start 0: the thread runs (its entry is kept from its last wait).
        Some(r).filter(|r| {
            r.start != 0 && r.tgid == tgid && !matches!(state_letter(r.state), 'X' | 'Z')
        })
    })
}

/// The threads of `tgid`, no longer a target, have no wait under way in the program's entries:
/// the program sees them no more, so a wait noted before would otherwise end, if the process
/// were added again, as one wait over the whole time between. Their indexes in `toff` stay
/// held until they exit unseen (a thread that is not a target's is not seen exiting): others
/// on those indexes are kept in the hash. The entry is rewritten with its own tid, so no thread
/// can take the index meanwhile.
fn forget_waits(
    toff: &impl libbpf_rs::MapCore,
    off: &impl libbpf_rs::MapCore,
    toff_mask: u32,
    tgid: i32,
) {
    let any = libbpf_rs::MapFlags::ANY;
    for tid in threads_of(tgid) {
        let index = (tid & toff_mask).to_ne_bytes();
        if let Ok(Some(mut v)) = toff.lookup(&index, any)
            && parse_entry(&v).is_some_and(|r| r.tid as u32 == tid && r.start != 0)
        {
            v[..8].fill(0);
            let _ = toff.update(&index, &v, any);
        }
        let _ = off.delete(&tid.to_ne_bytes());
    }
}

/// The threads of `tgid` now, from /proc (none if it is gone).
fn threads_of(tgid: i32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// CLOCK_MONOTONIC now, in ns (what `bpf_ktime_get_ns` stamps).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
