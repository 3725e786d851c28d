//! Turns the stream of line events into `Safepoint` records.
//!
//! Several lines can describe one safepoint: a statistics row and a `Safepoint "…"` line, a
//! JDK 8 statistics row and a `Total time…` line, `Entering safepoint region` and `Total
//! time…`, a SafepointTimeout block and the record that follows. The assembler merges them so
//! each safepoint is counted exactly once.
//!
//! Invariant: records come out in the order their closing lines appeared, and memory is bounded
//! by [`HOLD`] records whatever the input.

use crate::formats::Format;
use crate::line::{Classified, Event, SafepointTimes, StatsRow};
use crate::record::{Culprit, Safepoint, Source};
use crate::stamps::Stamps;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// How many records may wait for a JDK 8 statistics row to name them. JDK 8 prints its rows
/// in batches of `PrintSafepointStatisticsCount` (default 300) after the pauses themselves.
pub const HOLD: usize = 1024;

/// Pauses of one input, none named by a statistics row, after which no row is waited for: a
/// JDK 8 log with rows prints its first batch within `PrintSafepointStatisticsCount` pauses
/// (300 by default). Past this, the records waiting are let go unnamed (as they would have been
/// one by one) and the rest go out as they are read, not through the hold queue, whose traffic
/// was a tenth of the time on a JDK 8 log without rows. Every row that comes later in the input
/// is counted as unmatched and names nothing: its pause went out long before, and the pauses
/// after it no longer wait. Only a count above this, which is not HotSpot's habit, names fewer
/// pauses than the hold queue would have.
pub const NO_ROWS_AFTER: u64 = 2 * HOLD as u64;

/// Slack when matching a JDK 8 statistics row (begin time, `%.3f`) to a `Total time…` line
/// (end time minus duration): both are millisecond-rounded and taken a few calls apart.
const MATCH_SLACK_NS: u64 = 100_000_000;

pub(crate) const UNKNOWN_OP: &str = "unknown";

#[derive(Debug, Clone)]
struct OwnedRow {
    op: Arc<str>,
    start_uptime_ns: Option<u64>,
    threads_total: u32,
    initially_running: u32,
    sync_ns: u64,
    cleanup_ns: Option<u64>,
    vmop_ns: u64,
    total_ns: u64,
    page_traps: Option<u32>,
    stamps: Stamps,
    format: Format,
    source: Source,
    seq: u64,
}

#[derive(Debug)]
struct Held {
    rec: Safepoint,
    /// Waiting for a statistics row to name it.
    wants_name: bool,
}

/// One `Arc<str>` per operation name, so records share names and compare by pointer.
#[derive(Default)]
struct Interner(HashMap<Box<[u8]>, Arc<str>>, Option<Arc<str>>);

impl Interner {
    fn get(&mut self, op: &[u8]) -> Arc<str> {
        self.get_ref(op).clone()
    }

    /// The interned name, without a reference count update (they are atomic).
    fn get_ref(&mut self, op: &[u8]) -> &Arc<str> {
        // Most logs repeat one operation for long runs; skip the hash for it.
        if self.1.as_ref().is_none_or(|last| last.as_bytes() != op) {
            let a = match self.0.get(op) {
                Some(a) => a.clone(),
                None => {
                    let a: Arc<str> = Arc::from(String::from_utf8_lossy(op).as_ref());
                    // Operation names are a small closed set; a hostile log cannot grow this
                    // without bound.
                    if self.0.len() < 4096 {
                        self.0.insert(op.into(), a.clone());
                    }
                    a
                }
            };
            self.1 = Some(a);
        }
        self.1.as_ref().expect("set above")
    }
}

/// Counts the assembler keeps about how lines were combined.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MergeCounts {
    /// Statistics rows folded into a `Safepoint "…"` or `Total time…` record.
    pub rows_merged: u64,
    /// Statistics rows that stood alone as records (statistics were the only source).
    pub rows_alone: u64,
    /// JDK 8 statistics rows that found no pause line to belong to.
    pub rows_unmatched: u64,
}

pub struct Assembler {
    ops: Interner,
    /// The record last handed out by the fast path of [`Assembler::push`], overwritten by the next.
    last: Safepoint,
    pending_ul_row: Option<OwnedRow>,
    tty_rows: VecDeque<OwnedRow>,
    held: Ring,
    /// The interned `unknown` operation.
    unknown: Arc<str>,
    entering: Option<Arc<str>>,
    app_time: Option<u64>,
    timeout_open: Vec<Culprit>,
    /// Culprits from a finished block, with the sequence number after which they apply.
    timeout_done: Vec<(u64, Culprit)>,
    seen_stopped: bool,
    /// A JDK 8/11 statistics row was seen in this input.
    rows_seen: bool,
    /// Pauses of this input that no row named when they were read.
    unnamed: u64,
    seq: u64,
    pub counts: MergeCounts,
    /// When the last `Safepoint synchronization initiated` line was logged (CLOCK_MONOTONIC,
    /// from `timenanos`), while no `Safepoint "…"` record has followed it: a safepoint still
    /// being reached, or never reached, when the log ended.
    pub sync_open_ns: Option<u64>,
}

impl Default for Assembler {
    fn default() -> Self {
        let mut ops = Interner::default();
        // Interned like any name, so records of it share one pointer with the rest.
        let unknown = ops.get(UNKNOWN_OP.as_bytes());
        Assembler {
            ops,
            last: blank(unknown.clone()),
            pending_ul_row: None,
            tty_rows: VecDeque::new(),
            held: Ring::default(),
            unknown,
            entering: None,
            app_time: None,
            timeout_open: Vec::new(),
            timeout_done: Vec::new(),
            seen_stopped: false,
            rows_seen: false,
            unnamed: 0,
            seq: 0,
            sync_open_ns: None,
            counts: MergeCounts::default(),
        }
    }
}

impl Assembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one classified line. Finished records are passed to `out` in order.
    pub fn push(&mut self, c: &Classified<'_>, source: Source, out: &mut impl FnMut(&Safepoint)) {
        self.seq += 1;
        let seq = self.seq;
        match c.event {
            Event::Safepoint { op, times } => {
                self.sync_open_ns = None;
                if self.pending_ul_row.is_none()
                    && self.held.is_empty()
                    && self.timeout_done.is_empty()
                {
                    // Nothing to merge and nothing waiting ahead: the common case. The record
                    // is written over the last one in place and lent to `out`, so a run of one
                    // operation costs no reference count update (they are atomic, and showed
                    // in wall time) and no move of the record.
                    let name = self.ops.get_ref(op);
                    let rec = &mut self.last;
                    if !Arc::ptr_eq(&rec.op, name) {
                        rec.op = name.clone();
                    }
                    set_times(rec, &times, c, source);
                    out(rec);
                    return;
                }
                let mut rec = blank(self.ops.get(op));
                set_times(&mut rec, &times, c, source);
                if let Some(row) = self.pending_ul_row.take() {
                    if row.op == rec.op {
                        rec.threads_total = rec.threads_total.or(Some(row.threads_total));
                        rec.threads_running = rec.threads_running.or(Some(row.initially_running));
                        rec.page_traps = row.page_traps;
                        rec.cleanup_ns = rec.cleanup_ns.or(row.cleanup_ns);
                        self.counts.rows_merged += 1;
                    } else {
                        self.row_alone(row, out);
                    }
                }
                self.emit(rec, seq, false, out);
            }
            Event::StatsRow(r) => {
                let row = self.own_row(&r, c, source, seq);
                match c.format {
                    Format::Jdk13Stats | Format::Jdk25Stats => {
                        if let Some(prev) = self.pending_ul_row.replace(row) {
                            self.row_alone(prev, out);
                        }
                    }
                    _ => self.tty_row(row, out),
                }
            }
            Event::Stopped { total_ns, ttsp_ns } => {
                self.flush_ul_row(out);
                self.seen_stopped = true;
                let mut named = None;
                let mut row = None;
                if let Some(op) = self.entering.take() {
                    // JDK 11/12 also print a statistics row for the region; fold it in.
                    if self.tty_rows.front().is_some_and(|r| r.op == op) {
                        row = self.tty_rows.pop_front();
                    }
                    named = Some(op);
                } else if let Some(r) = self.tty_rows.pop_front() {
                    named = Some(r.op.clone());
                    row = Some(r);
                }
                if row.is_some() {
                    self.counts.rows_merged += 1;
                }
                let since_last_ns = self.app_time.take();
                if named.is_none() {
                    self.unnamed += 1;
                    if self.unnamed == NO_ROWS_AFTER && !self.rows_seen {
                        // No row is coming: let the waiting go.
                        self.release_all(out);
                    }
                }
                // Written in place, in the hold queue or over the last record: a record is a
                // few hundred bytes, and moving each in and out was a tenth of the time on JDK 8
                // logs, where every record waits for a statistics row that may come.
                let wants_name = named.is_none() && !self.no_rows();
                let (rec, unknown) = self.slot(wants_name);
                match named {
                    Some(op) => rec.op = op,
                    // Interned: a fresh Arc per record cost an allocation here and a hash in
                    // every consumer that groups by operation; and the slot most often holds
                    // it already, which saves the (atomic) reference count update.
                    None if !Arc::ptr_eq(&rec.op, unknown) => rec.op = unknown.clone(),
                    None => {}
                }
                rec.ttsp_ns = ttsp_ns;
                rec.cleanup_ns = None;
                rec.at_safepoint_ns = ttsp_ns.map(|t| total_ns.saturating_sub(t));
                rec.leaving_ns = None;
                rec.total_ns = total_ns;
                rec.since_last_ns = since_last_ns;
                rec.threads_total = None;
                rec.threads_running = None;
                rec.page_traps = None;
                rec.end = c.stamps;
                rec.format = c.format;
                rec.source = source;
                if let Some(row) = &row {
                    merge_row(rec, row);
                }
                self.emit_slot(seq, wants_name, out);
            }
            Event::ApplicationTime { ns } => self.app_time = Some(ns),
            Event::Entering { op } => self.entering = Some(self.ops.get(op)),
            Event::TimeoutBegin => self.timeout_open.clear(),
            Event::TimeoutThread(t) => {
                if self.timeout_open.len() < 10_000 {
                    self.timeout_open.push(Culprit {
                        name: String::from_utf8_lossy(t.name).into_owned(),
                        java_id: t.java_id,
                        os_tid: t.os_tid,
                        daemon: t.daemon,
                        state: t.state.map(|s| String::from_utf8_lossy(s).into_owned()),
                        java_state: None,
                        source,
                        stamps: c.stamps,
                    });
                }
            }
            Event::TimeoutThreadState(s) => {
                if let Some(last) = self.timeout_open.last_mut() {
                    last.java_state = Some(String::from_utf8_lossy(s).into_owned());
                }
            }
            Event::TimeoutEnd => {
                let open = std::mem::take(&mut self.timeout_open);
                self.timeout_done.extend(open.into_iter().map(|c| (seq, c)));
            }
            Event::Leaving
            | Event::StatsHeader
            | Event::StatsSummary
            | Event::TimeoutReason
            | Event::TimeoutList
            | Event::Detail => {}
            Event::SyncInitiated => self.sync_open_ns = c.stamps.mono_ns,
        }
    }

    /// Ends the stream: flushes everything held. Returns the culprits of SafepointTimeout blocks
    /// whose safepoint never completed in the log (the JVM died, or the log was cut).
    pub fn finish(&mut self, out: &mut impl FnMut(&Safepoint)) -> Vec<Culprit> {
        self.flush_ul_row(out);
        while let Some(row) = self.tty_rows.pop_front() {
            if self.seen_stopped {
                self.counts.rows_unmatched += 1;
            } else {
                self.row_alone(row, out);
            }
        }
        self.release_all(out);
        let mut orphans: Vec<Culprit> = self.timeout_done.drain(..).map(|(_, c)| c).collect();
        orphans.append(&mut self.timeout_open);
        orphans
    }

    /// Releases every held record (unnamed if its statistics row has not come), so an input's
    /// records are all out before the next input begins, and before its last stamp widens the
    /// summary's span: a record coming after that stamp would look like uptime going back.
    /// Statistics rows that stand alone (no pause line seen to merge them into) go out too.
    pub fn release_held(&mut self, out: &mut impl FnMut(&Safepoint)) {
        self.rows_seen = false;
        self.unnamed = 0;
        self.flush_ul_row(out);
        if !self.seen_stopped {
            while let Some(row) = self.tty_rows.pop_front() {
                self.row_alone(row, out);
            }
        }
        self.release_all(out);
    }

    /// Lets out every held record, named or not.
    fn release_all(&mut self, out: &mut impl FnMut(&Safepoint)) {
        while let Some(h) = self.held.front() {
            out(&h.rec);
            self.held.pop_front();
        }
    }

    fn own_row(
        &mut self,
        r: &StatsRow<'_>,
        c: &Classified<'_>,
        source: Source,
        seq: u64,
    ) -> OwnedRow {
        OwnedRow {
            op: self.ops.get(r.op),
            start_uptime_ns: r.start_uptime_ns,
            threads_total: r.threads_total,
            initially_running: r.initially_running,
            sync_ns: r.sync_ns,
            cleanup_ns: r.cleanup_ns,
            vmop_ns: r.vmop_ns,
            total_ns: r.total_ns,
            page_traps: r.page_traps,
            stamps: c.stamps,
            format: c.format,
            source,
            seq,
        }
    }

    fn flush_ul_row(&mut self, out: &mut impl FnMut(&Safepoint)) {
        if let Some(row) = self.pending_ul_row.take() {
            self.row_alone(row, out);
        }
    }

    /// Whether this input is taken to have no statistics rows (see [`NO_ROWS_AFTER`]).
    fn no_rows(&self) -> bool {
        !self.rows_seen && self.unnamed >= NO_ROWS_AFTER
    }

    /// A JDK 8/11 statistics row: name a waiting `Total time…` record, or wait for one.
    fn tty_row(&mut self, row: OwnedRow, out: &mut impl FnMut(&Safepoint)) {
        if self.no_rows() {
            // Too late: its pause went out unnamed, and no later one waits to be named.
            self.counts.rows_unmatched += 1;
            return;
        }
        self.rows_seen = true;
        let waiting = (0..self.held.len()).position(|i| self.held.get(i).wants_name);
        if let Some(first) = waiting {
            let target = match row.start_uptime_ns {
                Some(row_start) => {
                    let mut found = None;
                    for i in first..self.held.len() {
                        let h = self.held.get(i);
                        if !h.wants_name {
                            continue;
                        }
                        match h.rec.start().uptime_ns {
                            Some(s) if s.saturating_add(MATCH_SLACK_NS) < row_start => {
                                // Its row was never printed; stop waiting for one.
                                self.held.get_mut(i).wants_name = false;
                            }
                            Some(s)
                                if s > row_start
                                    .saturating_add(MATCH_SLACK_NS + row.total_ns / 100) =>
                            {
                                break;
                            }
                            _ => {
                                found = Some(i);
                                break;
                            }
                        }
                    }
                    found
                }
                None => Some(first),
            };
            if let Some(i) = target {
                merge_row(&mut self.held.get_mut(i).rec, &row);
                self.held.get_mut(i).wants_name = false;
                self.counts.rows_merged += 1;
                self.drain(out);
                return;
            }
            self.drain(out);
        }
        if self.seen_stopped && waiting.is_some() {
            self.counts.rows_unmatched += 1;
            return;
        }
        self.tty_rows.push_back(row);
        if self.tty_rows.len() > HOLD {
            let old = self.tty_rows.pop_front().expect("non-empty");
            self.row_alone(old, out);
        }
    }

    fn row_alone(&mut self, row: OwnedRow, out: &mut impl FnMut(&Safepoint)) {
        self.counts.rows_alone += 1;
        // JDK 8/11 rows carry their begin time; JDK 13+ rows are printed at the end.
        let end = match row.start_uptime_ns {
            Some(start) => {
                Stamps { uptime_ns: Some(start.saturating_add(row.total_ns)), ..row.stamps }
            }
            None => row.stamps,
        };
        let rec = Safepoint {
            op: row.op.clone(),
            ttsp_ns: Some(row.sync_ns),
            cleanup_ns: row.cleanup_ns,
            at_safepoint_ns: Some(row.vmop_ns),
            leaving_ns: None,
            total_ns: row.total_ns,
            since_last_ns: None,
            threads_total: Some(row.threads_total),
            threads_running: Some(row.initially_running),
            page_traps: row.page_traps,
            end,
            format: row.format,
            source: row.source,
            culprits: Vec::new(),
        };
        self.emit(rec, row.seq, false, out);
    }

    /// Where the next record is written: over the last one when it can go out at once (nothing
    /// waits ahead of it, and it waits for nothing), else at the back of the hold queue; and the
    /// interned `unknown` name, for the caller to give it. The caller sets every field but
    /// `culprits`, then calls [`Assembler::emit_slot`].
    fn slot(&mut self, wants_name: bool) -> (&mut Safepoint, &Arc<str>) {
        let unknown = &self.unknown;
        let rec = if self.held.is_empty() && !wants_name {
            &mut self.last
        } else {
            self.held.push(wants_name, unknown)
        };
        (rec, unknown)
    }

    /// Gives the record just written to [`Assembler::slot`] its culprits, and lets out what can
    /// go.
    fn emit_slot(&mut self, seq: u64, wants_name: bool, out: &mut impl FnMut(&Safepoint)) {
        let direct = self.held.is_empty() && !wants_name;
        let rec = if direct { &mut self.last } else { &mut self.held.back_mut().rec };
        if !self.timeout_done.is_empty() {
            // A timeout block belongs to the safepoint being reached when it was printed, which
            // is the first record closed after it.
            let (mine, later): (Vec<_>, Vec<_>) =
                self.timeout_done.drain(..).partition(|(after, _)| seq > *after);
            rec.culprits = mine.into_iter().map(|(_, c)| c).collect();
            self.timeout_done = later;
        } else if !rec.culprits.is_empty() {
            rec.culprits.clear();
        }
        if direct {
            out(&self.last);
        } else {
            self.drain(out);
        }
    }

    fn emit(
        &mut self,
        rec: Safepoint,
        seq: u64,
        wants_name: bool,
        out: &mut impl FnMut(&Safepoint),
    ) {
        *self.slot(wants_name).0 = rec;
        self.emit_slot(seq, wants_name, out);
    }

    fn drain(&mut self, out: &mut impl FnMut(&Safepoint)) {
        while let Some(front) = self.held.front() {
            if front.wants_name && self.held.len() <= HOLD {
                break;
            }
            out(&front.rec);
            self.held.pop_front();
        }
    }
}

/// The records waiting for a statistics row, in a ring whose slots are written over in place
/// (see [`Assembler::slot`]); it grows by doubling, to the power of two above `HOLD` at most,
/// and keeps its slots.
#[derive(Default)]
struct Ring {
    slots: Vec<Held>,
    head: usize,
    len: usize,
}

impl Ring {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn len(&self) -> usize {
        self.len
    }

    fn at(&self, i: usize) -> usize {
        (self.head + i) & (self.slots.len() - 1)
    }

    fn get(&self, i: usize) -> &Held {
        &self.slots[self.at(i)]
    }

    fn get_mut(&mut self, i: usize) -> &mut Held {
        let at = self.at(i);
        &mut self.slots[at]
    }

    fn front(&self) -> Option<&Held> {
        (self.len > 0).then(|| self.get(0))
    }

    fn back_mut(&mut self) -> &mut Held {
        self.get_mut(self.len - 1)
    }

    fn pop_front(&mut self) {
        if self.len > 0 {
            self.head = self.at(1);
            self.len -= 1;
        }
    }

    /// A slot at the back, holding whatever it held before.
    fn push(&mut self, wants_name: bool, unknown: &Arc<str>) -> &mut Safepoint {
        if self.len == self.slots.len() {
            // Unrolled so the ring starts at slot 0, then doubled (a power of two, for `at`).
            self.slots.rotate_left(self.head);
            self.head = 0;
            let n = (self.slots.len() * 2).max(16);
            self.slots.resize_with(n, || Held { rec: blank(unknown.clone()), wants_name: false });
        }
        self.len += 1;
        let h = self.back_mut();
        h.wants_name = wants_name;
        &mut h.rec
    }
}

/// A record of operation `op` with nothing else known yet.
fn blank(op: Arc<str>) -> Safepoint {
    Safepoint {
        op,
        ttsp_ns: None,
        cleanup_ns: None,
        at_safepoint_ns: None,
        leaving_ns: None,
        total_ns: 0,
        since_last_ns: None,
        threads_total: None,
        threads_running: None,
        page_traps: None,
        end: Stamps::default(),
        format: Format::Jdk17Safepoint,
        source: Source::default(),
        culprits: Vec::new(),
    }
}

/// Everything but the name of a record read from one `Safepoint "…"` line.
fn set_times(rec: &mut Safepoint, times: &SafepointTimes, c: &Classified<'_>, source: Source) {
    rec.ttsp_ns = Some(times.reaching_ns);
    rec.cleanup_ns = times.cleanup_ns;
    rec.at_safepoint_ns = Some(times.at_safepoint_ns);
    rec.leaving_ns = times.leaving_ns;
    rec.total_ns = times.total_ns;
    rec.since_last_ns = times.since_last_ns;
    rec.threads_total = times.threads_total;
    rec.threads_running = times.threads_runnable;
    rec.page_traps = None;
    rec.end = c.stamps;
    rec.format = c.format;
    rec.source = source;
    rec.culprits.clear();
}

fn merge_row(rec: &mut Safepoint, row: &OwnedRow) {
    rec.op = row.op.clone();
    rec.threads_total = Some(row.threads_total);
    rec.threads_running = Some(row.initially_running);
    rec.page_traps = row.page_traps;
    rec.cleanup_ns = rec.cleanup_ns.or(row.cleanup_ns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::{Outcome, classify};

    fn run(lines: &[&str]) -> (Vec<Safepoint>, Vec<Culprit>, MergeCounts) {
        let mut a = Assembler::new();
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if let Outcome::Known(c) = classify(l.as_bytes()) {
                a.push(&c, Source { file: 0, line: i as u64 + 1 }, &mut |s| out.push(s.clone()));
            }
        }
        let orphans = a.finish(&mut |s| out.push(s.clone()));
        (out, orphans, a.counts)
    }

    fn jdk8_pause(i: u64) -> String {
        format!(
            "2024-01-01T00:00:00.000+0000: {}.{:03}: Total time for which application threads were stopped: 0.0010000 seconds, Stopping threads took: 0.0000100 seconds",
            i / 1000,
            i % 1000
        )
    }

    /// A JDK 8 log without statistics rows: past NO_ROWS_AFTER pauses nothing waits for one,
    /// every record still comes out once, in order; a row that turns up later is counted as
    /// unmatched, never folded into a later pause.
    #[test]
    fn a_jdk8_log_without_rows_stops_waiting_for_them() {
        let n = NO_ROWS_AFTER + 500;
        let mut lines: Vec<String> = (0..n).map(|i| jdk8_pause(i * 10)).collect();
        // A late first batch, longer than the hold queue, then more pauses.
        let rows = HOLD as u64 + 100;
        for i in 0..rows {
            lines.push(format!("{:8.3}: EnableBiasedLocking          [      10          1              1    ]      [     0     0     0     0     1    ]  0   ", i as f64 * 0.01));
        }
        for i in 0..3 {
            lines.push(jdk8_pause((n + i) * 10));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (recs, _, counts) = run(&refs);
        assert_eq!(recs.len() as u64, n + 3, "no record made of a row");
        let lines_seen: Vec<u64> = recs.iter().map(|r| r.source.line).collect();
        assert!(lines_seen.windows(2).all(|w| w[0] < w[1]), "in order");
        assert!(recs.iter().all(|r| &*r.op == UNKNOWN_OP));
        assert_eq!(counts.rows_unmatched, rows);
        assert_eq!(counts.rows_merged, 0);
        assert_eq!(counts.rows_alone, 0);
    }

    /// Rows that come within NO_ROWS_AFTER pauses still name them.
    #[test]
    fn a_late_first_batch_of_rows_still_names_its_pauses() {
        let n = NO_ROWS_AFTER - 10;
        let mut lines: Vec<String> = (0..n).map(|i| jdk8_pause(1000 + i * 10)).collect();
        // The row of the last pause (it began 1 ms before its line's stamp).
        let last_start = (1000 + (n - 1) * 10) as f64 / 1000.0 - 0.001;
        lines.push(format!("{last_start:8.3}: EnableBiasedLocking          [      10          1              1    ]      [     0     0     0     0     1    ]  0   "));
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (recs, _, counts) = run(&refs);
        assert_eq!(recs.len() as u64, n);
        assert_eq!(counts.rows_merged, 1, "{counts:?}");
        assert_eq!(recs.iter().filter(|r| &*r.op == "EnableBiasedLocking").count(), 1);
    }

    #[test]
    fn jdk11_region_and_row_fold_into_the_pause() {
        let (recs, _, counts) = run(&[
            "[0.100s][info][safepoint] Entering safepoint region: RevokeBias",
            "  0.100: RevokeBias                      [                17                 0             0 ][             0       0       0       0       3 ]               0 ",
            "[0.103s][info][safepoint] Leaving safepoint region",
            "[0.103s][info][safepoint] Total time for which application threads were stopped: 0.0030000 seconds, Stopping threads took: 0.0000100 seconds",
        ]);
        assert_eq!(recs.len(), 1);
        assert_eq!(&*recs[0].op, "RevokeBias");
        assert_eq!(recs[0].threads_total, Some(17));
        assert_eq!(counts.rows_merged, 1);
    }
}
