//! From parts to findings: a freeze or a held-up recorder first, else the parts of one cause
//! merged into one finding with its share, confidence and culprits, then the machine-wide
//! contributors, whatever no evidence covers as `unknown`, and the order a reader sees them in.
//!
//! Invariant: every finding lists the evidence it rests on; high confidence needs evidence of
//! its kind covering at least [`crate::confidence::HIGH_SHARE`] of the stall; stallscope's own threads are
//! culprits only when the JVM's SafepointTimeout named them.

use super::UNKNOWN_SHARE;
use super::activity::Activity;
use super::attribute::{Held, Part};
use super::evidence_kind::Evidence;
use super::inputs::Inputs;
use super::machine::{cold_files, cpu_pressure, reclaim_lines, tlb_storm, traced_fault};
use super::words::{lines, plural};
use crate::causes::Cause;
use crate::confidence::{Strength, grade};
use crate::evidence::{ThreadEvidence, stallscope_own};
use crate::report::{Confidence, CulpritView, Finding};
use crate::wait::Wait;
use recording::disk::Mapping;
use recording::units::fmt_ns;
use std::collections::BTreeMap;

/// Findings smaller than this share are dropped (unless nothing else is left).
const NEGLIGIBLE_SHARE: f64 = 0.05;
/// Every thread in state T in this share of the samples (and in half the samples): frozen.
const STOPPED_SAMPLE: f64 = 0.9;
const STOPPED_SAMPLES: f64 = 0.5;
/// The recorder's control meter late by half the stall (and at least this): the recorder was
/// held up with the JVM.
const CONTROL_LATE_MIN_NS: u64 = 20_000_000;
/// Culprits listed per finding (the rest are counted).
const MAX_CULPRITS: usize = 4;

/// A finding whose evidence is not yet put into words: what the steps of the classification
/// pass along, weigh and order.
#[derive(Debug)]
pub(super) struct Draft {
    pub cause: Cause,
    pub confidence: Confidence,
    pub share: f64,
    pub culprits: Vec<CulpritView>,
    pub evidence: Vec<Evidence>,
}

impl Draft {
    /// The finding as reported: its cause's title, fix and page, and its evidence in words.
    pub(super) fn into_finding(mut self) -> Finding {
        let cause = self.cause;
        // A stretch whose counters were too coarse to see its faults does not contradict the
        // faults another stretch counted: they entered the kernel.
        if fresh_memory(&self.evidence) {
            self.evidence.retain(|e| !matches!(e, Evidence::RanWithoutKernel { .. }));
        }
        Finding {
            cause,
            title: cause.title().to_string(),
            confidence: self.confidence,
            share: self.share,
            culprits: self.culprits,
            evidence: lines(&self.evidence),
            fix: fix_for(cause, &self.evidence),
            doc: cause.doc(),
            instigator: None,
        }
    }
}

/// What fixes a finding: its cause's fix, made specific where the evidence names the thing to
/// change.
fn fix_for(cause: Cause, evidence: &[Evidence]) -> String {
    // First touches of fresh memory are not fixed by a safepoint poll in a loop: a thread
    // filling or copying fresh memory in one call is fixed by smaller calls or memory touched
    // ahead; GC threads touching a growing heap, by a heap touched at start.
    if fresh_memory(evidence) {
        match cause {
            Cause::NoSafepointPoll => return FRESH_MEMORY_CALL_FIX.to_string(),
            Cause::LongVmOperation => return FRESH_HEAP_FIX.to_string(),
            _ => {}
        }
    }
    // An operation that waited for CPUs its own threads held: more threads than CPUs.
    if cause == Cause::LongVmOperation
        && evidence
            .iter()
            .any(|e| matches!(e, Evidence::CpuHeldByOwnThreads | Evidence::CpusHeldByJvm { .. }))
    {
        return OWN_THREADS_FIX.to_string();
    }
    if cause != Cause::MappedWriteback {
        return cause.fix().to_string();
    }
    let mut files: Vec<&str> = Vec::new();
    for e in evidence {
        if let Evidence::WriteFaultUnderWriteback { files: f, .. } = e {
            for x in f {
                if !files.contains(&x.as_str()) {
                    files.push(x);
                }
            }
        }
    }
    let perf_data = |f: &&str| super::machine::perf_data_file(f);
    // The perf-counter fix only where every file named is the perf counters; the user's own
    // file's where none is.
    if evidence.contains(&Evidence::PerfDataFile) && files.iter().all(perf_data) {
        return PERF_DATA_FIX.to_string();
    }
    match files.as_slice() {
        [one] if !perf_data(one) => user_mapping_fix(one),
        _ => cause.fix().to_string(),
    }
}

/// The fix when an operation's threads waited for CPUs held by the JVM's own threads.
pub(crate) const OWN_THREADS_FIX: &str = "the operation ran more threads than the JVM had CPUs for, and they waited for each other: give a collection no more GC threads than the CPUs the JVM may use (-XX:ParallelGCThreads, -XX:ConcGCThreads; in a container whose CPU limit the JVM does not see, -XX:ActiveProcessorCount), keep other busy threads of the JVM off those CPUs, and then shorten the operation itself";

/// The fix when a thread late to a safepoint spent it first-touching fresh memory in one call.
pub(crate) const FRESH_MEMORY_CALL_FIX: &str = "the thread allocated, filled or copied memory it had never touched in one call that polls for no safepoint (a huge array zeroed as it is allocated, ByteBuffer.allocateDirect, Unsafe.setMemory or copyMemory): its pages' first touches are the cost, so allocate such arrays and buffers once, at start, off the latency-critical path (and reuse them), make fills in pieces of a few MiB, or have the heap touched at start (-XX:+AlwaysPreTouch with -Xms equal to -Xmx); a loop's safepoint poll (strip mining) does not help a single call";

/// Whether the evidence says first touches of fresh memory took the time: then no line says
/// the thread never entered the kernel (each fault did), and the fix is the fresh memory's.
fn fresh_memory(evidence: &[Evidence]) -> bool {
    evidence.iter().any(|e| {
        matches!(e, Evidence::KernelFreshMemory { .. } | Evidence::FreshMemoryTouched { .. })
    })
}

/// The fix when the operation's threads (a GC) spent it first-touching a growing heap.
pub(crate) const FRESH_HEAP_FIX: &str = "the GC threads touched heap pages the JVM had never used (the heap growing into fresh memory): touch the whole heap at start (-XX:+AlwaysPreTouch) with a fixed size (-Xms equal to -Xmx), so no pause pays for first touches";

/// The fix when the JVM's own perf-counter file waited for writeback.
pub(crate) const PERF_DATA_FIX: &str = "take the JVM's perf counters off the disk: -XX:+PerfDisableSharedMem keeps them in anonymous memory (jstat, jps, jcmd's listing and stallscope's attach-free views then cannot see the JVM; the agent's heartbeat still works), or put /tmp on tmpfs (the file is never written back; HotSpot always uses /tmp on Linux, whatever java.io.tmpdir says)";

/// The fix when the application's own file, mapped shared, waited for writeback.
fn user_mapping_fix(file: &str) -> String {
    format!(
        "{file} is written through a shared mapping, and a store to a page under writeback waits for the disk where pages are held stable while written (FUSE, NFS, btrfs, disks with integrity checks), with no safepoint poll: keep the file on tmpfs or faster local storage, or write it with FileChannel.write (a native call: a safepoint does not wait for it) instead of a READ_WRITE MappedByteBuffer; each force() (msync) or kernel flush starts the writeback the next store waits for"
    )
}

fn finding(
    cause: Cause,
    confidence: Confidence,
    share: f64,
    culprits: Vec<CulpritView>,
    evidence: Vec<Evidence>,
) -> Draft {
    Draft { cause, confidence, share: share.clamp(0.0, 1.0), culprits, evidence }
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
            let m = recording::disk::lookup(inp.maps, addr)?;
            m.is_file().then(|| fault_file(addr - m.start + m.offset, &m.path))
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
        name: inp.name_of(t),
        description: describe(t, held, inp),
        module: t.fault_pc.or(ip).filter(|_| faulting).and_then(|pc| module_of(pc, inp.maps)),
        files,
        named_by_safepoint_timeout: named,
        code: None,
    }
}

/// Where an address is: `JIT-compiled code`, `libjvm.so`, a file.
fn module_of(pc: u64, maps: &[Mapping]) -> Option<String> {
    let m = recording::disk::lookup(maps, pc)?;
    Some(if m.path.is_empty() && m.perms.contains('x') {
        "code the JVM generated (JIT-compiled code or a stub)".to_string()
    } else if m.path.is_empty() {
        "anonymous memory".to_string()
    } else {
        m.path.rsplit('/').next().unwrap_or(&m.path).to_string()
    })
}

/// A culprit's mapped file where the page-fault tracepoint placed its fault, as its line says it.
pub(crate) fn fault_file(offset: u64, path: &str) -> String {
    format!("offset {offset:#x} of {path} (page-fault tracepoint)")
}

/// The recorder was held up too: why, before blaming the machine.
pub(super) fn recorder_held(inp: &Inputs) -> Option<Draft> {
    let d = inp.duration_ns.max(1);
    let late = inp.control_max_late_ns;
    if late < (d / 2).max(CONTROL_LATE_MIN_NS) {
        return None;
    }
    let s = inp.signals;
    let mut evid = vec![Evidence::ControlLate { late_ns: late }];
    let own_throttled = s.recorder.throttled_ns.unwrap_or(0);
    let shared_throttled = if inp.shares.cpu_cgroup { s.throttled_ns.unwrap_or(0) } else { 0 };
    if own_throttled.max(shared_throttled) > 0 {
        evid.push(Evidence::SameCpuQuota { throttled_ns: own_throttled.max(shared_throttled) });
        let share = own_throttled.max(shared_throttled) as f64 / d as f64;
        return Some(finding(
            Cause::CgroupThrottling,
            grade(share.max(late as f64 / d as f64), Strength::Direct),
            share.min(1.0),
            vec![],
            evid,
        ));
    }
    if let Some(rd) = inp.control_queued_ns.or(s.recorder.run_delay_ns).filter(|rd| *rd >= late / 2)
    {
        evid.push(Evidence::WatchThreadQueued { ns: rd });
        let (contended, psi) = cpu_pressure(inp);
        evid.extend(psi);
        let share = (rd as f64 / d as f64).min(1.0);
        return Some(finding(
            Cause::CpuStarvation,
            grade(share, contended.into()),
            share,
            vec![],
            evid,
        ));
    }
    if inp.shares.memory_cgroup && s.memory.reclaiming() {
        evid.push(Evidence::SameMemoryCgroup);
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
        evid.push(Evidence::Steal { ns: steal });
        conf = Confidence::High;
    }
    Some(finding(Cause::MachinePause, conf, late as f64 / d as f64, vec![], evid))
}

/// Everything stopped: a freeze, whatever else the safepoint log says.
pub(super) fn frozen(inp: &Inputs) -> Option<Draft> {
    let d = inp.duration_ns.max(1);
    let ev = inp.evidence;
    let stopped_samples = ev.stopped_share.iter().filter(|s| **s >= STOPPED_SAMPLE).count();
    let frozen = !ev.stopped_share.is_empty()
        && stopped_samples as f64 / ev.stopped_share.len() as f64 >= STOPPED_SAMPLES;
    if !frozen {
        return None;
    }
    let share = stopped_samples as f64 / ev.stopped_share.len() as f64;
    let mut evid =
        vec![Evidence::AllStopped { stopped: stopped_samples, samples: ev.stopped_share.len() }];
    if inp.control_max_late_ns < d / 4 {
        evid.push(Evidence::ControlRanOn { worst_late_ns: inp.control_max_late_ns });
    }
    Some(finding(Cause::Frozen, Confidence::High, share, vec![], evid))
}

/// The parts of each cause merged into one: their time added up, their threads and their
/// evidence (each line once) together.
pub(super) fn merge_by_cause(parts: Vec<Part>) -> BTreeMap<Cause, Part> {
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
    by_cause
}

/// The time the merged parts explain with a known cause.
pub(super) fn explained_ns(by_cause: &BTreeMap<Cause, Part>) -> u64 {
    by_cause.values().filter(|p| p.cause != Cause::Unknown).map(|p| p.ns).sum()
}

/// One cause's finding: its share of the stall, its culprits (each thread once, longest first;
/// stallscope's only when SafepointTimeout named them) and its evidence.
pub(super) fn of_cause(p: Part, inp: &Inputs) -> Draft {
    let d = inp.duration_ns.max(1);
    let cause = p.cause;
    let share = (p.ns as f64 / d as f64).min(1.0);
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
            let t = inp.evidence.threads.iter().find(|t| t.tid == *tid)?;
            let mine: Vec<&Held> = held.iter().filter(|h| h.tid == *tid).collect();
            if stallscope_own(&inp.name_of(t)) && !mine.iter().any(|h| h.named) {
                return None;
            }
            Some(culprit_view(t, &mine, cause, inp))
        })
        .collect();
    let mut evidence = Vec::new();
    if held.iter().any(|h| h.named) && cause != Cause::Unknown {
        evidence.push(Evidence::NamedByTimeout);
    }
    for c in culprits.iter().filter(|c| stallscope_own(&c.name)) {
        evidence.push(Evidence::OwnThreadHeld { name: c.name.clone() });
    }
    if cause == Cause::LongVmOperation {
        evidence.extend(operation_line(inp));
    }
    if more > 0 {
        evidence.push(Evidence::MoreCulprits { more });
    }
    evidence.extend(p.evidence);
    if cause == Cause::Unknown && held.iter().any(|h| h.named) {
        evidence.push(Evidence::NamedButParked);
    }
    let conf =
        if cause == Cause::Unknown { Confidence::Low } else { grade(share, p.strong.into()) };
    finding(cause, conf, share, culprits, evidence)
}

/// The operation itself, for a long VM operation: the longest time at a safepoint, and what ran.
fn operation_line(inp: &Inputs) -> Option<Evidence> {
    let sp = inp.safepoints.iter().max_by_key(|s| s.at_safepoint_ns)?;
    Some(Evidence::AtSafepoint {
        at_ns: sp.at_safepoint_ns,
        total_ns: sp.total_ns,
        op: sp.op.clone(),
    })
}

/// Machine-wide contributors: a storm of TLB shootdowns, and a throttled CPU cgroup no part
/// blamed already.
pub(super) fn add_machine_wide(out: &mut Vec<Draft>, inp: &Inputs) {
    let d = inp.duration_ns.max(1);
    if let Some(evid) = tlb_storm(inp) {
        out.push(finding(Cause::TlbShootdown, Confidence::Medium, 0.0, vec![], evid));
    }
    if let Some(th) = inp.signals.throttled_ns.filter(|t| *t > 0)
        && !out.iter().any(|f| f.cause == Cause::CgroupThrottling)
    {
        let share = (th as f64 / d as f64).min(1.0);
        out.push(finding(
            Cause::CgroupThrottling,
            grade(share, Strength::Direct),
            share,
            vec![],
            vec![Evidence::CgroupThrottled { ns: th }],
        ));
    }
}

/// What no evidence covers is unknown, beside the causes (or alone): all of it, not only the
/// parts a thread was seen doing something unexplained.
pub(super) fn add_unexplained(out: &mut Vec<Draft>, explained_ns: u64, inp: &Inputs) {
    let d = inp.duration_ns.max(1);
    let unexplained = d.saturating_sub(explained_ns);
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
                vec![Evidence::Unexplained { ns: unexplained, stall_ns: d }],
            ));
        }
        None => {}
    }
}

/// Findings too small to matter are dropped, unless nothing else is left (a TLB storm, which
/// has no share, stays).
pub(super) fn drop_negligible(out: &mut Vec<Draft>) {
    if out.iter().any(|f| f.share >= NEGLIGIBLE_SHARE || f.cause == Cause::TlbShootdown) {
        out.retain(|f| f.share >= NEGLIGIBLE_SHARE || f.cause == Cause::TlbShootdown);
    }
}

/// Largest share first; shares within the same twentieth (two readings of the same time, such
/// as a throttled cgroup's threads waiting on a run queue) go by confidence, so the cause with
/// the stronger evidence leads.
pub(super) fn order(out: &mut [Draft]) {
    let bucket = |f: &Draft| (f.share * 20.0).round() as i64;
    out.sort_by(|a, b| {
        bucket(b)
            .cmp(&bucket(a))
            .then(b.confidence.cmp(&a.confidence))
            .then(b.share.partial_cmp(&a.share).unwrap_or(std::cmp::Ordering::Equal))
            .then(a.cause.cmp(&b.cause))
    });
}

/// A lone unknown with no evidence explains nothing: nothing to report but the raw samples.
pub(super) fn drop_lone_unknown(out: &mut Vec<Draft>) {
    if out.len() == 1 && out[0].cause == Cause::Unknown && out[0].evidence.is_empty() {
        out.clear();
    }
}
