//! The doctor's analysis: a pure function from a recording directory to a `Report`. The live
//! run prints exactly what `stallscope report DIR` prints, because both call `diagnose`.
//!
//! Invariant: reads only the recording (no `/proc`, no clock), so the same directory always
//! gives the same report.

pub mod causes;
pub mod classify;
pub mod evidence;
pub mod view;

use crate::recording::{self, files, Event, Meta, Sample, StallContext, StallTrace, SystemSample};
use anyhow::{Context as _, Result};
use causes::Cause;
use hotspot_log::{Safepoint, Scanner};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub const SCHEMA: &str = "stallscope.report/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TimeoutCulprit {
    pub name: String,
    pub tid: Option<i32>,
    /// HotSpot's word for it at the timeout (`runnable`, `waiting on condition` …).
    pub state: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SafepointView {
    pub op: String,
    pub ttsp_ns: u64,
    pub at_safepoint_ns: u64,
    pub total_ns: u64,
    pub start_mono_ns: u64,
    pub threads_total: Option<u32>,
    pub threads_running: Option<u32>,
    pub timeout_culprits: Vec<TimeoutCulprit>,
    /// The record never completed: the JVM ended inside this safepoint.
    pub unfinished: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CulpritView {
    pub tid: i32,
    /// The full Java thread name when the agent or SafepointTimeout gave it, else `comm`.
    pub name: String,
    pub description: String,
    /// Where its pc was, when it was blocked outside a system call.
    pub module: Option<String>,
    /// Mapped files it may have been reading (not in the page cache).
    pub files: Vec<String>,
    pub named_by_safepoint_timeout: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub cause: Cause,
    pub title: String,
    pub confidence: Confidence,
    /// The part of the stall this cause explains (0–1); 0 for a contributor without a share.
    pub share: f64,
    pub culprits: Vec<CulpritView>,
    pub evidence: Vec<String>,
    pub fix: String,
    pub doc: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadLine {
    pub tid: i32,
    pub name: String,
    pub states: String,
    pub wchan: String,
    pub cpu_ns: u64,
    pub run_delay_ns: u64,
    pub majflt: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StallReport {
    pub stall: u32,
    pub start_mono_ns: u64,
    pub duration_ns: u64,
    /// Local wall time of the start, `2026-11-22 14:02:11.204`.
    pub start_wall: String,
    pub safepoint: Option<SafepointView>,
    pub findings: Vec<Finding>,
    /// Threads parked in the kernel throughout (they were not holding anything up).
    pub parked_threads: usize,
    pub threads: usize,
    pub samples: usize,
    pub control_max_late_ns: u64,
    /// The target exited before the stall ended.
    pub target_exited: bool,
    /// The busiest threads, shown when the cause is unknown.
    pub raw: Vec<ThreadLine>,
}

pub use crate::hlog::HiccupSummary;

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub stalls: usize,
    pub by_cause: BTreeMap<String, usize>,
    pub longest_stall_ns: u64,
    pub safepoints: u64,
    pub total_stopped_ns: u64,
    pub ttsp_max_ns: Option<u64>,
    pub hiccups: Option<HiccupSummary>,
    /// stallscope's own control meter over the whole recording (null in recordings made
    /// before it was logged).
    pub control: Option<HiccupSummary>,
    pub recorded_ns: u64,
    /// Times stallscope's own control meter woke late outside the target's stalls: the machine
    /// or the recorder itself was held up, and stalls in that time may be missing.
    pub recorder_pauses: usize,
    pub recorder_pause_max_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub recording: String,
    pub meta: Meta,
    pub stalls: Vec<StallReport>,
    pub summary: Summary,
    pub notes: Vec<String>,
}

/// Everything read from a recording directory.
pub struct Loaded {
    pub meta: Meta,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    pub system: Vec<SystemSample>,
    pub context: Vec<StallContext>,
    pub trace: Vec<StallTrace>,
    pub safepoints: Vec<Safepoint>,
    pub unfinished_culprits: Vec<hotspot_log::Culprit>,
    pub hiccups: Option<crate::hlog::IntervalLog>,
    pub control: Option<crate::hlog::IntervalLog>,
}

pub fn load(dir: &Path) -> Result<Loaded> {
    let meta = recording::read_meta(dir)?;
    // The two interval logs decode on their own threads (a day of 1 s intervals is 172,800
    // compressed histograms) while this one reads the rest.
    let (hiccups, control, rest) = std::thread::scope(|sc| {
        let h = sc.spawn(|| crate::hlog::read(&dir.join(files::HICCUPS)));
        let c = sc.spawn(|| crate::hlog::read(&dir.join(files::CONTROL)));
        let rest = load_lines(dir, meta.clone());
        (h.join().ok().flatten(), c.join().ok().flatten(), rest)
    });
    let mut l = rest?;
    l.hiccups = hiccups;
    l.control = control;
    Ok(l)
}

fn load_lines(dir: &Path, meta: Meta) -> Result<Loaded> {
    let mut safepoints = Vec::new();
    let mut unfinished_culprits = Vec::new();
    let sp = dir.join(files::SAFEPOINT_LOG);
    if sp.exists() {
        let mut scanner = Scanner::new();
        let f = std::fs::File::open(&sp).with_context(|| format!("{}: cannot read it", sp.display()))?;
        scanner.scan(0, f, &mut |s: Safepoint| safepoints.push(s)).map_err(|e| anyhow::anyhow!("{}: {e}", sp.display()))?;
        let rep = scanner.finish(&mut |s: Safepoint| safepoints.push(s));
        unfinished_culprits = rep.orphan_culprits;
    }
    Ok(Loaded {
        events: recording::read_lines(&dir.join(files::EVENTS))?,
        samples: recording::read_lines(&dir.join(files::SAMPLES))?,
        system: recording::read_lines(&dir.join(files::SYSTEM))?,
        context: recording::read_lines(&dir.join(files::CONTEXT))?,
        trace: recording::read_lines(&dir.join(files::TRACE))?,
        hiccups: None,
        control: None,
        meta,
        safepoints,
        unfinished_culprits,
    })
}

/// Local wall time of a monotonic instant, through the recording's start on both clocks.
pub fn wall_of(meta: &Meta, mono_ns: u64) -> String {
    let ms = meta.start_epoch_ms + ((mono_ns as i128 - meta.start_mono_ns as i128) / 1_000_000) as i64;
    hotspot_log::format_wall(hotspot_log::WallTime { epoch_ms: ms, offset_min: meta.utc_offset_min })
}

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
                TimeoutCulprit { name: tid.and_then(|t| names.get(&t).cloned()).unwrap_or_else(|| c.name.clone()), tid, state: c.state.clone() }
            })
            .collect(),
        unfinished: false,
    }
}

pub fn diagnose(dir: &Path) -> Result<Report> {
    let l = load(dir)?;
    analyse(dir, &l)
}

/// The diagnosis of a loaded recording (a pure function of it).
pub fn analyse(dir: &Path, l: &Loaded) -> Result<Report> {
    let meta = &l.meta;
    let mut notes = Vec::new();
    if let Some(n) = &meta.privileges_note {
        notes.push(n.clone());
    }
    let meter_tid = l.events.iter().find_map(|e| match e {
        Event::MeterRunning { meter_tid, .. } => Some(*meter_tid as i32),
        _ => None,
    });
    let resolution = l.events.iter().find_map(|e| match e {
        Event::MeterRunning { resolution_ns, .. } => Some(*resolution_ns),
        _ => None,
    });
    let end_of_recording = l.events.iter().rev().find_map(|e| match e {
        Event::TargetExit { t, .. } | Event::Detach { t, .. } => Some(*t),
        _ => None,
    });
    let mut stalls = Vec::new();
    for e in &l.events {
        let Event::StallBegin { t: noticed, stall, expected_ns, .. } = e else { continue };
        let end = l.events.iter().find_map(|x| match x {
            Event::StallEnd { stall: s, resumed_ns, control_max_late_ns, resumed, .. } if s == stall => Some((*resumed_ns, *control_max_late_ns, *resumed)),
            _ => None,
        });
        let exited_during = match end {
            None => true,
            Some((_, _, resumed)) => !resumed && l.events.iter().any(|x| matches!(x, Event::TargetExit { .. })),
        };
        let (end_ns, control, _) = end.unwrap_or((end_of_recording.unwrap_or(*expected_ns), 0, false));
        // It was still stalled when noticed. (Earlier recorders could write a resumption from
        // before that: the meter's tick time, read before a safepoint held up its publication.)
        let end_ns = end_ns.max(*noticed);
        // The meter's stall: from when it should have ticked to its next tick.
        let start = *expected_ns;
        let duration = end_ns.saturating_sub(start);
        let ctx = l.context.iter().find(|c| c.stall == *stall);
        let names: HashMap<i32, String> = ctx.map(|c| c.java_threads.iter().filter(|j| j.tid > 0).map(|j| (j.tid, j.name.clone())).collect()).unwrap_or_default();
        // The safepoint this stall falls in: the largest overlap on CLOCK_MONOTONIC.
        let overlap = |s: &Safepoint| -> u64 {
            let Some(e) = s.end.mono_ns else { return 0 };
            let b = e.saturating_sub(s.total_ns);
            e.min(end_ns + 2_000_000).saturating_sub(b.max(start.saturating_sub(2_000_000)))
        };
        // The safepoint must cover at least half of the stall: a short one that merely falls
        // inside a freeze is not what held the world.
        let mut safepoint = l
            .safepoints
            .iter()
            .filter(|s| overlap(s) > 0 && overlap(s) * 2 >= duration.max(1))
            .max_by_key(|s| overlap(s))
            .map(|s| safepoint_view(s, &names));
        if safepoint.is_none() && exited_during && !l.unfinished_culprits.is_empty() {
            // The JVM died inside a safepoint whose record was never written.
            let inside: Vec<_> = l.unfinished_culprits.iter().filter(|c| c.stamps.mono_ns.is_some_and(|t| t >= start)).collect();
            if !inside.is_empty() {
                safepoint = Some(SafepointView {
                    op: "unknown (never completed)".into(),
                    ttsp_ns: duration,
                    at_safepoint_ns: 0,
                    total_ns: duration,
                    start_mono_ns: start,
                    threads_total: None,
                    threads_running: None,
                    timeout_culprits: inside.iter().map(|c| TimeoutCulprit { name: c.name.clone(), tid: c.os_tid.map(|t| t as i32), state: c.state.clone() }).collect(),
                    unfinished: true,
                });
            }
        }
        let samples: Vec<&Sample> = l.samples.iter().filter(|s| s.stall == *stall).collect();
        let until = if exited_during { u64::MAX } else { end_ns };
        let ev = evidence::rebuild(&samples, meta.clock_ticks, 0, until);
        // What threads did while the safepoint was being reached: the window TTSP culprits are
        // judged on (before it, a starved meter can start the stall early).
        let ttsp_ev = safepoint.as_ref().map(|sp| evidence::rebuild(&samples, meta.clock_ticks, sp.start_mono_ns, (sp.start_mono_ns + sp.ttsp_ns).min(until)));
        let sys: Vec<&SystemSample> = l.system.iter().filter(|s| s.stall == *stall).collect();
        let base = sys.iter().find(|s| s.baseline);
        let during: Vec<&&SystemSample> = sys.iter().filter(|s| !s.baseline).collect();
        let (first, last) = (during.first(), during.last());
        let tlb_sum = |s: &SystemSample| s.tlb.as_ref().map(|v| v.iter().sum::<u64>());
        let rate = |a: &SystemSample, b: &SystemSample| -> Option<f64> {
            let dt = b.t.checked_sub(a.t).filter(|d| *d >= 1_000_000)? as f64 / 1e9;
            Some(tlb_sum(b)?.saturating_sub(tlb_sum(a)?) as f64 / dt)
        };
        let tlb_rate_during = match (first, last) {
            (Some(a), Some(b)) => rate(a, b),
            _ => None,
        };
        let tlb_rate_before = match (base, first) {
            (Some(a), Some(b)) => rate(a, b),
            _ => None,
        };
        let tick_ns = 1_000_000_000 / meta.clock_ticks.max(1);
        let steal_ns = first.zip(last).and_then(|(a, b)| Some(b.cpu?.steal.saturating_sub(a.cpu?.steal) * tick_ns / meta.cpus.max(1) as u64));
        let throttled_ns = first.zip(last).and_then(|(a, b)| Some(b.throttling?.throttled_ns.saturating_sub(a.throttling?.throttled_ns)));
        // PSI `cpu some`: the share of the time some task waited for a CPU.
        let psi_share = |a: &SystemSample, b: &SystemSample| -> Option<f64> {
            // PSI totals move in coarse steps: a window under 20 ms says nothing.
            let dt = b.t.checked_sub(a.t).filter(|d| *d >= 20_000_000)?;
            Some((b.psi_cpu_us?.saturating_sub(a.psi_cpu_us?) * 1000) as f64 / dt as f64)
        };
        let psi_cpu_during = first.zip(last).and_then(|(a, b)| psi_share(a, b));
        let psi_cpu_before = base.zip(first).and_then(|(a, b)| psi_share(a, b));
        let trace = l.trace.iter().find(|t| t.stall == *stall).map_or(&[][..], |t| &t.events[..]);
        let empty_maps = Vec::new();
        let empty_files = Vec::new();
        let inputs = classify::Inputs {
            duration_ns: duration,
            evidence: &ev,
            ttsp_evidence: ttsp_ev.as_ref().filter(|e| !e.sample_times.is_empty()),
            safepoint: safepoint.as_ref(),
            control_max_late_ns: control,
            steal_ns,
            tlb_rate_during,
            tlb_rate_before,
            throttled_ns,
            psi_cpu_during,
            psi_cpu_before,
            names: &names,
            maps: ctx.map_or(&empty_maps, |c| &c.maps),
            mapped_files: ctx.map_or(&empty_files, |c| &c.mapped_files),
            meter_tid,
            trace,
            end_ns,
        };
        let mut findings = classify::classify(&inputs);
        let culprit_tids: Vec<i32> = findings.iter().flat_map(|f| f.culprits.iter().map(|c| c.tid)).collect();
        let parked = ev.threads.iter().filter(|t| !culprit_tids.contains(&t.tid) && classify::behaviour(t, duration) == classify::Behaviour::Parked).count();
        let mut raw = Vec::new();
        if findings.is_empty() {
            findings.push(Finding {
                cause: Cause::Unknown,
                title: Cause::Unknown.title().into(),
                confidence: Confidence::Low,
                share: 0.0,
                culprits: vec![],
                evidence: vec![if ev.sample_times.is_empty() { "no thread samples were taken during the stall".to_string() } else { format!("{} samples of {} threads show no thread holding things up", ev.sample_times.len(), ev.threads.len()) }],
                fix: Cause::Unknown.fix().into(),
                doc: Cause::Unknown.doc(),
            });
            let mut busiest: Vec<_> = ev.threads.iter().collect();
            busiest.sort_by_key(|t| std::cmp::Reverse((t.cpu_ns + t.run_delay_ns, t.samples - t.states.get(&'S').copied().unwrap_or(0))));
            raw = busiest
                .into_iter()
                .take(8)
                .map(|t| ThreadLine {
                    tid: t.tid,
                    name: names.get(&t.tid).cloned().unwrap_or_else(|| t.comm.clone()),
                    states: t.state_line(),
                    wchan: t.wchan.clone(),
                    cpu_ns: t.cpu_ns,
                    run_delay_ns: t.run_delay_ns,
                    majflt: t.majflt_since_baseline,
                })
                .collect();
        }
        stalls.push(StallReport {
            stall: *stall,
            start_mono_ns: start,
            duration_ns: duration,
            start_wall: wall_of(meta, start),
            safepoint,
            findings,
            parked_threads: parked,
            threads: ev.threads.len(),
            samples: ev.sample_times.len(),
            control_max_late_ns: control,
            target_exited: exited_during,
            raw,
        });
    }
    // Stalls shorter than the threshold can be recorded at its edge; they are not stalls.
    stalls.retain(|s| s.duration_ns >= meta.threshold_ns || s.target_exited);
    let _ = resolution;

    let mut by_cause: BTreeMap<String, usize> = BTreeMap::new();
    for s in &stalls {
        if let Some(f) = s.findings.first() {
            *by_cause.entry(f.cause.title().to_string()).or_default() += 1;
        }
    }
    let recorded_ns = end_of_recording.unwrap_or(meta.start_mono_ns).saturating_sub(meta.start_mono_ns);
    let summary = Summary {
        stalls: stalls.len(),
        by_cause,
        longest_stall_ns: stalls.iter().map(|s| s.duration_ns).max().unwrap_or(0),
        safepoints: l.safepoints.len() as u64,
        total_stopped_ns: l.safepoints.iter().map(|s| s.total_ns).sum(),
        ttsp_max_ns: l.safepoints.iter().filter_map(|s| s.ttsp_ns).max(),
        hiccups: l.hiccups.as_ref().and_then(|h| h.summary()),
        control: l.control.as_ref().and_then(|h| h.summary()),
        recorded_ns,
        recorder_pauses: l.events.iter().filter(|e| matches!(e, Event::ControlHiccup { .. })).count(),
        recorder_pause_max_ns: l
            .events
            .iter()
            .filter_map(|e| match e {
                Event::ControlHiccup { late_ns, .. } => Some(*late_ns),
                _ => None,
            })
            .max()
            .unwrap_or(0),
    };
    if !dir.join(files::SAFEPOINT_LOG).exists() {
        notes.push("no safepoint log in the recording: stalls cannot be joined with safepoints".into());
    }
    Ok(Report { schema: SCHEMA, recording: dir.display().to_string(), meta: l.meta.clone(), stalls, summary, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_sample_lines_match_the_documented_schema() {
        let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/formats/report-json.md")).unwrap();
        let line = ThreadLine { tid: 1, name: "x".into(), states: "R×1".into(), wchan: String::new(), cpu_ns: 0, run_delay_ns: 0, majflt: 0 };
        let v = serde_json::to_value(&line).unwrap();
        for k in v.as_object().unwrap().keys() {
            assert!(doc.contains(&format!("| `stalls[].raw[].{k}`")), "stalls[].raw[].{k} is not documented");
        }
        let documented = doc.lines().filter(|l| l.starts_with("| `stalls[].raw[].")).count();
        assert_eq!(documented, v.as_object().unwrap().len(), "the document lists fields the type does not have");
    }
}
