//! Safepoints from the JVM's perf counters: what the recorder looked at (`counters.jsonl`) says
//! which safepoints began and ended between its looks, how long each took to reach and to run,
//! whether a collector paused in it, and whether one was still open when the recording ended.
//! They stand in for the safepoint log when it is off (a JVM that could not be asked to log) or
//! lost.
//!
//! Invariant: a safepoint is placed only as closely as the looks allow (the looks' times bound
//! it); its operation's name is never invented: `GC` with the collector's name where one paused
//! in it, else `unknown`.

use crate::disk::{CounterLook, CountersInfo};
use hotspot_log::{Format, Safepoint, Source, Stamps};

/// What the counters call a safepoint no collector paused in: they cannot say what it was for.
pub const UNKNOWN_OP: &str = "unknown (from the JVM's perf counters)";

fn op_of(info: &CountersInfo, collectors: &[usize], cause: Option<&str>) -> String {
    if collectors.is_empty() {
        return UNKNOWN_OP.to_string();
    }
    let names: Vec<&str> = collectors
        .iter()
        .map(|c| info.collectors.get(*c).map_or("a collector", String::as_str))
        .collect();
    match cause.filter(|c| !c.is_empty() && *c != "No GC") {
        Some(cause) => format!("GC: {} ({cause})", names.join(", then ")),
        None => format!("GC: {}", names.join(", then ")),
    }
}

/// The collectors whose pause counts rose between two looks.
fn paused(before: &CounterLook, after: &CounterLook) -> Vec<usize> {
    after
        .gcs
        .iter()
        .zip(&before.gcs)
        .enumerate()
        .filter(|(_, (a, b))| !a.cycle && a.invocations > b.invocations)
        .map(|(i, _)| i)
        .collect()
}

/// The cause of the GC seen under way in the looks between `from` and `to`.
fn cause_between(looks: &[CounterLook], from: u64, to: u64) -> Option<&str> {
    looks.iter().filter(|l| l.t >= from && l.t <= to).find_map(|l| l.gc_cause.as_deref())
}

/// The safepoints the looks saw begin and end, as safepoint records on the recording's clock.
pub fn safepoints(looks: &[CounterLook], info: &CountersInfo) -> Vec<Safepoint> {
    let read: Vec<procwatch::jvmcounters::CounterLook> = looks.iter().map(theirs).collect();
    procwatch::jvmcounters::safepoints(&read, info.safepoint_time_includes_sync)
        .into_iter()
        .map(|c| {
            let end = c.end_ns();
            let cause = cause_between(looks, c.begin_window.0, c.end_window.1);
            let before = looks.iter().rev().find(|l| l.t <= c.begin_window.0);
            let after = looks.iter().find(|l| l.t >= c.end_window.1);
            let collectors = match (before, after) {
                (Some(b), Some(a)) => paused(b, a),
                _ => c.collector.into_iter().collect(),
            };
            Safepoint {
                op: op_of(info, &collectors, cause).into(),
                ttsp_ns: Some(c.ttsp_ns),
                cleanup_ns: None,
                at_safepoint_ns: Some(c.at_safepoint_ns),
                leaving_ns: None,
                total_ns: c.total_ns(),
                since_last_ns: None,
                threads_total: None,
                threads_running: None,
                page_traps: None,
                end: Stamps { mono_ns: Some(end), ..Stamps::default() },
                format: Format::PerfCounters,
                source: Source::default(),
                culprits: Vec::new(),
            }
        })
        .collect()
}

/// The operation the recorder read in the JVM's memory (`who.jsonl`) between `from` and `to` (the
/// VM thread's current one, first seen then), as the safepoint log names it: the class
/// `VM_ThreadDump` is the log's `ThreadDump`. What the counters cannot say of a safepoint.
pub fn op_read_between(who: &[crate::who::Who], from: u64, to: u64) -> Option<String> {
    who.iter().find_map(|w| match w {
        crate::who::Who::VmOperation { t, op, .. } if *t >= from && *t <= to => {
            Some(format!("{} (read from the JVM's memory)", op.strip_prefix("VM_").unwrap_or(op)))
        }
        _ => None,
    })
}

/// Names each safepoint the counters could not name ([`UNKNOWN_OP`]) by the operation read in the
/// JVM's memory while it was under way ([`op_read_between`]); a GC the counters named keeps its
/// name.
pub fn name_from_memory(safepoints: &mut [Safepoint], who: &[crate::who::Who]) {
    for s in safepoints.iter_mut().filter(|s| s.op.as_ref() == UNKNOWN_OP) {
        let Some(end) = s.end.mono_ns else { continue };
        if let Some(op) = op_read_between(who, end.saturating_sub(s.total_ns), end) {
            s.op = op.into();
        }
    }
}

/// A safepoint the recorder saw begin (it began a stall) but whose end no look saw: it was
/// still open when the recording ended, or began before the first look. From the looks
/// between `from` and `to`: when it was reached, if it was (the sync time rose: by exactly its
/// time to reach), and what it was for (a collector that paused in it).
pub fn unended(looks: &[CounterLook], info: &CountersInfo, from: u64, to: u64) -> Unended {
    let inside: Vec<&CounterLook> = looks.iter().filter(|l| l.t > from && l.t <= to).collect();
    let before = looks.iter().rev().find(|l| l.t <= from);
    let mut reached = None;
    let mut prev = before;
    for l in &inside {
        if let Some(p) = prev
            && l.sync_ns > p.sync_ns
            && reached.is_none()
        {
            reached = Some((l.prev_t.max(p.t) / 2 + l.t / 2, l.sync_ns - p.sync_ns));
        }
        prev = Some(l);
    }
    let collectors = match (before, inside.last()) {
        (Some(b), Some(l)) => paused(b, l),
        _ => inside.iter().rev().find_map(|l| l.gc_in_progress()).into_iter().collect(),
    };
    let cause = inside.iter().rev().find_map(|l| l.gc_cause.as_deref());
    Unended { reached, op: op_of(info, &collectors, cause) }
}

/// What [`unended`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unended {
    /// When it was reached and its time to reach, as the sync time rose.
    pub reached: Option<(u64, u64)>,
    pub op: String,
}

/// A look as the reader's type, for its analysis of a sequence of looks
/// (`procwatch::jvmcounters::safepoints`), which the live recorder runs too.
fn theirs(v: &CounterLook) -> procwatch::jvmcounters::CounterLook {
    procwatch::jvmcounters::CounterLook {
        t: v.t,
        prev_t: v.prev_t,
        safepoints: v.safepoints,
        sync_ns: v.sync_ns,
        safepoint_ns: v.safepoint_ns,
        application_ns: v.application_ns,
        hrt_ns: v.hrt_ns,
        gcs: v
            .gcs
            .iter()
            .map(|g| procwatch::jvmcounters::GcLook {
                invocations: g.invocations,
                last_entry_ns: g.last_entry_ns,
                last_exit_ns: g.last_exit_ns,
                cycle: g.cycle,
            })
            .collect(),
        gc_cause: v.gc_cause.clone(),
        gap: v.gap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn look(t_ms: u64, safepoints: u64, sync_ms: u64, sp_ms: u64) -> CounterLook {
        CounterLook {
            t: t_ms * MS,
            prev_t: (t_ms - 5) * MS,
            safepoints,
            sync_ns: sync_ms * MS,
            safepoint_ns: sp_ms * MS,
            ..CounterLook::default()
        }
    }

    fn info() -> CountersInfo {
        CountersInfo {
            collectors: vec!["PSScavenge".into(), "PSParallelCompact".into()],
            major: 17,
            ..CountersInfo::default()
        }
    }

    #[test]
    fn a_safepoint_the_looks_saw_becomes_a_record_named_by_its_collector() {
        let mut looks = vec![
            look(100, 3, 10, 20),
            look(105, 4, 10, 20),
            look(1505, 4, 1410, 20),
            look(1510, 4, 1410, 22),
        ];
        let s = safepoints(&looks, &info());
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].ttsp_ns, s[0].at_safepoint_ns, s[0].total_ns, &*s[0].op),
            (Some(1400 * MS), Some(2 * MS), 1402 * MS, "unknown (from the JVM's perf counters)")
        );
        assert_eq!(s[0].format, Format::PerfCounters);
        // A full collection paused in it, its cause seen under way.
        for l in &mut looks {
            l.gcs = vec![
                Default::default(),
                crate::disk::GcLook { invocations: 0, ..Default::default() },
            ];
        }
        looks[2].gcs[1].invocations = 1;
        looks[2].gc_cause = Some("System.gc()".into());
        looks[3].gcs[1].invocations = 1;
        assert_eq!(&*safepoints(&looks, &info())[0].op, "GC: PSParallelCompact (System.gc())");
    }

    #[test]
    fn a_safepoint_the_counters_cannot_name_is_named_by_the_operation_read_in_memory() {
        let looks = vec![
            look(100, 3, 10, 20),
            look(105, 4, 10, 20),
            look(1505, 4, 1410, 20),
            look(1510, 4, 1410, 22),
        ];
        let read = |t_ms: u64, op: &str| crate::who::Who::VmOperation {
            t: t_ms * MS,
            stall: 1,
            op: op.into(),
            caller: None,
        };
        // Read while it was under way (it began about 105 ms and ended about 1,507 ms in).
        let mut s = safepoints(&looks, &info());
        name_from_memory(&mut s, &[read(50, "VM_HeapDumper"), read(400, "VM_ThreadDump")]);
        assert_eq!(&*s[0].op, "ThreadDump (read from the JVM's memory)");
        // Read only before or after it: not its operation.
        let mut s = safepoints(&looks, &info());
        name_from_memory(&mut s, &[read(50, "VM_HeapDumper"), read(1600, "VM_ThreadDump")]);
        assert_eq!(&*s[0].op, UNKNOWN_OP);
        assert_eq!(
            op_read_between(&[read(7, "Cleanup")], 0, 10 * MS).as_deref(),
            Some("Cleanup (read from the JVM's memory)")
        );
    }

    #[test]
    fn a_safepoint_that_never_ended_is_reached_when_its_sync_time_rose() {
        let mut looks = vec![
            look(100, 3, 10, 20),
            look(105, 4, 10, 20),
            look(900, 4, 10, 20),
            look(1505, 4, 1410, 20),
        ];
        let u = unended(&looks, &info(), 103 * MS, 2000 * MS);
        assert_eq!(u.reached, Some((1_502_500_000, 1400 * MS)));
        assert_eq!(u.op, "unknown (from the JVM's perf counters)");
        // Not reached by the end: being reached all along.
        assert_eq!(unended(&looks[..3], &info(), 103 * MS, 2000 * MS).reached, None);
        // A full GC under way at the last look.
        for l in &mut looks {
            l.gcs = vec![Default::default(), Default::default()];
        }
        looks[3].gcs[1] =
            crate::disk::GcLook { invocations: 1, last_entry_ns: 5, last_exit_ns: 0, cycle: false };
        looks[3].gc_cause = Some("Allocation Failure".into());
        assert_eq!(
            unended(&looks, &info(), 103 * MS, 2000 * MS).op,
            "GC: PSParallelCompact (Allocation Failure)"
        );
    }
}
