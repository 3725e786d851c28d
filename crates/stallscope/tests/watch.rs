//! `stallscope watch` against real JVMs and a real Prometheus. By default it puts nothing into
//! any JVM: three JVMs are watched from outside (one in a pid and mount namespace of its own, as
//! in a container); a counted-loop stall in one shows up in Prometheus under its pid and cause
//! and under no other; a JVM that exits goes, after its grace; one started later is picked up;
//! many idle JVMs hold no thread of stallscope's; a short-lived JVM's stall is still scraped after
//! it exited; a JVM without perf data is watched through /proc and said so. With `--attach`
//! (every JVM, or those that stall often) the agent goes in, and after SIGTERM, or SIGKILL, no
//! JVM is left metering or logging; a stall under way at the SIGKILL stays in its recording. And retention holds its bound while stalls come faster than
//! it allows.

#[path = "common/browser.rs"]
mod browser;
mod common;

use common::*;
use doctor::Cause;
use fleet::events::StallEvent;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A marker in the command lines of this test's JVMs, so that `--match` takes them and no other.
const MARK: &str = "61s";

/// How often the watch tests look again (Prometheus is asked over HTTP each time).
const EVERY: Duration = Duration::from_millis(250);

fn idle_jvm(java: &Path) -> (Reaper, i32) {
    Jvm::idle(workload(Command::new(java), &["-Xmx64m"], &["idle", "--duration", MARK]))
        .into_parts()
}

fn counted_loop_jvm(rounds: &str) -> (Reaper, i32) {
    counted_loop_jvm_with(&[], rounds)
}

fn counted_loop_jvm_with(options: &[&str], rounds: &str) -> (Reaper, i32) {
    let mut java = Command::new(java17());
    java.args(["-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"]);
    let args = ["counted-loop", "--duration", MARK, "--rounds", rounds, "--trigger", "threaddump"];
    Jvm::start(workload(java, options, &args)).became_jvm().into_parts()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Prometheus {
    _child: Reaper,
    port: u16,
}

fn prometheus(target: &str, dir: &Path) -> Prometheus {
    let bin = Path::new("/usr/bin/prometheus");
    assert!(
        bin.exists(),
        "Debian's prometheus is needed (make test's setup installs it: apt-get install prometheus)"
    );
    std::fs::create_dir_all(dir).unwrap();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, format!("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: stallscope\n    static_configs:\n      - targets: ['{target}']\n")).unwrap();
    let port = free_port();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        // The stall counters' exemplars (each names its stall's report).
        .arg("--enable-feature=exemplar-storage")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Prometheus { _child: Reaper(child), port };
    assert!(
        poll(Duration::from_secs(30), EVERY, || p
            .get("/-/ready")
            .filter(|r| r.contains("Ready"))
            .map(|_| ()))
        .is_some(),
        "prometheus did not become ready"
    );
    p
}

/// `q` as a URL's query value (every byte but letters, digits and `_.-` percent-encoded).
fn url_encoded(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_.-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

impl Prometheus {
    fn get(&self, path: &str) -> Option<String> {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
        let mut s = String::new();
        c.read_to_string(&mut s).ok()?;
        s.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
    }

    /// The series of an instant query: each one's labels.
    fn query(&self, q: &str) -> Vec<Value> {
        let enc = url_encoded(q);
        let body = self.get(&format!("/api/v1/query?query={enc}")).unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|r| r["metric"].clone())
            .collect()
    }

    /// The exemplars' label sets of the series `q` selects, over the last ten minutes.
    fn exemplars(&self, q: &str) -> Vec<Value> {
        let enc = url_encoded(q);
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let path =
            format!("/api/v1/query_exemplars?query={enc}&start={}&end={}", now - 600, now + 60);
        let v: Value =
            serde_json::from_str(&self.get(&path).unwrap_or_default()).unwrap_or(Value::Null);
        v["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
            .map(|e| e["labels"].clone())
            .collect()
    }

    fn pids(&self, q: &str) -> Vec<i64> {
        let mut p: Vec<i64> = self
            .query(q)
            .iter()
            .filter_map(|m| m["pid"].as_str().and_then(|p| p.parse().ok()))
            .collect();
        p.sort_unstable();
        p
    }
}

fn heartbeat_of(pid: i32) -> PathBuf {
    if procwatch::ns::other_mount_ns(pid) {
        PathBuf::from(format!(
            "/proc/{pid}/root/dev/shm/stallscope-{}.heartbeat",
            procwatch::ns::nspid(pid)
        ))
    } else {
        PathBuf::from(format!("/dev/shm/stallscope-{pid}.heartbeat"))
    }
}

/// What watch left in a JVM: its meter running, its logging on.
fn left_in(pid: i32) -> Vec<String> {
    let mut left = Vec::new();
    if heartbeat_of(pid).exists() {
        left.push(format!("pid {pid}: the agent is still metering"));
    }
    let o = Command::new(java17().parent().unwrap().join("jcmd"))
        .args([&pid.to_string(), "VM.log", "list"])
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("stallscope") && !l.contains("all=off"))
    {
        left.push(format!("pid {pid}: still logging: {l}"));
    }
    left
}

/// Threads of stallscope's inside process `pid` (the agent's are named `stallscope-…`).
fn threads_of_ours(pid: i32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with("stallscope"))
        .collect()
}

fn wait_exit(w: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    poll(limit, EVERY, || w.try_wait().ok().flatten())
}

#[test]
fn watch_guards_three_jvms_one_contained_and_prometheus_sees_the_stall_under_its_pid_only() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: one JVM runs in a pid and mount namespace of its own (CI runs as root)"
    );
    let d = scratch("watch-prometheus");
    let (looping, loop_pid) = counted_loop_jvm("300");
    let (quiet, quiet_pid) = idle_jvm(&java25());
    let (contained, contained_pid) = contained_jvm();
    let out = d.join("rec");
    let events = d.join("events.jsonl");
    // The contained JVM runs `-jar /dev/fd/3 idle --duration 600s`.
    let pattern = format!("--duration ({MARK}|600s)");
    let (mut w, addr, said) = start_watch(&[
        "--match",
        &pattern,
        "--out",
        out.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
        "--events",
        events.to_str().unwrap(),
        "--for",
        "170s",
        "--keep-exited",
        "5s",
    ]);
    let prom = prometheus(addr.as_deref().unwrap(), &d.join("prometheus"));

    let three = poll(Duration::from_secs(60), EVERY, || {
        let p = prom.pids("stallscope_watched_jvm == 1");
        (p.len() == 3).then_some(p)
    });
    let mut want = vec![loop_pid as i64, quiet_pid as i64, contained_pid as i64];
    want.sort_unstable();
    let said_so_far: Vec<String> = said.try_iter().collect();
    assert_eq!(three, Some(want), "the three JVMs are watched: {said_so_far:#?}");
    let c = prom.query(&format!("stallscope_watched_jvm{{pid=\"{contained_pid}\"}}"));
    assert!(
        c[0]["container"].as_str().is_some_and(|c| !c.is_empty()),
        "the contained JVM is labelled with its container: {c:?}"
    );
    assert!(
        prom.query(&format!("stallscope_watched_jvm{{pid=\"{loop_pid}\"}}"))[0]["container"]
            .as_str()
            .unwrap_or("")
            .is_empty()
    );

    // The counted loop's stalls, under its pid and cause only.
    let stalled = poll(Duration::from_secs(60), EVERY, || {
        let p = prom.pids("stallscope_stalls_total{cause=\"no-safepoint-poll\"} > 0");
        (!p.is_empty()).then_some(p)
    });
    assert_eq!(
        stalled,
        Some(vec![loop_pid as i64]),
        "a loop without a safepoint poll, in the looping JVM only"
    );
    let ttsp = poll(Duration::from_secs(20), EVERY, || {
        (!prom
            .query(&format!("stallscope_ttsp_seconds_count{{pid=\"{loop_pid}\"}} > 0"))
            .is_empty())
        .then_some(())
    });
    assert!(ttsp.is_some(), "its safepoints' TTSP is exported (from its perf counters)");
    let synced = poll(Duration::from_secs(20), EVERY, || {
        (!prom
            .query(&format!(
                "stallscope_jvm_safepoint_sync_seconds_total{{pid=\"{loop_pid}\"}} > 0.1"
            ))
            .is_empty())
        .then_some(())
    });
    assert!(synced.is_some(), "its counters' own totals are exported");
    // Nothing of stallscope's went into any of them.
    for pid in [loop_pid, quiet_pid, contained_pid] {
        assert!(threads_of_ours(pid).is_empty(), "pid {pid}: {:?}", threads_of_ours(pid));
    }

    // A JVM started later is picked up; one that exits disappears.
    let (late, late_pid) = idle_jvm(&java17());
    let picked = poll(Duration::from_secs(40), EVERY, || {
        prom.pids("stallscope_watched_jvm == 1").contains(&(late_pid as i64)).then_some(())
    });
    assert!(
        picked.is_some(),
        "the JVM started later is watched: {:?}",
        prom.pids("stallscope_watched_jvm")
    );
    drop(quiet);
    let gone = poll(Duration::from_secs(40), EVERY, || {
        (!prom.pids("stallscope_watched_jvm == 1").contains(&(quiet_pid as i64))).then_some(())
    });
    assert!(gone.is_some(), "the JVM that exited is no longer watched");
    // Its series leave once its grace (--keep-exited) is over.
    let forgotten = poll(Duration::from_secs(40), EVERY, || {
        (!prom.pids("stallscope_watched_jvm").contains(&(quiet_pid as i64))).then_some(())
    });
    assert!(forgotten.is_some(), "the exited JVM's series are forgotten after its grace");

    // From Prometheus to the stall's explanation: the loop's stall counter's exemplar names
    // where watch serves its report, which says the cause.
    let served_at = poll(Duration::from_secs(30), EVERY, || {
        prom.exemplars(&format!(
            "stallscope_stalls_total{{pid=\"{loop_pid}\",cause=\"no-safepoint-poll\"}}"
        ))
        .iter()
        .find_map(|l| l["report"].as_str().map(str::to_string))
    })
    .unwrap_or_else(|| panic!("no exemplar of the loop's stalls in Prometheus"));
    let served = addr.as_deref().unwrap();
    let page = {
        let mut c = std::net::TcpStream::connect(served).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET {served_at}.json HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    };
    assert!(page.starts_with("HTTP/1.1 200"), "{served_at}: {page}");
    let (_, body) = page.split_once("\r\n\r\n").unwrap();
    let r: Value = serde_json::from_str(body).unwrap();
    assert_eq!(r["stalls"][0]["findings"][0]["cause"], "no-safepoint-poll", "{body}");

    // The events: one line per diagnosed stall, the loop's named with its culprit and fix.
    let text = std::fs::read_to_string(&events).unwrap();
    let lines = watch_events(&text);
    let e = lines
        .iter()
        .find(|e| e.cause == Cause::NoSafepointPoll)
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(e.schema, "stallscope.watch-event/1");
    assert_eq!(e.jvm.pid, loop_pid);
    assert_eq!(e.culprit.as_ref().map(|c| c.name.as_str()), Some("counted-loop"), "{e:?}");
    assert!(Path::new(&e.recording).join("meta.json").exists());
    // As root with BPF, the JVM's own safepoint probes found its safepoints (the BPF watchdog
    // woke the loop), not a poll of its counters; but for the first, which may have begun
    // before the probes were in (the loop holds its safepoints most of the time).
    let events = std::fs::read_to_string(Path::new(&e.recording).join("events.jsonl")).unwrap();
    let begins: Vec<&str> = events.lines().filter(|l| l.contains(r#""stall-begin""#)).collect();
    assert!(
        begins.iter().any(|l| l.contains(r#""by":"safepoint-probe""#))
            && begins.iter().skip(1).all(|l| l.contains(r#""by":"safepoint-probe""#)),
        "{begins:#?}"
    );
    assert!(
        lines.iter().all(|e| e.cause != Cause::NoSafepointPoll || e.jvm.pid == loop_pid),
        "{text}"
    );

    // SIGTERM: every JVM detached, watch gone.
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let st = wait_exit(&mut w, Duration::from_secs(60));
    let rest: Vec<String> = said.try_iter().collect();
    assert!(st.is_some_and(|s| s.success()), "watch ends cleanly at SIGTERM: {st:?} {rest:#?}");
    let mut left = Vec::new();
    for pid in [loop_pid, contained_pid, late_pid] {
        left.extend(left_in(pid));
    }
    assert!(left.is_empty(), "left behind: {left:#?}");
    // What it kept, `report` reads.
    let r = report(Path::new(&e.recording));
    assert!(causes(&r).contains(&Cause::NoSafepointPoll), "{:?}", causes(&r));
    // And the directory of them all: one line per recording.
    let o = stallscope().args(["report", out.to_str().unwrap()]).output().unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && listing.lines().any(|l| l.contains(&format!("pid {loop_pid} ")) && l.contains("no-safepoint-poll")), "{listing}");
    drop((looping, contained, late, prom));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn retention_holds_its_bound_while_stalls_come_faster_than_it_allows() {
    let _x = exclusive();
    let d = scratch("watch-retention");
    let (looping, loop_pid) = counted_loop_jvm("150");
    let out = d.join("rec");
    const BOUND: u64 = 3 << 20;
    let (mut w, _, said) = start_watch(&[
        &loop_pid.to_string(),
        "--out",
        out.to_str().unwrap(),
        "--retain",
        "3M",
        "--for",
        "60s",
    ]);
    let (mut max, mut dirs_seen) = (0u64, std::collections::HashSet::new());
    let t0 = Instant::now();
    // Until one was removed (seen, and gone), within the loop's life: how fast the stalls fill
    // 3M depends on the machine's load (CI on 2026-11-30: none removed within 35 s).
    let mut removed = false;
    while !removed && t0.elapsed() < Duration::from_secs(55) && w.try_wait().unwrap().is_none() {
        let mut used = 0;
        let mut here = 0;
        for e in std::fs::read_dir(&out).into_iter().flatten().flatten() {
            dirs_seen.insert(e.file_name());
            used += du(&e.path());
            here += 1;
        }
        removed = dirs_seen.len() > here;
        max = max.max(used);
        std::thread::sleep(Duration::from_millis(100));
    }
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let st = wait_exit(&mut w, Duration::from_secs(60));
    let said: Vec<String> = said.try_iter().collect();
    assert!(st.is_some_and(|s| s.success()), "{st:?} {said:#?}");
    let now: Vec<PathBuf> = std::fs::read_dir(&out).unwrap().flatten().map(|e| e.path()).collect();
    assert!(
        dirs_seen.len() > now.len(),
        "recordings were rolled and the oldest removed ({} seen, {} kept): the stalls came faster than 3M allows",
        dirs_seen.len(),
        now.len()
    );
    assert!(max <= BOUND, "{max} bytes used at the most, over the 3M bound");
    for r in &now {
        let o = stallscope().args(["report", "--json", r.to_str().unwrap()]).output().unwrap();
        assert!(o.status.success(), "{}: {}", r.display(), String::from_utf8_lossy(&o.stderr));
    }
    assert!(left_in(loop_pid).is_empty(), "{:?}", left_in(loop_pid));
    drop(looping);
    let _ = std::fs::remove_dir_all(&d);
}

/// `watch` restarted over the same `--out` with a lower `--retain`: the first pass removes the
/// earlier run's finished recordings, oldest first, down to three quarters of the new bound, and
/// keeps the newest and the live one. (A higher bound removes none of them.)
#[test]
fn a_lower_retain_after_a_restart_removes_the_oldest_recordings_first() {
    let _x = exclusive();
    let d = scratch("watch-retain-lowered");
    let out = d.join("rec");
    std::fs::create_dir_all(&out).unwrap();
    // Five finished recordings of an earlier run (a stored one, 1.8 MB each), a day apart: a
    // recording's age is its meta.json's.
    let stored = root().join("tests/fixtures/recordings/jdk17-safepoint-storm-cpu-hog4");
    let day = Duration::from_secs(86_400);
    let old: Vec<PathBuf> = (1..=5)
        .map(|i| {
            let dir = out.join(format!("4242-Old-20261120-00000{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in std::fs::read_dir(&stored).unwrap().flatten() {
                std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
            }
            let at = std::time::SystemTime::now() - day * (6 - i);
            std::fs::File::options()
                .write(true)
                .open(dir.join("meta.json"))
                .unwrap()
                .set_modified(at)
                .unwrap();
            dir
        })
        .collect();
    let each = du(&old[0]);
    assert!(each > 1 << 20, "{each}");
    let (jvm, pid) = idle_jvm(&java17());
    let watch_for = |retain: &str| {
        let (mut w, _, said) = start_watch(&[
            &pid.to_string(),
            "--out",
            out.to_str().unwrap(),
            "--retain",
            retain,
            "--for",
            "6s",
        ]);
        let st = wait_exit(&mut w, Duration::from_secs(60));
        let said: Vec<String> = said.try_iter().collect();
        assert!(st.is_some_and(|s| s.success()), "--retain {retain}: {st:?} {said:#?}");
    };
    watch_for("1G");
    assert!(old.iter().all(|o| o.exists()), "1G removed some of 9 MB");
    // Lowered to 4M: three quarters is 3M, so four of the five old ones go, oldest first.
    watch_for("4M");
    let gone: Vec<bool> = old.iter().map(|o| !o.exists()).collect();
    assert_eq!(gone, [true, true, true, true, false], "oldest first");
    let live: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| !old.contains(p))
        .collect();
    assert_eq!(live.len(), 2, "each run's own recording is kept: {live:?}");
    let used: u64 = std::fs::read_dir(&out).unwrap().flatten().map(|e| du(&e.path())).sum();
    assert!(used <= 4 << 20, "{used} bytes kept over the 4M bound");
    let o = stallscope().args(["report", "--json"]).arg(&old[4]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    drop(jvm);
    assert!(left_in(pid).is_empty(), "{:?}", left_in(pid));
    let _ = std::fs::remove_dir_all(&d);
}

fn du(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(p) else { return 0 };
    if m.is_dir() {
        std::fs::read_dir(p).into_iter().flatten().flatten().map(|e| du(&e.path())).sum()
    } else {
        m.blocks() * 512
    }
}

#[test]
fn watch_killed_outright_leaves_every_jvm_running_and_as_it_was() {
    let _x = exclusive();
    let d = scratch("watch-sigkill");
    let (jvm, pid) = idle_jvm(&java17());
    let (mut w, _, said) = start_watch(&[
        &pid.to_string(),
        "--attach",
        "--out",
        d.join("rec").to_str().unwrap(),
        "--for",
        "120s",
    ]);
    let metering =
        poll(Duration::from_secs(30), EVERY, || heartbeat_of(pid).exists().then_some(()));
    assert!(
        metering.is_some(),
        "watch never got the agent going: {:#?}",
        said.try_iter().collect::<Vec<_>>()
    );
    std::thread::sleep(Duration::from_secs(1));
    w.kill().unwrap();
    let _ = w.wait();
    // Each JVM's guardian undoes what watch did once watch is gone.
    let undone = poll(Duration::from_secs(20), EVERY, || left_in(pid).is_empty().then_some(()));
    assert!(undone.is_some(), "left behind: {:?}", left_in(pid));
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the JVM runs on");
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn watch_killed_outright_mid_stall_leaves_the_stall_in_its_recording_up_to_the_kill() {
    let _x = exclusive();
    let d = scratch("watch-sigkill-stall");
    // Each thread dump waits seconds for a counted loop (3,000 rounds: about 13 s on JDK 17).
    let (jvm, pid) = counted_loop_jvm("3000");
    let rec = d.join("rec");
    let (mut w, _, _said) = start_watch(&[&pid.to_string(), "--out", rec.to_str().unwrap()]);
    let events = || {
        let dir = std::fs::read_dir(&rec).ok()?.flatten().next()?.path();
        std::fs::read_to_string(dir.join("events.jsonl")).ok().map(|e| (dir, e))
    };
    let begun = poll(Duration::from_secs(30), EVERY, || {
        events().filter(|(_, e)| e.contains("stall-begin"))
    });
    let (dir, _) = begun.expect("watch saw no stall begin");
    std::thread::sleep(Duration::from_secs(2));
    w.kill().unwrap();
    let _ = w.wait();
    let (_, e) = events().unwrap();
    assert!(!e.contains("stall-end"), "the stall ended before the kill; a longer loop is needed");
    // Read as it was left: the stall lasted at least until the kill, and the JVM, which runs
    // on, did not exit in it.
    let r = report(&dir);
    assert!(Path::new(&format!("/proc/{pid}")).exists(), "the JVM runs on");
    let s = r.stalls.last().expect("the stall under way at the kill is in the report");
    assert!(s.duration_ns >= 1_500_000_000, "cut at its begin: {} ns", s.duration_ns);
    assert!(!s.target_exited, "the JVM did not exit: {s:?}");
    assert_eq!(s.findings[0].cause, Cause::NoSafepointPoll, "{:?}", s.findings[0]);
    assert!(
        r.notes.iter().any(|n| n.contains("no end record")),
        "the report says the recording was cut: {:?}",
        r.notes
    );
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
}

/// What `watch` says of each stall as it ends is what `report` says of the same recording later:
/// one input type, one doctor (issue 54). The tally of stalls the same instigator set off counts
/// those seen so far in an event, and the whole recording's in a report, so it is left out of
/// the comparison; every other field of the event is the report's own.
#[test]
fn each_stall_watch_explains_live_is_explained_the_same_by_report_from_its_recording() {
    let _x = exclusive();
    let d = scratch("watch-live-report");
    let (jvm, pid) = counted_loop_jvm("20");
    let (rec, events) = (d.join("rec"), d.join("events.jsonl"));
    let (mut w, _, _said) = start_watch(&[
        &pid.to_string(),
        "--out",
        rec.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
        "--for",
        "8s",
    ]);
    let ended = wait_exit(&mut w, Duration::from_secs(60));
    assert!(ended.is_some_and(|s| s.success()), "watch --for 8s ended by itself: {ended:?}");
    let live = watch_events(&std::fs::read_to_string(&events).unwrap_or_default());
    assert!(live.len() >= 3, "a stall a second or so for 8 s: {live:?}");
    let dir = PathBuf::from(&live[0].recording);
    let later = report(&dir);
    let tally =
        regex::Regex::new(r" \(the same set off \d+ stalls of this recording[^)]*\)").unwrap();
    let plain = |t: &str| tally.replace_all(t, "").into_owned();
    for e in &live {
        let s = later.stalls.iter().find(|s| s.stall == e.stall);
        let s = s.unwrap_or_else(|| {
            panic!("stall {} is not in the report of {}", e.stall, dir.display())
        });
        let f = &s.findings[0];
        let what = format!("stall {} of {}", e.stall, dir.display());
        assert_eq!(
            (e.cause, e.confidence, &e.title, e.share, &e.fix, e.duration_ns),
            (f.cause, f.confidence, &f.title, f.share, &f.fix, s.duration_ns),
            "{what}"
        );
        assert_eq!(
            e.safepoint.as_ref().map(|p| (&p.op, p.ttsp_ns, p.total_ns)),
            s.safepoint.as_ref().map(|p| (&p.op, p.ttsp_ns, p.total_ns)),
            "{what}"
        );
        assert_eq!(
            e.culprit.as_ref().map(|c| (c.tid, &c.name, &c.description)),
            f.culprits.first().map(|c| (c.tid, &c.name, &c.description)),
            "{what}"
        );
        assert_eq!(
            e.instigator.as_ref().map(|i| (i.kind, &i.name, plain(&i.did), i.pid, i.tid)),
            f.instigator.as_ref().map(|i| (i.kind, &i.name, plain(&i.did), i.pid, i.tid)),
            "{what}"
        );
    }
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_jvm_that_refuses_the_attach_or_is_recorded_already_is_skipped_with_one_line_each() {
    let _x = exclusive();
    let d = scratch("watch-skips");
    // One that refuses attaching, one already recorded by `stallscope run`, one to watch.
    let mut refusing = Command::new(java17())
        .args(["-Xmx64m", "-XX:+DisableAttachMechanism", "-jar"])
        .arg(workloads_jar())
        .args(["idle", "--duration", MARK])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(refusing.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let refusing_pid = refusing.id() as i32;
    let refusing = Reaper(refusing);
    let mut recorded = stallscope()
        .args(["run", "--no-frames", "--out", d.join("run").to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-Xmx64m", "-jar"])
        .arg(workloads_jar())
        .args(["idle", "--duration", MARK])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(recorded.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let recorded_pid: i32 = line
        .trim()
        .strip_prefix("idle: pid ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    let recorded = Reaper(recorded);
    // The recorded JVM ends first, so that its `run` finishes rather than leave it orphaned; on
    // every way out, so that a failure here leaves no JVM for the next test's `--match`.
    struct KillFirst(i32);
    impl Drop for KillFirst {
        fn drop(&mut self) {
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let recorded_jvm = KillFirst(recorded_pid);
    let (plain, plain_pid) = idle_jvm(&java17());
    let (mut w, _, said) = start_watch(&[
        "--match",
        &format!("--duration {MARK}"),
        "--attach",
        "--out",
        d.join("rec").to_str().unwrap(),
        "--for",
        "60s",
    ]);
    let watched =
        poll(Duration::from_secs(30), EVERY, || heartbeat_of(plain_pid).exists().then_some(()));
    assert!(watched.is_some(), "the plain JVM is watched");
    // A JVM without an attach mechanism says so in its counters: refused at once.
    let mut lines: Vec<String> = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30)
        && !(lines.iter().any(|l| l.contains(&format!("pid {refusing_pid} ")))
            && lines.iter().any(|l| l.contains(&format!("pid {recorded_pid} "))))
    {
        lines.extend(said.recv_timeout(Duration::from_millis(500)).ok());
    }
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let st = wait_exit(&mut w, Duration::from_secs(60));
    lines.extend(said.try_iter());
    assert!(st.is_some_and(|s| s.success()), "{st:?} {lines:#?}");
    let of = |pid: i32| -> Vec<&String> {
        lines
            .iter()
            .filter(|l| l.contains(&format!("pid {pid} ")) && l.contains("not watched"))
            .collect()
    };
    let refused = of(refusing_pid);
    assert_eq!(refused.len(), 1, "one line for the JVM that refuses: {lines:#?}");
    assert!(refused[0].contains("-XX:+DisableAttachMechanism"), "{}", refused[0]);
    let again = of(recorded_pid);
    assert_eq!(again.len(), 1, "one line for the JVM recorded already: {lines:#?}");
    assert!(again[0].contains("another stallscope records it"), "{}", again[0]);
    assert!(heartbeat_of(recorded_pid).exists(), "the other stallscope's recording goes on");
    assert!(left_in(plain_pid).is_empty());
    drop(recorded_jvm);
    drop((refusing, recorded, plain));
    let _ = std::fs::remove_dir_all(&d);
}

/// A JVM of the workloads jar on JDK 17 with these options and arguments; its pid.
fn jvm_with(options: &[&str], args: &[&str]) -> (Reaper, i32) {
    Jvm::start(workload(Command::new(java17()), options, args)).became_jvm().into_parts()
}

/// The OpenMetrics text watch serves at `addr`.
/// Many idle JVMs and one whose safepoints wait on a loop without a poll, all watched by default
/// (from outside): the stall is named under its pid, no JVM holds a thread of stallscope's, a JVM
/// without perf data is watched through /proc and said so, and watch killed outright leaves each
/// JVM running as it was (there is nothing to undo).
#[test]
fn many_jvms_watched_from_outside_hold_nothing_of_ours_and_the_stall_among_them_is_named() {
    let _x = exclusive();
    let d = scratch("watch-outside-many");
    let mark = "62s";
    let mut jvms = Vec::new();
    for _ in 0..8 {
        jvms.push(jvm_with(
            &["-Xmx16m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"],
            &["idle", "--duration", mark],
        ));
    }
    let (no_perf, no_perf_pid) =
        jvm_with(&["-Xmx16m", "-XX:-UsePerfData"], &["idle", "--duration", mark]);
    let (looping, loop_pid) = jvm_with(
        &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
        &[
            "counted-loop",
            "--shape",
            "dependent",
            "--rounds",
            "1",
            "--every",
            "2s",
            "--duration",
            mark,
        ],
    );
    let events = d.join("events.jsonl");
    let (mut w, addr, said) = start_watch(&[
        "--match",
        &format!("--duration {mark}"),
        "--out",
        d.join("rec").to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
        "--events",
        events.to_str().unwrap(),
        "--for",
        "90s",
    ]);
    let addr = addr.unwrap();
    let watched = poll(Duration::from_secs(60), EVERY, || {
        (scrape(&addr)
            .lines()
            .filter(|l| l.starts_with("stallscope_watched_jvm{") && l.ends_with(" 1"))
            .count()
            == 10)
            .then_some(())
    });
    assert!(watched.is_some(), "ten JVMs watched: {}", scrape(&addr));
    let stalled = poll(Duration::from_secs(60), EVERY, || {
        std::fs::read_to_string(&events)
            .ok()
            .filter(|t| t.contains("\"cause\":\"no-safepoint-poll\""))
            .map(|_| ())
    });
    assert!(stalled.is_some(), "the loop's stall was diagnosed");
    let text = std::fs::read_to_string(&events).unwrap();
    for e in watch_events(&text) {
        if e.cause == Cause::NoSafepointPoll {
            assert_eq!(e.jvm.pid, loop_pid, "{e:?}");
            assert_eq!(e.culprit.as_ref().map(|c| c.name.as_str()), Some("counted-loop"), "{e:?}");
        }
    }
    let mut inside = Vec::new();
    for pid in jvms.iter().map(|j| j.1).chain([no_perf_pid, loop_pid]) {
        inside.extend(threads_of_ours(pid));
    }
    assert!(inside.is_empty(), "threads of stallscope's inside the JVMs: {inside:?}");
    w.kill().unwrap();
    let _ = w.wait();
    // As root, watch's one BPF program recorded the guarded JVMs' waits: the loop's stall has the
    // kernel's account. Its raw waits, not the report's lines: those leave out threads parked by
    // choice throughout (the VM operation's caller, waiting on a futex for the whole stall), and
    // a loop that kept its CPU throughout (the other one free) has no wait of its own; the
    // report then has no kernel line, rightly (seen once in a local CI run).
    let loop_rec = std::fs::read_dir(d.join("rec"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{loop_pid}-")))
        .expect("the loop's recording");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(loop_rec.join("meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["bpf"], true, "{meta}");
    let r = report(&loop_rec);
    let rec = recording::Recording::read(&loop_rec, None).unwrap();
    // One input, one doctor: each stall watch diagnosed live, from what its recorder kept in
    // memory, is the stall `report` finds in the files later, event for event.
    let live: Vec<_> = watch_events(&text).into_iter().filter(|e| e.jvm.pid == loop_pid).collect();
    assert!(!live.is_empty(), "the loop's stalls were events");
    for e in &live {
        let s = r.stalls.iter().find(|s| s.stall == e.stall);
        let s = s.unwrap_or_else(|| panic!("stall {} of the events is in the report", e.stall));
        let mut later = fleet::events::StallEvent::of(&e.jvm, &rec, s);
        // Where watch served its report is no part of the diagnosis.
        later.url = e.url.clone();
        assert_eq!(
            serde_json::to_value(e).unwrap(),
            serde_json::to_value(&later).unwrap(),
            "stall {}: watch's event (left) and the report's (right)",
            e.stall
        );
    }
    // The stalls the loop held, and over each the longest share of it one thread's recorded
    // waits cover.
    let covered: Vec<(u32, f64)> = r
        .stalls
        .iter()
        .filter(|s| s.findings[0].cause == Cause::NoSafepointPoll)
        .map(|s| {
            let (from, to) = (s.start_mono_ns, s.start_mono_ns + s.duration_ns);
            let mut per: std::collections::HashMap<i32, u64> = Default::default();
            for k in rec.kwaits.iter().filter(|k| k.stall == s.stall) {
                for w in &k.waits {
                    let end = w.end.unwrap_or(to).min(to);
                    *per.entry(w.tid).or_default() += end.saturating_sub(w.start.max(from));
                }
            }
            let most = per.values().copied().max().unwrap_or(0);
            (s.stall, most as f64 / s.duration_ns.max(1) as f64)
        })
        .collect();
    println!("the loop's stalls, and the most of each one thread's waits cover: {covered:?}");
    // Some thread of the JVM (the one that asked for the GC) waited through most of it.
    assert!(
        covered.iter().any(|&(_, share)| share >= 0.5),
        "the loop's stall has the kernel's waits, one thread's over most of it: {covered:?}"
    );
    let lines: Vec<String> = said.try_iter().collect();
    assert!(
        lines.iter().any(|l| l.contains(&format!("pid {no_perf_pid}"))
            && l.contains("no perf counters")
            && l.contains("-XX:-UsePerfData")),
        "the JVM without perf data is said to be watched through /proc: {lines:#?}"
    );
    for pid in jvms.iter().map(|j| j.1).chain([no_perf_pid, loop_pid]) {
        assert!(Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} runs on");
        assert!(!procwatch::task::stopped(pid), "pid {pid} runs on");
    }
    drop((jvms, no_perf, looping));
    let _ = std::fs::remove_dir_all(&d);
}

/// The held-out case of issue 27: a JVM whose loop holds a System.gc() for a few seconds, 1.2 s
/// after it starts, then exits. It is watched from its first second, and its stall is still in
/// the metrics after it exited, until its grace is over.
#[test]
fn a_short_lived_jvm_that_stalls_and_exits_is_still_scraped_after_it_exited_and_its_report_served()
{
    let _x = exclusive();
    let d = scratch("watch-short-lived");
    let mark = "4500ms";
    let events = d.join("events.jsonl");
    let (mut w, addr, _said) = start_watch(&[
        "--match",
        &format!("--duration {mark}"),
        "--out",
        d.join("rec").to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
        "--metrics",
        "127.0.0.1:0",
        "--keep-exited",
        "60s",
        "--for",
        "60s",
    ]);
    let addr = addr.unwrap();
    let (jvm, pid) = jvm_with(
        &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
        &[
            "counted-loop",
            "--shape",
            "dependent",
            "--rounds",
            "1",
            "--every",
            "1200ms",
            "--duration",
            mark,
        ],
    );
    let mut jvm = jvm;
    let exited = poll(Duration::from_secs(40), EVERY, || jvm.0.try_wait().ok().flatten());
    assert!(exited.is_some(), "the JVM ran and exited");
    let want = format!(",pid=\"{pid}\",");
    let seen = poll(Duration::from_secs(20), EVERY, || {
        scrape(&addr)
            .lines()
            .find(|l| {
                l.starts_with("stallscope_stalls_total{")
                    && l.contains(&want)
                    && l.contains("cause=\"no-safepoint-poll\"")
            })
            .map(str::to_string)
    });
    let seen = seen
        .unwrap_or_else(|| panic!("the exited JVM's stall is in the metrics: {}", scrape(&addr)));

    // From the metric to the stall's report in one step: its exemplar names where watch serves
    // it, and the event names the same page.
    let report = exemplar_report(&seen)
        .unwrap_or_else(|| panic!("the stall counter carries its report as an exemplar: {seen}"));
    // The JVM's worst stall names where its report is, for the dashboard's link.
    let metrics = scrape(&addr);
    let worst = metrics
        .lines()
        .find(|l| l.starts_with("stallscope_worst_stall_seconds{") && l.contains(&want))
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(worst.contains(",report=\"/recordings/"), "{worst}");
    let (status, page) = get(&addr, &report);
    assert!(status.contains("200") && page.contains("no-safepoint-poll"), "{status}: {report}");
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "the HTML report: {}",
        &page[..page.len().min(300)]
    );
    // In a real browser, the page draws (its own health in the DOM) and names the cause.
    let dom = browser::run_url(
        &format!("http://{addr}{report}"),
        &["--dump-dom", "--window-size=1400,1200"],
    );
    assert_eq!(browser::attr(&dom, "<body", "data-rendered").as_deref(), Some("ok"), "{dom}");
    assert_eq!(browser::attr(&dom, "<body", "data-errors").as_deref(), Some("0"), "{dom}");
    assert!(dom.contains("no-safepoint-poll"), "the cause on the page");
    let (status, json) = get(&addr, &format!("{report}.json"));
    assert!(status.contains("200"), "{status}: {json}");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let stall: u64 = report.rsplit('/').next().unwrap().parse().unwrap();
    let stalls = r["stalls"].as_array().unwrap();
    assert_eq!(stalls.len(), 1, "that stall alone: {json}");
    assert_eq!(stalls[0]["stall"].as_u64(), Some(stall));
    assert_eq!(stalls[0]["findings"][0]["cause"], "no-safepoint-poll");
    let event = poll(Duration::from_secs(10), EVERY, || {
        watch_events(&std::fs::read_to_string(&events).ok()?)
            .into_iter()
            .find(|e| e.jvm.pid == pid && e.stall as u64 == stall)
    })
    .expect("the stall's event");
    assert_eq!(event.url.as_deref(), Some(format!("http://{addr}{report}").as_str()));
    let recording = report.trim_end_matches(&format!("stalls/{stall}"));
    let (status, whole) = get(&addr, recording);
    assert!(status.contains("200") && whole.starts_with("<!DOCTYPE html>"), "{status}");
    // Nothing else: not a file of the recording, not outside it, not a stall it does not have.
    for bad in [
        format!("{recording}meta.json"),
        format!("{recording}stalls/4000000"),
        "/recordings/../../etc/passwd".to_string(),
        "/recordings/%2e%2e/".to_string(),
        "/recordings/".to_string(),
        format!("/recordings/{}/", "x".repeat(5000)),
    ] {
        let (status, body) = get(&addr, &bad);
        assert!(status.contains("404"), "{bad}: {status}");
        assert!(!body.contains("root:"), "{bad}: {body}");
    }
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    wait_exit(&mut w, Duration::from_secs(30));
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
}

/// `--attach N/WINDOW`: a JVM watched from outside that stalls more than N times in the window
/// gets the agent and safepoint logging; at SIGTERM it is left as it was found. One that refuses
/// the attach protocol stays watched from outside, and its later stalls are still named.
#[test]
fn a_jvm_that_stalls_often_is_attached_to_and_left_as_found() {
    let _x = exclusive();
    let d = scratch("watch-escalate");
    let (jvm, pid) = counted_loop_jvm("300");
    let (refusing, refusing_pid) = counted_loop_jvm_with(&["-XX:+DisableAttachMechanism"], "300");
    let events = d.join("events.jsonl");
    let (mut w, _, said) = start_watch(&[
        &pid.to_string(),
        &refusing_pid.to_string(),
        "--attach",
        "2/1m",
        "--out",
        d.join("rec").to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
        "--for",
        "120s",
    ]);
    let stalls_of = |p: i32| {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                serde_json::from_str::<StallEvent>(l)
                    .is_ok_and(|e| e.jvm.pid == p && e.cause == Cause::NoSafepointPoll)
            })
            .count()
    };
    let mut lines: Vec<String> = Vec::new();
    let refused = poll(Duration::from_secs(60), EVERY, || {
        lines.extend(said.try_iter());
        lines
            .iter()
            .any(|l| {
                l.contains(&format!("pid {refusing_pid}: not attached"))
                    && l.contains("watched from outside")
            })
            .then(|| stalls_of(refusing_pid))
    });
    assert!(
        refused.is_some(),
        "the JVM without an attach mechanism was tried and refused: {lines:#?}"
    );
    let later = poll(Duration::from_secs(40), EVERY, || {
        (stalls_of(refusing_pid) >= refused.unwrap() + 2).then_some(())
    });
    assert!(
        later.is_some(),
        "the refusing JVM's stalls after the refusal are still named: {} before, {} now",
        refused.unwrap(),
        stalls_of(refusing_pid)
    );
    let metering =
        poll(Duration::from_secs(60), EVERY, || heartbeat_of(pid).exists().then_some(()));
    lines.extend(said.try_iter());
    assert!(metering.is_some(), "the JVM that stalled often was attached to: {lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains(&format!("pid {pid}"))
            && l.contains("stalls in")
            && l.contains("attaching")),
        "{lines:#?}"
    );
    assert_eq!(
        lines.iter().filter(|l| l.contains(&format!("pid {refusing_pid}: not attached"))).count(),
        1,
        "tried once: {lines:#?}"
    );
    unsafe { libc::kill(w.id() as i32, libc::SIGTERM) };
    let st = wait_exit(&mut w, Duration::from_secs(60));
    assert!(st.is_some_and(|s| s.success()), "{st:?}");
    assert!(left_in(pid).is_empty(), "{:?}", left_in(pid));
    assert!(left_in(refusing_pid).is_empty(), "{:?}", left_in(refusing_pid));
    drop(refusing);
    // The first recording (from outside) and the second (attached) are both there.
    assert!(std::fs::read_dir(d.join("rec")).unwrap().count() >= 2);
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
}

/// A JVM that stalls in its first second (full GCs as its heap is built) has those stalls
/// explained: discovery wakes as the JVM makes its perf-data file, not at its next pass up to a
/// second later (issue 58: a five-minute soak missed 7 of 114 stalls, each in its JVM's first
/// half second). Three JVMs one after another, each living about a second.
#[test]
fn stalls_in_a_jvms_first_second_are_seen() {
    let _x = exclusive();
    let d = scratch("watch-young");
    let events = d.join("events.jsonl");
    let (mut w, _, said) = start_watch(&[
        "--match",
        "young61",
        "--out",
        d.join("rec").to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
        "--for",
        "120s",
    ]);
    let ready = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        said.try_iter().find(|l| l.starts_with("stallscope: watching"))
    });
    assert!(ready.is_some(), "watch said it was watching");
    // Safepoints at least this long, begun in this first part of the JVM's life, must be stalls.
    let (long_ns, young_ns) = (10_000_000u64, 1_000_000_000u64);
    let mut early = Vec::new();
    for i in 0..3 {
        let log = d.join(format!("safepoints-{i}.log"));
        let mut java = Command::new(java17());
        java.args(["-Dyoung61", "-Xmx256m", "-XX:+UseParallelGC"])
            .arg(format!("-Xlog:safepoint:file={}:uptimenanos", log.display()));
        let (mut jvm, pid) = Jvm::start(workload(
            java,
            &[],
            &["heap-gc", "--live", "96", "--gcs", "2", "--every", "50ms"],
        ))
        .into_parts();
        let ended = poll(Duration::from_secs(30), EVERY, || jvm.0.try_wait().ok().flatten());
        assert!(ended.is_some_and(|s| s.success()), "JVM {i} ran and exited");
        // `[123456789ns] Safepoint "…", … Total: 34567890 ns`
        let text = std::fs::read_to_string(&log).unwrap();
        let n = text
            .lines()
            .filter_map(|l| {
                let up = l.strip_prefix('[')?.split_once("ns]")?.0.parse::<u64>().ok()?;
                let total =
                    l.rsplit_once("Total: ")?.1.trim_end_matches(" ns").parse::<u64>().ok()?;
                (total >= long_ns && up.saturating_sub(total) < young_ns).then_some(())
            })
            .count();
        early.push((pid, n, text));
    }
    assert!(
        early.iter().any(|(_, n, _)| *n > 0),
        "the JVMs paused for at least 10 ms in their first second: {:?}",
        early.iter().map(|e| &e.2).collect::<Vec<_>>()
    );
    let stalls_of = |pid: i32| {
        std::fs::read_to_string(&events)
            .map(|t| watch_events(&t).into_iter().filter(|e| e.jvm.pid == pid).count())
            .unwrap_or(0)
    };
    let seen = poll(Duration::from_secs(20), EVERY, || {
        early.iter().all(|(pid, n, _)| stalls_of(*pid) >= *n).then_some(())
    });
    let _ = w.kill();
    let _ = w.wait();
    assert!(
        seen.is_some(),
        "every JVM's early pauses are stalls: {:?}; their logs: {:?}",
        early.iter().map(|(p, n, _)| (p, n, stalls_of(*p))).collect::<Vec<_>>(),
        early.iter().map(|e| &e.2).collect::<Vec<_>>()
    );
}

/// Milliseconds since the epoch of a wall time, as the JVM's `utctime` and watch's events'
/// `time` write it (the safepoint log parser's own reading).
fn wall_ms(s: &str) -> Option<i64> {
    hotspot_log::stamps::parse_iso_time(s.as_bytes()).map(|w| w.epoch_ms)
}

/// Issue 58, found by the soak (a pod's 17 ms thread dump, never an event) and then in minutes
/// here: the loop marked a watcher busy only after handing it a stall; a watcher woken at once
/// could sample a stall already over (one just past the threshold), end it and say it was idle
/// before that, and so stayed busy, its JVM's stalls unseen, until its next idle look (seconds).
/// Two JVMs whose thread dumps wait on a counted loop many times a second: every safepoint of
/// twice the threshold their own logs show (after their first 2 s) is an event.
#[test]
fn every_safepoint_of_a_jvm_that_stalls_many_times_a_second_is_an_event() {
    every_safepoint_is_an_event("every61", 2, 60, 20, &[], &mut |_| {});
}

/// Issue 58, found by the soak (a 2,000-thread JVM's thread dump, never an event, its recording
/// rolled about once a minute) and then in minutes here: a roll closed the recording by joining
/// its writer thread, which waited for every barrier of its stalls, some held for up to a second
/// in `watch`'s analysis queue (16 of 263 safepoints missed in 60 s, in bursts right after each
/// roll); and the next recording's safepoint probes saw nothing begun before them. A JVM whose
/// thread dumps wait on a counted loop many times a second, its recording rolled every few
/// seconds by a small `--retain`: every safepoint of twice the threshold is an event.
///
/// One JVM alone must stall often enough for the count below: 40 rounds a call, not 20. At 20,
/// a call lasted 21 to 100 ms from run to run, and CI's run saw 96 safepoints of 10 ms where
/// the test asks for 100; at 40 a call lasts 46 ms here, and 51 of 56 waits reach 10 ms.
#[test]
fn no_safepoint_is_missed_while_a_recording_is_rolled() {
    let mut rolled = std::collections::HashSet::new();
    every_safepoint_is_an_event("rolled62", 1, 40, 40, &["--retain", "4M"], &mut |rec| {
        for e in std::fs::read_dir(rec).into_iter().flatten().flatten() {
            rolled.insert(e.file_name());
        }
    });
    assert!(rolled.len() >= 3, "its recording was rolled at least twice: {rolled:?}");
}

/// `jvms` JVMs tagged `tag` whose thread dumps wait on a counted loop of `rounds` sums every 150 ms
/// for `secs`, watched with `args` beside the usual ones: every safepoint of at least 10 ms their
/// own logs show (after their first 2 s) must be an event. `during` is shown the recordings'
/// directory while they run.
fn every_safepoint_is_an_event(
    tag: &str,
    jvms: usize,
    secs: u64,
    rounds: u32,
    args: &[&str],
    during: &mut dyn FnMut(&Path),
) {
    let _x = exclusive();
    let d = scratch(&format!("watch-{tag}"));
    let events = d.join("events.jsonl");
    let rec = d.join("rec");
    let for_secs = format!("{}s", secs + 90);
    let mut watch_args = vec![
        "--match",
        tag,
        "--out",
        rec.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
        "--for",
        &for_secs,
    ];
    watch_args.extend_from_slice(args);
    let (mut w, _, said) = start_watch(&watch_args);
    let ready = poll(Duration::from_secs(20), Duration::from_millis(50), || {
        said.try_iter().find(|l| l.starts_with("stallscope: watching"))
    });
    assert!(ready.is_some(), "watch said it was watching");
    let duration = format!("{secs}s");
    let rounds = rounds.to_string();
    let jvms: Vec<(Reaper, i32, PathBuf)> = (0..jvms)
        .map(|i| {
            let log = d.join(format!("safepoints-{i}.log"));
            let mut java = Command::new(java25());
            java.arg(format!("-D{tag}"))
                .args(["-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"])
                .arg(format!("-Xlog:safepoint:file={}:utctime,uptime", log.display()));
            let args = [
                "counted-loop",
                "--duration",
                &duration,
                "--rounds",
                &rounds,
                "--every",
                "150ms",
                "--trigger",
                "threaddump",
            ];
            let (jvm, pid) = Jvm::start(workload(java, &[], &args)).into_parts();
            (jvm, pid, log)
        })
        .collect();
    // Each safepoint of at least 10 ms begun after the JVM's first 2 s: (pid, line, begin and
    // end in wall ms, total ns).
    let mut truth = Vec::new();
    for (mut jvm, pid, log) in jvms {
        let ended = poll(Duration::from_secs(secs + 60), EVERY, || {
            during(&rec);
            jvm.0.try_wait().ok().flatten()
        });
        assert!(ended.is_some_and(|s| s.success()), "JVM {pid} ran and exited");
        let out = stallscope().args(["logs", "--csv", "--no-rotation"]).arg(&log).output().unwrap();
        let csv = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let (line, end_wall, total, up) =
            (col("line"), col("end_wall"), col("total_ns"), col("start_uptime_ns"));
        for row in lines {
            let f: Vec<&str> = row.split(',').collect();
            let total_ns = f[total].parse::<u64>().unwrap_or(0);
            let up_ns = f[up].parse::<u64>().unwrap_or(0);
            if total_ns < 10_000_000 || up_ns < 2_000_000_000 {
                continue;
            }
            let end = wall_ms(f[end_wall]).unwrap_or_else(|| panic!("a wall time: {row}"));
            truth.push((
                pid,
                f[line].to_string(),
                end - (total_ns / 1_000_000) as i64,
                end,
                total_ns,
            ));
        }
    }
    assert!(truth.len() >= 100, "the JVMs stalled at least 100 times for 10 ms: {}", truth.len());
    // An event's begin and end, wall ms.
    let span = |e: &StallEvent| {
        let t = wall_ms(&e.time).unwrap();
        (t, t + (e.duration_ns / 1_000_000) as i64)
    };
    let missed = |evs: &[StallEvent]| {
        truth
            .iter()
            .filter(|(pid, _, begin, end, _)| {
                !evs.iter().any(|e| {
                    let (t, t_end) = span(e);
                    e.jvm.pid == *pid && t - 50 <= *end && *begin <= t_end + 50
                })
            })
            .map(|(pid, line, _, _, total)| {
                format!("pid {pid} line {line}: {:.1} ms", *total as f64 / 1e6)
            })
            .collect::<Vec<_>>()
    };
    // Each is diagnosed as it ends: the last ones may still be on their way.
    let left = poll(Duration::from_secs(20), EVERY, || {
        let evs = watch_events(&std::fs::read_to_string(&events).unwrap_or_default());
        let m = missed(&evs);
        m.is_empty().then_some(())
    });
    let _ = w.kill();
    let _ = w.wait();
    let evs = watch_events(&std::fs::read_to_string(&events).unwrap_or_default());
    assert!(
        left.is_some(),
        "every safepoint of 10 ms or more is an event; {} of {} are not: {:?}",
        missed(&evs).len(),
        truth.len(),
        missed(&evs)
    );
    // And one event, not two: a stall cut by a roll of its recording and seen again by the next
    // recording would be events of two recordings overlapping it, each by more than the
    // times' rounding (two safepoints back to back are one recording's).
    let split: Vec<String> = truth
        .iter()
        .filter_map(|(pid, line, begin, end, total)| {
            let parts = evs
                .iter()
                .filter(|e| {
                    let (t, t_end) = span(e);
                    e.jvm.pid == *pid && (*end).min(t_end) - (*begin).max(t) >= 2
                })
                .map(|e| e.recording.as_str())
                .collect::<std::collections::HashSet<_>>()
                .len();
            (parts > 1).then(|| {
                format!(
                    "pid {pid} line {line}: {:.1} ms, in {parts} recordings",
                    *total as f64 / 1e6
                )
            })
        })
        .collect();
    assert!(split.is_empty(), "each safepoint is one event, not two: {split:?}");
}

/// A tmpfs of the test's own, unmounted when dropped (root only).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a tmpfs at {} needs root", at.display());
        SmallDisk(at.to_path_buf())
    }

    /// Fills it to the last byte, as another program would; the file is removed when `fill`
    /// returns false.
    fn fill(&self, full: bool) {
        let f = self.0.join(".fill");
        if !full {
            let _ = std::fs::remove_file(&f);
            return;
        }
        use std::io::Write;
        let mut out = std::fs::File::create(&f).unwrap();
        let block = vec![0u8; 1 << 20];
        while out.write_all(&block).is_ok() {}
        let _ = out.write_all(&[0u8; 4096]);
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Issue 58, found by the soak: with the disk under `--out` full, retention rolled the live
/// recording, the new one could not write its meta.json, and the JVM was guarded no more: for
/// good under `--all`, and `watch PID` exited ("every JVM named has exited"). Now the JVM stays
/// guarded, its stalls are events throughout, and it is recorded again once there is room.
/// Needs root (the tmpfs).
#[test]
fn a_full_disk_under_out_leaves_every_jvm_guarded_and_its_stalls_events() {
    let _x = exclusive();
    let d = scratch("watch-full-disk");
    let disk = SmallDisk::mount(&d.join("disk"), "16m");
    // Safepoints held by a loop three times a second: an event each.
    let mut java = Command::new(java17());
    java.args(["-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"]);
    let args = [
        "counted-loop",
        "--duration",
        MARK,
        "--rounds",
        "20",
        "--trigger",
        "gc",
        "--every",
        "300ms",
    ];
    let (jvm, pid) = Jvm::start(workload(java, &[], &args)).became_jvm().into_parts();
    let (out, events) = (disk.0.join("rec"), d.join("events.jsonl"));
    let (mut w, _, said) = start_watch(&[
        &pid.to_string(),
        "--out",
        out.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    let count = || std::fs::read_to_string(&events).map_or(0, |e| e.lines().count());
    assert!(
        poll(Duration::from_secs(30), EVERY, || (count() >= 3).then_some(())).is_some(),
        "no stall became an event before the disk filled"
    );
    disk.fill(true);
    let at_fill = count();
    // Retention rolls the live recording within seconds (every 2 s), and its next one cannot
    // be written: the JVM must stay guarded through it.
    std::thread::sleep(Duration::from_secs(15));
    assert!(w.try_wait().unwrap().is_none(), "watch exited with the disk full");
    let while_full = count() - at_fill;
    disk.fill(false);
    std::thread::sleep(Duration::from_secs(8));
    let after = count() - at_fill - while_full;
    let _ = Command::new("kill").args(["-TERM", &w.id().to_string()]).status();
    let _ = wait_exit(&mut w, Duration::from_secs(20));
    let lines: Vec<String> = said.try_iter().collect();
    assert!(!lines.iter().any(|l| l.contains("watching ended")), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.contains("cannot be written") && l.contains("still guarded")),
        "the full disk did not hold up a roll: nothing tested: {lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("cannot diagnose")), "{lines:#?}");
    assert!(while_full >= 10 && after >= 5, "events while full {while_full}, after {after}");
    // Its recordings are whole: each has its meta.json and reads.
    for e in std::fs::read_dir(&out).unwrap().flatten() {
        let meta = std::fs::metadata(e.path().join("meta.json")).unwrap();
        assert!(meta.len() > 0, "{}", e.path().display());
    }
    drop(jvm);
    drop(disk);
    let _ = std::fs::remove_dir_all(&d);
}
