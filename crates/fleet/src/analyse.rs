//! `watch`'s analysis thread: every stall is diagnosed as it ends, with the same analysis as
//! `report` (`doctor::diagnose_stalls` of the same `Recording`), and goes out as a metric and
//! an event line; every few seconds the JVMs' own logs (safepoints, the agent's hiccups) are
//! read on from where they were left, into the TTSP, safepoint and hiccup histograms.
//!
//! Invariant: what the recorder wrote is diagnosed from what it kept in memory as it wrote
//! (`recording::Live`), never read back from its files; only what the JVM wrote (its safepoint
//! log, its agent's stacks and hiccups) is read. The watchers only tell this thread what ended,
//! so a slow diagnosis never delays the next stall's sampling.

use super::events::{EventJvm, Events, StallEvent};
use super::metrics::{JvmInfoLabels, JvmLabels, Metrics};
use recording::Notices;
use recording::{Barrier, Recording, files};
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// What the watchers tell the analysis.
pub enum Note {
    /// A recording of a JVM began; what its recorder writes is also kept in `live`.
    Opened { dir: PathBuf, jvm: EventJvm, labels: JvmLabels, live: recording::Live },
    /// A stall of the recording in `dir` ended; its lines are written once `barrier` is through.
    Ended { dir: PathBuf, stall: u32, barrier: Barrier },
    /// The recording in `dir` is finished (the JVM exited, watch detached, or it was rolled).
    Closed { dir: PathBuf },
    /// The JVM is no longer watched: its series leave the metrics (after what came before).
    Gone { info: JvmInfoLabels },
}

/// How often the JVMs' own logs are read on.
const TAIL_EVERY: Duration = Duration::from_secs(2);
/// Stalls that end within this of the first are diagnosed together: each diagnosis reads the
/// JVM's safepoint log, so a JVM that stalls several times a second is read once a second, not
/// once a stall. A stall's event and metrics come at most this long after it ended (Prometheus
/// scrapes every 15 s or more).
const GATHER: Duration = Duration::from_secs(1);

/// A log read on from where it was left: only whole lines.
#[derive(Default)]
struct Tail {
    offset: u64,
}

impl Tail {
    /// The whole lines appended to `path` since the last call (at most 16 MiB at a time).
    fn read(&mut self, path: &Path) -> Vec<u8> {
        let Ok(mut f) = std::fs::File::open(path) else { return Vec::new() };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        let _ = (&mut f).take(16 << 20).read_to_end(&mut buf);
        let whole = buf.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
        buf.truncate(whole);
        self.offset += whole as u64;
        buf
    }
}

/// One recording being read on.
struct Open {
    jvm: EventJvm,
    /// What the recorder wrote, kept in memory as it wrote it.
    live: recording::Live,
    labels: JvmLabels,
    safepoints: Tail,
    scanner: hotspot_log::Scanner,
    hiccups: Tail,
    hlog: recording::hlog::Reader,
    /// Stalls already diagnosed: the recording is read again for the stalls after them only.
    done: u32,
    /// What the diagnosis of the stalls so far carries to the next (who set off how many, the
    /// threads' names).
    carry: doctor::Carry,
    /// Where the next reading of each of its files begins.
    from: recording::ReadFrom,
}

impl Open {
    fn tail(&mut self, dir: &Path, m: &Metrics) {
        let text = self.safepoints.read(&dir.join(files::SAFEPOINT_LOG));
        if !text.is_empty() {
            let (ttsp, total) = (
                m.ttsp_seconds.get_or_create_owned(&self.labels),
                m.safepoint_seconds.get_or_create_owned(&self.labels),
            );
            let _ = self.scanner.scan(0, &text[..], &mut |s: &hotspot_log::Safepoint| {
                if let Some(t) = s.ttsp_ns {
                    ttsp.observe(t as f64 / 1e9);
                }
                total.observe(s.total_ns as f64 / 1e9);
            });
        }
        let text = self.hiccups.read(&dir.join(files::HICCUPS));
        if !text.is_empty() {
            let h = m.hiccup_seconds.get_or_create_owned(&self.labels);
            self.hlog.feed(&text, &mut |value_ns, count| {
                for _ in 0..count.min(100_000) {
                    h.observe(value_ns as f64 / 1e9);
                }
            });
        }
    }
}

/// Runs until every sender of `notes` is gone; then reads on every open recording one last time.
/// A JVM no longer watched keeps its series for `keep`, so that a scrape after it exited still
/// finds its stalls.
pub fn run(
    notes: Receiver<Note>,
    metrics: Metrics,
    mut events: Events,
    keep: Duration,
    notices: Notices,
) {
    let mut open: HashMap<PathBuf, Open> = HashMap::new();
    let mut last_tail = Instant::now();
    let mut forget: Vec<(Instant, JvmInfoLabels)> = Vec::new();
    let mut trim_due = false;
    loop {
        let now = Instant::now();
        forget.retain(|(at, info)| {
            let due = now >= *at;
            if due {
                metrics.forget(info);
            }
            !due
        });
        let first = match notes.recv_timeout(
            TAIL_EVERY.saturating_sub(last_tail.elapsed()).max(Duration::from_millis(10)),
        ) {
            Ok(n) => Some(n),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut batch: Vec<Note> = first.into_iter().collect();
        if matches!(batch.first(), Some(Note::Ended { .. })) {
            // Let stalls that end together be read together.
            let until = Instant::now() + GATHER;
            while let Ok(n) = notes.recv_timeout(until.saturating_duration_since(Instant::now())) {
                batch.push(n);
            }
        }
        batch.extend(notes.try_iter());
        let mut ended: HashMap<PathBuf, Vec<u32>> = HashMap::new();
        let mut closed = Vec::new();
        let mut gone = Vec::new();
        for n in batch {
            match n {
                Note::Opened { dir, jvm, labels, live } => {
                    // Closed earlier in this batch and opened again: a recording that failed at
                    // once was removed and its name taken again (an escalation refused). Nothing
                    // of the removed one is left to diagnose; the close is not this one's.
                    closed.retain(|d| *d != dir);
                    open.insert(
                        dir,
                        Open {
                            jvm,
                            live,
                            labels,
                            safepoints: Tail::default(),
                            scanner: hotspot_log::Scanner::new(),
                            hiccups: Tail::default(),
                            hlog: recording::hlog::Reader::default(),
                            done: 0,
                            carry: doctor::Carry::default(),
                            from: recording::ReadFrom::default(),
                        },
                    );
                }
                Note::Ended { dir, stall, barrier } => {
                    barrier.wait();
                    ended.entry(dir).or_default().push(stall);
                }
                Note::Closed { dir } => closed.push(dir),
                Note::Gone { info } => gone.push(info),
            }
        }
        let mut longest = 0;
        for (dir, stalls) in ended {
            if let Some(o) = open.get_mut(&dir) {
                longest = longest.max(diagnose(
                    &dir,
                    o,
                    stalls.iter().copied().max().unwrap_or(0),
                    &metrics,
                    &mut events,
                    &notices,
                ));
            }
        }
        // What a long stall's evidence took is given back once its lines are forgotten.
        trim_due |= longest >= LONG_STALL_NS;
        if last_tail.elapsed() >= TAIL_EVERY || !closed.is_empty() {
            last_tail = Instant::now();
            let now = procwatch::clock::mono_ns();
            for (dir, o) in open.iter_mut() {
                o.tail(dir, &metrics);
                // A JVM that stalls no more holds nothing it will not read.
                o.live.forget(o.done, now);
            }
            if std::mem::take(&mut trim_due) {
                give_back_freed_memory();
            }
        }
        for dir in closed {
            if let Some(mut o) = open.remove(&dir) {
                // Stalls the JVM ended inside (it exited) are diagnosed with the recording's end.
                diagnose(&dir, &mut o, u32::MAX, &metrics, &mut events, &notices);
                // Its recording's lines go with it.
                trim_due = true;
            }
        }
        for info in gone {
            metrics.exited(&info);
            forget.push((Instant::now() + keep, info));
        }
    }
    for (dir, mut o) in open {
        o.tail(&dir, &metrics);
        diagnose(&dir, &mut o, u32::MAX, &metrics, &mut events, &notices);
    }
    events.flush();
}

/// A stall this long held its evidence (a sample of every thread that moved, every few ms) in
/// memory until it was diagnosed.
const LONG_STALL_NS: u64 = 1_000_000_000;

/// Returns what the allocator holds free to the system. glibc keeps freed memory in its arenas
/// for reuse: after each long stall `watch` settled higher and stayed there (35 → 82 MiB over
/// three 16 s stalls of one JVM; an hour's soak restarted into a 30 s stall ran 35 MiB above the
/// run before it).
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes a padding and only releases free memory of the allocator's own.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Diagnoses the recording in `dir` and reports its stalls after those already reported, up to
/// stall number `upto`; returns the longest of them (ns).
fn diagnose(
    dir: &Path,
    o: &mut Open,
    upto: u32,
    m: &Metrics,
    events: &mut Events,
    notices: &Notices,
) -> u64 {
    let jfr = Some(&logs::sandbox::FlightRecordings as &dyn recording::FlightRecordings);
    let rec = match Recording::from_live(dir, &o.live, jfr, o.done, &mut o.from) {
        Ok(r) => r,
        // Removed: it failed at once (an escalation refused), with nothing in it.
        Err(_) if !dir.exists() => return 0,
        Err(e) => {
            notices.warn(format!("{}: cannot diagnose it: {e}", dir.display()));
            return 0;
        }
    };
    let stalls = doctor::diagnose_stalls(&rec, o.done, upto, &mut o.carry);
    // The samples dropped in the stalls diagnosed now (the reading holds no earlier ones).
    let dropped: u64 = rec
        .events
        .iter()
        .filter_map(|e| match e {
            recording::Event::StallEnd { stall, dropped_samples, .. }
                if *stall > o.done && *stall <= upto =>
            {
                Some(*dropped_samples)
            }
            _ => None,
        })
        .sum();
    if dropped > 0 {
        m.dropped_samples.get_or_create(&o.labels).inc_by(dropped);
    }
    for s in &stalls {
        let mut e = StallEvent::of(&o.jvm, &rec, s);
        e.url = events.url_of(&rec.dir, s.stall);
        let (culprit, code) = e.culprit.as_ref().map_or((String::new(), String::new()), |c| {
            (c.name.clone(), c.code.clone().unwrap_or_default())
        });
        let who = e.instigator.as_ref().map(|i| (i.kind.id(), i.name.as_str()));
        let report = e.url.as_ref().and_then(|_| crate::pages::stall_path(&rec.dir, s.stall));
        let named = (culprit.as_str(), code.as_str());
        m.stall_named(&o.labels, e.cause.id(), s.duration_ns, named, who, report.as_deref());
        events.write(&e);
    }
    // A stall shorter than the threshold is no stall; one still open is left for later.
    if let Some(last) = stalls.iter().map(|s| s.stall).max() {
        o.done = o.done.max(last);
    }
    if upto != u32::MAX {
        o.done = o.done.max(upto);
    }
    stalls.iter().map(|s| s.duration_ns).max().unwrap_or(0)
}
