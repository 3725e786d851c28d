//! The doctor against real JVMs on this machine: each pathology is made to happen, recorded
//! by `stallscope run` or `attach`, and the diagnosed cause and culprit are checked.

mod common;

use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run_recorded(dir: &Path, java: &Path, jvm_args: &[&str], workload: &[&str]) -> Output {
    run_recorded_with(&[], dir, java, jvm_args, workload)
}

/// `stallscope run OPTIONS --out DIR -- JAVA JVM_ARGS -jar workloads.jar WORKLOAD`.
fn run_recorded_with(
    options: &[&str],
    dir: &Path,
    java: &Path,
    jvm_args: &[&str],
    workload: &[&str],
) -> Output {
    stallscope()
        .arg("run")
        .args(options)
        .args(["--out", dir.to_str().unwrap(), "--"])
        .arg(java)
        .args(jvm_args)
        .arg("-jar")
        .arg(workloads_jar())
        .args(workload)
        .output()
        .unwrap()
}

fn report_json(dir: &Path) -> Value {
    let o = stallscope().args(["report", "--json", dir.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Major faults the threads `tids` took during stall `n`: each thread's highest count sampled in
/// the stall less its count in the stall's baseline (a thread born in the stall counts from zero).
/// Read from the recorder's raw samples, apart from the doctor's reading of them.
fn major_faults_in_stall(rec: &recording::Recording, n: u32, tids: &[i64]) -> u64 {
    use std::collections::HashMap;
    let mut base: HashMap<i32, u64> = HashMap::new();
    let mut top: HashMap<i32, u64> = HashMap::new();
    for s in rec.samples.iter().filter(|s| s.stall == n) {
        for t in s.threads.iter().filter(|t| tids.contains(&(t.tid as i64))) {
            if s.baseline {
                base.insert(t.tid, t.majflt);
            } else {
                let m = top.entry(t.tid).or_default();
                *m = (*m).max(t.majflt);
            }
        }
    }
    top.iter().map(|(tid, m)| m.saturating_sub(base.get(tid).copied().unwrap_or(0))).sum()
}

fn causes(r: &Value) -> Vec<String> {
    r["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["findings"][0]["cause"].as_str().unwrap().to_string())
        .collect()
}

/// The stalls whose first finding is `cause`.
fn stalls_with<'a>(r: &'a Value, cause: &str) -> Vec<&'a Value> {
    r["stalls"].as_array().unwrap().iter().filter(|s| s["findings"][0]["cause"] == cause).collect()
}

fn culprit_names(s: &Value) -> Vec<String> {
    s["findings"][0]["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn counted_loop_runs_without_a_safepoint_poll_on_both_jdks() {
    let _x = exclusive();
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let dir = scratch(&format!("doctor-loop-{i}")).join("rec");
        let o = run_recorded(
            &dir,
            &java,
            &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
            &["counted-loop", "--duration", "4s", "--rounds", "300", "--trigger", "threaddump"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let live = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(live.contains("\"workload\":\"counted-loop\""), "the JVM's stdout passes through");
        assert!(
            !live.contains("SafepointSynchronize"),
            "SafepointTimeout's warnings stay out of the application's stdout"
        );
        let r = report_json(&dir);
        let hits = stalls_with(&r, "no-safepoint-poll");
        assert!(!hits.is_empty(), "{java:?}: {:?}", causes(&r));
        for s in &hits {
            assert_eq!(
                culprit_names(s),
                vec!["counted-loop".to_string()],
                "{java:?}: the culprit by its full Java name: {s}"
            );
            assert!(
                s["safepoint"]["ttsp_ns"].as_u64().unwrap()
                    > s["safepoint"]["at_safepoint_ns"].as_u64().unwrap()
            );
            // Its code, from the stack the stacks agent took when the recorder signalled the
            // thread in the stall: the workload's loop, named in the fix.
            let code = &s["findings"][0]["culprits"][0]["code"];
            let top = code["frames"][code["app_frame"].as_u64().unwrap_or(0) as usize]["method"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(
                top, "io.stallscope.workloads.CountedLoop.invoke",
                "{java:?}: the culprit's code: {code}"
            );
            let fix = s["findings"][0]["fix"].as_str().unwrap();
            assert!(fix.starts_with("the loop in CountedLoop.invoke (line "), "{java:?}: {fix}");
        }
        assert!(
            hits.iter()
                .any(|s| s["findings"][0]["culprits"][0]["code"]["event"] == "signal-sample"),
            "{java:?}: a stack taken in the stall: {hits:?}"
        );
        assert!(
            dir.join("stacks.jsonl").exists() && !dir.join("frames.jfr").exists(),
            "{java:?}: the stacks agent, not JFR (is target/debug/libstallscope_stacks.so built? `make test` builds it)"
        );
        assert!(
            hits.iter().any(|s| s["findings"][0]["confidence"] == "high"),
            "SafepointTimeout and /proc agree: high confidence"
        );

        // `report` prints exactly what the live run printed.
        let again = stallscope().args(["report", dir.to_str().unwrap()]).output().unwrap();
        let report = String::from_utf8_lossy(&again.stdout).into_owned();
        assert!(report.starts_with("stallscope run: "), "{report}");
        assert!(
            live.ends_with(&report),
            "live output and report differ:\n--- live\n{live}\n--- report\n{report}"
        );

        assert!(
            !r["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().contains("no stack")),
            "{java:?}: {}",
            r["notes"]
        );
        if java != java25() {
            continue;
        }

        // `run --jfr`: the stacks from a flight recording instead; JDK 25's safepoint-latency
        // sample says how long the loop held the thread from its poll.
        let dir = dir.with_file_name("rec-jfr");
        let o = run_recorded_with(
            &["--jfr"],
            &dir,
            &java,
            &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
            &["counted-loop", "--duration", "4s", "--rounds", "300", "--trigger", "threaddump"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            dir.join("frames.jfr").exists() && !dir.join("stacks.jsonl").exists(),
            "--jfr: JFR, not the stacks agent"
        );
        let r = report_json(&dir);
        let hits = stalls_with(&r, "no-safepoint-poll");
        assert!(hits.iter().any(|s| s["findings"][0]["culprits"][0]["code"]["event"] == "jdk.SafepointLatency"), "JDK 25 says how long the loop held the thread from its poll: {hits:?}");
        for s in &hits {
            let code = &s["findings"][0]["culprits"][0]["code"];
            let top = code["frames"][code["app_frame"].as_u64().unwrap_or(0) as usize]["method"]
                .as_str()
                .unwrap_or_default();
            assert_eq!(
                top, "io.stallscope.workloads.CountedLoop.invoke",
                "--jfr: the culprit's code: {code}"
            );
        }

        // Without its safepoint log, the recording's flight recording gives the safepoints, and
        // the diagnosis stands.
        let bare = dir.with_file_name("rec-without-log");
        std::fs::create_dir(&bare).unwrap();
        for e in
            std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name() != "safepoint.log")
        {
            std::fs::copy(e.path(), bare.join(e.file_name())).unwrap();
        }
        let r = report_json(&bare);
        let notes: Vec<&str> =
            r["notes"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(
            notes.iter().any(|n| n.contains("safepoints read from") && n.contains("frames.jfr")),
            "{java:?}: {notes:?}"
        );
        let hits = stalls_with(&r, "no-safepoint-poll");
        assert!(!hits.is_empty(), "{java:?} from JFR: {:?}", causes(&r));
        for s in &hits {
            assert_eq!(
                culprit_names(s),
                vec!["counted-loop".to_string()],
                "{java:?} from JFR: {s}"
            );
            assert!(
                s["safepoint"]["ttsp_ns"].as_u64().unwrap()
                    > s["safepoint"]["at_safepoint_ns"].as_u64().unwrap()
            );
        }
    }
}

#[test]
fn mapped_read_on_a_slow_disk_is_a_major_fault_on_the_named_file_on_both_jdks() {
    let _x = exclusive();
    let d = scratch("doctor-mmap");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_random(&back.join("test.dat"), 24 << 20);
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "300ms"]);
    let file = mnt.join("test.dat");
    let mut seventeen = None;
    for (jdk, java) in [("17", java17()), ("25", java25())] {
        evict(&file);
        let dir = d.join(format!("rec-{jdk}"));
        // Five reads: the thread dump asked for in the first fault is a VM operation queued
        // behind the workload's own (its trigger's dump, which waits for the next fault), so it
        // is taken at the reader's poll one or two faults later; a reader whose last read that
        // was has exited, and the dump has no stack of it (seen in CI with three reads: the
        // dump came 2.65 s after the ask, after the third fault).
        let o = run_recorded(
            &dir,
            &java,
            &[],
            &[
                "mapped-read",
                "--file",
                file.to_str().unwrap(),
                "--mode",
                "mmap",
                "--reads",
                "5",
                "--stride",
                "4m",
                "--chunk",
                "512k",
            ],
        );
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report_json(&dir);
        let hits: Vec<Value> = stalls_with(&r, "major-fault").into_iter().cloned().collect();
        assert!(!hits.is_empty(), "JDK {jdk}: {:?}", causes(&r));
        let s = &hits[0];
        assert!(s["duration_ns"].as_u64().unwrap() >= 300_000_000, "JDK {jdk}: {s}");
        let c = &s["findings"][0]["culprits"][0];
        assert_eq!(c["name"], "reader-thread", "JDK {jdk}: {s}");
        assert!(c["description"].as_str().unwrap().contains("not in a syscall"), "JDK {jdk}: {c}");
        assert!(
            c["files"].as_array().unwrap().iter().any(|f| f.as_str().unwrap().contains("test.dat")),
            "JDK {jdk}: the mapped file is named: {c}"
        );
        assert_eq!(s["findings"][0]["confidence"], "high", "JDK {jdk}");
        // Its code: the thread is signalled in the fault and takes the signal when the fault is
        // over, where it stopped: in the copy the reader's method made.
        let frames = c["code"]["frames"]
            .as_array()
            .unwrap_or_else(|| panic!("JDK {jdk}: the reader's code is named: {s}"));
        assert!(
            frames.iter().any(|f| f["method"]
                .as_str()
                .unwrap()
                .starts_with("io.stallscope.workloads.MappedRead")),
            "JDK {jdk}: {c}"
        );
        assert!(
            s["findings"][0]["fix"].as_str().unwrap().starts_with("the read in MappedRead"),
            "JDK {jdk}: {}",
            s["findings"][0]["fix"]
        );
        if jdk == "17" {
            seventeen = Some((r, hits));
        }
    }
    let (r, hits) = seventeen.unwrap();
    let hits: Vec<&Value> = hits.iter().collect();
    // With root, the page-fault tracepoint turns the fault into a file and an offset.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root for tracepoints (CI runs as root)"
    );
    assert_eq!(r["meta"]["tracepoints"], true, "{}", r["meta"]);
    let offsets: Vec<&str> = hits
        .iter()
        .flat_map(|s| {
            s["findings"][0]["culprits"][0]["files"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f.as_str())
        })
        .filter(|f| f.contains("page-fault tracepoint"))
        .collect();
    // Each read starts a 4 MiB stride; which of them a safepoint happened to wait on varies.
    let at_a_stride = |f: &&str| {
        f.strip_prefix("offset 0x")
            .and_then(|r| r.split(' ').next())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .is_some_and(|o| o % (4 << 20) == 0)
    };
    assert!(
        !offsets.is_empty() && offsets.iter().all(|f| at_a_stride(f) && f.contains("test.dat")),
        "each fault is at the start of a read's stride: {offsets:?}"
    );
}

#[test]
fn a_huge_set_memory_is_named_by_the_method_that_calls_it_on_both_jdks() {
    let _x = exclusive();
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let dir = scratch(&format!("doctor-setmemory-{i}")).join("rec");
        // 12 s: room for two dumps (one per 10 s for stalls this short), so one stall the doctor
        // reads as something else does not decide the test.
        let o = run_recorded(
            &dir,
            &java,
            &[],
            &["set-memory", "--duration", "12s", "--size-mb", "512", "--every", "200ms"],
        );
        assert!(o.status.success(), "{java:?}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report_json(&dir);
        assert!(!stalls_with(&r, "no-safepoint-poll").is_empty(), "{java:?}: {:?}", causes(&r));
        // The stacks agent walks a thread inside the VM from its last Java frame: the stack
        // taken in a stall the filling thread held names the caller of setMemory, and the fix
        // says so.
        let names_fill = |c: &Value| {
            c["code"]["frames"].as_array().is_some_and(|fs| {
                fs.iter().any(|f| f["method"] == "io.stallscope.workloads.SetMemory.fill")
            })
        };
        let mut named = 0;
        for s in r["stalls"].as_array().unwrap() {
            for f in s["findings"].as_array().unwrap() {
                for c in f["culprits"].as_array().unwrap().iter().filter(|c| names_fill(c)) {
                    named += 1;
                    // The workload's main thread renames itself just before its first fill;
                    // the first stall can come before the agent's thread list has the new name.
                    assert!(
                        c["name"] == "set-memory" || (c["name"] == "main" && s["stall"] == 1),
                        "{java:?}: {s}"
                    );
                    // Caught inside setMemory0 (a stack between two fills shows the loop that
                    // calls it, and says "the loop in").
                    let in_fill = c["code"]["frames"][0]["method"]
                        .as_str()
                        .is_some_and(|m| m.ends_with("Unsafe.setMemory0"));
                    if in_fill && f["cause"] == "no-safepoint-poll" && f["culprits"][0] == *c {
                        let fix = f["fix"].as_str().unwrap();
                        assert!(
                            fix.starts_with(
                                "split the call to Unsafe.setMemory0 in SetMemory.fill (line "
                            ),
                            "{java:?}: {fix}"
                        );
                    }
                }
            }
        }
        let seen: Vec<String> = r["stalls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                format!(
                    "{} {:.0} ms: {}",
                    s["findings"][0]["cause"],
                    s["duration_ns"].as_f64().unwrap_or(0.0) / 1e6,
                    s["findings"][0]["culprits"][0]["code"]["source"]
                )
            })
            .collect();
        assert!(named > 0, "{java:?}: no stall names SetMemory.fill:\n{}", seen.join("\n"));
    }
}

/// Reads the workload's "idle: pid N" line from a recorded run's stdout.
fn spawn_recorded_idle(
    dir: &Path,
    secs: u32,
) -> (Reaper, i32, BufReader<std::process::ChildStdout>) {
    let mut child = stallscope()
        .args(["run", "--out", dir.to_str().unwrap(), "--"])
        .arg(java17())
        .arg("-jar")
        .arg(workloads_jar())
        .args(["idle", "--duration", &format!("{secs}s")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 =
        line.trim().strip_prefix("idle: pid ").unwrap_or_else(|| panic!("{line}")).parse().unwrap();
    wait_for_heartbeat(pid);
    (Reaper(child), pid, out)
}

fn heartbeat(pid: i32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/stallscope-{pid}.heartbeat"))
}

fn wait_for_heartbeat(pid: i32) {
    let t0 = Instant::now();
    while !heartbeat(pid).exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no heartbeat for pid {pid}");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// Waits for a recorded run to end; its stdout is what is left in `out`.
fn finish(mut child: Reaper, mut out: BufReader<std::process::ChildStdout>) -> Output {
    let mut stdout = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut stdout);
    let c: &mut Child = &mut child.0;
    let status = c.wait().unwrap();
    Output { status, stdout: stdout.into_bytes(), stderr: vec![] }
}

#[test]
fn a_frozen_jvm_is_a_frozen_process_and_a_quiet_one_has_no_stalls() {
    let _x = exclusive();
    let d = scratch("doctor-freeze");
    let (child, pid, out) = spawn_recorded_idle(&d.join("rec"), 4);
    let f = stallscope()
        .args(["inject", "freeze", &pid.to_string(), "--for", "500ms"])
        .output()
        .unwrap();
    assert!(f.status.success());
    let o = finish(child, out);
    assert!(o.status.success());
    let r = report_json(&d.join("rec"));
    let frozen = stalls_with(&r, "frozen");
    assert_eq!(frozen.len(), 1, "{:?}", causes(&r));
    assert!(frozen[0]["duration_ns"].as_u64().unwrap() >= 450_000_000);
    assert!(frozen[0]["safepoint"].is_null(), "a freeze is not a safepoint: {}", frozen[0]);
    let control = frozen[0]["control_max_late_ns"].as_u64().unwrap();
    assert!(
        control < 100_000_000,
        "the recorder kept time while the JVM was frozen (control meter {control} ns late)"
    );

    // The same JVM left alone: nothing to report. Without the JVM's flight recorder: starting it
    // allocates, and in this small default heap that once made a real 12 ms young GC at start
    // (named, rightly, a long VM operation; docs/frames.md counts it among JFR's costs). What is
    // checked here is the doctor's judgement of a JVM that does nothing.
    let quiet = d.join("quiet");
    let o = stallscope()
        .args(["run", "--no-frames", "--out", quiet.to_str().unwrap(), "--"])
        .arg(java17())
        .arg("-jar")
        .arg(workloads_jar())
        .args(["idle", "--duration", "4s"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let r = report_json(&quiet);
    // A shared 2-vCPU guest gives even a quiet JVM the odd hiccup of a few ms (the JIT's
    // start-up burst, the guest itself pausing). The doctor must not blame the JVM for them:
    // short, and CPU starvation, a machine pause, or an honest "unknown" — nothing JVM-made.
    for s in r["stalls"].as_array().unwrap() {
        assert!(s["duration_ns"].as_u64().unwrap() < 50_000_000, "a quiet JVM: {s}");
        let cause = s["findings"][0]["cause"].as_str().unwrap_or("none");
        assert!(
            ["cpu-starvation", "machine-pause", "unknown"].contains(&cause),
            "a hiccup of a quiet JVM blamed on it: {s}"
        );
    }
    if r["summary"]["stalls"] == 0 {
        assert!(String::from_utf8_lossy(&o.stdout).contains("stalls      none of 5.00 ms or more"));
    }
    assert!(
        r["summary"]["hiccups"]["intervals"].as_u64().unwrap() >= 3,
        "the agent's interval log is in the recording"
    );
    let control = &r["summary"]["control"];
    assert!(
        control["intervals"].as_u64().unwrap() >= 3 && control["count"].as_u64().unwrap() > 400,
        "the control meter's log: {control}"
    );
}

#[test]
fn safepoints_under_cpu_contention_are_cpu_starvation() {
    let _x = exclusive();
    let d = scratch("doctor-storm");
    let _hog = Reaper(
        stallscope()
            .args(["inject", "cpu-hog", "--threads", "4", "--for", "20s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let o = run_recorded(
        &d.join("rec"),
        &java17(),
        &[],
        &["safepoint-storm", "--threads", "2", "--duration", "4s", "--every", "10ms"],
    );
    assert!(o.status.success());
    let r = report_json(&d.join("rec"));
    let all = causes(&r);
    let starved = stalls_with(&r, "cpu-starvation");
    // Stalls of a few samples are often honestly unknown (README, known limits): measured over
    // four runs here, 45-60% of the stalls under 10 ms were unknown, against a quarter of the
    // longer ones. "Most" is judged where the evidence has at least five samples. How long
    // the stalls grow depends on how the host shares its cores: one CI run saw 13 stalls, 12 of
    // them CPU starvation, but only two of 10 ms or more. Then "most" is judged on them all.
    let long: Vec<&str> = r["stalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["duration_ns"].as_u64().unwrap() >= 10_000_000)
        .map(|s| s["findings"][0]["cause"].as_str().unwrap())
        .collect();
    let judged: Vec<&str> =
        if long.len() >= 3 { long } else { all.iter().map(|c| c.as_str()).collect() };
    let judged_starved = judged.iter().filter(|c| **c == "cpu-starvation").count();
    assert!(judged.len() >= 3, "contention makes stalls: {all:?}");
    assert!(
        judged_starved * 2 > judged.len(),
        "most stalls (of 10 ms and more, where there are three) are CPU starvation: {judged:?}"
    );
    assert!(
        !all.iter().any(|c| c == "no-safepoint-poll" || c == "major-fault" || c == "frozen"),
        "{all:?}"
    );
    let evidence: Vec<String> = starved
        .iter()
        .flat_map(|s| {
            s["findings"][0]["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
        })
        .collect();
    assert!(
        evidence.iter().any(|e| e.contains("for a CPU") || e.contains("run queue")),
        "run-queue evidence: {evidence:?}"
    );
}

#[test]
fn a_target_that_dies_mid_stall_still_gets_its_diagnosis() {
    let _x = exclusive();
    let dir = scratch("doctor-dies").join("rec");
    let mut child = stallscope()
        .args(["run", "--out", dir.to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints", "-jar"])
        .arg(workloads_jar())
        .args(["counted-loop", "--duration", "30s", "--rounds", "2000", "--trigger", "threaddump"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let events = dir.join("events.jsonl");
    let t0 = Instant::now();
    // Kill it inside a long stall (the counted loop's), not a short one at start-up: wait for a
    // stall that is still going on 300 ms after it began.
    let open_stall = || -> Option<String> {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        let n = text
            .lines()
            .rfind(|l| l.contains("\"stall-begin\""))?
            .split("\"stall\":")
            .nth(1)?
            .split([',', '}'])
            .next()?
            .to_string();
        (!text
            .lines()
            .any(|l| l.contains("\"stall-end\"") && l.contains(&format!("\"stall\":{n},"))))
        .then_some(n)
    };
    loop {
        assert!(t0.elapsed() < Duration::from_secs(30), "no long stall began");
        if let Some(n) = open_stall() {
            std::thread::sleep(Duration::from_millis(300));
            if open_stall() == Some(n) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let jvm = meta["pid"].as_i64().unwrap() as i32;
    unsafe { libc::kill(jvm, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(137), "the JVM's fate is the exit code");
    let r = report_json(&dir);
    let last = r["stalls"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["target_exited"], true, "{last}");
    assert_eq!(last["findings"][0]["cause"], "no-safepoint-poll", "{last}");
    assert!(
        !heartbeat(jvm).exists() || std::fs::metadata(heartbeat(jvm)).is_ok(),
        "a stale heartbeat may remain; the reader checks liveness"
    );
}

#[test]
fn ctrl_c_reaches_the_jvm_and_the_recording_is_finished() {
    let _x = exclusive();
    let dir = scratch("doctor-ctrlc").join("rec");
    let (child, pid, out) = spawn_recorded_idle(&dir, 60);
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let o = finish(child, out);
    assert_eq!(o.status.code(), Some(130), "the JVM ended by SIGINT: {:?}", o.status);
    assert!(String::from_utf8_lossy(&o.stdout).contains("Summary ("), "the report was printed");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"detach\"") && events.contains("\"target-exit\""), "{events}");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the JVM is gone");
}

fn idle_jvm(extra: &[&str]) -> (Reaper, i32) {
    let mut c = Command::new(java17());
    c.args(extra);
    idle_jvm_from(c)
}

/// The idle workload started by `c` (a `java` command, or one that runs it: `setpriv … java`),
/// and its pid.
fn idle_jvm_from(c: Command) -> (Reaper, i32) {
    Jvm::idle(workload(c, &[], &["idle", "--duration", "60s"])).into_parts()
}

#[test]
fn attach_watches_a_running_jvm_and_leaves_it_as_it_was() {
    let _x = exclusive();
    let d = scratch("doctor-attach");
    let (jvm, pid) = idle_jvm(&[]);
    let dir = d.join("rec");
    let att = stallscope()
        .args(["attach", &pid.to_string(), "--for", "4s", "--out", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_heartbeat(pid);
    let f = stallscope()
        .args(["inject", "freeze", &pid.to_string(), "--for", "400ms"])
        .output()
        .unwrap();
    assert!(f.status.success());
    let o = att.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let live = String::from_utf8_lossy(&o.stdout);
    // What was happening about a second in, then the whole recording's diagnosis.
    assert!(live.starts_with("NOW (") && live.contains("\nstallscope attach: "), "{live}");
    let r = report_json(&dir);
    assert_eq!(r["meta"]["mode"], "attach");
    assert_eq!(stalls_with(&r, "frozen").len(), 1, "{:?}", causes(&r));
    assert!(
        std::fs::metadata(dir.join("safepoint.log")).unwrap().len() > 0,
        "VM.log wrote into the recording"
    );

    // Detached: the meter is stopped, its files are gone, the log output is off, the JVM runs.
    assert!(!heartbeat(pid).exists(), "the agent removed its heartbeat on stop");
    let jcmd = java17().parent().unwrap().join("jcmd");
    let list = Command::new(jcmd).args([&pid.to_string(), "VM.log", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    let ours = list.lines().find(|l| l.contains("safepoint.log")).unwrap_or("");
    assert!(ours.is_empty() || ours.contains("all=off"), "our log output is switched off: {list}");
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the JVM keeps running");
    drop(jvm);
}

/// `attach` killed outright (SIGKILL) runs no cleanup of its own: its guardian switches the
/// JVM's log output off and stops the agent's meter.
/// The idle workload run as the throwaway user `them` (from /tmp, which they can enter).
fn their_idle_jvm(them: &ThrowawayUser) -> (Reaper, i32) {
    let mut c = them.setpriv();
    c.arg(java17()).current_dir("/tmp");
    idle_jvm_from(c)
}

/// An agent that cannot start inside the JVM says why, at once, and the JVM is left as found;
/// it is recorded from outside all the same. Here root attaches to another user's JVM with
/// `--out` under a directory that user cannot enter. It used to be a 15 s wait blaming the
/// heartbeat, with the reason only on the JVM's stderr.
#[test]
fn an_agent_that_cannot_start_inside_the_jvm_says_why() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: it attaches to another user's JVM"
    );
    let them = ThrowawayUser::new();
    let d = scratch("doctor-attach-unseen");
    let private = d.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .unwrap();
    let (jvm, pid) = their_idle_jvm(&them);
    let dir = private.join("rec");
    let o = stallscope()
        .args(["attach", &pid.to_string(), "--for", "5s", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(0), "{err}");
    let said: Vec<&str> = err.lines().filter(|l| l.contains("did not get in")).collect();
    assert_eq!(said.len(), 1, "one line: {err}");
    assert!(
        said[0].contains("did not start inside it")
            && said[0].contains("cannot be written")
            && said[0].contains(dir.to_str().unwrap()),
        "the agent's own reason: {err}"
    );
    assert!(
        said[0].contains(&format!("the JVM's user (uid {})", them.uid)),
        "and what to do: {err}"
    );
    assert!(said[0].contains("recorded from its counters and /proc alone"), "{err}");
    let r = report_json(&dir);
    assert_eq!(r["meta"]["mode"], "attach", "the JVM was recorded from outside");
    let jcmd = java17().parent().unwrap().join("jcmd");
    let list = Command::new(&jcmd).args([&pid.to_string(), "VM.log", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(
        !list.lines().any(|l| l.contains(dir.to_str().unwrap()) && !l.contains("all=off")),
        "logging left on: {list}"
    );
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("stallscope-{pid}.")))
        .collect();
    assert!(left.is_empty(), "no meter runs and the note was taken: {left:?}");
    drop(jvm);
}

/// A socket at `/tmp/.java_pid<N>` that no one listens on is what a JVM with that pid leaves
/// when it is killed (pids are reused, and the kill tests leave such sockets). Attaching to the
/// new JVM with that pid removes it and starts this JVM's listener, rather than failing with
/// "the attach socket refused us" (seen in CI).
#[test]
fn attach_replaces_an_attach_socket_no_one_listens_on() {
    let _x = exclusive();
    let d = scratch("doctor-attach-stale");
    let (jvm, pid) = idle_jvm(&[]);
    let sock = PathBuf::from(format!("/tmp/.java_pid{pid}"));
    assert!(!sock.exists(), "nothing has attached to the JVM yet, so it has no listener");
    /// The socket file goes with the test, whatever happens (the JVM is killed, not ended).
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _gone = Gone(sock.clone());
    // Bound and closed: the file stays, and connecting to it is refused.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let refused = std::os::unix::net::UnixStream::connect(&sock).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    let dir = d.join("rec");
    let o = stallscope()
        .args(["attach", &pid.to_string(), "--for", "2s", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    assert!(dir.join("meta.json").exists(), "a recording was made: {err}");
    std::os::unix::net::UnixStream::connect(&sock)
        .expect("the socket is now the JVM's own listener");
    drop(jvm);
}

/// A JVM in a container (its own pid and mount namespaces, /proc, /tmp and /dev/shm): attach
/// stages the agent in its /tmp, finds its heartbeat in its /dev/shm under its pid there, names
/// its Java threads by their ids here, copies its logs into the recording, and leaves nothing
/// behind. It used to fail every time, after 15 s, blaming the heartbeat.
#[test]
fn attach_reaches_a_jvm_in_a_container() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: it runs a JVM in a pid and mount namespace of its own"
    );
    let d = scratch("doctor-attach-container");
    let (jvm, pid) = contained_jvm();
    let inside = |p: &str| PathBuf::from(format!("/proc/{pid}/root{p}"));
    let ours = |p: &str| {
        std::fs::read_dir(inside(p))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("stallscope-"))
            .collect::<Vec<_>>()
    };
    let dir = d.join("rec");
    let att = stallscope()
        .args(["attach", &pid.to_string(), "--for", "4s", "--out", dir.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !ours("/dev/shm").iter().any(|n| n.ends_with(".heartbeat")) {
        assert!(t0.elapsed() < Duration::from_secs(20), "no heartbeat in the JVM's /dev/shm");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let f = stallscope()
        .args(["inject", "freeze", &pid.to_string(), "--for", "400ms"])
        .output()
        .unwrap();
    assert!(f.status.success());
    let o = att.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report_json(&dir);
    assert_eq!(stalls_with(&r, "frozen").len(), 1, "{:?}", causes(&r));
    for f in ["safepoint.log", "hiccups.hlog"] {
        assert!(
            std::fs::metadata(dir.join(f)).map(|m| m.len() > 0).unwrap_or(false),
            "the JVM's {f} was copied into the recording: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Java thread names carry this side's thread ids: the task here by that id has that name.
    let rec = recording::Recording::read(&dir, None).unwrap();
    let named = rec
        .context
        .iter()
        .flat_map(|c| c.java_threads.iter())
        .find(|j| j.name == "Reference Handler")
        .expect("a JVM thread is named");
    let comm =
        std::fs::read_to_string(format!("/proc/{pid}/task/{}/comm", named.tid)).unwrap_or_default();
    assert_eq!(
        comm.trim(),
        "Reference Handl",
        "tid {} here is not the JVM's Reference Handler",
        named.tid
    );
    assert!(
        ours("/tmp").is_empty() && ours("/dev/shm").is_empty(),
        "left in the container: {:?} {:?}",
        ours("/tmp"),
        ours("/dev/shm")
    );
    let jcmd = java17().parent().unwrap().join("jcmd");
    let list = Command::new(&jcmd).args([&pid.to_string(), "VM.log", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(
        !list.lines().any(|l| l.contains("safepoint.log") && !l.contains("all=off")),
        "logging left on: {list}"
    );
    drop(jvm);
}

/// Root attaching to another user's JVM: the JVM writes its logs into the recording as that
/// user. It used to fail after 15 s, blaming the heartbeat.
#[test]
fn root_attaches_to_another_users_jvm() {
    let _x = exclusive();
    let them = ThrowawayUser::new();
    let d = scratch("doctor-attach-other-user");
    let (jvm, pid) = their_idle_jvm(&them);
    let dir = d.join("rec");
    let o = stallscope()
        .args(["attach", &pid.to_string(), "--for", "2s", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::metadata(dir.join("hiccups.hlog")).map(|m| m.len() > 0).unwrap_or(false),
        "the JVM wrote its hiccup log"
    );
    assert!(
        std::fs::metadata(dir.join("safepoint.log")).is_ok(),
        "HotSpot opened its safepoint log"
    );
    drop(jvm);
}

#[test]
fn attach_refusals_are_one_clear_line() {
    let _x = exclusive();
    let them = ThrowawayUser::new();
    let attach = |pid: String, as_them: bool| {
        let dir = scratch("doctor-refuse").join("rec");
        let mut c = if as_them { them.setpriv() } else { stallscope() };
        if as_them {
            c.arg(bin());
        }
        let o = c
            .args(["attach", &pid, "--for", "1s", "--out", dir.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        err
    };
    assert!(attach("999999999".into(), false).contains("pid 999999999: no such process"));
    let sleeper = Reaper(Command::new("sleep").arg("30").spawn().unwrap());
    assert!(attach(sleeper.0.id().to_string(), false).contains("is not a JVM"));
    let (_jvm, pid) = idle_jvm(&[]);
    assert!(attach(pid.to_string(), true).contains("belongs to uid 0"), "another user's JVM");
}

#[test]
fn stalls_at_the_safepoint_swap_slow_writes_and_reclaim_are_named_on_both_jdks() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: a swap file and memory cgroups (CI runs as root)"
    );
    // The lab's own scenarios make each happen, baseline only: a heap swapped out then paged in by
    // full GCs, a GC log on a disk whose writes are slow, a JVM touching fresh memory in a full
    // memory cgroup.
    let cases = [
        ("swap", "swappable", "swap-in"),
        ("slow-log", "slow-disk", "vm-thread-io"),
        ("memory-pressure", "squeezed", "memory-reclaim"),
    ];
    let lab = |java: &Path, out: &Path, cases: &[(&str, &str, &str)]| {
        let mut c = stallscope();
        c.args([
            "lab",
            "run",
            "--reps",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--java",
            java.to_str().unwrap(),
        ]);
        for (scenario, variant, _) in cases {
            c.arg(scenario).args(["--variant", variant]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{java:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    // The stall the fault made: the one holding the longest safepoint (a busy two-CPU machine
    // makes stalls of its own, at start-up above all).
    let sp_total = |s: &Value| s["safepoint"]["total_ns"].as_u64().unwrap_or(0);
    let longest = |r: &Value| {
        r["stalls"]
            .as_array()
            .unwrap()
            .iter()
            .max_by_key(|s| sp_total(s))
            .cloned()
            .expect("the fault made a stall")
    };
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let out = scratch(&format!("doctor-memory-{i}")).join("lab");
        lab(&java, &out, &cases);
        for (scenario, variant, cause) in cases {
            let mut dir = out.join(scenario).join(format!("{variant}-1"));
            // A stall the recorder itself did not look at (one of its /proc reads was held for
            // most of it, seen once in a CI run: one look in a 1 s stall) is rightly unknown,
            // and the recording says why; it says nothing of the doctor. That scenario runs
            // once more, and the second run is judged.
            let first = longest(&report_json(&dir));
            let said = first["findings"][0]["evidence"].to_string();
            if first["findings"][0]["cause"] == "unknown"
                && (said.contains("the recorder itself was held")
                    || said.contains("the recorder noticed the stall"))
            {
                eprintln!(
                    "{java:?} {scenario}: the recorder did not see the stall, once more: {said}"
                );
                let again = scratch(&format!("doctor-memory-{i}-{scenario}")).join("lab");
                lab(&java, &again, &[(scenario, variant, cause)]);
                dir = again.join(scenario).join(format!("{variant}-1"));
            }
            let r = report_json(&dir);
            let stalls = r["stalls"].as_array().unwrap();
            // Named with confidence.
            let longest = longest(&r);
            let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
            assert_eq!(
                longest["findings"][0]["cause"], cause,
                "{java:?} {scenario}: {longest}\nthe recorder's events: {events}"
            );
            // Reclaim is seen directly (reclaim_throttle, shrink_*) only while a thread is inside
            // it; the JVM's own log writes in the squeezed cgroup wait in the filesystem meanwhile,
            // and /proc cannot say that reclaim holds them. The doctor then covers less than two
            // thirds of the stall and says "medium", which is the honest answer: right cause,
            // lower confidence. Swap-in is seen for all of its stall, but on this two-CPU machine
            // the two GC threads paging in also wait for a CPU (the kernel's own reclaim runs
            // beside them): when that wait is a third of their time (measured in a CI run: 658
            // and 724 ms of 2.3 s), the doctor gives it its share and says "medium", swap-in
            // still first. The slow disk is seen for all of its stalls.
            let confident: &[&str] =
                if scenario == "slow-log" { &["high"] } else { &["high", "medium"] };
            let conf = longest["findings"][0]["confidence"].as_str().unwrap_or("");
            assert!(confident.contains(&conf), "{java:?} {scenario}: confidence {conf}: {longest}");
            let rec = recording::Recording::read(&dir, None).unwrap();
            for s in stalls {
                let findings = s["findings"].as_array().unwrap();
                let n = s["stall"].as_u64().unwrap() as u32;
                for f in findings.iter().filter(|f| f["confidence"] == "high") {
                    // Nothing else is named with confidence beside it. Elsewhere CPU starvation
                    // may be, in a workload that keeps both of this machine's CPUs busy; and a
                    // long VM operation may be, for a GC whose threads paged little in (the
                    // recorder's raw samples are the judge): a GC first touching a growing heap,
                    // or computing while others page, is slow on its own.
                    let other = findings[0]["cause"] != cause;
                    let culprits: Vec<i64> = f["culprits"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|c| c["tid"].as_i64())
                        .collect();
                    let paged = major_faults_in_stall(&rec, n, &culprits);
                    // Paging GC threads take tens of thousands of major faults each (issue 12
                    // measured 36,000 to 71,000); a GC that computes takes a few dozen.
                    let ok = f["cause"] == cause
                        || (other && f["cause"] == "cpu-starvation")
                        || (other && paged < 1000 && f["cause"] == "long-vm-operation");
                    assert!(
                        ok,
                        "{java:?} {scenario}: {} with high confidence (its threads took {paged} major faults): {s}",
                        f["cause"]
                    );
                }
            }
        }
    }
}
