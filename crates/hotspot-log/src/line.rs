//! One line in, one event out: what a single log line says about safepoints, before lines are
//! assembled into records.
//!
//! Invariant: classification is a pure function of the line's bytes. It never panics and never
//! allocates; anything it cannot read is reported as `Unrecognised` (it looked like a
//! safepoint line) or `Other` (it did not), never guessed at.

use crate::decorators;
use crate::fastpath::{Jdk8Pause, Jdk8Pauses};
use crate::formats::Format;
use crate::stamps::{Stamps, has_fraction, parse_iso_time, parse_seconds_ns, parse_u64};

/// The timings of a JDK 13+ `Safepoint "…"` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SafepointTimes {
    pub since_last_ns: Option<u64>,
    pub reaching_ns: u64,
    pub cleanup_ns: Option<u64>,
    pub at_safepoint_ns: u64,
    pub leaving_ns: Option<u64>,
    pub total_ns: u64,
    pub threads_runnable: Option<u32>,
    pub threads_total: Option<u32>,
}

/// A row of a safepoint statistics table, in nanoseconds (millisecond tables are scaled).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsRow<'a> {
    /// The `%8.3f:` column of JDK 8/11/12 rows: uptime when the safepoint began.
    pub start_uptime_ns: Option<u64>,
    pub op: &'a [u8],
    pub threads_total: u32,
    pub initially_running: u32,
    pub wait_to_block: Option<u32>,
    pub spin_ns: Option<u64>,
    pub block_ns: Option<u64>,
    pub sync_ns: u64,
    pub cleanup_ns: Option<u64>,
    pub vmop_ns: u64,
    pub total_ns: u64,
    pub page_traps: Option<u32>,
}

/// A thread named in a SafepointTimeout block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadLine<'a> {
    pub name: &'a [u8],
    pub java_id: Option<u64>,
    /// The native thread id (`nid=`, hex before JDK 25, decimal since; or JDK 25's `[tid]`).
    pub os_tid: Option<u64>,
    pub daemon: bool,
    pub state: Option<&'a [u8]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Safepoint {
        op: &'a [u8],
        times: SafepointTimes,
    },
    Stopped {
        total_ns: u64,
        ttsp_ns: Option<u64>,
    },
    ApplicationTime {
        ns: u64,
    },
    Entering {
        op: &'a [u8],
    },
    Leaving,
    StatsHeader,
    StatsRow(StatsRow<'a>),
    StatsSummary,
    TimeoutBegin,
    TimeoutReason,
    TimeoutList,
    TimeoutThread(ThreadLine<'a>),
    TimeoutThreadState(&'a [u8]),
    TimeoutEnd,
    /// `Safepoint synchronization initiated …` (safepoint=debug): a safepoint began being
    /// reached; its record follows when it is over.
    SyncInitiated,
    Detail,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified<'a> {
    pub stamps: Stamps,
    pub format: Format,
    pub event: Event<'a>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome<'a> {
    Known(Classified<'a>),
    /// Marked as a safepoint line (by its tags or a record prefix) but matching no shape.
    Unrecognised,
    /// Not a safepoint line at all (GC output, application output).
    Other,
}

const STOPPED: &[u8] = b"Total time for which application threads were stopped: ";
const TIMEOUT_PREFIX: &[u8] = b"# SafepointSynchronize::begin: ";

/// The detail line that says a safepoint began being reached.
const SYNC_INITIATED: &[u8] = b"Safepoint synchronization initiated";
/// Lines on the safepoint tags that carry no timings but are HotSpot's own, known output.
const DETAIL_PREFIXES: [&[u8]; 10] = [
    SYNC_INITIATED,
    b"... found polling page",
    b"Setting thread local yield flag",
    b"Thread: ",
    b"updating inline caches",
    b"safepoint cleanup tasks",
    b"lazy partial thread root processing",
    b"Safepoint synchronization begin",
    b"Polling page always armed",
    b"JavaThread state:",
];

/// Substring search for short needles in a short line: memchr on the first byte, then compare.
/// (`memmem::find` builds a searcher per call, which costs more than the search on one line.)
#[inline]
fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    let (&first, rest) = n.split_first()?;
    let mut i = 0;
    while let Some(p) = memchr::memchr(first, &h[i..]) {
        let at = i + p;
        if h[at + 1..].starts_with(rest) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| b != b' ' && b != b'\t' && b != b'\r').unwrap_or(s.len());
    let end =
        s.iter().rposition(|&b| b != b' ' && b != b'\t' && b != b'\r').map_or(start, |e| e + 1);
    &s[start..end]
}

/// Classifies one line (without its newline).
#[inline]
pub fn classify(line: &[u8]) -> Outcome<'_> {
    classify_in(line, &mut Jdk8Pauses::default())
}

/// [`classify`], for one of a run of lines that share `pauses` (which only saves time).
#[inline]
pub(crate) fn classify_in<'a>(line: &'a [u8], pauses: &mut Jdk8Pauses) -> Outcome<'a> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if let Some(p) = pauses.read(line) {
        return Outcome::Known(p.into());
    }
    classify_stripped(line)
}

impl From<Jdk8Pause> for Classified<'static> {
    fn from(p: Jdk8Pause) -> Self {
        Classified {
            stamps: Stamps { uptime_ns: Some(p.uptime_ns), wall: Some(p.wall), mono_ns: None },
            format: Format::Jdk8StoppedTime,
            event: Event::Stopped { total_ns: p.total_ns, ttsp_ns: Some(p.ttsp_ns) },
        }
    }
}

impl Jdk8Pause {
    /// What a `Classified` says when it is exactly one made from a `Jdk8Pause`.
    pub(crate) fn of(c: &Classified<'_>) -> Option<Jdk8Pause> {
        match (c.format, c.event, c.stamps) {
            (
                Format::Jdk8StoppedTime,
                Event::Stopped { total_ns, ttsp_ns: Some(ttsp_ns) },
                Stamps { uptime_ns: Some(uptime_ns), wall: Some(wall), mono_ns: None },
            ) => Some(Jdk8Pause { uptime_ns, wall, total_ns, ttsp_ns }),
            _ => None,
        }
    }
}

/// [`classify`] without the fast path for JDK 8's pause line (what that path is tested against).
#[cfg(test)]
pub(crate) fn classify_general(line: &[u8]) -> Outcome<'_> {
    classify_stripped(line.strip_suffix(b"\r").unwrap_or(line))
}

/// The general reading of a line whose `\r` is already stripped (no fast path).
fn classify_stripped(line: &[u8]) -> Outcome<'_> {
    match decorators::split(line) {
        Some(d) => classify_message(d.stamps, d.message, Some(&d)),
        None => {
            let (stamps, rest) = jdk8_prefix(line);
            classify_message(stamps, rest, None)
        }
    }
}

fn classify_message<'a>(
    mut stamps: Stamps,
    msg: &'a [u8],
    ul: Option<&decorators::Decorated<'a>>,
) -> Outcome<'a> {
    let decorated = ul.is_some();
    let known = |stamps, format, event| Outcome::Known(Classified { stamps, format, event });

    if let Some(rest) = msg.strip_prefix(b"Safepoint \"") {
        return match parse_safepoint(rest) {
            Some((op, times, format)) => known(stamps, format, Event::Safepoint { op, times }),
            None => Outcome::Unrecognised,
        };
    }
    if let Some(at) = find(msg, &STOPPED[..40]) {
        if at > 0 && !decorated {
            // JDK 8 can print the pause after other GC output on the same line.
            let before = jdk8_suffix_stamps(&msg[..at]);
            if !before.is_empty() {
                stamps = before;
            }
        }
        return match parse_stopped(&msg[at..]) {
            Some((total_ns, ttsp_ns)) => {
                let f = if decorated { Format::UlStoppedTime } else { Format::Jdk8StoppedTime };
                known(stamps, f, Event::Stopped { total_ns, ttsp_ns })
            }
            None => Outcome::Unrecognised,
        };
    }
    if let Some(rest) = msg.strip_prefix(b"Application time: ") {
        return match rest.strip_suffix(b" seconds").and_then(parse_seconds_ns) {
            Some(ns) => {
                let f =
                    if decorated { Format::UlApplicationTime } else { Format::Jdk8ApplicationTime };
                known(stamps, f, Event::ApplicationTime { ns })
            }
            None => Outcome::Unrecognised,
        };
    }
    if let Some(op) = msg.strip_prefix(b"Entering safepoint region: ") {
        return known(stamps, Format::UlSafepointRegion, Event::Entering { op: trim(op) });
    }
    if msg.starts_with(b"Leaving safepoint region") {
        return known(stamps, Format::UlSafepointRegion, Event::Leaving);
    }
    let timeout_format = if decorated { Format::TimeoutUl } else { Format::TimeoutTty };
    if let Some(rest) = msg.strip_prefix(TIMEOUT_PREFIX) {
        let ev = if rest.starts_with(b"Timeout detected") {
            Event::TimeoutBegin
        } else if rest.starts_with(b"Timed out while") {
            Event::TimeoutReason
        } else if rest.starts_with(b"Threads which did not reach") {
            Event::TimeoutList
        } else if rest.starts_with(b"(End of list)") {
            Event::TimeoutEnd
        } else {
            Event::Detail
        };
        return known(stamps, timeout_format, ev);
    }
    // Only the shapes below need the tags; the common ones above are told by their text.
    let safepoint_tag = ul.is_some_and(|d| d.has_safepoint_tag());
    if let Some(rest) = msg.strip_prefix(b"# \"") {
        return match parse_thread_line(rest) {
            Some(t) => known(stamps, timeout_format, Event::TimeoutThread(t)),
            None => Outcome::Unrecognised,
        };
    }
    if safepoint_tag && let Some(state) = trim(msg).strip_prefix(b"java.lang.Thread.State: ") {
        return known(stamps, Format::TimeoutUl, Event::TimeoutThreadState(state));
    }
    // A compiler thread in the timeout's list is followed by its task (JavaThread::print_on):
    // "   Compiling:  588   4   jdk.internal.misc.Unsafe::putLongOpaque (9 bytes)", or
    // "   No compile task". Seen on JDK 17 in the lab's perf-writeback runs, 12 lines a run.
    if safepoint_tag && {
        let t = trim(msg);
        t.starts_with(b"Compiling: ") || t == b"No compile task"
    } {
        return known(stamps, Format::TimeoutUl, Event::Detail);
    }
    if find(msg, b"page_trap_count").is_some() {
        return known(stamps, Format::StatsHeader, Event::StatsHeader);
    }
    if let Some((row, format)) = parse_stats_row(msg) {
        let mut row = row;
        if !decorated && row.start_uptime_ns.is_none() {
            // The JDK 8 prefix parser already took the `%.3f:` column as the line's uptime.
            row.start_uptime_ns = stamps.uptime_ns.take();
        }
        return known(stamps, format, Event::StatsRow(row));
    }
    let t = trim(msg);
    if t.starts_with(b"Maximum sync time")
        || t.starts_with(b"Maximum vm operation time")
        || t.starts_with(b"Maximum cleanup time")
        || t.starts_with(b"Polling page always armed")
        || find(t, b"VM operations coalesced during safepoint").is_some()
        || (safepoint_tag && ul.is_some_and(|d| d.has_tag(b"stats")) && is_op_count(t))
    {
        return known(stamps, Format::StatsSummary, Event::StatsSummary);
    }
    if safepoint_tag {
        if t.starts_with(SYNC_INITIATED) {
            return known(stamps, Format::SafepointDetail, Event::SyncInitiated);
        }
        if t.is_empty()
            || DETAIL_PREFIXES.iter().any(|p| t.starts_with(p))
            || ul.is_some_and(|d| d.has_tag(b"cleanup"))
        {
            return known(stamps, Format::SafepointDetail, Event::Detail);
        }
        return Outcome::Unrecognised;
    }
    Outcome::Other
}

/// The stamps at the start of any line, safepoint line or not (for the log's time span).
pub fn line_stamps(line: &[u8]) -> Stamps {
    match decorators::split(line) {
        Some(d) => d.stamps,
        None => jdk8_prefix(line).0,
    }
}

/// `NAME   12`: a per-operation count in the exit summary.
fn is_op_count(t: &[u8]) -> bool {
    let Some(sp) = t.iter().rposition(|&b| b == b' ') else { return false };
    let name = trim(&t[..sp]);
    !name.is_empty() && !name.contains(&b' ') && parse_u64(&t[sp + 1..]).is_some()
}

/// Takes JDK 8's `2016-03-01T10:00:00.123+0000: 12.345: ` stamps off the front of a line.
fn jdk8_prefix(line: &[u8]) -> (Stamps, &[u8]) {
    let mut stamps = Stamps::default();
    let mut s = line;
    loop {
        let t = s.iter().position(|&b| b != b' ').unwrap_or(s.len());
        let Some(colon) = find(&s[t..], b": ") else { break };
        let token = &s[t..t + colon];
        if let Some(w) = (token.len() >= 19).then(|| parse_iso_time(token)).flatten() {
            stamps.wall.get_or_insert(w);
        } else if token.first().is_some_and(u8::is_ascii_digit) && has_fraction(token) {
            match parse_seconds_ns(token) {
                Some(ns) => {
                    stamps.uptime_ns.get_or_insert(ns);
                }
                None => break,
            }
        } else {
            break;
        }
        s = &s[t + colon + 2..];
    }
    (stamps, s)
}

/// Reads `… 2016-03-01T10:00:00.123+0000: 12.345: ` stamps backwards from the end of `s`.
fn jdk8_suffix_stamps(s: &[u8]) -> Stamps {
    let mut stamps = Stamps::default();
    let mut s = trim(s);
    while let Some(body) = s.strip_suffix(b":") {
        let start = body.iter().rposition(|&b| b == b' ' || b == b']').map_or(0, |p| p + 1);
        let token = &body[start..];
        if let Some(w) = (token.len() >= 19).then(|| parse_iso_time(token)).flatten() {
            stamps.wall = Some(w);
        } else if let Some(ns) = parse_seconds_ns(token).filter(|_| has_fraction(token)) {
            stamps.uptime_ns = Some(ns);
        } else {
            break;
        }
        s = trim(&body[..start]);
    }
    stamps
}

fn ns_value(v: &[u8]) -> Option<u64> {
    parse_u64(v.strip_suffix(b" ns")?)
}

/// Reads `KEY: <digits> ns` at the front of `s`, returning the value and what follows.
// Always inlined: with the key a literal, its comparison is a few loads, not a memcmp call.
#[inline(always)]
fn ns_field<'a>(s: &'a [u8], key: &[u8]) -> Option<(u64, &'a [u8])> {
    let s = s.strip_prefix(key)?;
    // The same limits as `parse_u64` (at most 20 digits, no overflow), and something must
    // follow them.
    let (v, n) = crate::stamps::leading_digits(s)?;
    if n == 0 || n > 20 || n == s.len() {
        return None;
    }
    Some((v, s[n..].strip_prefix(b" ns")?))
}

/// The shapes as HotSpot prints them, fields in their fixed order; `None` sends the line to
/// the general parser, which accepts any order.
fn parse_safepoint_fast(rest: &[u8]) -> Option<(&[u8], SafepointTimes, Format)> {
    let close = memchr::memchr(b'"', rest)?;
    let op = &rest[..close];
    let s = rest[close..].strip_prefix(b"\", ")?;
    let mut t = SafepointTimes::default();
    let (v, s) = ns_field(s, b"Time since last: ")?;
    t.since_last_ns = Some(v);
    let (v, mut s) = ns_field(s.strip_prefix(b", ")?, b"Reaching safepoint: ")?;
    t.reaching_ns = v;
    s = s.strip_prefix(b", ")?;
    if let Some((v, r)) = ns_field(s, b"Cleanup: ") {
        t.cleanup_ns = Some(v);
        s = r.strip_prefix(b", ")?;
    }
    let (v, r) = ns_field(s, b"At safepoint: ")?;
    t.at_safepoint_ns = v;
    s = r.strip_prefix(b", ")?;
    if let Some((v, r)) = ns_field(s, b"Leaving safepoint: ") {
        t.leaving_ns = Some(v);
        s = r.strip_prefix(b", ")?;
    }
    let (v, mut r) = ns_field(s, b"Total: ")?;
    t.total_ns = v;
    if let Some(th) = r.strip_prefix(b", Threads: ") {
        let sp = memchr::memchr(b' ', th)?;
        t.threads_runnable = Some(parse_u64(&th[..sp])? as u32);
        let th = th[sp..].strip_prefix(b" runnable, ")?;
        let sp = memchr::memchr(b' ', th)?;
        t.threads_total = Some(parse_u64(&th[..sp])? as u32);
        r = th[sp..].strip_prefix(b" total")?;
    }
    let format = match (t.cleanup_ns.is_some(), t.leaving_ns.is_some(), t.threads_total.is_some()) {
        (_, _, true) | (false, true, false) => Format::Jdk22Safepoint,
        (true, true, false) => Format::Jdk21Safepoint,
        (true, false, false) => Format::Jdk17Safepoint,
        (false, false, false) => Format::Jdk13Safepoint,
    };
    (r.is_empty() || r == b"\r").then_some((op, t, format))
}

fn parse_safepoint(rest: &[u8]) -> Option<(&[u8], SafepointTimes, Format)> {
    if let Some(r) = parse_safepoint_fast(rest) {
        return Some(r);
    }
    let close = find(rest, b"\", ")?;
    let op = &rest[..close];
    let mut t = SafepointTimes::default();
    let (mut reaching, mut at, mut total) = (None, None, None);
    let mut fields =
        rest[close + 3..].split(|&b| b == b',').map(|f| f.strip_prefix(b" ").unwrap_or(f));
    while let Some(f) = fields.next() {
        let colon = find(f, b": ")?;
        let (key, val) = (&f[..colon], &f[colon + 2..]);
        match key {
            b"Time since last" => t.since_last_ns = Some(ns_value(val)?),
            b"Reaching safepoint" => reaching = Some(ns_value(val)?),
            b"Cleanup" => t.cleanup_ns = Some(ns_value(val)?),
            b"At safepoint" => at = Some(ns_value(val)?),
            b"Leaving safepoint" => t.leaving_ns = Some(ns_value(val)?),
            b"Total" => total = Some(ns_value(val)?),
            b"Threads" => {
                t.threads_runnable = Some(parse_u64(val.strip_suffix(b" runnable")?)? as u32);
                let tot = fields.next()?;
                t.threads_total = Some(parse_u64(tot.strip_suffix(b" total")?)? as u32);
            }
            _ => return None,
        }
    }
    t.reaching_ns = reaching?;
    t.at_safepoint_ns = at?;
    t.total_ns = total?;
    let format = match (t.cleanup_ns.is_some(), t.leaving_ns.is_some(), t.threads_total.is_some()) {
        (_, _, true) => Format::Jdk22Safepoint,
        (true, true, false) => Format::Jdk21Safepoint,
        (true, false, false) => Format::Jdk17Safepoint,
        (false, true, false) => Format::Jdk22Safepoint,
        (false, false, false) => Format::Jdk13Safepoint,
    };
    Some((op, t, format))
}

fn parse_stopped(s: &[u8]) -> Option<(u64, Option<u64>)> {
    let rest = s.strip_prefix(STOPPED)?;
    let end = find(rest, b" seconds")?;
    let total = parse_seconds_ns(rest[..end].trim_ascii())?;
    let after = &rest[end + 8..];
    let ttsp = match find(after, b"Stopping threads took: ") {
        Some(p) => {
            let v = &after[p + 23..];
            let e = find(v, b" seconds")?;
            Some(parse_seconds_ns(v[..e].trim_ascii())?)
        }
        None => None,
    };
    Some((total, ttsp))
}

fn parse_ints(s: &[u8], out: &mut [u64; 8]) -> Option<usize> {
    let mut n = 0;
    for tok in s.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        if n == out.len() {
            return None;
        }
        out[n] = parse_u64(tok)?;
        n += 1;
    }
    Some(n)
}

/// JDK 8 prints its five millisecond columns as `%6ld` with no separator, so a value of 100 s
/// or more runs into its neighbour; split such a group by its fixed width.
fn parse_fixed6(s: &[u8], out: &mut [u64; 8]) -> Option<usize> {
    let body = s.trim_ascii_end();
    if body.len() != 30 {
        return None;
    }
    for (i, chunk) in body.chunks(6).enumerate() {
        out[i] = parse_u64(chunk.trim_ascii())?;
    }
    Some(5)
}

fn parse_stats_row(msg: &[u8]) -> Option<(StatsRow<'_>, Format)> {
    let mut s = msg.trim_ascii_start();
    let mut start_uptime_ns = None;
    if s.first().is_some_and(u8::is_ascii_digit) {
        let colon = find(s, b": ")?;
        start_uptime_ns = Some(parse_seconds_ns(&s[..colon])?);
        s = &s[colon + 2..];
    }
    let open1 = memchr::memchr(b'[', s)?;
    let op = trim(&s[..open1]);
    if op.is_empty() {
        return None;
    }
    let close1 = open1 + memchr::memchr(b']', &s[open1..])?;
    let mut g1 = [0u64; 8];
    let n1 = parse_ints(&s[open1 + 1..close1], &mut g1)?;
    let after1 = &s[close1 + 1..];
    let adjacent = after1.first() == Some(&b'[');
    let after1 = after1.trim_ascii_start();
    let inner2 = after1.strip_prefix(b"[")?;
    let close2 = memchr::memchr(b']', inner2)?;
    let mut g2 = [0u64; 8];
    let n2 = match parse_ints(&inner2[..close2], &mut g2) {
        Some(n) if n1 != 3 || n == 5 => n,
        _ if n1 == 3 => parse_fixed6(&inner2[..close2], &mut g2)?,
        _ => return None,
    };
    let mut tail = [0u64; 8];
    let nt = parse_ints(&inner2[close2 + 1..], &mut tail)?;
    let page_traps = match nt {
        1 => Some(tail[0] as u32),
        2 => Some(tail[1] as u32), // `page_armed page_trap_count`
        _ => return None,
    };
    let ms = 1_000_000;
    let row = StatsRow {
        start_uptime_ns,
        op,
        threads_total: g1[0] as u32,
        initially_running: g1[1] as u32,
        page_traps,
        ..Default::default()
    };
    let (row, format) = match (n1, n2) {
        (3, 5) => (
            StatsRow {
                wait_to_block: Some(g1[2] as u32),
                spin_ns: Some(g2[0].saturating_mul(ms)),
                block_ns: Some(g2[1].saturating_mul(ms)),
                sync_ns: g2[2].saturating_mul(ms),
                cleanup_ns: Some(g2[3].saturating_mul(ms)),
                vmop_ns: g2[4].saturating_mul(ms),
                total_ns: g2[2].saturating_add(g2[3]).saturating_add(g2[4]).saturating_mul(ms),
                ..row
            },
            if adjacent { Format::Jdk11Stats } else { Format::Jdk8Stats },
        ),
        (2, 4) => (
            StatsRow {
                sync_ns: g2[0],
                cleanup_ns: Some(g2[1]),
                vmop_ns: g2[2],
                total_ns: g2[3],
                ..row
            },
            Format::Jdk13Stats,
        ),
        (2, 3) => (
            StatsRow { sync_ns: g2[0], vmop_ns: g2[1], total_ns: g2[2], ..row },
            Format::Jdk25Stats,
        ),
        _ => return None,
    };
    Some((row, format))
}

fn parse_thread_line(rest: &[u8]) -> Option<ThreadLine<'_>> {
    // Nothing after the name is quoted, so the last quote closes it even if the name has quotes.
    let q = rest.iter().rposition(|&b| b == b'"')?;
    let name = &rest[..q];
    let mut t = ThreadLine { name, ..Default::default() };
    let tail = &rest[q + 1..];
    let toks = tail.split(|&b| b == b' ').filter(|x| !x.is_empty()).peekable();
    for tok in toks {
        if let Some(id) = tok.strip_prefix(b"#") {
            t.java_id = parse_u64(id);
        } else if let Some(id) = tok.strip_prefix(b"[").and_then(|x| x.strip_suffix(b"]")) {
            if t.os_tid.is_none() && !id.starts_with(b"0x") {
                t.os_tid = parse_u64(id);
            }
        } else if tok == b"daemon" {
            t.daemon = true;
        } else if let Some(nid) = tok.strip_prefix(b"nid=") {
            let v = match nid.strip_prefix(b"0x") {
                Some(hex) => {
                    std::str::from_utf8(hex).ok().and_then(|h| u64::from_str_radix(h, 16).ok())
                }
                None => parse_u64(nid),
            };
            if v.is_some() {
                t.os_tid = v;
            }
            // The state runs from here to the `[0x…]` stack address.
            let after = &tail[find(tail, tok)? + tok.len()..];
            let end = find(after, b"[0x").unwrap_or(after.len());
            let state = trim(&after[..end]);
            t.state = (!state.is_empty()).then_some(state);
            break;
        }
    }
    Some(t)
}

#[cfg(test)]
mod jdk8_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn known(line: &str) -> Classified<'_> {
        match classify(line.as_bytes()) {
            Outcome::Known(c) => c,
            o => panic!("{line:?} gave {o:?}"),
        }
    }

    #[test]
    fn jdk17_safepoint_line() {
        let c = known(
            "[1.379s][131758746765ns][info   ][safepoint        ] Safepoint \"Cleanup\", Time since last: 1000203690 ns, Reaching safepoint: 364760625 ns, Cleanup: 112898 ns, At safepoint: 31637 ns, Total: 364905160 ns",
        );
        assert_eq!(c.format, Format::Jdk17Safepoint);
        assert_eq!(c.stamps.mono_ns, Some(131_758_746_765));
        let Event::Safepoint { op, times } = c.event else { panic!() };
        assert_eq!(op, b"Cleanup");
        assert_eq!(times.reaching_ns, 364_760_625);
        assert_eq!(times.cleanup_ns, Some(112_898));
        assert_eq!(times.total_ns, 364_905_160);
    }

    #[test]
    fn jdk25_safepoint_line() {
        let c = known(
            "[1.118s][info ][safepoint      ] Safepoint \"ParallelGCCollect\", Time since last: 1024975978 ns, Reaching safepoint: 69894759 ns, At safepoint: 7309436 ns, Leaving safepoint: 19139 ns, Total: 77223334 ns, Threads: 1 runnable, 11 total",
        );
        assert_eq!(c.format, Format::Jdk22Safepoint);
        let Event::Safepoint { times, .. } = c.event else { panic!() };
        assert_eq!((times.threads_runnable, times.threads_total), (Some(1), Some(11)));
        assert_eq!(times.leaving_ns, Some(19_139));
    }

    #[test]
    fn truncated_safepoint_line_is_unrecognised() {
        assert_eq!(
            classify(b"[1.118s][info][safepoint] Safepoint \"X\", Time since last: 1 ns, Reaching safepoint: 6"),
            Outcome::Unrecognised
        );
    }

    /// One `\r` is taken off a line, not two, with or without the fast path.
    #[test]
    fn one_carriage_return_is_stripped() {
        for l in [
            "[0.5s][info][safepoint] Application time: 0.5000000 seconds\r\r",
            "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds\r\r",
        ] {
            assert_eq!(classify(l.as_bytes()), classify_general(l.as_bytes()), "{l:?}");
        }
        let l = b"[0.5s][info][safepoint] Application time: 0.5000000 seconds\r\r";
        assert_eq!(classify(l), Outcome::Unrecognised);
    }

    #[test]
    fn jdk8_stopped_with_stamps() {
        let c = known(
            "2016-03-01T10:00:00.123+0000: 12.345: Total time for which application threads were stopped: 0.0001794 seconds, Stopping threads took: 0.0000587 seconds",
        );
        assert_eq!(c.format, Format::Jdk8StoppedTime);
        assert_eq!(c.stamps.uptime_ns, Some(12_345_000_000));
        assert!(c.stamps.wall.is_some());
        assert_eq!(c.event, Event::Stopped { total_ns: 179_400, ttsp_ns: Some(58_700) });
    }

    #[test]
    fn jdk8_stopped_after_gc_output_on_the_same_line() {
        let c = known(
            "[Times: user=0.01 sys=0.00, real=0.00 secs] 12.345: Total time for which application threads were stopped: 2.5880809 seconds",
        );
        assert_eq!(c.stamps.uptime_ns, Some(12_345_000_000));
        assert_eq!(c.event, Event::Stopped { total_ns: 2_588_080_900, ttsp_ns: None });
    }

    #[test]
    fn jdk8_stats_row_and_page_armed_variant() {
        let c = known(
            "4.144: EnableBiasedLocking          [      10          1              1    ]      [  2678     0  2678     0     0    ]  0   ",
        );
        assert_eq!(c.format, Format::Jdk8Stats);
        let Event::StatsRow(r) = c.event else { panic!() };
        assert_eq!(r.op, b"EnableBiasedLocking");
        assert_eq!(r.start_uptime_ns, Some(4_144_000_000));
        assert_eq!(r.sync_ns, 2_678_000_000);
        assert_eq!(r.total_ns, 2_678_000_000);
        let c = known(
            "1.016: no vm operation                  [      11          2              2    ]      [ 29399     0 29399     0     0    ]  1     0   ",
        );
        let Event::StatsRow(r) = c.event else { panic!() };
        assert_eq!(r.op, b"no vm operation");
        assert_eq!(r.page_traps, Some(0));
    }

    #[test]
    fn jdk8_stats_row_with_columns_run_together() {
        let c = known(
            "4.144: EnableBiasedLocking          [      10          1              1    ]      [123456     0123456     0     7    ]  0   ",
        );
        let Event::StatsRow(r) = c.event else { panic!() };
        assert_eq!(r.sync_ns, 123_456_000_000);
        assert_eq!(r.vmop_ns, 7_000_000);
    }

    #[test]
    fn jdk13_and_jdk25_stats_rows() {
        let c = known(
            "[0.896s][120517285389ns][info ][safepoint,stats  ] ParallelGCSystemGC           [             12               1 ][         17372369      72027  275817464  293261860 ]               1",
        );
        assert_eq!(c.format, Format::Jdk13Stats);
        let c = known(
            "[1.118s][141477179041ns][info ][safepoint,stats] ParallelGCCollect            [             11               1 ][         69894759    7328575   77223334 ]               1",
        );
        assert_eq!(c.format, Format::Jdk25Stats);
        let Event::StatsRow(r) = c.event else { panic!() };
        assert_eq!((r.sync_ns, r.vmop_ns, r.total_ns), (69_894_759, 7_328_575, 77_223_334));
        // An operation name wider than its column pushes the rest of the row along.
        let c = known(
            "[2.1s][info][safepoint,stats] CleanClassLoaderDataMetaspaces [             13               0 ][           95712      52143     40100    187955 ]               0",
        );
        let Event::StatsRow(r) = c.event else { panic!() };
        assert_eq!((r.op, r.total_ns), (&b"CleanClassLoaderDataMetaspaces"[..], 187_955));
    }

    #[test]
    fn timeout_block_lines() {
        let c = known(
            "[2.598s][132977343405ns][warning][safepoint        ] # \"spinner\" #12 daemon prio=5 os_prio=0 cpu=2528.70ms elapsed=2.55s tid=0x00007fcabc0e99c0 nid=0xa01 runnable  [0x0000000000000000]",
        );
        assert_eq!(c.format, Format::TimeoutUl);
        let Event::TimeoutThread(t) = c.event else { panic!() };
        assert_eq!(t.name, b"spinner");
        assert_eq!(t.java_id, Some(12));
        assert_eq!(t.os_tid, Some(0xa01));
        assert_eq!(t.state, Some(&b"runnable"[..]));
        assert!(t.daemon);
        let c = known(
            "[6.671s][warning][safepoint      ] # \"spin \"x\" #3\" #17 [2579] daemon prio=5 os_prio=0 cpu=6603.24ms elapsed=6.63s tid=0x00007fecf009ba50 nid=2579 runnable  [0x0000000000000000]",
        );
        let Event::TimeoutThread(t) = c.event else { panic!() };
        assert_eq!(t.name, b"spin \"x\" #3");
        assert_eq!(t.os_tid, Some(2579));
        let c = known(
            "[4.665s][11032450920166ns][warning][safepoint        ]    Compiling:  588       4       jdk.internal.misc.Unsafe::putLongOpaque (9 bytes)",
        );
        assert_eq!((c.format, c.event), (Format::TimeoutUl, Event::Detail));
        let c = known("[4.665s][warning][safepoint]    No compile task");
        assert_eq!((c.format, c.event), (Format::TimeoutUl, Event::Detail));
        let c =
            known("# SafepointSynchronize::begin: Timed out while waiting for threads to stop.");
        assert_eq!((c.format, c.event), (Format::TimeoutTty, Event::TimeoutReason));
    }

    #[test]
    fn gc_lines_are_other_and_unknown_safepoint_lines_unrecognised() {
        assert_eq!(classify(b"[0.5s][info][gc] GC(0) Pause Young (Normal) (G1 Evacuation Pause) 24M->2M(256M) 1.234ms"), Outcome::Other);
        assert_eq!(
            classify(b"[0.5s][info][safepoint] Something HotSpot has never printed"),
            Outcome::Unrecognised
        );
        assert_eq!(classify(b""), Outcome::Other);
    }
}
