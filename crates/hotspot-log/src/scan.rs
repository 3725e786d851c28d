//! Streams one or more inputs through the line classifier and the assembler.
//!
//! Lines that cannot be safepoint lines are skipped without being parsed: a multi-pattern SIMD
//! search finds the next line holding any safepoint marker, and the lines before it are only
//! counted. That is what keeps a 1 GB GC log at memory-bandwidth speed.
//!
//! Invariant: memory is bounded by the read buffer (plus at most [`MAX_LINE`] for one
//! pathological line) and the assembler's bounded queue, whatever the input size.

use crate::assemble::{Assembler, MergeCounts};
use crate::fastpath::Jdk8Pauses;
use crate::formats::Format;
use crate::line::{Classified, Outcome, classify_in, line_stamps};
use crate::prefilter::Prefilter;
use crate::record::{Culprit, Safepoint, Source};
use crate::stamps::Stamps;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Read};

mod parallel;
pub use parallel::{MAX_THREADS, WINDOW};

const CHUNK: usize = 4 << 20;
/// Lines longer than this are counted and skipped rather than buffered whole.
pub const MAX_LINE: usize = 64 << 20;

/// Substrings that put a line in play: [`crate::prefilter::NEEDLES`]. Shapes without one
/// (JDK 8/11 statistics rows, `none`-decorated JDK 13+ rows, tty SafepointTimeout thread lines)
/// only ever follow a header or a timeout block that has one; after such a line every line is
/// examined (see [`Context`]).
/// How many lines after a statistics header or row every line is examined for rows (HotSpot
/// repeats the header every 30 rows; other output can come in between).
const TABLE_CONTEXT: u32 = 64;
/// How many lines after "Threads which did not reach the safepoint:" are examined for threads.
const TIMEOUT_CONTEXT: u32 = 10_000;

/// Whether the scanner is inside a statistics table or a timeout thread list, where lines
/// carry no needle and so must each be examined.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Context {
    table: u32,
    timeout: u32,
}

impl Context {
    fn every_line(&self) -> bool {
        self.table > 0 || self.timeout > 0
    }

    fn after(&mut self, outcome: &Outcome<'_>) {
        use crate::line::Event;
        self.table = self.table.saturating_sub(1);
        self.timeout = self.timeout.saturating_sub(1);
        if let Outcome::Known(c) = outcome {
            match c.event {
                Event::StatsHeader | Event::StatsRow(_) => self.table = TABLE_CONTEXT,
                Event::TimeoutList => self.timeout = TIMEOUT_CONTEXT,
                Event::TimeoutEnd => self.timeout = 0,
                _ => {}
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("binary data at byte {offset} (not a text log)")]
    Binary { offset: u64 },
}

/// A line kept to show the user (`--verbose`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LineExample {
    pub file: u32,
    pub line: u64,
    pub text: String,
}

/// What one input contained.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InputReport {
    pub bytes: u64,
    pub lines: u64,
    /// The first and last stamps found in the input (for the log's time span).
    pub first: Option<Stamps>,
    pub last: Option<Stamps>,
}

/// Line accounting across all inputs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScanReport {
    pub lines_total: u64,
    pub lines_recognised: u64,
    pub lines_unrecognised: u64,
    pub lines_other: u64,
    /// Lines recognised, by shape.
    pub by_format: BTreeMap<Format, u64>,
    pub unrecognised_examples: Vec<LineExample>,
    pub other_examples: Vec<LineExample>,
    /// The last line of an input was cut off mid-record (the JVM was still writing).
    pub truncated_last_lines: u64,
    /// Culprits of SafepointTimeout blocks whose safepoint never completed in the log.
    pub orphan_culprits: Vec<Culprit>,
    /// A safepoint whose reaching began (`Safepoint synchronization initiated`, on
    /// CLOCK_MONOTONIC from `timenanos`) and had no record when the log ended.
    pub open_sync_ns: Option<u64>,
    pub merges: MergeCounts,
    pub safepoints: u64,
}

/// Where the scanner delivers what it finds. Any `FnMut(&Safepoint)` closure is a sink.
pub trait Sink {
    fn safepoint(&mut self, s: &Safepoint);
    /// The stamps of an input's first stamped line, given before any of its safepoints.
    fn input_start(&mut self, _file: u32, _stamps: &Stamps) {}
    /// The stamps of an input's last stamped line, given after all of its safepoints.
    fn input_end(&mut self, _file: u32, _stamps: &Stamps) {}
}

impl<F: FnMut(&Safepoint)> Sink for F {
    fn safepoint(&mut self, s: &Safepoint) {
        self(s)
    }
}

/// Reads HotSpot logs and yields their safepoints.
pub struct Scanner {
    finder: Prefilter,
    asm: Assembler,
    rd: LineReader,
    safepoints: u64,
    buf: Vec<u8>,
    /// Threads that read a mapped input at once, and their windows' size (see [`WINDOW`]).
    threads: usize,
    window: usize,
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub fn new() -> Self {
        Scanner {
            finder: Prefilter::new(),
            asm: Assembler::new(),
            rd: LineReader::default(),
            safepoints: 0,
            buf: Vec::new(),
            threads: 1,
            window: WINDOW,
        }
    }

    /// Keep up to `n` unrecognised and `n` other lines to show the user.
    pub fn keep_examples(mut self, n: usize) -> Self {
        self.rd.examples = n;
        self
    }

    /// Read mapped inputs ([`Scanner::scan_slice`]) on up to `threads` threads at once, in
    /// windows of `window` bytes (a line longer than that widens its window). The results are
    /// the same as on one thread; only the time differs. [`Scanner::new`] reads on one.
    pub fn threads(mut self, threads: usize, window: usize) -> Self {
        self.threads = threads.max(1);
        self.window = window.max(1);
        self
    }

    /// [`Scanner::threads`] with as many threads as the machine runs at once, up to
    /// [`MAX_THREADS`], in windows of [`WINDOW`].
    pub fn threads_available(self) -> Self {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.threads(n.min(MAX_THREADS), WINDOW)
    }

    /// Reads one input to its end. Inputs that continue each other (a rotated set) are fed in
    /// time order through the same scanner, so a record split across files is still joined.
    pub fn scan<R: Read>(
        &mut self,
        file: u32,
        mut reader: R,
        out: &mut impl Sink,
    ) -> Result<InputReport, ScanError> {
        if self.buf.len() < CHUNK {
            self.buf = vec![0u8; CHUNK];
        }
        let mut buf = std::mem::take(&mut self.buf);
        let result = self.scan_with(file, &mut reader, &mut buf, out);
        buf.truncate(CHUNK);
        self.buf = buf;
        result
    }

    fn scan_with<R: Read>(
        &mut self,
        file: u32,
        reader: &mut R,
        buf: &mut Vec<u8>,
        out: &mut impl Sink,
    ) -> Result<InputReport, ScanError> {
        let mut rep = InputReport::default();
        let mut filled = 0usize;
        let mut line_no = 0u64;
        let mut first_chunk = true;
        let mut skipping_long = false;
        loop {
            let mut eof = false;
            while filled < buf.len() {
                match reader.read(&mut buf[filled..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => {
                        filled += n;
                        rep.bytes += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if first_chunk && filled > 0 {
                rep.first = input_start(file, &buf[..filled], out)?;
                first_chunk = false;
            }
            let end = if eof {
                filled
            } else {
                match memchr::memrchr(b'\n', &buf[..filled]) {
                    Some(i) => i + 1,
                    None if buf.len() < MAX_LINE => {
                        let n = buf.len() * 2;
                        buf.resize(n, 0);
                        continue;
                    }
                    None => {
                        // One line longer than MAX_LINE: count it once, drop its bytes.
                        if !skipping_long {
                            self.rd.long_line(&mut line_no);
                        }
                        skipping_long = true;
                        filled = 0;
                        continue;
                    }
                }
            };
            let mut start = 0;
            if skipping_long {
                // The rest of the overlong line, up to its newline.
                start = memchr::memchr(b'\n', &buf[..end]).map_or(end, |i| i + 1);
                skipping_long = false;
            }
            self.region(file, &buf[start..end], eof, &mut line_no, out);
            if let Some(s) = last_stamps(&buf[start..end]) {
                rep.last = Some(s);
            }
            buf.copy_within(end..filled, 0);
            filled -= end;
            if eof {
                break;
            }
        }
        self.input_end(file, &mut rep, line_no, out);
        Ok(rep)
    }

    /// Reads one input held whole in memory (a mapped file) without copying it: the same
    /// results as [`Scanner::scan`] over the same bytes, window for window. `done(n)` is told
    /// when the first `n` bytes will not be looked at again, so a mapping can let them go; on
    /// several threads ([`Scanner::threads`]), it may be told on any of them.
    pub fn scan_slice(
        &mut self,
        file: u32,
        data: &[u8],
        out: &mut impl Sink,
        done: &(dyn Fn(usize) + Sync),
    ) -> Result<InputReport, ScanError> {
        let mut rep = InputReport { bytes: data.len() as u64, ..InputReport::default() };
        let head = &data[..data.len().min(CHUNK)];
        if !head.is_empty() {
            rep.first = input_start(file, head, out)?;
        }
        rep.last = last_stamps_in(data);
        if self.threads > 1 && data.len() > self.window.saturating_mul(2) {
            let line_no = parallel::read(self, file, data, out, done);
            self.input_end(file, &mut rep, line_no, out);
            return Ok(rep);
        }
        let mut line_no = 0u64;
        let mut pos = 0usize;
        // As `scan`'s buffer: it grows for a long line and stays grown.
        let mut window = CHUNK;
        while pos < data.len() {
            let (end, eof) = match Span::at(data, pos, &mut window) {
                Span::Lines { end, eof } => (end, eof),
                Span::Long { end } => {
                    // One line longer than MAX_LINE: counted once, its bytes skipped (as `scan`).
                    self.rd.long_line(&mut line_no);
                    pos = end;
                    done(pos);
                    continue;
                }
            };
            self.region(file, &data[pos..end], eof, &mut line_no, out);
            done(end);
            pos = end;
        }
        self.input_end(file, &mut rep, line_no, out);
        Ok(rep)
    }

    /// The end of one input: its line count, the records it still held, its last stamps.
    fn input_end(&mut self, file: u32, rep: &mut InputReport, line_no: u64, out: &mut impl Sink) {
        rep.lines = line_no;
        self.rd.report.lines_total += line_no;
        let safepoints = &mut self.safepoints;
        self.asm.release_held(&mut |s| {
            *safepoints += 1;
            out.safepoint(s)
        });
        if let Some(l) = &rep.last {
            out.input_end(file, l);
        }
    }

    /// Handles a run of whole lines (the last one may lack its newline at end of input).
    fn region(&mut self, file: u32, hay: &[u8], eof: bool, line_no: &mut u64, out: &mut impl Sink) {
        let (asm, safepoints) = (&mut self.asm, &mut self.safepoints);
        self.rd.region(&self.finder, file, hay, eof, line_no, &mut |line, c| {
            assemble(asm, safepoints, c, Source { file, line }, out)
        });
    }

    /// One recognised line that a window read on another thread.
    fn push(&mut self, file: u32, line: u64, c: &Classified<'_>, out: &mut impl Sink) {
        assemble(&mut self.asm, &mut self.safepoints, c, Source { file, line }, out)
    }

    /// Ends the stream and returns the line accounting.
    pub fn finish(mut self, out: &mut impl Sink) -> ScanReport {
        let safepoints = &mut self.safepoints;
        let orphans = self.asm.finish(&mut |s| {
            *safepoints += 1;
            out.safepoint(s)
        });
        let mut report = self.rd.report;
        report.by_format = Format::ALL
            .iter()
            .zip(self.rd.formats)
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| (*f, n))
            .collect();
        report.safepoints = self.safepoints;
        report.orphan_culprits = orphans;
        report.open_sync_ns = self.asm.sync_open_ns;
        report.merges = self.asm.counts;
        report
    }
}

/// Feeds one recognised line to the assembler; the records it finishes go to `out`, counted.
fn assemble(
    asm: &mut Assembler,
    safepoints: &mut u64,
    c: &Classified<'_>,
    source: Source,
    out: &mut impl Sink,
) {
    asm.push(c, source, &mut |s| {
        *safepoints += 1;
        out.safepoint(s)
    });
}

/// Reads runs of whole lines: finds those that can hold a record, classifies them, and counts
/// the rest. What it recognises goes to a callback; its accounting is the line fields of
/// `report`. It holds no record, so the windows of one input can each have their own, read on
/// different threads, and be added up in order ([`LineReader::absorb`]).
#[derive(Debug, Default, Clone)]
struct LineReader {
    context: Context,
    examples: usize,
    /// The line fields of a [`ScanReport`], but for `by_format`, which is counted in `formats`.
    report: ScanReport,
    /// Lines recognised, by [`Format`] (its index in [`Format::ALL`]): an array, not the
    /// report's map, which cost a tree walk per line.
    formats: [u64; Format::ALL.len()],
    /// JDK 8's pause lines read so far: the last one's minute, read again by the next.
    jdk8: Jdk8Pauses,
}

impl LineReader {
    /// A reader that keeps up to `examples` lines of each kind to show.
    fn keeping(examples: usize) -> LineReader {
        LineReader { examples, ..LineReader::default() }
    }

    /// Counts one line longer than [`MAX_LINE`], whose bytes are skipped.
    fn long_line(&mut self, line_no: &mut u64) {
        *line_no += 1;
        self.report.lines_other += 1;
    }

    /// Adds the accounting of `w`, a window read after everything this reader has read whose
    /// line numbers start after line `base`; takes its context.
    fn absorb(&mut self, w: &LineReader, base: u64) {
        let (r, o) = (&mut self.report, &w.report);
        r.lines_recognised += o.lines_recognised;
        r.lines_unrecognised += o.lines_unrecognised;
        r.lines_other += o.lines_other;
        r.truncated_last_lines += o.truncated_last_lines;
        for (mine, theirs) in self.formats.iter_mut().zip(&w.formats) {
            *mine += theirs;
        }
        for (mine, theirs) in [
            (&mut r.unrecognised_examples, &o.unrecognised_examples),
            (&mut r.other_examples, &o.other_examples),
        ] {
            let room = self.examples.saturating_sub(mine.len());
            mine.extend(
                theirs.iter().take(room).map(|e| LineExample { line: e.line + base, ..e.clone() }),
            );
        }
        self.context = w.context;
    }

    /// Handles a run of whole lines (the last one may lack its newline at end of input).
    fn region<'a>(
        &mut self,
        finder: &Prefilter,
        file: u32,
        hay: &'a [u8],
        eof: bool,
        line_no: &mut u64,
        to: &mut impl FnMut(u64, &Classified<'a>),
    ) {
        let end = hay.len();
        let mut pos = 0usize;
        // The last line read was JDK 8's pause line in its common layout. In a JDK 8 log the
        // next line most often is too: it is tried first, before the search for a needle (one
        // of which it holds, so the search would stop in it).
        let mut jdk8_run = false;
        // A line that was no pause line was passed over since the last pause line.
        let mut passed_one = false;
        while pos < end {
            if jdk8_run && !self.context.every_line() {
                if let Some((c, len)) = self.jdk8.read_line(&hay[pos..end]) {
                    let le = pos + len;
                    *line_no += 1;
                    let known = Outcome::Known(c.into());
                    self.take(file, *line_no, &hay[pos..le], false, &known, to);
                    pos = (le + 1).min(end);
                    passed_one = false;
                    continue;
                }
                // Between two pause lines, a GC line: one that holds no needle is passed over
                // alone, and the run goes on, so the next pause line is read in place, not
                // searched for (needles hold no newline, so one in this line ends before its
                // end). One line only: a GC's details can run to dozens of lines, which one
                // search passes faster.
                if !passed_one
                    && let Some(i) = memchr::memchr(b'\n', &hay[pos..end])
                    && finder.find(hay, pos, pos + i).is_none()
                {
                    self.skip(file, &hay[pos..=pos + i], line_no);
                    pos += i + 1;
                    passed_one = true;
                    continue;
                }
            }
            let ls = if self.context.every_line() {
                pos
            } else {
                let Some(m) = finder.find(hay, pos, end) else { break };
                let ls = memchr::memrchr(b'\n', &hay[pos..m]).map_or(pos, |i| pos + i + 1);
                self.skip(file, &hay[pos..ls], line_no);
                ls
            };
            let (le, next) = match memchr::memchr(b'\n', &hay[ls..end]) {
                Some(i) => (ls + i, ls + i + 1),
                None => (end, end),
            };
            *line_no += 1;
            let partial = eof && le == end && hay.last() != Some(&b'\n');
            let text = &hay[ls..le];
            let outcome = classify_in(text, &mut self.jdk8);
            jdk8_run = matches!(outcome, Outcome::Known(c) if c.format == Format::Jdk8StoppedTime);
            passed_one = false;
            self.take(file, *line_no, text, partial, &outcome, to);
            pos = next;
        }
        if pos < end {
            let rest = &hay[pos..end];
            self.skip(file, rest, line_no);
            if rest.last() != Some(&b'\n') {
                // The final line without a newline.
                *line_no += 1;
                self.report.lines_other += 1;
                self.other_example(
                    file,
                    *line_no,
                    rest.rsplit(|&b| b == b'\n').next().unwrap_or(rest),
                );
            }
        }
    }

    /// Counts whole lines that hold no marker.
    fn skip(&mut self, file: u32, lines: &[u8], line_no: &mut u64) {
        let n = bytecount::count(lines, b'\n') as u64;
        if self.report.other_examples.len() < self.examples {
            let mut no = *line_no;
            for l in lines.split(|&b| b == b'\n').take(n as usize) {
                no += 1;
                if !self.other_example(file, no, l) {
                    break;
                }
            }
        }
        *line_no += n;
        self.report.lines_other += n;
    }

    fn other_example(&mut self, file: u32, line: u64, text: &[u8]) -> bool {
        if self.report.other_examples.len() >= self.examples {
            return false;
        }
        self.report.other_examples.push(example(file, line, text));
        true
    }

    /// One line, classified as `outcome` (lent, not moved: a move was a copy of its few
    /// hundred bytes, a twentieth of the time on a JDK 8 log).
    fn take<'a>(
        &mut self,
        file: u32,
        line: u64,
        text: &'a [u8],
        partial: bool,
        outcome: &Outcome<'a>,
        to: &mut impl FnMut(u64, &Classified<'a>),
    ) {
        self.context.after(outcome);
        match outcome {
            Outcome::Known(c) => {
                self.report.lines_recognised += 1;
                self.formats[c.format as usize] += 1;
                to(line, c);
            }
            Outcome::Unrecognised if partial => self.report.truncated_last_lines += 1,
            Outcome::Unrecognised => {
                self.report.lines_unrecognised += 1;
                if self.report.unrecognised_examples.len() < self.examples {
                    self.report.unrecognised_examples.push(example(file, line, text));
                }
            }
            Outcome::Other => {
                self.report.lines_other += 1;
                self.other_example(file, line, text);
            }
        }
    }
}

fn example(file: u32, line: u64, text: &[u8]) -> LineExample {
    let cut = &text[..text.len().min(300)];
    LineExample { file, line, text: String::from_utf8_lossy(cut).into_owned() }
}

/// A NUL in the first 64 KiB, or more than one byte in ten that is neither text nor UTF-8,
/// means this is not a log.
fn binary_offset(head: &[u8]) -> Option<usize> {
    let head = &head[..head.len().min(64 << 10)];
    if let Some(i) = memchr::memchr(0, head) {
        return Some(i);
    }
    let ctrl = head
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b | 0x0c))
        .count();
    let invalid = match std::str::from_utf8(head) {
        Ok(_) => 0,
        Err(e) if e.error_len().is_none() => 0, // cut mid-character at the edge of the chunk
        Err(_) => String::from_utf8_lossy(head).matches('\u{FFFD}').count(),
    };
    ((ctrl + invalid) * 10 > head.len()).then(|| {
        head.iter()
            .position(|&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b | 0x0c))
            .unwrap_or(0)
    })
}

/// The start of one input, from its first chunk: refused if binary, else its first stamps
/// (handed to the sink).
fn input_start(file: u32, head: &[u8], out: &mut impl Sink) -> Result<Option<Stamps>, ScanError> {
    if let Some(offset) = binary_offset(head) {
        return Err(ScanError::Binary { offset: offset as u64 });
    }
    let first = first_stamps(head);
    if let Some(f) = &first {
        out.input_start(file, f);
    }
    Ok(first)
}

fn first_stamps(chunk: &[u8]) -> Option<Stamps> {
    chunk.split(|&b| b == b'\n').take(64).map(line_stamps).find(|s| !s.is_empty())
}

/// A run of whole lines of a mapped input, from a given start, or one line longer than
/// [`MAX_LINE`], which is counted, not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Span {
    Lines { end: usize, eof: bool },
    Long { end: usize },
}

impl Span {
    /// The span that starts at `pos`: up to the last newline within `window` bytes, or within
    /// twice that if there is none (`window` grows and stays grown, as `scan`'s buffer does),
    /// and so on up to [`MAX_LINE`].
    fn at(data: &[u8], pos: usize, window: &mut usize) -> Span {
        loop {
            let stop = pos.saturating_add(*window).min(data.len());
            if stop == data.len() {
                return Span::Lines { end: stop, eof: true };
            }
            match memchr::memrchr(b'\n', &data[pos..stop]) {
                Some(i) => return Span::Lines { end: pos + i + 1, eof: false },
                None if *window < MAX_LINE => *window = window.saturating_mul(2).min(MAX_LINE),
                None => {
                    let end =
                        memchr::memchr(b'\n', &data[stop..]).map_or(data.len(), |i| stop + i + 1);
                    return Span::Long { end };
                }
            }
        }
    }

    fn end(&self) -> usize {
        match *self {
            Span::Lines { end, .. } | Span::Long { end } => end,
        }
    }
}

/// The last stamps of a mapped input as [`Scanner::scan_slice`] finds them on one thread: those
/// of the last of its windows that has a stamped line among its last 64. (A reading on several
/// threads, whose windows are cut elsewhere, takes them from here, so as to find the same.)
fn last_stamps_in(data: &[u8]) -> Option<Stamps> {
    let mut windows = Vec::new();
    let (mut pos, mut window) = (0usize, CHUNK);
    while pos < data.len() {
        let span = Span::at(data, pos, &mut window);
        if let Span::Lines { end, .. } = span {
            windows.push((pos, end));
        }
        pos = span.end();
    }
    windows.iter().rev().find_map(|&(start, end)| last_stamps(&data[start..end]))
}

fn last_stamps(chunk: &[u8]) -> Option<Stamps> {
    chunk
        .rsplit(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .take(64)
        .map(line_stamps)
        .find(|s| !s.is_empty())
}
