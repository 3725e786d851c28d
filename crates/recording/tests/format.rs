//! The recording format, pinned: every line of every stored recording (tests/fixtures/recordings,
//! real runs of every format version) reads into this build's record types and writes back as
//! the same JSON. The record types are the recording's own (`recording::disk` for what the
//! `/proc` and JFR readers produced, converted at the boundary); a field renamed, retyped or
//! dropped in them changes what is on disk, and fails here, naming the file and line, before it
//! silently changes docs/formats/recording.md. Such a change raises `recording::FORMAT`.

use recording::{
    Event, FrameSample, FramesLine, Meta, Recording, Sample, StallContext, StallTrace,
    SystemSample, Who, files,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/recordings");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(files::META).exists())
        .collect();
    v.sort();
    assert!(v.len() >= 10, "the stored recordings are there: {v:?}");
    v
}

/// Every line of `file` in `dir` reads as `T` and writes back as the same JSON value; returns
/// how many lines were checked.
fn round_trips<T: DeserializeOwned + Serialize>(dir: &Path, file: &str) -> usize {
    let path = dir.join(file);
    let Ok(text) = std::fs::read_to_string(&path) else { return 0 };
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let raw: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // A last line cut off by a killed recorder: the reader skips it too.
            Err(_) if i + 1 == text.lines().count() => continue,
            Err(e) => panic!("{}:{}: not JSON: {e}", path.display(), i + 1),
        };
        let typed: T = serde_json::from_value(raw.clone()).unwrap_or_unwind(&path, i + 1);
        let back = serde_json::to_value(&typed).unwrap();
        if back != raw {
            panic!(
                "{}:{}: the record reads back differently, so the recording format changed \
                 (raise recording::FORMAT and say what changed in docs/formats/recording.md)\n \
                 on disk: {raw}\n written: {back}",
                path.display(),
                i + 1
            );
        }
        n += 1;
    }
    n
}

/// The header is one JSON document (pretty-printed), not lines.
fn meta_round_trips(dir: &Path) -> usize {
    let path = dir.join(files::META);
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let typed: Meta = serde_json::from_value(raw.clone()).unwrap_or_unwind(&path, 1);
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, raw, "{}: the header reads back differently", path.display());
    1
}

trait OrPanic<T> {
    fn unwrap_or_unwind(self, path: &Path, line: usize) -> T;
}

impl<T> OrPanic<T> for Result<T, serde_json::Error> {
    fn unwrap_or_unwind(self, path: &Path, line: usize) -> T {
        self.unwrap_or_else(|e| {
            panic!(
                "{}:{line}: no longer reads as its record type ({e}): the recording format \
                 changed (raise recording::FORMAT, say what changed in \
                 docs/formats/recording.md, and keep reading the old one)",
                path.display()
            )
        })
    }
}

#[test]
fn every_line_of_every_stored_recording_reads_back_as_written() {
    let mut total = 0;
    for dir in fixtures() {
        total += meta_round_trips(&dir);
        total += round_trips::<Event>(&dir, files::EVENTS);
        total += round_trips::<Sample>(&dir, files::SAMPLES);
        total += round_trips::<SystemSample>(&dir, files::SYSTEM);
        total += round_trips::<StallContext>(&dir, files::CONTEXT);
        total += round_trips::<StallTrace>(&dir, files::TRACE);
        total += round_trips::<FramesLine>(&dir, files::FRAMES);
        total += round_trips::<FrameSample>(&dir, files::DUMPS);
        total += round_trips::<FrameSample>(&dir, files::STACKS);
        total += round_trips::<FramesLine>(&dir, files::OUTSIDE);
        total += round_trips::<recording::disk::CounterLook>(&dir, files::COUNTERS);
        total += round_trips::<Who>(&dir, files::WHO);
        // And the whole recording reads, as the doctor reads it.
        Recording::read(&dir, None).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    assert!(total > 1000, "the fixtures hold thousands of records: {total}");
}

#[test]
fn the_stored_recordings_are_of_a_version_this_build_reads() {
    for dir in fixtures() {
        let meta = recording::read_meta(&dir).unwrap();
        assert!(
            meta.format.unwrap_or(0) <= recording::FORMAT,
            "{}: format {:?}",
            dir.display(),
            meta.format
        );
    }
}

#[test]
fn a_recording_of_a_newer_format_is_refused_naming_the_file_and_what_made_it() {
    let src = fixtures().into_iter().next().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join(files::META)).unwrap()).unwrap();
    meta["format"] = Value::from(recording::FORMAT + 1);
    meta["stallscope_version"] = Value::from("9.9.9");
    std::fs::write(tmp.path().join(files::META), meta.to_string()).unwrap();
    let e = recording::read_meta(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("meta.json") && e.contains("newer than this stallscope reads"), "{e}");
    assert!(e.contains("9.9.9"), "names what made it: {e}");
    let e = Recording::read(tmp.path(), None).err().expect("refused").to_string();
    assert!(e.contains("newer than this stallscope reads"), "{e}");
}
