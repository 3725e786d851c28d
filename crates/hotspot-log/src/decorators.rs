//! Unified-logging (JDK 9+) decorators: `[1.234s][123ns][info ][safepoint] message`.
//!
//! Invariant: a line is treated as decorated only if *every* bracket before the first space
//! reads as a decorator, so a JDK 8 line such as `[GC (Allocation Failure) …` is never
//! mistaken for one. Decorators are recognised by their shape, in any order and with any
//! padding, because users pick any subset.

use crate::stamps::{
    POW10, Stamps, has_fraction, parse_decimal_scaled, parse_iso_time, parse_u64, word_digits,
};

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

/// A `level` decorator, trimmed.
fn is_level(v: &[u8]) -> bool {
    matches!(v, b"info" | b"debug" | b"trace" | b"warning" | b"error")
}

fn is_hostname(s: &[u8]) -> bool {
    !s.is_empty()
        && s.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
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
    split_default(line).or_else(|| split_any(line))
}

/// Bit `i` set where byte `i` of the line's first 64 is of each kind: `]`, a space, a digit or
/// `.`, a `.`, a tag byte (`a-z0-9_,`).
#[derive(Debug, PartialEq, Eq)]
struct Masks {
    close: u64,
    space: u64,
    number: u64,
    dot: u64,
    tag: u64,
}

fn masks(head: &[u8; 64]) -> Masks {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { masks_avx2(head) };
    }
    masks_portable(head)
}

/// The masks 32 bytes at a time, on the path every decorated safepoint line takes (as the
/// prefilter, AVX2 or the plain reading).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn masks_avx2(head: &[u8; 64]) -> Masks {
    use std::arch::x86_64::*;
    let mut m = Masks { close: 0, space: 0, number: 0, dot: 0, tag: 0 };
    for k in 0..2 {
        // SAFETY: bytes 32k..32k+32 are inside `head`.
        let v = unsafe { _mm256_loadu_si256(head.as_ptr().add(32 * k) as *const __m256i) };
        let eq = |b: u8| {
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(b as i8))) as u32 as u64
        };
        let within = |lo: u8, hi: u8| {
            let d = _mm256_sub_epi8(v, _mm256_set1_epi8(lo as i8));
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(
                _mm256_min_epu8(d, _mm256_set1_epi8((hi - lo) as i8)),
                d,
            )) as u32 as u64
        };
        let digit = within(b'0', b'9');
        let dot = eq(b'.');
        m.close |= eq(b']') << (32 * k);
        m.space |= eq(b' ') << (32 * k);
        m.number |= (digit | dot) << (32 * k);
        m.dot |= dot << (32 * k);
        m.tag |= (digit | within(b'a', b'z') | eq(b'_') | eq(b',')) << (32 * k);
    }
    m
}

/// The masks a byte at a time: without AVX2, and the reference for the AVX2 reading.
fn masks_portable(head: &[u8; 64]) -> Masks {
    let mut m = Masks { close: 0, space: 0, number: 0, dot: 0, tag: 0 };
    for (i, &b) in head.iter().enumerate() {
        let bit = 1u64 << i;
        m.close |= if b == b']' { bit } else { 0 };
        m.space |= if b == b' ' { bit } else { 0 };
        m.number |= if b.is_ascii_digit() || b == b'.' { bit } else { 0 };
        m.dot |= if b == b'.' { bit } else { 0 };
        m.tag |= if TAG_BYTES[b as usize] { bit } else { 0 };
    }
    m
}

/// Bits `from..to` set (`from <= to <= 64`).
#[inline(always)]
fn span(from: usize, to: usize) -> u64 {
    (if to >= 64 { u64::MAX } else { (1u64 << to) - 1 })
        & !(if from >= 64 { u64::MAX } else { (1u64 << from) - 1 })
}

/// The value of the `k` (1 to 8) ASCII digits at `line[at..]`, which the caller has checked,
/// read as one word.
#[inline(always)]
fn digits(line: &[u8], at: usize, k: usize) -> u64 {
    let mut w = [0u8; 8];
    match line.get(at..at + 8) {
        Some(b) => w.copy_from_slice(b),
        None => w[..k].copy_from_slice(&line[at..at + k]),
    }
    word_digits(u64::from_le_bytes(w), k)
}

/// The default decorators, `[1.234s][info][safepoint   ] message` (uptime, level, tags: what
/// `-Xlog:safepoint` prints), read from bit masks of the line's first 64 bytes, with no loop
/// over its bytes whose exit would be mispredicted (3% of `logs`' time on the 200 MB bench cut,
/// measured by `perf stat -r 15`). Any other shape, or any doubt, is left to [`split_any`],
/// whose reading this equals wherever it gives one (property-tested).
fn split_default(line: &[u8]) -> Option<Decorated<'_>> {
    // A line of 64 bytes or more is read in place; a shorter one through a zero-padded copy.
    let mut padded = [0u8; 64];
    let head: &[u8; 64] = match line.first_chunk::<64>() {
        Some(h) => h,
        None => {
            padded[..line.len()].copy_from_slice(line);
            &padded
        }
    };
    let m = masks(head);
    let next_close = |after: usize| -> Option<usize> {
        let c = m.close & !span(0, after + 1);
        (c != 0).then(|| c.trailing_zeros() as usize)
    };
    // `[` uptime `s]`: digits and a `.`, no padding.
    let c1 = next_close(0)?;
    if c1 < 4
        || head[c1 - 1] != b's'
        || m.number & span(1, c1 - 1) != span(1, c1 - 1)
        || !head[1].is_ascii_digit()
    {
        return None;
    }
    // Digits, one `.`, digits: read as two words. Anything else (no `.`, more than eight digits
    // on a side) as the general reading reads a number.
    let dots = m.dot & span(1, c1 - 1);
    if dots == 0 {
        return None;
    }
    // The first `.` lies between the `[` and the `s`: `1 <= dot <= c1 - 2`.
    let dot = dots.trailing_zeros() as usize;
    let uptime_ns = match (dots.count_ones(), dot - 1, c1 - 2 - dot) {
        (1, int @ 1..=8, frac @ 1..=8) => {
            digits(line, 1, int) * 1_000_000_000 + digits(line, dot + 1, frac) * POW10[9 - frac]
        }
        _ => parse_decimal_scaled(&line[1..c1 - 1], 9)?,
    };
    // `[` level, padded at its end `]`
    if c1 + 1 >= 64 || head[c1 + 1] != b'[' {
        return None;
    }
    let c2 = next_close(c1 + 1)?;
    let lend = (m.space & span(c1 + 2, c2)).trailing_zeros().min(c2 as u32) as usize;
    if m.space & span(lend, c2) != span(lend, c2) || !is_level(&head[c1 + 2..lend]) {
        return None;
    }
    // `[` tags, padded at their end `]`, then a space or the end of the line.
    if c2 + 2 >= 64 || head[c2 + 1] != b'[' {
        return None;
    }
    let c3 = next_close(c2 + 1)?;
    let tend = (m.space & span(c2 + 2, c3)).trailing_zeros().min(c3 as u32) as usize;
    if tend == c2 + 2
        || !head[c2 + 2].is_ascii_lowercase()
        || m.tag & span(c2 + 2, tend) != span(c2 + 2, tend)
        || m.space & span(tend, c3) != span(tend, c3)
    {
        return None;
    }
    let tags = &line[c2 + 2..tend];
    if is_level(tags) {
        // A second level, as the general reading takes it.
        return None;
    }
    let message = match line.get(c3 + 1) {
        None => &line[c3 + 1..],
        Some(b' ') => &line[c3 + 2..],
        Some(_) => return None,
    };
    Some(Decorated {
        stamps: Stamps { uptime_ns: Some(uptime_ns), ..Stamps::default() },
        tags: Some(tags),
        message,
    })
}

/// Any decorators, in any order and padding.
fn split_any(line: &[u8]) -> Option<Decorated<'_>> {
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
            } else if let Some(num) =
                v.strip_suffix(b"ms").filter(|n| n.iter().all(u8::is_ascii_digit))
            {
                let n = parse_u64(num)?;
                if n >= TIMEMILLIS_FLOOR {
                    if stamps.wall.is_none() {
                        stamps.wall =
                            Some(crate::stamps::WallTime { epoch_ms: n as i64, offset_min: 0 });
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
        } else if is_level(v) {
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

    #[test]
    fn the_default_shape_is_read_from_masks_as_the_general_reading_reads_it() {
        for l in [
            &b"[0.013s][info][safepoint   ] Safepoint \"X\""[..],
            b"[12.5s][warning][safepoint,stats] y",
            b"[6.671s][warning][safepoint]",
            b"[1.s][info ][gc_x,safepoint] z",
        ] {
            let d = split_default(l);
            assert!(d.is_some(), "{}", String::from_utf8_lossy(l));
            assert_eq!(d, split_any(l), "{}", String::from_utf8_lossy(l));
        }
        // Left to the general reading: padding before, a decimal comma, more groups, no
        // fraction, a second level, a group past the 64th byte.
        let long = format!("[0.013s][info][{}] x", "a".repeat(60));
        for l in [
            &b"[ 0.013s][info][safepoint] x"[..],
            b"[1,210s][info][safepoint] x",
            b"[0.013s][info][safepoint][host] x",
            b"[5s][info][safepoint] x",
            b"[0.013s][123ns][info][safepoint] x",
            b"[0.1s][info][info] x",
            long.as_bytes(),
        ] {
            assert_eq!(split_default(l), None, "{}", String::from_utf8_lossy(l));
        }
        assert_eq!(split(long.as_bytes()).unwrap().tags.unwrap().len(), 60);
    }

    fn pieces() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let piece = proptest::sample::select(vec![
            &b"["[..],
            b"]",
            b"0",
            b"13",
            b"2024",
            b".",
            b",",
            b"s",
            b"ms",
            b"ns",
            b" ",
            b"info",
            b"warning",
            b"info ",
            b"safepoint",
            b"safepoint,stats",
            b"x",
            b"-",
            b"T",
            b"\"",
            b"Safepoint",
            b"\t",
            b"\xff",
        ]);
        proptest::collection::vec(piece, 0..16).prop_map(|ps| ps.concat())
    }

    proptest::proptest! {
        /// The AVX2 masks are the byte-at-a-time ones, for any 64 bytes.
        #[cfg(target_arch = "x86_64")]
        #[test]
        fn the_simd_masks_are_the_plain_ones(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 64), lean in proptest::collection::vec(proptest::sample::select(b"]. 09az_,[s:x".to_vec()), 64)) {
            for b in [bytes, lean] {
                let head: [u8; 64] = b.try_into().unwrap();
                let want = masks_portable(&head);
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2.
                    proptest::prop_assert_eq!(unsafe { masks_avx2(&head) }, want);
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 6000, ..proptest::prelude::ProptestConfig::default() })]
        #[test]
        fn the_mask_reading_never_differs_from_the_general_one(
            body in pieces(),
            up in proptest::sample::select(vec![&b"[0.013s]"[..], b"[1.5s]", b"[12s]", b"[0,5s]", b"[", b"[1.2.3s]", b"[ 1.0s]", b"[1.s]", b"[.5s]", b"[123456789012345678901234.5s]", b"[12345678.12345678s]", b"[123456789.5s]", b"[1.123456789s]", b"[1.1234567891s]", b"[99999999.99999999s]", b"[0.000000001s]"]),
            level in proptest::sample::select(vec![&b"[info]"[..], b"[info ]", b"[debug]", b"[ info]", b"[nope]", b"[in fo]", b"[]", b""]),
            tags in proptest::sample::select(vec![&b"[safepoint]"[..], b"[safepoint   ]", b"[safepoint,stats]", b"[Safepoint]", b"[]", b"[info]", b"[a b]", b"[gc_1]", b""]),
            sep in proptest::sample::select(vec![&b" "[..], b"", b"x", b"["]),
            pad in 0usize..64,
        ) {
            let line = [up, level, tags, sep, &body].concat();
            if let Some(d) = split_default(&line) {
                proptest::prop_assert_eq!(Some(d), split_any(&line), "{}", String::from_utf8_lossy(&line));
            }
            // The same pushed towards and past the 64th byte.
            let padded = [&b"[0.5s]"[..], &b"[info]"[..], &[b"[a".as_slice(), &vec![b'b'; pad], b"]"].concat(), sep, &body].concat();
            if let Some(d) = split_default(&padded) {
                proptest::prop_assert_eq!(Some(d), split_any(&padded), "{}", String::from_utf8_lossy(&padded));
            }
        }
    }
}
