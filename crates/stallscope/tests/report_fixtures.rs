//! `stallscope report` on stored real recordings (tests/fixtures/recordings): what the command
//! adds to the library (crates/doctor/tests/recordings.rs checks the diagnosis itself): the same
//! text every time, and one clear line with exit code 1 for damage or the wrong directory.

mod common;

use common::*;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/recordings").join(name)
}

fn report(dir: &Path, json: bool) -> (i32, String, String) {
    let mut c = stallscope();
    c.arg("report");
    if json {
        c.arg("--json");
    }
    let o = c.arg(dir).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn report_is_a_pure_function_of_the_directory() {
    let d = fixture("jdk17-mapped-read-mmap-slowfs-300ms");
    let (_, a, _) = report(&d, false);
    let (_, b, _) = report(&d, false);
    assert_eq!(a, b);
    assert!(a.contains("\"reader-thread\""), "{a}");
}

#[test]
fn a_recording_cut_mid_line_still_reads() {
    let src = fixture("jdk17-mapped-read-mmap-slowfs-300ms");
    let d = scratch("cut-recording");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
    }
    // Kill -9 leaves at most a partial last line in any file.
    for f in ["samples.jsonl", "events.jsonl", "system.jsonl", "context.jsonl"] {
        let p = d.join(f);
        let text = std::fs::read(&p).unwrap();
        std::fs::write(&p, &text[..text.len() - 7]).unwrap();
    }
    let (code, out, err) = report(&d, false);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Summary"), "{out}");
    // Damage in the middle is an error naming the file and line, not a panic.
    let p = d.join("events.jsonl");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.insert_str(0, "{not json\n");
    std::fs::write(&p, text).unwrap();
    let (code, _, err) = report(&d, false);
    assert_eq!(code, 1);
    assert!(err.contains("events.jsonl:1") && !err.contains("panicked"), "{err}");
    let (code, _, err) = report(&root().join("docs"), false);
    assert_eq!(code, 1);
    assert!(err.contains("neither a stallscope recording") && err.lines().count() == 1, "{err}");
}
