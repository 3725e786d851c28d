//! `attach` against real JVMs: it watches a running JVM and leaves it as it was found, replaces
//! a dead attach socket, reaches a JVM in a container and another user's JVM, says why an agent
//! could not start, and refuses in one clear line.

mod common;

use common::*;
use doctor::Cause;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
        .args(["attach", &pid.to_string(), "--for", "8s", "--out", dir.to_str().unwrap()])
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
    let r = report(&dir);
    assert_eq!(r.meta.mode, "attach");
    assert_eq!(stalls_with(&r, Cause::Frozen).len(), 1, "{:?}", causes(&r));
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
    // The flight recording `attach` started is stopped and its repository gone with it, so the
    // JVM killed later leaves nothing in /tmp (JFR removes it only at a normal exit).
    let list = Command::new(java17().parent().unwrap().join("jcmd"))
        .args([&pid.to_string(), "JFR.check"])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("No available recordings"), "{list}");
    let repositories = || jfr_repositories(|_, p| p == pid as u32);
    assert_eq!(repositories(), Vec::<PathBuf>::new(), "the repository went at detach");
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
    let r = report(&dir);
    assert_eq!(r.meta.mode, "attach", "the JVM was recorded from outside");
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
    // Nothing has attached to this JVM yet; a file there is an earlier JVM's with this pid.
    let _ = std::fs::remove_file(&sock);
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
        .args(["attach", &pid.to_string(), "--for", "5s", "--out", dir.to_str().unwrap()])
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
        .args(["attach", &pid.to_string(), "--for", "8s", "--out", dir.to_str().unwrap()])
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
    let r = report(&dir);
    assert_eq!(stalls_with(&r, Cause::Frozen).len(), 1, "{:?}", causes(&r));
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
        .args(["attach", &pid.to_string(), "--for", "5s", "--out", dir.to_str().unwrap()])
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
    let attach_with = |pid: String, as_them: bool, extra: &[&str]| {
        let dir = scratch("doctor-refuse").join("rec");
        let mut c = if as_them { them.setpriv() } else { stallscope() };
        if as_them {
            c.arg(bin());
        }
        let o = c
            .args(["attach", &pid, "--for", "1s", "--out", dir.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        err
    };
    let attach = |pid: String, as_them: bool| attach_with(pid, as_them, &[]);
    assert!(attach("999999999".into(), false).contains("pid 999999999: no such process"));
    // A process that is not a JVM is watched through the kernel's events (root here); without
    // them it is refused.
    let sleeper = Reaper(Command::new("sleep").arg("30").spawn().unwrap());
    let err = attach_with(sleeper.0.id().to_string(), false, &["--no-bpf"]);
    assert!(err.contains("is not a JVM") && err.contains("--no-bpf"), "{err}");
    let dir = scratch("doctor-not-jvm").join("rec");
    let o = stallscope()
        .args(["attach", &sleeper.0.id().to_string(), "--for", "1s", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("not a JVM") && out.contains("none of"), "asleep by choice: {out}");
    let (_jvm, pid) = idle_jvm(&[]);
    assert!(attach(pid.to_string(), true).contains("belongs to uid 0"), "another user's JVM");
}
