//! stallscope killed with SIGKILL at random moments, again and again: whatever it changed outside
//! itself is undone by its guardian (or by the kernel), whatever the moment. After every kill the
//! same list is checked: no mount, no cgroup of ours, no stopped process, no thread left raised or
//! real-time, no safepoint logging or agent left on in the JVM, no trace instance left on.
//!
//! The moments: one rep of each tool is killed at its worst moment (a thread seen raised, the
//! command started, the mount up, the heartbeat up), the others after a random delay drawn from a
//! seeded generator. The seed is printed, and `STALLSCOPE_KILL_SEED` replays it;
//! `STALLSCOPE_KILL_REPS` repeats more (default 4 per tool). Needs root, FUSE and a JDK: CI runs as
//! root with fuse3 from scripts/setup.sh, and each test fails, never skips, without them.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn root_only() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: boosting, cgroups and mounts (CI runs as root)"
    );
}

fn reps() -> usize {
    std::env::var("STALLSCOPE_KILL_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(4)
}

/// The random moments, from a printed seed.
fn moments(what: &str) -> fastrand::Rng {
    let seed = std::env::var("STALLSCOPE_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
        });
    eprintln!("{what}: STALLSCOPE_KILL_SEED={seed}");
    fastrand::Rng::with_seed(seed)
}

/// Fields of /proc/TID/stat after the command name: state is 0, nice 16, rt_priority 37, policy 38.
fn stat_fields(tid: i32) -> Option<Vec<String>> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    Some(s.rsplit_once(')')?.1.split_whitespace().map(str::to_string).collect())
}

fn threads(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

fn alive(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f[0] != "Z")
}

/// A process named `comm` found by a unique word in its command line (it outlives the stallscope
/// that started it, so its parent cannot be asked; stallscope's own command line holds the word
/// too, hence the name).
fn pid_with(comm: &str, marker: &str) -> Option<i32> {
    let o = Command::new("pgrep").args(["-f", "--", marker]).output().ok()?;
    String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.trim().parse().ok()).find(
        |&p: &i32| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        },
    )
}

/// What a kill must not leave behind, for the processes and mount a test made.
struct Watched<'a> {
    jvm: Option<i32>,
    /// The JVM's own recording directory, whose logging must be off (attach).
    logging_into: Option<&'a Path>,
    others: Vec<i32>,
    mount: Option<&'a Path>,
}

/// The tracefs instances stallscope made for `jvm`.
fn trace_instances(jvm: i32) -> Vec<PathBuf> {
    let mine = format!("stallscope-{jvm}-");
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .map(|e| e.path())
        .collect()
}

/// Everything still left behind, in words; empty when clean.
fn left_behind(w: &Watched) -> Vec<String> {
    let mut left = Vec::new();
    if let Some(m) = w.mount.filter(|m| is_mounted(m)) {
        left.push(format!("mounted: {}", m.display()));
    }
    let cg = throttle_cgroups();
    if !cg.is_empty() {
        left.push(format!("cgroups: {cg:?}"));
    }
    for &p in w.jvm.iter().chain(&w.others) {
        if stat_fields(p).is_some_and(|f| f[0] == "T") {
            left.push(format!("pid {p} stopped"));
        }
    }
    if let Some(jvm) = w.jvm {
        // Nor a tracefs instance with its events still on (it would tax every page fault).
        let traces = trace_instances(jvm);
        if !traces.is_empty() {
            left.push(format!("trace instances: {traces:?}"));
        }
        for t in threads(jvm) {
            if let Some(f) = stat_fields(t) {
                let (nice, policy) =
                    (f[16].parse::<i32>().unwrap_or(0), f[38].parse::<i32>().unwrap_or(0));
                if nice != 0 || policy != libc::SCHED_OTHER {
                    left.push(format!("thread {t}: nice {nice}, policy {policy}"));
                }
            }
        }
        if let Some(dir) = w.logging_into {
            // A JVM in a container: its files are in its own /dev/shm and /tmp, named by its pid
            // there, and it logs into a staging directory of attach's in its /tmp.
            let root = format!("/proc/{jvm}/root");
            let contained = procwatch::ns::other_mount_ns(jvm);
            let shm = if contained { format!("{root}/dev/shm") } else { "/dev/shm".to_string() };
            let hb = format!("{shm}/stallscope-{}.heartbeat", procwatch::ns::nspid(jvm));
            if Path::new(&hb).exists() {
                left.push(format!("{hb}: the agent is still metering"));
            }
            if contained {
                let staged: Vec<_> = std::fs::read_dir(format!("{root}/tmp"))
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("stallscope-"))
                    .collect();
                if !staged.is_empty() {
                    left.push(format!("in the container's /tmp: {staged:?}"));
                }
            }
            let jcmd = java17().parent().unwrap().join("jcmd");
            let o = Command::new(jcmd).args([&jvm.to_string(), "VM.log", "list"]).output().unwrap();
            let list = String::from_utf8_lossy(&o.stdout).into_owned();
            for l in list.lines().filter(|l| {
                (l.contains(dir.to_str().unwrap()) || l.contains("/tmp/stallscope-"))
                    && !l.contains("all=off")
            }) {
                left.push(format!("JVM still logging: {l}"));
            }
            // Nor a flight recording of ours (attach starts one for the culprits' stacks).
            let o = Command::new(java17().parent().unwrap().join("jcmd"))
                .args([&jvm.to_string(), "JFR.check"])
                .output()
                .unwrap();
            let jfr = String::from_utf8_lossy(&o.stdout).into_owned();
            if jfr.contains("name=stallscope") {
                left.push(format!("JVM still recording stacks for stallscope: {}", jfr.trim()));
            }
        }
    }
    left
}

/// Waits (up to 15 s: the guardian undoes as soon as its pipe closes, a JVM command takes a
/// moment) until nothing is left; then what is left, or nothing.
fn settle(w: &Watched) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let left = left_behind(w);
        if left.is_empty() || t0.elapsed() > Duration::from_secs(15) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// After a failed check, puts the machine back by hand so the next test starts clean.
fn repair(w: &Watched) {
    if let Some(m) = w.mount {
        let _ = Command::new("umount").arg("-l").arg(m).status();
    }
    for &p in w.jvm.iter().chain(&w.others) {
        unsafe { libc::kill(p, libc::SIGCONT) };
    }
    if let Some(jvm) = w.jvm {
        for t in trace_instances(jvm) {
            procwatch::trace::remove_instance(&t);
        }
        for t in threads(jvm) {
            let param = libc::sched_param { sched_priority: 0 };
            unsafe {
                libc::sched_setscheduler(t, libc::SCHED_OTHER, &param);
                libc::setpriority(libc::PRIO_PROCESS, t as libc::id_t, 0);
            }
        }
    }
    for cg in throttle_cgroups() {
        if let Ok(procs) = std::fs::read_to_string(cg.join("cgroup.procs")) {
            for p in procs.lines().filter_map(|l| l.parse::<i32>().ok()) {
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        let _ = std::fs::remove_dir(&cg);
    }
}

fn kill_and_check(victim: &mut Child, w: &Watched, what: &str, failures: &mut Vec<String>) {
    unsafe { libc::kill(victim.id() as i32, libc::SIGKILL) };
    let _ = victim.wait();
    let left = settle(w);
    if !left.is_empty() {
        failures.push(format!("{what}: {}", left.join("; ")));
        repair(w);
    }
}

/// `run --boost` over a counted loop that holds every safepoint for a second or more (so threads
/// stay raised long enough for a kill to find them so; a safepoint storm's stalls end, and are
/// restored, before the kill lands), killed at random moments from before the JVM is up to deep
/// into boosting.
fn boost_killed(level: &str, on: &str, raised: impl Fn(&[String]) -> bool) {
    root_only();
    let _x = exclusive();
    let mut rng = moments(level);
    let d = scratch(&format!("sigkill-boost-{}-{on}", level.replace(':', "")));
    let mut failures = Vec::new();
    for rep in 0..reps() {
        let marker = format!("-Dstallscope.killtest={}-{rep}", std::process::id());
        let _jvm = KillOnDrop(marker.clone());
        let rec = d.join(format!("rec-{rep}"));
        let mut run = stallscope()
            .args([
                "run",
                "--boost",
                level,
                "--boost-on",
                on,
                "--boost-after",
                "1ms",
                "--out",
                rec.to_str().unwrap(),
                "--",
            ])
            .arg(java17())
            .args([
                marker.as_str(),
                "-XX:+UseParallelGC",
                "-XX:-UseCountedLoopSafepoints",
                "-jar",
                workloads_jar().to_str().unwrap(),
            ])
            .args([
                "counted-loop",
                "--duration",
                "30s",
                "--rounds",
                "300",
                "--trigger",
                "threaddump",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let moment = if rep == 0 {
            // The worst moment: a thread is raised right now.
            let seen = poll(Duration::from_secs(30), Duration::from_millis(5), || {
                let jvm = pid_with("java", &marker)?;
                threads(jvm).into_iter().filter_map(stat_fields).any(|f| raised(&f)).then_some(())
            });
            assert!(seen.is_some(), "{level} on {on}: the booster never raised a thread");
            "a thread raised".to_string()
        } else {
            let ms = rng.u64(0..4000);
            std::thread::sleep(Duration::from_millis(ms));
            format!("{ms} ms after the start")
        };
        let jvm = pid_with("java", &marker);
        let w = Watched { jvm, logging_into: None, others: vec![], mount: None };
        kill_and_check(&mut run, &w, &format!("{level} on {on} killed {moment}"), &mut failures);
    }
    let _ = std::fs::remove_dir_all(&d);
    assert!(failures.is_empty(), "left behind:\n{}", failures.join("\n"));
}

/// `run`'s JVM outlives it: killed (with any boost put back) when the rep ends, by a failed
/// assertion too, so that no real-time thread spins on after a test.
struct KillOnDrop(String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for _ in 0..250 {
            let Some(p) = pid_with("java", &self.0) else { return };
            unsafe { libc::kill(p, libc::SIGKILL) };
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The heartbeat's booster at nice -10, the safepoint's (its own thread, real-time, its plan
/// read ahead and registered in one message) at `SCHED_FIFO`.
#[test]
fn a_booster_killed_at_any_moment_leaves_no_thread_at_another_nice() {
    boost_killed("nice:-10", "heartbeat", |f| f[16] == "-10");
}

#[test]
fn a_fifo_booster_killed_at_any_moment_leaves_no_thread_real_time() {
    boost_killed("fifo:1", "safepoint", |f| f[38].parse::<i32>().ok() == Some(libc::SCHED_FIFO));
}

#[test]
fn a_safepoint_booster_killed_at_any_moment_leaves_no_thread_at_another_nice() {
    boost_killed("nice:-10", "safepoint", |f| f[16] == "-10");
}

#[test]
fn throttle_killed_at_any_moment_leaves_no_cgroup_and_no_command() {
    root_only();
    let _x = exclusive();
    let mut rng = moments("throttle");
    let d = scratch("sigkill-throttle");
    let mut failures = Vec::new();
    for rep in 0..reps() {
        // A sleep whose argument is unique, to find it once its parent is gone.
        let secs = format!("30.{}{rep}", std::process::id());
        let mut t = stallscope()
            .args(["inject", "throttle", "--riops", "20", "--", "sleep", &secs])
            .current_dir(&d)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let moment = if rep == 0 {
            let mut line = String::new();
            BufReader::new(t.stderr.take().unwrap()).read_line(&mut line).unwrap();
            let started = poll(Duration::from_secs(10), Duration::from_millis(5), || {
                pid_with("sleep", &format!("sleep {secs}"))
            });
            assert!(started.is_some(), "the throttled command never started: {line}");
            "with its command running".to_string()
        } else {
            let ms = rng.u64(0..300);
            std::thread::sleep(Duration::from_millis(ms));
            format!("{ms} ms after the start")
        };
        let sleeper = pid_with("sleep", &format!("sleep {secs}"));
        let w = Watched {
            jvm: None,
            logging_into: None,
            others: sleeper.into_iter().collect(),
            mount: None,
        };
        kill_and_check(&mut t, &w, &format!("throttle killed {moment}"), &mut failures);
        // The command dies with its cgroup; one the kill raced with (started after the look
        // above) must be gone too.
        let still = poll(Duration::from_secs(10), Duration::from_millis(5), || {
            pid_with("sleep", &format!("sleep {secs}")).is_none().then_some(())
        });
        if still.is_none() {
            failures.push(format!("throttle killed {moment}: its command is still running"));
            if let Some(p) = pid_with("sleep", &format!("sleep {secs}")) {
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
        }
    }
    assert!(failures.is_empty(), "left behind:\n{}", failures.join("\n"));
}

/// The guardian `stallscope` started for itself: its child running `guard`.
fn guardian_of(owner: u32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{owner}/task/{owner}/children"))
        .ok()?
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"guard".as_slice()))
        })
}

/// `inject throttle` killed together with its guardian (a session's end, `kill -9` of every
/// stallscope): nothing undoes the cgroup then, until the next stallscope reads the guardian's
/// journal. Once by `stallscope undo`, once by the next command that starts a guardian.
#[test]
fn throttle_killed_with_its_guardian_is_undone_by_the_next_stallscope() {
    root_only();
    let _x = exclusive();
    let d = scratch("sigkill-guardian");
    for next in ["undo", "another throttle"] {
        let secs = format!("30.{}{}", std::process::id(), next.len());
        let mut t = stallscope()
            .args(["inject", "throttle", "--riops", "20", "--", "sleep", &secs])
            .current_dir(&d)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let sleeper = poll(Duration::from_secs(10), Duration::from_millis(5), || {
            pid_with("sleep", &format!("sleep {secs}"))
        })
        .expect("the throttled command started");
        let guardian = guardian_of(t.id()).expect("throttle started a guardian");
        // The guardian first: killed with its owner, it undoes nothing.
        unsafe { libc::kill(guardian, libc::SIGKILL) };
        unsafe { libc::kill(t.id() as i32, libc::SIGKILL) };
        let _ = t.wait();
        std::thread::sleep(Duration::from_millis(300));
        let left = throttle_cgroups();
        assert!(
            !left.is_empty() && alive(sleeper),
            "{next}: the kill left the cgroup and its command"
        );
        let said = if next == "undo" {
            let o = stallscope().arg("undo").output().unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stdout).into_owned()
        } else {
            let o = stallscope()
                .args(["inject", "throttle", "--riops", "20", "--", "true"])
                .current_dir(&d)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8_lossy(&o.stderr).into_owned()
        };
        for cg in &left {
            assert!(
                said.contains(&format!("cgroup {} removed", cg.display())),
                "{next}: says what it undid: {said}"
            );
        }
        let gone = poll(Duration::from_secs(10), Duration::from_millis(20), || {
            (throttle_cgroups().is_empty() && !alive(sleeper)).then_some(())
        });
        if gone.is_none() {
            repair(&Watched { jvm: None, logging_into: None, others: vec![sleeper], mount: None });
            unsafe { libc::kill(sleeper, libc::SIGKILL) };
            panic!(
                "{next}: still there: {:?}, the command alive: {}",
                throttle_cgroups(),
                alive(sleeper)
            );
        }
    }
    // Nothing is left to undo, and saying so.
    let o = stallscope().arg("undo").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "nothing left behind by a stallscope killed with its guardian"
    );
}

#[test]
fn slowfs_killed_at_any_moment_leaves_no_mount() {
    assert!(
        Path::new("/dev/fuse").exists(),
        "this test needs /dev/fuse and fusermount3: run scripts/setup.sh"
    );
    let _x = exclusive();
    let mut rng = moments("slowfs");
    let d = scratch("sigkill-slowfs");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    std::fs::write(back.join("data"), b"x").unwrap();
    let mut failures = Vec::new();
    for rep in 0..reps() {
        let mut reader = None;
        let mut fs = stallscope()
            .args(["inject", "slowfs", "--read-delay", "50ms"])
            .arg(&back)
            .arg(&mnt)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let moment = if rep == 0 {
            assert!(
                poll(Duration::from_secs(10), Duration::from_millis(5), || is_mounted(&mnt)
                    .then_some(()))
                .is_some(),
                "slowfs did not mount"
            );
            // A reader inside the slow filesystem when the kill comes.
            evict(&back.join("data"));
            reader = Some(Reaper(
                Command::new("cat")
                    .arg(mnt.join("data"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            ));
            "mounted, with a reader inside".to_string()
        } else {
            let ms = rng.u64(0..500);
            std::thread::sleep(Duration::from_millis(ms));
            format!("{ms} ms after the start")
        };
        let w = Watched { jvm: None, logging_into: None, others: vec![], mount: Some(&mnt) };
        kill_and_check(&mut fs, &w, &format!("slowfs killed {moment}"), &mut failures);
        drop(reader);
    }
    assert!(failures.is_empty(), "left behind:\n{}", failures.join("\n"));
}

#[test]
fn freeze_killed_at_any_moment_leaves_nothing_stopped() {
    let _x = exclusive();
    let mut rng = moments("freeze");
    let target = Reaper(Command::new("sleep").arg("120").spawn().unwrap());
    let pid = target.0.id() as i32;
    let mut failures = Vec::new();
    for rep in 0..reps() {
        let mut f = stallscope()
            .args(["inject", "freeze", &pid.to_string(), "--for", "30s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let moment = if rep == 0 {
            assert!(
                poll(Duration::from_secs(10), Duration::from_millis(5), || stat_fields(pid)
                    .filter(|f| f[0] == "T"))
                .is_some(),
                "never stopped"
            );
            "with the target stopped".to_string()
        } else {
            let ms = rng.u64(0..200);
            std::thread::sleep(Duration::from_millis(ms));
            format!("{ms} ms after the start")
        };
        let w = Watched { jvm: None, logging_into: None, others: vec![pid], mount: None };
        kill_and_check(&mut f, &w, &format!("freeze killed {moment}"), &mut failures);
    }
    assert!(alive(pid), "the target was left alive");
    assert!(failures.is_empty(), "left behind:\n{}", failures.join("\n"));
}

/// `attach` killed at random moments, over and over, against one JVM: after each kill the JVM
/// logs nothing into a file nobody reads and meters nothing; then it can still be attached to.
#[test]
fn attach_killed_at_any_moment_leaves_the_jvm_as_it_was() {
    let _x = exclusive();
    let mut child = Command::new(java17())
        .arg("-jar")
        .arg(workloads_jar())
        .args(["idle", "--duration", "600s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let jvm = Reaper(child);
    let pid: i32 = line.trim().strip_prefix("idle: pid ").unwrap().parse().unwrap();
    attach_kills("attach", jvm, pid, PathBuf::from(format!("/dev/shm/stallscope-{pid}.heartbeat")));
}

/// The same against a JVM in a container: nothing is left in its /tmp either (attach stages the
/// agent and the JVM's logs there).
#[test]
fn attach_killed_at_any_moment_leaves_a_contained_jvm_as_it_was() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: it runs a JVM in a pid and mount namespace of its own"
    );
    let (jvm, pid) = contained_jvm();
    attach_kills(
        "attach-contained",
        jvm,
        pid,
        PathBuf::from(format!("/proc/{pid}/root/dev/shm/stallscope-1.heartbeat")),
    );
}

fn attach_kills(name: &str, jvm: Reaper, pid: i32, heartbeat: PathBuf) {
    let mut rng = moments(name);
    let d = scratch(&format!("sigkill-{name}"));
    let mut failures = Vec::new();
    for rep in 0..reps() {
        let dir = d.join(format!("rec-{rep}"));
        let mut att = stallscope()
            .args(["attach", &pid.to_string(), "--for", "60s", "--out", dir.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let moment = if rep == 0 {
            assert!(
                poll(Duration::from_secs(20), Duration::from_millis(5), || heartbeat
                    .exists()
                    .then_some(()))
                .is_some(),
                "no heartbeat: the attach never got going"
            );
            "while watching".to_string()
        } else {
            let ms = rng.u64(0..3000);
            std::thread::sleep(Duration::from_millis(ms));
            format!("{ms} ms after the start")
        };
        let w = Watched { jvm: Some(pid), logging_into: Some(&dir), others: vec![], mount: None };
        kill_and_check(&mut att, &w, &format!("attach killed {moment}"), &mut failures);
        assert!(alive(pid), "attach killed {moment}: the JVM died");
    }
    // Still the JVM it was: a whole attach works and records.
    let dir = d.join("rec-after");
    let o = stallscope()
        .args(["attach", &pid.to_string(), "--for", "1s", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "attach after the kills: {}", String::from_utf8_lossy(&o.stderr));
    drop(jvm);
    let _ = std::fs::remove_dir_all(&d);
    assert!(failures.is_empty(), "left behind:\n{}", failures.join("\n"));
}
