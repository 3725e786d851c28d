//! The evidence a finding rests on, as data: one variant per kind of line, carrying the numbers
//! and names it reports. The classification builds these (and the diagnosis, for what the
//! recording did not see); `words` says them, when a finding is made or added to.
//!
//! Invariant: a variant holds what was measured or found, never its wording; times are in ns,
//! sizes in bytes, shares as fractions, exactly as read.

use crate::causes::Cause;
use crate::wait::Wait;

/// The tracepoint that named a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracepoint {
    /// `writeback:folio_wait_writeback`: the wait itself, on that file's inode.
    Writeback,
    /// `exceptions:page_fault_user`: the fault's address, in that file's mapping.
    PageFault,
}

/// What a thread is to the segment it is analysed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Late to a safepoint.
    Late,
    /// Running a safepoint's operation (the VM thread, a GC worker).
    Operation,
    /// The agent's meter, outside a safepoint: its lateness is the hiccup.
    Meter,
}

/// The target's memory coming back from swap, by the counters that moved (a counter that did
/// not move, or was not read, is `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Swap {
    /// The JVM's own memory that came back from swap.
    pub bytes: Option<u64>,
    /// Pages swapped in machine-wide.
    pub pages: Option<u64>,
}

impl Swap {
    /// One line per counter that moved.
    pub fn evidence(self) -> Vec<Evidence> {
        let bytes = self.bytes.map(|bytes| Evidence::SwappedIn { bytes });
        let pages = self.pages.map(|pages| Evidence::PagesSwappedIn { pages });
        bytes.into_iter().chain(pages).collect()
    }
}

/// One line of evidence. Variants with a `role` speak of the threads of that role ("it", "the
/// operation's threads", "the agent's meter thread").
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    // What a thread did, read as a cause.
    /// A late thread on a CPU through the stall, never in the kernel.
    RanWithoutKernel {
        user_mode: bool,
    },
    /// The meter thread on a CPU, yet its tick overdue.
    MeterOnCpuNoTick,
    /// The meter thread parked in the kernel (a futex: a lock or condition of the JVM's) outside
    /// any safepoint, for this long.
    MeterParked {
        ms: u64,
    },
    RunQueue {
        role: Role,
    },
    /// An operation's thread waited on a run queue while its CPU went to the operation's own
    /// other threads (the kernel's events): no neighbour took it.
    CpuHeldByOwnThreads,
    /// The JVM's own threads used `target` of the machine's `cpus` CPUs through the stall,
    /// every other process `others` (shares of the whole, from the recorder's count).
    CpusHeldByJvm {
        cpus: usize,
        target: f64,
        others: f64,
    },
    /// Seen runnable, too briefly for the counters to say whether it ran.
    RunnableTooBriefly {
        role: Role,
    },
    Stopped {
        role: Role,
    },
    DirectReclaim {
        role: Role,
    },
    /// Asleep on the way back to user space, its memory cgroup over `memory.high`.
    OverMemoryHigh {
        role: Role,
    },
    /// Waiting for writeback while memory was being reclaimed.
    WritebackUnderReclaim {
        role: Role,
    },
    /// A late thread asleep in a write of the JVM's own (it was running Java) while its
    /// memory cgroup was at its limit.
    WriteInFullCgroup {
        role: Role,
        file: Option<String>,
    },
    /// A safepoint's operation reading or writing while the application was stopped.
    VmThreadIo {
        role: Role,
        wait: Wait,
        file: Option<String>,
    },
    /// Blocked in a write fault on a file mapped shared and writable, waiting for that page's
    /// writeback (or for the page's lock, held by a thread that waits for it). `files` are the
    /// mappings it can have been: the one a tracepoint named (`traced`), else every shared
    /// writable file mapping of the target.
    WriteFaultUnderWriteback {
        role: Role,
        files: Vec<String>,
        traced: Option<Tracepoint>,
    },
    /// The file is the JVM's perf-counter file (hsperfdata).
    PerfDataFile,
    /// Pages under writeback machine-wide during the stall (the most at one look).
    PagesUnderWriteback {
        pages: u64,
    },
    /// Pages of these files (mapped shared and writable) under writeback as the stall began,
    /// as `cachestat` counted them: (path, pages).
    FilePagesUnderWriteback {
        files: Vec<(String, u64)>,
    },
    /// The meter parked outside any safepoint while `threads` of the JVM were held in write
    /// faults on a shared mapping (the reading of the longest follows).
    MeterParkedBesideWriteFaults {
        threads: usize,
    },
    /// The meter parked outside any safepoint while the JVM's GC locker held a collection back
    /// for `ms` of the stall (its flag, read from the JVM's memory); `holder`: the one thread of
    /// the application on a CPU through the hold (most likely the one in the critical region)
    /// and its time on a CPU in ms, where one was.
    GcLockerHeldBack {
        ms: u64,
        holder: Option<(String, u64)>,
    },
    /// Its major-fault count did not move: no page was read in.
    NoMajorFault {
        role: Role,
    },
    MmapLock {
        role: Role,
    },
    /// The longest mmap_lock wait, from the tracepoints.
    LongestMmapLockWait {
        ns: u64,
    },
    /// Waiting in the kernel (`wchan` as sampled): for something no cause explains, or in a
    /// function a cause's module names as its own (`Wait::Named`).
    Waited {
        role: Role,
        wait: Wait,
        wchan: String,
    },
    /// In the kernel, taking major faults while pages came back from swap.
    KernelSwapFaults {
        role: Role,
    },
    KernelUnderReclaim {
        role: Role,
    },
    /// In the kernel while memory management counted what a cause's module reads as its own
    /// (`crate::causes::Spec::kernel_cpu`).
    KernelInCause {
        role: Role,
        cause: Cause,
    },
    /// Off a CPU mostly under kernel functions a cause's module names, by the kernel's stacks of
    /// its waits (BPF), for `ns` of the stall.
    KernelWaitedIn {
        role: Role,
        cause: Cause,
        ns: u64,
    },
    /// In the kernel, taking minor faults: first touches of fresh memory.
    KernelFreshMemory {
        role: Role,
        minor_faults: u64,
    },
    KernelUnexplained {
        role: Role,
    },

    // Page faults.
    /// The thread's major-fault count rose when its waits ended.
    MajorFaultsRose {
        role: Role,
    },
    /// The page-fault tracepoint's address: `offset` into the file `path`.
    FaultAt {
        role: Role,
        offset: u64,
        path: String,
    },
    /// The faulting file is the JVM's own, evicted by memory pressure.
    OwnFileEvicted,
    /// Mostly in user mode, but taking this many minor faults: first touches of fresh memory
    /// (each one a trip into the kernel), not a loop that never left user mode.
    FreshMemoryTouched {
        role: Role,
        minor_faults: u64,
    },
    /// Blocked outside any system call, waiting for a page.
    BlockedForPage {
        role: Role,
    },
    /// The page-fault tracepoint's error code says the fault was a read, on a file mapped
    /// shared and writable.
    FaultWasRead {
        role: Role,
    },
    /// The kernel's stack of the thread's wait (BPF) reads a page in for a fault (filemap_fault,
    /// no write fault's writeback wait) on a file it maps shared and writable: a read fault,
    /// not yet counted (the kernel counts a major fault only once it ends). `ms`: its longest.
    KernelReadFault {
        role: Role,
        ms: u64,
    },
    NoColdFile,
    /// Swap-ins, with a cold data file mapped too.
    SwapDespiteColdFile(Swap),
    /// A cold data file, with swap-ins too.
    ColdFileDespiteSwap(Swap),
    /// Neither a cold file nor swap, but reclaim: the pages were the JVM's own, read back.
    PagesReclaimedReadBack {
        role: Role,
    },
    /// Waited for a page from neither a cold file nor swap.
    PageFromNowhere {
        role: Role,
    },

    // Memory counters.
    SwappedIn {
        bytes: u64,
    },
    PagesSwappedIn {
        pages: u64,
    },
    PagesSwappedOut {
        pages: u64,
    },
    /// The memory cgroup hit its limit, with its usage and limit in bytes when read.
    CgroupLimitHit {
        times: u64,
        using: Option<(u64, u64)>,
    },
    CgroupReclaimScanned {
        pages: u64,
    },
    DirectReclaims {
        count: u64,
    },
    CompactionStalls {
        count: u64,
    },
    /// PSI `memory full`, as a share of the stall.
    PsiMemoryFull {
        share: f64,
    },
    MemoryHighEvents {
        times: u64,
    },

    // CPUs.
    /// PSI `cpu some` during the stall, as a share of it.
    PsiCpuDuring {
        share: f64,
    },
    /// PSI `cpu some` just before the stall.
    PsiCpuBefore {
        share: f64,
    },
    /// The JVM's CPU cgroup throttled, read for a thread waiting to run.
    JvmCgroupThrottled {
        ns: u64,
    },
    /// The cgroup throttled, as a machine-wide contributor.
    CgroupThrottled {
        ns: u64,
    },
    /// CPU time the hypervisor stole.
    Steal {
        ns: u64,
    },
    TlbRate {
        per_s: f64,
    },
    TlbRateBefore {
        per_s: f64,
    },

    // The safepoint and the meter.
    /// No late thread seen: they had reached the safepoint by the first sample.
    NoneSeenHolding,
    /// SafepointTimeout saw the late threads runnable, before the first sample.
    TimeoutSawRunnable,
    /// The meter thread runnable in `runnable` of `samples` samples, its tick overdue.
    MeterRunnable {
        runnable: usize,
        samples: usize,
    },
    MeterRunningAgain,
    NamedByTimeout,
    /// A culprit is stallscope's own thread in the JVM (named by SafepointTimeout).
    OwnThreadHeld {
        name: String,
    },
    /// Named by SafepointTimeout, but parked in the kernel by /proc.
    NamedButParked,
    /// Culprits beyond those listed.
    MoreCulprits {
        more: usize,
    },
    /// The longest operation at a safepoint.
    AtSafepoint {
        at_ns: u64,
        total_ns: u64,
        op: String,
    },
    /// The part of the stall no evidence explains.
    Unexplained {
        ns: u64,
        stall_ns: u64,
    },

    // The whole JVM, and the recorder beside it.
    AllStopped {
        stopped: usize,
        samples: usize,
    },
    /// The recorder's control meter ran on through a freeze.
    ControlRanOn {
        worst_late_ns: u64,
    },
    /// The recorder's control meter was late too.
    ControlLate {
        late_ns: u64,
    },
    /// The recorder under the JVM's CPU quota, throttled.
    SameCpuQuota {
        throttled_ns: u64,
    },
    /// The recorder's watch thread waiting for a CPU.
    WatchThreadQueued {
        ns: u64,
    },
    /// The recorder in the JVM's memory cgroup, which was reclaiming.
    SameMemoryCgroup,

    // What the recording did (not) see, added by the diagnosis.
    /// No thread sample fell inside the stall.
    NoSamples,
    /// The samples saw no thread holding things up.
    NoThreadHolding {
        samples: usize,
        threads: usize,
    },
    /// The stall was under way when the recorder started: judged on the part seen.
    BeganBeforeWatching {
        unseen_ns: u64,
        seen_ns: u64,
    },
    /// The recorder missed part of the stall: held `held_ns` in its own `steps`, and noticing
    /// it `late_ns` after its threshold.
    RecorderBlind {
        held_ns: u64,
        steps: Vec<String>,
        late_ns: u64,
        stall_ns: u64,
    },
    /// No stack of these threads (by name) was read from outside the JVM near the stall.
    NoStackFromOutside {
        threads: Vec<String>,
        near_ns: u64,
    },
    /// The JVM's flight recorder took no stack of these threads (by name) near the stall.
    NoFlightRecorderStack {
        threads: Vec<String>,
        near_ns: u64,
    },
}
