//! Who asked for a flight recording's safepoint: the thread whose stack asked for the operation,
//! the collection and its cause, the GC locker's hold.

use super::*;

/// Who asked for the operation, from its `caller`, with the caller's stack where JFR sampled
/// it within a second before the operation.
pub(super) fn requester(
    op: &FlightVmOperation,
    samples: &[JfrStackSample],
    took: &str,
    gc_cause: Option<&str>,
    locker: Option<(&FlightGcLocker, i64)>,
) -> Instigator {
    let source = "jdk.ExecuteVMOperation's caller, as the JVM recorded it".to_string();
    let blank = |kind, name: &str| Instigator {
        source: source.clone(),
        ..crate::instigator::blank(kind, name.to_string())
    };
    let name_op = &op.op;
    let Some(c) = &op.caller else {
        return Instigator {
            did: format!("the JVM began {name_op} itself (no caller recorded)"),
            fix: format!("{name_op} is the JVM's own doing: see its cause's fix"),
            ..blank(InstigatorKind::Jvm, "VM Thread")
        };
    };
    let tid = i32::try_from(c.os_tid).ok();
    let name = c.name().to_string();
    let base = Instigator { tid, ..blank(InstigatorKind::JavaThread, &name) };
    if c.java_name.as_deref().is_none_or(str::is_empty) || name == "VM Thread" {
        return Instigator {
            kind: InstigatorKind::Jvm,
            did: format!("the JVM's own thread \"{name}\" asked for {name_op}"),
            fix: format!("{name_op} is the JVM's own doing: see its cause's fix"),
            ..base
        };
    }
    match name.as_str() {
        "Attach Listener" => {
            return Instigator {
                kind: InstigatorKind::AttachClient,
                did: format!(
                    "a tool outside the JVM asked for {name_op} through its attach listener (jcmd, jstack, jmap, a profiler); the file cannot say which: `stallscope watch` names its process"
                ),
                fix: format!(
                    "{name_op}, asked for through the attach listener, stopped the JVM for {took}: find the tool that attaches (a cron job, a monitoring agent) and have it ask less often"
                ),
                ..base
            };
        }
        "Signal Dispatcher" => {
            return Instigator {
                kind: InstigatorKind::Signal,
                name: "Signal Dispatcher".into(),
                did: format!(
                    "a SIGQUIT asked for {name_op} (kill -3, or a jstack or jcmd whose attach was answered late); the file cannot say who sent it"
                ),
                fix: format!(
                    "a SIGQUIT thread dump stopped the JVM for {took}: find who sends it SIGQUIT (kill -3, jstack, a supervisor)"
                ),
                ..base
            };
        }
        _ => {}
    }
    if name.starts_with("RMI TCP Connection") {
        return crate::instigator::remote_jmx(&name, name_op, took, base);
    }
    if let Some((l, held)) = locker {
        return held_back(l, held, name_op, took, base);
    }
    let (stack, before) = caller_stack(c, op.start_epoch_ns, samples).unwrap_or_default();
    let at = crate::instigator::app_frame(&stack).map(|f| format!(" in {f}")).unwrap_or_default();
    let kind = match gc_cause {
        Some("System.gc()") => crate::instigator::OpKind::ExplicitGc,
        Some(GC_LOCKER_CAUSE) => crate::instigator::OpKind::GcLocker,
        _ => crate::instigator::op_kind(name_op, &stack),
    };
    let (did, fix) = crate::instigator::java_thread_words(kind, &name, &at, name_op, took);
    let source = if stack.is_empty() {
        format!("{}; JFR sampled no stack of it just before", base.source)
    } else {
        format!("{}; its stack as JFR sampled it {} before it asked", base.source, fmt_ns(before))
    };
    Instigator { did, fix, java_stack: stack, source, ..base }
}

/// A sample of the caller this close before it asked shows where it asked from.
pub(super) const CALLER_NEAR_NS: i64 = 200_000_000;

/// The caller's stack where JFR last sampled it just before it asked, and how long before.
pub(super) fn caller_stack(
    c: &FlightThread,
    at: i64,
    samples: &[JfrStackSample],
) -> Option<(Vec<String>, u64)> {
    let from = samples.partition_point(|s| s.epoch_ns < at - CALLER_NEAR_NS);
    let to = samples.partition_point(|s| s.epoch_ns <= at);
    samples[from..to.max(from)]
        .iter()
        .filter(|s| s.os_tid == c.os_tid && !s.frames.is_empty())
        .max_by_key(|s| s.epoch_ns)
        .map(|s| (s.frames.iter().map(|f| f.method.clone()).collect(), (at - s.epoch_ns) as u64))
}

/// Whether a VM operation is a collection: `G1CollectForAllocation`, `ParallelGCSystemGC`,
/// `GenCollectFull`, `CollectForMetadataAllocation`, `G1PauseRemark`, `ZMarkStart` …
pub(super) fn gc_operation(op: &str) -> bool {
    // A class histogram (`GC_HeapInspection`, jmap -histo) runs a collection inside a longer
    // operation of its own, as a heap dump does.
    op != "GC_HeapInspection"
        && ["GC", "Collect", "G1", "ZMark", "ZRelocate", "Shenandoah"]
            .iter()
            .any(|k| op.contains(k))
}

/// The collection a GC operation ran, by time.
pub(super) fn gc_of<'a>(f: &'a FlightFile, g: &Gathered) -> Option<&'a FlightGc> {
    // The collection that began in the stall (a concurrent cycle spanning it began before),
    // nearest its start.
    let (a, b) = (g.start(), g.end());
    let gcs = &f.data.gcs;
    let from = gcs.partition_point(|c| c.start_epoch_ns < a.saturating_sub(GC_START_SLACK_NS));
    let to = gcs.partition_point(|c| c.start_epoch_ns <= b);
    gcs[from..to.max(from)].iter().min_by_key(|c| c.start_epoch_ns.abs_diff(a))
}

/// Why the stall's collection ran: the GC locker's, where any collection begun in the stall
/// says so (Parallel's follows its young collection with a full one of another cause, in the
/// same operation), else the nearest's.
pub(super) fn gc_cause<'a>(f: &'a FlightFile, g: &Gathered) -> Option<&'a str> {
    // Within the operation's own run (the stall's, where it has none): another thread's
    // collection in the same stall is not this one's.
    let (a, b) = match &g.op {
        Some(op) => (op.start_epoch_ns, op.start_epoch_ns.saturating_add(op.duration_ns.max(0))),
        None => (g.start(), g.end()),
    };
    let locker = f.data.gcs.iter().find(|c| {
        c.start_epoch_ns >= a.saturating_sub(GC_START_SLACK_NS)
            && c.start_epoch_ns <= b
            && c.cause == GC_LOCKER_CAUSE
    });
    locker.or_else(|| gc_of(f, g)).map(|c| c.cause.as_str())
}

/// The GC locker's hold that `op` is the collection of, and how long the hold was: JDK 17 times
/// the hold, which ends as `op` begins; JDK 21 writes an instant where the hold began, so `op` is
/// the first operation its thread (the last out of a critical region) asked for after it.
pub(super) fn gc_locker_of<'a>(
    f: &'a FlightFile,
    op: &FlightVmOperation,
) -> Option<(&'a FlightGcLocker, i64)> {
    // Only a collection is one the locker held back.
    if !collection(&op.op) {
        return None;
    }
    let caller = op.caller.as_ref()?;
    let by_caller =
        |l: &&FlightGcLocker| l.thread.as_ref().is_none_or(|t| t.os_tid == caller.os_tid);
    // The file's values are whatever it says: sums and differences saturate.
    let end_of = |l: &FlightGcLocker| l.start_epoch_ns.saturating_add(l.duration_ns);
    if let Some(l) = f
        .data
        .gc_lockers
        .iter()
        .filter(by_caller)
        .filter(|l| {
            l.duration_ns > 0 && op.start_epoch_ns.abs_diff(end_of(l)) <= GC_LOCKER_SLACK_NS
        })
        .min_by_key(|l| op.start_epoch_ns.abs_diff(end_of(l)))
    {
        return Some((l, l.duration_ns));
    }
    let l = f
        .data
        .gc_lockers
        .iter()
        .filter(by_caller)
        .filter(|l| l.duration_ns == 0 && l.start_epoch_ns <= op.start_epoch_ns)
        .max_by_key(|l| l.start_epoch_ns)?;
    let held = op.start_epoch_ns.saturating_sub(l.start_epoch_ns);
    // No earlier operation of the same thread since, and no collection of anyone's: this one
    // is the collection held back (a short one the file left out is not mistaken for a later
    // operation of that thread).
    let between = f.data.vm_operations.iter().any(|o| {
        o.start_epoch_ns >= l.start_epoch_ns
            && o.start_epoch_ns < op.start_epoch_ns
            && (o.caller.as_ref().is_some_and(|c| c.os_tid == caller.os_tid) || collection(&o.op))
    }) || f.data.gcs.iter().any(|c| {
        c.start_epoch_ns >= l.start_epoch_ns
            && c.start_epoch_ns < op.start_epoch_ns.saturating_sub(GC_START_SLACK_NS)
    });
    ((0..=GC_LOCKER_MAX_HOLD_NS).contains(&held) && !between).then_some((l, held))
}

/// Whether a VM operation is a collection (`ParallelGCSystemGC`, `G1CollectForAllocation`,
/// `GenCollectFull` …), by its name.
pub(super) fn collection(op: &str) -> bool {
    op.contains("GC") || op.contains("Collect")
}

/// How far apart the GC locker's end and its collection's start may be recorded.
pub(super) const GC_LOCKER_SLACK_NS: u64 = 50_000_000;
/// Past this, a hold's instant (JDK 21) and a collection are not taken to be one.
pub(super) const GC_LOCKER_MAX_HOLD_NS: i64 = 60_000_000_000;

/// The collection `l` held back, laid at the thread that left the critical region last.
pub(super) fn held_back(
    l: &FlightGcLocker,
    held: i64,
    op: &str,
    took: &str,
    base: Instigator,
) -> Instigator {
    let stack: Vec<String> = l.frames.iter().map(|f| f.method.clone()).collect();
    let at = crate::instigator::in_native_method(&stack);
    let kind = crate::instigator::OpKind::GcLocker;
    let (did, fix) = crate::instigator::java_thread_words(kind, &base.name, &at, op, took);
    let mut said = Vec::new();
    if held > 0 {
        said.push(format!("collections were held back for {}", fmt_ns(held as u64)));
    }
    match l.stall_count {
        0 => {}
        1 => said.push("1 thread waited to allocate".into()),
        n => said.push(format!("{n} threads waited to allocate")),
    }
    let said = if said.is_empty() { String::new() } else { format!(": {}", said.join(", while ")) };
    Instigator {
        did: format!("{did}{said} (jdk.GCLocker)"),
        fix,
        java_stack: stack,
        source: "jdk.GCLocker (the thread that ran the collection held back, its stack as it left the region) and jdk.ExecuteVMOperation's caller".into(),
        ..base
    }
}

/// The GC's cause for the collection the GC locker held back (jdk.GarbageCollection).
pub(super) const GC_LOCKER_CAUSE: &str = "GCLocker Initiated GC";

pub(super) fn gc_words(f: &FlightFile, g: &Gathered) -> Option<String> {
    gc_of(f, g).map(|c| {
            format!(
                "collection {} by {} (cause: {}), its pauses {} in all, the longest {} (jdk.GarbageCollection)",
                c.gc_id,
                c.name,
                c.cause,
                fmt_ns(c.sum_of_pauses_ns.max(0) as u64),
                fmt_ns(c.longest_pause_ns.max(0) as u64)
            )
        })
}
