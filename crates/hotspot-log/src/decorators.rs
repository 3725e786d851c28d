//! Unified-logging (JDK 9+) decorators: `[1.234s][123ns][info ][safepoint] message`.
//!
//! Invariant: a line is treated as decorated only if *every* bracket before the first space
//! reads as a decorator, so a JDK 8 line such as `[GC (Allocation Failure) …` is never
//! mistaken for one. Decorators are recognised by their shape, in any order and with any
//! padding, because users pick any subset.

use crate::stamps::{has_fraction, parse_decimal_scaled, parse_iso_time, parse_u64, Stamps};

/// The decorator prefix of a line, split from its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decorated<'a> {
    pub stamps: Stamps,
    /// The `tags` decorator, trimmed (`safepoint,stats`), when present.
    pub tags: Option<&'a [u8]>,
    /// The message after the decorators and the single separating space.
    pub message: &'a [u8],
}

impl Decorated<'_> {
    /// True when the tag set names `safepoint` (alone or with others, e.g. `safepoint,stats`).
    pub fn has_safepoint_tag(&self) -> bool {
        self.tags.is_some_and(|t| t.split(|&b| b == b',').any(|tag| tag == b"safepoint"))
    }
    pub fn has_tag(&self, name: &[u8]) -> bool {
        self.tags.is_some_and(|t| t.split(|&b| b == b',').any(|tag| tag == name))
    }
}

/// Milliseconds at or above this are wall-clock `timemillis` (after 1973), below it they are
/// `uptimemillis`; a JVM up for three years is not a case worth the ambiguity.
const TIMEMILLIS_FLOOR: u64 = 100_000_000_000;

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|&b| b != b' ').map_or(start, |e| e + 1);
    &s[start..end]
}

/// The bytes a tag set is made of (`a-z`, `0-9`, `_`, `,`), as a table: checked once per
/// byte of every decorated safepoint line, where four comparisons a byte showed in profiles.
const TAG_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_' || c == b',';
        b += 1;
    }
    t
};

fn is_tags(s: &[u8]) -> bool {
    !s.is_empty() && s[0].is_ascii_lowercase() && s.iter().all(|&b| TAG_BYTES[b as usize])
}

fn is_hostname(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

/// Shaped like an ISO 8601 time (`2024-01-31T10:00:00.123+0100`), whether or not it reads as one.
fn iso_shaped(v: &[u8]) -> bool {
    v.len() >= 19 && v[4] == b'-' && v[10] == b'T'
}

/// Splits the decorators from a line, or returns `None` if the line is not decorated.
pub fn split(line: &[u8]) -> Option<Decorated<'_>> {
    if line.first() != Some(&b'[') {
        return None;
    }
    let mut stamps = Stamps::default();
    let mut tags = None;
    let mut nanos: [Option<u64>; 2] = [None, None];
    let mut groups = 0usize;
    let mut i = 0usize;
    while line.get(i) == Some(&b'[') {
        // A decorator is a few bytes long: a plain loop beats memchr's setup.
        let close = i + 1 + line[i + 1..].iter().position(|&b| b == b']')?;
        let raw = &line[i + 1..close];
        let v = trim(raw);
        i = close + 1;
        groups += 1;
        if v.is_empty() {
            return None;
        }
        let last = v[v.len() - 1];
        if v[0].is_ascii_digit() {
            // Clocks, `pid` and `tid`: tested in this order, the first shape that fits decides.
            if let Some(num) = v.strip_suffix(b"ns").filter(|n| n.iter().all(u8::is_ascii_digit)) {
                let n = parse_u64(num)?;
                if nanos[0].is_none() {
                    nanos[0] = Some(n);
                } else {
                    nanos[1] = Some(n);
                }
            } else if let Some(num) = v.strip_suffix(b"ms").filter(|n| n.iter().all(u8::is_ascii_digit)) {
                let n = parse_u64(num)?;
                if n >= TIMEMILLIS_FLOOR {
                    if stamps.wall.is_none() {
                        stamps.wall = Some(crate::stamps::WallTime { epoch_ms: n as i64, offset_min: 0 });
                    }
                } else {
                    stamps.uptime_ns.get_or_insert(n.saturating_mul(1_000_000));
                }
            } else if last == b's' && has_fraction(v) {
                // `uptime`: seconds with milliseconds, `1.234s`.
                let ns = parse_decimal_scaled(&v[..v.len() - 1], 9)?;
                stamps.uptime_ns = Some(ns);
            } else if iso_shaped(v) {
                let w = parse_iso_time(v)?;
                stamps.wall.get_or_insert(w);
            } else if v.iter().all(u8::is_ascii_digit) {
                // `pid` or `tid`: not a clock, nothing to keep.
            } else if is_hostname(v) {
                // `hostname` (one that starts with a digit)
            } else {
                return None;
            }
        } else if iso_shaped(v) {
            // Shaped like a time but not one: not a decorated line.
            return None;
        } else if matches!(v, b"info" | b"debug" | b"trace" | b"warning" | b"error") {
            // The level carries no information the message shape does not.
        } else if is_tags(v) && line.get(i) != Some(&b'[') {
            // Tags are always the last decorator.
            tags = Some(v);
        } else if is_hostname(v) {
            // `hostname`
        } else {
            return None;
        }
    }
    if groups == 0 {
        return None;
    }
    // One `ns` decorator is `timenanos` unless it agrees with `uptime` to the millisecond,
    // in which case it is `uptimenanos`. With two, HotSpot prints `timenanos` first.
    match nanos {
        [Some(a), Some(b)] => {
            stamps.mono_ns = Some(a);
            stamps.uptime_ns = Some(b);
        }
        [Some(a), None] => match stamps.uptime_ns {
            Some(up) if up.abs_diff(a) < 1_000_000 => stamps.uptime_ns = Some(a),
            _ => stamps.mono_ns = Some(a),
        },
        _ => {}
    }
    let message = match line.get(i) {
        None => &line[i..],
        Some(b' ') => &line[i + 1..],
        // Something glued to the last bracket: not a decorated line.
        Some(_) => return None,
    };
    Some(Decorated { stamps, tags, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_decorators() {
        let d = split(b"[0.896s][info][safepoint] Safepoint \"X\"").unwrap();
        assert_eq!(d.stamps.uptime_ns, Some(896_000_000));
        assert_eq!(d.tags, Some(&b"safepoint"[..]));
        assert_eq!(d.message, b"Safepoint \"X\"");
        assert!(d.has_safepoint_tag());
    }

    #[test]
    fn padded_and_nanos() {
        let d = split(b"[1.403s][121024576202ns][info ][safepoint,stats  ] VM Operation").unwrap();
        assert_eq!(d.stamps.mono_ns, Some(121_024_576_202));
        assert_eq!(d.stamps.uptime_ns, Some(1_403_000_000));
        assert!(d.has_safepoint_tag());
        assert!(d.has_tag(b"stats"));
    }

    #[test]
    fn every_decorator() {
        let d = split(
            b"[2024-01-31T10:00:00.123+0100][2024-01-31T09:00:00.123+0000][1.500s][1706691600123ms][1500ms][99000000000ns][1500000000ns][myhost][4242][4243][debug][safepoint] m",
        )
        .unwrap();
        assert_eq!(d.stamps.wall.unwrap().epoch_ms, 1_706_691_600_123);
        assert_eq!(d.stamps.wall.unwrap().offset_min, 60);
        assert_eq!(d.stamps.uptime_ns, Some(1_500_000_000));
        assert_eq!(d.stamps.mono_ns, Some(99_000_000_000));
        assert_eq!(d.message, b"m");
    }

    #[test]
    fn jdk8_gc_lines_are_not_decorated() {
        assert!(split(b"[GC (Allocation Failure) [PSYoungGen: 1K->2K(3K)] 0.0012 secs]").is_none());
        assert!(split(b"[Times: user=0.01 sys=0.00, real=0.00 secs]").is_none());
        assert!(split(b"plain").is_none());
        assert!(split(b"[").is_none());
        assert!(split(b"[]").is_none());
    }

    #[test]
    fn empty_message_after_warning() {
        let d = split(b"[6.671s][warning][safepoint      ] ").unwrap();
        assert_eq!(d.message, b"");
        let d = split(b"[6.671s][warning][safepoint]").unwrap();
        assert_eq!(d.message, b"");
    }
}
