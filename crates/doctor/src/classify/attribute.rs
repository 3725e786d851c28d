//! Whose time a stall waited on, segment by segment, and what explains it: the threads late to
//! a safepoint while it was being reached, the VM thread and GC workers while at it, and outside
//! a safepoint the hiccup meter, whose lateness *is* the hiccup. Each thread's time is broken
//! down by activity and read as a cause; the parts of a segment are scaled to cover at most it.
//!
//! Invariant: a segment's parts never add up to more than the segment, and stallscope's own
//! meter thread is evidence, never a culprit.

use super::activity::{Activity, breakdown, unsafe_activity};
use super::evidence_kind::{Evidence, Role};
use super::inputs::Inputs;
use super::machine::cpu_pressure;
use super::readings::cause_of;
use super::segment::{Segment, SegmentKind};
use crate::causes::Cause;
use crate::evidence::{
    StallEvidence, ThreadEvidence, jvm_internal, stallscope_own, vm_operation_thread,
};
use crate::report::SafepointView;
use crate::wait::Wait;

/// A phase of a safepoint shorter than this (or than [`PHASE_MIN_SHARE`] of it) is not analysed.
const PHASE_MIN_NS: u64 = 1_000_000;
const PHASE_MIN_SHARE: f64 = 0.2;
/// A late thread must have spent at least this share of the TTSP somewhere unsafe.
const LATE_MIN_SHARE: f64 = 0.3;

/// A thread the stall waited on, and what it did.
#[derive(Debug, Clone)]
pub(super) struct Held {
    pub tid: i32,
    pub activity: Activity,
    pub ns: u64,
    pub named: bool,
}

/// A piece of the stall that one cause explains.
#[derive(Debug, Clone)]
pub(super) struct Part {
    pub cause: Cause,
    pub ns: u64,
    /// Whether the evidence is of the cause's own kind (a file behind a fault, swap counters,
    /// user-mode CPU…), not only inferred.
    pub strong: bool,
    pub held: Vec<Held>,
    pub evidence: Vec<Evidence>,
}

/// Every segment's parts, in time order, leaving out the phases of a safepoint too short to
/// matter (they are left to the others).
pub(super) fn stall_parts(inp: &Inputs) -> Vec<Part> {
    let mut parts = Vec::new();
    for seg in inp.segments {
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
    parts
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
    let mut raw: Vec<(Cause, u64, bool, Held, Vec<Evidence>)> = Vec::new();
    for (t, named) in threads {
        let a = t.account(inp.tick_ns());
        for (act, ns) in breakdown(&a) {
            if act == Activity::Waiting(Wait::Parked) {
                // A stall outside any safepoint for certain, the meter parked through most of
                // it: that is what the stall was. Said, not explained (what held it is in its
                // kernel line). (Near a safepoint, the meter parked is its own sleep or the
                // safepoint's wait.)
                if role == Role::Meter && inp.outside_safepoints && ns.saturating_mul(2) >= len_ns {
                    let ev = vec![Evidence::MeterParked { ms: ns / 1_000_000 }];
                    let held = Held { tid: t.tid, activity: act, ns, named: *named };
                    raw.push((Cause::Unknown, ns, false, held, ev));
                }
                continue;
            }
            // A moment on a CPU does not hold the meter for a stall ten times as long.
            if role == Role::Meter
                && matches!(act, Activity::User | Activity::Cpu | Activity::Kernel)
                && ns.saturating_mul(10) < len_ns
            {
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

/// The threads late to safepoint `sp`, with whether SafepointTimeout named them. A thread the
/// JVM named is late whoever it is, stallscope's own included (its log thread faulting a page in
/// from a slow disk, as seen in CI), except the meter: whatever held the JVM's threads held it
/// too, and it is evidence of that, not a cause.
fn late_threads<'e>(
    ev: &'e StallEvidence,
    sp: &SafepointView,
    len_ns: u64,
    inp: &Inputs,
) -> Vec<(&'e ThreadEvidence, bool)> {
    let named: Vec<i32> = sp.timeout_culprits.iter().filter_map(|c| c.tid).collect();
    let own = |t: &ThreadEvidence| stallscope_own(&inp.name_of(t));
    let by_name: Vec<(&ThreadEvidence, bool)> = ev
        .threads
        .iter()
        .filter(|t| named.contains(&t.tid) && Some(t.tid) != inp.meter_tid)
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
            let a = t.account(inp.tick_ns());
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
            if late.is_empty() {
                held_in_page_waits(ev, len, inp, out);
            }
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
                    // stallscope's threads starved with the JVM's are no culprits of it.
                    .filter(|c| !stallscope_own(&c.name))
                    .filter_map(|c| {
                        Some(Held { tid: c.tid?, activity: Activity::RunQueue, ns: 0, named: true })
                    })
                    .filter(|h| inp.evidence.threads.iter().any(|t| t.tid == h.tid))
                    .collect();
                let mut evid: Vec<Evidence> = psi.into_iter().collect();
                evid.push(if runnable.is_empty() {
                    Evidence::NoneSeenHolding
                } else {
                    Evidence::TimeoutSawRunnable
                });
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
                let mut evid = vec![Evidence::MeterRunnable {
                    runnable: meter.count('R'),
                    samples: meter.samples,
                }];
                evid.extend(psi);
                out.push(Part {
                    cause: Cause::CpuStarvation,
                    ns: len,
                    strong: contended,
                    held: vec![],
                    evidence: evid,
                });
            } else if covered == 0
                && !out[before..]
                    .iter()
                    .any(|p| p.evidence.iter().any(|e| matches!(e, Evidence::MeterParked { .. })))
            {
                // (A meter parked is held by a lock, not by the CPUs: said as such, alone.)
                let (contended, psi) = cpu_pressure(inp);
                if contended {
                    let mut evid: Vec<Evidence> = psi.into_iter().collect();
                    evid.push(Evidence::MeterRunningAgain);
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
            // The meter parked (on a lock, or in the JVM's own wait) while the GC locker held
            // a collection back (its own flag: the heap's lock is held until it runs), else
            // while threads of the JVM were held in write faults on a shared mapping: what it
            // waited behind, most likely.
            let explained: u64 =
                out[before..].iter().filter(|p| p.cause != Cause::Unknown).map(|p| p.ns).sum();
            if explained < len / 2 && meter.share('S') >= 0.5 {
                let beside = gc_locker_beside(ev, meter.tid, len, inp)
                    .or_else(|| write_faults_beside(ev, meter.tid, len, inp));
                if let Some(p) = beside {
                    out.truncate(before);
                    out.push(p);
                }
            }
        }
    }
}

/// No application thread was late, but the VM thread (held before it stopped anyone: the log's
/// TTSP counts from the start of its `begin`) or the meter (stallscope's own, so evidence and
/// never a culprit) waited for a page or its writeback: what that wait reads as.
fn held_in_page_waits(ev: &StallEvidence, len_ns: u64, inp: &Inputs, out: &mut Vec<Part>) {
    let is_meter = |t: &ThreadEvidence| Some(t.tid) == inp.meter_tid;
    let threads: Vec<(&ThreadEvidence, bool)> = ev
        .threads
        .iter()
        .filter(|t| is_meter(t) || t.comm == "VM Thread")
        .map(|t| (t, false))
        .collect();
    let mut parts = Vec::new();
    parts_of(&threads, Role::Late, len_ns, false, inp, &mut parts);
    for mut p in parts {
        let page_wait = p
            .held
            .iter()
            .all(|h| matches!(h.activity, Activity::Waiting(Wait::PageIn | Wait::Writeback)));
        if !page_wait || p.cause == Cause::Unknown {
            continue;
        }
        p.held.retain(|h| Some(h.tid) != inp.meter_tid);
        out.push(p);
    }
}

/// The GC locker held a collection back for at least half of a segment of `len_ns` outside any
/// safepoint while the meter (`meter`) was parked: one part, strong (the locker's own flag), its
/// culprit the one application thread on a CPU for at least half of the hold, where there was
/// exactly one (the JVM does not say which thread is in a critical region).
fn gc_locker_beside(ev: &StallEvidence, meter: i32, len_ns: u64, inp: &Inputs) -> Option<Part> {
    let held_ns = inp.gc_locker_held_ns.min(len_ns);
    if held_ns == 0 || held_ns.saturating_mul(2) < len_ns {
        return None;
    }
    let running: Vec<(&ThreadEvidence, u64)> = ev
        .threads
        .iter()
        .filter(|t| t.tid != meter)
        .filter(|t| {
            let name = inp.name_of(t);
            !stallscope_own(&name) && !jvm_internal(&name)
        })
        .filter_map(|t| {
            // Its CPU time as its counters moved (not the samples' R, which a thread spinning
            // and yielding shows too: the requester, on JDK 22 and later).
            let ran = t.cpu_ns.min(t.span_ns);
            (ran.saturating_mul(2) >= held_ns).then_some((t, ran))
        })
        .collect();
    let holder = match running.as_slice() {
        [(t, ran)] => Some((*t, *ran)),
        _ => None,
    };
    let held = holder
        .map(|(t, ran)| Held { tid: t.tid, activity: Activity::User, ns: ran, named: false })
        .into_iter()
        .collect();
    let evidence = vec![Evidence::GcLockerHeldBack {
        ms: held_ns / 1_000_000,
        holder: holder.map(|(t, ran)| (inp.name_of(t), ran / 1_000_000)),
    }];
    Some(Part { cause: Cause::GcLocker, ns: held_ns, strong: true, held, evidence })
}

/// Threads of the JVM (stallscope's own left out) held in write faults on a shared mapping for
/// at least half of a segment of `len_ns` outside any safepoint, while the meter (`meter`) was
/// parked: one part, the longest wait's reading, never strong (that the meter waited behind
/// them is inferred).
fn write_faults_beside(ev: &StallEvidence, meter: i32, len_ns: u64, inp: &Inputs) -> Option<Part> {
    let mut held = Vec::new();
    let mut longest: Option<(u64, Vec<Evidence>)> = None;
    for t in ev.threads.iter().filter(|t| t.tid != meter && !stallscope_own(&inp.name_of(t))) {
        for (act, ns) in breakdown(&t.account(inp.tick_ns())) {
            let waiting = matches!(act, Activity::Waiting(Wait::PageIn | Wait::Writeback));
            if !waiting || ns < len_ns / 2 {
                continue;
            }
            let (cause, _, evidence) = cause_of(t, act, Role::Late, inp);
            if cause != Cause::MappedWriteback {
                continue;
            }
            held.push(Held { tid: t.tid, activity: act, ns, named: false });
            if longest.as_ref().is_none_or(|(n, _)| ns > *n) {
                longest = Some((ns, evidence));
            }
        }
    }
    let (ns, reading) = longest?;
    let mut evidence = vec![Evidence::MeterParkedBesideWriteFaults { threads: held.len() }];
    evidence.extend(reading);
    Some(Part { cause: Cause::MappedWriteback, ns: ns.min(len_ns), strong: false, held, evidence })
}
