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

/// `run` finds the JVM's libjvm.so from the `java` it is given before it starts, for the JVM's
/// own safepoint probes: the JDK 17 on the PATH, and every LTS JDK by its path.
#[test]
fn the_java_on_the_path_and_every_lts_jdk_lead_to_a_libjvm_with_safepoint_probes() {
    let lib =
        recorder::resolution::libjvm_of_launcher("java").expect("java (JDK 17) is on the PATH");
    assert!(lib.ends_with("lib/server/libjvm.so"), "{}", lib.display());
    for jdk in Jdk::LTS {
        let java = jdk.java();
        let lib =
            recorder::resolution::libjvm_of_launcher(java.to_str().unwrap()).unwrap_or_else(|| {
                panic!("JDK {}: no libjvm.so beside {}", jdk.feature(), java.display())
            });
        assert!(
            offcpu::has_safepoint_probes(&lib),
            "JDK {}: {} has the probes",
            jdk.feature(),
            lib.display()
        );
    }
}
