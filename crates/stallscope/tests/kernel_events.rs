//! The kernel's scheduler events (BPF, root) in real recordings: a frozen JVM's stall carries
//! each thread's wait, its kernel stack and who woke it; the same run without them falls back to
//! the /proc samples and says so; a program that is not a JVM is refused clearly. (Root needed:
//! without it the first test fails, never skips.)

mod common;

use common::*;
use serde_json::Value;

/// One quick run of the lab's `frozen` scenario (SIGSTOP for a known time), its recording's
/// report and its meta.
fn frozen(extra: &[&str], name: &str) -> (doctor::Report, Value) {
    let out = scratch(name).join("lab");
    let mut args = vec!["lab", "run", "frozen", "--reps", "1", "--out", out.to_str().unwrap()];
    args.extend(extra);
    let o = stallscope().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let lab: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lab.json")).unwrap()).unwrap();
    let rec = lab["scenarios"][0]["variants"][0]["runs"][0]["recording"].as_str().unwrap();
    let rec = std::path::Path::new(rec);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("meta.json")).unwrap()).unwrap();
    (report(rec), meta)
}

#[test]
fn a_frozen_jvm_s_threads_are_seen_stopped_by_the_kernel_and_woken_by_who_continued_them() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    let (r, meta) = frozen(&[], "kernel-frozen");
    assert_eq!(meta["bpf"], true, "the BPF recorder ran: {meta}");
    let s = r.stalls.iter().max_by_key(|s| s.duration_ns).expect("the freeze is a stall");
    assert_eq!(s.findings[0].cause, doctor::Cause::Frozen);
    assert!(!s.kernel.is_empty(), "the stall has the kernel's account");
    // Every thread the kernel account shows spent most of the stall stopped, and the one
    // that continued them (the lab's freezer, stallscope itself) woke them.
    let stopped: Vec<_> =
        s.kernel.iter().filter(|t| t.kinds.first().is_some_and(|(k, _)| k == "stopped")).collect();
    assert!(!stopped.is_empty(), "{:#?}", s.kernel);
    for t in &stopped {
        assert!(t.share > 0.9, "stopped through the stall: {t:#?}");
        assert_eq!(t.longest.state, 'T', "{t:#?}");
        assert!(t.longest.stack.iter().any(|f| f == "do_signal_stop"), "{t:#?}");
        let waker = t.longest.waker.as_deref().unwrap_or("");
        assert!(waker.starts_with("stallscope"), "woken by SIGCONT's sender: {t:#?}");
    }
    assert!(!r.notes.iter().any(|n| n.contains("no BPF")), "nothing said missing: {:?}", r.notes);
}

#[test]
fn without_bpf_the_same_stall_is_explained_from_proc_and_the_report_says_so() {
    let _x = exclusive();
    let (r, meta) = frozen(&["--no-bpf"], "kernel-frozen-nobpf");
    assert!(meta.get("bpf").is_none_or(|b| b == false), "{meta}");
    let s = r.stalls.iter().max_by_key(|s| s.duration_ns).expect("the freeze is a stall");
    assert_eq!(s.findings[0].cause, doctor::Cause::Frozen, "the /proc samples suffice here");
    assert!(s.kernel.is_empty());
    assert!(
        r.notes.iter().any(|n| n.contains("no BPF off-CPU evidence")),
        "the report says what is missing: {:?}",
        r.notes
    );
}

#[test]
fn a_program_that_is_not_a_jvm_is_refused_clearly() {
    let d = scratch("kernel-not-java");
    let o = stallscope()
        .args(["run", "--out", d.join("rec").to_str().unwrap(), "--", "sleep", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("sleep") && err.contains("is not a java launcher"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("invalid option"), "{err}");
}
