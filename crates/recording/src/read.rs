//! Reading a recording: every file of the directory into one [`Recording`], the input of the
//! diagnosis. A missing source is empty; a damaged line is an error naming the file and line,
//! except a cut-off last line (a killed recorder), which is left out and said.

use crate::Error;
use crate::files;
use crate::schema::*;
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
    let text = match std::fs::read(path) {
        Ok(t) => String::from_utf8(t).map_err(|e| Error::Damaged {
            path: path.to_path_buf(),
            line: line_of(e.as_bytes(), e.utf8_error().valid_up_to()),
            reason: "not UTF-8 text".into(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(path, "cannot read it", e)),
    };
    let complete = text.ends_with('\n');
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, l) in lines.iter().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(l) {
            Ok(v) => out.push(v),
            // The recorder was killed mid-write: the last line may be cut.
            Err(_) if i + 1 == lines.len() && !complete => {
                damage.push(format!("{}:{}: the last line is cut off (the recorder was killed mid-write?); left out", path.display(), i + 1));
                break;
            }
            Err(e) => {
                return Err(Error::Damaged {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: e.to_string(),
                });
            }
        }
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
        }
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
        let dir = dir.as_ref();
        check_plain_files(dir)?;
        let meta = read_meta(dir)?;
        // The two interval logs decode on their own threads (a day of 1 s intervals is 172,800
        // compressed histograms) while this one reads the rest.
        let (hiccups, control, rest) = std::thread::scope(|sc| {
            let h = sc.spawn(|| crate::hlog::read(&dir.join(files::HICCUPS)));
            let c = sc.spawn(|| crate::hlog::read(&dir.join(files::CONTROL)));
            let rest = Recording::read_lines_of(dir, meta);
            (h.join().ok().flatten(), c.join().ok().flatten(), rest)
        });
        let mut r = rest?;
        r.hiccups = hiccups;
        r.control = control;
        if r.safepoints.is_empty()
            && let Some(jfr) = jfr
        {
            r.fill_from_jfr(jfr);
        }
        if r.safepoints.is_empty() {
            r.fill_from_counters();
        }
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

    fn read_lines_of(dir: &Path, meta: Meta) -> Result<Recording, Error> {
        let mut safepoints = Vec::new();
        let mut unfinished_culprits = Vec::new();
        let mut open_sync_ns = None;
        let mut damage = Vec::new();
        let sp = dir.join(files::SAFEPOINT_LOG);
        let has_safepoint_log = sp.exists();
        if has_safepoint_log {
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
        let (mut frames, mut frames_notes) = (Vec::new(), Vec::new());
        let frames_file = dir.join(files::FRAMES).exists();
        for l in read_lines_noting::<FramesLine>(&dir.join(files::FRAMES), &mut damage)? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        frames.extend(read_lines_noting::<FrameSample>(&dir.join(files::DUMPS), &mut damage)?);
        let stacks_file = dir.join(files::STACKS).exists() || dir.join(files::OUTSIDE).exists();
        frames.extend(read_lines_noting::<FrameSample>(&dir.join(files::STACKS), &mut damage)?);
        for l in read_lines_noting::<FramesLine>(&dir.join(files::OUTSIDE), &mut damage)? {
            match l {
                FramesLine::Sample(s) => frames.push(s),
                FramesLine::Note(n) => frames_notes.push(n.note),
            }
        }
        Ok(Recording {
            dir: dir.to_path_buf(),
            events: read_lines_noting(&dir.join(files::EVENTS), &mut damage)?,
            samples: read_lines_noting(&dir.join(files::SAMPLES), &mut damage)?,
            system: read_lines_noting(&dir.join(files::SYSTEM), &mut damage)?,
            context: read_lines_noting(&dir.join(files::CONTEXT), &mut damage)?,
            trace: read_lines_noting(&dir.join(files::TRACE), &mut damage)?,
            kwaits: read_lines_noting(&dir.join(files::KWAITS), &mut damage)?,
            counters: read_lines_noting(&dir.join(files::COUNTERS), &mut damage)?,
            who: read_lines_noting(&dir.join(files::WHO), &mut damage)?,
            has_who: dir.join(files::WHO).exists(),
            frames_recorded: (frames_file && frames_notes.is_empty()) || stacks_file,
            frames,
            frames_notes,
            damage,
            notes: Vec::new(),
            hiccups: None,
            control: None,
            meta,
            has_safepoint_log,
            safepoints,
            unfinished_culprits,
            open_sync_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
