//! The parser against an oracle: every real log fixture read with regular expressions,
//! independently of the parser (no code shared), and with [`Scanner`]: the safepoints' count,
//! total, time to safepoint, per-operation figures, the threads SafepointTimeout named and the
//! shapes seen must agree exactly. (`stallscope logs` is checked against this crate's own
//! results in the binary's tests.)

use hotspot_log::{Safepoint, Scanner};
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/logs")
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
    let ns_row = Regex::new(
        r"\] (\S+)\s+\[\s+\d+\s+\d+ \]\[\s+(\d+)\s+(\d+)\s+(\d+)(?:\s+(\d+))? \]\s+\d+$",
    )
    .unwrap();
    let culprit = Regex::new(r##"# "(.*)" #\d+"##).unwrap();
    let mut e = Expected::default();
    let (mut a, mut b, mut rows_ms, mut rows_ns, mut names) =
        (vec![], vec![], vec![], vec![], vec![]);
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
        let source: Vec<String> =
            if !names.is_empty() { names } else { rows_ms.iter().map(|r| r.0.clone()).collect() };
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

/// What the parser makes of a log: its safepoints, the culprits of safepoints never completed,
/// and the shapes it recognised lines in.
fn parse(text: &str) -> (Vec<Safepoint>, Vec<hotspot_log::Culprit>, Vec<&'static str>, u64) {
    let mut got = Vec::new();
    let mut scanner = Scanner::new();
    scanner.scan(0, text.as_bytes(), &mut |s: &Safepoint| got.push(s.clone())).unwrap();
    let rep = scanner.finish(&mut |s: &Safepoint| got.push(s.clone()));
    let shapes = rep.by_format.keys().map(|f| f.id()).collect();
    (got, rep.orphan_culprits, shapes, rep.lines_unrecognised)
}

fn check(name: &str, text: &str) {
    let e = oracle(text);
    let n = e.total.len();
    assert!(n > 0, "{name}: the oracle found no records");
    let (got, orphans, shapes, unrecognised) = parse(text);
    assert_eq!(got.len(), n, "{name}: count");
    let total: Vec<u64> = got.iter().map(|s| s.total_ns).collect();
    assert_eq!(total, e.total, "{name}: each safepoint's total, in order");
    let ttsp: Vec<u64> = got.iter().filter_map(|s| s.ttsp_ns).collect();
    assert_eq!(ttsp, e.ttsp, "{name}: each time to safepoint, in order");
    let ops: Vec<&str> = got.iter().map(|s| &*s.op).collect();
    assert_eq!(ops, e.ops, "{name}: each operation, in order");
    let mut culprits: BTreeMap<String, u64> = BTreeMap::new();
    for c in got.iter().flat_map(|s| &s.culprits).chain(&orphans) {
        *culprits.entry(c.name.clone()).or_default() += 1;
    }
    assert_eq!(culprits, e.culprits, "{name}: SafepointTimeout culprits");
    for s in &e.shapes {
        assert!(shapes.contains(s), "{name}: expected shape {s} among {shapes:?}");
    }
    assert_eq!(unrecognised, 0, "{name}: every line of a real JVM log is known");
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
        check(&name, &std::fs::read_to_string(&p).unwrap());
        seen += 1;
    }
    assert!(seen >= 20, "expected the full fixture set, found {seen}");
}

/// A JVM in a locale with a decimal comma prints its seconds with one: the parser reads such a
/// copy to the figures the oracle reads from the original.
#[test]
fn decimal_commas_read_as_the_same_log_with_points() {
    let seconds = Regex::new(r"(\d+)\.(\d+)( seconds|s\]|: )").unwrap();
    for name in [
        "synthetic-jdk8-stoppedtime-bare.log",
        "synthetic-jdk8-parallel-gcdetails-stoppedtime-concurrenttime-datestamps.log",
        "jdk17-g1-churn-gc_all+safepoint-default_decorators.log",
    ] {
        let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
        let comma: String =
            text.lines().map(|l| seconds.replace_all(l, "$1,$2$3").into_owned() + "\n").collect();
        assert_ne!(comma, text, "{name}: the copy has commas");
        let (got, ..) = parse(&comma);
        let e = oracle(&text);
        let total: Vec<u64> = got.iter().map(|s| s.total_ns).collect();
        assert_eq!(total, e.total, "{name} with commas: totals");
        let ttsp: Vec<u64> = got.iter().filter_map(|s| s.ttsp_ns).collect();
        assert_eq!(ttsp, e.ttsp, "{name} with commas: times to safepoint");
    }
}
