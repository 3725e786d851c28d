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
    // A path that is not there is said to be missing, whatever its name looks like.
    for missing in ["missing.jfr", "missing-dir"] {
        let (code, _, err) = report(&d.join(missing), false);
        assert_eq!(code, 1);
        assert!(
            err.contains(&format!("{missing}: no such file or directory"))
                && err.lines().count() == 1,
            "{err}"
        );
    }
}

/// Where two JSON values differ, as paths (`stalls[0].findings[1].share: 0.5 against 0.25`).
fn json_diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) => json_diff(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: lost when read back")),
                }
            }
            for k in y.keys().filter(|k| !x.contains_key(*k)) {
                out.push(format!("{path}.{k}: added when read back"));
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                json_diff(&format!("{path}[{i}]"), v, w, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} written, {b} read back")),
        _ => {}
    }
}

/// Every stored recording's `report --json` reads back into the typed report, whole: written
/// out again, the typed `doctor::Report` is the very same JSON, so the tests that assert on the
/// typed report see every field the command writes, under its name.
#[test]
fn every_stored_reports_json_reads_back_into_the_typed_report_whole() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures/recordings"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 10, "the stored recordings: {dirs:?}");
    let mut wrong = Vec::new();
    for d in &dirs {
        let (code, out, err) = report(d, true);
        assert_eq!(code, 0, "{}: {err}", d.display());
        let raw: serde_json::Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{}: report --json is not JSON: {e}", d.display()));
        let typed: doctor::Report = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{}: does not read back as a Report: {e}", d.display()));
        let again = serde_json::to_value(&typed).unwrap();
        let mut diff = Vec::new();
        json_diff("", &raw, &again, &mut diff);
        if raw != again || !diff.is_empty() {
            wrong.push(format!("{}:\n  {}", d.display(), diff.join("\n  ")));
        }
    }
    assert!(wrong.is_empty(), "read back differently:\n{}", wrong.join("\n"));
}
