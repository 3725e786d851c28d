//! Reading HdrHistogram interval logs (`.hlog`): the agent's hiccups and the recorder's control
//! meter. Both hold values in ns. A cut or corrupt line is skipped: a recording whose writer was
//! killed keeps every interval it finished.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One interval of the log, as plotted on a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Seconds since the log's StartTime (or BaseTime) header.
    pub start_s: f64,
    pub length_s: f64,
    pub max_ns: u64,
    pub count: u64,
}

/// A whole log: its intervals and their sum.
pub struct IntervalLog {
    /// The log's StartTime, in ms since the epoch, when the header gives one.
    pub start_epoch_ms: Option<i64>,
    pub intervals: Vec<Interval>,
    pub total: Histogram<u64>,
}

/// Percentiles of a summed log, for reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HiccupSummary {
    pub intervals: usize,
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
}

impl IntervalLog {
    pub fn summary(&self) -> Option<HiccupSummary> {
        let t = &self.total;
        (!self.intervals.is_empty()).then(|| HiccupSummary {
            intervals: self.intervals.len(),
            count: t.len(),
            p50_ns: t.value_at_quantile(0.5),
            p99_ns: t.value_at_quantile(0.99),
            p99_9_ns: t.value_at_quantile(0.999),
            max_ns: t.max(),
        })
    }
}

/// Reads `path`; None when it is missing or holds no interval.
pub fn read(path: &Path) -> Option<IntervalLog> {
    let text = std::fs::read(path).ok()?;
    let mut total = hotspot_log::summary::new_histogram();
    let mut de = Deserializer::new();
    let mut intervals = Vec::new();
    let mut start_epoch_ms = None;
    for entry in IntervalLogIterator::new(&text) {
        let h = match entry {
            Ok(LogEntry::StartTime(d)) => {
                start_epoch_ms = Some(d.as_millis() as i64);
                continue;
            }
            Ok(LogEntry::BaseTime(d)) => {
                start_epoch_ms.get_or_insert(d.as_millis() as i64);
                continue;
            }
            Ok(LogEntry::Interval(h)) => h,
            _ => continue,
        };
        let Ok(bytes) = base64_decode(h.encoded_histogram()) else { continue };
        let Ok(hist) = de.deserialize::<u64, _>(&mut std::io::Cursor::new(bytes)) else { continue };
        // Only the recorded buckets: `add` walks every bucket of the interval's histogram.
        for v in hist.iter_recorded() {
            let _ = total.record_n(v.value_iterated_to(), v.count_at_value());
        }
        intervals.push(Interval {
            start_s: h.start_timestamp().as_secs_f64(),
            length_s: h.duration().as_secs_f64(),
            max_ns: hist.max(),
            count: hist.len(),
        });
    }
    (!intervals.is_empty()).then_some(IntervalLog { start_epoch_ms, intervals, total })
}

/// Reads an interval log on as it grows (`stallscope watch` feeds it the whole lines appended
/// since the last call): each interval's recorded values, with their counts.
#[derive(Default)]
pub struct Reader {
    de: Option<Deserializer>,
}

impl Reader {
    /// Hands `out` each value (ns) recorded in the intervals of `lines`, with its count.
    pub fn feed(&mut self, lines: &[u8], out: &mut dyn FnMut(u64, u64)) {
        let de = self.de.get_or_insert_with(Deserializer::new);
        for entry in IntervalLogIterator::new(lines) {
            let Ok(LogEntry::Interval(h)) = entry else { continue };
            let Ok(bytes) = base64_decode(h.encoded_histogram()) else { continue };
            let Ok(hist) = de.deserialize::<u64, _>(&mut std::io::Cursor::new(bytes)) else {
                continue;
            };
            for v in hist.iter_recorded() {
                out(v.value_iterated_to(), v.count_at_value());
            }
        }
    }
}

fn base64_decode(s: &str) -> Result<Vec<u8>, ()> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|_| ())
}
