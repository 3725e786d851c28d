//! `run` never keeps a JVM from starting: whatever it adds to the command line, the JDK in hand
//! accepts. The case that once failed: the stacks agent's library not found (a relocated binary,
//! a packaging slip), where `run` falls back to JFR and silenced JFR's start-up lines with a log
//! tag JDK 11 does not know ("Invalid tag 'startup' in log selection").

mod common;

use common::*;
use std::process::Stdio;

#[test]
fn without_the_stacks_library_every_lts_jvm_starts_and_is_recorded_with_jfr() {
    let _x = exclusive();
    for jdk in Jdk::LTS {
        let dir = scratch(&format!("run-starts-{}", jdk.feature())).join("rec");
        let o = stallscope()
            .env("STALLSCOPE_STACKS_AGENT", "/nonexistent/libstallscope_stacks.so")
            .args(["run", "--out", dir.to_str().unwrap(), "--"])
            .arg(jdk.java())
            .arg("-jar")
            .arg(workloads_jar())
            .args(["idle", "--duration", "2s"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() && stdout.contains("idle: pid"),
            "JDK {}: the JVM must start and run under `run`: {:?}\nstdout: {stdout}\nstderr: {stderr}",
            jdk.feature(),
            o.status
        );
        assert!(
            !stderr.contains("Could not create the Java Virtual Machine"),
            "JDK {}: {stderr}",
            jdk.feature()
        );
        // The fallback was taken: the flight recorder's stacks (or a note on them) are in the
        // recording.
        assert!(dir.join("frames.jsonl").is_file(), "JDK {}: no frames.jsonl", jdk.feature());
        // Where the JVM takes the option (17 on), JFR's start-up lines stay off its stdout.
        if jdk.feature() >= 17 {
            assert!(
                !stdout.contains("Started recording"),
                "JDK {}: JFR's start-up lines in the application's stdout: {stdout}",
                jdk.feature()
            );
        }
    }
}
