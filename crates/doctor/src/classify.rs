//! From one stall's evidence to findings: which causes, with what share of the stall and what
//! confidence, which threads the stall waited on, and why we think so.
//!
//! The stall is cut into segments: reaching each safepoint it overlaps (TTSP), at each one, and
//! outside any. Each segment waited on particular threads: the threads late to the safepoint,
//! the VM thread and GC workers while at it, and outside a safepoint the hiccup meter, whose
//! lateness *is* the hiccup. Their time in the segment is accounted by what they did (on a CPU
//! in user or kernel mode, on a run queue, stopped, or waiting in the kernel, by what for), and
//! each kind of time maps to a cause, using the counters around the stall where the thread's own
//! state cannot say (swap against file against reclaim for a page fault, throttling against
//! starvation for a run queue). A cause's share is the time it explains.
//!
//! Invariant: every finding lists the evidence it rests on; high confidence needs evidence of
//! its kind covering at least [`HIGH_SHARE`] of the stall; whatever the evidence does not cover
//! is `unknown`, with the raw samples. stallscope's own threads are never culprits.

use crate::causes::Cause;
use crate::evidence::{
    Account, StallEvidence, ThreadEvidence, jvm_internal, stallscope_own, vm_operation_thread,
};
use crate::report::{Confidence, CulpritView, Finding, SafepointView};
use crate::signals::SystemSignals;
use crate::wait::Wait;
use procwatch::maps::Mapping;
use recording::Shares;
use recording::units::{fmt_count, fmt_ns};
use std::collections::{BTreeMap, HashMap};

/// A cause covering at least this share of the stall, with direct evidence, is named with high
/// confidence (docs/causes/unknown.md says what "most" means).
pub const HIGH_SHARE: f64 = 2.0 / 3.0;
/// At least this share: medium; below it, low.
pub const MEDIUM_SHARE: f64 = 1.0 / 3.0;
/// A part of the stall no evidence explains, at least this long relative to it, is reported as
/// `unknown` beside the causes.
pub const UNKNOWN_SHARE: f64 = 1.0 / 3.0;
/// Findings smaller than this share are dropped (unless nothing else is left).
const NEGLIGIBLE_SHARE: f64 = 0.05;
/// Every thread in state T in this share of the samples (and in half the samples): frozen.
const STOPPED_SAMPLE: f64 = 0.9;
const STOPPED_SAMPLES: f64 = 0.5;
/// The recorder's control meter late by half the stall (and at least this): the recorder was
/// held up with the JVM.
const CONTROL_LATE_MIN_NS: u64 = 20_000_000;
/// A phase of a safepoint shorter than this (or than [`PHASE_MIN_SHARE`] of it) is not analysed.
const PHASE_MIN_NS: u64 = 1_000_000;
const PHASE_MIN_SHARE: f64 = 0.2;
/// TLB shootdowns per second that count as a storm, and how much above the rate before.
const TLB_STORM_RATE: f64 = 5_000.0;
const TLB_STORM_FACTOR: f64 = 3.0;
/// PSI `cpu some` at which the machine's CPUs count as saturated.
const PSI_SATURATED: f64 = 0.5;
/// A late thread must have spent at least this share of the TTSP somewhere unsafe.
const LATE_MIN_SHARE: f64 = 0.3;
/// Minor faults in a window that say a thread was touching fresh memory.
const FRESH_MEMORY_FAULTS: u64 = 1000;
/// Culprits listed per finding (the rest are counted).
const MAX_CULPRITS: usize = 4;
/// Data files less resident than this are "cold": where a major fault reads from.
const COLD_RESIDENCY: f64 = 0.9;

/// What the doctor knows about one stall.
pub struct Inputs<'a> {
    pub duration_ns: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Evidence over the whole stall.
    pub evidence: &'a StallEvidence,
    /// The stall cut into segments, in time order, covering it.
    pub segments: &'a [Segment],
    /// The safepoints the stall overlaps, in time order (segments index into this).
    pub safepoints: &'a [SafepointView],
    pub control_max_late_ns: u64,
    /// How much of its worst late wake-up the recorder spent on a run queue, when measured.
    pub control_queued_ns: Option<u64>,
    pub signals: &'a SystemSignals,
    /// Which of the target's limits bind the recorder too.
    pub shares: Shares,
    pub names: &'a HashMap<i32, String>,
    pub maps: &'a [Mapping],
    pub mapped_files: &'a [(String, u64, u64)],
    pub meter_tid: Option<i32>,
    /// Tracepoint events around the stall (root only).
    pub trace: &'a [procwatch::trace::TraceEvent],
    pub clock_ticks: u64,
}

/// Which part of a stall a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentKind {
    /// Reaching safepoint `i` (its TTSP).
    Reaching(usize),
    /// At safepoint `i`: its operation running.
    At(usize),
    /// Outside any safepoint: a hiccup of the meter thread alone.
    Outside,
}

/// One segment of a stall, with what the threads did in it.
pub struct Segment {
    pub kind: SegmentKind,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The samples that fell inside it, rebuilt (empty when none did).
    pub evidence: StallEvidence,
}

impl Segment {
    pub fn len_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// The stall cut into segments, in time order, covering [start, end]: reaching each safepoint,
/// at it, and outside any. Each segment's bounds are clipped to the stall.
pub fn segments(
    start: u64,
    end: u64,
    safepoints: &[SafepointView],
) -> Vec<(SegmentKind, u64, u64)> {
    let mut out = Vec::new();
    let mut at = start;
    for (i, sp) in safepoints.iter().enumerate() {
        let s = sp.start_mono_ns.max(at);
        let reached = (sp.start_mono_ns + sp.ttsp_ns).clamp(s, end);
        let done = (sp.start_mono_ns + sp.total_ns).clamp(reached, end);
        if s > at && s <= end {
            out.push((SegmentKind::Outside, at, s.min(end)));
        }
        if reached > s {
            out.push((SegmentKind::Reaching(i), s, reached));
        }
        if done > reached {
            out.push((SegmentKind::At(i), reached, done));
        }
        at = at.max(done);
    }
    if at < end {
        out.push((SegmentKind::Outside, at, end));
    }
    out
}

/// What a thread did with a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Activity {
    /// On a CPU in user mode.
    User,
    /// On a CPU in kernel mode.
    Kernel,
    /// On a CPU, user or kernel not known (too short a window for the tick counters).
    Cpu,
    /// Runnable, waiting for a CPU.
    RunQueue,
    /// Seen runnable; whether it ran or waited, its counters do not say.
    Runnable,
    Stopped,
    Waiting(Wait),
}

/// A thread's account as (activity, ns), largest first, leaving out nothing.
pub fn breakdown(a: &Account) -> Vec<(Activity, u64)> {
    let mut v = vec![
        (Activity::User, a.user_ns),
        (Activity::Kernel, a.kernel_ns),
        (Activity::Cpu, a.cpu_ns),
        (Activity::RunQueue, a.run_queue_ns),
        (Activity::Runnable, a.runnable_ns),
        (Activity::Stopped, a.stopped_ns),
    ];
    v.extend(a.waits.iter().map(|(w, ns)| (Activity::Waiting(*w), *ns)));
    v.retain(|x| x.1 > 0);
    v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    v
}

/// A thread the stall waited on, and what it did.
#[derive(Debug, Clone)]
struct Held {
    tid: i32,
    activity: Activity,
    ns: u64,
    named: bool,
}

/// A piece of the stall that one cause explains.
#[derive(Debug, Clone)]
struct Part {
    cause: Cause,
    ns: u64,
    /// Whether the evidence is of the cause's own kind (a file behind a fault, swap counters,
    /// user-mode CPU…), not only inferred.
    strong: bool,
    held: Vec<Held>,
    evidence: Vec<String>,
}

fn name_of(tid: i32, comm: &str, names: &HashMap<i32, String>) -> String {
    names.get(&tid).cloned().unwrap_or_else(|| comm.to_string())
}

fn plural(n: u64, one: &str) -> String {
    format!("{} {one}{}", fmt_count(n), if n == 1 { "" } else { "s" })
}

/// Where an address is: `JIT-compiled code`, `libjvm.so`, a file.
fn module_of(pc: u64, maps: &[Mapping]) -> Option<String> {
    let m = procwatch::maps::lookup(maps, pc)?;
    Some(if m.path.is_empty() && m.perms.contains('x') {
        "code the JVM generated (JIT-compiled code or a stub)".to_string()
    } else if m.path.is_empty() {
        "anonymous memory".to_string()
    } else {
        m.path.rsplit('/').next().unwrap_or(&m.path).to_string()
    })
}

/// Data files mapped and (mostly) not in the page cache: where a major fault reads from.
fn cold_files(inp: &Inputs) -> Vec<String> {
    inp.mapped_files
        .iter()
        .filter(|(p, _, _)| {
            !["/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/"]
                .iter()
                .any(|sys| p.starts_with(sys))
        })
        .filter(|(_, resident, total)| {
            *total > 0 && (*resident as f64) < COLD_RESIDENCY * *total as f64
        })
        .map(|(p, r, t)| format!("{p} ({:.0}% in page cache)", *r as f64 * 100.0 / *t as f64))
        .collect()
}

/// What the tracepoints say about a thread's last page fault before `until`: (address, ip).
fn traced_fault(tid: i32, until: u64, inp: &Inputs) -> Option<(u64, u64)> {
    use procwatch::trace::TraceEvent;
    inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, address, ip } if *t == tid && *at <= until => {
            Some((*address, *ip))
        }
        _ => None,
    })
}

/// The longest mmap_lock wait of a thread, from the tracepoints.
fn traced_lock_wait(tid: i32, inp: &Inputs) -> Option<u64> {
    use procwatch::trace::TraceEvent;
    let mut longest = None;
    let mut started = None;
    for e in inp.trace {
        match e {
            TraceEvent::MmapLockStart { tid: t, t: at, .. } if *t == tid => started = Some(*at),
            TraceEvent::MmapLockAcquired { tid: t, t: at, .. } if *t == tid => {
                if let Some(s) = started.take() {
                    longest = Some(longest.unwrap_or(0).max(at - s));
                }
            }
            _ => {}
        }
    }
    // A wait still open at the end of the stall lasted at least until then.
    if let Some(s) = started {
        longest = Some(longest.unwrap_or(0).max(inp.end_ns.saturating_sub(s)));
    }
    longest
}

/// Why a thread waited for a page: a file, swap, or reclaim. (cause, strong, evidence)
fn page_in_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    let faults = t.majflt_since_baseline;
    let faults_line =
        (faults > 0).then(|| format!("{} major-fault count rose when the waits ended", sj.its));
    // With tracepoints, the fault's address says what it was: a data file, or the JVM's own
    // files (code, the class archive), which only fault when memory pressure evicted them.
    if let Some((addr, _)) = traced_fault(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp)
        && let Some(m) = procwatch::maps::lookup(inp.maps, addr).filter(|m| m.is_file())
    {
        let line = format!(
            "{} fault was at offset {:#x} of {} (page-fault tracepoint)",
            sj.its,
            addr - m.start + m.offset,
            m.path
        );
        if system_file(&m.path) && mem.reclaiming() {
            let mut ev = vec![
                line,
                "that is the JVM's own file, read back because memory pressure had evicted it"
                    .to_string(),
            ];
            ev.extend(reclaim_lines(inp));
            return (Cause::MemoryReclaim, true, ev);
        }
        return (Cause::MajorFault, !system_file(&m.path), vec![line]);
    }
    let swapped = mem.swapped_in();
    let cold = cold_files(inp);
    let swap_line = || swap_lines(inp).join("; ");
    match (swapped, cold.is_empty()) {
        (true, true) => {
            let mut ev = vec!["no data file is mapped cold".to_string()];
            ev.extend(swap_lines(inp));
            ev.extend(faults_line);
            (Cause::SwapIn, true, ev)
        }
        (false, false) => {
            let mut ev = vec![format!(
                "{} {} blocked outside any system call, waiting for a page",
                sj.who, sj.was
            )];
            ev.extend(faults_line.clone());
            (Cause::MajorFault, faults > 0, ev)
        }
        (true, false) => {
            // Both a cold file and swap-ins: the thread's own faults against the swap-ins.
            let swap_pages = mem.pswpin.unwrap_or(0) + mem.memcg_refault_anon.unwrap_or(0);
            if swap_pages >= faults.max(1) {
                (
                    Cause::SwapIn,
                    false,
                    vec![format!(
                        "{}; a cold data file is mapped too, so this is not certain",
                        swap_line()
                    )],
                )
            } else {
                (
                    Cause::MajorFault,
                    false,
                    vec![format!(
                        "a cold data file is mapped, but pages also came back from swap ({})",
                        swap_line()
                    )],
                )
            }
        }
        (false, true) => {
            if mem.reclaiming() {
                let mut ev = vec![format!(
                    "no data file is mapped cold and nothing came back from swap, but memory was being reclaimed: the pages {} waited for had been reclaimed (the JVM's own code or files) and were read back",
                    sj.who
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, false, ev)
            } else {
                (
                    Cause::Unknown,
                    false,
                    vec![format!(
                        "{} waited for a page, but no data file is mapped cold and nothing came back from swap",
                        sj.who
                    )],
                )
            }
        }
    }
}

/// The JDK's and the system's own files (code, the class archive, libraries), not the
/// application's data.
fn system_file(path: &str) -> bool {
    ["/usr/", "/lib", "/opt/java", "/etc/"].iter().any(|p| path.starts_with(p))
        || path.ends_with(".so")
        || path.contains(".so.")
        || path.ends_with(".jsa")
        || path.ends_with("/modules")
}

fn fmt_ns_bytes(b: u64) -> String {
    // Bytes as people read them: 1.23 GB, 456 MB, 12.3 kB.
    let v = b as f64;
    if v >= 1e9 {
        format!("{:.2} GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.0} MB", v / 1e6)
    } else {
        format!("{:.0} kB", v / 1e3)
    }
}

/// The counters that show the target's memory coming back from swap.
fn swap_lines(inp: &Inputs) -> Vec<String> {
    let mem = &inp.signals.memory;
    let mut v = Vec::new();
    if let Some(k) = mem.swapped_in_kb.filter(|k| *k > 0) {
        v.push(format!(
            "{} of the JVM's memory came back from swap during the stall",
            fmt_ns_bytes(k * 1024)
        ));
    }
    if let Some(n) = mem.pswpin.filter(|n| *n > 0) {
        v.push(format!("{} swapped in machine-wide", plural(n, "page")));
    }
    v
}

/// The counters that show memory being reclaimed for the target.
fn reclaim_lines(inp: &Inputs) -> Vec<String> {
    let m = &inp.signals.memory;
    let mut v = Vec::new();
    if let Some(n) = m.pswpout.filter(|n| *n >= 16) {
        v.push(format!("{} pushed out to swap machine-wide", plural(n, "page")));
    }
    if let Some(n) = m.memcg_limit_hits.filter(|n| *n > 0) {
        let at = match (m.memcg_usage, m.memcg_limit) {
            (Some(u), Some(l)) => format!(" (using {} of {})", fmt_ns_bytes(u), fmt_ns_bytes(l)),
            _ => String::new(),
        };
        v.push(format!(
            "its memory cgroup hit its limit {} during the stall{at}",
            plural(n, "time")
        ));
    }
    if let Some(n) = m.memcg_pgscan.filter(|n| *n > 0) {
        v.push(format!("reclaim scanned {} in its memory cgroup", plural(n, "page")));
    }
    if let Some(n) = m.allocstall.filter(|n| *n > 0) {
        v.push(format!("{} machine-wide", plural(n, "direct reclaim")));
    }
    if let Some(n) = m.compact_stall.filter(|n| *n > 0) {
        v.push(format!("{} machine-wide", plural(n, "compaction stall")));
    }
    if let Some(p) = m.psi_full.filter(|p| *p > 0.05) {
        v.push(format!(
            "all of its tasks waited for memory during {:.0}% of the stall (PSI memory full)",
            p * 100.0
        ));
    }
    v
}

/// Whether the machine's CPUs were saturated around the stall, and the evidence line saying so.
fn cpu_pressure(inp: &Inputs) -> (bool, Option<String>) {
    let s = inp.signals;
    let psi = s.psi_cpu_during.or(s.psi_cpu_before);
    let line = match (s.psi_cpu_during, s.psi_cpu_before) {
        (Some(p), _) => Some(format!(
            "some task waited for a CPU during {:.0}% of the stall (PSI cpu)",
            p.min(1.0) * 100.0
        )),
        (None, Some(p)) => Some(format!(
            "some task waited for a CPU during {:.0}% of the time just before the stall (PSI cpu)",
            p.min(1.0) * 100.0
        )),
        _ => None,
    };
    (psi.is_some_and(|p| p >= PSI_SATURATED), line)
}

/// The cause of a thread's stretch of time, given what it is in the stall (late to a safepoint,
/// running its operation, or the meter outside one). (cause, strong, evidence)
fn cause_of(
    t: &ThreadEvidence,
    act: Activity,
    role: Role,
    inp: &Inputs,
) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    match act {
        Activity::User | Activity::Cpu => match role {
            Role::Late => {
                let faults = t.majflt + t.minflt;
                if act == Activity::Cpu && faults > 1000 {
                    kernel_cpu_cause(t, role, inp)
                } else {
                    let how = if act == Activity::User { "in user mode " } else { "" };
                    (
                        Cause::NoSafepointPoll,
                        act == Activity::User,
                        vec![format!(
                            "it ran on a CPU {how}through the stall without entering the kernel"
                        )],
                    )
                }
            }
            Role::Operation => (Cause::LongVmOperation, act == Activity::User, vec![]),
            Role::Meter => (
                Cause::Unknown,
                false,
                vec!["the agent's meter thread was on a CPU but did not tick".into()],
            ),
        },
        Activity::Kernel => kernel_cpu_cause(t, role, inp),
        Activity::RunQueue => {
            let throttled = inp.signals.throttled_ns.unwrap_or(0);
            if throttled > 0 {
                (
                    Cause::CgroupThrottling,
                    true,
                    vec![format!(
                        "the JVM's CPU cgroup was throttled for {} during the stall",
                        fmt_ns(throttled)
                    )],
                )
            } else {
                let (contended, psi) = cpu_pressure(inp);
                let mut ev =
                    vec![format!("{} {} runnable but waited on a run queue", sj.who, sj.was)];
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
            if throttled > 0 {
                let ev = vec![
                    format!(
                        "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                        sj.who, sj.was, sj.its, sj.it
                    ),
                    format!(
                        "the JVM's CPU cgroup was throttled for {} during the stall",
                        fmt_ns(throttled)
                    ),
                ];
                (Cause::CgroupThrottling, false, ev)
            } else if contended || role == Role::Meter {
                let mut ev = vec![format!(
                    "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                    sj.who, sj.was, sj.its, sj.it
                )];
                ev.extend(psi);
                (Cause::CpuStarvation, false, ev)
            } else {
                (
                    Cause::Unknown,
                    false,
                    vec![format!(
                        "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                        sj.who, sj.was, sj.its, sj.it
                    )],
                )
            }
        }
        Activity::Stopped => {
            (Cause::Frozen, true, vec![format!("{} {} stopped (state T)", sj.who, sj.was)])
        }
        Activity::Waiting(w) => match w {
            Wait::PageIn => page_in_cause(t, role, inp),
            Wait::Reclaim => {
                let mut ev = vec![format!(
                    "{} {} in direct reclaim: reclaiming memory before a page could be had",
                    sj.who, sj.was
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            Wait::MemcgHigh => {
                let mut ev = vec![format!(
                    "{} slept on the way back to user space because the memory cgroup was over memory.high",
                    sj.who
                )];
                if let Some(n) = mem.memcg_high_events.filter(|n| *n > 0) {
                    ev.push(format!(
                        "the cgroup went over memory.high {} during the stall",
                        plural(n, "time")
                    ));
                }
                (Cause::MemcgHigh, true, ev)
            }
            // Waiting for writeback while memory is being reclaimed: reclaim waiting for dirty
            // pages, not a write of the thread's own.
            Wait::Writeback if mem.reclaiming() => {
                let mut ev = vec![format!(
                    "{} waited for dirty pages to be written back while memory was being reclaimed",
                    sj.who
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            Wait::FileWrite | Wait::Writeback | Wait::FileRead if role == Role::Operation => {
                let what = match (w, t.file()) {
                    (Wait::Writeback, _) => "waiting for writeback of a file written through a shared mapping (hsperfdata)".to_string(),
                    (_, Some(f)) => format!("{} {f}", if w == Wait::FileRead { "reading" } else { "writing to" }),
                    _ => w.words().to_string(),
                };
                (
                    Cause::VmThreadIo,
                    true,
                    vec![format!("{} {} {what} while the application was stopped", sj.who, sj.was)],
                )
            }
            Wait::Writeback => (
                Cause::MajorFault,
                false,
                vec![format!(
                    "{} {} blocked outside any system call, waiting for writeback of a page of a file mapping",
                    sj.who, sj.was
                )],
            ),
            Wait::MmapLock => {
                let mut ev = vec![format!("{} waited for mmap_lock", sj.who)];
                if let Some(ns) = traced_lock_wait(t.tid, inp) {
                    ev.push(format!(
                        "the longest mmap_lock wait lasted {} (tracepoints)",
                        fmt_ns(ns)
                    ));
                }
                (Cause::MmapLock, true, ev)
            }
            Wait::FileWrite | Wait::FileRead | Wait::Parked | Wait::Other => (
                Cause::Unknown,
                false,
                vec![format!(
                    "{} {} {}{}",
                    sj.who,
                    sj.was,
                    w.words(),
                    if t.wchan.is_empty() || t.wchan == "0" {
                        String::new()
                    } else {
                        format!(" (in {})", t.wchan)
                    }
                )],
            ),
        },
    }
}

/// A thread on a CPU in the kernel: paging in from swap, reclaiming, or something the counters
/// do not show.
fn kernel_cpu_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    let faults = t.majflt_since_baseline;
    if faults > 0 && mem.swapped_in() {
        let mut ev = vec![format!(
            "{} ran mostly in the kernel, taking major faults: pages coming back from swap",
            sj.who
        )];
        ev.extend(swap_lines(inp));
        return (Cause::SwapIn, true, ev);
    }
    if mem.reclaiming() {
        let mut ev =
            vec![format!("{} ran mostly in the kernel while memory was being reclaimed", sj.who)];
        ev.extend(reclaim_lines(inp));
        return (Cause::MemoryReclaim, false, ev);
    }
    // Minor faults: first touches of fresh memory. A thread late to a safepoint does them inside
    // a fill or copy (a huge Unsafe.setMemory, allocateDirect) that polls for no safepoint; the
    // operation's own threads (a GC) do them as the heap grows into pages never touched.
    if t.minflt >= FRESH_MEMORY_FAULTS {
        let where_ = match role {
            Role::Operation => {
                "the operation itself touching memory it had never used (a heap growing, a young generation first filled)"
            }
            Role::Late | Role::Meter => {
                "inside a fill or copy that never polls (a huge allocateDirect or Unsafe.setMemory)"
            }
        };
        let ev = vec![format!(
            "{} ran mostly in the kernel, taking {}: first touches of fresh memory, {where_}",
            sj.who,
            plural(t.minflt, "minor fault")
        )];
        return match role {
            Role::Late => (Cause::NoSafepointPoll, false, ev),
            Role::Operation => (Cause::LongVmOperation, false, ev),
            Role::Meter => (Cause::Unknown, false, ev),
        };
    }
    (
        Cause::Unknown,
        false,
        vec![format!("{} ran mostly in the kernel, for no reason the counters show", sj.who)],
    )
}

/// How evidence lines name the threads of a role.
struct Subject {
    who: &'static str,
    was: &'static str,
    its: &'static str,
    it: &'static str,
}

impl Role {
    fn subject(self) -> Subject {
        match self {
            Role::Late => Subject { who: "it", was: "was", its: "its", it: "it" },
            Role::Operation => {
                Subject { who: "the operation's threads", was: "were", its: "their", it: "they" }
            }
            Role::Meter => {
                Subject { who: "the agent's meter thread", was: "was", its: "its", it: "it" }
            }
        }
    }
}

/// What a thread is to the segment it is analysed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Late to a safepoint.
    Late,
    /// Running a safepoint's operation (the VM thread, a GC worker).
    Operation,
    /// The agent's meter, outside a safepoint: its lateness is the hiccup.
    Meter,
}

/// Activities that keep a thread from reaching a safepoint: running (without a poll, or
/// waiting for a CPU to reach it), stopped, or blocked outside a system call.
fn unsafe_activity(a: Activity) -> bool {
    !matches!(a, Activity::Waiting(Wait::Parked | Wait::FileWrite | Wait::FileRead | Wait::Other))
}

fn tick_ns(inp: &Inputs) -> u64 {
    1_000_000_000 / inp.clock_ticks.max(1)
}

/// Parts of a segment from the accounts of the threads it waited on: each thread's time by
/// activity, mapped to causes, scaled so that the parts cover at most the segment. Returns the
/// time the parts explain with a known cause.
fn parts_of(
    threads: &[(&ThreadEvidence, bool)],
    role: Role,
    len_ns: u64,
    cpu_is_evidence: bool,
    inp: &Inputs,
    out: &mut Vec<Part>,
) -> u64 {
    let mut raw: Vec<(Cause, u64, bool, Held, Vec<String>)> = Vec::new();
    for (t, named) in threads {
        let a = t.account(tick_ns(inp));
        for (act, ns) in breakdown(&a) {
            if act == Activity::Waiting(Wait::Parked) {
                continue;
            }
            if !cpu_is_evidence && matches!(act, Activity::User | Activity::Cpu | Activity::Kernel)
            {
                continue;
            }
            if role == Role::Late && !unsafe_activity(act) && !named {
                continue;
            }
            let (cause, strong, ev) = cause_of(t, act, role, inp);
            raw.push((
                cause,
                ns,
                strong,
                Held { tid: t.tid, activity: act, ns, named: *named },
                ev,
            ));
        }
    }
    // A named late thread that /proc saw safe (in a system call, parked: often one caught in a
    // state transition) is no rival to a late thread with real evidence: its time is left out,
    // not called unknown, when another thread explains the segment.
    if role == Role::Late && raw.iter().any(|r| r.0 != Cause::Unknown) {
        raw.retain(|r| r.0 != Cause::Unknown || unsafe_activity(r.3.activity));
    }
    let total: u64 = raw.iter().map(|r| r.1).sum();
    if total == 0 {
        return 0;
    }
    // Parallel threads (GC workers) add up to more than the segment: scale to it. Threads late
    // to one safepoint overlap too: the segment waited for them together.
    let scale = if total > len_ns { len_ns as f64 / total as f64 } else { 1.0 };
    let mut covered = 0;
    for (cause, ns, strong, held, ev) in raw {
        let ns = (ns as f64 * scale) as u64;
        if cause != Cause::Unknown {
            covered += ns;
        }
        out.push(Part { cause, ns, strong, held: vec![held], evidence: ev });
    }
    covered
}

/// What [`parts_of`] explains from the samples alone, leaving out the run-queue waits proven
/// before each thread's first sample: the readings that stand in when the samples explain
/// little are judged on that, so that proven waits only add to them.
fn covered_by_samples(
    threads: &[(&ThreadEvidence, bool)],
    role: Role,
    len_ns: u64,
    cpu_is_evidence: bool,
    inp: &Inputs,
    covered: u64,
) -> u64 {
    if threads.iter().all(|(t, _)| t.queued_at_first_ns == 0) {
        return covered;
    }
    let sampled: Vec<ThreadEvidence> = threads.iter().map(|(t, _)| t.without_lead()).collect();
    let refs: Vec<(&ThreadEvidence, bool)> =
        sampled.iter().zip(threads).map(|(t, (_, named))| (t, *named)).collect();
    parts_of(&refs, role, len_ns, cpu_is_evidence, inp, &mut Vec::new())
}

/// The threads late to safepoint `sp`, with whether SafepointTimeout named them.
fn late_threads<'e>(
    ev: &'e StallEvidence,
    sp: &SafepointView,
    len_ns: u64,
    inp: &Inputs,
) -> Vec<(&'e ThreadEvidence, bool)> {
    let named: Vec<i32> = sp.timeout_culprits.iter().filter_map(|c| c.tid).collect();
    let own = |t: &ThreadEvidence| stallscope_own(&name_of(t.tid, &t.comm, inp.names));
    let by_name: Vec<(&ThreadEvidence, bool)> = ev
        .threads
        .iter()
        .filter(|t| named.contains(&t.tid) && !own(t))
        .map(|t| (t, true))
        .collect();
    if !by_name.is_empty() {
        return by_name;
    }
    // No names: the threads that spent a good part of the TTSP somewhere unsafe.
    ev.threads
        .iter()
        .filter(|t| !jvm_internal(&t.comm) && !own(t) && Some(t.tid) != inp.meter_tid)
        .filter(|t| {
            let a = t.account(tick_ns(inp));
            let unsafe_ns: u64 = breakdown(&a)
                .into_iter()
                .filter(|(act, _)| unsafe_activity(*act) && *act != Activity::Waiting(Wait::Parked))
                .map(|x| x.1)
                .sum();
            unsafe_ns as f64 >= LATE_MIN_SHARE * len_ns.min(a.span_ns.max(1)) as f64
                && unsafe_ns > 0
        })
        .map(|t| (t, false))
        .collect()
}

/// One segment's parts.
fn segment_parts(seg: &Segment, inp: &Inputs, out: &mut Vec<Part>) {
    let len = seg.len_ns();
    if len == 0 {
        return;
    }
    match seg.kind {
        SegmentKind::Reaching(i) => {
            let sp = &inp.safepoints[i];
            // No sample inside the TTSP: the whole stall's evidence, except that CPU time from
            // before the safepoint began is no evidence of a missing poll unless the TTSP is
            // most of the stall, and that a wait proven before a thread's first sample lies
            // where that sample fell, not in this segment (a late thread queued at a look after
            // the TTSP had reached the safepoint before that wait began).
            let borrowed;
            let (ev, whole) = if seg.evidence.sample_times.is_empty() {
                borrowed = inp.evidence.without_leads();
                (&borrowed, true)
            } else {
                (&seg.evidence, false)
            };
            let late = late_threads(ev, sp, len, inp);
            let cpu_is_evidence =
                !(whole && len.saturating_mul(4) < inp.duration_ns.saturating_mul(3));
            let before = out.len();
            let covered = parts_of(&late, Role::Late, len, cpu_is_evidence, inp, out);
            // A short stall can be over before the first sample: the late threads had reached
            // the safepoint by then. If the CPUs were saturated meanwhile, and HotSpot saw the
            // named threads runnable, they were waiting for a CPU. (Judged on what the samples
            // explain: a run-queue wait proven before the first sample supports this reading.)
            let (contended, psi) = cpu_pressure(inp);
            if covered_by_samples(&late, Role::Late, len, cpu_is_evidence, inp, covered) == 0
                && contended
            {
                out.truncate(before);
                let runnable: Vec<Held> = sp
                    .timeout_culprits
                    .iter()
                    .filter(|c| c.state.as_deref().is_some_and(|s| s.starts_with("runnable")))
                    .filter_map(|c| {
                        Some(Held { tid: c.tid?, activity: Activity::RunQueue, ns: 0, named: true })
                    })
                    .filter(|h| inp.evidence.threads.iter().any(|t| t.tid == h.tid))
                    .collect();
                let mut evid: Vec<String> = psi.into_iter().collect();
                if runnable.is_empty() {
                    evid.push("no thread of the JVM was seen holding the safepoint; the late ones had reached it by the first sample".into());
                } else {
                    evid.push("SafepointTimeout saw the late threads runnable; they had reached the safepoint by the first sample".into());
                }
                out.push(Part {
                    cause: Cause::CpuStarvation,
                    ns: len,
                    strong: false,
                    held: runnable,
                    evidence: evid,
                });
            }
        }
        SegmentKind::At(_) => {
            let ops: Vec<(&ThreadEvidence, bool)> = seg
                .evidence
                .threads
                .iter()
                .filter(|t| vm_operation_thread(&t.comm))
                .map(|t| (t, false))
                .collect();
            parts_of(&ops, Role::Operation, len, true, inp, out);
        }
        SegmentKind::Outside => {
            let borrowed;
            let ev = if seg.evidence.sample_times.is_empty() {
                borrowed = inp.evidence.without_leads();
                &borrowed
            } else {
                &seg.evidence
            };
            let Some(meter) = inp.meter_tid.and_then(|m| ev.threads.iter().find(|t| t.tid == m))
            else {
                return;
            };
            let before = out.len();
            let covered = parts_of(&[(meter, false)], Role::Meter, len, true, inp, out);
            // The meter runnable, yet its tick overdue: woken, not running. (Running, it would
            // have ticked; blocked, it would not be R.) A stall too short for its run delay to
            // show it. Judged on what the samples explain, as above.
            if covered_by_samples(&[(meter, false)], Role::Meter, len, true, inp, covered) < len / 2
                && meter.share('R') >= 0.5
            {
                out.truncate(before);
                let (contended, psi) = cpu_pressure(inp);
                let mut evid = vec![format!(
                    "the hiccup meter thread was runnable (R) in {} of {} samples but did not tick: it was waiting for a CPU",
                    meter.count('R'),
                    meter.samples
                )];
                evid.extend(psi);
                out.push(Part {
                    cause: Cause::CpuStarvation,
                    ns: len,
                    strong: contended,
                    held: vec![],
                    evidence: evid,
                });
            } else if covered == 0 {
                let (contended, psi) = cpu_pressure(inp);
                if contended {
                    let mut evid: Vec<String> = psi.into_iter().collect();
                    evid.push(
                        "the hiccup meter thread was running again by the first sample".into(),
                    );
                    out.push(Part {
                        cause: Cause::CpuStarvation,
                        ns: len,
                        strong: false,
                        held: vec![],
                        evidence: evid,
                    });
                }
            }
            // The meter is stallscope's own: what it did is evidence, never a culprit.
            for p in out[before..].iter_mut() {
                p.held.clear();
            }
        }
    }
}

fn finding(
    cause: Cause,
    confidence: Confidence,
    share: f64,
    culprits: Vec<CulpritView>,
    evidence: Vec<String>,
) -> Finding {
    Finding {
        cause,
        title: cause.title().to_string(),
        confidence,
        share: share.clamp(0.0, 1.0),
        culprits,
        evidence,
        fix: cause.fix().to_string(),
        doc: cause.doc(),
    }
}

/// How a culprit's time is described: what it did, for how long, where.
fn describe(t: &ThreadEvidence, held: &[&Held], inp: &Inputs) -> String {
    let mut parts = Vec::new();
    let mut faults_said = false;
    let mut faults = |s: &mut String| {
        if t.majflt_since_baseline > 0 && !faults_said {
            faults_said = true;
            s.push_str(&format!(", +{}", plural(t.majflt_since_baseline, "major fault")));
        }
    };
    for h in held {
        let ns = fmt_ns(h.ns);
        parts.push(match h.activity {
            Activity::User => {
                format!("state R, on CPU {ns} in user mode, never seen in a system call")
            }
            Activity::Cpu => format!(
                "state R, on CPU {} of the {} stall, never seen in a system call",
                fmt_ns(t.cpu_ns),
                fmt_ns(inp.duration_ns)
            ),
            Activity::Kernel => {
                let mut s = format!("state R, on CPU {ns} in kernel mode");
                faults(&mut s);
                s
            }
            Activity::RunQueue => format!(
                "runnable but waited {} for a CPU, ran {}",
                fmt_ns(t.run_delay_ns.max(h.ns)),
                fmt_ns(t.cpu_ns)
            ),
            Activity::Runnable => format!(
                "runnable (R) in {} of {} samples, its counters too short to say whether it ran",
                t.count('R'),
                t.samples
            ),
            Activity::Stopped => "state T (stopped)".to_string(),
            Activity::Waiting(Wait::PageIn) => {
                let st = if t.count('D') > 0 { 'D' } else { t.dominant_state() };
                let mut s = format!(
                    "not in a syscall, state {st} for {ns} in {}",
                    if t.wchan.is_empty() { "a page fault" } else { &t.wchan }
                );
                faults(&mut s);
                s
            }
            Activity::Waiting(w @ (Wait::FileWrite | Wait::FileRead)) => {
                let call = t
                    .syscall_nr
                    .and_then(procwatch::syscalls::name)
                    .map(|n| format!("{n}(2)"))
                    .unwrap_or_else(|| "a system call".into());
                let file = t.file().map(|f| format!(" to {f}")).unwrap_or_default();
                let file =
                    if w == Wait::FileRead { file.replacen(" to ", " of ", 1) } else { file };
                format!(
                    "in {call}{file} for {ns} (state {} in {})",
                    t.dominant_state(),
                    if t.wchan.is_empty() || t.wchan == "0" { "-" } else { &t.wchan }
                )
            }
            Activity::Waiting(w) => format!(
                "{} for {ns} (state {} in {})",
                w.words(),
                t.dominant_state(),
                if t.wchan.is_empty() || t.wchan == "0" { "-" } else { &t.wchan }
            ),
        });
    }
    if held.is_empty() {
        parts.push(format!(
            "state {} in {}",
            t.dominant_state(),
            if t.wchan.is_empty() { "-" } else { &t.wchan }
        ));
    }
    parts.join("; ")
}

fn culprit_view(t: &ThreadEvidence, held: &[&Held], cause: Cause, inp: &Inputs) -> CulpritView {
    let named = held.iter().any(|h| h.named);
    let faulting = held.iter().any(|h| h.activity == Activity::Waiting(Wait::PageIn));
    let place = if faulting {
        traced_fault(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp).and_then(|(addr, _)| {
            let m = procwatch::maps::lookup(inp.maps, addr)?;
            m.is_file().then(|| {
                format!(
                    "offset {:#x} of {} (page-fault tracepoint)",
                    addr - m.start + m.offset,
                    m.path
                )
            })
        })
    } else {
        None
    };
    let files = match (place, cause) {
        (Some(p), _) => vec![p],
        (None, Cause::MajorFault) => cold_files(inp),
        _ => vec![],
    };
    let ip = if faulting {
        traced_fault(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp).map(|f| f.1)
    } else {
        None
    };
    CulpritView {
        tid: t.tid,
        name: name_of(t.tid, &t.comm, inp.names),
        description: describe(t, held, inp),
        module: t.fault_pc.or(ip).filter(|_| faulting).and_then(|pc| module_of(pc, inp.maps)),
        files,
        named_by_safepoint_timeout: named,
        code: None,
    }
}

/// Confidence from the share a cause explains and whether its evidence is of its own kind.
pub fn confidence(share: f64, strong: bool) -> Confidence {
    if share >= HIGH_SHARE && strong {
        Confidence::High
    } else if share >= MEDIUM_SHARE {
        Confidence::Medium
    } else {
        Confidence::Low
    }
}

/// The recorder was held up too: why, before blaming the machine.
fn recorder_held(inp: &Inputs, d: u64) -> Option<Finding> {
    let late = inp.control_max_late_ns;
    if late < (d / 2).max(CONTROL_LATE_MIN_NS) {
        return None;
    }
    let s = inp.signals;
    let mut evid = vec![format!("stallscope's own control meter was late by {} too", fmt_ns(late))];
    let own_throttled = s.recorder.throttled_ns.unwrap_or(0);
    let shared_throttled = if inp.shares.cpu_cgroup { s.throttled_ns.unwrap_or(0) } else { 0 };
    if own_throttled.max(shared_throttled) > 0 {
        evid.push(format!("stallscope runs under the same CPU quota as the JVM, and that cgroup was throttled for {}: its own lateness is the quota's, not the machine's", fmt_ns(own_throttled.max(shared_throttled))));
        let share = own_throttled.max(shared_throttled) as f64 / d as f64;
        return Some(finding(
            Cause::CgroupThrottling,
            confidence(share.max(late as f64 / d as f64), true),
            share.min(1.0),
            vec![],
            evid,
        ));
    }
    if let Some(rd) = inp.control_queued_ns.or(s.recorder.run_delay_ns).filter(|rd| *rd >= late / 2)
    {
        evid.push(format!("stallscope's watch thread itself waited {} for a CPU: the machine's CPUs were saturated, not paused", fmt_ns(rd)));
        let (contended, psi) = cpu_pressure(inp);
        evid.extend(psi);
        let share = (rd as f64 / d as f64).min(1.0);
        return Some(finding(
            Cause::CpuStarvation,
            confidence(share, contended),
            share,
            vec![],
            evid,
        ));
    }
    if inp.shares.memory_cgroup && s.memory.reclaiming() {
        evid.push("stallscope shares the JVM's memory cgroup, which was reclaiming: the recorder was held up by the same limit".into());
        evid.extend(reclaim_lines(inp));
        return Some(finding(
            Cause::MemoryReclaim,
            Confidence::Medium,
            late as f64 / d as f64,
            vec![],
            evid,
        ));
    }
    let mut conf = Confidence::Medium;
    if let Some(steal) = s.steal_ns.filter(|st| *st > d / 5) {
        evid.push(format!("{} of CPU time stolen by the hypervisor", fmt_ns(steal)));
        conf = Confidence::High;
    }
    Some(finding(Cause::MachinePause, conf, late as f64 / d as f64, vec![], evid))
}

pub fn classify(inp: &Inputs) -> Vec<Finding> {
    let d = inp.duration_ns.max(1);
    let ev = inp.evidence;

    // Everything stopped: a freeze, whatever else the safepoint log says.
    let stopped_samples = ev.stopped_share.iter().filter(|s| **s >= STOPPED_SAMPLE).count();
    if !ev.stopped_share.is_empty()
        && stopped_samples as f64 / ev.stopped_share.len() as f64 >= STOPPED_SAMPLES
    {
        let share = stopped_samples as f64 / ev.stopped_share.len() as f64;
        let mut evid = vec![format!(
            "every thread in state T in {stopped_samples} of {} samples",
            ev.stopped_share.len()
        )];
        if inp.control_max_late_ns < d / 4 {
            evid.push(format!(
                "stallscope's own control meter ran on (worst lateness {})",
                fmt_ns(inp.control_max_late_ns)
            ));
        }
        return vec![finding(Cause::Frozen, Confidence::High, share, vec![], evid)];
    }

    // The recorder was held up with the JVM: its own cgroup, the CPUs, or the machine.
    if let Some(f) = recorder_held(inp, d) {
        return vec![f];
    }

    let mut parts = Vec::new();
    for seg in inp.segments {
        // Phases of a safepoint too short to matter are left to the others.
        let phase_ok = |sp: &SafepointView, ns: u64| {
            ns >= PHASE_MIN_NS && ns as f64 >= PHASE_MIN_SHARE * sp.total_ns.max(1) as f64
        };
        match seg.kind {
            SegmentKind::Reaching(i)
                if !phase_ok(&inp.safepoints[i], inp.safepoints[i].ttsp_ns) =>
            {
                continue;
            }
            SegmentKind::At(i)
                if !phase_ok(&inp.safepoints[i], inp.safepoints[i].at_safepoint_ns) =>
            {
                continue;
            }
            _ => {}
        }
        segment_parts(seg, inp, &mut parts);
    }

    // Parts of one cause become one finding.
    let mut by_cause: BTreeMap<Cause, Part> = BTreeMap::new();
    let mut strong_ns: BTreeMap<Cause, u64> = BTreeMap::new();
    for p in parts {
        let e = by_cause.entry(p.cause).or_insert_with(|| Part {
            cause: p.cause,
            ns: 0,
            strong: false,
            held: vec![],
            evidence: vec![],
        });
        // Strong when strong evidence covers most of the cause's time (summed over its parts,
        // in whatever order they come).
        let strong = strong_ns.entry(p.cause).or_default();
        *strong += if p.strong { p.ns } else { 0 };
        e.ns += p.ns;
        e.strong = *strong * 2 >= e.ns.max(1);
        e.held.extend(p.held);
        for line in p.evidence {
            if !e.evidence.contains(&line) {
                e.evidence.push(line);
            }
        }
    }
    let mut out = Vec::new();
    let mut explained = 0u64;
    for (cause, p) in by_cause {
        let share = (p.ns as f64 / d as f64).min(1.0);
        if cause != Cause::Unknown {
            explained += p.ns;
        }
        // Culprits: each thread once, with what it did, longest first; stallscope's never.
        let mut tids: Vec<i32> = Vec::new();
        let mut held = p.held.clone();
        held.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
        for h in &held {
            if !tids.contains(&h.tid) {
                tids.push(h.tid);
            }
        }
        // An unknown share names no culprit: the raw samples show every thread instead.
        if cause == Cause::Unknown {
            tids.clear();
        }
        let more = tids.len().saturating_sub(MAX_CULPRITS);
        let culprits: Vec<CulpritView> = tids
            .iter()
            .take(MAX_CULPRITS)
            .filter_map(|tid| {
                let t = ev.threads.iter().find(|t| t.tid == *tid)?;
                if stallscope_own(&name_of(t.tid, &t.comm, inp.names)) {
                    return None;
                }
                let mine: Vec<&Held> = held.iter().filter(|h| h.tid == *tid).collect();
                Some(culprit_view(t, &mine, cause, inp))
            })
            .collect();
        let mut evidence = Vec::new();
        if held.iter().any(|h| h.named) && cause != Cause::Unknown {
            evidence.push(
                "SafepointTimeout named the thread as not reaching the safepoint".to_string(),
            );
        }
        if cause == Cause::LongVmOperation {
            evidence.extend(operation_lines(&culprits, inp));
        }
        if more > 0 {
            evidence.push(format!(
                "{} more thread{} like the culprits above",
                more,
                if more == 1 { "" } else { "s" }
            ));
        }
        evidence.extend(p.evidence);
        if cause == Cause::Unknown && held.iter().any(|h| h.named) {
            evidence.push("SafepointTimeout named it, but /proc showed it parked in the kernel; the evidence is thin".into());
        }
        let conf =
            if cause == Cause::Unknown { Confidence::Low } else { confidence(share, p.strong) };
        out.push(finding(cause, conf, share, culprits, evidence));
    }

    // Machine-wide contributors.
    let s = inp.signals;
    if let Some(during) = s.tlb_rate_during
        && during >= TLB_STORM_RATE
        && s.tlb_rate_before.is_none_or(|b| during >= TLB_STORM_FACTOR * b)
    {
        let mut evid = vec![format!("{:.0} TLB shootdowns per second during the stall", during)];
        if let Some(b) = s.tlb_rate_before {
            evid.push(format!("{:.0} per second just before", b));
        }
        out.push(finding(Cause::TlbShootdown, Confidence::Medium, 0.0, vec![], evid));
    }
    if let Some(th) = s.throttled_ns.filter(|t| *t > 0)
        && !out.iter().any(|f| f.cause == Cause::CgroupThrottling)
    {
        let share = (th as f64 / d as f64).min(1.0);
        out.push(finding(
            Cause::CgroupThrottling,
            confidence(share, true),
            share,
            vec![],
            vec![format!("the cgroup was throttled for {} during the stall", fmt_ns(th))],
        ));
    }
    // What no evidence covers is unknown, beside the causes (or alone): all of it, not only the
    // parts a thread was seen doing something unexplained.
    let unexplained = d.saturating_sub(explained);
    let has_cause = out.iter().any(|f| f.cause != Cause::Unknown && f.share > 0.0);
    let remainder = unexplained as f64 / d as f64;
    match out.iter_mut().find(|f| f.cause == Cause::Unknown) {
        Some(u) => u.share = u.share.max(remainder),
        None if has_cause && remainder >= UNKNOWN_SHARE => {
            out.push(finding(
                Cause::Unknown,
                Confidence::Low,
                remainder,
                vec![],
                vec![format!(
                    "{} of the {} stall is not explained by the evidence above",
                    fmt_ns(unexplained),
                    fmt_ns(d)
                )],
            ));
        }
        None => {}
    }
    if out.iter().any(|f| f.share >= NEGLIGIBLE_SHARE || f.cause == Cause::TlbShootdown) {
        out.retain(|f| f.share >= NEGLIGIBLE_SHARE || f.cause == Cause::TlbShootdown);
    }
    // Largest share first; shares within the same twentieth (two readings of the same time,
    // such as a throttled cgroup's threads waiting on a run queue) go by confidence, so the
    // cause with the stronger evidence leads.
    let bucket = |f: &Finding| (f.share * 20.0).round() as i64;
    out.sort_by(|a, b| {
        bucket(b)
            .cmp(&bucket(a))
            .then(b.confidence.cmp(&a.confidence))
            .then(b.share.partial_cmp(&a.share).unwrap_or(std::cmp::Ordering::Equal))
            .then(a.cause.cmp(&b.cause))
    });
    // A lone unknown explains nothing: nothing to report but the raw samples.
    if out.len() == 1 && out[0].cause == Cause::Unknown && out[0].evidence.is_empty() {
        out.clear();
    }
    out
}

/// The operation's threads and what they did, for a long VM operation.
fn operation_lines(culprits: &[CulpritView], inp: &Inputs) -> Vec<String> {
    let op = inp.safepoints.iter().max_by_key(|s| s.at_safepoint_ns);
    let mut v = Vec::new();
    if let Some(sp) = op {
        v.push(format!(
            "at safepoint {} of {}: the operation \"{}\" itself, its threads on a CPU",
            fmt_ns(sp.at_safepoint_ns),
            fmt_ns(sp.total_ns),
            sp.op
        ));
    }
    let _ = culprits;
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::Seen;
    use std::collections::BTreeMap;

    const MS: u64 = 1_000_000;

    /// A thread seen in `state` throughout `span`, with the given counters.
    fn thread(tid: i32, comm: &str, state: char, cpu_ns: u64, run_delay_ns: u64) -> ThreadEvidence {
        let span = 22 * MS;
        let seen = match state {
            'R' => Seen::Runnable,
            'T' => Seen::Stopped,
            _ => Seen::Waiting(Wait::Parked),
        };
        ThreadEvidence {
            tid,
            comm: comm.into(),
            samples: 10,
            states: BTreeMap::from([(state, 10)]),
            wchan: String::new(),
            wchans: BTreeMap::new(),
            not_in_syscall: 0,
            fault_pc: None,
            first_blocked_t: None,
            syscall_nr: None,
            cpu_ns,
            run_delay_ns,
            queued_at_first_ns: 0,
            lead_queued_ns: 0,
            majflt: 0,
            minflt: 0,
            majflt_since_baseline: 0,
            span_ns: span,
            utime_ticks: 0,
            stime_ticks: 0,
            seen_ns: BTreeMap::from([(seen, span)]),
            files: BTreeMap::new(),
        }
    }

    fn safepoint(op: &str, ttsp_ns: u64, at_safepoint_ns: u64) -> SafepointView {
        SafepointView {
            op: op.into(),
            ttsp_ns,
            at_safepoint_ns,
            total_ns: ttsp_ns + at_safepoint_ns,
            start_mono_ns: 0,
            threads_total: Some(14),
            threads_running: Some(0),
            timeout_culprits: vec![],
            unfinished: false,
        }
    }

    fn evidence(threads: Vec<ThreadEvidence>) -> StallEvidence {
        StallEvidence { threads, sample_times: vec![0, 11 * MS, 22 * MS], stopped_share: vec![] }
    }

    /// Classifies one stall of `duration_ns` over one safepoint, with the threads as given in
    /// each phase (none: no sample fell inside), nothing traced.
    fn run(
        reaching: Option<Vec<ThreadEvidence>>,
        at: Option<Vec<ThreadEvidence>>,
        whole: Vec<ThreadEvidence>,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
    ) -> Vec<Finding> {
        let names = HashMap::new();
        let sps = vec![sp];
        let seg = |kind, start, end, th: Option<Vec<ThreadEvidence>>| Segment {
            kind,
            start_ns: start,
            end_ns: end,
            evidence: th.map(evidence).unwrap_or_default(),
        };
        let segments: Vec<Segment> = segments(0, duration_ns, &sps)
            .into_iter()
            .map(|(kind, start, end)| match kind {
                SegmentKind::Reaching(_) => seg(kind, start, end, reaching.clone()),
                SegmentKind::At(_) => seg(kind, start, end, at.clone()),
                SegmentKind::Outside => seg(kind, start, end, None),
            })
            .collect();
        let whole = evidence(whole);
        classify(&Inputs {
            duration_ns,
            start_ns: 0,
            end_ns: duration_ns,
            evidence: &whole,
            segments: &segments,
            safepoints: &sps,
            control_max_late_ns: 0,
            control_queued_ns: None,
            signals: &signals,
            shares: Shares::default(),
            names: &names,
            maps: &[],
            mapped_files: &[],
            meter_tid: None,
            trace: &[],
            clock_ticks: 100,
        })
    }

    fn psi(during: Option<f64>, before: Option<f64>) -> SystemSignals {
        SystemSignals { psi_cpu_during: during, psi_cpu_before: before, ..SystemSignals::default() }
    }

    /// A 22 ms G1 pause, almost all of it at the safepoint, with the VM Thread and a GC worker as given.
    fn gc_pause(vm: ThreadEvidence, gc: ThreadEvidence, p: f64) -> Vec<Finding> {
        run(
            None,
            Some(vec![vm.clone(), gc.clone()]),
            vec![vm, gc],
            safepoint("G1CollectForAllocation", 36_000, 22 * MS),
            22 * MS + 36_000,
            psi(Some(p), None),
        )
    }

    #[test]
    fn cpu_time_from_before_the_safepoint_is_no_evidence_of_a_missing_poll() {
        // From a doctor test under 4 CPU hogs: 5.35 ms of CPU in a 21.3 ms stall whose TTSP was
        // 10.8 ms, no sample inside the TTSP. It may all have run before the safepoint began.
        let mut w = thread(7, "storm-worker-0", 'R', 5_350_000, 121_000);
        w.span_ns = 8 * MS;
        let f = run(
            None,
            None,
            vec![w.clone()],
            safepoint("ThreadDump", 11 * MS, 60_000),
            21 * MS,
            psi(None, Some(0.8)),
        );
        assert!(f.iter().all(|x| x.cause != Cause::NoSafepointPoll), "{f:?}");
        // When the TTSP is the stall, running through it is what a missing poll looks like.
        w.cpu_ns = 20 * MS;
        w.span_ns = 21 * MS;
        let f = run(
            None,
            None,
            vec![w],
            safepoint("ThreadDump", 21 * MS, 60_000),
            21 * MS,
            psi(None, Some(0.8)),
        );
        assert_eq!(f[0].cause, Cause::NoSafepointPoll, "{f:?}");
    }

    #[test]
    fn an_operation_that_ran_is_a_long_vm_operation_and_names_its_threads() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 100_000, 20_000),
            thread(2, "GC Thread#0", 'R', 20 * MS, 200_000),
            0.1,
        );
        assert_eq!(f[0].cause, Cause::LongVmOperation, "{f:?}");
        assert_eq!(f.len(), 1, "{f:?}");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"GC Thread#0"),
            "the thread doing the work is its culprit: {names:?}"
        );
    }

    #[test]
    fn an_operation_whose_threads_waited_for_a_cpu_is_starved() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 25_000, 6 * MS),
            thread(2, "GC Thread#0", 'R', 3 * MS, 11 * MS),
            0.97,
        );
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "PSI says the CPUs were saturated");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["GC Thread#0", "VM Thread"], "the longest wait first");
        assert!(
            f.iter().all(|x| x.cause != Cause::LongVmOperation || x.share < 0.25),
            "17 of 22 ms waiting: no long operation left to blame: {f:?}"
        );
    }

    #[test]
    fn a_partly_starved_operation_gets_both_causes_by_share() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 25_000, 2 * MS),
            thread(2, "GC Thread#0", 'R', 12 * MS, 8 * MS),
            0.6,
        );
        let causes: Vec<Cause> = f.iter().map(|x| x.cause).collect();
        assert_eq!(
            causes,
            [Cause::LongVmOperation, Cause::CpuStarvation],
            "12 of 22 ms ran, 10 waited: {f:?}"
        );
        assert!(
            (f[0].share + f[1].share - 1.0).abs() < 0.01,
            "the shares add up to the safepoint's: {f:?}"
        );
    }

    #[test]
    fn gc_threads_paging_the_heap_in_from_swap_are_swap_in_not_a_loop_or_a_long_operation() {
        // As measured here: a 2.15 s full GC whose two GC threads ran 870 ms each, 9 ticks user
        // and 78 system, +12,433 major faults, D in folio_wait_bit_common a fifth of the time;
        // the JVM's swap fell from 475 MB to 110 MB.
        let gc = |tid: i32| {
            let mut t = thread(tid, &format!("GC Thread#{tid}"), 'R', 870 * MS, 100 * MS);
            t.span_ns = 2150 * MS;
            t.utime_ticks = 9;
            t.stime_ticks = 78;
            t.majflt = 12_433;
            t.majflt_since_baseline = 12_433;
            t.seen_ns = BTreeMap::from([
                (Seen::Runnable, 1700 * MS),
                (Seen::Waiting(Wait::PageIn), 450 * MS),
            ]);
            t.wchan = "folio_wait_bit_common".into();
            t
        };
        let mut sig = SystemSignals::default();
        sig.memory.swapped_in_kb = Some(365_644);
        sig.memory.swap_kb_before = Some(475_416);
        sig.memory.pswpin = Some(148_512);
        let vm = thread(1, "VM Thread", 'S', MS, 0);
        let f = run(
            None,
            Some(vec![vm.clone(), gc(2), gc(3)]),
            vec![vm, gc(2), gc(3)],
            safepoint("ParallelGCSystemGC", 190_000, 2150 * MS),
            2150 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::SwapIn, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "{f:?}");
        assert!(
            f.iter().all(|x| !matches!(x.cause, Cause::NoSafepointPoll | Cause::LongVmOperation)
                || x.confidence != Confidence::High),
            "{f:?}"
        );
        assert!(f[0].culprits.iter().any(|c| c.name == "GC Thread#2"), "{f:?}");
    }

    #[test]
    fn the_vm_thread_writing_a_log_to_a_slow_disk_is_blocking_io_whatever_its_state_letter() {
        // As measured here: 6.6 s at the safepoint, the VM Thread asleep (S) in
        // request_wait_answer inside write(2) of the GC log on a FUSE file system.
        let mut vm = thread(1, "VM Thread", 'S', MS, 0);
        vm.span_ns = 6600 * MS;
        vm.wchan = "request_wait_answer".into();
        vm.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::FileWrite), 6600 * MS)]);
        vm.files = BTreeMap::from([("/mnt/slow/gc.log".to_string(), 3000)]);
        vm.syscall_nr = (0..512).find(|n| procwatch::syscalls::name(*n) == Some("write"));
        let gc = thread(2, "GC Thread#0", 'S', MS, 0);
        let f = run(
            None,
            Some(vec![vm.clone(), gc.clone()]),
            vec![vm, gc],
            safepoint("ParallelGCSystemGC", 80_000, 6600 * MS),
            6600 * MS,
            SystemSignals::default(),
        );
        assert_eq!(f[0].cause, Cause::VmThreadIo, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High);
        assert_eq!(f[0].culprits[0].name, "VM Thread");
        assert!(
            f[0].culprits[0].description.contains("write(2) to /mnt/slow/gc.log"),
            "{}",
            f[0].culprits[0].description
        );
        assert!(f.iter().all(|x| x.cause != Cause::LongVmOperation), "{f:?}");
    }

    #[test]
    fn a_thread_asleep_over_memory_high_is_memcg_high() {
        // A stand-in built from samples, named so: this project's machines have the memory
        // controller on cgroup v1 only, where memory.high does not exist, so no real JVM can be
        // throttled by it here. The thread slept in mem_cgroup_handle_over_high after a fault in
        // Java code, and the cgroup's memory.events high count rose.
        let mut t = thread(9, "worker", 'S', MS, 0);
        t.span_ns = 300 * MS;
        t.wchan = "mem_cgroup_handle_over_high".into();
        t.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::MemcgHigh), 300 * MS)]);
        let mut sig = SystemSignals::default();
        sig.memory.memcg_high_events = Some(40);
        let mut sp = safepoint("G1CollectForAllocation", 300 * MS, 2 * MS);
        sp.timeout_culprits = vec![crate::report::TimeoutCulprit {
            name: "worker".into(),
            tid: Some(9),
            state: Some("runnable".into()),
        }];
        let f = run(Some(vec![t.clone()]), None, vec![t], sp, 302 * MS, sig);
        assert_eq!(f[0].cause, Cause::MemcgHigh, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High);
        assert!(f[0].evidence.iter().any(|e| e.contains("over memory.high 40 times")), "{f:?}");
    }

    /// The recorder's own control meter late by most of a stall outside any safepoint.
    fn recorder_late(
        queued_ns: Option<u64>,
        shares: Shares,
        signals: SystemSignals,
    ) -> Vec<Finding> {
        let names = HashMap::new();
        let ev = StallEvidence::default();
        classify(&Inputs {
            duration_ns: 100 * MS,
            start_ns: 0,
            end_ns: 100 * MS,
            evidence: &ev,
            segments: &[],
            safepoints: &[],
            control_max_late_ns: 90 * MS,
            control_queued_ns: queued_ns,
            signals: &signals,
            shares,
            names: &names,
            maps: &[],
            mapped_files: &[],
            meter_tid: None,
            trace: &[],
            clock_ticks: 100,
        })
    }

    #[test]
    fn a_late_recorder_is_a_machine_pause_only_when_nothing_else_held_it() {
        // It ran, but not for 90 ms, and nothing queued or throttled it: the machine stopped.
        assert_eq!(
            recorder_late(Some(0), Shares::default(), SystemSignals::default())[0].cause,
            Cause::MachinePause
        );
        // It waited on a run queue for most of that: the CPUs were busy, not stopped.
        let f = recorder_late(Some(80 * MS), Shares::default(), SystemSignals::default());
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
        // It runs under the JVM's CPU quota, and that cgroup was throttled.
        let sig = SystemSignals { throttled_ns: Some(85 * MS), ..SystemSignals::default() };
        let f = recorder_late(Some(0), Shares { cpu_cgroup: true, memory_cgroup: false }, sig);
        assert_eq!(f[0].cause, Cause::CgroupThrottling, "{f:?}");
        assert!(f[0].evidence.iter().any(|e| e.contains("same CPU quota")), "{f:?}");
    }

    #[test]
    fn a_runnable_thread_in_a_throttled_cgroup_waits_out_the_quota_not_a_busy_machine() {
        // As in the lab's cpu-quota scenario: a 77 ms stall, the late thread R in every sample
        // with counters too short to say, the CPUs saturated (PSI 97%), the JVM's cgroup
        // throttled for 70 ms of it.
        let mut t = thread(7, "worker", 'R', 0, 0);
        t.span_ns = 77 * MS;
        t.seen_ns = BTreeMap::from([(Seen::Runnable, 77 * MS)]);
        let sig = SystemSignals {
            psi_cpu_during: Some(0.97),
            throttled_ns: Some(70 * MS),
            ..SystemSignals::default()
        };
        let f = run(
            Some(vec![t.clone()]),
            None,
            vec![t.clone()],
            safepoint("ThreadDump", 76 * MS, MS),
            77 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::CgroupThrottling, "{f:?}");
        assert_ne!(f[0].confidence, Confidence::High, "R is no proof of waiting: {f:?}");
        // Without the throttling, the same samples are a busy machine.
        let sig = SystemSignals { psi_cpu_during: Some(0.97), ..SystemSignals::default() };
        let f = run(
            Some(vec![t.clone()]),
            None,
            vec![t],
            safepoint("ThreadDump", 76 * MS, MS),
            77 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
    }

    #[test]
    fn what_no_evidence_covers_is_unknown_beside_the_cause() {
        // The operation's threads parked most of a 100 ms operation: 30 ms explained.
        let mut gc = thread(2, "GC Thread#0", 'R', 30 * MS, 0);
        gc.span_ns = 100 * MS;
        gc.seen_ns =
            BTreeMap::from([(Seen::Runnable, 30 * MS), (Seen::Waiting(Wait::Parked), 70 * MS)]);
        let f = run(
            None,
            Some(vec![gc.clone()]),
            vec![gc],
            safepoint("G1CollectFull", 50_000, 100 * MS),
            100 * MS,
            SystemSignals::default(),
        );
        let unknown = f.iter().find(|x| x.cause == Cause::Unknown).expect("the rest is unknown");
        assert!((unknown.share - 0.7).abs() < 0.02, "{f:?}");
        let op = f.iter().find(|x| x.cause == Cause::LongVmOperation).unwrap();
        assert_eq!(op.confidence, Confidence::Low, "30% is no ground for confidence: {f:?}");
    }
}
