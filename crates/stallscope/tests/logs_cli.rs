//! How `stallscope logs` behaves as a command: inputs, filters, outputs, and bad input.

mod common;
use common::stallscope;

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/logs").join(name)
}

const JDK17_TIMEOUT: &str =
    "jdk17-parallel-countedloop-timeout-safepoint_all_debug-uptime_timenanos_level_tags.log";
const JDK8_GC: &str = "synthetic-jdk8-parallel-gcdetails-stoppedtime-concurrenttime-datestamps.log";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Out {
    let mut child = stallscope()
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stallscope");
    if let Some(data) = stdin {
        let mut w = child.stdin.take().unwrap();
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = w.write_all(&data);
        });
    }
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

fn json(args: &[&str]) -> Value {
    let o = run(args, None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    serde_json::from_str(&o.stdout).unwrap()
}

#[test]
fn human_report_has_every_section() {
    let o = run(&["logs", fixture(JDK17_TIMEOUT).to_str().unwrap()], None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for section in [
        "Summary",
        "safepoints",
        "% of the time",
        "Percentiles",
        "p99.9",
        "VM operations, by total stopped time",
        "Longest times to safepoint",
        "Worst 1m 00s windows",
        "Threads SafepointTimeout named",
        "\"sum-loop\"",
        "Formats recognised: ",
        "not recognised",
    ] {
        assert!(o.stdout.contains(section), "missing {section:?} in\n{}", o.stdout);
    }
}

#[test]
fn empty_binary_and_recordless_inputs_get_distinct_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, b"").unwrap();
    let o = run(&["logs", empty.to_str().unwrap()], None);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("Error: ") && o.stderr.contains("empty.log is empty"),
        "{}",
        o.stderr
    );
    assert_eq!(o.stderr.lines().count(), 1, "one line: {}", o.stderr);

    let bin = dir.path().join("heap.hprof");
    std::fs::write(&bin, [0x4a, 0x41, 0x56, 0x41, 0x00, 0x01, 0xff, 0xfe, 0x00, 0x00]).unwrap();
    let o = run(&["logs", bin.to_str().unwrap()], None);
    assert_eq!(o.code, 4, "{}", o.stderr);
    assert!(o.stderr.contains("heap.hprof: binary data at byte 4"), "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1);

    let gc_only = dir.path().join("gc-only.log");
    std::fs::write(&gc_only, "[0.1s][info][gc] Using G1\n[0.5s][info][gc] GC(0) Pause Young (Normal) 24M->2M(256M) 1.2ms\n").unwrap();
    let o = run(&["logs", gc_only.to_str().unwrap()], None);
    assert_eq!(o.code, 5, "{}", o.stderr);
    assert!(
        o.stderr.contains("no safepoint records in 2 lines")
            && o.stderr.contains("-Xlog:safepoint"),
        "{}",
        o.stderr
    );

    // Record-like lines that do not parse are shown, with file and line, instead of the advice
    // to turn on a flag that is evidently on.
    let odd = dir.path().join("odd.log");
    std::fs::write(&odd, "[0.1s][info][gc] Using G1\n[1.2s][info][safepoint] Safepoint \"G1\", Time since last: soon\n").unwrap();
    let o = run(&["logs", odd.to_str().unwrap()], None);
    assert_eq!(o.code, 5, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("odd.log:2: [1.2s][info][safepoint] Safepoint \"G1\", Time since last: soon"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("-Xlog:safepoint ("), "{}", o.stderr);

    let o = run(&["logs", dir.path().join("missing.log").to_str().unwrap()], None);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("missing.log: cannot read it"), "{}", o.stderr);
    assert!(!o.stderr.contains("panicked"));
}

#[test]
fn stdin_and_gzip_read_like_the_file() {
    let path = fixture(JDK8_GC);
    let plain = json(&["logs", "--json", path.to_str().unwrap()]);
    let bytes = std::fs::read(&path).unwrap();
    let o = run(&["logs", "--json", "-"], Some(&bytes));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let from_stdin: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(from_stdin["total_stopped_ns"], plain["total_stopped_ns"]);
    assert_eq!(from_stdin["safepoints"], plain["safepoints"]);

    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("gc.log.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(&bytes).unwrap();
    let compressed = enc.finish().unwrap();
    std::fs::write(&gz, &compressed).unwrap();
    let v = json(&["logs", "--json", gz.to_str().unwrap()]);
    assert_eq!(v["total_stopped_ns"], plain["total_stopped_ns"]);
    assert_eq!(v["inputs"][0]["gzip"], true);

    // A gzip cut short: what is there is analysed, and the report says so.
    let cut = dir.path().join("cut.log.gz");
    std::fs::write(&cut, &compressed[..compressed.len() * 2 / 3]).unwrap();
    let o = run(&["logs", "--json", cut.to_str().unwrap()], None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["inputs"][0]["truncated"], true);
    let n = v["safepoints"].as_u64().unwrap();
    assert!(n > 100 && n < plain["safepoints"].as_u64().unwrap(), "{n}");
    assert!(v["notes"][0].as_str().unwrap().contains("ends early"));
}

#[test]
fn verbose_shows_unrecognised_lines_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("odd.log");
    std::fs::write(
        &f,
        "[1.000s][info][safepoint] Safepoint \"X\", Time since last: 1 ns, Reaching safepoint: 2 ns, At safepoint: 3 ns, Total: 5 ns\n\
         [1.100s][info][safepoint] A line HotSpot never printed\n\
         [1.200s][info][safepoint] Safepoint \"Y\", Time since last: 1 ns, Reaching safepoint: 2 ns, At safe\n\
         [1.300s][info][safepoint] Safepoint \"Z\", Time since last: 1 ns, Reaching safepoint: 4 ns, At safepoint: 3 ns, Total: 7 ns\n\
         [1.400s][info][safepoint] Safepoint \"W\", Time since",
    )
    .unwrap();
    let o = run(&["logs", "--verbose", f.to_str().unwrap()], None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout.contains("odd.log:2: [1.100s][info][safepoint] A line HotSpot never printed"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("odd.log:3: "), "{}", o.stdout);
    assert!(o.stdout.contains("2 not recognised"), "{}", o.stdout);
    assert!(
        o.stdout.contains("1 cut off at the end"),
        "a truncated last line is not an error: {}",
        o.stdout
    );
    let v = json(&["logs", "--json", f.to_str().unwrap()]);
    assert_eq!(v["safepoints"], 2);
    assert_eq!(v["total_stopped_ns"], 12);
}

#[test]
fn filters_select_safepoints() {
    let p = fixture("synthetic-jdk8-tty-stats_count1-stoppedtime-timeout.log");
    let p = p.to_str().unwrap();
    let all = json(&["logs", "--json", p]);
    let by_op = json(&["logs", "--json", "--op", "threaddump", p]);
    let expected =
        all["operations"].as_array().unwrap().iter().find(|o| o["name"] == "ThreadDump").unwrap();
    assert_eq!(by_op["safepoints"], expected["count"]);
    assert_eq!(by_op["total_stopped_ns"], expected["total_ns"]);

    let slow = json(&["logs", "--json", "--min-ttsp", "100ms", p]);
    let n = slow["safepoints"].as_u64().unwrap();
    assert!((1..10).contains(&n), "{n}");
    assert!(slow["percentiles"]["ttsp"]["p50_ns"].as_u64().unwrap() >= 100_000_000);

    let first = json(&["logs", "--json", "--until", "10s", p]);
    let rest = json(&["logs", "--json", "--since", "10s", p]);
    assert_eq!(
        first["safepoints"].as_u64().unwrap() + rest["safepoints"].as_u64().unwrap(),
        all["safepoints"].as_u64().unwrap()
    );
    assert_eq!(
        first["total_stopped_ns"].as_u64().unwrap() + rest["total_stopped_ns"].as_u64().unwrap(),
        all["total_stopped_ns"].as_u64().unwrap()
    );
    assert_eq!(first["filters"]["safepoints_read"], all["safepoints"]);

    // Wall-clock bounds on a log that has only uptime: counted and explained, not guessed.
    let o = run(&["logs", "--json", "--since", "2024-01-01T00:00:00", p], None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["filters"]["left_out_no_clock"], all["safepoints"]);
    assert!(v["notes"].to_string().contains("no stamp on the clock"));

    // Wall-clock bounds on a log with date stamps.
    let dated = fixture(JDK8_GC);
    let v = json(&[
        "logs",
        "--json",
        "--since",
        "2016-03-01T10:00:30",
        "--until",
        "2016-03-01 10:01:00",
        dated.to_str().unwrap(),
    ]);
    let n = v["safepoints"].as_u64().unwrap();
    assert!(n > 10 && n < 400, "{n}");

    let o = run(&["logs", "--since", "10:00", p], None);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("needs a date"), "{}", o.stderr);
    let o = run(&["logs", "--min-ttsp", "10", p], None);
    assert!(o.stderr.contains("no unit"), "{}", o.stderr);
}

#[test]
fn csv_has_one_row_per_safepoint() {
    let p = fixture(JDK17_TIMEOUT);
    let o = run(&["logs", "--csv", p.to_str().unwrap()], None);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v = json(&["logs", "--json", p.to_str().unwrap()]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("file,line,format,operation,"));
    assert_eq!(lines.len() as u64 - 1, v["safepoints"].as_u64().unwrap());
    let header: Vec<&str> = lines[0].split(',').collect();
    let total_col = header.iter().position(|h| *h == "total_ns").unwrap();
    let sum: u64 = lines[1..]
        .iter()
        .map(|l| l.split(',').nth(total_col).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, v["total_stopped_ns"].as_u64().unwrap());
    assert!(o.stdout.contains("sum-loop"), "culprits are in the rows");
}

/// Peak resident memory stays flat while a large log streams through stdin.
#[test]
fn memory_stays_bounded_on_a_large_stream() {
    let mut child = stallscope()
        .args(["logs", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut w = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let mut chunk = String::new();
        for i in 0..5000u64 {
            chunk.push_str(&format!(
                "[{}.{:03}s][info][safepoint] Safepoint \"G1CollectForAllocation\", Time since last: 1000 ns, Reaching safepoint: {} ns, Cleanup: 10 ns, At safepoint: 200 ns, Total: {} ns\n",
                i / 1000,
                i % 1000,
                100 + i,
                310 + i
            ));
            chunk.push_str(&format!("[{}.{:03}s][info][gc] GC({i}) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) 1.234ms\n", i / 1000, i % 1000));
        }
        // ~350 MB in all.
        for _ in 0..1000 {
            if w.write_all(chunk.as_bytes()).is_err() {
                break;
            }
        }
    });
    let mut peak_kb = 0u64;
    let status_path = format!("/proc/{pid}/status");
    let peak = std::thread::spawn(move || {
        while let Ok(s) = std::fs::read_to_string(&status_path) {
            if let Some(l) = s.lines().find(|l| l.starts_with("VmHWM:")) {
                peak_kb = l.split_whitespace().nth(1).unwrap().parse().unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        peak_kb
    });
    writer.join().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(v["safepoints"], 5_000_000);
    let peak_kb = peak.join().unwrap();
    assert!(peak_kb > 0 && peak_kb < 100 * 1024, "peak RSS {peak_kb} kB");
}

/// A file of several windows reads the same on one thread as on several, to the byte: every
/// fixture log (JDK 8 to 25, statistics tables and timeout blocks included) over and over; and
/// JDK 8's batched statistics tables over and over, where most windows begin inside a table.
#[test]
fn a_file_reads_the_same_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    let tables = vec![fixture("synthetic-jdk8-stats_count60-batched-stoppedtime-gcdetails.log")];
    for (name, inputs) in [("all.log", logs), ("tables.log", tables)] {
        let mut data = Vec::new();
        while data.len() < 6 << 20 {
            for p in &inputs {
                data.extend(std::fs::read(p).unwrap());
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, &data).unwrap();
        let p = path.to_str().unwrap();
        let one = run(&["logs", "--json", "--threads", "1", p], None);
        assert_eq!(one.code, 0, "{}", one.stderr);
        let v: Value = serde_json::from_str(&one.stdout).unwrap();
        assert!(v["safepoints"].as_u64().unwrap() > 10_000, "{name}: {}", v["safepoints"]);
        for n in ["2", "3", "4"] {
            let many = run(&["logs", "--json", "-j", n, p], None);
            assert_eq!(many.code, 0, "{}", many.stderr);
            assert!(many.stdout == one.stdout, "{name}: on {n} threads the analysis differs");
        }
    }
    let zero = run(&["logs", "--threads", "0", fixture(JDK8_GC).to_str().unwrap()], None);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
}
