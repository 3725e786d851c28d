//! The recording readers against damage: a real recording (tests/fixtures/recordings) with one
//! of its files cut, overwritten or garbled at random. Whatever the damage, reading and
//! diagnosing never panic; what is lost is either an error naming the file (and line, for a
//! record that does not parse) or a note in the report. Property-tested, time-bounded by
//! proptest's case count.

use proptest::prelude::*;
use recording::{Error, Recording};
use std::path::{Path, PathBuf};

const FILES: [&str; 8] = [
    "meta.json",
    "events.jsonl",
    "samples.jsonl",
    "system.jsonl",
    "context.jsonl",
    "safepoint.log",
    "hiccups.hlog",
    "control.hlog",
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recordings/jdk17-idle-frozen-500ms")
}

fn scratch_path(case: u64) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("damage-{}-{case}", std::process::id()))
}

fn scratch(case: u64) -> PathBuf {
    let d = scratch_path(case);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    for e in std::fs::read_dir(fixture()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
    }
    d
}

#[derive(Debug, Clone)]
enum Damage {
    /// Cut at a fraction of its length.
    Cut(f64),
    /// Bytes overwritten at a fraction of its length.
    Overwrite(f64, Vec<u8>),
    /// Replaced whole.
    Replace(Vec<u8>),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (0.0f64..1.0).prop_map(Damage::Cut),
        (0.0f64..1.0, proptest::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(f, b)| Damage::Overwrite(f, b)),
        proptest::collection::vec(any::<u8>(), 0..256).prop_map(Damage::Replace),
        // Digits made huge: records that still look like records.
        (0.0f64..1.0).prop_map(|f| Damage::Overwrite(f, b"99999999999999999999999".to_vec())),
    ]
}

fn apply(path: &Path, d: &Damage) {
    let mut b = std::fs::read(path).unwrap_or_default();
    match d {
        Damage::Cut(f) => b.truncate((b.len() as f64 * f) as usize),
        Damage::Overwrite(f, bytes) => {
            let at = (b.len() as f64 * f) as usize;
            for (i, x) in bytes.iter().enumerate() {
                if at + i < b.len() {
                    b[at + i] = *x;
                }
            }
        }
        Damage::Replace(bytes) => b = bytes.clone(),
    }
    std::fs::write(path, b).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]
    #[test]
    fn damaged_recordings_are_read_or_refused_never_a_panic(file in 0usize..FILES.len(), d in damage(), case in any::<u64>()) {
        let dir = scratch(case);
        let path = dir.join(FILES[file]);
        apply(&path, &d);
        let read = std::panic::catch_unwind(|| Recording::read(&dir, None));
        let read = read.map_err(|_| TestCaseError::fail(format!("reading panicked: {} {d:?}", FILES[file])))?;
        match read {
            Ok(rec) => {
                let rep = std::panic::catch_unwind(|| doctor::diagnose(&rec)).map_err(|_| TestCaseError::fail(format!("diagnosing panicked: {} {d:?}", FILES[file])))?;
                prop_assert!(rep.stalls.len() <= 64);
            }
            Err(e) => {
                let text = e.to_string();
                prop_assert!(text.contains(FILES[file]) || matches!(e, Error::NotARecording { .. }), "the error names the damaged file: {text}");
                if let Error::Damaged { line, .. } = e {
                    prop_assert!(line >= 1);
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// The damage reports of the issue that asked for them, one by one.
#[test]
fn damage_is_reported_with_its_file_and_line() {
    // A safepoint log whose numbers are made huge: not "0 safepoints" in silence.
    let dir = scratch(1);
    let log = std::fs::read_to_string(dir.join("safepoint.log")).unwrap();
    let huge = log.replace(" ns,", "99999999999999999999999 ns,");
    assert_ne!(huge, log);
    std::fs::write(dir.join("safepoint.log"), huge).unwrap();
    let rep = doctor::diagnose(&Recording::read(&dir, None).unwrap());
    assert!(
        rep.notes.iter().any(|n| n.contains("safepoint.log")
            && n.contains("not understood")
            && n.contains("line")),
        "{:?}",
        rep.notes
    );

    // events.jsonl cut mid-line: said, not lost in silence; and the recording has no end.
    let dir = scratch(2);
    let ev = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    std::fs::write(dir.join("events.jsonl"), &ev[..ev.len() - 10]).unwrap();
    let rep = doctor::diagnose(&Recording::read(&dir, None).unwrap());
    assert!(
        rep.notes.iter().any(|n| n.contains("events.jsonl:") && n.contains("cut off")),
        "{:?}",
        rep.notes
    );
    assert!(rep.notes.iter().any(|n| n.contains("no end record")), "{:?}", rep.notes);

    // A garbage meta.json is a damaged header, not a missing one.
    let dir = scratch(3);
    std::fs::write(dir.join("meta.json"), [0xff, 0xfe, 0x00, 0x12]).unwrap();
    let e = Recording::read(&dir, None).err().expect("refused");
    assert!(matches!(e, Error::BadHeader { .. }), "{e}");
    std::fs::write(dir.join("meta.json"), "{\"stallscope_version\": 3").unwrap();
    let e = Recording::read(&dir, None).err().expect("refused");
    assert!(e.to_string().contains("meta.json: not a valid recording header"), "{e}");
    for n in 1..=3 {
        let _ = std::fs::remove_dir_all(scratch_path(n));
    }
}
