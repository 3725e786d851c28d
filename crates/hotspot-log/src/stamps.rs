//! The clocks a HotSpot log line can carry, and exact parsing of the numbers on them.
//!
//! Invariant: every duration is converted to integer nanoseconds by exact decimal
//! arithmetic (never through `f64`), so totals summed from the log agree to the
//! nanosecond with any other tool that reads the same digits.

use serde::Serialize;

/// A wall-clock instant as HotSpot prints it: milliseconds since the Unix epoch, plus the
/// UTC offset the line was printed in (kept for display in the log's own time zone).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct WallTime {
    pub epoch_ms: i64,
    pub offset_min: i16,
}

/// Which clocks a line was stamped with. A field is `None` when the line does not carry it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stamps {
    /// Time since JVM start (`uptime`, `uptimemillis`, `uptimenanos` decorators, or the JDK 8
    /// `12.345:` prefix).
    pub uptime_ns: Option<u64>,
    /// Wall-clock time (`time`, `utctime`, `timemillis` decorators, or the JDK 8 date prefix).
    pub wall: Option<WallTime>,
    /// CLOCK_MONOTONIC (`timenanos` decorator), which equals `System.nanoTime()` on Linux.
    pub mono_ns: Option<u64>,
}

impl Stamps {
    pub fn is_empty(&self) -> bool {
        self.uptime_ns.is_none() && self.wall.is_none() && self.mono_ns.is_none()
    }

    /// The same instant moved back by `ns` on every clock it has (used to turn the end of a
    /// safepoint into its start).
    pub fn minus(&self, ns: u64) -> Stamps {
        Stamps {
            uptime_ns: self.uptime_ns.map(|u| u.saturating_sub(ns)),
            wall: self.wall.map(|w| WallTime {
                epoch_ms: w.epoch_ms.saturating_sub((ns / 1_000_000) as i64),
                offset_min: w.offset_min,
            }),
            mono_ns: self.mono_ns.map(|m| m.saturating_sub(ns)),
        }
    }

    /// The same instant moved forward by `ns` on every clock it has.
    pub fn plus(&self, ns: u64) -> Stamps {
        Stamps {
            uptime_ns: self.uptime_ns.map(|u| u.saturating_add(ns)),
            wall: self.wall.map(|w| WallTime {
                epoch_ms: w.epoch_ms.saturating_add((ns / 1_000_000) as i64),
                offset_min: w.offset_min,
            }),
            mono_ns: self.mono_ns.map(|m| m.saturating_add(ns)),
        }
    }
}

/// The run of ASCII digits at the front of `s` (any length) and its value, or `None` when the
/// value passes `u64::MAX`. Eight bytes are tested and converted at once (SWAR): a safepoint
/// line carries five nine-digit numbers, and the byte-at-a-time loop was a fifth of the time
/// spent classifying one.
#[inline]
pub(crate) fn leading_digits(s: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut n = 0usize;
    while let Some(chunk) = s.get(n..n + 8) {
        let t = u64::from_le_bytes(chunk.try_into().unwrap()) ^ 0x3030_3030_3030_3030;
        let k = (not_digits(t).trailing_zeros() / 8) as usize;
        if k == 0 {
            return Some((v, n));
        }
        v = v.checked_mul(POW10[k])?.checked_add(word_digits(t, k))?;
        n += k;
        if k < 8 {
            return Some((v, n));
        }
    }
    while let Some(&b) = s.get(n) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
        n += 1;
    }
    Some((v, n))
}

/// The bytes of `t`, eight ASCII bytes each XORed with `'0'`, that were no digit: nonzero high
/// nibbles there, zero elsewhere. A byte was a digit when its high nibble was 3 (now 0) and its
/// low one is at most 9.
#[inline(always)]
pub(crate) fn not_digits(t: u64) -> u64 {
    const LOW: u64 = 0x0F0F_0F0F_0F0F_0F0F;
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    (t & HIGH) | (((t & LOW) + 0x0606_0606_0606_0606) & HIGH)
}

/// The value of the first `k` (1 to 8) bytes of `word` (little-endian), ASCII digits or their
/// low nibbles, which the caller has checked: the digits moved up to the top bytes (leading
/// zeros below), then combined pairwise.
#[inline(always)]
pub(crate) fn word_digits(word: u64, k: usize) -> u64 {
    let mut x = (word & 0x0F0F_0F0F_0F0F_0F0F) << (8 * (8 - k));
    x = (x.wrapping_mul(10) + (x >> 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_FFFF_0000_FFFF;
    x.wrapping_mul(10_000).wrapping_add(x >> 32) & 0xFFFF_FFFF
}

/// Parses ASCII digits into a `u64`; `None` for an empty slice, a non-digit or overflow.
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// Parses a non-negative decimal like `0.0001794` or `12` into an integer count of
/// `1/10^scale` units, exactly (digits beyond `scale` are truncated, as HotSpot's own
/// `%3.7f` rounding already happened when it printed them).
///
/// The decimal separator may be a comma: a JVM running in a locale that writes one (de_DE,
/// fr_FR, ru_RU) prints `0,0004130 seconds` and `[1,210s]`, as GCViewer and gctoolkit accept.
pub(crate) fn parse_decimal_scaled(s: &[u8], scale: u32) -> Option<u64> {
    let (int_v, n) = leading_digits(s)?;
    if n > 20 {
        return None;
    }
    let frac = match s.get(n) {
        None => &s[..0],
        Some(b'.' | b',') => &s[n + 1..],
        Some(_) => return None,
    };
    if n == 0 && frac.is_empty() {
        return None;
    }
    // Digits beyond the scale are dropped (truncation, as before); fewer are padded with zeros.
    let (kept, beyond) = frac.split_at(frac.len().min(scale as usize));
    let (frac_v, k) = leading_digits(kept)?;
    if k != kept.len() || !beyond.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let pad = *POW10.get((scale as usize).checked_sub(kept.len())?)?;
    int_v.checked_mul(*POW10.get(scale as usize)?)?.checked_add(frac_v.checked_mul(pad)?)
}

/// 10^0 to 10^19, every power of ten a u64 holds.
pub(crate) const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// Whether `s` holds a decimal separator, point or comma.
pub(crate) fn has_fraction(s: &[u8]) -> bool {
    decimal_separator(s).is_some()
}

/// The first `.` or `,` (decimal commas come from non-English locales). The numbers are a few
/// bytes long: a plain loop beats memchr's setup.
fn decimal_separator(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'.' || b == b',')
}

/// Seconds with a decimal fraction (`1.215`, `0.0001794`, `0,0001794`) to nanoseconds.
pub(crate) fn parse_seconds_ns(s: &[u8]) -> Option<u64> {
    parse_decimal_scaled(s, 9)
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

pub(crate) fn digits<const N: usize>(s: &[u8], at: usize) -> Option<u32> {
    let part = s.get(at..at + N)?;
    parse_u64(part).map(|v| v as u32)
}

/// Parses HotSpot's ISO-8601 stamp, `2024-01-31T10:00:00.123+0100` (the offset may also be
/// written `+01:00` or `Z`), as printed by the `time`/`utctime` decorators and JDK 8's
/// `-XX:+PrintGCDateStamps`.
pub fn parse_iso_time(s: &[u8]) -> Option<WallTime> {
    if s.len() < 19 || s[4] != b'-' || s[7] != b'-' || (s[10] != b'T' && s[10] != b' ') {
        return None;
    }
    let y = digits::<4>(s, 0)? as i64;
    let mo = digits::<2>(s, 5)?;
    let d = digits::<2>(s, 8)?;
    let h = digits::<2>(s, 11)?;
    let mi = digits::<2>(s, 14)?;
    let se = digits::<2>(s, 17)?;
    if s[13] != b':'
        || s[16] != b':'
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || se > 60
    {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if s.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < s.len() && s[i].is_ascii_digit() {
            i += 1;
        }
        let frac = &s[start..i];
        if frac.is_empty() {
            return None;
        }
        // Milliseconds: the first three digits, padded (`.5` is 500), the rest dropped.
        ms = frac.iter().chain(b"000").take(3).fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
    }
    let offset_min: i32 = match s.get(i) {
        None => 0,
        Some(b'Z') => {
            i += 1;
            0
        }
        Some(&sign @ (b'+' | b'-')) => {
            let oh = digits::<2>(s, i + 1)? as i32;
            let om_at = if s.get(i + 3) == Some(&b':') { i + 4 } else { i + 3 };
            let om = digits::<2>(s, om_at)? as i32;
            i = om_at + 2;
            let v = oh * 60 + om;
            if sign == b'-' { -v } else { v }
        }
        Some(_) => return None,
    };
    if i != s.len() {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    let local_ms = ((days * 24 + h as i64) * 60 + mi as i64) * 60_000 + se as i64 * 1000 + ms;
    Some(WallTime {
        epoch_ms: local_ms - offset_min as i64 * 60_000,
        offset_min: offset_min as i16,
    })
}

/// Formats a wall time in its own offset, `2024-01-31 10:00:00.123`.
pub fn format_wall(w: WallTime) -> String {
    let local = w.epoch_ms + w.offset_min as i64 * 60_000;
    let days = local.div_euclid(86_400_000);
    let ms_of_day = local.rem_euclid(86_400_000);
    // civil_from_days (Hinnant)
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    let h = ms_of_day / 3_600_000;
    let mi = ms_of_day / 60_000 % 60;
    let s = ms_of_day / 1000 % 60;
    let ms = ms_of_day % 1000;
    format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{ms:03}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_seconds_are_exact() {
        assert_eq!(parse_seconds_ns(b"0.0001794"), Some(179_400));
        assert_eq!(parse_seconds_ns(b"4.0402532"), Some(4_040_253_200));
        assert_eq!(parse_seconds_ns(b"12"), Some(12_000_000_000));
        assert_eq!(parse_seconds_ns(b"1.2345678919"), Some(1_234_567_891));
        assert_eq!(parse_seconds_ns(b"."), None);
        assert_eq!(parse_seconds_ns(b"1.2x"), None);
        assert_eq!(parse_seconds_ns(b"0,0004130"), Some(413_000), "a decimal comma");
        assert_eq!(parse_seconds_ns(b"1,2.3"), None, "one separator only");
        assert_eq!(parse_seconds_ns(b"99999999999999999999"), None);
    }

    #[test]
    fn iso_time_round_trips_through_display() {
        let w = parse_iso_time(b"2016-03-01T10:00:00.123+0100").unwrap();
        assert_eq!(w.offset_min, 60);
        assert_eq!(w.epoch_ms, 1_456_822_800_123);
        assert_eq!(format_wall(w), "2016-03-01 10:00:00.123");
        assert_eq!(parse_iso_time(b"2016-03-01T09:00:00.123Z").unwrap().epoch_ms, w.epoch_ms);
        assert_eq!(parse_iso_time(b"2016-03-01T04:00:00.123-05:00").unwrap().epoch_ms, w.epoch_ms);
        assert!(parse_iso_time(b"2016-13-01T10:00:00.123+0100").is_none());
        assert!(parse_iso_time(b"2016-03-01T10:00:00.123+01").is_none());
    }

    fn naive(s: &[u8]) -> Option<(u64, usize)> {
        let n = s.iter().take_while(|b| b.is_ascii_digit()).count();
        let mut v: u64 = 0;
        for &b in &s[..n] {
            v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
        }
        Some((v, n))
    }

    #[test]
    fn leading_digits_as_the_plain_loop() {
        for s in [
            "",
            "x",
            "0",
            "7 ns",
            "12345678",
            "123456789 ns",
            "18446744073709551615",
            "18446744073709551616",
            "000000000000000000000001",
            "99999999999999999999",
            "1234567/",
            "12:45",
            "9999999:",
        ] {
            assert_eq!(leading_digits(s.as_bytes()), naive(s.as_bytes()), "{s:?}");
        }
        // Every byte value right after every length of digit run, and before it.
        for len in 0..22 {
            for b in 0..=255u8 {
                let mut s: Vec<u8> = (0..len).map(|i| b'1' + (i % 9) as u8).collect();
                s.push(b);
                s.extend_from_slice(b"123");
                assert_eq!(leading_digits(&s), naive(&s), "{:?}", String::from_utf8_lossy(&s));
            }
        }
    }

    /// The reading before `leading_digits`, kept as the oracle.
    fn decimal_reference(s: &[u8], scale: u32) -> Option<u64> {
        let (int, frac) = match s.iter().position(|&b| b == b'.' || b == b',') {
            Some(i) => (&s[..i], &s[i + 1..]),
            None => (s, &s[..0]),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let int_v = if int.is_empty() { 0 } else { parse_u64(int)? };
        if !frac.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let kept = &frac[..frac.len().min(scale as usize)];
        let frac_v = kept.iter().fold(0u64, |v, &b| v * 10 + (b - b'0') as u64);
        let pad = *POW10.get(scale as usize - kept.len())?;
        int_v.checked_mul(*POW10.get(scale as usize)?)?.checked_add(frac_v * pad)
    }

    proptest::proptest! {
        #[test]
        fn decimals_read_as_the_reference(s in "[0-9]{0,22}([.,][0-9]{0,24})?[0-9a,. ]{0,2}", scale in 0u32..12) {
            proptest::prop_assert_eq!(parse_decimal_scaled(s.as_bytes(), scale), decimal_reference(s.as_bytes(), scale), "{:?} at scale {}", s, scale);
        }
    }
}
