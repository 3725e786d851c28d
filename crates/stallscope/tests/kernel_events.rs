//! The kernel's scheduler events (BPF, root) in real recordings: a frozen JVM's stall carries
//! each thread's wait, its kernel stack and who woke it; the same run without them falls back to
//! the /proc samples and says so; a program that is not a JVM is refused clearly. (Root needed:
//! without it the first test fails, never skips.)

mod common;

use common::*;
use serde_json::Value;
use std::process::Stdio;
use std::time::Duration;

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

/// A scratch directory with a 4 MiB file of random bytes, evicted from the page cache, seen
/// through `inject slowfs` with 200 ms reads at `MNT/data`: the directory, the mount, the
/// running slowfs.
fn slow_data(name: &str) -> (std::path::PathBuf, std::path::PathBuf, Slowfs) {
    let d = scratch(name);
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_random(&back.join("data"), 4 << 20);
    let fs = Slowfs::start(&back, &mnt, &["--read-delay", "200ms"]);
    evict(&back.join("data"));
    (d, mnt, fs)
}

/// `run --json` on a program that is not a JVM, after `setup`; its report and meta.
fn run_process(name: &str, extra: &[&str], command: &[&str]) -> (doctor::Report, Value) {
    let rec = scratch(name).join("rec");
    let o = stallscope()
        .args(["run", "--out", rec.to_str().unwrap()])
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(rec.join("meta.json")).unwrap()).unwrap();
    (report(&rec), meta)
}

#[test]
fn a_program_that_is_not_a_jvm_stalls_when_the_kernel_holds_it_and_is_told_what_held_it() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    let (d, mnt, _fs) = slow_data("kernel-dd");
    // dd's reads through the slow disk: each one a wait in the kernel, woken by slowfs.
    let input = format!("if={}", mnt.join("data").display());
    let (r, meta) =
        run_process("kernel-dd-run", &[], &["dd", &input, "of=/dev/null", "bs=1M", "count=2"]);
    assert_eq!(meta["not_a_jvm"], true, "{meta}");
    assert!(
        r.notes.iter().any(|n| n.contains("dd is not a JVM") && n.contains("kernel")),
        "the report says how a stall was found: {:?}",
        r.notes
    );
    assert!(!r.notes.iter().any(|n| n.starts_with("no perf counters")), "{:?}", r.notes);
    let long: Vec<_> = r.stalls.iter().filter(|s| s.duration_ns >= 150_000_000).collect();
    assert!(!long.is_empty(), "a 200 ms read is a stall: {:?}", causes(&r));
    for s in &long {
        let f = &s.findings[0];
        assert_eq!(f.cause, doctor::Cause::BlockedIo, "{f:#?}");
        assert_eq!(f.confidence, doctor::Confidence::High, "{f:#?}");
        let c = &f.culprits[0];
        assert_eq!(c.name, "dd", "{c:#?}");
        assert!(c.description.starts_with("state D for "), "{c:#?}");
        assert!(!f.fix.contains("JVM") && !f.fix.contains("safepoint"), "{}", f.fix);
        // dd's first read may begin before the kernel's events are recorded (`run` starts it
        // first): that stall has no kernel account, and says so (1 run in 5 here).
        if f.evidence
            .iter()
            .any(|e| e.contains("before the kernel's scheduler events were recorded"))
        {
            assert!(s.kernel.is_empty(), "{:#?}", s.kernel);
            continue;
        }
        // The waker is the filesystem's own thread that answered late.
        let k = s.kernel.iter().find(|t| t.name == "dd").expect("dd's kernel account");
        let waker = k.longest.waker.as_deref().unwrap_or("");
        assert!(waker.starts_with("slowfs"), "woken by the slow disk: {k:#?}");
    }
    drop(_fs);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_program_that_is_not_a_jvm_faulting_on_a_mapped_file_is_told_the_file_and_offset() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF, the tracepoints)");
    let (d, mnt, _fs) = slow_data("kernel-mmap");
    // One byte read through a read-only shared mapping at 12345 past each MiB: each a fault
    // waiting on the slow disk. A pause between them keeps them four stalls: back to back, the
    // microseconds run between two faults may go unseen, and the four are one stall of 800 ms
    // (one fresh-clone run in several, on a loaded machine).
    let script = "import mmap, sys, time\n\
        f = open(sys.argv[1], 'rb')\n\
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n\
        total = 0\n\
        for off in range(0, 4 << 20, 1 << 20):\n    total += m[off + 12345]\n    time.sleep(0.3)\n\
        print(total)\n";
    let data = mnt.join("data");
    let (r, meta) =
        run_process("kernel-mmap-run", &[], &["python3", "-c", script, data.to_str().unwrap()]);
    assert_eq!(meta["not_a_jvm"], true, "{meta}");
    let long: Vec<_> = r.stalls.iter().filter(|s| s.duration_ns >= 150_000_000).collect();
    assert!(
        long.len() >= 2,
        "four 200 ms faults, the first maybe before watching: {:?}",
        causes(&r)
    );
    let pages: Vec<String> = (0..4u64)
        .map(|mib| format!("offset {:#x} of {}", (mib << 20) + 12345, data.display()))
        .collect();
    for s in &long {
        let f = &s.findings[0];
        assert_eq!(f.cause, doctor::Cause::MajorFault, "{f:#?}");
        assert_eq!(f.confidence, doctor::Confidence::High, "{f:#?}");
        let named = &f.culprits[0].files;
        assert!(
            named.len() == 1 && pages.iter().any(|p| named[0].starts_with(p.as_str())),
            "the page read is named, as for a JVM: {named:?} (one of {pages:?})"
        );
        let line = format!("its fault was at {}", named[0]);
        assert!(f.evidence.contains(&line), "{line} in {:#?}", f.evidence);
    }
    drop(_fs);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_program_starved_of_its_cpu_is_told_who_took_it() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    // A busy loop at nice 19 on CPU 0 beside one at nice 0: it waits hundreds of milliseconds
    // for each few milliseconds it runs. Each is one process (taskset and nice exec, bash's
    // own clock ends the loop), so killing it leaves nothing behind.
    let hog = Reaper(
        std::process::Command::new("taskset")
            .args(["-c", "0", "bash", "-c", "while [ $SECONDS -lt 30 ]; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (r, meta) = run_process(
        "kernel-starved",
        &["--threshold", "50ms"],
        // One process throughout (no fork): bash's own clock ends the loop.
        &[
            "taskset",
            "-c",
            "0",
            "nice",
            "-n",
            "19",
            "bash",
            "-c",
            "while [ $SECONDS -lt 2 ]; do :; done",
        ],
    );
    drop(hog);
    assert_eq!(meta["not_a_jvm"], true, "{meta}");
    let long: Vec<_> = r.stalls.iter().filter(|s| s.duration_ns >= 100_000_000).collect();
    assert!(!long.is_empty(), "{:?}", causes(&r));
    let starved = long.iter().filter(|s| s.findings[0].cause == doctor::Cause::CpuStarvation);
    let mut named = 0;
    for s in starved {
        let f = &s.findings[0];
        assert!(f.culprits[0].description.contains("waiting for a CPU"), "{f:#?}");
        if let Some(i) = &f.instigator {
            assert!(!i.did.contains("JVM") && !i.fix.contains("safepoint"), "{i:#?}");
            named += 1;
        }
    }
    assert!(named > 0, "the neighbour that took the CPU is named: {:#?}", long);
}

#[test]
fn a_program_that_is_not_a_jvm_is_refused_clearly_without_the_kernel_s_events() {
    let d = scratch("kernel-not-java");
    for (cmd, pid) in [("run", None), ("attach", Some(std::process::id().to_string()))] {
        let mut c = stallscope();
        c.args([cmd, "--no-bpf", "--out", d.join(cmd).to_str().unwrap()]);
        match &pid {
            Some(p) => c.args([p.as_str(), "--for", "1s"]),
            None => c.args(["--", "sleep", "1"]),
        };
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{cmd}: {err}");
        assert!(err.contains("is not a JVM") && err.contains("--no-bpf"), "{cmd}: {err}");
        assert!(!err.contains("panicked") && !err.contains("invalid option"), "{err}");
    }
}

/// The voluntary context switches so far of thread `tid` of `pid`.
fn voluntary_switches(pid: u32, tid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("voluntary_ctxt_switches in /proc/PID/task/TID/status")
}

/// As root, `run`'s recorder sleeps between stalls: the BPF watchdog wakes it when the agent's
/// meter stops ticking, not a look per threshold (5 ms: 200 a second). Counted, not timed: its
/// sampling thread's wake-ups over two idle seconds. That a stall still wakes it is what every
/// `run` test as root shows (tests/doctor.rs, the lab).
#[test]
fn between_stalls_the_recorder_sleeps_until_the_watchdog_wakes_it() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    let rec = scratch("kernel-watchdog").join("rec");
    let mut c = stallscope();
    c.args(["run", "--threshold", "5ms", "--out", rec.to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-jar", workloads_jar().to_str().unwrap(), "idle", "--duration", "8s"]);
    let child = c.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut sidecar = Reaper(child);
    let pid = sidecar.0.id();
    // Looking from the moment the meter runs (the watchdog is armed then).
    poll(Duration::from_secs(20), Duration::from_millis(50), || {
        std::fs::read_to_string(rec.join("events.jsonl"))
            .ok()
            .filter(|e| e.contains("\"meter-running\""))
    })
    .expect("the agent's meter ran");
    std::thread::sleep(Duration::from_millis(500));
    // The sampling loop is stallscope's main thread.
    let before = voluntary_switches(pid, pid);
    let window = procwatch::clock::mono_ns();
    std::thread::sleep(Duration::from_secs(2));
    let woke = voluntary_switches(pid, pid) - before;
    let window = (window, procwatch::clock::mono_ns());
    let status = sidecar.0.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(sidecar.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let r = report(&rec);
    assert!(!r.notes.iter().any(|n| n.contains("no BPF")), "the watchdog loaded: {:?}", r.notes);
    // Its longest sleep between stalls is 250 ms, with a baseline look every second: about ten
    // in two seconds, against 400 looks once per threshold. A stall of the idle JVM in the
    // window (a loaded machine's: the threshold is 5 ms) is looked at while it lasts; each is
    // allowed 60 wake-ups, so that polling every threshold still fails unless five or more
    // stalls came in those two seconds.
    let events = std::fs::read_to_string(rec.join("events.jsonl")).unwrap();
    let events: Vec<Value> = events.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let ends: std::collections::HashMap<_, _> = events
        .iter()
        .filter(|e| e["event"] == "stall-end")
        .map(|e| (e["stall"].as_u64(), e["t"].as_u64().unwrap_or(u64::MAX)))
        .collect();
    let stalls = events
        .iter()
        .filter(|e| e["event"] == "stall-begin")
        .filter(|e| {
            let ended = ends.get(&e["stall"].as_u64()).copied().unwrap_or(u64::MAX);
            e["t"].as_u64().unwrap_or(0) <= window.1 && ended >= window.0
        })
        .count() as u64;
    assert!(
        woke < 100 + 60 * stalls,
        "the recorder woke {woke} times in 2 s between stalls ({stalls} stalls in them)"
    );
}

/// With the watchdog and the meter at the threshold (`--resolution 5ms`), a safepoint that holds the
/// meter beyond the threshold is noticed while it lasts: the safepoints of the log of 20 ms or
/// more (the heartbeat late by at least 15 ms, whatever the meter's phase; stale 10 ms before
/// the end) are stalls with samples, but for one (or one in ten) at most (a recorder kept off
/// its CPU on a busy machine). That the alarm follows the meter's last tick, not its last
/// sleep, is crates/offcpu/tests/offcpu.rs's.
#[test]
fn with_the_watchdog_a_safepoint_past_the_threshold_is_noticed_while_it_lasts() {
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    let rec = scratch("kernel-watchdog-short").join("rec");
    // A thread dump every 200 ms waits for the 800 MB Unsafe.setMemory in progress: 0-40 ms.
    let o = stallscope()
        .args(["run", "--threshold", "5ms", "--resolution", "5ms"])
        .args(["--out", rec.to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-XX:+UseParallelGC", "-jar", workloads_jar().to_str().unwrap()])
        .args(["set-memory", "--size-mb", "800", "--every", "200ms", "--duration", "6s"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The log's safepoints: each line stamped (timenanos) at its end, with its total.
    let log = std::fs::read_to_string(rec.join("safepoint.log")).unwrap();
    let long: Vec<u64> = log
        .lines()
        .filter_map(|l| {
            let stamp: u64 = l.split("][").nth(1)?.strip_suffix("ns")?.parse().ok()?;
            let total: u64 = l.split("Total: ").nth(1)?.split(' ').next()?.parse().ok()?;
            (total >= 20_000_000).then_some(stamp - total)
        })
        .collect();
    assert!(!long.is_empty(), "the workload made safepoints of 20 ms or more:\n{log}");
    let r = report(&rec);
    let missed: Vec<_> = long
        .iter()
        .filter(|&&start| {
            !r.stalls.iter().any(|s| {
                s.samples > 0
                    && s.safepoint.iter().chain(&s.safepoints).any(|v| v.start_mono_ns == start)
            })
        })
        .collect();
    assert!(
        missed.len() <= (long.len() / 10).max(1),
        "safepoints of 20 ms or more not noticed while they lasted: {missed:?} of {long:?}"
    );
}

/// At `run`'s default resolution, as root, on every LTS JDK: the meter ticks every 5 ms and the
/// JVM's own safepoint probes find and time its safepoints. Every safepoint of the JVM's log
/// that lasted 10 ms or more (thread dumps waiting on an 800 MB `Unsafe.setMemory`) is a stall
/// found by the probes, begun and ended where the log says it began and ended (its line's
/// stamp, less its total), or lies inside a stall of the heartbeat's begun before it (the meter
/// held first); but for one (or one in ten) at most (a recorder kept off its CPU past a short
/// one's end on a busy machine). "Where the log says" is to within a millisecond, but for the
/// VM thread's own delays: HotSpot takes the safepoint's end time, writes the log line, then
/// fires the end probe (`SafepointTracing::end`, then `RuntimeService::record_safepoint_end`),
/// about 10 µs apart here. A VM thread that loses its CPU between those steps (the threads it
/// just let go run) shifts the log's begin (its stamp less its total) and the probe's end
/// later, by as long as it waited: 1.05 ms seen once in CI on JDK 21. One meter resolution
/// (5 ms) is allowed for that, in that direction only.
#[test]
fn at_the_default_resolution_the_jvm_s_safepoint_probes_time_each_long_safepoint_on_every_lts_jdk()
{
    let _x = exclusive();
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (BPF)");
    for jdk in Jdk::LTS {
        let rec = scratch(&format!("kernel-probes-{}", jdk.feature())).join("rec");
        let o = stallscope()
            .args(["run", "--threshold", "5ms", "--out", rec.to_str().unwrap(), "--"])
            .arg(jdk.java())
            .args(["-XX:+UseParallelGC", "-jar", workloads_jar().to_str().unwrap()])
            .args(["set-memory", "--size-mb", "800", "--every", "200ms", "--duration", "4s"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "JDK {}: {}",
            jdk.feature(),
            String::from_utf8_lossy(&o.stderr)
        );
        let events = std::fs::read_to_string(rec.join("events.jsonl")).unwrap();
        let events: Vec<Value> = events.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let meter = events.iter().find(|e| e["event"] == "meter-running").expect("the meter ran");
        assert_eq!(meter["resolution_ns"], 5_000_000, "JDK {}: {meter}", jdk.feature());
        assert_eq!(meter["safepoint_probes"], true, "JDK {}: {meter}", jdk.feature());
        // The stalls: (begin, end, by the probes).
        let mut ends = std::collections::HashMap::new();
        for e in events.iter().filter(|e| e["event"] == "stall-end") {
            ends.insert(e["stall"].as_u64(), e["resumed_ns"].as_u64().unwrap());
        }
        let stalls: Vec<(u64, u64, bool)> = events
            .iter()
            .filter(|e| e["event"] == "stall-begin")
            .filter_map(|e| {
                let end = *ends.get(&e["stall"].as_u64())?;
                Some((e["expected_ns"].as_u64()?, end, e["by"] == "safepoint-probe"))
            })
            .collect();
        // The log's safepoints (every JDK's format), placed on the monotonic clock.
        let read = recording::Recording::read(&rec, None).unwrap();
        let long: Vec<(u64, u64)> = read
            .safepoints
            .iter()
            .filter(|s| s.total_ns >= 10_000_000)
            .filter_map(|s| Some((s.start().mono_ns?, s.end.mono_ns?)))
            .collect();
        assert!(
            !long.is_empty(),
            "JDK {}: no safepoint of 10 ms or more: {:?}",
            jdk.feature(),
            read.safepoints.iter().map(|s| s.total_ns).collect::<Vec<_>>()
        );
        // The probe's begin, and the log's begin (its stamp less its total) up to a resolution
        // after it; see above.
        let begun_at = |probe: u64, log: u64| probe <= log + 1_000_000 && log <= probe + 5_000_000;
        // Found by the probes, where the log places it; or inside a stall of the heartbeat's
        // that began before it (the meter was held first), ending once the meter ticked after
        // it (within a resolution, after its true end: up to a resolution before the log's
        // stamp, which a VM thread kept off its CPU writes late).
        // A stall by the probes may end up to 10 ms before the log's end: the VM thread lets the
        // threads go, then may wait for a CPU before its end probe and its log line (a meter
        // tick in between ends the stall there; seen on JDK 21 in CI, 2 ms, and on JDK 17 in a
        // local CI run under load, 7.2 ms).
        let found = |(b, e): (u64, u64)| {
            stalls.iter().any(|&(sb, se, probe)| {
                (probe && begun_at(sb, b) && se <= e + 5_000_000 && se + 10_000_000 >= e)
                    || (!probe && sb <= b && se + 5_000_000 >= e && se <= e + 6_000_000)
            })
        };
        let missed: Vec<_> = long.iter().filter(|s| !found(**s)).collect();
        // One safepoint, one stall: never a run of stalls inside it (a defect seen in CI: a
        // stall begun at the meter's last tick, after the begin probe, ended at once and began
        // again every threshold through a 1 s full GC).
        for (b, e) in &long {
            let inside = stalls.iter().filter(|&&(sb, se, _)| sb >= *b && se <= *e + 1_000_000);
            assert!(
                inside.count() <= 1,
                "JDK {}: more than one stall inside the safepoint {b}-{e}: {stalls:?}",
                jdk.feature()
            );
        }
        assert!(
            missed.len() <= (long.len() / 10).max(1),
            "JDK {}: safepoints of 10 ms or more not found as the log times them: {missed:?} of {long:?}; the stalls (begin, end, by the probes): {stalls:?}",
            jdk.feature()
        );
    }
}
