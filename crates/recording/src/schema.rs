//! The plain types a recording's lines hold: its header ([`Meta`]), what the recorder saw happen
//! ([`Event`]), the threads and the machine sampled in stalls, and the stacks taken then. The
//! format is documented in `docs/formats/recording.md`.
//!
//! Invariant: a field added later is optional on reading (`#[serde(default)]`), so a recording
//! made by an older stallscope still reads.

use crate::disk::{
    Cgroups, CpuTimes, JavaFrame, JavaThread, Mapping, Memory, Pressure, ProcessMemory, TaskSample,
    Throttling, TraceEvent, VmStat,
};
use serde::{Deserialize, Serialize};

/// What was recorded, how, and on what.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// The recording format's version ([`crate::FORMAT`]); absent in recordings made before
    /// 2026-11-27, which are version 0 and read as they always were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
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
    /// The BPF off-CPU recorder ran (`kwaits.jsonl` holds each stall's kernel waits); false in
    /// recordings made without it, and before format 2.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bpf: bool,
    /// The target is not a JVM: its stalls are its threads held off a CPU by the kernel (BPF),
    /// and there is no heartbeat, safepoint log or perf counter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_a_jvm: bool,
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
    /// The Kubernetes pod and container the target runs in, when its cgroup names a container
    /// (names from the runtime's bundle, docs/kubernetes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Pod>,
}

/// The Kubernetes pod and container a process runs in, as far as the node told (empty fields
/// where it did not: see `procwatch::pods`, which reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    /// The pod's namespace and name, empty when no bundle named them.
    pub namespace: String,
    pub name: String,
    /// The pod's UID, empty when neither the cgroup nor the bundle gave it.
    pub uid: String,
    /// The container's name in the pod spec, empty when no bundle named it.
    pub container: String,
    /// The runtime's full id of the container.
    pub container_id: String,
    /// `containerd`, `cri-o`, `docker`, `podman`, or empty when the cgroup does not say.
    pub runtime: String,
    /// Where the names were read (the bundle's `config.json`), empty when only the cgroup spoke.
    pub source: String,
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

    /// The wall-clock instant (ms since the epoch) of a CLOCK_MONOTONIC instant of the
    /// recording, the other way through the same pair.
    pub fn epoch_ms_of_mono(&self, mono_ns: u64) -> i64 {
        self.start_epoch_ms + ((mono_ns as i128 - self.start_mono_ns as i128) / 1_000_000) as i64
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
    /// The agent's meter is ticking. `safepoint_probes`: the JVM's own safepoint probes are
    /// attached (BPF), so its safepoints are found and timed without the meter; else, when
    /// they were tried, why they could not be (`probes_refused`).
    MeterRunning {
        t: u64,
        resolution_ns: u64,
        meter_tid: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        safepoint_probes: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        probes_refused: Option<String>,
    },
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
    Counters { t: u64, info: crate::disk::CountersInfo },
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
        /// How the recorder read the target's threads in it (absent in recordings made before
        /// it was counted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread_reads: Option<ThreadReads>,
    },
    /// The recorder's own control meter woke late, outside any stall of the target.
    ControlHiccup { t: u64, late_ns: u64 },
    /// One step of the recorder's sampling loop took `held_ns` from `t` (a `/proc` read waiting on
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
    /// `--boost-on safepoint` raised the target's threads for one safepoint. `t` is when the
    /// last thread was raised; `begun` when the JVM's counters place the safepoint's begin (to
    /// within `begun_within_ns`); `seen` when the booster's look found it; `restored` when the
    /// threads were put back (the safepoint's end seen). `threads` were raised, `refused` were not
    /// (no CAP_SYS_NICE, or gone).
    SafepointBoost {
        t: u64,
        begun: u64,
        begun_within_ns: u64,
        seen: u64,
        restored: u64,
        threads: u32,
        refused: u32,
        /// Put back before the safepoint ended: it was still open after the longest boost
        /// (50 ms).
        #[serde(default, skip_serializing_if = "is_false")]
        capped: bool,
    },
    /// The `--boost-on safepoint` booster stopped: its own CPU time over the time it ran, whether
    /// it ran `SCHED_FIFO`, boosts not kept (over its limit), and why it never boosted, if so.
    SafepointBooster {
        t: u64,
        cpu_ns: u64,
        ran_ns: u64,
        realtime: bool,
        dropped: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<String>,
    },
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
            | Event::Boost { t, .. }
            | Event::SafepointBoost { t, .. }
            | Event::SafepointBooster { t, .. } => *t,
        }
    }
}

/// How a stall's looks at the target's threads were taken: `read` threads' `/proc` files read,
/// `still` threads not read, the kernel's scheduler events showing they had not run nor been
/// woken since their last read (their last sample stands), `on_cpu` threads not read between
/// its first and last looks, the events showing they had been on a CPU without a break since
/// their last read (that sample stands, its CPU time carried on by the time elapsed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadReads {
    pub read: u64,
    pub still: u64,
    /// Absent before 2026-11-29's second change: none were carried.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub on_cpu: u64,
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
    /// The kernel's scheduler events (BPF): a thread of a process that is not a JVM held off a
    /// CPU, not by its own choice (waiting for a CPU, in an uninterruptible wait, stopped).
    Kernel,
    /// The JVM's own safepoint probes (`hs_private:safepoint__begin` and `__end`, read with
    /// BPF): a safepoint begun at `expected_ns` to the ns, and not ended; it ends as the JVM's
    /// probe says it did.
    SafepointProbe,
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
    /// Files the target maps shared and writable that live in memory (tmpfs, ramfs): never
    /// written back, so never a writeback wait. Empty in recordings made before it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_memory_files: Vec<String>,
    /// Files the target maps shared and writable (not in memory): (path, dirty pages, pages
    /// under writeback), as `cachestat` counted them when the stall began. Empty in recordings
    /// made before 2026-11-26, and on kernels before 6.5.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writeback_files: Vec<(String, u64, u64)>,
    /// When the maps were read, where that was before this stall: a read for an earlier stall
    /// was still out (it waited behind the target's mmap_lock), so this stall has the newest
    /// maps read before it. Absent when they were read for this stall.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maps_t: Option<u64>,
}

/// [`FrameSample::event`] of a stack the stacks agent took of a thread the recorder signalled
/// (`stacks.jsonl`).
pub const SIGNAL_SAMPLE: &str = "signal-sample";
/// [`FrameSample::event`] of a stack read from outside the JVM (`outside.jsonl`).
pub const OUTSIDE_SAMPLE: &str = "outside-sample";
/// [`FrameSample::event`] of a stack from the JVM's own thread dump (`dumps.jsonl`).
pub const THREAD_DUMP: &str = "thread-dump";

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
    pub frames: Vec<JavaFrame>,
    #[serde(default)]
    pub truncated: bool,
    /// For `signal-sample`: AsyncGetCallTrace's reason (negative) when the JVM gave no stack,
    /// `frames` then empty (docs/frames.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agct: Option<i32>,
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

/// Every wait off a CPU of the target's threads that overlapped one stall, as the kernel's
/// scheduler events recorded it (BPF, root only): `kwaits.jsonl`, one line per stall.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallKernelWaits {
    pub stall: u32,
    /// The window asked for: from a little before the stall was noticed to its end.
    pub from: u64,
    pub to: u64,
    /// Since when the target's waits were recorded (a wait that began before is not seen): a
    /// stall that began earlier has no whole kernel account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    pub waits: Vec<KernelWait>,
    /// The kernel stacks the waits name by index, each innermost first, once each.
    pub stacks: Vec<Vec<String>>,
    /// Records the kernel's ring buffer had no room for since the recording began (waits lost).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub lost: u64,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// One interval a thread spent off a CPU (at least a millisecond).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelWait {
    pub tid: i32,
    pub comm: String,
    /// CLOCK_MONOTONIC ns: left the CPU, and came back (absent: still off it when read).
    pub start: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
    /// The state it left in: `R` preempted (runnable, waiting for a CPU), `S`, `D`, `T`, `t`,
    /// `I` …
    pub state: char,
    pub cpu: u32,
    /// Its kernel stack where it left the CPU (an index into the line's `stacks`).
    pub stack: usize,
    /// Who woke it, and when (absent: preempted, or not woken while recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waker: Option<KernelWaker>,
    /// For a preempted thread, who ran instead: who held the CPU it left longest while it
    /// waited for one (recordings before `instead_ns`: who took that CPU as it left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead: Option<KernelThread>,
    /// How long `instead` held that CPU (absent: the wait ended before it left the CPU, or a
    /// recording made before this was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instead_ns: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelWaker {
    pub t: u64,
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    /// Its kernel stack as it woke the thread (an index into the line's `stacks`; absent for a
    /// wake-up before the wait had lasted a millisecond).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelThread {
    pub tid: i32,
    pub comm: String,
}

impl StallKernelWaits {
    /// The stack at `i` (empty if the line does not have it).
    pub fn stack(&self, i: usize) -> &[String] {
        self.stacks.get(i).map(Vec::as_slice).unwrap_or(&[])
    }
}

/// Tracepoint events around one stall: each thread's last few page faults and its mmap_lock
/// waits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StallTrace {
    pub stall: u32,
    pub events: Vec<TraceEvent>,
}
