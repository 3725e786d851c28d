//! The recording directory: one append-only file per source, and the plain types its lines
//! hold. The recorder writes them; the diagnosis reads them; nothing else meets in between.
//! The format is documented in `docs/formats/recording.md`.
//!
//! Invariant: every line is written with a single `write` on an `O_APPEND` file, so a killed
//! recorder or target leaves complete lines followed by at most one partial line, which
//! readers skip.

use crate::Error;
use procwatch::cgroup::{Cgroups, Memory, Pressure, Throttling};
use procwatch::heartbeat::JavaThread;
use procwatch::maps::Mapping;
use procwatch::system::{CpuTimes, VmStat};
use procwatch::task::{ProcessMemory, TaskSample};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The files of a recording directory.
pub mod files {
    pub const META: &str = "meta.json";
    /// The JVM's own account: `-Xlog:safepoint*=debug` with the `timenanos` decorator.
    pub const SAFEPOINT_LOG: &str = "safepoint.log";
    /// The agent's hiccup meter, an HdrHistogram interval log.
    pub const HICCUPS: &str = "hiccups.hlog";
    pub const EVENTS: &str = "events.jsonl";
    pub const SAMPLES: &str = "samples.jsonl";
    pub const SYSTEM: &str = "system.jsonl";
    /// Java thread names and memory maps, captured when a stall began.
    pub const CONTEXT: &str = "context.jsonl";
    /// Tracepoint events of the target's threads around each stall (root only).
    pub const TRACE: &str = "trace.jsonl";
    /// The recorder's control meter, an HdrHistogram interval log like the agent's.
    pub const CONTROL: &str = "control.hlog";
    /// The JVM's own flight recording of its threads' stacks (JFR execution samples), with the
    /// settings it was made with; it opens in JDK Mission Control.
    pub const FRAMES_JFR: &str = "frames.jfr";
    pub const FRAMES_JFC: &str = "frames.jfc";
    /// The stacks of `frames.jfr` around each stall, on the recording's clock: what the doctor
    /// reads to name a culprit's code.
    pub const FRAMES: &str = "frames.jsonl";
    /// Stacks from the JVM's own thread dumps, asked for during long stalls (the lines of
    /// `frames.jsonl`, event `thread-dump`).
    pub const DUMPS: &str = "dumps.jsonl";
    /// Stacks the stacks agent (crates/stacks-agent) took of the threads the recorder signalled
    /// during stalls (the lines of `frames.jsonl`, event `signal-sample`), and the file in which
    /// the agent says which signal its handler is on.
    pub const STACKS: &str = "stacks.jsonl";
    pub const STACKS_READY: &str = "stacks.ready";
    /// The JVM's perf counters (hsperfdata) as the recorder looked at them: each look that
    /// differed from the one before (`procwatch::jvmcounters::CounterLook`).
    pub const COUNTERS: &str = "counters.jsonl";
    /// Stacks read from outside the JVM during stalls (the lines of `frames.jsonl`, event
    /// `outside-sample`; or a note saying why some could not be had).
    pub const OUTSIDE: &str = "outside.jsonl";
    /// Every file a recording may hold.
    pub const ALL: [&str; 17] = [
        META,
        SAFEPOINT_LOG,
        HICCUPS,
        EVENTS,
        SAMPLES,
        SYSTEM,
        CONTEXT,
        TRACE,
        CONTROL,
        FRAMES_JFR,
        FRAMES_JFC,
        FRAMES,
        DUMPS,
        STACKS,
        STACKS_READY,
        COUNTERS,
        OUTSIDE,
    ];
}

/// A recording holds plain files only: a FIFO or socket in its place would block the reader
/// forever, waiting for a writer, and a device is nothing stallscope wrote.
fn check_plain_files(dir: &Path) -> Result<(), Error> {
    for name in files::ALL {
        let p = dir.join(name);
        match std::fs::metadata(&p) {
            Ok(m) if !m.is_file() => return Err(Error::NotAFile { path: p }),
            _ => {}
        }
    }
    Ok(())
}

/// What was recorded, how, and on what.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub stallscope_version: String,
    /// `run` or `attach`.
    pub mode: String,
    pub command: Vec<String>,
    pub pid: i32,
    pub java_home: Option<String>,
    pub java_version: Option<String>,
    pub kernel: String,
    pub cpus: usize,
    pub root: bool,
    pub tracepoints: bool,
    /// Why privileged evidence is missing, if it is (one line for the report).
    pub privileges_note: Option<String>,
    pub start_mono_ns: u64,
    pub start_epoch_ms: i64,
    /// The local time zone's offset at the start, for displaying wall times.
    pub utc_offset_min: i16,
    /// Clock ticks per second (`utime`/`stime` units).
    pub clock_ticks: u64,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    pub safepoint_timeout_ms: Option<u64>,
    /// The target's cgroups (CPU, memory, and its v2 group for pressure), when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups: Option<Cgroups>,
    /// Whether the recorder itself is under the same CPU or memory limits as the target: then
    /// its own lateness is that limit's doing, not the machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_shares: Option<Shares>,
}

impl Meta {
    /// A wall-clock instant (ns since the epoch) on the recording's CLOCK_MONOTONIC, through the
    /// pair of clocks read at its start (to the millisecond); `None` before the clock's zero.
    pub fn mono_of_epoch_ns(&self, epoch_ns: i64) -> Option<u64> {
        u64::try_from(
            epoch_ns as i128 - self.start_epoch_ms as i128 * 1_000_000 + self.start_mono_ns as i128,
        )
        .ok()
    }
}

/// Which of the target's limits also bind the recorder.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Shares {
    pub cpu_cgroup: bool,
    pub memory_cgroup: bool,
}

/// What the recorder saw happen, on CLOCK_MONOTONIC.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// The agent's meter is ticking.
    MeterRunning { t: u64, resolution_ns: u64, meter_tid: u32 },
    /// A stall began at `expected_ns` (noticed at `t`). By the heartbeat (the default): the
    /// meter should have ticked then and did not, its last tick at `last_tick_ns`. By the
    /// counters: a safepoint began then and has not ended; or the process was seen stopped.
    /// `last_tick_ns` is then the last look that saw nothing wrong.
    StallBegin {
        t: u64,
        stall: u32,
        last_tick_ns: u64,
        expected_ns: u64,
        #[serde(default, skip_serializing_if = "StallTrigger::is_heartbeat")]
        by: StallTrigger,
    },
    /// The recorder watches the JVM's perf counters (`counters.jsonl`): what they say of the JVM.
    Counters { t: u64, info: procwatch::jvmcounters::CountersInfo },
    /// The JVM has no perf counters the recorder can read, and why: it is watched through
    /// `/proc` alone.
    NoCounters { t: u64, reason: String },
    /// The attach protocol got the agent into the JVM (its heartbeat drives stall detection from
    /// `t`), or (`refused` set) could not, and why.
    Attached {
        t: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<String>,
    },
    /// The heartbeat resumed with a tick at `resumed_ns`, or (`resumed` false) watching ended
    /// first: the JVM exited or the meter stopped, and `resumed_ns` is when that was seen.
    StallEnd {
        t: u64,
        stall: u32,
        resumed_ns: u64,
        control_max_late_ns: u64,
        /// How long the recorder's worst late wake-up waited on a run queue (absent in
        /// recordings made before it was measured).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        control_queued_ns: Option<u64>,
        #[serde(default = "yes")]
        resumed: bool,
        /// Samples of this stall dropped because the disk did not take them in time.
        #[serde(default, skip_serializing_if = "is_zero")]
        dropped_samples: u64,
        /// The JVM began to exit inside it (its meter said so, or it removed its perf counters).
        #[serde(default, skip_serializing_if = "is_false")]
        exiting: bool,
    },
    /// The recorder's own control meter woke late, outside any stall of the target.
    ControlHiccup { t: u64, late_ns: u64 },
    /// One step of the recorder's watch loop took `held_ns` from `t` (a `/proc` read waiting on
    /// a kernel lock, a write to a slow recording disk, the recorder descheduled mid-read): it
    /// took no look at the target meanwhile. `stall` is 0 between stalls.
    RecorderHeld { t: u64, stall: u32, held_ns: u64, step: String },
    /// The target exited (code, or signal).
    TargetExit { t: u64, code: Option<i32>, signal: Option<i32> },
    /// The recorder stopped watching (detach, Ctrl-C, --for).
    Detach { t: u64, reason: String },
    /// `--boost` raised the target's threads (`raised` false: none could be; `refused` counts
    /// threads the kernel refused, for lack of CAP_SYS_NICE).
    Boost { t: u64, raised: bool, refused: u64 },
}

impl Event {
    /// When it happened (or was seen), on CLOCK_MONOTONIC.
    pub fn t(&self) -> u64 {
        match self {
            Event::MeterRunning { t, .. }
            | Event::StallBegin { t, .. }
            | Event::Counters { t, .. }
            | Event::NoCounters { t, .. }
            | Event::Attached { t, .. }
            | Event::StallEnd { t, .. }
            | Event::ControlHiccup { t, .. }
            | Event::RecorderHeld { t, .. }
            | Event::TargetExit { t, .. }
            | Event::Detach { t, .. }
            | Event::Boost { t, .. } => *t,
        }
    }
}

/// What showed a stall's begin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StallTrigger {
    /// The agent's heartbeat went stale.
    #[default]
    Heartbeat,
    /// The JVM's perf counters: a safepoint begun and not ended.
    Safepoint,
    /// `/proc`: the process stopped (SIGSTOP, a debugger).
    Stopped,
}

impl StallTrigger {
    pub fn is_heartbeat(&self) -> bool {
        *self == StallTrigger::Heartbeat
    }
}

fn yes() -> bool {
    true
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// All threads of the target at one instant. Only threads that changed since the previous
/// sample of the same stall are listed, except in `full` samples (the first and last of a
/// stall, and the last idle sample before it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    pub t: u64,
    pub stall: u32,
    pub full: bool,
    /// Taken before the stall began (the newest idle sample): the baseline.
    #[serde(default)]
    pub baseline: bool,
    pub threads: Vec<TaskSample>,
    /// Threads gone since the previous sample.
    #[serde(default)]
    pub gone: Vec<i32>,
}

/// Machine-wide counters at one instant.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SystemSample {
    pub t: u64,
    pub stall: u32,
    #[serde(default)]
    pub baseline: bool,
    pub tlb: Option<Vec<u64>>,
    pub cpu: Option<CpuTimes>,
    pub psi_cpu_us: Option<u64>,
    pub psi_io_us: Option<u64>,
    pub psi_memory_us: Option<u64>,
    pub throttling: Option<Throttling>,
    /// The memory manager's counters: swap, direct reclaim, compaction, dirty pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<VmStat>,
    /// PSI `memory full`, machine-wide: every non-idle task waited for memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psi_memory_full_us: Option<u64>,
    /// The target's resident and swapped-out memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessMemory>,
    /// The target's memory cgroup: use, limits, and what hitting them cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcg: Option<Memory>,
    /// Pressure of the target's own v2 cgroup (absent when it is the root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_pressure: Option<Pressure>,
    /// The recorder's own watch thread and CPU cgroup, to tell its lateness apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder: Option<RecorderSelf>,
    /// The target's threads summed (from the once-a-second idle sample): the timeline's run
    /// delay. Absent during stalls and in older recordings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm: Option<JvmTotals>,
}

/// The recorder's watch thread at one instant.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct RecorderSelf {
    /// schedstat of the watch thread: on a CPU, and waiting on a run queue.
    pub exec_ns: u64,
    pub run_delay_ns: u64,
    /// Throttling of the recorder's own CPU cgroup, when it has a quota.
    pub throttled_ns: Option<u64>,
}

/// The target's threads at one instant, summed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct JvmTotals {
    pub threads: usize,
    /// schedstat time on a CPU, summed over live threads.
    pub exec_ns: u64,
    /// schedstat time waiting on a run queue, summed over live threads.
    pub run_delay_ns: u64,
    pub majflt: u64,
}

/// Who the threads are and what is mapped, when a stall began.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallContext {
    pub t: u64,
    pub stall: u32,
    pub java_threads: Vec<JavaThread>,
    /// File-backed and executable mappings (anonymous data regions are left out).
    pub maps: Vec<Mapping>,
    /// Page-cache residency of data files the target maps: (path, resident pages, pages).
    pub mapped_files: Vec<(String, u64, u64)>,
}

/// One stack of one thread as the JVM's flight recorder sampled it, near a stall.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FrameSample {
    /// When, on CLOCK_MONOTONIC (from JFR's wall-clock stamp: good to about a millisecond).
    pub t: u64,
    /// The thread's id on the host (as `/proc` and the samples name it), and its Java name as
    /// JFR first saw it.
    pub tid: i32,
    #[serde(default)]
    pub name: String,
    /// `jdk.ExecutionSample`, `jdk.NativeMethodSample` or `jdk.SafepointLatency`; or
    /// `thread-dump` (`dumps.jsonl`: `t` is when the dump was asked for, during a stall); or
    /// `signal-sample` (`stacks.jsonl`: taken where the thread was when the recorder signalled
    /// it, during a stall).
    pub event: String,
    /// For `jdk.SafepointLatency`: how long the thread took, from `t`, to reach its next
    /// safepoint poll (where `frames` were taken). For `thread-dump`: how long the dump took
    /// to come back (it is taken once the stall's own safepoint is over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<u64>,
    /// Top first.
    pub frames: Vec<hotspot_log::jfr::JavaFrame>,
    #[serde(default)]
    pub truncated: bool,
}

/// A line of `frames.jsonl`: a stack, or a note.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum FramesLine {
    Sample(FrameSample),
    Note(FramesNote),
}

/// What became of the JVM's flight recording of stacks, when it was asked for (the first line
/// of `frames.jsonl` when it is not a sample).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FramesNote {
    pub note: String,
}

/// Tracepoint events around one stall: each thread's last few page faults and its mmap_lock
/// waits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallTrace {
    pub stall: u32,
    pub events: Vec<procwatch::trace::TraceEvent>,
}

/// An append-only JSON Lines file. Written directly, or (for the recorder) from a thread of its
/// own, so that a disk that blocks writes (dirty-page throttling, a slow device) never holds up
/// the caller: lines queue, and past the queue's bound the lossy ones are counted, not written.
pub struct Appender {
    path: PathBuf,
    buf: Vec<u8>,
    to: Sink,
}

enum Sink {
    File(File),
    Queue {
        tx: Option<std::sync::mpsc::SyncSender<Queued>>,
        thread: Option<std::thread::JoinHandle<()>>,
        /// Lines dropped because the queue was full.
        dropped: u64,
        /// Whether lines may be dropped (samples) or must wait for room (events).
        lossy: bool,
    },
}

impl Appender {
    pub fn open(path: &Path) -> Result<Appender, Error> {
        let file = create_new(path)?;
        Ok(Appender {
            path: path.to_path_buf(),
            buf: Vec::with_capacity(1 << 16),
            to: Sink::File(file),
        })
    }

    /// A barrier for the lines appended so far (see [`Barrier`]); None for a direct appender,
    /// whose lines are written when `line` returns.
    pub fn barrier(&self) -> Option<Barrier> {
        match &self.to {
            Sink::Queue { tx: Some(tx), .. } => Some(Barrier { queues: vec![tx.clone()] }),
            _ => None,
        }
    }

    /// An appender whose lines are written by a thread of its own, holding at most `capacity`
    /// lines queued; when full, `lossy` ones are dropped (and counted), others wait.
    pub fn background(path: &Path, capacity: usize, lossy: bool) -> Result<Appender, Error> {
        let mut file = create_new(path)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Queued>(capacity);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let thread = std::thread::Builder::new()
            .name(format!("stallscope-write-{name}"))
            .spawn(move || {
                for q in rx {
                    match q {
                        // One write per line: a killed writer leaves at most one partial line.
                        Queued::Line(line) => {
                            let _ = file.write_all(&line);
                        }
                        Queued::Barrier(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })
            .map_err(|e| Error::io(path, "cannot start its writer thread", e))?;
        Ok(Appender {
            path: path.to_path_buf(),
            buf: Vec::new(),
            to: Sink::Queue { tx: Some(tx), thread: Some(thread), dropped: 0, lossy },
        })
    }

    /// Appends one value as one line, in one write.
    pub fn line<T: Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, v)
            .map_err(|e| Error::io(&self.path, "cannot encode a record", e.into()))?;
        self.buf.push(b'\n');
        match &mut self.to {
            Sink::File(f) => {
                f.write_all(&self.buf).map_err(|e| Error::io(&self.path, "cannot append to it", e))
            }
            Sink::Queue { tx, dropped, lossy, .. } => {
                let tx = tx.as_ref().expect("open until dropped");
                let line = std::mem::take(&mut self.buf);
                let sent = if *lossy {
                    match tx.try_send(Queued::Line(line)) {
                        Ok(()) => Ok(()),
                        Err(std::sync::mpsc::TrySendError::Full(_)) => {
                            *dropped += 1;
                            Ok(())
                        }
                        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => Err(()),
                    }
                } else {
                    tx.send(Queued::Line(line)).map_err(|_| ())
                };
                sent.map_err(|_| {
                    Error::io(
                        &self.path,
                        "its writer thread is gone",
                        std::io::Error::other("writer stopped"),
                    )
                })
            }
        }
    }

    /// Lines dropped so far because the disk did not keep up.
    pub fn dropped(&self) -> u64 {
        match &self.to {
            Sink::Queue { dropped, .. } => *dropped,
            Sink::File(_) => 0,
        }
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        if let Sink::Queue { tx, thread, .. } = &mut self.to {
            drop(tx.take());
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// What a background appender's thread is handed: a line, or a barrier to answer once every
/// line before it is written.
enum Queued {
    Line(Vec<u8>),
    Barrier(std::sync::mpsc::SyncSender<()>),
}

/// Waits, on another thread than the writer's, until the lines appended before it was taken are
/// in their files: `stallscope watch` diagnoses a stall from the files once its end is written,
/// without its watch loop ever waiting on the disk itself.
pub struct Barrier {
    queues: Vec<std::sync::mpsc::SyncSender<Queued>>,
}

impl Barrier {
    /// Blocks until every line appended before the barrier was taken is written (or its writer
    /// is gone). The barrier waits behind those lines, so a disk that blocks writes blocks it.
    pub fn wait(self) {
        for q in self.queues {
            let (done, answered) = std::sync::mpsc::sync_channel(1);
            if q.send(Queued::Barrier(done)).is_ok() {
                let _ = answered.recv();
            }
        }
    }
}

/// The writer side of a recording directory (tracepoint evidence, `trace.jsonl`, is appended
/// by its own writer, off the watch loop).
pub struct Writer {
    pub dir: PathBuf,
    /// The recording's start on CLOCK_MONOTONIC and the wall clock (from the meta).
    pub start_mono_ns: u64,
    pub start_epoch_ms: i64,
    pub events: Appender,
    pub samples: Appender,
    pub system: Appender,
    pub context: Appender,
    pub counters: Appender,
}

impl Writer {
    /// A barrier for every line written so far to each of the recording's files.
    pub fn barrier(&self) -> Barrier {
        let queues = [&self.events, &self.samples, &self.system, &self.context, &self.counters]
            .into_iter()
            .filter_map(|a| a.barrier())
            .flat_map(|b| b.queues)
            .collect();
        Barrier { queues }
    }

    /// Opens the recording in `dir` (created by the caller) and writes its header; its lines are
    /// written directly.
    pub fn open(dir: &Path, meta: &Meta) -> Result<Writer, Error> {
        Writer::open_with(dir, meta, Appender::open)
    }

    /// The same, with every file written by a thread of its own: the recorder's watch loop then
    /// never waits on the disk. Samples and system samples are dropped (and counted) past a
    /// queue of 4096 lines; events and contexts wait for room.
    pub fn open_background(dir: &Path, meta: &Meta) -> Result<Writer, Error> {
        Writer::open_with(dir, meta, |p| {
            let lossy = p.ends_with(files::SAMPLES) || p.ends_with(files::SYSTEM);
            Appender::background(p, 4096, lossy)
        })
    }

    fn open_with(
        dir: &Path,
        meta: &Meta,
        open: impl Fn(&Path) -> Result<Appender, Error>,
    ) -> Result<Writer, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the recording directory", e))?;
        let header = serde_json::to_vec_pretty(meta)
            .map_err(|e| Error::io(dir, "cannot encode the header", e.into()))?;
        let meta_path = dir.join(files::META);
        create_new(&meta_path)?
            .write_all(&header)
            .map_err(|e| Error::io(&meta_path, "cannot write it", e))?;
        Ok(Writer {
            dir: dir.to_path_buf(),
            start_mono_ns: meta.start_mono_ns,
            start_epoch_ms: meta.start_epoch_ms,
            events: open(&dir.join(files::EVENTS))?,
            samples: open(&dir.join(files::SAMPLES))?,
            system: open(&dir.join(files::SYSTEM))?,
            context: open(&dir.join(files::CONTEXT))?,
            counters: open(&dir.join(files::COUNTERS))?,
        })
    }
}

/// Creates a recording file that must not exist yet, never through a symbolic link
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`): a file planted in the directory beforehand is refused, not
/// followed or overwritten.
pub fn create_new(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            Error::io(
                path,
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "already exists (a recording file is only ever created new)"
                } else {
                    "cannot create it"
                },
                e,
            )
        })
}

/// Reads a JSON Lines file, skipping a final partial line; a malformed line elsewhere is an
/// error naming the file and the line.
pub fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, Error> {
    read_lines_noting(path, &mut Vec::new())
}

/// [`read_lines`], adding to `damage` a line about a cut-off last line it left out.
pub fn read_lines_noting<T: DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
) -> Result<Vec<T>, Error> {
    let text = match std::fs::read(path) {
        Ok(t) => String::from_utf8(t).map_err(|e| Error::Damaged {
            path: path.to_path_buf(),
            line: line_of(e.as_bytes(), e.utf8_error().valid_up_to()),
            reason: "not UTF-8 text".into(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, "cannot read it", e)),
    };
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(v) => out.push(v),
            // The recorder was killed mid-write: the last line may be cut.
            Err(_) if i + 1 == lines.len() && !complete => {
                damage.push(format!("{}:{}: the last line is cut off (the recorder was killed mid-write?); left out", path.display(), i + 1));
                break;
            }
            Err(e) => {
                return Err(Error::Damaged {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// The 1-based line holding byte `at`.
fn line_of(bytes: &[u8], at: usize) -> usize {
    bytes[..at.min(bytes.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

pub fn read_meta(dir: &Path) -> Result<Meta, Error> {
    let p = dir.join(files::META);
    let text = match std::fs::read(&p) {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| Error::BadHeader { path: p.clone(), reason: "not UTF-8 text".into() })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotARecording { dir: dir.to_path_buf(), source: e });
        }
        Err(e) => return Err(Error::io(&p, "cannot read it", e)),
    };
    serde_json::from_str(&text).map_err(|e| Error::BadHeader { path: p, reason: e.to_string() })
}

/// A whole recording, read into memory: the input of [`crate::diagnose()`].
pub struct Recording {
    /// Where it was read from (the report names it).
    pub dir: PathBuf,
    pub meta: Meta,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    pub system: Vec<SystemSample>,
    pub context: Vec<StallContext>,
    pub trace: Vec<StallTrace>,
    /// The JVM's stack samples near stalls (empty when none were recorded), and what the
    /// recorder said of them (why they are missing).
    pub frames: Vec<FrameSample>,
    pub frames_notes: Vec<String>,
    /// Whether the JVM's stacks were recorded and read (`frames.jsonl` is there and says of no
    /// failure): then a culprit without a stack near its stall had none taken.
    pub frames_recorded: bool,
    /// Whether the recording holds the JVM's safepoint log at all.
    pub has_safepoint_log: bool,
    pub safepoints: Vec<hotspot_log::Safepoint>,
    /// SafepointTimeout culprits of a safepoint whose record never completed.
    pub unfinished_culprits: Vec<hotspot_log::Culprit>,
    /// A safepoint the log shows being reached, with no record, when it ended.
    pub open_sync_ns: Option<u64>,
    pub hiccups: Option<crate::hlog::IntervalLog>,
    pub control: Option<crate::hlog::IntervalLog>,
    /// What was found damaged and left out while reading, each with its file and line.
    pub damage: Vec<String>,
    /// The JVM's perf counters, each look that changed (empty when they were not read).
    pub counters: Vec<procwatch::jvmcounters::CounterLook>,
}

impl Recording {
    /// Reads every file of the recording in `dir`. A missing source is empty; a damaged one is
    /// an error naming the file and line.
    pub fn read(dir: impl AsRef<Path>) -> Result<Recording, Error> {
        let dir = dir.as_ref();
        check_plain_files(dir)?;
        let meta = read_meta(dir)?;
        // The two interval logs decode on their own threads (a day of 1 s intervals is 172,800
        // compressed histograms) while this one reads the rest.
        let (hiccups, control, rest) = std::thread::scope(|sc| {
            let h = sc.spawn(|| crate::hlog::read(&dir.join(files::HICCUPS)));
            let c = sc.spawn(|| crate::hlog::read(&dir.join(files::CONTROL)));
            let rest = Recording::read_lines_of(dir, meta);
            (h.join().ok().flatten(), c.join().ok().flatten(), rest)
        });
        let mut r = rest?;
        r.hiccups = hiccups;
        r.control = control;
        if r.safepoints.is_empty() {
            r.fill_from_counters();
        }
        Ok(r)
    }

    /// The safepoints the JVM's perf counters show, when the safepoint log gave none (it is
    /// off, missing or empty); the report says so.
    pub fn fill_from_counters(&mut self) {
        let Some(info) = self.counters_info() else { return };
        self.safepoints = crate::counters::safepoints(&self.counters, info);
    }

    /// What the recorder said of the JVM's perf counters, if it read them.
    pub fn counters_info(&self) -> Option<&procwatch::jvmcounters::CountersInfo> {
        self.events.iter().find_map(|e| match e {
            Event::Counters { info, .. } => Some(info),
            _ => None,
        })
    }

    /// Why the recording has no perf counters, if the recorder said.
    pub fn counters_missing(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match e {
            Event::NoCounters { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
    }

    fn read_lines_of(dir: &Path, meta: Meta) -> Result<Recording, Error> {
        let mut safepoints = Vec::new();
        let mut unfinished_culprits = Vec::new();
        let mut open_sync_ns = None;
        let mut damage = Vec::new();
        let sp = dir.join(files::SAFEPOINT_LOG);
        let has_safepoint_log = sp.exists();
        if has_safepoint_log {
            let mut scanner = hotspot_log::Scanner::new();
            let f = File::open(&sp).map_err(|e| Error::io(&sp, "cannot read it", e))?;
            scanner
                .scan(0, f, &mut |s: &hotspot_log::Safepoint| safepoints.push(s.clone()))
                .map_err(|e| Error::SafepointLog { path: sp.clone(), reason: e.to_string() })?;
            let rep = scanner.finish(&mut |s: &hotspot_log::Safepoint| safepoints.push(s.clone()));
            unfinished_culprits = rep.orphan_culprits;
            open_sync_ns = rep.open_sync_ns;
            if rep.lines_unrecognised > 0 {
                let first = rep
                    .unrecognised_examples
                    .first()
                    .map(|e| format!("; the first, line {}: {}", e.line, e.text))
                    .unwrap_or_default();
                damage.push(format!("{}: {} line(s) that look like safepoint records were not understood and are not counted{first}", sp.display(), rep.lines_unrecognised));
            }
        }
        let (mut frames, mut frames_notes) = (Vec::new(), Vec::new());
        let frames_file = dir.join(files::FRAMES).exists();
        for l in read_lines_noting::<FramesLine>(&dir.join(files::FRAMES), &mut damage)? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        frames.extend(read_lines_noting::<FrameSample>(&dir.join(files::DUMPS), &mut damage)?);
        let stacks_file = dir.join(files::STACKS).exists() || dir.join(files::OUTSIDE).exists();
        frames.extend(read_lines_noting::<FrameSample>(&dir.join(files::STACKS), &mut damage)?);
        for l in read_lines_noting::<FramesLine>(&dir.join(files::OUTSIDE), &mut damage)? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            events: read_lines_noting(&dir.join(files::EVENTS), &mut damage)?,
            samples: read_lines_noting(&dir.join(files::SAMPLES), &mut damage)?,
            system: read_lines_noting(&dir.join(files::SYSTEM), &mut damage)?,
            context: read_lines_noting(&dir.join(files::CONTEXT), &mut damage)?,
            trace: read_lines_noting(&dir.join(files::TRACE), &mut damage)?,
            counters: read_lines_noting(&dir.join(files::COUNTERS), &mut damage)?,
            frames_recorded: (frames_file && frames_notes.is_empty()) || stacks_file,
            frames,
            frames_notes,
            damage,
            hiccups: None,
            control: None,
            meta,
            has_safepoint_log,
            safepoints,
            unfinished_culprits,
            open_sync_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_last_line_is_skipped_but_damage_elsewhere_is_reported() {
        let d = std::env::temp_dir().join(format!("stallscope-rec-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("e.jsonl");
        let mut a = Appender::open(&p).unwrap();
        a.line(&Event::Detach { t: 1, reason: "x".into() }).unwrap();
        a.line(&Event::TargetExit { t: 2, code: Some(0), signal: None }).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"event\":\"detach\",\"t\":3,\"rea").unwrap();
        let v: Vec<Event> = read_lines(&p).unwrap();
        assert_eq!(v.len(), 2);
        std::fs::write(&p, "{\"event\":\"detach\"\nnot json\n").unwrap();
        let e = read_lines::<Event>(&p).unwrap_err().to_string();
        assert!(e.contains("e.jsonl:1"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
