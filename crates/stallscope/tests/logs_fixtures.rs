//! `stallscope logs --json` on every log fixture, checked against an oracle that reads the same
//! files with regular expressions, independently of the parser: counts, totals, per-operation
//! figures, TTSP percentiles and the threads SafepointTimeout named must agree exactly.

use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/logs")
}

fn stallscope(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope")).args(args).output().expect("run stallscope");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn json(path: &Path) -> Value {
    let (code, out, err) = stallscope(&["logs", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{}: {err}", path.display());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{}: {e}\n{out}", path.display()))
}

/// Seconds with a decimal fraction to ns, by string padding (not the parser's code).
fn secs_to_ns(int: &str, frac: &str) -> u64 {
    let mut f = frac.to_string();
    f.truncate(9);
    while f.len() < 9 {
        f.push('0');
    }
    int.parse::<u64>().unwrap() * 1_000_000_000 + f.parse::<u64>().unwrap()
}

#[derive(Debug, Default)]
struct Expected {
    ttsp: Vec<u64>,
    total: Vec<u64>,
    ops: Vec<String>,
    culprits: BTreeMap<String, u64>,
    shapes: Vec<&'static str>,
}

/// What a log holds, read with regular expressions.
fn oracle(text: &str) -> Expected {
    let jdk13 = Regex::new(r#"Safepoint "([^"]+)", Time since last: \d+ ns, Reaching safepoint: (\d+) ns, (Cleanup: \d+ ns, )?At safepoint: \d+ ns, (Leaving safepoint: \d+ ns, )?Total: (\d+) ns(, Threads: \d+ runnable, \d+ total)?"#).unwrap();
    let stopped = Regex::new(r"Total time for which application threads were stopped: (\d+)\.(\d+) seconds(?:, Stopping threads took: (\d+)\.(\d+) seconds)?").unwrap();
    let entering = Regex::new(r"Entering safepoint region: (.+)$").unwrap();
    let ms_row = Regex::new(r"^\s*\d+\.\d+: (.+?)\s+\[\s*\d+\s+\d+\s+\d+\s*\]\s*\[\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*\]").unwrap();
    let ns_row = Regex::new(r"\] (\S+)\s+\[\s+\d+\s+\d+ \]\[\s+(\d+)\s+(\d+)\s+(\d+)(?:\s+(\d+))? \]\s+\d+$").unwrap();
    let culprit = Regex::new(r##"# "(.*)" #\d+"##).unwrap();
    let mut e = Expected::default();
    let (mut a, mut b, mut rows_ms, mut rows_ns, mut names) = (vec![], vec![], vec![], vec![], vec![]);
    for line in text.lines() {
        if let Some(c) = jdk13.captures(line) {
            let shape = match (c.get(3).is_some(), c.get(4).is_some(), c.get(6).is_some()) {
                (_, _, true) => "jdk22-safepoint",
                (true, true, _) => "jdk21-safepoint",
                (true, false, _) => "jdk17-safepoint",
                _ => "jdk13-safepoint",
            };
            if !e.shapes.contains(&shape) {
                e.shapes.push(shape);
            }
            a.push((c[1].to_string(), c[2].parse::<u64>().unwrap(), c[5].parse::<u64>().unwrap()));
        } else if let Some(c) = stopped.captures(line) {
            let ttsp = c.get(3).map(|i| secs_to_ns(i.as_str(), &c[4]));
            b.push((secs_to_ns(&c[1], &c[2]), ttsp));
        } else if let Some(c) = entering.captures(line) {
            names.push(c[1].trim().to_string());
        } else if let Some(c) = ms_row.captures(line) {
            let ms = |i: usize| c[i].parse::<u64>().unwrap() * 1_000_000;
            rows_ms.push((c[1].trim().to_string(), ms(4), ms(4) + ms(5) + ms(6)));
        } else if let Some(c) = ns_row.captures(line) {
            let n = |i: usize| c.get(i).map(|m| m.as_str().parse::<u64>().unwrap());
            // JDK 13-21: sync cleanup vmop total; JDK 25: sync vmop total.
            let total = n(5).or(n(4)).unwrap();
            rows_ns.push((c[1].to_string(), n(2).unwrap(), total));
        }
        if let Some(c) = culprit.captures(line) {
            *e.culprits.entry(c[1].to_string()).or_default() += 1;
        }
    }
    if !a.is_empty() {
        for (op, ttsp, total) in a {
            e.ops.push(op);
            e.ttsp.push(ttsp);
            e.total.push(total);
        }
    } else if !b.is_empty() {
        let source: Vec<String> = if !names.is_empty() { names } else { rows_ms.iter().map(|r| r.0.clone()).collect() };
        for (i, (total, ttsp)) in b.into_iter().enumerate() {
            e.ops.push(source.get(i).cloned().unwrap_or_else(|| "unknown".into()));
            e.total.push(total);
            if let Some(t) = ttsp {
                e.ttsp.push(t);
            }
        }
    } else {
        for (op, sync, total) in rows_ms.into_iter().chain(rows_ns) {
            e.ops.push(op);
            e.ttsp.push(sync);
            e.total.push(total);
        }
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
        .map(|o| (o["name"].as_str().unwrap().to_string(), (o["count"].as_u64().unwrap(), o["total_ns"].as_u64().unwrap(), o["ttsp_max_ns"].as_u64().unwrap())))
        .collect();
    if e.ttsp.len() == e.total.len() {
        assert_eq!(got, ops, "{name}: per-operation count, total and TTSP max");
    }
    let culprits: BTreeMap<String, u64> =
        v["timeout_culprits"].as_array().unwrap().iter().map(|c| (c["name"].as_str().unwrap().to_string(), c["count"].as_u64().unwrap())).collect();
    assert_eq!(culprits, e.culprits, "{name}: SafepointTimeout culprits");
    let ids: Vec<&str> = v["formats"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
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
    let (code, out, _) = stallscope(&["logs", "--json", "--no-rotation", dir.join("gc.log").to_str().unwrap()]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["inputs"].as_array().unwrap().len(), 1);
}

#[test]
fn counted_loop_timeouts_name_the_summing_thread_on_both_jdks() {
    for jdk in ["jdk17", "jdk25"] {
        let p = fixtures().join(format!("{jdk}-parallel-countedloop-timeout-safepoint_all_debug-uptime_timenanos_level_tags.log"));
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
    let v = json(&fixtures().join("jdk17-g1-churn-safepoint-utctime_uptimenanos_timenanos_hostname.log"));
    let s = &v["longest_ttsp"][0]["start"];
    assert!(s["uptime_ns"].as_u64().is_some() && s["mono_ns"].as_u64().is_some() && s["wall"]["epoch_ms"].as_i64().is_some(), "{s}");
    assert!(s["mono_ns"].as_u64() > s["uptime_ns"].as_u64(), "timenanos is the machine's monotonic clock: {s}");
}
