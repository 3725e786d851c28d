//! The recording format, pinned: every line of every stored recording (tests/fixtures/recordings,
//! real runs of every format version) reads into this build's record types and writes back as
//! the same JSON. The record types are the recording's own (`recording::disk` for what the
//! `/proc` and JFR readers produced, converted at the boundary); a field renamed, retyped or
//! dropped in them changes what is on disk, and fails here, naming the file and line, before it
//! silently changes docs/formats/recording.md. Such a change raises `recording::FORMAT`.

use recording::{Recording, files};
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

#[test]
fn every_line_of_every_stored_recording_reads_back_as_written() {
    let mut total = 0;
    for dir in fixtures() {
        total += recording::verify::round_trip(&dir).unwrap_or_else(|m| panic!("{m}"));
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
