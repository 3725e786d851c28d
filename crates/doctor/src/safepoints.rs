//! Which safepoint held the world during a stall: the one the stall overlaps most (or one begun
//! and never ended, from the log's open synchronisation or SafepointTimeout lines, or from the
//! perf counters), and every other one the stall spans.
//!
//! Invariant: a safepoint is named only when it overlaps at least half the stall; a short one
//! that merely falls inside a freeze is not the cause.

use crate::report::{SafepointView, TimeoutCulprit};
use crate::spans::StallSpan;
use hotspot_log::Safepoint;
use recording::Recording;
use std::collections::HashMap;

/// A safepoint counts as what held the world only if it overlaps at least this share of the stall
/// (a short one that merely falls inside a freeze is not the cause).
const SAFEPOINT_MIN_OVERLAP: f64 = 0.5;
/// Slack on each side when overlapping a stall with a safepoint: the meter's stall starts when a
/// tick was due, not when the safepoint began.
const OVERLAP_SLACK_NS: u64 = 2_000_000;
/// Another safepoint the stall spans is shown beside the main one when it overlaps the stall by
/// at least this share of it (or this long).
const SPANNED_MIN_SHARE: f64 = 0.1;
const SPANNED_MIN_NS: u64 = 5_000_000;
fn safepoint_view(s: &Safepoint, names: &HashMap<i32, String>) -> SafepointView {
    let end = s.end.mono_ns.unwrap_or(0);
    SafepointView {
        op: s.op.to_string(),
        ttsp_ns: s.ttsp_ns.unwrap_or(0),
        at_safepoint_ns: s.at_safepoint_ns.unwrap_or(0),
        total_ns: s.total_ns,
        start_mono_ns: end.saturating_sub(s.total_ns),
        threads_total: s.threads_total,
        threads_running: s.threads_running,
        timeout_culprits: s
            .culprits
            .iter()
            .map(|c| {
                let tid = c.os_tid.map(|t| t as i32);
                TimeoutCulprit {
                    name: tid
                        .and_then(|t| names.get(&t).cloned())
                        .unwrap_or_else(|| c.name.clone()),
                    tid,
                    state: c.state.clone(),
                }
            })
            .collect(),
        unfinished: false,
    }
}

/// How long safepoint `s` overlaps [start, end], with slack on each side (0 without a stamp).
fn overlap_ns(s: &Safepoint, start: u64, end: u64) -> u64 {
    let Some(e) = s.end.mono_ns else { return 0 };
    let b = e.saturating_sub(s.total_ns);
    e.min(end + OVERLAP_SLACK_NS).saturating_sub(b.max(start.saturating_sub(OVERLAP_SLACK_NS)))
}

/// Every safepoint the stall spans, in time order: the main one, and any other that overlaps it
/// by a tenth (or 5 ms) — a stall over back-to-back safepoints shows each of them.
pub fn spanned_safepoints(
    span: &StallSpan,
    safepoints: &[Safepoint],
    main: Option<&SafepointView>,
    names: &HashMap<i32, String>,
) -> Vec<SafepointView> {
    let d = span.duration_ns();
    let min = ((SPANNED_MIN_SHARE * d as f64) as u64).max(SPANNED_MIN_NS.min(d / 2));
    let mut v: Vec<SafepointView> = safepoints
        .iter()
        .filter(|s| {
            let o = overlap_ns(s, span.start_ns, span.end_ns);
            o > 0 && o >= min
        })
        .map(|s| safepoint_view(s, names))
        .collect();
    if let Some(m) =
        main.filter(|m| !v.iter().any(|x| x.start_mono_ns == m.start_mono_ns && x.op == m.op))
    {
        v.push(m.clone());
    }
    v.sort_by_key(|s| s.start_mono_ns);
    v
}

/// How long after a safepoint's begin the meter may still have ticked with the world stopping
/// from that begin: the log's and the heartbeat's stamps, a tick in flight.
pub(crate) const TICK_AFTER_BEGIN_NS: u64 = 2_000_000;
/// A safepoint begun this long before the meter's last tick is reported as begun late: well
/// past the meter's period (1 ms) and a scheduling hiccup, short of any stall worth naming.
pub(crate) const LATE_BEGIN_NS: u64 = 10_000_000;

/// How far before a stall's start a safepoint's reaching may have begun and still be the
/// stall's: the meter misses its tick once the safepoint stops it, within a tick or two.
const OPEN_SYNC_SLACK_NS: u64 = 50_000_000;

/// The safepoint this stall falls in: the one with the largest overlap on CLOCK_MONOTONIC,
/// covering at least half of it; or, when the recording ended inside a safepoint whose record was
/// never written (the JVM died, or the recorder detached), that unfinished one: from its
/// SafepointTimeout culprits, else from the log's last `Safepoint synchronization initiated`
/// line (`open_sync_ns`), which no record followed.
pub fn match_safepoint(
    span: &StallSpan,
    safepoints: &[Safepoint],
    unfinished: &[hotspot_log::Culprit],
    open_sync_ns: Option<u64>,
    names: &HashMap<i32, String>,
) -> Option<SafepointView> {
    let (start, end_ns, duration) = (span.start_ns, span.end_ns, span.duration_ns());
    let overlap = |s: &Safepoint| overlap_ns(s, start, end_ns);
    let found = safepoints
        .iter()
        .filter(|s| {
            overlap(s) > 0 && overlap(s) as f64 >= SAFEPOINT_MIN_OVERLAP * duration.max(1) as f64
        })
        .max_by_key(|s| overlap(s))
        .map(|s| safepoint_view(s, names));
    if found.is_some() || !span.cut {
        return found;
    }
    let inside: Vec<_> = if span.exited_during {
        unfinished.iter().filter(|c| c.stamps.mono_ns.is_some_and(|t| t >= start)).collect()
    } else {
        vec![]
    };
    if inside.is_empty() {
        // No culprits were named, but the log says a safepoint was being reached when it ended.
        let began = open_sync_ns
            .filter(|t| *t < end_ns && t.saturating_add(OPEN_SYNC_SLACK_NS) >= start)?;
        return Some(SafepointView {
            op: "unknown (still being reached when the recording ended)".into(),
            ttsp_ns: end_ns - began,
            at_safepoint_ns: 0,
            total_ns: end_ns - began,
            start_mono_ns: began,
            threads_total: None,
            threads_running: None,
            timeout_culprits: vec![],
            unfinished: true,
        });
    }
    (!inside.is_empty()).then(|| SafepointView {
        op: "unknown (never completed)".into(),
        ttsp_ns: duration,
        at_safepoint_ns: 0,
        total_ns: duration,
        start_mono_ns: start,
        threads_total: None,
        threads_running: None,
        timeout_culprits: inside
            .iter()
            .map(|c| TimeoutCulprit {
                name: c.name.clone(),
                tid: c.os_tid.map(|t| t as i32),
                state: c.state.clone(),
            })
            .collect(),
        unfinished: true,
    })
}

/// A stall the counters began (a safepoint begun and not ended) that no safepoint record
/// covers: the safepoint never ended inside the recording (it was cut, or the JVM exited in
/// it), or it began before the first look. Its time to reach is the sync time's rise, when the
/// looks saw one; else it was being reached throughout.
pub(crate) fn unended_safepoint(rec: &Recording, span: &StallSpan) -> Option<SafepointView> {
    if !matches!(
        span.by,
        recording::StallTrigger::Safepoint | recording::StallTrigger::SafepointProbe
    ) {
        return None;
    }
    let info = rec.counters_info()?;
    let u = recording::counters::unended(&rec.counters, info, span.start_ns, span.end_ns);
    let total = span.duration_ns();
    // Where the counters cannot say (their sync time rises only with a look before the begin),
    // the JVM's own state, read every 10 ms of the stall, can: reached by the first look that
    // found every thread stopped.
    let synchronized = rec.who.iter().find_map(|w| match w {
        recording::Who::Safepoint { t, stall, state }
            if *stall == span.stall && state == "synchronized" && *t >= span.start_ns =>
        {
            Some(*t)
        }
        _ => None,
    });
    let ttsp = match (u.reached, synchronized) {
        (Some((_, sync)), _) => sync.min(total),
        (None, Some(t)) => t.saturating_sub(span.start_ns).min(total),
        (None, None) => total,
    };
    let op = match recording::counters::op_read_between(&rec.who, span.start_ns, span.end_ns) {
        Some(read) if u.op == recording::counters::UNKNOWN_OP => read,
        _ => u.op,
    };
    Some(SafepointView {
        op,
        ttsp_ns: ttsp,
        at_safepoint_ns: total - ttsp,
        total_ns: total,
        start_mono_ns: span.start_ns,
        threads_total: None,
        threads_running: None,
        timeout_culprits: vec![],
        unfinished: span.cut,
    })
}
