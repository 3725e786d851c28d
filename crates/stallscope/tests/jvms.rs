//! `stallscope jvms` against real processes: JVMs on the host and in a pid and mount namespace
//! of their own (as in a container) are found, named and selected; other processes are not.

mod common;

use common::*;
use serde_json::Value;
use std::process::Command;

fn jvms(args: &[&str]) -> Value {
    let o = stallscope().arg("jvms").arg("--json").args(args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn by_pid(list: &Value, pid: i32) -> Option<&Value> {
    list["jvms"].as_array().unwrap().iter().find(|j| j["pid"] == pid)
}

fn host_jvm(duration: &str) -> (Reaper, i32) {
    Jvm::idle(workload(Command::new(java25()), &[], &["idle", "--duration", duration])).into_parts()
}

#[test]
fn jvms_on_the_host_and_in_a_container_are_found_named_and_selected() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root for a pid and mount namespace (CI runs as root)"
    );
    let (host, host_pid) = host_jvm("61s");
    let (_contained, contained_pid) = contained_jvm();
    let sleeper = Reaper(Command::new("sleep").arg("30").spawn().unwrap());

    let all = jvms(&[]);
    assert_eq!(all["schema"], "stallscope.jvms/1");
    let h = by_pid(&all, host_pid).unwrap_or_else(|| panic!("the host JVM is listed: {all}"));
    assert_eq!(h["nspid"], host_pid);
    assert_eq!(h["contained"], false);
    assert_eq!(
        h["main"],
        workloads_jar().to_str().unwrap(),
        "the jar after -jar, as jps -l names it"
    );
    assert!(h["java_version"].as_str().unwrap().starts_with("25"), "{h}");
    let c =
        by_pid(&all, contained_pid).unwrap_or_else(|| panic!("the contained JVM is listed: {all}"));
    assert_eq!(c["contained"], true);
    assert_eq!(c["nspid"], 1, "its pid inside its own namespace: {c}");
    assert!(c["java_version"].as_str().unwrap().starts_with("17"), "read through its root: {c}");
    assert!(
        !c["cgroup"].as_str().unwrap().is_empty(),
        "a container is labelled by its cgroup: {c}"
    );
    assert!(by_pid(&all, sleeper.0.id() as i32).is_none(), "a process without libjvm.so is no JVM");

    // --match selects by main class, jar or command line.
    let one = jvms(&["--match", "idle --duration 61s"]);
    let pids: Vec<i64> =
        one["jvms"].as_array().unwrap().iter().map(|j| j["pid"].as_i64().unwrap()).collect();
    assert_eq!(pids, vec![host_pid as i64], "{one}");
    assert!(jvms(&["--match", "^no such main$"])["jvms"].as_array().unwrap().is_empty());

    // The text form: one line per JVM, the contained one with its pid inside and its cgroup.
    let text = String::from_utf8(stallscope().arg("jvms").output().unwrap().stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{contained_pid} ")))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(" 1 ") && line.contains(c["cgroup"].as_str().unwrap()), "{line}");

    // A JVM that exits is no longer listed.
    drop(host);
    assert!(by_pid(&jvms(&[]), host_pid).is_none());

    // A bad expression is one clear line and exit 1.
    let o = stallscope().args(["jvms", "--match", "x("]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--match 'x(': not a regular expression"), "{err}");
}
