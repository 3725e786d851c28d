//! Which safepoints the user asked about: `--since`, `--until`, `--op`, `--min-ttsp`.
//!
//! Invariant: a record that lacks the clock a bound needs is neither silently kept nor
//! silently dropped: it is counted, and the user is told.

use anyhow::{Result, bail};
use hotspot_log::{Safepoint, Stamps, WallTime, format_wall, parse_iso_time};
use recording::units::{fmt_ns, fmt_uptime, parse_duration};
use serde::Serialize;

/// A point in time on one of the log's clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "clock")]
pub enum TimeBound {
    /// Nanoseconds of JVM uptime.
    Uptime { ns: u64 },
    /// Wall-clock time; without an offset it is read in each line's own offset.
    Wall { local_ms: i64, offset_min: Option<i16> },
}

impl TimeBound {
    pub fn parse(s: &str) -> Result<TimeBound> {
        let t = s.trim();
        if t.len() >= 10 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-' {
            let norm = t.replacen(' ', "T", 1);
            let has_offset = norm.len() > 19 && norm[19..].contains(['+', '-', 'Z']);
            let full = if norm.len() == 10 { format!("{norm}T00:00:00") } else { norm };
            return match parse_iso_time(full.as_bytes()) {
                Some(w) if has_offset => Ok(TimeBound::Wall {
                    local_ms: w.epoch_ms + w.offset_min as i64 * 60_000,
                    offset_min: Some(w.offset_min),
                }),
                Some(w) => Ok(TimeBound::Wall { local_ms: w.epoch_ms, offset_min: None }),
                None => bail!(
                    "'{s}' is not a time: use an uptime like 90s or 10m, or a date and time like 2024-01-31T10:00:00"
                ),
            };
        }
        if t.contains(':') {
            bail!("'{s}' needs a date: write 2024-01-31T{t}, or give an uptime like 90s");
        }
        Ok(TimeBound::Uptime { ns: parse_duration(t)? })
    }

    /// Compares the bound with an instant: `Some(ordering of instant vs bound)`, or `None`
    /// if the instant lacks this clock.
    fn cmp(&self, s: &Stamps) -> Option<std::cmp::Ordering> {
        match *self {
            TimeBound::Uptime { ns } => s.uptime_ns.map(|u| u.cmp(&ns)),
            TimeBound::Wall { local_ms, offset_min } => s.wall.map(|w: WallTime| {
                let off = offset_min.unwrap_or(w.offset_min) as i64;
                let bound_epoch = local_ms - off * 60_000;
                w.epoch_ms.cmp(&bound_epoch)
            }),
        }
    }

    pub fn describe(&self) -> String {
        match *self {
            TimeBound::Uptime { ns } => format!("uptime {}", fmt_uptime(ns)),
            TimeBound::Wall { local_ms, offset_min } => {
                let w = WallTime {
                    epoch_ms: local_ms - offset_min.unwrap_or(0) as i64 * 60_000,
                    offset_min: offset_min.unwrap_or(0),
                };
                format_wall(w)
            }
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Filter {
    pub since: Option<TimeBound>,
    pub until: Option<TimeBound>,
    pub ops: Vec<String>,
    pub min_ttsp_ns: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    Drop,
    /// The record lacks the clock a time bound is on.
    NoClock,
}

impl Filter {
    pub fn new(
        since: Option<TimeBound>,
        until: Option<TimeBound>,
        ops: &[String],
        min_ttsp_ns: Option<u64>,
    ) -> Filter {
        Filter {
            since,
            until,
            ops: ops.iter().map(|o| o.to_ascii_lowercase()).collect(),
            min_ttsp_ns,
        }
    }

    pub fn is_time_bounded(&self) -> bool {
        self.since.is_some() || self.until.is_some()
    }

    pub fn check(&self, s: &Safepoint) -> Verdict {
        if !self.ops.is_empty() && !self.ops.iter().any(|o| o.eq_ignore_ascii_case(&s.op)) {
            return Verdict::Drop;
        }
        if let Some(min) = self.min_ttsp_ns
            && s.ttsp_ns.is_none_or(|t| t < min)
        {
            return Verdict::Drop;
        }
        let start = s.start();
        if let Some(b) = &self.since {
            match b.cmp(&start) {
                None => return Verdict::NoClock,
                Some(std::cmp::Ordering::Less) => return Verdict::Drop,
                _ => {}
            }
        }
        if let Some(b) = &self.until {
            match b.cmp(&start) {
                None => return Verdict::NoClock,
                Some(std::cmp::Ordering::Less) => {}
                _ => return Verdict::Drop,
            }
        }
        Verdict::Keep
    }

    /// One line for the summary, e.g. `op G1CollectFull, TTSP ≥ 10.0 ms, since uptime 600.000s`.
    pub fn describe(&self) -> Option<String> {
        let mut parts = Vec::new();
        if !self.ops.is_empty() {
            parts.push(format!("op {}", self.ops.join(" or ")));
        }
        if let Some(m) = self.min_ttsp_ns {
            parts.push(format!("TTSP ≥ {}", fmt_ns(m)));
        }
        if let Some(b) = &self.since {
            parts.push(format!("since {}", b.describe()));
        }
        if let Some(b) = &self.until {
            parts.push(format!("until {}", b.describe()));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// The uptime window of a time filter, for the "% of time stopped" denominator.
    pub fn uptime_range(&self) -> (Option<u64>, Option<u64>) {
        let get = |b: &Option<TimeBound>| match b {
            Some(TimeBound::Uptime { ns }) => Some(*ns),
            _ => None,
        };
        (get(&self.since), get(&self.until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_bounds() {
        assert_eq!(TimeBound::parse("90s").unwrap(), TimeBound::Uptime { ns: 90_000_000_000 });
        assert!(matches!(
            TimeBound::parse("2024-01-31T10:00:00").unwrap(),
            TimeBound::Wall { offset_min: None, .. }
        ));
        assert!(matches!(
            TimeBound::parse("2024-01-31 10:00:00+0100").unwrap(),
            TimeBound::Wall { offset_min: Some(60), .. }
        ));
        assert!(TimeBound::parse("10:00:00").unwrap_err().to_string().contains("needs a date"));
        assert!(TimeBound::parse("yesterday").is_err());
    }

    #[test]
    fn wall_bound_without_offset_uses_the_lines_offset() {
        let b = TimeBound::parse("2024-01-31T10:00:00").unwrap();
        let at = |s: &str| Stamps { wall: parse_iso_time(s.as_bytes()), ..Default::default() };
        assert_eq!(b.cmp(&at("2024-01-31T10:00:00.000+0100")), Some(std::cmp::Ordering::Equal));
        assert_eq!(b.cmp(&at("2024-01-31T09:59:59.999+0000")), Some(std::cmp::Ordering::Less));
        assert_eq!(b.cmp(&Stamps::default()), None);
    }
}
