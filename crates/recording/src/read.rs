//! Reading a recording: every file of the directory into one [`Recording`], the input of the
//! diagnosis. A missing source is empty; a damaged line is an error naming the file and line,
//! except a cut-off last line (a killed recorder), which is left out and said.

use crate::Error;
use crate::files;
use crate::schema::*;
use crate::stamps::{stall_of_line, t_of_line};
use serde::de::DeserializeOwned;
use std::fs::File;
use std::path::{Path, PathBuf};

/// A recording holds plain files only: a FIFO or socket in its place would block the reader
/// forever, waiting for a writer, and a device is nothing stallscope wrote.
fn check_plain_files(dir: &Path) -> Result<(), Error> {
    for name in files::ALL {
        let p = dir.join(name);
        match std::fs::metadata(&p) {
            Ok(m) if !m.is_file() => return Err(Error::NotAFile { path: p }),
            _ => {}
        }
    }
    Ok(())
}

/// Reads a JSON Lines file, skipping a final partial line; a malformed line elsewhere is an
/// error naming the file and the line.
pub fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, Error> {
    read_lines_noting(path, &mut Vec::new())
}

/// [`read_lines`], adding to `damage` a line about a cut-off last line it left out.
pub fn read_lines_noting<T: DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
) -> Result<Vec<T>, Error> {
    read_lines_kept(path, damage, Keep::All, &mut Place::default())
}

/// How far before the last stall diagnosed a reading for the stalls after it keeps the lines
/// stamped in time: beyond the 5 s within which the doctor takes a thread's stack as near a
/// stall (doctor::code::NEAR_NS), and the counter looks since the stall before.
pub(crate) const LOOK_BACK_NS: u64 = 10_000_000_000;

/// Which lines of a file to parse.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keep {
    All,
    /// All but those of stalls 1 to N (those of no stall, and of stall 0, the baseline between
    /// stalls, are kept, but a later reading may begin past the latter).
    AfterStall(u32),
    /// Those stamped T or later, and the one stamped last before T (what held at T: a counter
    /// look is written only when it changed).
    From(u64),
}

/// Where in a file a reading begins: a byte offset at the start of a line, and that line's
/// number less one.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Place {
    pub byte: u64,
    pub line: usize,
}

/// Where [`Recording::read_after`] may begin reading each file of a recording the next time,
/// for a later stall: past the lines it will never keep again.
#[derive(Debug, Default, Clone)]
pub struct ReadFrom {
    places: std::collections::HashMap<&'static str, Place>,
}

impl ReadFrom {
    fn at(&mut self, file: &'static str) -> &mut Place {
        self.places.entry(file).or_default()
    }

    /// Where the next reading of `file` (its name in the recording) begins.
    pub fn of(&self, file: &str) -> Place {
        self.places.get(file).copied().unwrap_or_default()
    }
}

/// [`read_lines_noting`] from `at` on, leaving out unparsed the lines `keep` does not keep; `at`
/// is moved past the lines no later reading with a larger `keep` will keep (every line of a
/// stall up to N; every line before the last one stamped before T). A file shorter than `at`
/// is read from its start.
fn read_lines_kept<T: DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
    keep: Keep,
    at: &mut Place,
) -> Result<Vec<T>, Error> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            use std::io::{Read, Seek, SeekFrom};
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            if at.byte > len {
                *at = Place::default();
            }
            f.seek(SeekFrom::Start(at.byte))
                .and_then(|_| f.read_to_end(&mut bytes))
                .map_err(|e| Error::io(path, "cannot read it", e))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, "cannot read it", e)),
    }
    let text = String::from_utf8(bytes).map_err(|e| Error::Damaged {
        path: path.to_path_buf(),
        line: at.line + line_of(e.as_bytes(), e.utf8_error().valid_up_to()),
        reason: "not UTF-8 text".into(),
    })?;
    let complete = text.ends_with('\n');
    // Each line with the byte offset it begins at.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut pos = 0;
    for l in text.split_inclusive('\n') {
        lines.push((pos, l.strip_suffix('\n').unwrap_or(l)));
        pos += l.len();
    }
    let whole = if complete { lines.len() } else { lines.len().saturating_sub(1) };
    // Kept: every line of a stall after N (and of none); by time, every line stamped T or later
    // wherever it is (a stack sampled late is written after later ones), the line stamped last
    // before T, and any line without a stamp. A cut last line is read (and said) either way.
    let before = match keep {
        Keep::From(t0) => lines[..whole]
            .iter()
            .enumerate()
            .filter_map(|(i, (_, l))| t_of_line(l).filter(|t| *t < t0).map(|t| (t, i)))
            .max()
            .map(|(_, i)| i),
        _ => None,
    };
    let kept = |i: usize, l: &str| match keep {
        Keep::All => true,
        Keep::AfterStall(after) => stall_of_line(l).is_none_or(|n| n == 0 || n > after),
        Keep::From(t0) => Some(i) == before || t_of_line(l).is_none_or(|t| t >= t0),
    };
    // Where the next reading may begin: past the whole lines before the first kept one (no
    // later reading, for a later stall or time, keeps them; stall 0's lines, the baseline
    // between stalls, are wanted by no stall's diagnosis).
    let next = match keep {
        Keep::All => 0,
        _ => lines[..whole]
            .iter()
            .enumerate()
            .position(|(i, (_, l))| match keep {
                Keep::AfterStall(after) => stall_of_line(l).is_none_or(|n| n > after),
                _ => kept(i, l),
            })
            .unwrap_or(whole),
    };
    let mut out = Vec::new();
    for (i, (_, l)) in lines.iter().enumerate() {
        if l.trim().is_empty() || (i < whole && !kept(i, l)) {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(v) => out.push(v),
            // The recorder was killed mid-write (or is writing it now): the last line may be cut.
            Err(_) if i + 1 == lines.len() && !complete => {
                damage.push(format!("{}:{}: the last line is cut off (the recorder was killed mid-write?); left out", path.display(), at.line + i + 1));
                break;
            }
            Err(e) => {
                return Err(Error::Damaged {
                    path: path.to_path_buf(),
                    line: at.line + i + 1,
                    reason: e.to_string(),
                });
            }
        }
    }
    if next > 0 {
        let byte = lines.get(next).map_or(text.len(), |(b, _)| *b);
        *at = Place { byte: at.byte + byte as u64, line: at.line + next };
    }
    Ok(out)
}

/// The 1-based line holding byte `at`.
fn line_of(bytes: &[u8], at: usize) -> usize {
    bytes[..at.min(bytes.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

pub fn read_meta(dir: &Path) -> Result<Meta, Error> {
    let p = dir.join(files::META);
    let text = match std::fs::read(&p) {
        Ok(b) => String::from_utf8(b)
            .map_err(|_| Error::BadHeader { path: p.clone(), reason: "not UTF-8 text".into() })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::NotARecording { dir: dir.to_path_buf(), source: e });
        }
        Err(e) => return Err(Error::io(&p, "cannot read it", e)),
    };
    let meta: Meta = serde_json::from_str(&text)
        .map_err(|e| Error::BadHeader { path: p.clone(), reason: e.to_string() })?;
    match meta.format {
        Some(found) if found > crate::FORMAT => {
            Err(Error::TooNew { path: p, found, made_by: meta.stallscope_version })
        }
        _ => Ok(meta),
    }
}

/// A whole recording, read into memory: the input of the diagnosis (`doctor::diagnose`).
pub struct Recording {
    /// Where it was read from (the report names it).
    pub dir: PathBuf,
    pub meta: Meta,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    pub system: Vec<SystemSample>,
    pub context: Vec<StallContext>,
    pub trace: Vec<StallTrace>,
    /// Each stall's waits off a CPU, from the BPF recorder (empty without it).
    pub kwaits: Vec<StallKernelWaits>,
    /// The JVM's stack samples near stalls (empty when none were recorded), and what the
    /// recorder said of them (why they are missing).
    pub frames: Vec<FrameSample>,
    pub frames_notes: Vec<String>,
    /// Whether the JVM's stacks were recorded and read (`frames.jsonl` is there and says of no
    /// failure): then a culprit without a stack near its stall had none taken.
    pub frames_recorded: bool,
    /// Whether the recording holds the JVM's safepoint log at all.
    pub has_safepoint_log: bool,
    pub safepoints: Vec<hotspot_log::Safepoint>,
    /// SafepointTimeout culprits of a safepoint whose record never completed.
    pub unfinished_culprits: Vec<hotspot_log::Culprit>,
    /// A safepoint the log shows being reached, with no record, when it ended.
    pub open_sync_ns: Option<u64>,
    pub hiccups: Option<crate::hlog::IntervalLog>,
    pub control: Option<crate::hlog::IntervalLog>,
    /// What was found damaged and left out while reading, each with its file and line.
    pub damage: Vec<String>,
    /// What reading found worth saying that is no damage (where the safepoints came from).
    pub notes: Vec<String>,
    /// The JVM's perf counters, each look that changed (empty when they were not read).
    pub counters: Vec<crate::disk::CounterLook>,
    /// Who set the stalls off, as the recorder saw it (`who.jsonl`).
    pub who: Vec<crate::who::Who>,
    /// Whether the recording has `who.jsonl` at all (recordings made before 2026-11-27 do not:
    /// who set their stalls off was not looked for).
    pub has_who: bool,
    /// Read while it was being made, as it stood at this time (CLOCK_MONOTONIC ns; `attach`'s
    /// "what is happening now"): it ends there, and a stall under way then is cut there, not
    /// ended by an exit. None: it ends where its own end records say.
    pub now: Option<u64>,
}

/// Flight recordings (`.jfr`) a recording may hold: the recorder's own `frames.jfr` (its
/// settings turn the four safepoint events on) or one the user put there. Their reader is the
/// caller's (stallscope's runs sandboxed in a child process); without one they are not read.
pub trait FlightRecordings {
    /// Whether `path` is a flight recording.
    fn is_flight_recording(&self, path: &Path) -> bool;
    /// Its safepoints, each with its end on the wall clock (ns since the epoch), and what could
    /// not be read of it, in words.
    fn safepoints(&self, path: &Path) -> (Vec<(hotspot_log::Safepoint, i64)>, Vec<String>);
}

impl Recording {
    /// A recording of nothing but its meta: what a report made from elsewhere (a flight
    /// recording alone) is rendered beside, with no samples, events or meters of its own.
    pub fn of_report(dir: &Path, meta: &Meta) -> Recording {
        Recording {
            dir: dir.to_path_buf(),
            meta: meta.clone(),
            events: vec![],
            samples: vec![],
            system: vec![],
            context: vec![],
            trace: vec![],
            kwaits: vec![],
            frames: vec![],
            frames_notes: vec![],
            frames_recorded: false,
            has_safepoint_log: false,
            safepoints: vec![],
            unfinished_culprits: vec![],
            open_sync_ns: None,
            hiccups: None,
            control: None,
            damage: vec![],
            notes: vec![],
            counters: vec![],
            who: vec![],
            has_who: false,
            now: None,
        }
    }

    /// When its recorder last wrote to it, by what it wrote (its events, the stalls' samples, the
    /// machine's counters): where a recording whose recorder was killed ends.
    pub fn last_written_ns(&self) -> Option<u64> {
        let events = self.events.iter().map(|e| e.t());
        let samples = self.samples.iter().map(|s| s.t);
        events.chain(samples).chain(self.system.iter().map(|s| s.t)).max()
    }

    /// The recording as it stood at `t`, while it was being made: what was recorded after it
    /// left out, and [`Recording::now`] set.
    pub fn as_at(mut self, t: u64) -> Recording {
        self.events.retain(|e| e.t() <= t);
        self.samples.retain(|x| x.t <= t);
        self.now = Some(t);
        self
    }

    /// Reads every file of the recording in `dir`. A missing source is empty; a damaged one is
    /// an error naming the file and line.
    ///
    /// The safepoints come from the JVM's log; when it has none (it is missing, empty, or the
    /// JVM could not log), from a flight recording in `dir` that `jfr` can read; else from the
    /// JVM's perf counters. They never mix, and the report says where they came from. JFR stamps
    /// them on the wall clock, placed on the recording's monotonic clock through its meta (to
    /// the millisecond, as the stacks are).
    pub fn read(
        dir: impl AsRef<Path>,
        jfr: Option<&dyn FlightRecordings>,
    ) -> Result<Recording, Error> {
        Recording::read_after(dir, jfr, 0, &mut ReadFrom::default())
    }

    /// [`Recording::read`] for the stalls after stall `after` only, as `watch` reads a live
    /// recording at each stall's end. When `after` > 0: the lines of stalls 1 to `after` in the
    /// per-stall files (samples, system, context, trace, kernel waits, who) are left out
    /// unparsed, and in the events those of the stalls before it (stall `after` is kept: the
    /// next may not begin before it ended); of the files stamped in time (perf counters, stacks,
    /// thread dumps), the lines stamped from 10 s before stall `after` began on, and the last
    /// one before that (a counter look is written only when it changed); the interval logs
    /// (hiccups, control), which feed the recording's summary and no stall's diagnosis, are not
    /// decoded. The JVM's safepoint log and the events are read whole. `from` says where each
    /// other file's reading begins, past what an earlier reading for fewer stalls found none of
    /// these stalls' in, and is moved on: reading the whole recording again at every stall made
    /// a stalling JVM's cost grow with its recording.
    pub fn read_after(
        dir: impl AsRef<Path>,
        jfr: Option<&dyn FlightRecordings>,
        after: u32,
        from: &mut ReadFrom,
    ) -> Result<Recording, Error> {
        let dir = dir.as_ref();
        check_plain_files(dir)?;
        let meta = read_meta(dir)?;
        if after > 0 {
            let mut r = Recording::read_lines_of(dir, meta, after, from)?;
            r.fill_when_no_log(jfr);
            return Ok(r);
        }
        // The two interval logs decode on their own threads (a day of 1 s intervals is 172,800
        // compressed histograms) while this one reads the rest.
        let (hiccups, control, rest) = std::thread::scope(|sc| {
            let h = sc.spawn(|| crate::hlog::read(&dir.join(files::HICCUPS)));
            let c = sc.spawn(|| crate::hlog::read(&dir.join(files::CONTROL)));
            let rest = Recording::read_lines_of(dir, meta, 0, &mut ReadFrom::default());
            (h.join().ok().flatten(), c.join().ok().flatten(), rest)
        });
        let mut r = rest?;
        r.hiccups = hiccups;
        r.control = control;
        r.fill_when_no_log(jfr);
        Ok(r)
    }

    /// The flight recordings directly in the recording, `frames.jfr` first, then by name.
    fn jfr_files(&self, jfr: &dyn FlightRecordings) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
                    && jfr.is_flight_recording(p)
            })
            .collect();
        v.sort_by_key(|p| {
            (p.file_name() != Some(std::ffi::OsStr::new(files::FRAMES_JFR)), p.clone())
        });
        v
    }

    /// The safepoints of the first flight recording that has any.
    fn fill_from_jfr(&mut self, jfr: &dyn FlightRecordings) {
        for path in self.jfr_files(jfr) {
            let (read, lost) = jfr.safepoints(&path);
            let name = path.display();
            for l in &lost {
                self.damage.push(format!("{name}: {l}"));
            }
            let mut got: Vec<hotspot_log::Safepoint> = read
                .into_iter()
                .filter_map(|(mut sp, end_epoch_ns)| {
                    sp.end.mono_ns = Some(self.meta.mono_of_epoch_ns(end_epoch_ns)?);
                    Some(sp)
                })
                .collect();
            if !got.is_empty() {
                self.notes.push(format!(
                    "{} safepoints read from {name}: the safepoint log {}",
                    got.len(),
                    if self.has_safepoint_log { "has no records" } else { "is missing" }
                ));
                got.sort_by_key(|s| s.end.mono_ns);
                self.safepoints = got;
                self.has_safepoint_log = true;
                return;
            }
        }
    }

    /// The safepoints the JVM's perf counters show, when the safepoint log gave none (it is
    /// off, missing or empty); the report says so.
    fn fill_from_counters(&mut self) {
        let Some(info) = self.counters_info() else { return };
        self.safepoints = crate::counters::safepoints(&self.counters, info);
        crate::counters::name_from_memory(&mut self.safepoints, &self.who);
    }

    /// What the recorder said of the JVM's perf counters, if it read them.
    pub fn counters_info(&self) -> Option<&crate::disk::CountersInfo> {
        self.events.iter().find_map(|e| match e {
            Event::Counters { info, .. } => Some(info),
            _ => None,
        })
    }

    /// Why the recording has no perf counters, if the recorder said.
    pub fn counters_missing(&self) -> Option<&str> {
        self.events.iter().find_map(|e| match e {
            Event::NoCounters { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
    }

    fn read_lines_of(
        dir: &Path,
        meta: Meta,
        after: u32,
        places: &mut ReadFrom,
    ) -> Result<Recording, Error> {
        let mut damage = Vec::new();
        let log = read_safepoint_log(dir, &mut damage)?;
        // Read for the stalls after `after` (`watch`, at each stall's end): the events of the
        // stalls before it left out (it is kept, for where the next one may begin), and of the
        // files stamped in time (counters, stacks), what was stamped from LOOK_BACK_NS before
        // it began on, and the last line before that.
        let after_stall = |n: u32| if after > 0 { Keep::AfterStall(n) } else { Keep::All };
        let events: Vec<Event> = read_lines_kept(
            &dir.join(files::EVENTS),
            &mut damage,
            after_stall(after - after.min(1)),
            &mut Place::default(),
        )?;
        let from = keep_from(&events, after, LOOK_BACK_NS);
        let (mut frames, mut frames_notes) = (Vec::new(), Vec::new());
        let frames_file = dir.join(files::FRAMES).exists();
        for l in read_lines_noting::<FramesLine>(&dir.join(files::FRAMES), &mut damage)? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        frames.extend(read_lines_kept::<FrameSample>(
            &dir.join(files::DUMPS),
            &mut damage,
            from,
            places.at(files::DUMPS),
        )?);
        let stacks_file = dir.join(files::STACKS).exists() || dir.join(files::OUTSIDE).exists();
        frames.extend(read_lines_kept::<FrameSample>(
            &dir.join(files::STACKS),
            &mut damage,
            from,
            places.at(files::STACKS),
        )?);
        for l in read_lines_kept::<FramesLine>(
            &dir.join(files::OUTSIDE),
            &mut damage,
            from,
            places.at(files::OUTSIDE),
        )? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            events,
            samples: read_lines_kept(
                &dir.join(files::SAMPLES),
                &mut damage,
                after_stall(after),
                places.at(files::SAMPLES),
            )?,
            system: read_lines_kept(
                &dir.join(files::SYSTEM),
                &mut damage,
                after_stall(after),
                places.at(files::SYSTEM),
            )?,
            context: read_lines_kept(
                &dir.join(files::CONTEXT),
                &mut damage,
                after_stall(after),
                places.at(files::CONTEXT),
            )?,
            trace: read_lines_kept(
                &dir.join(files::TRACE),
                &mut damage,
                after_stall(after),
                places.at(files::TRACE),
            )?,
            kwaits: read_lines_kept(
                &dir.join(files::KWAITS),
                &mut damage,
                after_stall(after),
                places.at(files::KWAITS),
            )?,
            counters: read_lines_kept(
                &dir.join(files::COUNTERS),
                &mut damage,
                from,
                places.at(files::COUNTERS),
            )?,
            who: read_lines_kept(
                &dir.join(files::WHO),
                &mut damage,
                after_stall(after),
                places.at(files::WHO),
            )?,
            has_who: dir.join(files::WHO).exists(),
            now: None,
            frames_recorded: (frames_file && frames_notes.is_empty()) || stacks_file,
            frames,
            frames_notes,
            damage,
            notes: Vec::new(),
            hiccups: None,
            control: None,
            meta,
            has_safepoint_log: log.present,
            safepoints: log.safepoints,
            unfinished_culprits: log.unfinished_culprits,
            open_sync_ns: log.open_sync_ns,
        })
    }

    /// Where the safepoint log has no records (it is off, missing or empty): the safepoints of
    /// a flight recording in the recording, else those the JVM's perf counters show.
    pub(crate) fn fill_when_no_log(&mut self, jfr: Option<&dyn FlightRecordings>) {
        if self.safepoints.is_empty()
            && let Some(jfr) = jfr
        {
            self.fill_from_jfr(jfr);
        }
        if self.safepoints.is_empty() {
            self.fill_from_counters();
        }
    }
}

/// The JVM's safepoint log of a recording, as read.
pub(crate) struct SafepointLog {
    /// Whether the recording holds one at all.
    pub present: bool,
    pub safepoints: Vec<hotspot_log::Safepoint>,
    pub unfinished_culprits: Vec<hotspot_log::Culprit>,
    pub open_sync_ns: Option<u64>,
}

/// Reads the recording's safepoint log whole; what it could not understand goes to `damage`.
pub(crate) fn read_safepoint_log(
    dir: &Path,
    damage: &mut Vec<String>,
) -> Result<SafepointLog, Error> {
    let mut safepoints = Vec::new();
    let mut unfinished_culprits = Vec::new();
    let mut open_sync_ns = None;
    let sp = dir.join(files::SAFEPOINT_LOG);
    let present = sp.exists();
    if present {
        let mut scanner = hotspot_log::Scanner::new();
        let f = File::open(&sp).map_err(|e| Error::io(&sp, "cannot read it", e))?;
        scanner
            .scan(0, f, &mut |s: &hotspot_log::Safepoint| safepoints.push(s.clone()))
            .map_err(|e| Error::SafepointLog { path: sp.clone(), reason: e.to_string() })?;
        let rep = scanner.finish(&mut |s: &hotspot_log::Safepoint| safepoints.push(s.clone()));
        unfinished_culprits = rep.orphan_culprits;
        open_sync_ns = rep.open_sync_ns;
        if rep.lines_unrecognised > 0 {
            let first = rep
                .unrecognised_examples
                .first()
                .map(|e| format!("; the first, line {}: {}", e.line, e.text))
                .unwrap_or_default();
            damage.push(format!("{}: {} line(s) that look like safepoint records were not understood and are not counted{first}", sp.display(), rep.lines_unrecognised));
        }
    }
    Ok(SafepointLog { present, safepoints, unfinished_culprits, open_sync_ns })
}

/// Which lines of the files stamped in time (counters, stacks) a reading for the stalls after
/// `after` keeps: from `look_back` before stall `after` began (its `stall-begin` in `events`),
/// and the last one before that; all when `after` is 0.
pub(crate) fn keep_from(events: &[Event], after: u32, look_back: u64) -> Keep {
    events
        .iter()
        .find_map(|e| match e {
            Event::StallBegin { t, stall, .. } if after > 0 && *stall == after => {
                Some(Keep::From(t.saturating_sub(look_back)))
            }
            _ => None,
        })
        .unwrap_or(Keep::All)
}

/// [`read_lines_kept`] of the file `name` in a recording, from where `from` says.
pub(crate) fn read_lines_from<T: DeserializeOwned>(
    path: &Path,
    damage: &mut Vec<String>,
    keep: Keep,
    from: &mut ReadFrom,
    name: &'static str,
) -> Result<Vec<T>, Error> {
    read_lines_kept(path, damage, keep, from.at(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_file_is_read_on_from_past_what_no_later_reading_keeps() {
        let d = std::env::temp_dir().join(format!("stallscope-readfrom-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("samples.jsonl");
        let stalls = |v: &[serde_json::Value]| -> Vec<u64> {
            v.iter().map(|x| x["stall"].as_u64().unwrap()).collect()
        };
        // Stalls 1, 1, 2 and the first half of a line of stall 3, as a live recorder leaves it.
        std::fs::write(
            &p,
            "{\"stall\":1,\"a\":1}\n{\"stall\":1,\"a\":2}\n{\"stall\":2}\n{\"stall\":3,",
        )
        .unwrap();
        let (mut at, mut damage) = (Place::default(), Vec::new());
        let got: Vec<serde_json::Value> =
            read_lines_kept(&p, &mut damage, Keep::AfterStall(1), &mut at).unwrap();
        assert_eq!(stalls(&got), [2]);
        assert_eq!(at, Place { byte: 36, line: 2 }, "at stall 2's line");
        assert_eq!(damage.len(), 1, "the cut line is said");
        assert!(damage[0].contains("samples.jsonl:4"), "{damage:?}");
        // The line is finished and another written.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"\"b\":1}\n{\"stall\":4}\n").unwrap();
        let got: Vec<serde_json::Value> =
            read_lines_kept(&p, &mut Vec::new(), Keep::AfterStall(2), &mut at).unwrap();
        assert_eq!(stalls(&got), [3, 4]);
        assert_eq!(at.line, 3, "at stall 3's line");
        // Damage is named by its line in the whole file.
        f.write_all(b"not json\n{\"stall\":5}\n").unwrap();
        let e =
            read_lines_kept::<serde_json::Value>(&p, &mut Vec::new(), Keep::AfterStall(4), &mut at)
                .unwrap_err()
                .to_string();
        assert!(e.contains("samples.jsonl:6"), "{e}");
        // By time: from the last line stamped before T; a file that shrank is read from its start.
        let q = d.join("counters.jsonl");
        std::fs::write(&q, "{\"t\":10}\n{\"t\":20}\n{\"t\":30}\n{\"t\":40}\n").unwrap();
        let mut at = Place::default();
        let ts = |v: Vec<serde_json::Value>| -> Vec<u64> {
            v.iter().map(|x| x["t"].as_u64().unwrap()).collect()
        };
        assert_eq!(
            ts(read_lines_kept(&q, &mut Vec::new(), Keep::From(25), &mut at).unwrap()),
            [20, 30, 40]
        );
        assert_eq!(at.line, 1);
        assert_eq!(
            ts(read_lines_kept(&q, &mut Vec::new(), Keep::From(45), &mut at).unwrap()),
            [40]
        );
        std::fs::write(&q, "{\"t\":50}\n").unwrap();
        assert_eq!(
            ts(read_lines_kept(&q, &mut Vec::new(), Keep::From(45), &mut at).unwrap()),
            [50]
        );
        // A stack sampled late is written after later ones: what is stamped T or later is kept
        // wherever it is, and the next reading begins no later than the first line kept.
        std::fs::write(&q, "{\"t\":10}\n{\"t\":30}\n{\"t\":40}\n{\"t\":15}\n{\"t\":50}\n").unwrap();
        let mut at = Place::default();
        assert_eq!(
            ts(read_lines_kept(&q, &mut Vec::new(), Keep::From(25), &mut at).unwrap()),
            [30, 40, 15, 50]
        );
        assert_eq!(at.line, 1, "the first line kept");
        // A line cut inside its stamp ({"t":8) is no line stamped before T.
        std::fs::write(&q, "{\"t\":30}\n{\"t\":40}\n{\"t\":8").unwrap();
        let mut at = Place::default();
        let mut damage = Vec::new();
        assert_eq!(
            ts(read_lines_kept(&q, &mut damage, Keep::From(35), &mut at).unwrap()),
            [30, 40]
        );
        assert_eq!(at.line, 0);
        assert_eq!(damage.len(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_line_s_time_is_its_own_t_not_another_key_ending_in_t() {
        let look = r#"{"t":82773390622267,"prev_t":82773385527477,"safepoints":0,"gcs":[{"t":1}]}"#;
        assert_eq!(t_of_line(look), Some(82773390622267));
        assert_eq!(t_of_line(r#"{"prev_t":5,"t":7}"#), Some(7));
        assert_eq!(t_of_line(r#"{"prev_t":5}"#), None);
        assert_eq!(t_of_line(r#"{"x":[{"t":5}],"t":7}"#), None, "after a nested array");
        assert_eq!(t_of_line(r#"{"t":"soon"}"#), None);
    }
    use crate::writer::Appender;
    use std::fs::OpenOptions;
    use std::io::Write;

    #[test]
    fn a_cut_last_line_is_skipped_but_damage_elsewhere_is_reported() {
        let d = std::env::temp_dir().join(format!("stallscope-rec-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("e.jsonl");
        let mut a = Appender::open(&p).unwrap();
        a.line(&Event::Detach { t: 1, reason: "x".into() }).unwrap();
        a.line(&Event::TargetExit { t: 2, code: Some(0), signal: None }).unwrap();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"event\":\"detach\",\"t\":3,\"rea").unwrap();
        let v: Vec<Event> = read_lines(&p).unwrap();
        assert_eq!(v.len(), 2);
        std::fs::write(&p, "{\"event\":\"detach\"\nnot json\n").unwrap();
        let e = read_lines::<Event>(&p).unwrap_err().to_string();
        assert!(e.contains("e.jsonl:1"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
