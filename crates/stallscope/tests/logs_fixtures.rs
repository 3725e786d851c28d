//! `stallscope logs --json` on every log fixture, checked against what the parser's library
//! reads of the same files (itself checked against a regex oracle in hotspot-log's
//! tests/oracle.rs): counts, totals, per-operation figures, TTSP percentiles and the threads
//! SafepointTimeout named must agree exactly through the command's view.

mod common;
use common::stallscope;

use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/logs")
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = stallscope().args(args).output().expect("run stallscope");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(path: &Path) -> Value {
    let (code, out, err) = run(&["logs", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{}: {err}", path.display());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}\n{out}", path.display()))
}

#[derive(Debug, Default)]
struct Expected {
    ttsp: Vec<u64>,
    total: Vec<u64>,
    ops: Vec<String>,
    culprits: BTreeMap<String, u64>,
    shapes: Vec<&'static str>,
}

/// What a log holds, as the parser reads it through its library API (hotspot-log's own tests
/// check that against an oracle of regular expressions, tests/oracle.rs there).
fn oracle(text: &str) -> Expected {
    let mut got = Vec::new();
    let mut scanner = hotspot_log::Scanner::new();
    scanner
        .scan(0, text.as_bytes(), &mut |s: &hotspot_log::Safepoint| got.push(s.clone()))
        .unwrap();
    let rep = scanner.finish(&mut |s: &hotspot_log::Safepoint| got.push(s.clone()));
    let mut e = Expected {
        ttsp: got.iter().filter_map(|s| s.ttsp_ns).collect(),
        total: got.iter().map(|s| s.total_ns).collect(),
        ops: got.iter().map(|s| s.op.to_string()).collect(),
        shapes: rep.by_format.keys().map(|f| f.id()).collect(),
        ..Expected::default()
    };
    for c in got.iter().flat_map(|s| &s.culprits).chain(&rep.orphan_culprits) {
        *e.culprits.entry(c.name.clone()).or_default() += 1;
    }
    e
}

fn hdr(values: &[u64]) -> hdrhistogram::Histogram<u64> {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for &v in values {
        h.record(v).unwrap();
    }
    h
}

fn check(name: &str, text: &str, v: &Value) {
    let e = oracle(text);
    let n = e.total.len() as u64;
    assert!(n > 0, "{name}: the oracle found no records");
    assert_eq!(v["safepoints"], n, "{name}: count");
    assert_eq!(v["total_stopped_ns"], e.total.iter().sum::<u64>(), "{name}: total stopped");
    assert_eq!(v["ttsp_total_ns"], e.ttsp.iter().sum::<u64>(), "{name}: TTSP total");
    let max = *e.ttsp.iter().max().unwrap();
    assert_eq!(v["ttsp_max_ns"], max, "{name}: TTSP max");
    let h = hdr(&e.ttsp);
    let p = &v["percentiles"]["ttsp"];
    for (key, q) in [("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p99_9_ns", 0.999)] {
        assert_eq!(p[key], h.value_at_quantile(q).min(max), "{name}: TTSP {key}");
    }
    assert_eq!(p["max_ns"], max, "{name}");
    let mut ops: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for (i, op) in e.ops.iter().enumerate() {
        let x = ops.entry(op.clone()).or_default();
        x.0 += 1;
        x.1 += e.total[i];
        x.2 = x.2.max(*e.ttsp.get(i).unwrap_or(&0));
    }
    let got: BTreeMap<String, (u64, u64, u64)> = v["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap().to_string(),
                (
                    o["count"].as_u64().unwrap(),
                    o["total_ns"].as_u64().unwrap(),
                    o["ttsp_max_ns"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    if e.ttsp.len() == e.total.len() {
        assert_eq!(got, ops, "{name}: per-operation count, total and TTSP max");
    }
    let culprits: BTreeMap<String, u64> = v["timeout_culprits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(culprits, e.culprits, "{name}: SafepointTimeout culprits");
    let ids: Vec<&str> =
        v["formats"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
    for s in &e.shapes {
        assert!(ids.contains(s), "{name}: expected shape {s} among {ids:?}");
    }
    assert_eq!(v["lines"]["unrecognised"], 0, "{name}: every line of a real JVM log is known");
}

#[test]
fn every_single_file_fixture_matches_the_oracle() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) != Some("log") {
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let v = json(&p);
        check(&name, &text, &v);
        seen += 1;
    }
    assert!(seen >= 20, "expected the full fixture set, found {seen}");
}

#[test]
fn rotated_set_reads_every_file_once_oldest_first() {
    let dir = fixtures().join("jdk17-g1-churn-rotated-filecount3-filesize24k");
    let files = ["gc.log", "gc.log.0", "gc.log.1", "gc.log.2"];
    let first_uptime = Regex::new(r"^\[(\d+)\.(\d+)s\]").unwrap();
    let mut texts: Vec<(u64, String)> = files
        .iter()
        .map(|f| {
            let t = std::fs::read_to_string(dir.join(f)).unwrap();
            let c = first_uptime.captures(t.lines().next().unwrap()).unwrap();
            (c[1].parse::<u64>().unwrap() * 1000 + c[2].parse::<u64>().unwrap(), t)
        })
        .collect();
    texts.sort();
    let joined: String = texts.iter().map(|(_, t)| t.as_str()).collect();
    // Naming any one member reads the whole set.
    for f in files {
        let v = json(&dir.join(f));
        assert_eq!(v["inputs"].as_array().unwrap().len(), 4, "{f}");
        check(&format!("rotated via {f}"), &joined, &v);
    }
    let (code, out, _) =
        run(&["logs", "--json", "--no-rotation", dir.join("gc.log").to_str().unwrap()]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["inputs"].as_array().unwrap().len(), 1);
}

#[test]
fn counted_loop_timeouts_name_the_summing_thread_on_both_jdks() {
    for jdk in ["jdk17", "jdk25"] {
        let p = fixtures().join(format!(
            "{jdk}-parallel-countedloop-timeout-safepoint_all_debug-uptime_timenanos_level_tags.log"
        ));
        let v = json(&p);
        let c = &v["timeout_culprits"][0];
        assert_eq!(c["name"], "sum-loop", "{jdk}");
        assert!(c["os_tids"][0].as_u64().unwrap() > 0, "{jdk}: the native tid is kept");
        // The longest TTSP was held up by the thread SafepointTimeout named.
        let top = &v["longest_ttsp"][0];
        assert!(top["ttsp_ns"].as_u64().unwrap() > 200_000_000, "{jdk}: {top}");
        assert_eq!(top["culprits"][0], "sum-loop", "{jdk}");
    }
}

#[test]
fn decorators_give_every_clock() {
    let v = json(
        &fixtures().join("jdk17-g1-churn-safepoint-utctime_uptimenanos_timenanos_hostname.log"),
    );
    let s = &v["longest_ttsp"][0]["start"];
    assert!(
        s["uptime_ns"].as_u64().is_some()
            && s["mono_ns"].as_u64().is_some()
            && s["wall"]["epoch_ms"].as_i64().is_some(),
        "{s}"
    );
    assert!(
        s["mono_ns"].as_u64() > s["uptime_ns"].as_u64(),
        "timenanos is the machine's monotonic clock: {s}"
    );
}

/// A scratch directory under target/, removed by the caller's last line.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A JVM in a locale with a decimal comma prints its seconds with one. The oracle reads the
/// same log as printed with points; the parser must read the comma copy to the same figures,
/// whole or mixed line by line with the original.
#[test]
fn decimal_commas_read_as_the_same_log_with_points() {
    let dir = scratch("decimal-commas");
    let seconds = Regex::new(r"(\d+)\.(\d+)( seconds|s\]|: )").unwrap();
    for name in [
        "synthetic-jdk8-stoppedtime-bare.log",
        "synthetic-jdk8-parallel-gcdetails-stoppedtime-concurrenttime-datestamps.log",
        "jdk17-g1-churn-gc_all+safepoint-default_decorators.log",
    ] {
        let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
        let points = json(&fixtures().join(name));
        for mixed in [false, true] {
            let mut comma: String = text
                .lines()
                .enumerate()
                .map(|(i, l)| {
                    if mixed && i % 2 == 0 {
                        l.to_string()
                    } else {
                        seconds.replace_all(l, "$1,$2$3").into_owned()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            if text.ends_with('\n') {
                comma.push('\n');
            }
            assert_ne!(comma, text, "{name}: the copy has commas");
            let p = dir.join(format!("{}{name}", if mixed { "mixed-" } else { "" }));
            std::fs::write(&p, &comma).unwrap();
            let v = json(&p);
            check(&format!("{name} with commas (mixed: {mixed})"), &text, &v);
            for key in ["span_ns", "runs", "clock", "total_stopped_ns"] {
                assert_eq!(v[key], points[key], "{name} (mixed: {mixed}): {key}");
            }
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Uptime never goes back in these logs: there is one JVM run, and the span is what the records
/// say, from the first pause's start (its end stamp less its length) to the last stamp.
#[test]
fn a_record_that_began_before_the_first_stamp_is_not_a_second_run() {
    let dir = scratch("phantom-runs");
    let one = dir.join("one.log");
    std::fs::write(&one, "101.000: Total time for which application threads were stopped: 1.0010000 seconds, Stopping threads took: 0.0000100 seconds\n").unwrap();
    let v = json(&one);
    assert_eq!(v["runs"], 1, "{v}");
    assert_eq!(v["span_ns"], 1_001_000_000u64, "{v}");
    // JDK 8 statistics rows print when the safepoint began; two rows 1.5 s apart.
    let rows = dir.join("rows.log");
    std::fs::write(
        &rows,
        "         vmop                    [threads: total initially_running wait_to_block]    [time: spin block sync cleanup vmop] page_trap_count\n\
         10.118: ParallelGCFailedAllocation       [      10          0              0    ]      [     0     0     2     0   100    ]  0\n\
         11.618: ParallelGCFailedAllocation       [      10          0              0    ]      [     0     0     3     0   100    ]  0\n",
    )
    .unwrap();
    let v = json(&rows);
    assert_eq!(v["runs"], 1, "{v}");
    let (first, last_end) = (10_118_000_000u64, 11_618_000_000u64 + 3_000_000 + 100_000_000);
    assert_eq!(v["span_ns"], last_end - first, "{v}");
    let pct = v["stopped_pct"].as_f64().unwrap();
    assert!((pct - 205e6 * 100.0 / (last_end - first) as f64).abs() < 1e-9, "{pct}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// What the log does not say is null, never zero; a lone record at the end with no newline is
/// a record.
#[test]
fn unknown_is_null_and_a_last_line_without_newline_counts() {
    let dir = scratch("null-not-zero");
    let bare = dir.join("bare.log");
    std::fs::write(&bare, "Total time for which application threads were stopped: 0.0010000 seconds\nTotal time for which application threads were stopped: 0.0020000 seconds\n").unwrap();
    let v = json(&bare);
    assert_eq!(v["safepoints"], 2);
    for key in ["ttsp_total_ns", "ttsp_max_ns", "clock", "runs", "span_ns"] {
        assert!(v[key].is_null(), "{key} is unknown here: {v}");
    }
    assert!(
        v["operations"][0]["ttsp_max_ns"].is_null()
            && v["operations"][0]["ttsp_total_ns"].is_null(),
        "{v}"
    );
    let (code, text, err) = run(&["logs", bare.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let row =
        text.lines().find(|l| l.trim_start().starts_with("unknown")).expect("the operations table");
    assert!(!row.contains("0 ns"), "TTSP max is not known, not zero: {row}");
    for (name, body) in [
        (
            "jdk8.log",
            "5.000: Total time for which application threads were stopped: 0.0010000 seconds, Stopping threads took: 0.0001000 seconds",
        ),
        (
            "ul.log",
            "[0.500s][info][safepoint] Safepoint \"G1CollectForAllocation\", Time since last: 1000 ns, Reaching safepoint: 2000 ns, At safepoint: 3000 ns, Total: 5000 ns",
        ),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        let v = json(&p);
        assert_eq!(v["safepoints"], 1, "{name}: {v}");
        assert_eq!(v["lines"]["truncated_last"], 0, "{name}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
