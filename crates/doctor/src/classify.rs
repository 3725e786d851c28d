//! From one stall's evidence to findings: which causes, with what confidence and share, which
//! threads held the world, and why we think so.
//!
//! Invariant: every finding lists the evidence it rests on; with no evidence the answer is
//! `unknown`, never a guess.

use crate::causes::Cause;
use crate::evidence::{fault_wait, jvm_internal, mmap_lock_wait, vm_operation_thread, StallEvidence, ThreadEvidence};
use crate::report::{Confidence, CulpritView, Finding, SafepointView};
use crate::units::fmt_ns;
use procwatch::maps::Mapping;
use std::collections::HashMap;

/// What a thread was doing that could hold a safepoint (or the meter) up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// On CPU and burning it: no safepoint poll reached.
    Spinning,
    /// Blocked outside a system call on a page coming in (a major fault).
    Faulting,
    /// Blocked on mmap_lock.
    MmapLock,
    /// Runnable but not running: waiting for a CPU.
    Starved,
    /// Stopped (SIGSTOP, freezer).
    Stopped,
    /// Parked in a system call or asleep: safe.
    Parked,
}

pub struct Inputs<'a> {
    pub duration_ns: u64,
    pub evidence: &'a StallEvidence,
    /// The same, over the safepoint's time to safepoint only, when it has samples.
    pub ttsp_evidence: Option<&'a StallEvidence>,
    pub safepoint: Option<&'a SafepointView>,
    pub control_max_late_ns: u64,
    pub steal_ns: Option<u64>,
    pub tlb_rate_during: Option<f64>,
    pub tlb_rate_before: Option<f64>,
    pub throttled_ns: Option<u64>,
    /// PSI `cpu some` during the stall and just before it: the share of time any task waited.
    pub psi_cpu_during: Option<f64>,
    pub psi_cpu_before: Option<f64>,
    pub names: &'a HashMap<i32, String>,
    pub maps: &'a [Mapping],
    pub mapped_files: &'a [(String, u64, u64)],
    pub meter_tid: Option<i32>,
    /// Tracepoint events around the stall (root only), and when it ended.
    pub trace: &'a [procwatch::trace::TraceEvent],
    pub end_ns: u64,
}

/// What a thread did over a stall of `stall_ns`.
pub fn behaviour(t: &ThreadEvidence, stall_ns: u64) -> Behaviour {
    let n = t.samples.max(1) as f64;
    let span = t.span_ns.max(1) as f64;
    if t.share('T') + t.share('t') >= 0.5 {
        return Behaviour::Stopped;
    }
    let faulting = t.not_in_syscall as f64 / n >= 0.3 && t.wchans.keys().any(|w| fault_wait(w)) || (t.share('D') >= 0.3 && fault_wait(&t.wchan) && t.syscall_nr.is_none());
    if faulting {
        return Behaviour::Faulting;
    }
    if t.wchans.iter().any(|(w, c)| mmap_lock_wait(w) && *c as f64 / n >= 0.3) {
        return Behaviour::MmapLock;
    }
    if t.share('R') >= 0.6 {
        // `R` is running or waiting to run: which one decides the cause.
        if t.run_delay_ns > t.cpu_ns && t.run_delay_ns as f64 >= 0.3 * span {
            return Behaviour::Starved;
        }
        // A thread without a poll burns CPU for most of the stall, not just between samples.
        if t.cpu_ns as f64 >= 0.5 * span && t.cpu_ns as f64 >= 0.25 * stall_ns as f64 {
            return Behaviour::Spinning;
        }
        if t.run_delay_ns as f64 >= 0.3 * span {
            return Behaviour::Starved;
        }
    }
    if t.run_delay_ns as f64 >= 0.5 * span && t.cpu_ns as f64 <= 0.3 * span {
        return Behaviour::Starved;
    }
    Behaviour::Parked
}

fn name_of(t: &ThreadEvidence, names: &HashMap<i32, String>) -> String {
    names.get(&t.tid).cloned().unwrap_or_else(|| t.comm.clone())
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

fn describe(t: &ThreadEvidence, b: Behaviour, duration_ns: u64) -> String {
    let in_state = |s: char| fmt_ns((t.share(s) * duration_ns as f64) as u64);
    let mut parts = Vec::new();
    match b {
        Behaviour::Spinning => {
            parts.push(format!("state R, on CPU {} of the {} stall", fmt_ns(t.cpu_ns), fmt_ns(duration_ns)));
            parts.push("never in a system call".to_string());
        }
        Behaviour::Faulting => {
            parts.push("not in a syscall".to_string());
            let st = t.dominant_state();
            parts.push(format!("state {st} for {} in {}", in_state(st), t.wchan));
            if t.majflt_since_baseline > 0 {
                parts.push(format!("+{} major fault{}", t.majflt_since_baseline, if t.majflt_since_baseline == 1 { "" } else { "s" }));
            }
        }
        Behaviour::MmapLock => parts.push(format!("state {} in {} for {}", t.dominant_state(), t.wchan, in_state(t.dominant_state()))),
        Behaviour::Starved => parts.push(format!("runnable but waited {} for a CPU, ran {}", fmt_ns(t.run_delay_ns), fmt_ns(t.cpu_ns))),
        Behaviour::Stopped => parts.push("state T (stopped)".to_string()),
        Behaviour::Parked => parts.push(format!("state {} in {}", t.dominant_state(), if t.wchan.is_empty() { "-" } else { &t.wchan })),
    }
    parts.join(", ")
}

/// What the tracepoints say about a thread: where its last page fault was, and how long its
/// longest mmap_lock wait lasted.
fn traced(tid: i32, blocked_at: Option<u64>, inp: &Inputs) -> (Option<String>, Option<u64>, Option<u64>) {
    use procwatch::trace::TraceEvent;
    // The fault behind the stall is the last one begun before the thread was seen blocked;
    // later ones came after it resumed.
    let until = blocked_at.unwrap_or(inp.end_ns);
    let fault = inp.trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, address, ip } if *t == tid && *at <= until => Some((*address, *ip)),
        _ => None,
    });
    let place = fault.and_then(|(addr, _)| {
        let m = procwatch::maps::lookup(inp.maps, addr)?;
        m.is_file().then(|| format!("offset {:#x} of {} (page-fault tracepoint)", addr - m.start + m.offset, m.path))
    });
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
    (place, fault.map(|f| f.1), longest)
}

fn culprit(t: &ThreadEvidence, b: Behaviour, inp: &Inputs, named_by_timeout: bool, files: Vec<String>) -> CulpritView {
    let (place, ip, lock_wait) = traced(t.tid, t.first_blocked_t, inp);
    let mut description = describe(t, b, inp.duration_ns);
    if let (Behaviour::MmapLock, Some(w)) = (b, lock_wait) {
        description.push_str(&format!(", waited {} for mmap_lock (tracepoints)", fmt_ns(w)));
    }
    // The tracepoint's file and offset, when there is one, says it all; else the candidates.
    let all_files = match place.filter(|_| b == Behaviour::Faulting) {
        Some(p) => vec![p],
        None => files,
    };
    CulpritView {
        tid: t.tid,
        name: name_of(t, inp.names),
        description,
        module: t.fault_pc.or(ip.filter(|_| b == Behaviour::Faulting)).and_then(|pc| module_of(pc, inp.maps)),
        files: all_files,
        named_by_safepoint_timeout: named_by_timeout,
    }
}

fn finding(cause: Cause, confidence: Confidence, share: f64, culprits: Vec<CulpritView>, evidence: Vec<String>) -> Finding {
    Finding { cause, title: cause.title().to_string(), confidence, share: share.clamp(0.0, 1.0), culprits, evidence, fix: cause.fix().to_string(), doc: cause.doc() }
}

/// Data files mapped and (mostly) not in the page cache: where a major fault reads from.
fn cold_files(inp: &Inputs) -> Vec<String> {
    inp.mapped_files
        .iter()
        .filter(|(p, _, _)| !["/usr/", "/lib", "/etc/", "/proc/", "/sys/", "/dev/"].iter().any(|sys| p.starts_with(sys)))
        .filter(|(_, resident, total)| *total > 0 && (*resident as f64) < 0.9 * *total as f64)
        .map(|(p, r, t)| format!("{p} ({:.0}% in page cache)", *r as f64 * 100.0 / *t as f64))
        .collect()
}

pub fn classify(inp: &Inputs) -> Vec<Finding> {
    let d = inp.duration_ns.max(1);
    let ev = inp.evidence;
    let mut out = Vec::new();

    // Everything stopped: a freeze, whatever else the safepoint log says.
    let stopped_samples = ev.stopped_share.iter().filter(|s| **s >= 0.9).count();
    if !ev.stopped_share.is_empty() && stopped_samples as f64 / ev.stopped_share.len() as f64 >= 0.5 {
        let share = stopped_samples as f64 / ev.stopped_share.len() as f64;
        let mut evid = vec![format!("every thread in state T in {stopped_samples} of {} samples", ev.stopped_share.len())];
        if inp.control_max_late_ns < d / 4 {
            evid.push(format!("stallscope's own control meter ran on (worst lateness {})", fmt_ns(inp.control_max_late_ns)));
        }
        out.push(finding(Cause::Frozen, Confidence::High, share, vec![], evid));
        return out;
    }

    // The machine (or the recorder with it) paused.
    if inp.control_max_late_ns >= (d / 2).max(20_000_000) {
        let mut evid = vec![format!("stallscope's own control meter was late by {} too", fmt_ns(inp.control_max_late_ns))];
        let mut conf = Confidence::Medium;
        if let Some(steal) = inp.steal_ns.filter(|s| *s > d / 5) {
            evid.push(format!("{} of CPU time stolen by the hypervisor", fmt_ns(steal)));
            conf = Confidence::High;
        }
        out.push(finding(Cause::MachinePause, conf, inp.control_max_late_ns as f64 / d as f64, vec![], evid));
        return out;
    }

    let behaviours: Vec<(&ThreadEvidence, Behaviour)> = ev.threads.iter().map(|t| (t, behaviour(t, d))).collect();
    let timeout_tids: Vec<i32> = inp.safepoint.map(|s| s.timeout_culprits.iter().filter_map(|c| c.tid).collect()).unwrap_or_default();

    if let Some(sp) = inp.safepoint {
        let total = sp.total_ns.max(1);
        let at_share = sp.at_safepoint_ns as f64 / total as f64;
        let ttsp_share = sp.ttsp_ns as f64 / total as f64;
        if at_share >= 0.2 && sp.at_safepoint_ns >= 5_000_000 {
            // The operation itself: was the VM thread waiting on I/O, or working?
            let vm = behaviours.iter().find(|(t, _)| t.comm == "VM Thread");
            match vm {
                Some((t, _)) if t.share('D') >= 0.3 => out.push(finding(
                    Cause::VmThreadIo,
                    Confidence::Medium,
                    at_share,
                    vec![culprit(t, Behaviour::Parked, inp, false, vec![])],
                    vec![format!("the VM Thread was in state D ({}) during the safepoint", t.wchan), format!("at safepoint {}", fmt_ns(sp.at_safepoint_ns))],
                )),
                _ => {
                    // The threads that do the operation (the VM Thread, GC workers) may have spent it
                    // waiting for a CPU: then the operation was starved, not long.
                    let workers = || behaviours.iter().filter(|(t, _)| vm_operation_thread(&t.comm));
                    // They hand the work to one another (VM Thread to GC workers and back), so their
                    // waits mostly add up along the operation's path; capped at its length.
                    let waited = workers().map(|(t, _)| t.run_delay_ns).sum::<u64>().min(sp.at_safepoint_ns);
                    if waited >= 3 * sp.at_safepoint_ns / 10 {
                        let mut starved: Vec<&ThreadEvidence> = workers().filter(|(t, _)| t.run_delay_ns > sp.at_safepoint_ns / 10).map(|(t, _)| *t).collect();
                        starved.sort_by_key(|t| std::cmp::Reverse(t.run_delay_ns));
                        let mut evid = vec![format!("at safepoint {} of {}: the operation \"{}\", whose threads waited for a CPU", fmt_ns(sp.at_safepoint_ns), fmt_ns(total), sp.op)];
                        evid.extend(starved.iter().take(4).map(|t| format!("{} waited {} for a CPU, ran {}", t.comm, fmt_ns(t.run_delay_ns), fmt_ns(t.cpu_ns))));
                        let (contended, psi) = cpu_pressure(inp);
                        evid.extend(psi);
                        let confidence = if contended { Confidence::High } else { Confidence::Medium };
                        let culprits = starved.iter().take(4).map(|t| culprit(t, Behaviour::Starved, inp, false, vec![])).collect();
                        out.push(finding(Cause::CpuStarvation, confidence, at_share * (waited as f64 / sp.at_safepoint_ns as f64).min(1.0), culprits, evid));
                        if waited < 7 * sp.at_safepoint_ns / 10 {
                            // Partly starved: the rest was the operation's own work.
                            out.push(finding(Cause::LongVmOperation, Confidence::Medium, at_share * (1.0 - waited as f64 / sp.at_safepoint_ns as f64), vec![], vec![format!("the operation \"{}\" ran the rest of its {}", sp.op, fmt_ns(sp.at_safepoint_ns))]));
                        }
                    } else {
                        let busy: Vec<String> = behaviours.iter().filter(|(t, _)| jvm_internal(&t.comm) && t.cpu_ns > sp.at_safepoint_ns / 10).map(|(t, _)| format!("{} ran {}", t.comm, fmt_ns(t.cpu_ns))).take(4).collect();
                        let mut evid = vec![format!("at safepoint {} of {}: the operation \"{}\" itself", fmt_ns(sp.at_safepoint_ns), fmt_ns(total), sp.op)];
                        evid.extend(busy);
                        out.push(finding(Cause::LongVmOperation, Confidence::High, at_share, vec![], evid));
                    }
                }
            }
        }
        if ttsp_share >= 0.2 && sp.ttsp_ns >= 1_000_000 {
            let judged: Vec<(&ThreadEvidence, Behaviour)> = match inp.ttsp_evidence {
                Some(te) => te.threads.iter().map(|t| (t, behaviour(t, sp.ttsp_ns))).collect(),
                // No samples inside the TTSP: CPU time over the whole stall may have been spent
                // before the safepoint began (under contention the meter stalls first). It shows a
                // thread running without a poll only when the TTSP is most of the stall.
                None => behaviours.iter().map(|(t, b)| (*t, if *b == Behaviour::Spinning && sp.ttsp_ns.saturating_mul(4) < d.saturating_mul(3) { Behaviour::Parked } else { *b })).collect(),
            };
            ttsp_findings(inp, &judged, &timeout_tids, ttsp_share, &mut out);
        }
    } else if let Some(meter) = inp.meter_tid.and_then(|m| ev.threads.iter().find(|t| t.tid == m)) {
        // No safepoint: a hiccup of some threads only. Why was the meter late?
        match behaviour(meter, d) {
            Behaviour::Starved => {
                let others = behaviours.iter().filter(|(t, b)| *b == Behaviour::Starved && t.tid != meter.tid).count();
                let mut evid = vec![format!("the hiccup meter thread waited {} for a CPU", fmt_ns(meter.run_delay_ns))];
                if others > 0 {
                    evid.push(format!("{others} other threads of the JVM waited for a CPU too"));
                }
                out.push(finding(Cause::CpuStarvation, Confidence::Medium, meter.run_delay_ns as f64 / d as f64, vec![culprit(meter, Behaviour::Starved, inp, false, vec![])], evid));
            }
            Behaviour::Faulting => out.push(finding(
                Cause::MajorFault,
                Confidence::Medium,
                1.0,
                vec![culprit(meter, Behaviour::Faulting, inp, false, cold_files(inp))],
                vec!["the hiccup meter thread itself was in a page fault".into()],
            )),
            Behaviour::MmapLock => out.push(finding(
                Cause::MmapLock,
                Confidence::Medium,
                1.0,
                vec![culprit(meter, Behaviour::MmapLock, inp, false, vec![])],
                vec![format!("the hiccup meter thread waited in {}", meter.wchan)],
            )),
            _ => {
                let (contended, psi_evidence) = cpu_pressure(inp);
                if meter.share('R') >= 0.5 {
                    // Runnable, yet its tick overdue: woken, not running. (Running, it would have
                    // ticked; blocked, it would not be R.) Too short a stall for run_delay to show it.
                    let mut evid = vec![format!("the hiccup meter thread was runnable (R) in {} of {} samples but did not tick: it was waiting for a CPU", meter.count('R'), meter.samples)];
                    evid.extend(psi_evidence);
                    let confidence = if contended { Confidence::Medium } else { Confidence::Low };
                    out.push(finding(Cause::CpuStarvation, confidence, 1.0, vec![], evid));
                } else if contended {
                    let mut evid: Vec<String> = psi_evidence.into_iter().collect();
                    evid.push("the hiccup meter thread was running again by the first sample".into());
                    out.push(finding(Cause::CpuStarvation, Confidence::Low, 1.0, vec![], evid));
                }
            }
        }
    }

    // Machine-wide contributors.
    if let (Some(during), before) = (inp.tlb_rate_during, inp.tlb_rate_before) {
        if during >= 5_000.0 && before.is_none_or(|b| during >= 3.0 * b) {
            let mut evid = vec![format!("{:.0} TLB shootdowns per second during the stall", during)];
            if let Some(b) = before {
                evid.push(format!("{:.0} per second just before", b));
            }
            out.push(finding(Cause::TlbShootdown, Confidence::Medium, 0.0, vec![], evid));
        }
    }
    if let Some(th) = inp.throttled_ns.filter(|t| *t > 0) {
        out.push(finding(Cause::CgroupThrottling, Confidence::High, th as f64 / d as f64, vec![], vec![format!("the cgroup was throttled for {} during the stall", fmt_ns(th))]));
    }
    if out.iter().all(|f| f.share < 0.1) && !out.iter().any(|f| f.cause == Cause::TlbShootdown) {
        out.retain(|f| f.share >= 0.1);
    }
    out.sort_by(|a, b| b.share.partial_cmp(&a.share).unwrap_or(std::cmp::Ordering::Equal).then(a.cause.cmp(&b.cause)));
    out
}

/// Whether the machine's CPUs were saturated around the stall (PSI `cpu some` ≥ 50%), and
/// the evidence line saying so.
fn cpu_pressure(inp: &Inputs) -> (bool, Option<String>) {
    let psi = inp.psi_cpu_during.or(inp.psi_cpu_before);
    let line = match (inp.psi_cpu_during, inp.psi_cpu_before) {
        (Some(p), _) => Some(format!("some task waited for a CPU during {:.0}% of the stall (PSI cpu)", p.min(1.0) * 100.0)),
        (None, Some(p)) => Some(format!("some task waited for a CPU during {:.0}% of the time just before the stall (PSI cpu)", p.min(1.0) * 100.0)),
        _ => None,
    };
    (psi.is_some_and(|p| p >= 0.5), line)
}

fn ttsp_findings(inp: &Inputs, behaviours: &[(&ThreadEvidence, Behaviour)], timeout_tids: &[i32], ttsp_share: f64, out: &mut Vec<Finding>) {
    let suspicious = |b: Behaviour| matches!(b, Behaviour::Spinning | Behaviour::Faulting | Behaviour::MmapLock | Behaviour::Starved);
    let mut culprits: Vec<(&ThreadEvidence, Behaviour, bool)> = behaviours
        .iter()
        .filter(|(t, b)| {
            let named = timeout_tids.contains(&t.tid);
            named || (suspicious(*b) && !jvm_internal(&t.comm))
        })
        .map(|(t, b)| (*t, *b, timeout_tids.contains(&t.tid)))
        .collect();
    // When SafepointTimeout named threads, trust its list over our guesses.
    if culprits.iter().any(|c| c.2) {
        culprits.retain(|c| c.2);
    }
    // A short stall can be over before the first sample: the late threads have reached the
    // safepoint by then and look parked. If the machine's CPUs were saturated meanwhile, and
    // HotSpot saw the named threads runnable, they were waiting for a CPU.
    let (contended, psi_evidence) = cpu_pressure(inp);
    let timeout_states: HashMap<i32, &str> = inp
        .safepoint
        .map(|s| s.timeout_culprits.iter().filter_map(|c| Some((c.tid?, c.state.as_deref().unwrap_or("")))).collect())
        .unwrap_or_default();
    if contended {
        for c in culprits.iter_mut() {
            if matches!(c.1, Behaviour::Parked) && timeout_states.get(&c.0.tid).is_some_and(|s| s.starts_with("runnable")) {
                c.1 = Behaviour::Starved;
            }
        }
    }
    // Ordered, so that equal shares come out the same way in every run (`report` must repeat
    // the live output byte for byte).
    let mut by_cause: std::collections::BTreeMap<Cause, Vec<(&ThreadEvidence, Behaviour, bool)>> = std::collections::BTreeMap::new();
    for c in culprits {
        let cause = match c.1 {
            Behaviour::Spinning => Cause::NoSafepointPoll,
            Behaviour::Faulting => Cause::MajorFault,
            Behaviour::MmapLock => Cause::MmapLock,
            Behaviour::Starved => Cause::CpuStarvation,
            // Named by SafepointTimeout, but /proc saw nothing unusual.
            Behaviour::Parked | Behaviour::Stopped => Cause::Unknown,
        };
        by_cause.entry(cause).or_default().push(c);
    }
    // A named thread that /proc saw parked (often one caught in a state transition) is no
    // rival to a thread with real evidence: keep the thin "unknown" only when nothing else.
    if by_cause.keys().any(|c| *c != Cause::Unknown) {
        by_cause.remove(&Cause::Unknown);
    }
    if by_cause.is_empty() && contended {
        let mut evid: Vec<String> = psi_evidence.into_iter().collect();
        evid.push("no thread of the JVM was seen holding the safepoint; the late ones had reached it by the first sample".into());
        out.push(finding(Cause::CpuStarvation, Confidence::Low, ttsp_share, vec![], evid));
        return;
    }
    let n_causes = by_cause.len().max(1) as f64;
    for (cause, cs) in by_cause {
        let named = cs.iter().any(|c| c.2);
        let mut evid = Vec::new();
        if named {
            evid.push("SafepointTimeout named the thread as not reaching the safepoint".to_string());
        }
        let confidence = match cause {
            Cause::NoSafepointPoll => {
                evid.push("it ran on a CPU through the stall without entering the kernel".into());
                if named { Confidence::High } else { Confidence::Medium }
            }
            Cause::MajorFault => {
                let completed = cs.iter().any(|c| c.0.majflt_since_baseline > 0);
                evid.push("it was blocked outside any system call, waiting for a page".into());
                if completed {
                    evid.push("its major-fault count rose when the wait ended".into());
                }
                if completed || named { Confidence::High } else { Confidence::Medium }
            }
            Cause::MmapLock => Confidence::Medium,
            Cause::CpuStarvation => {
                evid.push("it was runnable but waited on a run queue".into());
                evid.extend(psi_evidence.clone());
                if named && contended { Confidence::High } else { Confidence::Medium }
            }
            _ => {
                evid.push("but /proc showed it parked in the kernel; the evidence is thin".into());
                Confidence::Low
            }
        };
        let files = if cause == Cause::MajorFault { cold_files(inp) } else { vec![] };
        let views = cs.iter().map(|(t, b, named)| culprit(t, *b, inp, *named, files.clone())).collect();
        out.push(finding(cause, confidence, ttsp_share / n_causes, views, evid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const MS: u64 = 1_000_000;

    fn thread(tid: i32, comm: &str, state: char, cpu_ns: u64, run_delay_ns: u64) -> ThreadEvidence {
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
            majflt: 0,
            minflt: 0,
            majflt_since_baseline: 0,
            span_ns: 22 * MS,
        }
    }

    /// Classifies one stall of `duration_ns` with the given threads and safepoint, nothing traced.
    fn run(threads: Vec<ThreadEvidence>, sp: &SafepointView, duration_ns: u64, psi_during: Option<f64>, psi_before: Option<f64>) -> Vec<Finding> {
        let ev = StallEvidence { threads, sample_times: vec![], stopped_share: vec![] };
        let names = HashMap::new();
        classify(&Inputs {
            duration_ns,
            evidence: &ev,
            ttsp_evidence: None,
            safepoint: Some(sp),
            control_max_late_ns: 0,
            steal_ns: None,
            tlb_rate_during: None,
            tlb_rate_before: None,
            throttled_ns: None,
            psi_cpu_during: psi_during,
            psi_cpu_before: psi_before,
            names: &names,
            maps: &[],
            mapped_files: &[],
            meter_tid: None,
            trace: &[],
            end_ns: duration_ns,
        })
    }

    fn safepoint(op: &str, ttsp_ns: u64, at_safepoint_ns: u64) -> SafepointView {
        SafepointView { op: op.into(), ttsp_ns, at_safepoint_ns, total_ns: ttsp_ns + at_safepoint_ns, start_mono_ns: 0, threads_total: Some(14), threads_running: Some(0), timeout_culprits: vec![], unfinished: false }
    }

    /// A 22 ms G1 pause, almost all of it at the safepoint, with the VM Thread and a GC worker as given.
    fn gc_pause(vm: ThreadEvidence, gc: ThreadEvidence, psi: f64) -> Vec<Finding> {
        run(vec![vm, gc], &safepoint("G1CollectForAllocation", 36_000, 22 * MS), 23 * MS, Some(psi), None)
    }

    /// A stall of `stall_ms` whose safepoint spent `ttsp_ms` reaching it, one worker thread as
    /// given, no samples inside the TTSP, CPUs saturated just before.
    fn ttsp_stall(stall_ms: u64, ttsp_ms: u64, worker: ThreadEvidence) -> Vec<Finding> {
        run(vec![worker], &safepoint("ThreadDump", ttsp_ms * MS, 60_000), stall_ms * MS, None, Some(0.8))
    }

    #[test]
    fn cpu_time_from_before_the_safepoint_is_no_evidence_of_a_missing_poll() {
        // From a doctor test under 4 CPU hogs: 5.35 ms of CPU in a 21.3 ms stall whose TTSP was
        // 10.8 ms, no sample inside the TTSP. It may all have run before the safepoint began.
        let mut w = thread(7, "storm-worker-0", 'R', 5_350_000, 121_000);
        w.span_ns = 8 * MS;
        let f = ttsp_stall(21, 11, w.clone());
        assert!(f.iter().all(|x| x.cause != Cause::NoSafepointPoll), "{f:?}");
        // When the TTSP is the stall, running through it is what a missing poll looks like.
        w.cpu_ns = 20 * MS;
        w.span_ns = 21 * MS;
        let f = ttsp_stall(21, 21, w);
        assert_eq!(f[0].cause, Cause::NoSafepointPoll, "{f:?}");
    }

    #[test]
    fn an_operation_that_ran_is_a_long_vm_operation() {
        let f = gc_pause(thread(1, "VM Thread", 'S', 100_000, 20_000), thread(2, "GC Thread#0", 'R', 20 * MS, 200_000), 0.1);
        assert_eq!(f[0].cause, Cause::LongVmOperation, "{f:?}");
        assert_eq!(f.len(), 1, "{f:?}");
    }

    #[test]
    fn an_operation_whose_threads_waited_for_a_cpu_is_starved() {
        let f = gc_pause(thread(1, "VM Thread", 'S', 25_000, 6 * MS), thread(2, "GC Thread#0", 'R', 3 * MS, 11 * MS), 0.97);
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "PSI says the CPUs were saturated");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["GC Thread#0", "VM Thread"], "the longest wait first");
        assert!(f.iter().all(|x| x.cause != Cause::LongVmOperation), "17 of 22 ms waiting: no long operation left to blame: {f:?}");
    }

    #[test]
    fn a_partly_starved_operation_gets_both_causes_by_share() {
        let f = gc_pause(thread(1, "VM Thread", 'S', 25_000, 2 * MS), thread(2, "GC Thread#0", 'R', 12 * MS, 8 * MS), 0.6);
        let causes: Vec<Cause> = f.iter().map(|x| x.cause).collect();
        assert_eq!(causes, [Cause::LongVmOperation, Cause::CpuStarvation], "12 of 22 ms ran, 10 waited: {f:?}");
        assert!((f[0].share + f[1].share - 1.0).abs() < 0.01, "the shares add up to the safepoint's: {f:?}");
    }
}
