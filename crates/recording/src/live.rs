//! A recording as it is written, kept in memory: what `watch` diagnoses each stall from, so that
//! its live path never reads back the files it wrote (issue 54). The recorder's appenders hand
//! every value they write to a [`Live`] as well as to their file; [`Recording::from_live`]
//! builds from it the same [`Recording`] that [`Recording::read_after`] reads from the files,
//! and forgets what no later reading keeps.
//!
//! Invariant: a value is kept exactly when its line reaches its file's queue (a sample dropped
//! because the disk lagged is in neither), and with the stall and time its line says, so a
//! reading from memory and one from the files agree line for line.

use crate::read::{Keep, LOOK_BACK_NS};
use crate::schema::*;
use crate::writer::{Appender, Writer};
use crate::{Error, FlightRecordings, Recording, files};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A value written, with its line's stall and time.
struct Stamped<T> {
    stall: Option<u32>,
    t: Option<u64>,
    v: T,
}

/// Each file's values not yet forgotten.
#[derive(Default)]
struct Lines {
    /// Nothing more is kept ([`Live::stop`]).
    stopped: bool,
    meta: Option<Meta>,
    events: Vec<Stamped<Event>>,
    samples: Vec<Stamped<Sample>>,
    system: Vec<Stamped<SystemSample>>,
    context: Vec<Stamped<StallContext>>,
    trace: Vec<Stamped<StallTrace>>,
    kwaits: Vec<Stamped<StallKernelWaits>>,
    counters: Vec<Stamped<crate::disk::CounterLook>>,
    who: Vec<Stamped<crate::who::Who>>,
    dumps: Vec<Stamped<FrameSample>>,
    outside: Vec<Stamped<FramesLine>>,
}

/// One recording's values in memory, shared by the threads that write its files and the one
/// that diagnoses it. Cloning shares it.
#[derive(Clone, Default)]
pub struct Live(Arc<Mutex<Lines>>);

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let l = self.lines();
        write!(f, "Live({} events, {} samples)", l.events.len(), l.samples.len())
    }
}

impl Live {
    fn lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hook<T: serde::Serialize + Clone + Send + 'static>(
        &self,
        a: &mut Appender<T>,
        pick: fn(&mut Lines) -> &mut Vec<Stamped<T>>,
    ) {
        let live = self.clone();
        a.keep_in(Box::new(move |v: &T, stall, t| {
            let mut l = live.lines();
            if !l.stopped {
                pick(&mut l).push(Stamped { stall, t, v: v.clone() })
            }
        }));
    }

    /// The main files' values (events, samples, system samples, contexts, counters) kept here.
    pub fn keep_writer(&self, w: &mut Writer) {
        self.hook(&mut w.events, |l| &mut l.events);
        self.hook(&mut w.samples, |l| &mut l.samples);
        self.hook(&mut w.system, |l| &mut l.system);
        self.hook(&mut w.context, |l| &mut l.context);
        self.hook(&mut w.counters, |l| &mut l.counters);
    }
    pub fn keep_trace(&self, a: &mut Appender<StallTrace>) {
        self.hook(a, |l| &mut l.trace);
    }
    pub fn keep_kwaits(&self, a: &mut Appender<StallKernelWaits>) {
        self.hook(a, |l| &mut l.kwaits);
    }
    pub fn keep_who(&self, a: &mut Appender<crate::who::Who>) {
        self.hook(a, |l| &mut l.who);
    }
    pub fn keep_dumps(&self, a: &mut Appender<FrameSample>) {
        self.hook(a, |l| &mut l.dumps);
    }
    pub fn keep_outside(&self, a: &mut Appender<FramesLine>) {
        self.hook(a, |l| &mut l.outside);
    }
}

/// Whether the value at `i` of `v` is one `keep` keeps (`before`: the index of the last value
/// stamped before `keep`'s time, if any).
fn is_kept<T>(v: &[Stamped<T>], i: usize, keep: Keep, before: Option<usize>) -> bool {
    match keep {
        Keep::All => true,
        Keep::AfterStall(after) => v[i].stall.is_none_or(|n| n == 0 || n > after),
        Keep::From(t0) => Some(i) == before || v[i].t.is_none_or(|t| t >= t0),
    }
}

/// The index of the last value stamped before `keep`'s time, for [`Keep::From`].
fn last_before<T>(v: &[Stamped<T>], keep: Keep) -> Option<usize> {
    match keep {
        Keep::From(t0) => v
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.t.filter(|t| *t < t0).map(|t| (t, i)))
            .max()
            .map(|(_, i)| i),
        _ => None,
    }
}

/// Forgets what no reading after one with `keep` keeps: with `prefix`, the values before the
/// first kept one (as a file's reading moves on past them; for stalls, past stall 0's too);
/// without, every value not kept.
fn forget<T>(v: &mut Vec<Stamped<T>>, keep: Keep, prefix: bool) {
    let before = last_before(v, keep);
    if prefix {
        let next = match keep {
            Keep::All => 0,
            Keep::AfterStall(after) => {
                v.iter().position(|s| s.stall.is_none_or(|n| n > after)).unwrap_or(v.len())
            }
            Keep::From(_) => {
                (0..v.len()).position(|i| is_kept(v, i, keep, before)).unwrap_or(v.len())
            }
        };
        v.drain(..next);
    } else {
        let kept: Vec<bool> = (0..v.len()).map(|i| is_kept(v, i, keep, before)).collect();
        let mut i = 0;
        v.retain(|_| {
            i += 1;
            kept[i - 1]
        });
    }
}

/// The values `keep` keeps, as [`Recording::read_after`]'s reading of a file from where the
/// last reading left it; then what no later reading keeps is forgotten ([`forget`]).
fn kept<T: Clone>(v: &mut Vec<Stamped<T>>, keep: Keep, prefix: bool) -> Vec<T> {
    let before = last_before(v, keep);
    let out =
        (0..v.len()).filter(|i| is_kept(v, *i, keep, before)).map(|i| v[i].v.clone()).collect();
    forget(v, keep, prefix);
    out
}

impl Live {
    /// The recording's header, once the recorder wrote it.
    pub fn set_meta(&self, meta: &Meta) {
        self.lines().meta = Some(meta.clone());
    }

    /// Forgets what no diagnosis of the stalls after `after` reads, when none is made (a JVM
    /// that never stalls again): of the files stamped in time, what is older than 10 s before
    /// the first stall not yet diagnosed began, or than 10 s before `now_ns` while none has;
    /// of the per-stall files, stalls up to `after` and the lines between stalls before the
    /// first one after it (which no stall's diagnosis reads).
    pub fn forget(&self, after: u32, now_ns: u64) {
        let mut l = self.lines();
        let begun = l
            .events
            .iter()
            .filter_map(|s| match &s.v {
                Event::StallBegin { t, stall, .. } if *stall >= after.max(1) => Some(*t),
                _ => None,
            })
            .min()
            .unwrap_or(now_ns);
        let by_time = Keep::From(begun.saturating_sub(LOOK_BACK_NS));
        forget(&mut l.events, Keep::AfterStall(after.saturating_sub(1)), false);
        forget(&mut l.counters, by_time, true);
        forget(&mut l.dumps, by_time, true);
        forget(&mut l.outside, by_time, true);
        let by_stall = Keep::AfterStall(after);
        forget(&mut l.samples, by_stall, true);
        forget(&mut l.system, by_stall, true);
        forget(&mut l.context, by_stall, true);
        forget(&mut l.trace, by_stall, true);
        forget(&mut l.kwaits, by_stall, true);
        forget(&mut l.who, by_stall, true);
    }

    /// Keeps nothing more, and forgets what it holds (its reader is done: `attach`'s "what is
    /// happening now" was said).
    pub fn stop(&self) {
        let mut l = self.lines();
        let meta = l.meta.take();
        *l = Lines { stopped: true, meta, ..Lines::default() };
    }
}

impl Recording {
    /// [`Recording::read_after`] from what the recorder kept in memory as it wrote (`live`): the
    /// same recording, for the stalls after stall `after`, without reading back a file it wrote.
    /// What the JVM and its agent write (the safepoint log, `stacks.jsonl`, the stacks of its
    /// flight recording in `frames.jsonl`) is read from the files, `stacks.jsonl` from where
    /// `from` says.
    pub fn from_live(
        dir: &Path,
        live: &Live,
        jfr: Option<&dyn FlightRecordings>,
        after: u32,
        from: &mut crate::ReadFrom,
    ) -> Result<Recording, Error> {
        let Some(meta) = live.lines().meta.clone() else {
            return Err(Error::NotARecording {
                dir: dir.to_path_buf(),
                source: std::io::Error::other("its recorder has not begun it"),
            });
        };
        let mut damage = Vec::new();
        let log = crate::read::read_safepoint_log(dir, &mut damage)?;
        let mut l = live.lines();
        let after_stall = |n: u32| if after > 0 { Keep::AfterStall(n) } else { Keep::All };
        let events = kept(&mut l.events, after_stall(after - after.min(1)), false);
        let by_time = crate::read::keep_from(&events, after, LOOK_BACK_NS);
        let mut frames_notes = Vec::new();
        let mut frames = Vec::new();
        let mut split = |lines: Vec<FramesLine>, frames: &mut Vec<FrameSample>| {
            for l in lines {
                match l {
                    FramesLine::Sample(s) => frames.push(s),
                    FramesLine::Note(n) => frames_notes.push(n.note),
                }
            }
        };
        // `frames.jsonl`: the JVM's own flight recording's stacks, extracted once it stopped,
        // and the notes of why there are none; written at the recording's ends, not per stall.
        split(
            crate::read::read_lines_noting::<FramesLine>(&dir.join(files::FRAMES), &mut damage)?,
            &mut frames,
        );
        frames.extend(kept(&mut l.dumps, by_time, true));
        frames.extend(crate::read::read_lines_from::<FrameSample>(
            &dir.join(files::STACKS),
            &mut damage,
            by_time,
            from,
            files::STACKS,
        )?);
        split(kept(&mut l.outside, by_time, true), &mut frames);
        let frames_file = dir.join(files::FRAMES).exists();
        let stacks_file = dir.join(files::STACKS).exists() || dir.join(files::OUTSIDE).exists();
        let mut r = Recording {
            dir: dir.to_path_buf(),
            events,
            samples: kept(&mut l.samples, after_stall(after), true),
            system: kept(&mut l.system, after_stall(after), true),
            context: kept(&mut l.context, after_stall(after), true),
            trace: kept(&mut l.trace, after_stall(after), true),
            kwaits: kept(&mut l.kwaits, after_stall(after), true),
            counters: kept(&mut l.counters, by_time, true),
            who: kept(&mut l.who, after_stall(after), true),
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
        };
        drop(l);
        // The one flight recording a recorder writes here is its own `frames.jfr` (at the
        // recording's end); without it, the directory is not listed and every file in it opened
        // to look for one at each stall (`watch` from outside has no safepoint log).
        r.fill_when_no_log(jfr.filter(|_| dir.join(files::FRAMES_JFR).exists()));
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(stall: Option<u32>, t: Option<u64>) -> Stamped<(Option<u32>, Option<u64>)> {
        Stamped { stall, t, v: (stall, t) }
    }

    #[test]
    fn by_stall_the_stalls_up_to_n_are_left_out_and_forgotten_up_to_the_first_after_it() {
        let mut v = vec![
            stamped(Some(1), None),
            stamped(Some(0), None),
            stamped(Some(2), None),
            stamped(Some(3), None),
            stamped(Some(0), None),
        ];
        let got = kept(&mut v, Keep::AfterStall(2), true);
        assert_eq!(got, vec![(Some(0), None), (Some(3), None), (Some(0), None)]);
        // Forgotten: up to the first line after stall 2 (stall 0 before it, too).
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].stall, Some(3));
    }

    #[test]
    fn by_time_the_last_line_before_t_is_kept() {
        let mut v = vec![
            stamped(None, Some(10)),
            stamped(None, Some(20)),
            stamped(None, Some(40)),
            stamped(None, Some(30)),
        ];
        let got = kept(&mut v, Keep::From(25), true);
        assert_eq!(got, vec![(None, Some(20)), (None, Some(40)), (None, Some(30))]);
        assert_eq!(v.len(), 3, "the one before the last before T is forgotten");
    }

    /// Writes `src`'s lines again into `dst` through appenders kept in a [`Live`], as the
    /// recorder would have; what the JVM writes (the safepoint log, the agent's stacks) is
    /// copied.
    fn replay(src: &Path, dst: &Path) -> Live {
        fn again<T: serde::de::DeserializeOwned + serde::Serialize>(
            src: &Path,
            name: &str,
            a: &mut Appender<T>,
        ) {
            for v in crate::read_lines::<T>(&src.join(name)).unwrap() {
                a.line(&v).unwrap();
            }
        }
        let meta = crate::read_meta(src).unwrap();
        let live = Live::default();
        let mut w = Writer::open(dst, &meta).unwrap();
        live.set_meta(&meta);
        live.keep_writer(&mut w);
        again(src, files::EVENTS, &mut w.events);
        again(src, files::SAMPLES, &mut w.samples);
        again(src, files::SYSTEM, &mut w.system);
        again(src, files::CONTEXT, &mut w.context);
        again(src, files::COUNTERS, &mut w.counters);
        macro_rules! other {
            ($name:expr, $keep:ident) => {
                if src.join($name).exists() {
                    let mut a = Appender::open(&dst.join($name)).unwrap();
                    live.$keep(&mut a);
                    again(src, $name, &mut a);
                }
            };
        }
        other!(files::TRACE, keep_trace);
        other!(files::KWAITS, keep_kwaits);
        other!(files::WHO, keep_who);
        other!(files::DUMPS, keep_dumps);
        other!(files::OUTSIDE, keep_outside);
        for name in [files::SAFEPOINT_LOG, files::STACKS, files::FRAMES] {
            if src.join(name).exists() {
                std::fs::copy(src.join(name), dst.join(name)).unwrap();
            }
        }
        live
    }

    /// What the diagnosis reads of a recording, to compare.
    fn read_of(r: &Recording) -> String {
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{} {} {}\n{:?}\n{:?}\n{:?}",
            r.events,
            r.samples,
            r.system,
            r.context,
            r.trace,
            r.kwaits,
            r.counters,
            r.who,
            r.frames,
            r.frames_notes,
            r.has_who,
            r.frames_recorded,
            r.has_safepoint_log,
            r.safepoints,
            r.unfinished_culprits,
            r.open_sync_ns,
        )
    }

    #[test]
    fn every_stored_recording_reads_the_same_from_memory_as_from_its_files_stall_after_stall() {
        let fixtures =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/recordings");
        let mut compared = 0;
        for e in std::fs::read_dir(&fixtures).unwrap() {
            let src = e.unwrap().path();
            if !src.join(files::META).exists() {
                continue;
            }
            let dst = std::env::temp_dir().join(format!(
                "stallscope-live-{}-{}",
                std::process::id(),
                src.file_name().unwrap().to_string_lossy()
            ));
            let _ = std::fs::remove_dir_all(&dst);
            let live = replay(&src, &dst);
            let stalls = crate::read::Recording::read(&dst, None)
                .unwrap()
                .events
                .iter()
                .filter(|e| matches!(e, Event::StallEnd { .. }))
                .count() as u32;
            let (mut from_files, mut from_memory) =
                (crate::ReadFrom::default(), crate::ReadFrom::default());
            // As `watch` reads on: 0 first, then after each stall diagnosed.
            for after in 0..=stalls {
                let files_read = if after == 0 {
                    // `read_after(0)` is the whole reading, with the meters' logs, which
                    // diagnosing a stall does not read.
                    let mut r = Recording::read_after(&dst, None, 0, &mut from_files).unwrap();
                    r.hiccups = None;
                    r.control = None;
                    r
                } else {
                    Recording::read_after(&dst, None, after, &mut from_files).unwrap()
                };
                let memory_read =
                    Recording::from_live(&dst, &live, None, after, &mut from_memory).unwrap();
                assert_eq!(
                    read_of(&files_read),
                    read_of(&memory_read),
                    "{}: after stall {after}",
                    src.display()
                );
                compared += 1;
            }
            std::fs::remove_dir_all(&dst).unwrap();
        }
        assert!(compared > 20, "only {compared} readings compared");
    }

    #[test]
    fn events_keep_every_line_of_no_stall() {
        let mut v = vec![stamped(None, Some(1)), stamped(Some(1), Some(2)), stamped(None, Some(3))];
        let got = kept(&mut v, Keep::AfterStall(1), false);
        assert_eq!(got, vec![(None, Some(1)), (None, Some(3))]);
        assert_eq!(v.len(), 2);
    }
}
