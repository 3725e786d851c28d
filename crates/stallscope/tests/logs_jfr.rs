//! `stallscope logs FILE.jfr`: JFR recordings made here by real JDK 17 and 25 runs, read into the
//! same records and summary as text logs, and checked against the JDK's own `jfr print` of the
//! same file; concatenated, cut and damaged files.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn settings() -> PathBuf {
    root().join("docs/formats/safepoints.jfc")
}

/// Records `seconds` of a safepoint storm on `java` into `out` with the given JFR settings.
fn record(java: &Path, out: &Path, settings: &str, seconds: u32) {
    let o = Command::new(java)
        .arg(format!("-XX:StartFlightRecording:filename={},settings={settings}", out.display()))
        .arg("-jar")
        .arg(workloads_jar())
        .args(["safepoint-storm", "--duration", &format!("{seconds}s")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{java:?}: {}", String::from_utf8_lossy(&o.stderr));
    assert!(out.exists(), "{java:?} wrote no {}", out.display());
}

/// `stallscope logs ARGS`, killed (and the test failed) if it has not finished in a minute.
fn logs(args: &[&str]) -> (i32, String, String) {
    let mut child = stallscope()
        .arg("logs")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("stallscope logs {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// An ISO-8601 duration as `jfr print --json` writes it (`PT0.00514S`, `PT1M2.5S`), in ns.
fn iso_ns(d: &str) -> u64 {
    let mut rest = d.strip_prefix("PT").unwrap_or_else(|| panic!("not a duration: {d}"));
    let mut ns = 0u64;
    for (unit, scale) in [('H', 3_600_000_000_000u64), ('M', 60_000_000_000), ('S', 1_000_000_000)]
    {
        if let Some(i) = rest.find(unit) {
            let num = &rest[..i];
            let (int, frac) = num.split_once('.').unwrap_or((num, ""));
            ns += int.parse::<u64>().unwrap() * scale;
            if !frac.is_empty() {
                let digits = frac.len() as u32;
                ns += frac.parse::<u64>().unwrap() * scale / 10u64.pow(digits);
            }
            rest = &rest[i + 1..];
        }
    }
    ns
}

/// What the JDK's own reader says of a file: safepoints (begin events), the sum of their
/// synchronization times, and how many safepoints each operation had.
struct Oracle {
    safepoints: u64,
    ttsp_total_ns: u64,
    ops: BTreeMap<String, u64>,
}

fn jfr_print(java: &Path, file: &Path) -> Oracle {
    let jfr = java.parent().unwrap().join("jfr");
    let o = Command::new(&jfr)
        .args([
            "print",
            "--json",
            "--events",
            "jdk.SafepointBegin,jdk.SafepointStateSynchronization,jdk.ExecuteVMOperation",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{jfr:?}: {}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let events = v["recording"]["events"].as_array().unwrap();
    fn of<'a>(events: &'a [Value], t: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        events.iter().filter(move |e| e["type"] == t)
    }
    let begun: std::collections::HashSet<i64> = of(events, "jdk.SafepointBegin")
        .map(|e| e["values"]["safepointId"].as_i64().unwrap())
        .collect();
    let ttsp_total_ns = of(events, "jdk.SafepointStateSynchronization")
        .filter(|e| begun.contains(&e["values"]["safepointId"].as_i64().unwrap()))
        .map(|e| iso_ns(e["values"]["duration"].as_str().unwrap()))
        .sum();
    let mut ops = BTreeMap::new();
    let mut named = std::collections::HashSet::new();
    for e in of(events, "jdk.ExecuteVMOperation").filter(|e| {
        e["values"]["safepoint"] == true
            && begun.contains(&e["values"]["safepointId"].as_i64().unwrap())
    }) {
        named.insert(e["values"]["safepointId"].as_i64().unwrap());
        *ops.entry(e["values"]["operation"].as_str().unwrap().to_string()).or_default() += 1;
    }
    // A safepoint whose operation event is missing (the recording ended inside it) is "unknown".
    if begun.len() > named.len() {
        ops.insert("unknown".to_string(), (begun.len() - named.len()) as u64);
    }
    Oracle { safepoints: begun.len() as u64, ttsp_total_ns, ops }
}

/// The JSON summary of `logs --json FILE` (its fields are at the top level).
fn summary(file: &Path) -> Value {
    let (code, out, err) = logs(&["--json", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn ops_of(s: &Value) -> BTreeMap<String, u64> {
    s["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["name"].as_str().unwrap().to_string(), o["count"].as_u64().unwrap()))
        .collect()
}

#[test]
fn jfr_recordings_of_jdk17_and_25_agree_with_jfr_print() {
    let _x = exclusive();
    let d = scratch("logs-jfr");
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let (a, b) = (d.join(format!("a-{i}.jfr")), d.join(format!("b-{i}.jfr")));
        record(&java, &a, settings().to_str().unwrap(), 2);
        record(&java, &b, settings().to_str().unwrap(), 1);
        for f in [&a, &b] {
            let want = jfr_print(&java, f);
            let s = summary(f);
            assert!(
                want.safepoints > 10,
                "{java:?}: a safepoint storm makes safepoints: {}",
                want.safepoints
            );
            assert_eq!(s["safepoints"].as_u64().unwrap(), want.safepoints, "{java:?} {f:?}");
            let ttsp = s["ttsp_total_ns"].as_u64().unwrap();
            // Ticks become ns the same way on both sides; allow a nanosecond of rounding each.
            assert!(
                ttsp.abs_diff(want.ttsp_total_ns) <= want.safepoints,
                "{java:?} {f:?}: TTSP {ttsp} against jfr print's {}",
                want.ttsp_total_ns
            );
            assert_eq!(ops_of(&s), want.ops, "{java:?} {f:?}: per operation");
            assert_eq!(s["clock"], "wall", "{java:?}: JFR's events are on the wall clock");
        }
        // Concatenated recordings are one file of several chunks: JFR's own tools read them so.
        let ab = d.join(format!("ab-{i}.jfr"));
        let mut bytes = std::fs::read(&a).unwrap();
        let a_len = bytes.len();
        bytes.extend(std::fs::read(&b).unwrap());
        std::fs::write(&ab, &bytes).unwrap();
        let (wa, wb) = (jfr_print(&java, &a), jfr_print(&java, &b));
        assert_eq!(
            summary(&ab)["safepoints"].as_u64().unwrap(),
            wa.safepoints + wb.safepoints,
            "{java:?}: two chunks"
        );
        // Cut inside the second (as a copy taken while a chunk is being written): the first is
        // read whole, and the loss is said.
        let cut = d.join(format!("cut-{i}.jfr"));
        std::fs::write(&cut, &bytes[..a_len + (bytes.len() - a_len) / 2]).unwrap();
        let (code, out, err) = logs(&["--json", cut.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["safepoints"].as_u64().unwrap(),
            wa.safepoints,
            "{java:?}: the whole first chunk"
        );
        let notes = v["notes"].to_string();
        assert!(
            notes.contains(&format!("byte {a_len}")) && notes.contains("cut short"),
            "{java:?}: {notes}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_jfr_without_safepoint_events_says_how_to_record_them() {
    let _x = exclusive();
    let d = scratch("logs-jfr-default");
    // Not JFR's `default`: it records jdk.SafepointBegin above 10 ms, which a slow machine
    // reaches (a CI run did). Settings with the safepoint events off and one event on.
    let jfc = d.join("no-safepoints.jfc");
    let off = [
        "jdk.SafepointBegin",
        "jdk.SafepointStateSynchronization",
        "jdk.ExecuteVMOperation",
        "jdk.SafepointEnd",
    ]
    .map(|e| format!("<event name=\"{e}\"><setting name=\"enabled\">false</setting></event>"))
    .join("");
    std::fs::write(&jfc, format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?><configuration version=\"2.0\">{off}<event name=\"jdk.CPULoad\"><setting name=\"enabled\">true</setting><setting name=\"period\">100 ms</setting></event></configuration>")).unwrap();
    let f = d.join("no-safepoints.jfr");
    record(&java17(), &f, jfc.to_str().unwrap(), 1);
    let (code, _, err) = logs(&[f.to_str().unwrap()]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("no safepoint events") && err.contains("docs/formats/jfr.md"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Damage anywhere in a real recording: cut, overwritten bytes, a huge count. Never a panic, a
/// hang or an abort; a clear exit code; never more safepoints than the file had. The seed is
/// printed; `STALLSCOPE_JFR_SEED` replays it.
#[test]
fn damaged_jfr_files_give_clear_answers() {
    let _x = exclusive();
    let d = scratch("logs-jfr-damage");
    let f = d.join("whole.jfr");
    record(&java17(), &f, settings().to_str().unwrap(), 1);
    let whole = std::fs::read(&f).unwrap();
    let had = summary(&f)["safepoints"].as_u64().unwrap();
    let (seed, mut rng) = jfr_damage_seed();
    let damaged = d.join("damaged.jfr");
    for case in 0..48 {
        let (b, what) = damage_jfr(&mut rng, &whole, case);
        std::fs::write(&damaged, &b).unwrap();
        let (code, out, err) = logs(&["--json", damaged.to_str().unwrap()]);
        let ctx = format!("seed {seed}, case {case}: {what}: exit {code}\n{err}");
        assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{ctx}");
        assert!([0, 3, 4, 5].contains(&code), "{ctx}");
        if code == 0 {
            let v: Value = serde_json::from_str(&out).unwrap();
            assert!(v["safepoints"].as_u64().unwrap() <= had, "{ctx}");
        } else {
            assert_eq!(err.lines().count(), 1, "one clear line: {ctx}");
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A damaged JDK 17 recording (from a CI run of the damage test) on which the JFR parser spins
/// for ever: a record of size 0 it never moves past. The reader's CPU limit ends it: one clear
/// line, in seconds, and no reader left behind.
#[test]
fn damage_that_loops_the_parser_is_one_clear_line_and_leaves_no_reader() {
    let f = root().join("tests/fixtures/logs/damaged-jdk17-record-of-size-0-loops-the-parser.jfr");
    let (code, _, err) = logs(&["--json", f.to_str().unwrap()]);
    assert_eq!(code, 5, "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("damage that loops the JFR parser"), "{err}");
    let left = std::process::Command::new("pgrep")
        .args(["-f", "jfr-chunks.*record-of-size-0"])
        .output()
        .unwrap();
    assert!(left.stdout.is_empty(), "a reader left: {}", String::from_utf8_lossy(&left.stdout));
}

/// A damaged JDK 17 recording whose count asks the parser for 6 GB (a CI run's case): the
/// reader's allocation fails under its limit and it aborts. The answer is still one clear line,
/// even with RUST_BACKTRACE set (the abort then prints a backtrace after its message).
#[test]
fn a_count_that_asks_for_gigabytes_is_one_clear_line() {
    let f = root().join("tests/fixtures/logs/damaged-jdk17-count-of-6gb.jfr");
    let o = stallscope()
        .args(["logs", f.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("memory allocation of")
            && !err.contains("RUST_BACKTRACE")
            && !err.contains("stack backtrace"),
        "{err}"
    );
}
