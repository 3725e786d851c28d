//! `stallscope lab` in its quick profile on this machine: every scenario runs, leaves nothing
//! behind, and records the doctor's grade; the robust ones are reproduced.

#[path = "common/browser.rs"]
mod browser;
mod common;

use common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A mountinfo line of a slowfs mount (its source is `slowfs:<backing dir>`).
fn is_slowfs(line: &str) -> bool {
    line.split(" - ").nth(1).is_some_and(|post| {
        post.starts_with("fuse slowfs:") || post.starts_with("fuse.stallscope-slowfs ")
    })
}

/// What a lab run must not leave: FUSE mounts, throttling cgroups, workload or injector
/// processes, heartbeat files of dead processes, swap.
fn leftovers() -> Vec<String> {
    let mut v = Vec::new();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    v.extend(mounts.lines().filter(|l| is_slowfs(l)).map(|l| format!("mount: {l}")));
    for root in [
        "/sys/fs/cgroup/blkio",
        "/sys/fs/cgroup/memory",
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup",
    ] {
        if let Ok(d) = std::fs::read_dir(root) {
            v.extend(
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("stallscope-"))
                    .map(|e| format!("cgroup: {}", e.path().display())),
            );
        }
    }
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("stallscope-workloads.jar")
            || cmd.contains("inject cpu-hog")
            || cmd.contains("inject slowfs")
            || cmd.contains("workload futex-mmap")
        {
            v.push(format!("process {}: {cmd}", p.file_name().to_string_lossy()));
        }
    }
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    // A swap file is named by its path alone: its used column moves while another lab's swap
    // is in use, and a moved count is not a new leftover (CI failed on that once).
    v.extend(
        swaps
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .map(|p| format!("swap: {p}")),
    );
    if let Ok(d) = std::fs::read_dir("/dev/shm") {
        for e in d.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = n
                .strip_prefix("stallscope-")
                .and_then(|r| r.split('.').next())
                .and_then(|p| p.parse::<u32>().ok())
                && !std::path::Path::new(&format!("/proc/{pid}")).exists()
            {
                v.push(format!("stale heartbeat: /dev/shm/{n}"));
            }
        }
    }
    v
}

/// What is in `leftovers()` now and was not in `before`: what this test left. A machine is not
/// always clean when a test starts (a lab killed with SIGKILL, or a user's own lab run, leaves its
/// mount behind), and that is not the test's doing; anything new is. Found when a lab killed by
/// a machine restart left a dead FUSE mount and both lab tests failed on it.
fn left_since(before: &[String]) -> Vec<String> {
    leftovers().into_iter().filter(|l| !before.contains(l)).collect()
}

#[test]
fn the_quick_lab_runs_every_scenario_and_cleans_up() {
    let _x = exclusive();
    let before = leftovers();
    if !before.is_empty() {
        eprintln!("not this test's, already on the machine: {before:?}");
    }
    let out = scratch("lab-quick").join("lab");
    let o = stallscope()
        .args(["lab", "run", "--profile", "quick", "--out", out.to_str().unwrap(), "--html"])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(o.status.success());
    // Its HTML report draws in a real browser (html_report.rs tests the page in depth).
    let dom = browser::dump_dom(&out.join("lab.html"), &[]);
    assert_eq!(browser::attr(&dom, "<body", "data-rendered").as_deref(), Some("ok"), "{dom}");
    assert_eq!(browser::attr(&dom, "<body", "data-errors").as_deref(), Some("0"));
    let summary = String::from_utf8_lossy(&o.stdout);
    let lab: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lab.json")).unwrap()).unwrap();
    assert_eq!(
        std::fs::read_to_string(out.join("summary.txt")).unwrap(),
        summary,
        "summary.txt is what was printed"
    );
    assert!(
        left_since(&before).is_empty(),
        "the lab left things behind: {:?}",
        left_since(&before)
    );

    let scenarios = lab["scenarios"].as_array().unwrap();
    let ids: Vec<&str> = scenarios.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "counted-loop",
            "mmap-fault",
            "tlb-shootdown",
            "mmap-lock",
            "cpu-contention",
            "frozen",
            "swap",
            "slow-log",
            "perf-writeback",
            "mapped-write",
            "memory-pressure",
            "cpu-quota",
            "long-gc"
        ]
    );
    for s in scenarios {
        let id = s["id"].as_str().unwrap();
        assert_ne!(s["verdict"], "skipped", "{id} could not run on this machine: {}", s["reason"]);
        for v in s["variants"].as_array().unwrap() {
            let runs = v["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 2, "{id}/{}: two repetitions", v["id"]);
            for r in runs {
                assert!(r["error"].is_null(), "{id}/{}: {}", v["id"], r["error"]);
                assert!(r["grade"].is_object(), "{id}/{}: the doctor's grade is recorded", v["id"]);
                let rec = r["recording"].as_str().unwrap();
                assert!(
                    std::path::Path::new(rec).join("meta.json").exists(),
                    "{rec}: every run has its recording"
                );
            }
        }
        // Each variant's metric run by run: what a verdict was made of, in CI's log.
        let metrics: Vec<String> = s["variants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let runs = v["runs"].as_array().unwrap();
                let m: Vec<String> =
                    runs.iter().map(|r| format!("{}", r["metrics"]["metric"])).collect();
                format!("{} [{}]", v["id"].as_str().unwrap_or("?"), m.join(", "))
            })
            .collect();
        println!("{id}: {} ({}); {}", s["verdict"], s["reason"], metrics.join("; "));
    }
    // The robust ones: the effect must show on any machine of this kind.
    for id in [
        "counted-loop",
        "mmap-fault",
        "mmap-lock",
        "cpu-contention",
        "frozen",
        "swap",
        "slow-log",
        "mapped-write",
        "cpu-quota",
        "long-gc",
    ] {
        let s = scenarios.iter().find(|s| s["id"] == id).unwrap();
        assert_eq!(s["verdict"], "reproduced", "{id}: {}: {}", s["reason"], s["variants"]);
        for v in s["variants"].as_array().unwrap().iter().filter(|v| v["baseline"] == true) {
            let runs = v["runs"].as_array().unwrap();
            // Three scenarios are graded with tolerance: at least one run names the known cause,
            // and no run names anything but these (`unknown` included).
            // - cpu-contention: the longest of a run's many short stalls can be one the doctor
            //   calls unknown (CI on 2026-11-25: one baseline run of two, 24 ms).
            // - cpu-quota: measured 9 of 10 in the full lab on each JDK. One kind of miss is
            //   fixed (a tie in share between the throttling and the run-queue wait it causes
            //   went to the weaker evidence); the other, a stall the doctor called unknown, is
            //   not understood.
            // - mmap-lock: its churn thread keeps a CPU busy populating 100 MB, so a waiter that
            //   got the lock can then wait for a CPU: CI on 2026-11-27 named one baseline run's
            //   longest stall (31 ms) cpu-starvation, the lab alone on the machine; not looked
            //   into (the recording was gone). `unknown` is not tolerated: that was a sampling
            //   race hiding the lock, fixed (procwatch::task::unmoved, wait::wait_of).
            let tolerated: Option<&[&str]> = match id {
                "cpu-contention" => Some(&["cpu-starvation", "unknown"]),
                "mmap-lock" => Some(&["mmap-lock", "cpu-starvation"]),
                "cpu-quota" => Some(&["cgroup-throttling", "cpu-starvation", "unknown"]),
                _ => None,
            };
            if let Some(allowed) = tolerated {
                assert!(
                    runs.iter().any(|r| r["grade"]["matched"] == true),
                    "{id}: the doctor named the known cause in neither run: {runs:?}"
                );
                for r in runs {
                    let d = r["grade"]["diagnosed"].as_str().unwrap_or("");
                    assert!(allowed.contains(&d), "{id}: {}", r["grade"]);
                }
                continue;
            }
            for r in runs {
                assert_eq!(
                    r["grade"]["matched"], true,
                    "{id}: the doctor named the known cause: {}",
                    r["grade"]
                );
            }
        }
    }
    // Who set the stalls off, where the scenario knows it (as root, the tracepoints too): every
    // baseline run graded names them; under CPU contention, where a run's stalls may be the
    // JVM's own threads' doing, at least one does.
    for (id, who) in [
        ("counted-loop", "java-thread \"safepoint-trigger\""),
        ("mmap-fault", "java-thread \"main\""),
        ("mmap-lock", "memory-mapper \"mmap-churn\""),
        ("frozen", "signal \"stallscope\""),
        ("cpu-contention", "cpu-neighbours \"stallscope\""),
        ("mapped-write", "writer \"journal-flusher\""),
        ("memory-pressure", "writer \"file-writer\""),
    ] {
        let s = scenarios.iter().find(|s| s["id"] == id).unwrap();
        assert_eq!(s["instigator"], who, "{id}");
        let named: Vec<bool> = s["variants"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| v["runs"].as_array().unwrap())
            .filter_map(|r| r["grade"]["instigator_named"].as_bool())
            .collect();
        assert!(named.iter().any(|n| *n), "{id}: no run named {who}: {named:?}");
        // Under contention a run's stalls may be the JVM's own threads' doing; a flush or a
        // writer seen in one stall's samples and not another's is named in some.
        if !["cpu-contention", "mapped-write", "memory-pressure"].contains(&id) {
            assert!(named.iter().all(|n| *n), "{id}: a run did not name {who}: {named:?}");
        }
    }
    assert!(summary.contains("instigator named in"), "{summary}");
    // As root every run has the kernel's scheduler events (BPF): where a scenario holds a thread
    // in the kernel, some stall of a baseline run shows that wait, read from its kernel stack,
    // and who woke it.
    for (id, kind, waker) in [
        ("frozen", "stopped", Some("stallscope")),
        ("mmap-fault", "page-cache read", Some("slowfs")),
        ("mapped-write", "writeback", None),
        ("mmap-lock", "mmap_lock", Some("mmap-churn")),
        ("memory-pressure", "reclaim", None),
        ("slow-log", "FUSE", Some("slowfs")),
    ] {
        let s = scenarios.iter().find(|s| s["id"] == id).unwrap();
        let mut seen = vec![];
        for v in s["variants"].as_array().unwrap().iter().filter(|v| v["baseline"] == true) {
            for run in v["runs"].as_array().unwrap() {
                let dir = std::path::Path::new(run["recording"].as_str().unwrap());
                let meta: Value =
                    serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap())
                        .unwrap();
                assert_eq!(meta["bpf"], true, "{}: recorded with BPF", dir.display());
                // Any stall of the run: the longest may have begun before the recorder did
                // (then it has no kernel account).
                let r = report(dir);
                seen.extend(r.stalls.iter().flat_map(|st| &st.kernel).map(|t| {
                    (t.kinds.iter().map(|k| k.0.clone()).collect::<Vec<_>>(), t.longest.clone())
                }));
            }
        }
        assert!(
            seen.iter().any(|(kinds, l)| kinds.iter().any(|k| k == kind)
                && waker.is_none_or(|w| l.waker.as_deref().is_some_and(|x| x.contains(w)))),
            "{id}: no baseline run's stall shows a {kind} wait (woken by {waker:?}): {seen:#?}"
        );
    }
    assert!(!lab["confusion"].as_object().unwrap().is_empty());
    assert!(summary.contains("The doctor against the known causes"), "{summary}");

    // lab compare reads two results back.
    let o = stallscope()
        .args(["lab", "compare", out.to_str().unwrap(), out.join("lab.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cmp = String::from_utf8_lossy(&o.stdout);
    assert!(cmp.contains("counted-loop") && cmp.contains("B/A 1.00×"), "{cmp}");
    // A scenario whose metric changed since the older run: its medians are not compared.
    let mut older = lab.clone();
    older["scenarios"][0]["metric"] = "longest full GC".into();
    let older_path = out.join("older-lab.json");
    std::fs::write(&older_path, serde_json::to_vec(&older).unwrap()).unwrap();
    let o = stallscope()
        .args(["lab", "compare", older_path.to_str().unwrap(), out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cmp = String::from_utf8_lossy(&o.stdout);
    let first = cmp.split("\n\n").find(|b| b.starts_with("counted-loop")).unwrap_or_default();
    assert!(first.contains("different measures, not compared") && !first.contains("B/A"), "{cmp}");
    assert!(cmp.contains("B/A 1.00×"), "the other scenarios still compare: {cmp}");
}

#[test]
fn an_interrupted_lab_still_tears_down() {
    let _x = exclusive();
    let before = leftovers();
    let out = scratch("lab-interrupted").join("lab");
    let ours = format!("{}/", out.display());
    let mut child = stallscope()
        .args(["lab", "run", "mmap-fault", "--reps", "3", "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the slow disk is mounted and a run is under way.
    let t0 = Instant::now();
    let mounted = || {
        let m = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        m.lines().any(|l| is_slowfs(l) && l.contains(&ours))
    };
    while !mounted() {
        if t0.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("slowfs never mounted: {}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let t0 = Instant::now();
    while !left_since(&before).is_empty() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(left_since(&before).is_empty(), "Ctrl-C left things behind: {:?}", left_since(&before));
    assert!(out.join("lab.json").exists(), "what ran is written");
}

#[test]
fn lab_list_and_bad_names() {
    let o = stallscope().args(["lab", "list", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 13);
    for s in v.as_array().unwrap() {
        let cause = s["cause"].as_str().unwrap();
        assert!(
            root().join(format!("docs/causes/{cause}.md")).exists(),
            "{cause} has a cause page"
        );
    }
    let o = stallscope().args(["lab", "run", "nonsense"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown scenario 'nonsense'"));
}
