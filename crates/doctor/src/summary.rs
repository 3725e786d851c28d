//! The summary of a recording as a whole: its stalls by main cause, safepoints, the hiccup and
//! control meters, the recorder's own pauses, and what `--boost` did.

use crate::report::{BoostSummary, StallReport, Summary};
use crate::spans::end_of_recording;
use recording::{Event, Recording};
use std::collections::BTreeMap;

/// The recording as a whole: stalls by their main cause, safepoints, the hiccup and control
/// meters, the recorder's own pauses.
pub fn summarise(rec: &Recording, stalls: &[StallReport]) -> Summary {
    let meta = &rec.meta;
    let recorder_pauses: Vec<u64> = rec
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ControlHiccup { late_ns, .. } => Some(*late_ns),
            Event::RecorderHeld { held_ns, .. } => Some(*held_ns),
            _ => None,
        })
        .collect();
    Summary {
        stalls: stalls.len(),
        by_cause: by_cause(stalls),
        longest_stall_ns: stalls.iter().map(|s| s.duration_ns).max().unwrap_or(0),
        safepoints: rec.safepoints.len() as u64,
        total_stopped_ns: rec.safepoints.iter().map(|s| s.total_ns).sum(),
        ttsp_max_ns: rec.safepoints.iter().filter_map(|s| s.ttsp_ns).max(),
        hiccups: rec.hiccups.as_ref().and_then(|h| h.summary()),
        control: rec.control.as_ref().and_then(|h| h.summary()),
        // Without an end record (its recorder was killed): until it was last written.
        recorded_ns: end_of_recording(&rec.events, rec.now)
            .or(rec.last_written_ns())
            .unwrap_or(meta.start_mono_ns)
            .saturating_sub(meta.start_mono_ns),
        recorder_pauses: recorder_pauses.len(),
        recorder_pause_max_ns: recorder_pauses.iter().copied().max().unwrap_or(0),
        boost: boost_summary(&rec.events),
    }
}

/// Stalls by their main cause's title.
pub(crate) fn by_cause(stalls: &[StallReport]) -> BTreeMap<String, usize> {
    let mut by_cause: BTreeMap<String, usize> = BTreeMap::new();
    for s in stalls {
        if let Some(f) = s.findings.first() {
            *by_cause.entry(f.cause.title().to_string()).or_default() += 1;
        }
    }
    by_cause
}

/// What the safepoint booster did, from its events (none: it did not run).
pub(crate) fn boost_summary(events: &[Event]) -> Option<BoostSummary> {
    let mut s = BoostSummary::default();
    let (mut delays, mut seen, mut within, mut threads) = (vec![], vec![], vec![], vec![]);
    let mut ran = false;
    for e in events {
        match e {
            Event::SafepointBoost {
                t,
                begun,
                begun_within_ns,
                seen: sn,
                threads: n,
                refused,
                capped,
                ..
            } => {
                s.capped += usize::from(*capped);
                delays.push(t.saturating_sub(*begun));
                seen.push(sn.saturating_sub(*begun));
                within.push(*begun_within_ns);
                threads.push(*n as u64);
                s.refused += *refused as u64;
            }
            Event::SafepointBooster { cpu_ns, ran_ns, realtime, failed, .. } => {
                ran = true;
                s.cpu_share = *cpu_ns as f64 / (*ran_ns).max(1) as f64;
                s.realtime = *realtime;
                s.failed = failed.clone();
            }
            _ => {}
        }
    }
    if !ran && delays.is_empty() {
        return None;
    }
    s.boosts = delays.len();
    s.delay_p50_ns = quantile(&mut delays, 0.5);
    s.delay_p90_ns = quantile(&mut delays, 0.9);
    s.delay_max_ns = delays.last().copied().unwrap_or(0);
    s.seen_p50_ns = quantile(&mut seen, 0.5);
    s.begun_within_p50_ns = quantile(&mut within, 0.5);
    s.threads_p50 = quantile(&mut threads, 0.5) as u32;
    Some(s)
}

/// The `q` quantile (nearest rank) of `v`, sorted in place; 0 when empty.
pub(crate) fn quantile(v: &mut [u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}
