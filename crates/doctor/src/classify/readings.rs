//! What each kind of a thread's time in a stall reads as: the cause it explains, whether the
//! evidence is of that cause's own kind (strong), and the evidence it rests on, as [`Evidence`]
//! values. The thread's own state says what it can; where it cannot, the counters around the
//! stall decide (swap against file against reclaim for a page fault, throttling against
//! starvation for a run queue).
//!
//! Invariant: a reading the evidence does not support is `Unknown`, never a guess; no reading
//! is strong without evidence of its cause's own kind.

use super::activity::Activity;
use super::evidence_kind::{Evidence, Role, Tracepoint};
use super::inputs::Inputs;
use super::machine::{
    cold_files, cpu_pressure, perf_data_file, reclaim_lines, shared_writable_files, swap,
    system_file, traced_fault, traced_fault_read, traced_lock_wait, traced_lock_wait_in_stall,
    traced_writeback,
};
use crate::causes::Cause;
use crate::evidence::ThreadEvidence;
use crate::wait::Wait;

/// Minor faults in a window that say a thread was touching fresh memory.
const FRESH_MEMORY_FAULTS: u64 = 1000;

/// What a stretch of a thread's time reads as: (cause, strong, evidence), strong when the
/// evidence is of the cause's own kind.
pub(super) type Reading = (Cause, bool, Vec<Evidence>);

/// The cause of a thread's stretch of time, given what it is in the stall (late to a safepoint,
/// running its operation, or the meter outside one).
pub(super) fn cause_of(t: &ThreadEvidence, act: Activity, role: Role, inp: &Inputs) -> Reading {
    // Its kernel stacks (BPF) waited mostly under functions a cause's module names (a compaction
    // waits on a page's lock, which its wchan shows alone): that cause.
    if matches!(act, Activity::Waiting(_))
        && let Some(named) = kernel_named(t, role, inp)
    {
        return named;
    }
    let mem = &inp.signals.memory;
    match act {
        Activity::User | Activity::Cpu => match role {
            Role::Late => {
                let faults = t.majflt + t.minflt;
                if act == Activity::Cpu && faults > 1000 {
                    kernel_cpu_cause(t, role, inp)
                } else if t.minflt >= FRESH_MEMORY_FAULTS {
                    // Mostly in user mode by its counters, but each of those faults entered the
                    // kernel: a fill or zeroing of fresh memory (a huge array allocated), not a
                    // loop that never left user mode (issue 56).
                    let ev = vec![Evidence::FreshMemoryTouched { role, minor_faults: t.minflt }];
                    (Cause::NoSafepointPoll, false, ev)
                } else {
                    let user_mode = act == Activity::User;
                    (
                        Cause::NoSafepointPoll,
                        user_mode,
                        vec![Evidence::RanWithoutKernel { user_mode }],
                    )
                }
            }
            Role::Operation => (Cause::LongVmOperation, act == Activity::User, vec![]),
            Role::Meter => (Cause::Unknown, false, vec![Evidence::MeterOnCpuNoTick]),
        },
        Activity::Kernel => kernel_cpu_cause(t, role, inp),
        Activity::RunQueue => {
            let throttled = inp.signals.throttled_ns.unwrap_or(0);
            let held = holders(t, inp);
            if throttled > 0 {
                (
                    Cause::CgroupThrottling,
                    true,
                    vec![Evidence::JvmCgroupThrottled { ns: throttled }],
                )
            } else if role == Role::Operation && held.covered() {
                // Its CPU went to the operation's own threads, not to any neighbour: the
                // operation is what took the time, on fewer CPUs than it had threads (issue 56;
                // who held it is in the kernel's lines). Said, and its fix given, only where the
                // wait is a visible part of the stall: a GC thread queued a moment in a long
                // collection leaves the fix to whoever asked for it.
                let ev = vec![Evidence::CpuHeldByOwnThreads];
                (Cause::LongVmOperation, false, if held.visible(inp) { ev } else { vec![] })
            } else if let Some(own) = inp
                .cpu_use
                .filter(|u| u.held_by_target() || (held.mostly_own_and_seen() && u.target_ahead()))
            {
                // The JVM's own threads held the machine's CPUs, no other process took a
                // visible part: an operation's wait for a CPU is the operation itself (more GC
                // threads than CPUs); a late thread's is the JVM's own crowd, which adds no
                // confidence to starvation (issue 56: a 14 ms young GC of 8 GC threads on 2
                // CPUs read as `cpu-starvation` at high confidence, the CPU pressure its own).
                let (target, others) = own.shares().unwrap_or_default();
                let line = Evidence::CpusHeldByJvm { cpus: own.cpus, target, others };
                if role != Role::Operation {
                    (Cause::CpuStarvation, false, vec![Evidence::RunQueue { role }, line])
                } else if held.visible(inp) {
                    (Cause::LongVmOperation, false, vec![line])
                } else {
                    (Cause::LongVmOperation, false, vec![])
                }
            } else {
                let (contended, psi) = cpu_pressure(inp);
                let mut ev = vec![Evidence::RunQueue { role }];
                ev.extend(psi);
                (Cause::CpuStarvation, contended || role == Role::Operation, ev)
            }
        }
        Activity::Runnable => {
            // R in the samples, its counters too short to tell: in a cgroup throttled during the
            // stall, waiting out the quota is the likely reading (a throttled thread stays R);
            // under saturated CPUs, waiting for one; never a confident one.
            let (contended, psi) = cpu_pressure(inp);
            let throttled = inp.signals.throttled_ns.unwrap_or(0);
            let mut ev = vec![Evidence::RunnableTooBriefly { role }];
            if throttled > 0 {
                ev.push(Evidence::JvmCgroupThrottled { ns: throttled });
                (Cause::CgroupThrottling, false, ev)
            } else if contended || role == Role::Meter {
                ev.extend(psi);
                (Cause::CpuStarvation, false, ev)
            } else {
                (Cause::Unknown, false, ev)
            }
        }
        Activity::Stopped => (Cause::Frozen, true, vec![Evidence::Stopped { role }]),
        Activity::Waiting(w) => match w {
            Wait::PageIn => page_in_cause(t, role, inp),
            Wait::Reclaim => {
                let mut ev = vec![Evidence::DirectReclaim { role }];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            Wait::MemcgHigh => {
                let mut ev = vec![Evidence::OverMemoryHigh { role }];
                if let Some(times) = mem.memcg_high_events.filter(|n| *n > 0) {
                    ev.push(Evidence::MemoryHighEvents { times });
                }
                (Cause::MemcgHigh, true, ev)
            }
            // Waiting for writeback while memory is being reclaimed: reclaim waiting for dirty
            // pages, not a write of the thread's own.
            Wait::Writeback if mem.reclaiming() => {
                let mut ev = vec![Evidence::WritebackUnderReclaim { role }];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            // Waiting for writeback outside a write of its own: a write fault on a shared mapping.
            // A writeback wait outside any system call is a write fault; strong only when a
            // tracepoint names the file.
            Wait::Writeback
                if t.file().is_none()
                    && t.not_in_syscall > 0
                    && (traced_writeback(t, inp).is_some()
                        || !shared_writable_files(inp).is_empty()) =>
            {
                match traced_writeback(t, inp) {
                    Some(file) => {
                        write_fault_reading(t, role, vec![file], Some(Tracepoint::Writeback), inp)
                    }
                    None => write_fault_reading(t, role, shared_writable_files(inp), None, inp),
                }
            }
            Wait::FileWrite | Wait::Writeback | Wait::FileRead if role == Role::Operation => {
                let file = t.file().map(str::to_string);
                (Cause::VmThreadIo, true, vec![Evidence::VmThreadIo { role, wait: w, file }])
            }
            // A late thread the JVM's SafepointTimeout saw running Java (only those reach
            // here), yet asleep in a write: the JVM writing a line of its own log on the way to
            // the safepoint (stallscope's `-Xlog:safepoint=debug` writes one per poll taken). In a
            // memory cgroup at its limit the page cache of that write is charged to the cgroup,
            // so the write waits for reclaim; /proc shows the filesystem's function, not the
            // reclaim, hence never a confident reading.
            Wait::FileWrite
                if role == Role::Late
                    && t.states.get(&'D').is_some_and(|n| *n > 0)
                    && mem.memcg_limit_hits.is_some_and(|n| n > 0) =>
            {
                let file = t.file().map(str::to_string);
                let mut ev = vec![Evidence::WriteInFullCgroup { role, file }];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, false, ev)
            }
            Wait::Writeback => (
                Cause::Unknown,
                false,
                vec![Evidence::Waited { role, wait: w, wchan: t.wchan.clone() }],
            ),
            Wait::MmapLock => {
                let mut ev = vec![Evidence::MmapLock { role }];
                if let Some(ns) = traced_lock_wait(t.tid, inp) {
                    ev.push(Evidence::LongestMmapLockWait { ns });
                }
                (Cause::MmapLock, true, ev)
            }
            // The tracepoints saw it wait for mmap_lock for most of the stall, whatever its
            // wchan said.
            Wait::Other
                if traced_lock_wait_in_stall(t.tid, inp) * 2
                    >= inp.end_ns.saturating_sub(inp.start_ns).max(1) =>
            {
                let ns = traced_lock_wait(t.tid, inp).unwrap_or(0);
                (
                    Cause::MmapLock,
                    true,
                    vec![Evidence::MmapLock { role }, Evidence::LongestMmapLockWait { ns }],
                )
            }
            // In a kernel function a cause's module names: that cause, directly.
            Wait::Named(cause) => {
                (cause, true, vec![Evidence::Waited { role, wait: w, wchan: t.wchan.clone() }])
            }
            Wait::FileWrite | Wait::FileRead | Wait::Parked | Wait::Other => (
                Cause::Unknown,
                false,
                vec![Evidence::Waited { role, wait: w, wchan: t.wchan.clone() }],
            ),
        },
    }
}

/// Who held thread `t`'s CPU while it waited preempted in the stall, as the kernel's events
/// count them (each wait's longest holder): in ns, held by anyone named, by the JVM's own other
/// threads, and the thread's time preempted in the stall. All 0 without the kernel's account
/// (no BPF, or no holder recorded).
struct Holders {
    all: u64,
    own: u64,
    queued: u64,
    run_delay: u64,
}

impl Holders {
    /// At least two thirds of the time a holder was named, it was one of the JVM's own threads.
    fn mostly_own(&self) -> bool {
        self.all > 0 && self.own * 3 >= self.all * 2
    }

    /// Mostly its own threads, and those seen holding its CPU for a tenth of its time preempted
    /// at least (with eight threads on two CPUs each wait's longest holder covers a third of it;
    /// beside CPU hogs, CI once saw 0.1 ms of 16 ms).
    fn mostly_own_and_seen(&self) -> bool {
        self.mostly_own() && self.own * 10 >= self.queued.max(self.run_delay)
    }

    /// Mostly its own threads, and they held its CPU at least half its time preempted: the
    /// holders alone say so. (The run-queue time of the thread's samples is no measure here: a
    /// thread on a CPU since its last read is not read again mid-stall. CI on 2026-11-29: a GC
    /// thread 16 ms preempted with holders counted for under 0.1 ms, beside four CPU hogs, was
    /// called the operation's own doing.)
    fn covered(&self) -> bool {
        self.mostly_own() && self.own * 2 >= self.queued.max(self.run_delay).max(1)
    }

    /// The thread's wait for a CPU is a visible part of the stall: a fifth of it or more.
    fn visible(&self, inp: &Inputs) -> bool {
        self.run_delay.max(self.queued) * 5 >= inp.duration_ns
    }
}

fn holders(t: &ThreadEvidence, inp: &Inputs) -> Holders {
    let mut h = Holders { all: 0, own: 0, queued: 0, run_delay: t.run_delay_ns };
    let Some(kw) = inp.kwaits else { return h };
    let own: std::collections::HashSet<i32> =
        inp.evidence.threads.iter().map(|x| x.tid).filter(|tid| *tid != t.tid).collect();
    let waits = kw.waits.iter().filter(|w| {
        w.tid == t.tid
            && w.state == 'R'
            && w.start < inp.end_ns
            && w.end.is_none_or(|e| e > inp.start_ns)
    });
    for w in waits {
        h.queued +=
            w.end.unwrap_or(inp.end_ns).min(inp.end_ns).saturating_sub(w.start.max(inp.start_ns));
        let (Some(i), Some(ns)) = (&w.instead, w.instead_ns) else { continue };
        h.all += ns;
        if own.contains(&i.tid) {
            h.own += ns;
        }
    }
    h
}

/// A thread on a CPU in the kernel: paging in from swap, reclaiming, or something the counters
/// do not show.
fn kernel_cpu_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> Reading {
    let mem = &inp.signals.memory;
    let faults = t.majflt_since_baseline;
    if faults > 0 && mem.swapped_in() {
        let mut ev = vec![Evidence::KernelSwapFaults { role }];
        ev.extend(swap(inp).evidence());
        return (Cause::SwapIn, true, ev);
    }
    // A cause whose module reads kernel time by the memory counters (compaction and nothing
    // else of reclaim): before reclaim, which those counters would also show.
    if let Some(cause) = crate::causes::of_kernel_cpu(mem) {
        let mut ev = vec![Evidence::KernelInCause { role, cause }];
        ev.extend(reclaim_lines(inp));
        return (cause, false, ev);
    }
    if mem.reclaiming() {
        let mut ev = vec![Evidence::KernelUnderReclaim { role }];
        ev.extend(reclaim_lines(inp));
        return (Cause::MemoryReclaim, false, ev);
    }
    // Minor faults: first touches of fresh memory. A thread late to a safepoint does them inside
    // a fill or copy (a huge Unsafe.setMemory, allocateDirect) that polls for no safepoint; the
    // operation's own threads (a GC) do them as the heap grows into pages never touched.
    if t.minflt >= FRESH_MEMORY_FAULTS {
        let ev = vec![Evidence::KernelFreshMemory { role, minor_faults: t.minflt }];
        return match role {
            Role::Late => (Cause::NoSafepointPoll, false, ev),
            Role::Operation => (Cause::LongVmOperation, false, ev),
            Role::Meter => (Cause::Unknown, false, ev),
        };
    }
    (Cause::Unknown, false, vec![Evidence::KernelUnexplained { role }])
}

/// Why a thread waited for a page: a file, swap, or reclaim.
fn page_in_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> Reading {
    let mem = &inp.signals.memory;
    let faults = t.majflt_since_baseline;
    let faults_line = (faults > 0).then_some(Evidence::MajorFaultsRose { role });
    // A writeback wait the tracepoint saw, on a file the JVM maps: a write fault, whatever the
    // thread's wchan says (the kernel waits for writeback and for a page to come in alike).
    if let Some(file) = traced_writeback(t, inp)
        && faults == 0
        && !mem.reclaiming()
    {
        return write_fault_reading(t, role, vec![file], Some(Tracepoint::Writeback), inp);
    }
    // With tracepoints, the fault's address says what it was: a data file, or the JVM's own
    // files (code, the class archive), which only fault when memory pressure evicted them.
    if let Some((addr, _)) = traced_fault(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp)
        && let Some(m) = recording::disk::lookup(inp.maps, addr).filter(|m| m.is_file())
    {
        if let Some(read) = kernel_read_fault(t, role, inp).filter(|_| m.is_shared_writable_file())
        {
            // The kernel's stack: a page read in for this fault, whatever the mapping allows.
            let line =
                Evidence::FaultAt { role, offset: addr - m.start + m.offset, path: m.path.clone() };
            return (Cause::MajorFault, !system_file(&m.path), vec![line, read]);
        }
        let read = traced_fault_read(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp);
        if m.is_shared_writable_file() && read == Some(true) {
            // The fault's error code: a read of a page that was not there, however the file
            // is mapped; the kernel counts it as major only once it ends.
            let line =
                Evidence::FaultAt { role, offset: addr - m.start + m.offset, path: m.path.clone() };
            return (Cause::MajorFault, true, vec![line, Evidence::FaultWasRead { role }]);
        }
        if m.is_shared_writable_file() && faults == 0 && !mem.reclaiming() {
            // A fault on a file mapped shared and writable that read nothing in: a write fault
            // waiting for the page's writeback (or its lock).
            let file = vec![m.path.clone()];
            return write_fault_reading(t, role, file, Some(Tracepoint::PageFault), inp);
        }
        let line =
            Evidence::FaultAt { role, offset: addr - m.start + m.offset, path: m.path.clone() };
        if system_file(&m.path) && mem.reclaiming() {
            let mut ev = vec![line, Evidence::OwnFileEvicted];
            ev.extend(reclaim_lines(inp));
            return (Cause::MemoryReclaim, true, ev);
        }
        return (Cause::MajorFault, !system_file(&m.path), vec![line]);
    }
    let swapped = mem.swapped_in();
    let cold = cold_files(inp);
    match (swapped, cold.is_empty()) {
        (true, true) => {
            let mut ev = vec![Evidence::NoColdFile];
            ev.extend(swap(inp).evidence());
            ev.extend(faults_line);
            (Cause::SwapIn, true, ev)
        }
        (false, false) => {
            let mut ev = vec![Evidence::BlockedForPage { role }];
            ev.extend(faults_line);
            (Cause::MajorFault, faults > 0, ev)
        }
        (true, false) => {
            // Both a cold file and swap-ins: the thread's own faults against the swap-ins.
            let swap_pages = mem.pswpin.unwrap_or(0) + mem.memcg_refault_anon.unwrap_or(0);
            if swap_pages >= faults.max(1) {
                (Cause::SwapIn, false, vec![Evidence::SwapDespiteColdFile(swap(inp))])
            } else {
                (Cause::MajorFault, false, vec![Evidence::ColdFileDespiteSwap(swap(inp))])
            }
        }
        (false, true) => {
            if mem.reclaiming() {
                let mut ev = vec![Evidence::PagesReclaimedReadBack { role }];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, false, ev)
            } else if let Some(read) = kernel_read_fault(t, role, inp)
                .filter(|_| untraced_write_fault_files(inp).is_some())
            {
                // What reads as a write fault below (a shared writable mapping, nothing counted
                // yet, pages under writeback), the kernel's stack shows reading a page in.
                (Cause::MajorFault, true, vec![Evidence::BlockedForPage { role }, read])
            } else if let Some(files) = untraced_write_fault_files(inp).filter(|_| faults == 0) {
                // Nothing to read a page from, nothing read, and pages under writeback: what is
                // left is a write fault on a shared mapping waiting for one. Which file: the one
                // whose pages were under writeback, else only a tracepoint says.
                write_fault_reading(t, role, files, None, inp)
            } else {
                (Cause::Unknown, false, vec![Evidence::PageFromNowhere { role }])
            }
        }
    }
}

/// The kernel's account of a thread's waits in the stall, where the BPF recorder kept one: its
/// waits under the page-fault path read a page in (`page-cache read`) and none waited for
/// writeback. Then a fault on a file mapped shared and writable is a read, whatever the
/// counters have not yet counted. The line says so, with the longest such wait.
fn kernel_read_fault(t: &ThreadEvidence, role: Role, inp: &Inputs) -> Option<Evidence> {
    let kw = inp.kwaits?;
    let mut longest = 0;
    for w in kw.waits.iter().filter(|w| w.tid == t.tid) {
        let ns = crate::kernel::within(w, inp.start_ns, inp.end_ns);
        if ns == 0 {
            continue;
        }
        let stack = kw.stacks.get(w.stack).map_or(&[][..], |s| &s[..]);
        if !stack.iter().any(|f| crate::kernel::fault_frame(f)) {
            continue;
        }
        use crate::kernel::WaitKind;
        match crate::kernel::kind(w, stack) {
            // A FUSE file's page comes from its daemon (`request_wait_answer`).
            WaitKind::PageCacheRead | WaitKind::Fuse => longest = longest.max(ns),
            WaitKind::Writeback => return None,
            _ => {}
        }
    }
    (longest > 0).then_some(Evidence::KernelReadFault { role, ms: longest / 1_000_000 })
}

/// The cause a thread's waits in the stall name by their kernel stacks (`WaitKind::Named`), where
/// the BPF recorder kept them and such waits are most of the thread's time off a CPU in it.
fn kernel_named(t: &ThreadEvidence, role: Role, inp: &Inputs) -> Option<Reading> {
    use crate::kernel::WaitKind;
    let kw = inp.kwaits?;
    let (mut off, mut named) = (0, std::collections::BTreeMap::<Cause, u64>::new());
    for w in kw.waits.iter().filter(|w| w.tid == t.tid && w.state != 'R') {
        let ns = crate::kernel::within(w, inp.start_ns, inp.end_ns);
        off += ns;
        let stack = kw.stacks.get(w.stack).map_or(&[][..], |s| &s[..]);
        if let WaitKind::Named(c) = crate::kernel::kind(w, stack) {
            *named.entry(c).or_default() += ns;
        }
    }
    let (cause, ns) = named.into_iter().max_by_key(|(c, ns)| (*ns, std::cmp::Reverse(*c)))?;
    (ns > 0 && ns * 2 > off)
        .then(|| (cause, true, vec![Evidence::KernelWaitedIn { role, cause, ns }]))
}

/// The files a write fault with no tracepoint can have waited on, when pages were under
/// writeback: those of the shared writable files whose own pages were (`cachestat`), else all
/// of them when pages were machine-wide. None when nothing was under writeback, or nothing is
/// mapped so.
fn untraced_write_fault_files(inp: &Inputs) -> Option<Vec<String>> {
    let files = shared_writable_files(inp);
    if files.is_empty() {
        return None;
    }
    let under: Vec<String> = files
        .iter()
        .filter(|f| inp.writeback_files.iter().any(|(p, _, wb)| p == *f && *wb > 0))
        .cloned()
        .collect();
    if !under.is_empty() {
        return Some(under);
    }
    inp.signals.memory.writeback_pages.is_some_and(|n| n > 0).then_some(files)
}

/// A write fault on a shared file mapping waiting for writeback. Strong only when the
/// writeback tracepoint saw the wait itself; a traced fault's address or the counters alone
/// leave it a reading.
fn write_fault_reading(
    t: &ThreadEvidence,
    role: Role,
    files: Vec<String>,
    traced: Option<Tracepoint>,
    inp: &Inputs,
) -> Reading {
    let perf_data = !files.is_empty() && files.iter().all(|f| perf_data_file(f));
    let strong = traced == Some(Tracepoint::Writeback);
    let own: Vec<(String, u64)> = inp
        .writeback_files
        .iter()
        .filter(|(p, _, wb)| *wb > 0 && files.contains(p))
        .map(|(p, _, wb)| (p.clone(), *wb))
        .collect();
    let mut ev = vec![Evidence::WriteFaultUnderWriteback { role, files, traced }];
    if traced.is_none() && t.majflt_since_baseline == 0 {
        ev.push(Evidence::NoMajorFault { role });
    }
    if traced.is_none() && !own.is_empty() {
        ev.push(Evidence::FilePagesUnderWriteback { files: own });
    } else if traced.is_none()
        && let Some(pages) = inp.signals.memory.writeback_pages.filter(|n| *n > 0)
    {
        ev.push(Evidence::PagesUnderWriteback { pages });
    }
    if perf_data {
        ev.push(Evidence::PerfDataFile);
    }
    (Cause::MappedWriteback, strong, ev)
}
