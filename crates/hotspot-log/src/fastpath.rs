//! JDK 8's pause line in the one layout nearly every JDK 8 log has, read at fixed places:
//!
//! ```text
//! 2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds
//! ```
//!
//! A JDK 8 log holds five times as many records per byte as a JDK 17 one, and the general
//! reading of this line (tokens split at `": "`, each tried as a date, then as a number; the
//! message searched for its phrases) was most of the time `logs` took on one.
//!
//! Invariant: the same answer as `line::classify` or none. Anything off the layout
//! (another offset form, a stamp missing, more digits than fit, text after the last
//! `seconds`) returns `None`, and the general reading takes the line. Property-tested against
//! it (`tests/properties.rs`).

use crate::bytes::strip_prefix;
use crate::stamps::{WallTime, days_from_civil, digits, not_digits, word_digits};

const STOPPED: &[u8] = b"Total time for which application threads were stopped: ";
const TOOK: &[u8] = b" seconds, Stopping threads took: ";
const SECONDS: &[u8] = b" seconds";

/// What one such line says (`line` makes it a `Classified` of format `Jdk8StoppedTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Jdk8Pause {
    pub(crate) uptime_ns: u64,
    pub(crate) wall: WallTime,
    pub(crate) total_ns: u64,
    pub(crate) ttsp_ns: u64,
}

/// Reads JDK 8's pause lines in that layout. Each line's date and time to the minute is most
/// often the last one's, whose reading (days since 1970, the offset) is kept and used again.
#[derive(Debug, Default, Clone)]
pub(crate) struct Jdk8Pauses {
    /// `YYYY-MM-DDTHH:MM` and `+hhmm` of the last line read, when they were valid.
    minute: Option<([u8; 16], [u8; 5])>,
    /// That minute's start in milliseconds since 1970, and the offset in minutes.
    minute_ms: i64,
    offset_min: i16,
}

impl Jdk8Pauses {
    /// The line, without its newline or `\r`, when it has exactly the layout above.
    #[inline]
    pub(crate) fn read(&mut self, line: &[u8]) -> Option<Jdk8Pause> {
        self.read_to(line).filter(|&(_, end)| end == line.len()).map(|(c, _)| c)
    }

    /// The line at the start of `hay` (which runs on past it), when it has that layout: what
    /// [`Jdk8Pauses::read`] says of it, and where it ends (its `\n`, or `hay`'s end). A line
    /// that ends `\r\n` ends at the `\n`. The line's end is found by reading it, not searched
    /// for first: no byte of its can be a newline.
    #[inline]
    pub(crate) fn read_line(&mut self, hay: &[u8]) -> Option<(Jdk8Pause, usize)> {
        let (c, end) = self.read_to(hay)?;
        match hay.get(end..) {
            Some([]) | Some([b'\n', ..]) => Some((c, end)),
            Some([b'\r', b'\n', ..]) => Some((c, end + 1)),
            _ => None,
        }
    }

    /// The pause line at the start of `line`, and where its last `seconds` ends.
    #[inline(always)]
    fn read_to(&mut self, line: &[u8]) -> Option<(Jdk8Pause, usize)> {
        // The date: `YYYY-MM-DDTHH:MM:SS.mmm+hhmm: ` is 30 bytes.
        let d = line.get(..30)?;
        if d[4] != b'-'
            || d[7] != b'-'
            || d[10] != b'T'
            || d[13] != b':'
            || d[16] != b':'
            || d[19] != b'.'
            || !matches!(d[23], b'+' | b'-')
            || d[28] != b':'
            || d[29] != b' '
        {
            return None;
        }
        let minute: ([u8; 16], [u8; 5]) =
            (d[..16].try_into().expect("16 bytes"), d[23..28].try_into().expect("5 bytes"));
        if self.minute != Some(minute) {
            self.read_minute(d)?;
            self.minute = Some(minute);
        }
        let (se, ms) = (digits::<2>(d, 17)?, digits::<3>(d, 20)? as i64);
        if se > 60 {
            return None;
        }
        let wall = WallTime {
            epoch_ms: self.minute_ms + se as i64 * 1000 + ms,
            offset_min: self.offset_min,
        };
        self.rest(line, wall)
    }

    /// Reads the date to the minute and the offset.
    fn read_minute(&mut self, d: &[u8]) -> Option<()> {
        let y = digits::<4>(d, 0)? as i64;
        let (mo, day, h, mi) =
            (digits::<2>(d, 5)?, digits::<2>(d, 8)?, digits::<2>(d, 11)?, digits::<2>(d, 14)?);
        let offset = (digits::<2>(d, 24)? * 60 + digits::<2>(d, 26)?) as i32;
        if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || h > 23 || mi > 59 {
            return None;
        }
        let offset_min = if d[23] == b'-' { -offset } else { offset };
        let local_ms = ((days_from_civil(y, mo, day) * 24 + h as i64) * 60 + mi as i64) * 60_000;
        self.minute_ms = local_ms - offset_min as i64 * 60_000;
        self.offset_min = offset_min as i16;
        Some(())
    }

    /// After the date: the uptime and the pause.
    #[inline(always)]
    fn rest(&self, line: &[u8], wall: WallTime) -> Option<(Jdk8Pause, usize)> {
        // The uptime: `12.345: `.
        let (uptime_ns, at) = seconds(line, 30)?;
        let rest = line.get(at..)?.strip_prefix(b": ")?;
        let rest = strip_prefix(rest, STOPPED)?;
        let (total_ns, at) = seconds(rest, 0)?;
        let rest = strip_prefix(&rest[at..], TOOK)?;
        let (ttsp_ns, at) = seconds(rest, 0)?;
        let tail = strip_prefix(&rest[at..], SECONDS)?;
        Some((Jdk8Pause { uptime_ns, wall, total_ns, ttsp_ns }, line.len() - tail.len()))
    }
}

/// `I.F` seconds at `at` (1 to 9 digits each side, a point between) in nanoseconds, and where
/// it ends.
#[inline(always)]
fn seconds(s: &[u8], at: usize) -> Option<(u64, usize)> {
    let (int, at) = run(s, at)?;
    if s.get(at) != Some(&b'.') {
        return None;
    }
    if let Some(frac) = seven(s, at) {
        return Some((int * 1_000_000_000 + frac * 100, at + 8));
    }
    let (frac, end) = run(s, at + 1)?;
    let scale = crate::stamps::POW10[9 - (end - at - 1)];
    Some((int * 1_000_000_000 + frac * scale, end))
}

/// The digits after the point at `at` when there are exactly seven, as HotSpot prints a pause
/// (`%3.7f`): read at once, not one by one, each waiting on the last.
#[inline(always)]
fn seven(s: &[u8], at: usize) -> Option<u64> {
    let w: [u8; 8] = s.get(at..at + 8)?.try_into().ok()?;
    if s.get(at + 8).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    // The seven digits in the low bytes (the point shifted out), each 0 to 9 if a digit; the
    // top byte, shifted in, is 0, which passes as a digit.
    let t = (u64::from_le_bytes(w) >> 8) ^ 0x0030_3030_3030_3030;
    (not_digits(t) == 0).then(|| word_digits(t, 7))
}

/// A run of 1 to 9 digits at `at`: its value and where it ends. (`stamps::leading_digits`,
/// eight bytes at a time, measured slower here, on runs this short.)
#[inline(always)]
fn run(s: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut i = at;
    while let Some(&b) = s.get(i) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v * 10 + d as u64;
        i += 1;
        if i - at > 9 {
            return None;
        }
    }
    (i > at).then_some((v, i))
}
