//! The JSON schema document and the JSON output describe the same fields, no more, no less.

mod common;
use common::stallscope;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

/// Leaves of the output: scalars, arrays of scalars, and open-ended objects, by dotted path
/// (`[]` marks an array of objects). Also every intermediate path, into `all`.
fn paths(v: &Value, prefix: &str, leaves: &mut BTreeSet<String>, all: &mut BTreeSet<String>) {
    all.insert(prefix.to_string());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                if matches!(k.as_str(), "since" | "until" | "wall" | "start_wall") {
                    leaves.insert(p.clone());
                    all.insert(p);
                } else {
                    paths(x, &p, leaves, all);
                }
            }
        }
        // An empty array says nothing about its elements; another run fills it.
        Value::Array(a) if a.is_empty() => {}
        Value::Array(a) if a.iter().any(Value::is_object) => {
            let p = format!("{prefix}[]");
            leaves.insert(p.clone());
            for x in a {
                paths(x, &p, leaves, all);
            }
        }
        _ => {
            leaves.insert(prefix.to_string());
        }
    }
}

#[test]
fn documented_fields_are_exactly_the_output_fields() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/formats/logs-json.md")).unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(|s| s.to_string())
        .collect();
    let (mut seen, mut all) = (BTreeSet::new(), BTreeSet::new());
    let odd = std::env::temp_dir().join(format!("stallscope-schema-{}.log", std::process::id()));
    std::fs::write(&odd, "[1.0s][info][safepoint] Safepoint \"X\", Time since last: 1 ns, Reaching safepoint: 2 ns, At safepoint: 3 ns, Total: 5 ns\n[1.1s][info][safepoint] never printed by HotSpot\n").unwrap();
    // Two fixtures between them fill every optional part (culprits, windows, filters, examples).
    for (f, extra) in [
        (
            "jdk17-parallel-countedloop-timeout-safepoint_all_debug-uptime_timenanos_level_tags.log",
            vec![],
        ),
        (
            "jdk17-g1-churn-rotated-filecount3-filesize24k/gc.log",
            vec!["--since", "0.5s", "--until", "2024-01-01T00:00:00"],
        ),
        (
            "jdk25-zgc-churn-safepoint_all_trace-time_uptimemillis_pid_tid_level_tags.log",
            vec!["--op", "ThreadDump"],
        ),
        (odd.to_str().unwrap(), vec![]),
    ] {
        let p = root.join("tests/fixtures/logs").join(f);
        let mut args = vec!["logs", "--json"];
        args.extend(extra);
        args.push(p.to_str().unwrap());
        let out = stallscope().args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        paths(&v, "", &mut seen, &mut all);
    }
    let _ = std::fs::remove_file(&odd);
    // The three distributions share their fields; the document lists them once, under ttsp.
    let norm = |set: BTreeSet<String>| -> BTreeSet<String> {
        set.into_iter()
            .map(|p| {
                p.replace("percentiles.at_safepoint.", "percentiles.ttsp.")
                    .replace("percentiles.total.", "percentiles.ttsp.")
            })
            .collect()
    };
    let (seen, all) = (norm(seen), norm(all));
    let missing_from_doc: Vec<_> = seen.difference(&documented).collect();
    let missing_from_output: Vec<_> = documented.difference(&all).collect();
    assert!(missing_from_doc.is_empty(), "in the output but not documented: {missing_from_doc:?}");
    assert!(
        missing_from_output.is_empty(),
        "documented but never in the output: {missing_from_output:?}"
    );
}
