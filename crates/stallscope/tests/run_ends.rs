//! `run` when its target dies inside a stall: the recording is finished and diagnosed all the
//! same; and when `run` itself is killed outright inside one: the JVM runs on, and what was
//! written is a recording `report` reads, the stall under way included.

mod common;

use common::*;
use doctor::Cause;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn a_target_that_dies_mid_stall_still_gets_its_diagnosis() {
    let _x = exclusive();
    let dir = scratch("doctor-dies").join("rec");
    let mut child = run_counted_loop(&dir);
    wait_inside_a_long_stall(&dir);
    let jvm = recording::read_meta(&dir).unwrap().pid;
    unsafe { libc::kill(jvm, libc::SIGKILL) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(137), "the JVM's fate is the exit code");
    let r = report(&dir);
    let last = r.stalls.last().unwrap();
    assert!(last.target_exited, "{last:?}");
    assert_eq!(last.findings[0].cause, Cause::NoSafepointPoll, "{last:?}");
    assert!(
        !heartbeat(jvm).exists() || std::fs::metadata(heartbeat(jvm)).is_ok(),
        "a stale heartbeat may remain; the reader checks liveness"
    );
}

/// `run` killed with SIGKILL while the JVM is held by a loop: no cleanup of its own runs, yet the
/// JVM runs on, and the lines written before the kill are a recording that `report` reads, its
/// stall under way cut where the recording ends (issue 54: the files are still written for
/// `report` later and after a crash).
#[test]
fn run_killed_outright_mid_stall_leaves_a_recording_report_reads() {
    let _x = exclusive();
    let dir = scratch("run-killed-mid-stall").join("rec");
    let mut child = run_counted_loop(&dir);
    wait_inside_a_long_stall(&dir);
    let jvm = recording::read_meta(&dir).unwrap().pid;
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    // The observer's death is not the JVM's.
    std::thread::sleep(Duration::from_millis(300));
    let alive = std::fs::read_to_string(format!("/proc/{jvm}/stat"))
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
    let o = stallscope().arg("report").arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    unsafe { libc::kill(jvm, libc::SIGKILL) };
    remove_jfr_repositories(|_, pid| pid == jvm as u32);
    let _ = std::fs::remove_file(format!("/tmp/.java_pid{jvm}"));
    assert!(alive, "the JVM runs on after run was killed");
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&dir);
    assert!(!r.stalls.is_empty(), "{text}");
    // The loop's stalls before the kill are named as ever.
    assert!(
        r.stalls
            .iter()
            .any(|s| s.findings.first().is_some_and(|f| f.cause == Cause::NoSafepointPoll)),
        "{text}"
    );
}

/// `stallscope run` into `dir` of a JVM whose safepoints wait on a counted loop for 30 s.
fn run_counted_loop(dir: &std::path::Path) -> std::process::Child {
    stallscope()
        .args(["run", "--out", dir.to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints", "-jar"])
        .arg(workloads_jar())
        .args(["counted-loop", "--duration", "30s", "--rounds", "2000", "--trigger", "threaddump"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until the recording in `dir` has a stall still going on 300 ms after it began (the
/// counted loop's, not a short one at start-up).
fn wait_inside_a_long_stall(dir: &std::path::Path) {
    let events = dir.join("events.jsonl");
    let t0 = Instant::now();
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
}
