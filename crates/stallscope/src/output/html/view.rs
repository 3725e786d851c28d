//! A recording as the HTML report draws it, as plain data: built from the loaded recording and
//! its diagnosis, serialised once into the page. Series are columnar (one array per field) and times are
//! seconds since the recording's start, so 100,000 safepoints stay a few MB and the page's
//! script does no parsing beyond `JSON.parse`.
//!
//! Invariant: nothing here decides anything; every figure comes from the diagnosis or is
//! arithmetic over the recording's own files.

use doctor::{Finding, Report, SafepointView, Summary, wall_of};
use hdrhistogram::Histogram;
use recording::hlog::IntervalLog;
use recording::{Meta, Recording, Sample, SystemSample};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Drill-down strips are kept for this many stalls (the longest); the table lists them all.
pub const MAX_DRILLDOWNS: usize = 200;
/// Thread rows in one stall's strip chart; parked threads beyond it are counted, not drawn.
const MAX_ROWS: usize = 48;

#[derive(Debug, Serialize)]
pub struct RecordingView {
    pub header: Header,
    pub summary: Summary,
    pub notes: Vec<String>,
    /// The agent's hiccup meter: one point per interval.
    pub hiccups: IntervalSeries,
    /// stallscope's own control meter: one point per interval.
    pub control: IntervalSeries,
    pub safepoints: Safepoints,
    pub system: SystemSeries,
    pub stalls: Vec<StallView>,
    pub ops: Vec<OpRow>,
    pub percentiles: PercentileSet,
}

#[derive(Debug, Serialize)]
pub struct Header {
    pub recording: String,
    pub mode: String,
    pub command: String,
    pub pid: i32,
    pub java_version: Option<String>,
    pub kernel: String,
    pub cpus: usize,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    pub start_wall: String,
    pub recorded_s: f64,
    pub tracepoints: bool,
    /// Where it ran, when in a container (`pod shop/orders-…, container orders-api (…)`).
    pub pod: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct IntervalSeries {
    /// Interval start, s since the recording's start.
    pub t: Vec<f64>,
    /// Interval length, s.
    pub len: Vec<f64>,
    pub max_ns: Vec<u64>,
}

#[derive(Debug, Default, Serialize)]
pub struct Safepoints {
    /// When it began (the end stamp minus its total), s since the recording's start.
    pub t: Vec<f64>,
    pub ttsp_ns: Vec<u64>,
    pub at_ns: Vec<u64>,
    pub total_ns: Vec<u64>,
    /// Index into `ops`.
    pub op: Vec<u32>,
    pub ops: Vec<String>,
}

/// Machine and JVM signals, each a rate between consecutive samples that both hold its
/// counter: once a second outside stalls, every 50 ms during them.
#[derive(Debug, Default, Serialize)]
pub struct SystemSeries {
    pub tlb_per_s: Points,
    pub steal_pct: Points,
    /// Time the JVM's threads spent waiting on a run queue, ms per second.
    pub run_delay_ms_per_s: Points,
    pub psi_cpu_pct: Points,
}

/// (t, value) pairs, t in s since the recording's start.
#[derive(Debug, Default, Serialize)]
pub struct Points {
    pub t: Vec<f64>,
    pub v: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub struct StallView {
    pub stall: u32,
    pub t: f64,
    pub duration_ns: u64,
    pub start_wall: String,
    pub cause: String,
    pub title: String,
    pub confidence: String,
    pub safepoint: Option<SafepointView>,
    /// Where the safepoint began, ms after the stall began (negative: before it).
    pub safepoint_offset_ms: Option<f64>,
    pub findings: Vec<Finding>,
    pub threads: usize,
    pub parked_threads: usize,
    pub samples: usize,
    pub control_max_late_ns: u64,
    pub target_exited: bool,
    /// Per-thread states across the stall (only for the longest stalls).
    pub strips: Option<Strips>,
}

#[derive(Debug, Serialize)]
pub struct Strips {
    /// Sample times, ms since the stall began.
    pub t_ms: Vec<f64>,
    pub rows: Vec<StripRow>,
    /// Threads parked throughout that are not drawn.
    pub parked_not_drawn: usize,
}

#[derive(Debug, Serialize)]
pub struct StripRow {
    pub tid: i32,
    pub name: String,
    /// Run-length encoded states, one per sample: `R12S3` (`.` where the thread was absent).
    pub states: String,
    pub culprit: bool,
    /// Where it slept most.
    pub wchan: String,
}

#[derive(Debug, Serialize)]
pub struct OpRow {
    pub op: String,
    pub count: u64,
    pub total_ns: u64,
    pub ttsp_total_ns: Option<u64>,
    pub ttsp_max_ns: Option<u64>,
    pub op_max_ns: Option<u64>,
    pub max_ns: u64,
}

/// Percentile distributions as HdrHistogram plots them: (percentile 0–100, value in ns).
#[derive(Debug, Default, Serialize)]
pub struct PercentileSet {
    pub hiccups: Vec<(f64, u64)>,
    pub ttsp: Vec<(f64, u64)>,
    pub control: Vec<(f64, u64)>,
}

fn secs(meta: &Meta, mono_ns: u64) -> f64 {
    (mono_ns as i128 - meta.start_mono_ns as i128) as f64 / 1e9
}

/// The percentile distribution of `h`, 5 ticks per half distance (HistogramLogProcessor's
/// default), capped at its maximum.
pub fn percentiles(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(f64, u64)> = Vec::new();
    for v in h.iter_quantiles(5) {
        let q = (v.quantile_iterated_to() * 100.0 * 1e6).round() / 1e6;
        let value = h.highest_equivalent(v.value_iterated_to()).min(h.max());
        if out.last().is_some_and(|l| l.0 == q) {
            continue;
        }
        out.push((q, value));
        if q >= 100.0 {
            break;
        }
    }
    out
}

fn interval_series(meta: &Meta, log: Option<&IntervalLog>) -> IntervalSeries {
    let mut s = IntervalSeries::default();
    let Some(log) = log else { return s };
    // Interval stamps count from the log's own StartTime; align them through the wall clock.
    let offset = log.start_epoch_ms.map_or(0.0, |e| (e - meta.start_epoch_ms) as f64 / 1000.0);
    for i in &log.intervals {
        s.t.push(round6(i.start_s + offset));
        s.len.push(round6(i.length_s));
        s.max_ns.push(i.max_ns);
    }
    s
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn system_series(meta: &Meta, system: &[SystemSample]) -> SystemSeries {
    let mut s = SystemSeries::default();
    let mut pts: Vec<&SystemSample> = system.iter().collect();
    pts.sort_by_key(|x| x.t);
    pts.dedup_by_key(|x| x.t);
    let tick_ns = 1e9 / meta.clock_ticks.max(1) as f64;
    let cpus = meta.cpus.max(1) as f64;
    // One counter at a time: the rate between consecutive samples that both have it.
    fn rate<T: Copy>(
        pts: &[&SystemSample],
        meta: &Meta,
        get: impl Fn(&SystemSample) -> Option<T>,
        f: impl Fn(T, T, f64) -> f64,
        out: &mut Points,
    ) {
        let mut prev: Option<(u64, T)> = None;
        for p in pts {
            let Some(v) = get(p) else { continue };
            if let Some((t0, v0)) = prev {
                let dt = (p.t - t0) as f64;
                if dt >= 1e6 {
                    out.t.push(round6(secs(meta, p.t)));
                    out.v.push((f(v0, v, dt) * 1000.0).round() / 1000.0);
                }
            }
            prev = Some((p.t, v));
        }
    }
    rate(
        &pts,
        meta,
        |p| p.tlb.as_ref().map(|v| v.iter().sum::<u64>()),
        |a, b, dt| b.saturating_sub(a) as f64 * 1e9 / dt,
        &mut s.tlb_per_s,
    );
    rate(
        &pts,
        meta,
        |p| p.cpu.map(|c| c.steal),
        |a, b, dt| b.saturating_sub(a) as f64 * tick_ns / (dt * cpus) * 100.0,
        &mut s.steal_pct,
    );
    rate(
        &pts,
        meta,
        |p| p.jvm.map(|j| j.run_delay_ns),
        |a, b, dt| b.saturating_sub(a) as f64 / 1e6 / (dt / 1e9),
        &mut s.run_delay_ms_per_s,
    );
    // PSI totals move in coarse steps; under 20 ms apart they say nothing.
    let coarse: Vec<&SystemSample> = {
        let mut last = 0u64;
        pts.iter()
            .filter(|p| p.psi_cpu_us.is_some())
            .filter(|p| {
                let keep = p.t >= last + 20_000_000;
                if keep {
                    last = p.t;
                }
                keep
            })
            .copied()
            .collect()
    };
    rate(
        &coarse,
        meta,
        |p| p.psi_cpu_us,
        |a, b, dt| (b.saturating_sub(a) as f64 * 1000.0 / dt * 100.0).min(100.0),
        &mut s.psi_cpu_pct,
    );
    s
}

/// Run-length encoding of a state row: `R12S3.2`.
fn rle(states: &[char]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < states.len() {
        let c = states[i];
        let mut j = i;
        while j < states.len() && states[j] == c {
            j += 1;
        }
        out.push(c);
        out.push_str(&(j - i).to_string());
        i = j;
    }
    out
}

fn strips(
    samples: &[&Sample],
    stall_start: u64,
    culprits: &HashSet<i32>,
    names: &HashMap<i32, String>,
) -> Strips {
    let mut current: HashMap<i32, recording::disk::TaskSample> = HashMap::new();
    let mut comms: HashMap<i32, String> = HashMap::new();
    let mut times = Vec::new();
    let mut cols: Vec<HashMap<i32, (char, String)>> = Vec::new();
    for s in samples.iter().filter(|s| !s.baseline) {
        if s.full {
            current.clear();
        }
        for g in &s.gone {
            current.remove(g);
        }
        for t in &s.threads {
            comms.entry(t.tid).or_insert_with(|| t.comm.clone());
            current.insert(t.tid, t.clone());
        }
        times.push(((s.t as f64 - stall_start as f64) / 1e6 * 1000.0).round() / 1000.0);
        cols.push(current.values().map(|t| (t.tid, (t.state, t.wchan.clone()))).collect());
    }
    let mut tids: Vec<i32> =
        cols.iter().flat_map(|c| c.keys().copied()).collect::<HashSet<_>>().into_iter().collect();
    tids.sort_unstable();
    let mut rows = Vec::new();
    for tid in tids {
        let states: Vec<char> = cols.iter().map(|c| c.get(&tid).map_or('.', |x| x.0)).collect();
        let mut wchans: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &cols {
            if let Some((_, w)) = c.get(&tid).filter(|(_, w)| !w.is_empty() && w != "0") {
                *wchans.entry(w.as_str()).or_default() += 1;
            }
        }
        let wchan = wchans
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(w, _)| w.to_string())
            .unwrap_or_default();
        let name = names.get(&tid).or(comms.get(&tid)).cloned().unwrap_or_default();
        rows.push(StripRow {
            tid,
            name,
            states: rle(&states),
            culprit: culprits.contains(&tid),
            wchan,
        });
    }
    // Culprits first, then threads that did something other than sleep, then the parked.
    let parked =
        |r: &StripRow| r.states.chars().filter(|c| c.is_ascii_alphabetic()).all(|c| c == 'S');
    rows.sort_by_key(|r| (!r.culprit, parked(r), r.tid));
    let mut parked_not_drawn = 0;
    if rows.len() > MAX_ROWS {
        let keep: Vec<StripRow> = rows
            .drain(..)
            .enumerate()
            .filter_map(|(i, r)| if i < MAX_ROWS || r.culprit { Some(r) } else { None })
            .collect();
        parked_not_drawn =
            cols.iter().map(|c| c.len()).max().unwrap_or(0).saturating_sub(keep.len());
        rows = keep;
    }
    Strips { t_ms: times, rows, parked_not_drawn }
}

pub fn recording_view(l: &Recording, report: &Report) -> RecordingView {
    let meta = &l.meta;
    // Safepoints, columnar, in time order.
    let mut sp = Safepoints::default();
    let mut op_index: HashMap<&str, u32> = HashMap::new();
    let mut ttsp_hist = hotspot_log::summary::new_histogram();
    let mut order: Vec<(u64, &hotspot_log::Safepoint)> = l
        .safepoints
        .iter()
        .filter_map(|s| Some((s.end.mono_ns?.saturating_sub(s.total_ns), s)))
        .collect();
    order.sort_by_key(|(t, _)| *t);
    for (start, s) in order {
        let next = op_index.len() as u32;
        let idx = *op_index.entry(&s.op).or_insert_with(|| {
            sp.ops.push(s.op.to_string());
            next
        });
        sp.t.push(round6(secs(meta, start)));
        sp.ttsp_ns.push(s.ttsp_ns.unwrap_or(0));
        sp.at_ns.push(s.at_safepoint_ns.unwrap_or(0));
        sp.total_ns.push(s.total_ns);
        sp.op.push(idx);
        if let Some(t) = s.ttsp_ns {
            let _ = ttsp_hist.record(t.clamp(1, ttsp_hist.high()));
        }
    }
    // The per-operation table, as `stallscope logs` computes it.
    let mut summary =
        hotspot_log::summary::Summary::new(hotspot_log::summary::SummaryOptions::default());
    for s in &l.safepoints {
        summary.add(s);
    }
    let ops = summary
        .finish()
        .operations
        .into_iter()
        .map(|o| OpRow {
            op: o.name.to_string(),
            count: o.count,
            total_ns: o.total_ns,
            ttsp_total_ns: o.ttsp_total_ns,
            ttsp_max_ns: o.ttsp_max_ns,
            op_max_ns: o.op_max_ns,
            max_ns: o.total_max_ns,
        })
        .collect();

    // Stalls, with strips for the longest.
    let mut by_stall: HashMap<u32, Vec<&Sample>> = HashMap::new();
    for s in &l.samples {
        by_stall.entry(s.stall).or_default().push(s);
    }
    let names_of: HashMap<u32, HashMap<i32, String>> = l
        .context
        .iter()
        .map(|c| {
            (
                c.stall,
                c.java_threads
                    .iter()
                    .filter(|j| j.tid > 0)
                    .map(|j| (j.tid, j.name.clone()))
                    .collect(),
            )
        })
        .collect();
    let mut longest: Vec<(u64, u32)> =
        report.stalls.iter().map(|s| (s.duration_ns, s.stall)).collect();
    longest.sort_by_key(|x| std::cmp::Reverse(*x));
    let drill: HashSet<u32> = longest.iter().take(MAX_DRILLDOWNS).map(|x| x.1).collect();
    let empty = HashMap::new();
    let stalls = report
        .stalls
        .iter()
        .map(|s| {
            let main = s.findings.first();
            let culprits: HashSet<i32> = s
                .findings
                .iter()
                .flat_map(|f| f.culprits.iter().map(|c| c.tid))
                .chain(
                    s.safepoint
                        .iter()
                        .flat_map(|p| p.timeout_culprits.iter().filter_map(|c| c.tid)),
                )
                .collect();
            let strips = drill.contains(&s.stall).then(|| {
                let samples = by_stall.get(&s.stall).map_or(&[][..], |v| &v[..]);
                strips(
                    samples,
                    s.start_mono_ns,
                    &culprits,
                    names_of.get(&s.stall).unwrap_or(&empty),
                )
            });
            StallView {
                stall: s.stall,
                t: round6(secs(meta, s.start_mono_ns)),
                duration_ns: s.duration_ns,
                start_wall: s.start_wall.clone(),
                cause: main.map_or("unknown".into(), |f| f.cause.id().to_string()),
                title: main.map_or("unknown".into(), |f| f.title.clone()),
                confidence: main.map_or("low".into(), |f| f.confidence.word().to_string()),
                safepoint: s.safepoint.clone(),
                safepoint_offset_ms: s.safepoint.as_ref().map(|p| {
                    ((p.start_mono_ns as f64 - s.start_mono_ns as f64) / 1e3).round() / 1e3
                }),
                findings: s.findings.clone(),
                threads: s.threads,
                parked_threads: s.parked_threads,
                samples: s.samples,
                control_max_late_ns: s.control_max_late_ns,
                target_exited: s.target_exited,
                strips: strips.filter(|st| !st.t_ms.is_empty()),
            }
        })
        .collect();

    RecordingView {
        header: Header {
            recording: report.recording.clone(),
            mode: meta.mode.clone(),
            command: meta.command.join(" "),
            pid: meta.pid,
            java_version: meta.java_version.clone(),
            kernel: meta.kernel.clone(),
            cpus: meta.cpus,
            threshold_ns: meta.threshold_ns,
            sample_interval_ns: meta.sample_interval_ns,
            start_wall: wall_of(meta, meta.start_mono_ns),
            recorded_s: report.summary.recorded_ns as f64 / 1e9,
            tracepoints: meta.tracepoints,
            pod: meta.pod.as_ref().map(crate::output::pod_line),
        },
        summary: report.summary.clone(),
        notes: report.notes.clone(),
        hiccups: interval_series(meta, l.hiccups.as_ref()),
        control: interval_series(meta, l.control.as_ref()),
        safepoints: sp,
        system: system_series(meta, &l.system),
        stalls,
        ops,
        percentiles: PercentileSet {
            hiccups: l.hiccups.as_ref().map(|h| percentiles(&h.total)).unwrap_or_default(),
            ttsp: percentiles(&ttsp_hist),
            control: l.control.as_ref().map(|h| percentiles(&h.total)).unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_length_encoding() {
        assert_eq!(rle(&['R', 'R', 'S', '.', '.', '.']), "R2S1.3");
        assert_eq!(rle(&[]), "");
    }

    #[test]
    fn percentiles_end_at_the_maximum() {
        let mut h = hotspot_log::summary::new_histogram();
        for v in 1..=10_000u64 {
            h.record(v * 1000).unwrap();
        }
        let p = percentiles(&h);
        assert!(p.len() > 20);
        assert_eq!(p.last().unwrap().0, 100.0);
        assert_eq!(p.last().unwrap().1, h.max());
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let p50 = p.iter().find(|x| x.0 >= 50.0).unwrap().1;
        assert!((4_990_000..=5_010_000).contains(&p50), "{p50}");
    }
}
