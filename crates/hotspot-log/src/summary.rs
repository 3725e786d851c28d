//! Aggregates safepoint records into the numbers people ask for: totals, TTSP and
//! at-safepoint percentiles, per-operation totals, the longest TTSPs, the worst windows and
//! the threads SafepointTimeout blamed.
//!
//! Invariant: one pass, bounded memory. Percentiles come from HdrHistograms (3 significant
//! digits, as jHiccup and HdrHistogram report them); counts, totals and maxima are exact.

use crate::record::{Culprit, Safepoint, Source};
use crate::stamps::{Stamps, WallTime};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// Histogram range: 1 ns to one hour, 3 significant digits.
pub const HIST_MAX_NS: u64 = 3_600_000_000_000;
pub const HIST_SIGFIG: u8 = 3;

/// A new empty histogram with the range and precision every stallscope histogram uses.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIG).expect("static bounds")
}

/// How far uptime must go back to count as a new JVM run rather than a reordered line.
const RUN_BREAK_NS: u64 = 1_000_000_000;

/// The time axis a summary uses for windows and spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Clock {
    /// JVM uptime.
    Uptime,
    /// CLOCK_MONOTONIC (`timenanos`).
    Monotonic,
    /// Wall clock (milliseconds resolution).
    Wall,
}

impl Clock {
    pub fn pick(s: &Stamps) -> Option<Clock> {
        if s.uptime_ns.is_some() {
            Some(Clock::Uptime)
        } else if s.mono_ns.is_some() {
            Some(Clock::Monotonic)
        } else if s.wall.is_some() {
            Some(Clock::Wall)
        } else {
            None
        }
    }

    /// The instant on this clock, in ns (wall time: ns since the epoch).
    pub fn read(self, s: &Stamps) -> Option<u64> {
        match self {
            Clock::Uptime => s.uptime_ns,
            Clock::Monotonic => s.mono_ns,
            Clock::Wall => s
                .wall
                .and_then(|w| u64::try_from(w.epoch_ms).ok())
                .map(|ms| ms.saturating_mul(1_000_000)),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    /// Exact, not rounded to the histogram's precision.
    pub max_ns: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub ttsp: Option<Distribution>,
    pub at_safepoint: Option<Distribution>,
    pub total: Option<Distribution>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpSummary {
    pub name: Arc<str>,
    pub count: u64,
    pub total_ns: u64,
    /// `None` when no record of this operation gave its time to safepoint (JDK 8 without
    /// `Stopping threads took`): unknown, not zero.
    pub ttsp_total_ns: Option<u64>,
    pub ttsp_max_ns: Option<u64>,
    /// The longest time at the safepoint (the operation itself), where the log gives it.
    pub op_max_ns: Option<u64>,
    pub total_max_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopSafepoint {
    pub op: Arc<str>,
    pub ttsp_ns: u64,
    pub at_safepoint_ns: Option<u64>,
    pub total_ns: u64,
    /// When it began.
    pub start: Stamps,
    pub source: Source,
    pub culprits: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// Which JVM run of the log (1-based): uptime restarts when a rotated set spans restarts.
    pub run: u32,
    pub clock: Clock,
    pub start_ns: u64,
    pub end_ns: u64,
    pub start_wall: Option<WallTime>,
    /// The part of the window the log covers (shorter than the window at the log's start).
    pub covered_ns: u64,
    pub stopped_ns: u64,
    pub stopped_pct: f64,
    pub safepoints: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CulpritSummary {
    pub name: String,
    /// How many SafepointTimeout blocks named it.
    pub count: u64,
    pub os_tids: Vec<u64>,
    /// Blocks whose safepoint never completed in the log.
    pub unfinished: u64,
}

/// The result of [`Summary::finish`]. Field names are the documented JSON schema.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LogSummary {
    pub safepoints: u64,
    pub total_stopped_ns: u64,
    /// `None` when the log gives no time to safepoint at all.
    pub ttsp_total_ns: Option<u64>,
    pub ttsp_max_ns: Option<u64>,
    /// The clock used for the span and the windows.
    pub clock: Option<Clock>,
    /// JVM runs seen: uptime going backwards starts a new one (a rotated set across restarts).
    /// `None` when no line has a stamp to tell runs apart.
    pub runs: Option<u32>,
    /// Time the log covers, summed over runs.
    pub span_ns: Option<u64>,
    pub stopped_pct: Option<f64>,
    pub percentiles: Percentiles,
    pub operations: Vec<OpSummary>,
    pub longest_ttsp: Vec<TopSafepoint>,
    pub window_ns: u64,
    pub worst_windows: Vec<Window>,
    pub timeout_culprits: Vec<CulpritSummary>,
}

#[derive(Clone, Copy, Debug)]
pub struct SummaryOptions {
    pub top: usize,
    pub window_ns: u64,
    pub windows: usize,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { top: 10, window_ns: 60_000_000_000, windows: 5 }
    }
}

/// Counts in HdrHistogram's own bucket layout for [`new_histogram`]'s bounds (lowest 1, 3
/// significant digits: 2048 sub-buckets, the upper 1024 of each repeated per power of two),
/// kept as a plain array: one record is a leading-zero count, a shift and an add. The crate's
/// `saturating_record` (generic counter, min and max upkeep, range checks) was 6% of `logs`' time.
/// [`Counts::histogram`] hands the same counts to an `hdrhistogram::Histogram` for the
/// percentiles, which are then the crate's own reading (property-tested against recording
/// each value in the crate directly).
///
/// The counts are kept in 16 bits, with what overflows them in a second array made on the first
/// overflow: the array a record touches is then a quarter of the size, and on a log whose pauses
/// spread over many buckets its hot part stays in the nearest cache (the 64-bit array's
/// misses were a third of the summary's time, on the thread that assembles records).
struct Counts {
    low: Vec<u16>,
    /// Multiples of 2^16 carried out of `low`, per bucket; empty until the first carry.
    high: Vec<u64>,
}

impl Counts {
    const HALF_MAGNITUDE: u32 = 10;

    fn index(v: u64) -> usize {
        let v = v.min(HIST_MAX_NS);
        let bucket = 53 - (v | 2047).leading_zeros();
        (((bucket + 1) << Self::HALF_MAGNITUDE) as u64 + (v >> bucket) - 1024) as usize
    }

    /// The lowest value that falls in bucket `i`.
    fn value_at(i: usize) -> u64 {
        let (bucket, sub) = ((i >> Self::HALF_MAGNITUDE) as i64 - 1, (i & 1023) as u64 + 1024);
        if bucket < 0 { sub - 1024 } else { sub << bucket }
    }

    fn new() -> Self {
        Counts { low: vec![0; Self::index(HIST_MAX_NS) + 1], high: Vec::new() }
    }

    #[inline]
    fn add(&mut self, v: u64) {
        let i = Self::index(v);
        let (n, carry) = self.low[i].overflowing_add(1);
        self.low[i] = n;
        if carry {
            self.carry(i);
        }
    }

    #[cold]
    fn carry(&mut self, i: usize) {
        if self.high.is_empty() {
            self.high = vec![0; self.low.len()];
        }
        self.high[i] += 1 << 16;
    }

    fn get(&self, i: usize) -> u64 {
        u64::from(self.low[i]) + self.high.get(i).copied().unwrap_or(0)
    }

    fn histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for i in 0..self.low.len() {
            let n = self.get(i);
            if n > 0 {
                h.saturating_record_n(Self::value_at(i), n);
            }
        }
        h
    }
}

struct Dist {
    counts: Counts,
    count: u64,
    max: u64,
    sum: u128,
}

impl Dist {
    fn new() -> Self {
        Dist { counts: Counts::new(), count: 0, max: 0, sum: 0 }
    }
    fn add(&mut self, v: u64) {
        self.counts.add(v);
        self.count += 1;
        self.max = self.max.max(v);
        self.sum += v as u128;
    }
    fn get(&self) -> Option<Distribution> {
        let count = self.count;
        (count > 0).then(|| {
            let hist = self.counts.histogram();
            Distribution {
                count,
                mean_ns: (self.sum / count as u128) as u64,
                // A bucket's top can exceed the exact maximum; never report a percentile above it.
                p50_ns: hist.value_at_quantile(0.50).min(self.max),
                p90_ns: hist.value_at_quantile(0.90).min(self.max),
                p99_ns: hist.value_at_quantile(0.99).min(self.max),
                p99_9_ns: hist.value_at_quantile(0.999).min(self.max),
                max_ns: self.max,
            }
        })
    }
}

/// Sliding windows ending at each safepoint's end, kept as a set of non-overlapping worst ones.
struct Windows {
    len: u64,
    keep: usize,
    run: u32,
    clock: Option<Clock>,
    log_start: Option<u64>,
    recent: VecDeque<(u64, u64, u64)>, // start, end, total
    sum: u64,
    best: Vec<Window>,
    first_wall: Option<(u64, WallTime)>,
}

impl Windows {
    fn new_run(&mut self, start: u64) {
        self.run += 1;
        self.recent.clear();
        self.sum = 0;
        self.log_start = Some(start);
        self.first_wall = None;
    }

    fn add(&mut self, start: u64, end: u64, total: u64) {
        let wstart = end.saturating_sub(self.len);
        self.recent.push_back((start, end, total));
        self.sum = self.sum.saturating_add(total);
        // Drop what ended before the window, but never the record just added (it may end at
        // the window's start when both are at the clock's zero). A million safepoints inside
        // one window also drop the oldest, to bound memory.
        while self.recent.len() > 1 {
            let &(_, e, t) = &self.recent[0];
            if e <= wstart || self.recent.len() > 1_000_000 {
                self.recent.pop_front();
                self.sum = self.sum.saturating_sub(t);
            } else {
                break;
            }
        }
        let (fs, fe, ft) = self.recent[0];
        let front_overlap = fe - fs.max(wstart).min(fe);
        let stopped = self.sum.saturating_sub(ft) + front_overlap.min(ft);
        let log_start = self.log_start.map_or(start, |l| l.min(start));
        let covered = end - wstart.max(log_start).min(end);
        if covered == 0 {
            return;
        }
        let start_ns = wstart.max(log_start);
        // Most records make a window that a kept, overlapping one beats; the kept windows that
        // overlap it are the latest, so look from the end, before building the window.
        let run = self.run;
        let overlaps = |b: &Window| b.run == run && b.start_ns < end && start_ns < b.end_ns;
        if self.best.iter().rev().any(|b| overlaps(b) && b.stopped_ns >= stopped) {
            return;
        }
        let clock = self.clock.expect("set with log_start");
        let start_wall = self.first_wall.and_then(|(ns, w)| {
            (clock != Clock::Wall).then_some(()).map(|_| WallTime {
                epoch_ms: w
                    .epoch_ms
                    .saturating_add((start_ns as i64).saturating_sub(ns as i64) / 1_000_000),
                offset_min: w.offset_min,
            })
        });
        let w = Window {
            run,
            clock,
            start_ns,
            end_ns: end,
            start_wall,
            covered_ns: covered,
            stopped_ns: stopped,
            stopped_pct: stopped as f64 * 100.0 / covered as f64,
            safepoints: self.recent.len() as u64,
        };
        self.best.retain(|b| !overlaps(b));
        self.best.push(w);
        if self.best.len() > self.keep * 4 {
            // Down to half the cap, so the sort runs once per many windows, not per record.
            self.best.sort_by_key(|b| std::cmp::Reverse(b.stopped_ns));
            self.best.truncate(self.keep * 2);
        }
    }
}

#[derive(Default)]
struct CulpritTally {
    count: u64,
    tids: BTreeSet<u64>,
    unfinished: u64,
}

/// Accumulates records one by one.
pub struct Summary {
    opts: SummaryOptions,
    count: u64,
    total_ns: u64,
    ttsp_total_ns: u64,
    ttsp: Dist,
    at: Dist,
    total: Dist,
    ops: Vec<OpSummary>,
    op_index: HashMap<Arc<str>, usize>,
    top: Vec<TopSafepoint>,
    /// The smallest TTSP in `top` once it is full; shorter ones need not be looked at.
    top_floor: Option<u64>,
    windows: Windows,
    culprits: HashMap<String, CulpritTally>,
    /// The current run's extent on the clock, and the summed extent of finished runs.
    span: Option<(u64, u64)>,
    closed_span: u64,
    since_last_sum: u64,
    since_last_all: bool,
}

impl Summary {
    pub fn new(opts: SummaryOptions) -> Self {
        Summary {
            opts,
            count: 0,
            total_ns: 0,
            ttsp_total_ns: 0,
            ttsp: Dist::new(),
            at: Dist::new(),
            total: Dist::new(),
            ops: Vec::new(),
            op_index: HashMap::new(),
            top: Vec::new(),
            top_floor: None,
            windows: Windows {
                len: opts.window_ns.max(1),
                keep: opts.windows,
                run: 1,
                clock: None,
                log_start: None,
                recent: VecDeque::new(),
                sum: 0,
                best: Vec::new(),
                first_wall: None,
            },
            culprits: HashMap::new(),
            span: None,
            closed_span: 0,
            since_last_sum: 0,
            since_last_all: true,
        }
    }

    /// The clock this summary measures time on (fixed by the first stamped record or span).
    pub fn clock(&self) -> Option<Clock> {
        self.windows.clock
    }

    /// Widens the observed span of the log with the stamps of any line (its first and last
    /// lines, typically), so "percent of time stopped" is over the whole log, not just from
    /// the first safepoint to the last.
    pub fn observe_span(&mut self, s: &Stamps) {
        self.observe(s);
    }

    /// Widens the span with a stamp HotSpot printed, so uptime going back means a restart (a
    /// record's start, computed, is not one: see [`Summary::add`]). Returns the stamp's reading
    /// on the summary's clock, if it has one.
    fn observe(&mut self, s: &Stamps) -> Option<u64> {
        let clock = match self.windows.clock {
            Some(c) => c,
            None => {
                let c = Clock::pick(s)?;
                self.windows.clock = Some(c);
                c
            }
        };
        let t = clock.read(s);
        if let Some(t) = t {
            self.span = Some(match self.span {
                // Uptime going back by more than a second: a new JVM run (a rotated set that
                // spans a restart). Monotonic and wall clocks never go back.
                Some((a, b)) if clock == Clock::Uptime && t.saturating_add(RUN_BREAK_NS) < b => {
                    self.closed_span = self.closed_span.saturating_add(b - a);
                    self.windows.new_run(t);
                    (t, t)
                }
                Some((a, b)) => (a.min(t), b.max(t)),
                None => (t, t),
            });
            self.windows.log_start = self.span.map(|(a, _)| a);
            if let (None, Some(w)) = (self.windows.first_wall, s.wall) {
                self.windows.first_wall = Some((t, w));
            }
        }
        t
    }

    pub fn add(&mut self, r: &Safepoint) {
        let start = r.start();
        self.count += 1;
        self.total_ns = self.total_ns.saturating_add(r.total_ns);
        self.total.add(r.total_ns);
        if let Some(t) = r.ttsp_ns {
            self.ttsp_total_ns = self.ttsp_total_ns.saturating_add(t);
            self.ttsp.add(t);
        }
        if let Some(a) = r.at_safepoint_ns {
            self.at.add(a);
        }
        match r.since_last_ns {
            Some(s) => {
                self.since_last_sum =
                    self.since_last_sum.saturating_add(s.saturating_add(r.total_ns))
            }
            None => self.since_last_all = false,
        }
        // Records share one Arc per name (the assembler interns them): try the last first.
        let i = match self.ops.last_mut() {
            Some(last) if Arc::ptr_eq(&last.name, &r.op) => self.ops.len() - 1,
            _ => match self.op_index.get(&r.op) {
                Some(&i) => i,
                None => {
                    self.ops.push(OpSummary {
                        name: r.op.clone(),
                        count: 0,
                        total_ns: 0,
                        ttsp_total_ns: None,
                        ttsp_max_ns: None,
                        op_max_ns: None,
                        total_max_ns: 0,
                    });
                    self.op_index.insert(r.op.clone(), self.ops.len() - 1);
                    self.ops.len() - 1
                }
            },
        };
        let op = &mut self.ops[i];
        op.count += 1;
        op.total_ns = op.total_ns.saturating_add(r.total_ns);
        if let Some(t) = r.ttsp_ns {
            op.ttsp_total_ns = Some(op.ttsp_total_ns.unwrap_or(0).saturating_add(t));
            op.ttsp_max_ns = Some(op.ttsp_max_ns.unwrap_or(0).max(t));
        }
        if let Some(a) = r.at_safepoint_ns {
            op.op_max_ns = Some(op.op_max_ns.unwrap_or(0).max(a));
        }
        op.total_max_ns = op.total_max_ns.max(r.total_ns);

        if let Some(t) = r.ttsp_ns.filter(|&t| self.top_floor.is_none_or(|f| t > f)) {
            let entry = TopSafepoint {
                op: r.op.clone(),
                ttsp_ns: t,
                at_safepoint_ns: r.at_safepoint_ns,
                total_ns: r.total_ns,
                start,
                source: r.source,
                culprits: r.culprits.iter().map(|c| c.name.clone()).collect(),
            };
            if self.top.len() < self.opts.top {
                self.top.push(entry);
            } else if let Some((i, _)) = self.top.iter().enumerate().min_by_key(|(_, x)| x.ttsp_ns)
            {
                self.top[i] = entry;
            }
            if self.top.len() >= self.opts.top {
                self.top_floor = self.top.iter().map(|x| x.ttsp_ns).min();
            }
        }

        for c in &r.culprits {
            self.tally_culprit(c, false);
        }

        // The end as printed, then the start. The start is computed (the end less the record's
        // length): it may lie before the previous line's stamp without uptime ever going back,
        // so it only widens the span back. It is no later than the end, and has a clock's
        // reading only when the end has.
        if let Some(e) = self.observe(&r.end)
            && let Some(s) = self.windows.clock.and_then(|c| c.read(&start))
        {
            if let Some((a, b)) = self.span
                && s < a
            {
                self.span = Some((s, b));
                self.windows.log_start = Some(s);
            }
            self.windows.add(s, e, r.total_ns);
        }
    }

    /// Counts culprits of timeout blocks whose safepoint never completed.
    pub fn add_unfinished_culprits(&mut self, cs: &[Culprit]) {
        for c in cs {
            self.tally_culprit(c, true);
        }
    }

    fn tally_culprit(&mut self, c: &Culprit, unfinished: bool) {
        if self.culprits.len() >= 10_000 && !self.culprits.contains_key(&c.name) {
            return;
        }
        let t = self.culprits.entry(c.name.clone()).or_default();
        t.count += 1;
        if unfinished {
            t.unfinished += 1;
        }
        if let Some(tid) = c.os_tid
            && t.tids.len() < 64
        {
            t.tids.insert(tid);
        }
    }

    pub fn finish(self) -> LogSummary {
        let mut operations: Vec<OpSummary> = self.ops;
        operations.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.name.cmp(&b.name)));
        let mut longest_ttsp = self.top;
        longest_ttsp.sort_by(|a, b| {
            b.ttsp_ns.cmp(&a.ttsp_ns).then_with(|| a.source.line.cmp(&b.source.line))
        });
        let mut worst_windows = self.windows.best;
        worst_windows.sort_by(|a, b| {
            b.stopped_ns.cmp(&a.stopped_ns).then_with(|| a.start_ns.cmp(&b.start_ns))
        });
        worst_windows.truncate(self.opts.windows);
        let mut timeout_culprits: Vec<CulpritSummary> = self
            .culprits
            .into_iter()
            .map(|(name, t)| CulpritSummary {
                name,
                count: t.count,
                os_tids: t.tids.into_iter().collect(),
                unfinished: t.unfinished,
            })
            .collect();
        timeout_culprits.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        let span_ns = match self.span {
            Some((a, b)) if b > a || self.closed_span > 0 => {
                Some(self.closed_span.saturating_add(b - a))
            }
            _ if self.since_last_all && self.count > 0 => Some(self.since_last_sum),
            _ => None,
        };
        LogSummary {
            safepoints: self.count,
            total_stopped_ns: self.total_ns,
            ttsp_total_ns: (self.ttsp.count > 0).then_some(self.ttsp_total_ns),
            ttsp_max_ns: (self.ttsp.count > 0).then_some(self.ttsp.max),
            clock: self.windows.clock,
            runs: self.span.is_some().then_some(self.windows.run),
            span_ns,
            stopped_pct: span_ns
                .filter(|&s| s > 0)
                .map(|s| self.total_ns as f64 * 100.0 / s as f64),
            percentiles: Percentiles {
                ttsp: self.ttsp.get(),
                at_safepoint: self.at.get(),
                total: self.total.get(),
            },
            operations,
            longest_ttsp,
            window_ns: self.opts.window_ns,
            worst_windows,
            timeout_culprits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_bucket_holds_what_the_crate_puts_in_it() {
        let h = new_histogram();
        // Every bucket's lowest value is its own lowest equivalent in the crate, and the value
        // just below it falls in the bucket before.
        for i in 1..Counts::new().low.len() {
            let v = Counts::value_at(i);
            assert_eq!(h.lowest_equivalent(v), v, "bucket {i}");
            assert_eq!(Counts::index(v), i);
            assert_eq!(Counts::index(v - 1), i - 1, "bucket {i}");
        }
        assert_eq!(Counts::index(HIST_MAX_NS), Counts::new().low.len() - 1);
        assert_eq!(
            Counts::index(u64::MAX),
            Counts::index(HIST_MAX_NS),
            "values past the range are clamped, as saturating_record does"
        );
    }

    /// Counts past 16 bits carry into the second array, and read back whole.
    #[test]
    fn counts_carry_past_sixteen_bits() {
        let mut c = Counts::new();
        for _ in 0..(3 << 16) + 5 {
            c.add(1_000);
        }
        c.add(7);
        let i = Counts::index(1_000);
        assert_eq!(c.get(i), (3 << 16) + 5);
        assert_eq!(c.get(Counts::index(7)), 1);
        assert_eq!(c.histogram().len(), (3 << 16) + 6);
    }

    fn values() -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(
            prop_oneof![
                0u64..5000,
                0u64..10_000_000,
                0u64..HIST_MAX_NS,
                any::<u64>(),
                (0u32..64).prop_map(|s| 1u64 << s)
            ],
            1..300,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
        /// The percentiles are those of the crate's histogram with each value recorded in it.
        #[test]
        fn percentiles_as_the_crate_reads_them(vs in values()) {
            let mut d = Dist::new();
            let mut h = new_histogram();
            for &v in &vs {
                d.add(v);
                h.saturating_record(v);
            }
            let got = d.get().unwrap();
            let max = *vs.iter().max().unwrap();
            prop_assert_eq!(got.count, h.len());
            prop_assert_eq!(got.max_ns, max);
            for (q, p) in [(0.5, got.p50_ns), (0.9, got.p90_ns), (0.99, got.p99_ns), (0.999, got.p99_9_ns)] {
                prop_assert_eq!(p, h.value_at_quantile(q).min(max), "quantile {}", q);
            }
        }
    }
}
