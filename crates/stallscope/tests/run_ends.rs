//! `run` when its target dies inside a stall: the recording is finished and diagnosed all the
//! same.

mod common;

use common::*;
use doctor::Cause;
use std::process::Stdio;
use std::time::{Duration, Instant};

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
