//! One safepoint of a flight recording diagnosed: its cause, graded by the one policy
//! (`crate::confidence`), its culprit and its instigator.

use super::*;

pub(super) fn diagnose_one(
    f: &FlightFile,
    g: &Gathered,
    n: u32,
    meta: &Meta,
    frames: &[FrameSample],
    log: Option<&Safepoint>,
) -> StallReport {
    let total = g.total_ns().max(1);
    let start = mono(meta, g.start());
    // The samples around this stall only (`frames` is in time order).
    let frames = {
        let (a, b) = (start.saturating_sub(LOCAL_NS), start + total + LOCAL_NS);
        &frames[frames.partition_point(|s| s.t < a)..frames.partition_point(|s| s.t <= b)]
    };
    // The GC log's own time to safepoint, where it has the record: without cleanup, and there
    // when JFR's begin event was under its threshold.
    let ttsp = log
        .and_then(|l| l.ttsp_ns)
        .map(|t| (t, "the GC log's safepoint record"))
        .or_else(|| g.ttsp_ns());
    let op_ns = g.op_ns();
    let op_name = g.op_name();
    let at_safepoint = g.at_safepoint_ns();
    let took = fmt_ns(total);
    let mut findings = Vec::new();
    let share_of = |ns: u64| (ns as f64 / total as f64).min(1.0);
    let said_ttsp = match ttsp {
        Some((ns, from)) => format!("reaching the safepoint took {} ({from})", fmt_ns(ns)),
        None => "how long reaching the safepoint took is not in the file (jdk.SafepointBegin was under its threshold, or off)".to_string(),
    };
    // The collection the operation ran, when it is a collection (a heap dump runs one too, as
    // part of a longer operation of its own).
    let gc = g.op.as_ref().filter(|o| gc_operation(&o.op)).and_then(|_| gc_of(f, g));
    // The collection's own pauses, where the operation ran one: the rest of the operation the
    // VM thread spent outside the collection.
    let outside_gc = |ns: u64| {
        gc.map(|c| c.sum_of_pauses_ns.max(0) as u64)
            .filter(|p| ns > 2 * p + OUTSIDE_GC_SLACK_NS)
            .map(|p| ns - p)
    };
    if let Some(ns) = op_ns.filter(|ns| share_of(*ns) >= MAIN_SHARE) {
        let share = share_of(ns);
        let ran = format!(
            "the VM thread ran {op_name} for {} of the {took} (jdk.ExecuteVMOperation)",
            fmt_ns(ns)
        );
        // A collection whose threads used under half its real time in CPU waited, not worked
        // (seen in the lab's slow-log scenario: 60 ms of CPU in a 1.5 s collection, each
        // phase writing the GC log to a slow disk).
        let waited = gc.and_then(|c| c.cpu).filter(|(user, sys, real)| {
            *real as u64 >= GC_WAIT_MIN_NS
                && ((user + sys) as f64) < GC_WAIT_CPU_SHARE * *real as f64
        });
        if let Some((user, sys, real)) = waited {
            let mut x = finding(Cause::Unknown, Confidence::Low, share);
            x.title = "unknown: the collection waited, its threads mostly off the CPU".into();
            x.evidence.push(ran);
            x.evidence.extend(gc_words(f, g));
            x.evidence.push(format!(
                "its threads used {} of CPU in its {} (jdk.GCCPUTime): they waited, for the GC log or the perf counters written to a slow disk (vm-thread-io), for the heap paged back in (swap-in) or reclaimed, or for a CPU under a quota; the file has no kernel view to tell which",
                fmt_ns((user + sys).max(0) as u64),
                fmt_ns(real.max(0) as u64)
            ));
            x.fix = "find what the collection waited for: run the JVM under `stallscope run` or beside `stallscope watch`; if it logs to a disk that can be slow, log asynchronously (-Xlog:async, JDK 17+) or to a fast local disk".into();
            findings.push(x);
        } else if let Some(rest) = outside_gc(ns) {
            // Seen in the lab's slow-log scenario: a 3 ms collection in a 600 ms operation,
            // the VM thread writing the GC log to a slow disk at the safepoint.
            let mut x = finding(Cause::Unknown, Confidence::Low, share);
            x.title =
                "unknown: the VM thread spent most of the operation outside the collection".into();
            x.evidence.push(ran);
            x.evidence.extend(gc_words(f, g));
            x.evidence.push(format!(
                "{} of it was not the collection: the VM thread's own work at the safepoint, such as writing the GC log or the perf counters to a slow disk (vm-thread-io), or waiting for a CPU; the file has no kernel view to tell which",
                fmt_ns(rest)
            ));
            x.fix = "if the JVM logs to a disk that can be slow, log asynchronously (-Xlog:async, JDK 17+) or to a fast local disk; `stallscope run` or `watch` sees what the VM thread waited for".into();
            findings.push(x);
        } else {
            // A collection's length may be the kernel's doing (swap-in, reclaim, a CPU quota),
            // which the file cannot see: medium at most. Other operations (a dump, a
            // redefinition) are what was asked.
            let collection = g.op.as_ref().is_some_and(|o| gc_operation(&o.op));
            // The JVM's own timing of its operation is direct evidence; of a collection, only
            // indirect (the kernel's part in it cannot be told apart from the file).
            let conf = crate::confidence::grade(share, (!collection).into());
            let mut x = finding(Cause::LongVmOperation, conf, share);
            x.evidence.push(ran);
            x.evidence.push(said_ttsp.clone());
            x.evidence.extend(gc_words(f, g));
            if collection {
                x.evidence.push("a collection slowed by the kernel (swap-in of the heap, memory reclaim, a CPU quota) looks the same from the file: medium at most".into());
            }
            findings.push(x);
        }
    } else if let Some((ns, _)) = ttsp.filter(|(ns, _)| share_of(*ns) >= MAIN_SHARE) {
        let share = share_of(ns);
        match late_thread(g, ns, frames, meta, log) {
            Some(late) => {
                let culprit = CulpritView {
                    tid: late.tid,
                    name: late.name.clone(),
                    description: late.description.clone(),
                    module: None,
                    files: vec![],
                    named_by_safepoint_timeout: late.by_timeout,
                    code: None,
                };
                let mut x = if late.touches_memory || !late.code_known {
                    // A copy from a buffer or a mapping: a page fault on a slow file, swap or
                    // reclaim look the same from inside the JVM as a long copy; and a thread
                    // whose code is not known could be anywhere.
                    let mut x = finding(Cause::Unknown, Confidence::Low, share);
                    x.title = "unknown: one thread was late to the safepoint".into();
                    x.evidence.push(said_ttsp.clone());
                    x.evidence.push(late.said.clone());
                    x.evidence.push(if late.touches_memory {
                        "its stack is in a buffer or memory access (java.nio, Unsafe): a page fault on a mapped file (major-fault), swap-in or reclaim, or a long copy; the file has no kernel view to tell which: `stallscope run` or `watch` does".into()
                    } else {
                        "JFR sampled no stack of it near the stall: its code, and whether it ran or waited in the kernel, are not known".into()
                    });
                    x.fix = "find what the thread waited for: run the JVM under `stallscope run` or beside `stallscope watch`, which sees its faults, its waits and the CPUs".into();
                    x
                } else {
                    let mut x = finding(Cause::NoSafepointPoll, Confidence::Medium, share);
                    x.evidence.push(said_ttsp.clone());
                    x.evidence.push(late.said.clone());
                    x.evidence.push("its stack is in plain Java code, no buffer or memory access: a loop without a poll; the file has no kernel view (a fault in a loop would look the same), so medium at most".into());
                    x
                };
                x.culprits.push(culprit);
                findings.push(x);
            }
            None => {
                let mut x = finding(Cause::Unknown, Confidence::Low, share);
                x.title = "unknown: a long time to safepoint".into();
                x.evidence.push(said_ttsp.clone());
                x.evidence.push(
                    "the file holds no sample of the thread it waited for: JFR's samplers do not see a thread between polls during a safepoint's synchronization; jdk.SafepointLatency (JDK 25, on in stallscope's docs/formats/stalls.jfc, off in the JDK's default and profile) names it, and `stallscope run` or `watch` sees it from outside".into(),
                );
                let candidates = running_across(g, frames, meta);
                if !candidates.is_empty() {
                    x.evidence.push(format!(
                        "running Java code just before and just after it, in the same method (candidates, not proof): {}",
                        candidates.join(", ")
                    ));
                }
                x.fix = "record the stall with what sees the late thread: -XX:StartFlightRecording:settings=stalls.jfc from stallscope (docs/formats, JDK 25), or the JVM under `stallscope run`/`watch`; -Xlog:safepoint+stats and -XX:+SafepointTimeout -XX:SafepointTimeoutDelay=100 name it in the JVM's log".into();
                findings.push(x);
            }
        }
    } else {
        let mut x = finding(Cause::Unknown, Confidence::Low, 1.0);
        x.evidence.push(format!(
            "neither reaching the safepoint nor its operation ({op_name}) explains most of the {took}: {said_ttsp}; the operation {}",
            op_ns.map_or_else(|| "was not recorded (under its threshold, or off)".to_string(), fmt_ns)
        ));
        findings.push(x);
    }
    // What the CPUs did: a contributor the file can only hint at.
    if let Some((words, others)) = cpu_words(f, g.end()) {
        if others && findings[0].cause != Cause::LongVmOperation {
            let mut x = finding(Cause::CpuStarvation, Confidence::Low, 0.0);
            x.evidence.push(words);
            x.evidence.push("the file has no run-queue waits: whether the JVM's threads waited for a CPU is not known".into());
            findings.push(x);
        } else {
            findings[0].evidence.push(words);
        }
    }
    // Its code, where JFR sampled the culprit; the fix then names it.
    let stall = (start, start + total);
    let near = near_stall(frames, start, start + total);
    for x in findings.iter_mut() {
        for c in x.culprits.iter_mut() {
            c.code = crate::code::for_thread(&near, c.tid, start, start + total, stall);
        }
        if let Some(code) = x.culprits.first().and_then(|c| c.code.as_ref())
            && let Some(fix) = crate::diagnose::fix_in_code(x.cause, code, &x.fix)
        {
            x.fix = fix;
        }
    }
    // Who asked for the operation.
    if let Some(op) = &g.op {
        let who = requester(op, &f.data.samples, &took, gc_cause(f, g), gc_locker_of(f, op));
        let main = &mut findings[0];
        if main.cause == Cause::LongVmOperation
            && matches!(
                who.kind,
                InstigatorKind::JavaThread
                    | InstigatorKind::AttachClient
                    | InstigatorKind::RemoteJmx
                    | InstigatorKind::Signal
            )
        {
            main.fix = who.fix.clone();
        }
        main.instigator = Some(who);
    } else if let Some(main) = findings.first_mut() {
        main.evidence.push(
            "who asked for the operation is not known: jdk.ExecuteVMOperation was not recorded for it (under its threshold, or off)".into(),
        );
    }
    let view = SafepointView {
        op: op_name,
        ttsp_ns: ttsp.map_or(0, |t| t.0),
        at_safepoint_ns: at_safepoint,
        total_ns: total,
        start_mono_ns: start,
        threads_total: g.begin.and_then(|b| b.2),
        threads_running: g.sync.and_then(|s| s.2),
        timeout_culprits: log
            .map(|l| {
                l.culprits
                    .iter()
                    .map(|c| TimeoutCulprit {
                        name: c.name.clone(),
                        tid: c.os_tid.and_then(|t| i32::try_from(t).ok()),
                        state: c.state.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        unfinished: false,
    };
    let samples = frames
        .iter()
        .filter(|s| s.t + 1_000_000_000 >= start && s.t <= start + total + 1_000_000_000)
        .count();
    StallReport {
        stall: n,
        start_mono_ns: start,
        duration_ns: total,
        start_wall: crate::wall_of(meta, start),
        safepoint: Some(view.clone()),
        safepoints: vec![view],
        findings,
        parked_threads: 0,
        threads: 0,
        samples,
        control_max_late_ns: 0,
        target_exited: false,
        raw: vec![],
        begun_before_stop_ns: None,
        kernel: vec![],
    }
}
