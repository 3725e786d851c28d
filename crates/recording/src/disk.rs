//! What a recording holds of the `/proc` readers' and the JFR reader's results, as the recording
//! format's own types. The recorder converts at the boundary (`recorder::to_disk`, which names both
//! sides; here only the JFR reader's frame has a `From`), so a field renamed, added or retyped in
//! `procwatch` or `hotspot-log` changes nothing on disk until it is added here too, documented in
//! docs/formats/recording.md, and, when it changes what an older reader would make of a file,
//! [`crate::FORMAT`] is raised.
//!
//! Invariant: each type here serialises exactly as the reader's type did when recordings of
//! format 0 were made (`tests/format.rs` reads every stored recording back through them).

use serde::{Deserialize, Serialize};
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

/// How much of a process's memory is resident and how much is in swap (`VmRSS`, `VmSwap` of
/// `/proc/<pid>/status`), in KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    pub rss_kb: u64,
    pub swap_kb: u64,
}

/// Aggregate CPU time from the `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

/// Memory-management counters from `/proc/vmstat` that say what the kernel did to make room:
/// swapping, direct reclaim and compaction (machine-wide; a memory cgroup's own reclaim shows in
/// its own stats instead), and how much is dirty or under writeback now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStat {
    pub pswpin: u64,
    pub pswpout: u64,
    pub pgmajfault: u64,
    /// Direct reclaim entries, summed over zones (`allocstall_*`).
    pub allocstall: u64,
    pub pgscan_direct: u64,
    pub compact_stall: u64,
    pub refault_anon: u64,
    pub refault_file: u64,
    /// Pages dirty and under writeback now (gauges, not counters).
    pub nr_dirty: u64,
    pub nr_writeback: u64,
}

/// The cgroups of one process that stallscope reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroups {
    pub cpu: Option<Group>,
    pub memory: Option<Group>,
    /// The cgroup v2 (unified) directory, for its pressure files, whatever controllers it has.
    pub unified: Option<Group>,
}

/// One controller's cgroup directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub dir: PathBuf,
    pub version: Version,
    /// The cgroup's path as the process sees it in `/proc/<pid>/cgroup` (`/system.slice/x`).
    pub path: String,
}

/// CPU throttling of a cgroup, normalised to nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttling {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

/// A memory cgroup at one instant: its use against its limits, and counters of what limits
/// and memory pressure did to it. Counters only rise; compare two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    pub usage: u64,
    /// The hard limit (v2 `memory.max`, v1 `memory.limit_in_bytes`), when there is one.
    pub limit: Option<u64>,
    /// v2 `memory.high`: above it, the cgroup's tasks are throttled and reclaim.
    pub high: Option<u64>,
    /// Bytes of the cgroup's memory in swap.
    pub swap: u64,
    /// Times the hard limit was hit (v1 `memory.failcnt`, v2 `memory.events` max).
    pub limit_hits: u64,
    /// Times usage went over `memory.high` (v2).
    pub high_events: u64,
    pub oom_kills: u64,
    pub pgmajfault: u64,
    pub refault_anon: u64,
    pub refault_file: u64,
    /// Pages scanned by reclaim in the cgroup (v2 only).
    pub pgscan: u64,
    pub dirty: u64,
    pub writeback: u64,
}

/// Pressure stall totals, µs: the time some task (`some`) or every task (`full`) of the
/// group waited for the resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pressure {
    pub cpu_some_us: Option<u64>,
    pub memory_some_us: Option<u64>,
    pub memory_full_us: Option<u64>,
    pub io_some_us: Option<u64>,
    pub io_full_us: Option<u64>,
}

/// One row of the agent's thread table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JavaThread {
    pub tid: i32,
    pub java_id: u64,
    /// How the agent matched it to a native thread: `self`, `comm`, `cputime`, `ambiguous`.
    pub matched: String,
    pub daemon: bool,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    /// `major:minor` of the backing device.
    pub dev: String,
    pub inode: u64,
    /// The file, `[heap]`, `[stack]`, `[vdso]`…, or empty for anonymous memory.
    pub path: String,
}

/// One traced event of a target thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum TraceEvent {
    /// A user page fault began at `address`, at instruction `ip`; `error_code`: the fault's
    /// error code (x86: bit 1 set for a write; absent in recordings before 2026-11-29).
    PageFault {
        t: u64,
        tid: i32,
        address: u64,
        ip: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<u64>,
    },
    /// The thread started waiting for mmap_lock.
    MmapLockStart { t: u64, tid: i32, write: bool },
    /// … and got it (or gave up).
    MmapLockAcquired { t: u64, tid: i32, write: bool, success: bool },
    /// The thread began waiting for writeback of page `index` of inode `ino` (a write fault
    /// on a shared mapping, or a write to a page being written back), on backing device `bdi`.
    WritebackWait { t: u64, tid: i32, ino: u64, index: u64, bdi: String },
}

/// One Java frame: `method` is `package.Class.method`, as a stack trace prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JavaFrame {
    pub method: String,
    /// The source line, when the class has line numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `Interpreted`, `JIT compiled`, `Inlined` or `Native`, as JFR says.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// Which cgroup interface a controller is used through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

impl Mapping {
    /// A mapping of a file (not anonymous memory, the heap, the stack or the vDSO).
    pub fn is_file(&self) -> bool {
        procwatch::maps::is_file(self.inode, &self.path)
    }

    /// A file mapped shared and writable (`rw-s`): its writes go to the file, and a write can
    /// wait for the page's writeback.
    pub fn is_shared_writable_file(&self) -> bool {
        procwatch::maps::is_shared_writable_file(&self.perms, self.inode, &self.path)
    }
}

/// The mapping holding `addr`, in maps sorted by their start (as they are read and written).
pub fn lookup(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    procwatch::maps::find_by(maps, addr, |m| (m.start, m.end))
}

impl TraceEvent {
    /// When it happened (CLOCK_MONOTONIC).
    pub fn t(&self) -> u64 {
        match self {
            TraceEvent::PageFault { t, .. }
            | TraceEvent::MmapLockStart { t, .. }
            | TraceEvent::MmapLockAcquired { t, .. }
            | TraceEvent::WritebackWait { t, .. } => *t,
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl From<hotspot_log::jfr::JavaFrame> for JavaFrame {
    fn from(v: hotspot_log::jfr::JavaFrame) -> JavaFrame {
        JavaFrame { method: v.method, line: v.line, kind: v.kind }
    }
}

/// One look at a JVM's safepoint and GC counters, their ticks in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterLook {
    /// When it was taken (CLOCK_MONOTONIC), and when the previous look was: what changed did so
    /// in between.
    pub t: u64,
    #[serde(default)]
    pub prev_t: u64,
    pub safepoints: u64,
    pub sync_ns: u64,
    pub safepoint_ns: u64,
    pub application_ns: u64,
    /// `sun.os.hrt.ticks`: the JVM's clock, as last sampled.
    pub hrt_ns: u64,
    /// Per collector (`sun.gc.collector.N`): pauses begun, last entry and exit on the JVM's clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gcs: Vec<GcLook>,
    /// `sun.gc.cause` while a GC is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_cause: Option<String>,
    /// Looks were left out before this one (it follows a look taken by another loop than the one
    /// before it): nothing is to be read from the difference between the two.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gap: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcLook {
    pub invocations: u64,
    pub last_entry_ns: u64,
    pub last_exit_ns: u64,
    /// This collector's counters span a whole concurrent cycle, not a pause (Shenandoah's,
    /// but for its `… pauses`): entered and not left says nothing of a safepoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cycle: bool,
}

/// What the JVM says of itself in its counters, for the recording's header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersInfo {
    /// The file read (as the JVM names it).
    pub path: String,
    /// `java.property.java.version` (`1.8.0_392`, `11.0.13`, `25`), and its feature release.
    pub java_version: String,
    pub major: u32,
    /// `sun.rt.safepointTime` holds the whole safepoint (JDK 8–12), not only its time after
    /// synchronizing (13 and later).
    pub safepoint_time_includes_sync: bool,
    /// `sun.gc.collector.N.name`, in order.
    pub collectors: Vec<String>,
    /// `sun.os.hrt.frequency`: ticks per second.
    pub frequency: u64,
    /// `sun.rt.createVmBeginTime`: when the JVM started, ms since the epoch.
    pub vm_start_epoch_ms: i64,
}

impl CounterLook {
    /// The collector whose pause is under way (entered and not yet left), if any.
    pub fn gc_in_progress(&self) -> Option<usize> {
        procwatch::jvmcounters::pause_under_way(
            self.gcs.iter().map(|g| (g.cycle, g.invocations, g.last_entry_ns, g.last_exit_ns)),
        )
    }
}

/// A reader's values as the recording's: `disk::all(maps)` where a `Vec<procwatch::…>` is
/// written.
pub fn all<A, B: From<A>>(v: Vec<A>) -> Vec<B> {
    v.into_iter().map(B::from).collect()
}
