//! Durations as people type them (`300ms`, `1.5s`, `2m`) and as people read them (`2.80 s`),
//! counts with thousands separators, and the lab's plain numbers.
//!
//! Invariant: parsing is exact (integer nanoseconds, no floats), and formatting keeps three
//! significant digits so columns stay narrow and comparable.

use std::fmt;

/// Why a duration did not parse, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

/// Parses `250ns`, `10us`/`10µs`, `300ms`, `1.5s`, `2m`, `1h`, `1d` into nanoseconds.
pub fn parse_duration(s: &str) -> Result<u64, DurationError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = |m: String| Err(DurationError(m));
    if num.is_empty() {
        return bad(format!(
            "'{s}' is not a duration: expected a number with a unit, like 300ms, 1.5s, 2m"
        ));
    }
    let scale: u32 = match unit.trim() {
        "ns" => 0,
        "us" | "µs" => 3,
        "ms" => 6,
        "s" => 9,
        "m" | "min" => return scaled(num, 9, 60, s),
        "h" => return scaled(num, 9, 3600, s),
        "d" => return scaled(num, 9, 86_400, s),
        "" => return bad(format!("'{s}' has no unit: write 300ms, 1.5s, 2m or 1h")),
        u => return bad(format!("'{s}' has an unknown unit '{u}': use ns, us, ms, s, m, h or d")),
    };
    scaled(num, scale, 1, s)
}

/// A duration on the command line (`--threshold 10ms`): parsed where it is read, kept in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub u64);

impl Duration {
    pub fn ns(self) -> u64 {
        self.0
    }

    pub fn std(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

impl std::str::FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Duration, DurationError> {
        parse_duration(s).map(Duration)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_ns(self.0))
    }
}

fn scaled(num: &str, scale: u32, mult: u64, orig: &str) -> Result<u64, DurationError> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) {
        return Err(DurationError(format!("'{orig}' is not a number with a unit")));
    }
    let too_large = || DurationError(format!("'{orig}' is too large"));
    let int_v: u64 = if int.is_empty() { 0 } else { int.parse().map_err(|_| too_large())? };
    let mut frac_v: u64 = 0;
    let mut digits = 0;
    for c in frac.chars().take(scale as usize + 6) {
        frac_v = frac_v * 10 + c.to_digit(10).expect("checked digits") as u64;
        digits += 1;
    }
    let base = 10u128.pow(scale);
    let total = (int_v as u128 * base + frac_v as u128 * base / 10u128.pow(digits)) * mult as u128;
    u64::try_from(total).map_err(|_| too_large())
}

/// Three significant digits and a unit: `850 ns`, `12.3 µs`, `364 ms`, `2.80 s`, `12.3 min`.
pub fn fmt_ns(ns: u64) -> String {
    let v = ns as f64;
    let (x, unit) = if ns < 1_000 {
        return format!("{ns} ns");
    } else if ns < 1_000_000 {
        (v / 1e3, "µs")
    } else if ns < 1_000_000_000 {
        (v / 1e6, "ms")
    } else if ns < 600_000_000_000 {
        (v / 1e9, "s")
    } else if ns < 36_000_000_000_000 {
        (v / 60e9, "min")
    } else {
        (v / 3600e9, "h")
    };
    let s = if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{s} {unit}")
}

/// An uptime in seconds with milliseconds, `5.118s`, as HotSpot prints it.
pub fn fmt_uptime(ns: u64) -> String {
    format!("{}.{:03}s", ns / 1_000_000_000, ns / 1_000_000 % 1000)
}

/// Thousands separators: `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A measurement in the lab's own unit, to three significant digits (`2825`, `4.76`, `0.140`).
pub fn fmt_num(v: f64) -> String {
    if v.is_infinite() {
        "∞".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_people_type() {
        assert_eq!(parse_duration("300ms").unwrap(), 300_000_000);
        assert_eq!(parse_duration("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration("2m").unwrap(), 120_000_000_000);
        assert_eq!(parse_duration("250us").unwrap(), 250_000);
        assert_eq!(parse_duration("250µs").unwrap(), 250_000);
        assert_eq!(parse_duration("0.1ms").unwrap(), 100_000);
        assert_eq!(parse_duration("1h").unwrap(), 3_600_000_000_000);
        assert!(parse_duration("5").unwrap_err().to_string().contains("no unit"));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("1.2.3s").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }

    #[test]
    fn formats_three_significant_digits() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_ns(364_760_625), "365 ms");
        assert_eq!(fmt_ns(2_801_000_000), "2.80 s");
        assert_eq!(fmt_uptime(5_118_000_000), "5.118s");
        assert_eq!(fmt_count(1_234_567), "1,234,567");
        assert_eq!(fmt_count(12), "12");
        assert_eq!(
            (fmt_num(2825.4), fmt_num(4.756), fmt_num(0.14), fmt_num(f64::INFINITY)),
            ("2825".into(), "4.76".into(), "0.140".into(), "∞".into())
        );
        assert_eq!("1.5s".parse::<Duration>().unwrap().to_string(), "1.50 s");
    }
}
