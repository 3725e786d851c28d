//! `run` never keeps a JVM from starting: whatever it adds to the command line, the JDK in hand
//! accepts. The case that once failed: the stacks agent's library not found (a relocated binary,
//! a packaging slip), where `run` falls back to JFR and silenced JFR's start-up lines with a log
//! tag JDK 11 does not know ("Invalid tag 'startup' in log selection").

mod common;

use common::*;
use std::process::Stdio;
use std::time::Duration;

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

/// Under a shell's or a service's 1,024-file soft limit, a sampler that keeps four files open
/// per thread would leave every thread past the 256th unsampled: stallscope raises its own soft
/// limit to the hard one, and gives the JVM it starts the limit it was given (issue 58, the
/// soak's 2,000-thread JVM held 8,000 descriptors).
#[test]
fn under_a_low_open_files_limit_every_thread_is_opened_and_the_jvm_keeps_the_limit_it_was_given() {
    use std::os::unix::process::CommandExt;
    let _x = exclusive();
    let dir = scratch("run-open-files").join("rec");
    let mut c = stallscope();
    c.args(["run", "--out", dir.to_str().unwrap(), "--"])
        .arg(java17())
        // HotSpot raises its own soft limit unless told not to: the limit it was given shows.
        .args(["-XX:-MaxFDLimit", "-Xss256k", "-jar"])
        .arg(workloads_jar())
        .args(["idle", "--threads", "600", "--every", "1s", "--duration", "8s"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: one async-signal-safe call between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
            l.rlim_cur = 256;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
            Ok(())
        });
    }
    let child = c.spawn().unwrap();
    let me = child.id();
    let limits = |pid: u32| -> Option<(String, String)> {
        let t = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
        let l = t.lines().find(|l| l.starts_with("Max open files"))?;
        let f: Vec<&str> = l.split_whitespace().collect();
        Some((f[3].to_string(), f[4].to_string()))
    };
    let fds =
        |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    let jvm = poll(Duration::from_secs(20), Duration::from_millis(100), || {
        let kids = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children")).ok()?;
        kids.split_whitespace().filter_map(|k| k.parse::<u32>().ok()).find(|k| {
            std::fs::read_to_string(format!("/proc/{k}/status")).is_ok_and(|s| {
                s.lines().any(|l| {
                    l.starts_with("Threads:") && l[8..].trim().parse::<u32>().unwrap_or(0) > 600
                })
            })
        })
    });
    let held = poll(Duration::from_secs(20), Duration::from_millis(100), || {
        (fds(me) > 1_200).then(|| fds(me))
    });
    let (own, given) = (limits(me), jvm.and_then(limits));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}\n{stderr}", out.status);
    let jvm = jvm.expect("the JVM with its 600 threads");
    let (soft, hard) = own.expect("stallscope's limits");
    assert_eq!(soft, hard, "stallscope's soft limit raised to the hard one\n{stderr}");
    assert_eq!(
        given.expect("the JVM's limits").0,
        "256",
        "the JVM {jvm} keeps the limit it was given"
    );
    assert!(
        held.is_some(),
        "stallscope held {} files: not every thread's were opened\n{stderr}",
        fds(me)
    );
}
