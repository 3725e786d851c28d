//! The doctor against real JVMs on this machine: each pathology is made to happen, recorded
//! by `stallscope run` or `attach`, and the diagnosed cause and culprit are checked.

mod common;

use common::*;
use doctor::code::CulpritCode;
use doctor::{Cause, Confidence, CulpritView, StallReport};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Output, Stdio};

fn run_recorded(dir: &Path, java: &Path, jvm_args: &[&str], workload: &[&str]) -> Output {
    run_recorded_with(&[], dir, java, jvm_args, workload)
}

/// `stallscope run OPTIONS --out DIR -- JAVA JVM_ARGS -jar workloads.jar WORKLOAD`.
fn run_recorded_with(
    options: &[&str],
    dir: &Path,
    java: &Path,
    jvm_args: &[&str],
    workload: &[&str],
) -> Output {
    stallscope()
        .arg("run")
        .args(options)
        .args(["--out", dir.to_str().unwrap(), "--"])
        .arg(java)
        .args(jvm_args)
        .arg("-jar")
        .arg(workloads_jar())
        .args(workload)
        .output()
        .unwrap()
}

/// The code of the first culprit of a stall's first finding, if it has one.
fn first_code(s: &StallReport) -> Option<&CulpritCode> {
    s.findings[0].culprits.first().and_then(|c| c.code.as_ref())
}

/// The method of a culprit's code where a fix goes: its application frame, else its top one
/// ("" when there is none).
fn app_method(code: Option<&CulpritCode>) -> &str {
    code.and_then(|c| c.frames.get(c.app_frame.unwrap_or(0)))
        .map(|f| f.method.as_str())
        .unwrap_or_default()
}

/// Major faults the threads `tids` took during stall `n`: each thread's highest count sampled in
/// the stall less its count in the stall's baseline (a thread born in the stall counts from zero).
/// Read from the recorder's raw samples, apart from the doctor's reading of them.
fn major_faults_in_stall(rec: &recording::Recording, n: u32, tids: &[i64]) -> u64 {
    use std::collections::HashMap;
    let mut base: HashMap<i32, u64> = HashMap::new();
    let mut top: HashMap<i32, u64> = HashMap::new();
    for s in rec.samples.iter().filter(|s| s.stall == n) {
        for t in s.threads.iter().filter(|t| tids.contains(&(t.tid as i64))) {
            if s.baseline {
                base.insert(t.tid, t.majflt);
            } else {
                let m = top.entry(t.tid).or_default();
                *m = (*m).max(t.majflt);
            }
        }
    }
    top.iter().map(|(tid, m)| m.saturating_sub(base.get(tid).copied().unwrap_or(0))).sum()
}

/// `run --resolution`: a meter that wakes every 10 ms finds the same loop, logs its hiccups
/// corrected for coordinated omission (the ticks the loop held up recorded as a 1 ms meter's
/// would be, down from the longest), and a resolution above the threshold is refused before
/// anything starts.
#[test]
fn a_coarser_meter_finds_the_same_loop_and_logs_its_hiccups_whole() {
    let _x = exclusive();
    let dir = scratch("doctor-resolution").join("rec");
    let o = run_recorded_with(
        &["--resolution", "10ms", "--threshold", "10ms"],
        &dir,
        &java17(),
        &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
        &["counted-loop", "--duration", "2s", "--rounds", "300", "--trigger", "threaddump"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"resolution_ns\":10000000"), "the meter ran at 10 ms: {events}");
    let r = report(&dir);
    let longest = stalls_with(&r, Cause::NoSafepointPoll)
        .into_iter()
        .max_by_key(|s| s.duration_ns)
        .unwrap_or_else(|| panic!("{:?}", causes(&r)));
    let h = r.summary.hiccups.as_ref().expect("the hiccup log");
    // The longest hiccup is the loop's longest stall, to within the meter's sleep. A 10 ms meter
    // may not wake between stalls closer together than its sleep (a Cleanup safepoint that waits
    // on the same loop just before the dump), so it may also be the run of such stalls, whole.
    let mut spans: Vec<(u64, u64)> =
        r.stalls.iter().map(|s| (s.start_mono_ns, s.start_mono_ns + s.duration_ns)).collect();
    spans.sort();
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for (a, b) in spans {
        match runs.last_mut() {
            Some(last) if a <= last.1 + 20_000_000 => last.1 = last.1.max(b),
            _ => runs.push((a, b)),
        }
    }
    let run = runs.iter().map(|(a, b)| b - a).max().unwrap_or(0).max(longest.duration_ns);
    assert!(
        h.max_ns + 20_000_000 >= longest.duration_ns && h.max_ns <= run + 20_000_000,
        "{h:?} vs the loop's longest stall, {} ns, and the longest run of stalls, {run} ns: {runs:?}",
        longest.duration_ns
    );
    // Corrected: the missed ticks are there, one per 10 ms of the longest hiccup.
    assert!(h.count >= longest.duration_ns / 10_000_000 / 2, "{h:?}");
    let refused = scratch("doctor-resolution-refused").join("rec");
    let o = run_recorded_with(
        &["--resolution", "20ms"],
        &refused,
        &java17(),
        &[],
        &["idle", "--duration", "1s"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--resolution") && err.contains("--threshold"),
        "{err}"
    );
    assert!(!refused.exists(), "nothing made for a refused run");
}

#[test]
fn counted_loop_runs_without_a_safepoint_poll_on_both_jdks() {
    let _x = exclusive();
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let dir = scratch(&format!("doctor-loop-{i}")).join("rec");
        let o = run_recorded(
            &dir,
            &java,
            &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
            &["counted-loop", "--duration", "4s", "--rounds", "300", "--trigger", "threaddump"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let live = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(live.contains("\"workload\":\"counted-loop\""), "the JVM's stdout passes through");
        assert!(
            !live.contains("SafepointSynchronize"),
            "SafepointTimeout's warnings stay out of the application's stdout"
        );
        let r = report(&dir);
        let hits = stalls_with(&r, Cause::NoSafepointPoll);
        assert!(!hits.is_empty(), "{java:?}: {:?}", causes(&r));
        for s in &hits {
            assert_eq!(
                culprit_names(s),
                vec!["counted-loop".to_string()],
                "{java:?}: the culprit by its full Java name: {s:?}"
            );
            let sp = s.safepoint.as_ref().unwrap();
            assert!(sp.ttsp_ns > sp.at_safepoint_ns);
            // Its code, from the stack the stacks agent took when the recorder signalled the
            // thread in the stall: the workload's loop, named in the fix.
            let code = first_code(s);
            let top = app_method(code);
            assert_eq!(
                top, "io.stallscope.workloads.CountedLoop.invoke",
                "{java:?}: the culprit's code: {code:?}"
            );
            let fix = &s.findings[0].fix;
            assert!(fix.starts_with("the loop in CountedLoop.invoke (line "), "{java:?}: {fix}");
        }
        assert!(
            hits.iter().any(|s| first_code(s).is_some_and(|c| c.event == "signal-sample")),
            "{java:?}: a stack taken in the stall: {hits:?}"
        );
        assert!(
            dir.join("stacks.jsonl").exists() && !dir.join("frames.jfr").exists(),
            "{java:?}: the stacks agent, not JFR (is target/debug/libstallscope_stacks.so built? `make test` builds it)"
        );
        assert!(
            hits.iter().any(|s| s.findings[0].confidence == Confidence::High),
            "SafepointTimeout and /proc agree: high confidence"
        );

        // `report` prints exactly what the live run printed.
        let again = stallscope().args(["report", dir.to_str().unwrap()]).output().unwrap();
        let printed = String::from_utf8_lossy(&again.stdout).into_owned();
        assert!(printed.starts_with("stallscope run: "), "{printed}");
        assert!(
            live.ends_with(&printed),
            "live output and report differ:\n--- live\n{live}\n--- report\n{printed}"
        );

        assert!(!r.notes.iter().any(|n| n.contains("no stack")), "{java:?}: {:?}", r.notes);
        if java != java25() {
            continue;
        }

        // `run --jfr`: the stacks from a flight recording instead; JDK 25's safepoint-latency
        // sample says how long the loop held the thread from its poll.
        let dir = dir.with_file_name("rec-jfr");
        let o = run_recorded_with(
            &["--jfr"],
            &dir,
            &java,
            &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"],
            &["counted-loop", "--duration", "4s", "--rounds", "300", "--trigger", "threaddump"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            dir.join("frames.jfr").exists() && !dir.join("stacks.jsonl").exists(),
            "--jfr: JFR, not the stacks agent"
        );
        let r = report(&dir);
        let hits = stalls_with(&r, Cause::NoSafepointPoll);
        assert!(
            hits.iter().any(|s| first_code(s).is_some_and(|c| c.event == "jdk.SafepointLatency")),
            "JDK 25 says how long the loop held the thread from its poll: {hits:?}"
        );
        for s in &hits {
            let code = first_code(s);
            let top = app_method(code);
            assert_eq!(
                top, "io.stallscope.workloads.CountedLoop.invoke",
                "--jfr: the culprit's code: {code:?}"
            );
        }

        // Without its safepoint log, the recording's flight recording gives the safepoints, and
        // the diagnosis stands.
        let bare = dir.with_file_name("rec-without-log");
        std::fs::create_dir(&bare).unwrap();
        for e in
            std::fs::read_dir(&dir).unwrap().flatten().filter(|e| e.file_name() != "safepoint.log")
        {
            std::fs::copy(e.path(), bare.join(e.file_name())).unwrap();
        }
        let r = report(&bare);
        let notes: Vec<&str> = r.notes.iter().map(String::as_str).collect();
        assert!(
            notes.iter().any(|n| n.contains("safepoints read from") && n.contains("frames.jfr")),
            "{java:?}: {notes:?}"
        );
        let hits = stalls_with(&r, Cause::NoSafepointPoll);
        assert!(!hits.is_empty(), "{java:?} from JFR: {:?}", causes(&r));
        for s in &hits {
            assert_eq!(
                culprit_names(s),
                vec!["counted-loop".to_string()],
                "{java:?} from JFR: {s:?}"
            );
            // The last stall can end with the JVM, after JFR wrote its last safepoint (seen in a
            // CI run: the 5th of 5 loop stalls, at the end, had none); every other has its own,
            // as the stall's safepoint or, where the meter's stall began well before JFR's
            // SafepointBegin (seen in a CI run on JDK 25: 340 ms before, under load), as the
            // safepoint within it.
            let last = r.stalls.last().map(|l| l.stall) == Some(s.stall);
            let Some(sp) = s.safepoint.as_ref().or(s.safepoints.first()) else {
                assert!(last, "{java:?} from JFR: no safepoint for {s:?}");
                continue;
            };
            assert!(sp.ttsp_ns > sp.at_safepoint_ns, "{java:?} from JFR: {s:?}");
        }
    }
}

#[test]
fn mapped_read_on_a_slow_disk_is_a_major_fault_on_the_named_file_on_both_jdks() {
    let _x = exclusive();
    let d = scratch("doctor-mmap");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_random(&back.join("test.dat"), 24 << 20);
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "300ms"]);
    let file = mnt.join("test.dat");
    let mut seventeen = None;
    for (jdk, java) in [("17", java17()), ("25", java25())] {
        evict(&file);
        let dir = d.join(format!("rec-{jdk}"));
        // Five reads: the thread dump asked for in the first fault is a VM operation queued
        // behind the workload's own (its trigger's dump, which waits for the next fault), so it
        // is taken at the reader's poll one or two faults later; a reader whose last read that
        // was has exited, and the dump has no stack of it (seen in CI with three reads: the
        // dump came 2.65 s after the ask, after the third fault).
        let o = run_recorded(
            &dir,
            &java,
            &[],
            &[
                "mapped-read",
                "--file",
                file.to_str().unwrap(),
                "--mode",
                "mmap",
                "--reads",
                "5",
                "--stride",
                "4m",
                "--chunk",
                "512k",
            ],
        );
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report(&dir);
        let hits: Vec<StallReport> =
            stalls_with(&r, Cause::MajorFault).into_iter().cloned().collect();
        assert!(!hits.is_empty(), "JDK {jdk}: {:?}", causes(&r));
        // Five like faults: the one the evidence explains best is judged. The first can share
        // its stall with the JVM's own start-up work (seen in a CI run on JDK 25: the first of
        // five 850 ms faults 66% major fault, 33% waiting for a CPU, so medium; the rest 99%).
        let s =
            hits.iter().max_by(|a, b| a.findings[0].share.total_cmp(&b.findings[0].share)).unwrap();
        assert!(s.duration_ns >= 300_000_000, "JDK {jdk}: {s:?}");
        let c = s.findings[0].culprits.first();
        assert_eq!(c.map(|c| c.name.as_str()), Some("reader-thread"), "JDK {jdk}: {s:?}");
        let c = c.unwrap();
        assert!(c.description.contains("not in a syscall"), "JDK {jdk}: {c:?}");
        assert!(
            c.files.iter().any(|f| f.contains("test.dat")),
            "JDK {jdk}: the mapped file is named: {c:?}"
        );
        assert_eq!(s.findings[0].confidence, Confidence::High, "JDK {jdk}");
        // Its code: the thread is signalled in the fault and takes the signal when the fault is
        // over, where it stopped: in the copy the reader's method made. The dump that carries
        // it is taken one or two faults after the ask, so not every stall has it (seen in CI on
        // JDK 17: the clearest of five faults was the last, and the dump came after the reader
        // had exited): one of the faults must name the reader's method, and its fix with it.
        let reader_code = |s: &&StallReport| {
            s.findings[0].culprits.first().and_then(|c| c.code.as_ref()).is_some_and(|code| {
                code.frames
                    .iter()
                    .any(|f| f.method.starts_with("io.stallscope.workloads.MappedRead"))
            })
        };
        let coded = hits
            .iter()
            .find(reader_code)
            .unwrap_or_else(|| panic!("JDK {jdk}: no fault names the reader's code: {hits:?}"));
        assert!(
            coded.findings[0].fix.starts_with("the read in MappedRead"),
            "JDK {jdk}: {}",
            coded.findings[0].fix
        );
        if jdk == "17" {
            seventeen = Some((r, hits));
        }
    }
    let (r, hits) = seventeen.unwrap();
    // With root, the page-fault tracepoint turns the fault into a file and an offset.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root for tracepoints (CI runs as root)"
    );
    assert!(r.meta.tracepoints, "{:?}", r.meta);
    let offsets: Vec<&str> = hits
        .iter()
        .flat_map(|s| s.findings[0].culprits[0].files.iter().map(String::as_str))
        .filter(|f| f.contains("page-fault tracepoint"))
        .collect();
    // Each read starts a 4 MiB stride; which of them a safepoint happened to wait on varies.
    let at_a_stride = |f: &&str| {
        f.strip_prefix("offset 0x")
            .and_then(|r| r.split(' ').next())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .is_some_and(|o| o % (4 << 20) == 0)
    };
    assert!(
        !offsets.is_empty() && offsets.iter().all(|f| at_a_stride(f) && f.contains("test.dat")),
        "each fault is at the start of a read's stride: {offsets:?}"
    );
}

/// A stall the workload did not cause (seen in CI: a thread dump's safepoint held 311 ms by the
/// agent's log thread faulting a page of the JVM in from a busy disk) is not the cause under
/// test: the JVM's SafepointTimeout must have named whom it waited for, and not `writer`.
fn held_by_another(s: &StallReport, writer: &str, what: &str) {
    let named: Vec<&str> = s
        .safepoints
        .iter()
        .flat_map(|sp| sp.timeout_culprits.iter().map(|c| c.name.as_str()))
        .collect();
    assert!(
        !named.is_empty() && !named.contains(&writer),
        "{what}: a stall {writer} held named otherwise: {s:?}"
    );
    eprintln!("{what}: stall {} held by {named:?}, not {writer}: {:?}", s.stall, s.findings[0]);
}

/// A copy of recording `dir` as a user without root would have made it: no tracepoints.
fn without_tracepoints(dir: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if name == "trace.jsonl" || !e.file_type().unwrap().is_file() {
            continue;
        }
        std::fs::copy(e.path(), to.join(&name)).unwrap();
    }
    let meta = to.join("meta.json");
    let mut m: recording::Meta =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    m.tracepoints = false;
    std::fs::write(&meta, serde_json::to_string(&m).unwrap()).unwrap();
}

#[test]
fn a_store_to_a_mapped_file_under_writeback_is_named_with_the_file_on_every_lts_jdk() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root for tracepoints (CI runs as root)"
    );
    let d = scratch("doctor-mapped-write");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    // Writes (and so writeback) of the mount take 300 ms; reads are not delayed.
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "0ms", "--write-delay", "300ms"]);
    let file = mnt.join("state.dat");
    let workload = |mode: &str| {
        ["mapped-write", "--file", file.to_str().unwrap(), "--mode", mode, "--duration", "3s"]
            .map(String::from)
    };
    for (jdk, java) in [("11", java11()), ("17", java17()), ("21", java21()), ("25", java25())] {
        let dir = d.join(format!("rec-{jdk}"));
        let w = workload("mmap");
        let w: Vec<&str> = w.iter().map(|s| s.as_str()).collect();
        let o = run_recorded(&dir, &java, &[], &w);
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report(&dir);
        // A store waits for the page's writeback (a force() starts it): 300 ms, a few times.
        let hits = stalls_with(&r, Cause::MappedWriteback);
        let long: Vec<&StallReport> =
            r.stalls.iter().filter(|s| s.duration_ns >= 200_000_000).collect();
        assert!(!long.is_empty(), "JDK {jdk}: no store waited: {:?}", causes(&r));
        for s in &long {
            if s.findings[0].cause != Cause::MappedWriteback {
                held_by_another(s, "journal-writer", &format!("JDK {jdk}"));
            }
        }
        for s in &hits {
            let f = &s.findings[0];
            assert_eq!(culprit_names(s), ["journal-writer"], "JDK {jdk}: {s:?}");
            let c = &f.culprits[0];
            assert!(c.description.contains("not in a syscall"), "JDK {jdk}: {c:?}");
            // The writeback tracepoint names the file: certain. The fix is that file's, never the
            // perf counters'. (The evidence as its JSON text, as `report --json` writes it.)
            let said = serde_json::to_string(&f.evidence).unwrap();
            assert!(
                said.contains("state.dat") && said.contains("writeback tracepoint"),
                "JDK {jdk}: {said}"
            );
            assert_eq!(f.confidence, Confidence::High, "JDK {jdk}: {s:?}");
            let fix = &f.fix;
            assert!(
                fix.contains("state.dat is written through a shared mapping")
                    && !fix.contains("PerfDisableSharedMem"),
                "JDK {jdk}: {fix}"
            );
        }
        // The store's code, where the agent's signal found the writer: the user's frame. Which
        // of the user's frames depends on the JIT: with `update` inlined into the writer's
        // lambda, the faulting pc's nearest debug information can be the lambda's (seen once on
        // JDK 11 in CI: "the write in MappedWrite.lambda$main$0 (line 99)"). Either is the
        // user's code, never the JDK's.
        assert!(
            hits.iter().any(|s| {
                let fix = &s.findings[0].fix;
                fix.starts_with("the write in MappedWrite.update (line ")
                    || fix.starts_with("the write in MappedWrite.lambda$main$")
            }),
            "JDK {jdk}: the writer's code is named in a fix: {:?}",
            hits.iter().map(|s| &s.findings[0].fix).collect::<Vec<_>>()
        );
        // Without root: no tracepoints, but the recorder's own look at the file (cachestat) saw
        // its pages under writeback as each stall began. The same stalls, named with less
        // certainty, and the same file.
        let plain = d.join(format!("rec-{jdk}-unprivileged"));
        without_tracepoints(&dir, &plain);
        let u = report(&plain);
        for s in u.stalls.iter().filter(|s| s.duration_ns >= 200_000_000) {
            let f = &s.findings[0];
            if f.cause != Cause::MappedWriteback {
                held_by_another(s, "journal-writer", &format!("JDK {jdk} unprivileged"));
                continue;
            }
            assert_eq!(
                (f.cause, f.confidence),
                (Cause::MappedWriteback, Confidence::Medium),
                "JDK {jdk} unprivileged: {s:?}"
            );
            let said = serde_json::to_string(&f.evidence).unwrap();
            assert!(
                said.contains("of ")
                    && said.contains("state.dat were under writeback as the stall began"),
                "JDK {jdk} unprivileged: {said}"
            );
            assert!(f.fix.contains("state.dat is written through"), "JDK {jdk}: {}", f.fix);
        }
        // The recorder was never held by the file: it does not map it, nor close it at each look
        // (a FUSE close writes the file back, 300 ms). A shorter hold is the machine's (seen
        // once in CI: "the machine's counters took 22.8 ms").
        let events: Vec<recording::Event> =
            recording::read_lines(&dir.join("events.jsonl")).unwrap();
        for e in &events {
            if let recording::Event::RecorderHeld { held_ns, step, .. } = e {
                assert!(*held_ns < 200_000_000, "JDK {jdk}: held {held_ns} ns in {step}");
            }
        }
    }
    // The same updates with FileChannel.write: the writer waits in a system call, where a
    // safepoint does not wait for it.
    let dir = d.join("rec-channel");
    let w = workload("channel");
    let w: Vec<&str> = w.iter().map(|s| s.as_str()).collect();
    let o = run_recorded(&dir, &java17(), &[], &w);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&dir);
    assert!(stalls_with(&r, Cause::MappedWriteback).is_empty(), "{:?}", causes(&r));
}

#[test]
fn a_huge_set_memory_is_named_by_the_method_that_calls_it_on_both_jdks() {
    let _x = exclusive();
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let dir = scratch(&format!("doctor-setmemory-{i}")).join("rec");
        // 12 s: room for two dumps (one per 10 s for stalls this short), so one stall the doctor
        // reads as something else does not decide the test.
        let o = run_recorded(
            &dir,
            &java,
            &[],
            &["set-memory", "--duration", "12s", "--size-mb", "512", "--every", "200ms"],
        );
        assert!(o.status.success(), "{java:?}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report(&dir);
        assert!(!stalls_with(&r, Cause::NoSafepointPoll).is_empty(), "{java:?}: {:?}", causes(&r));
        // The stacks agent walks a thread inside the VM from its last Java frame: the stack
        // taken in a stall the filling thread held names the caller of setMemory, and the fix
        // says so.
        let names_fill = |c: &CulpritView| {
            c.code.as_ref().is_some_and(|code| {
                code.frames.iter().any(|f| f.method == "io.stallscope.workloads.SetMemory.fill")
            })
        };
        let mut named = 0;
        let mut renamed = false;
        for s in &r.stalls {
            for f in &s.findings {
                for c in f.culprits.iter().filter(|c| names_fill(c)) {
                    named += 1;
                    // The workload's main thread renames itself just before its first fill,
                    // but a stall in that fill can still carry the old name (JDK 25's own
                    // SafepointTimeout list says "main" then), and startup stalls may come
                    // first. Once the new name is seen, the old one must not come back.
                    renamed |= c.name == "set-memory";
                    assert!(
                        c.name == "set-memory" || (c.name == "main" && !renamed),
                        "{java:?}: {s:?}"
                    );
                    // Caught inside setMemory0 (a stack between two fills shows the loop that
                    // calls it, and says "the loop in").
                    let in_fill = c
                        .code
                        .as_ref()
                        .and_then(|code| code.frames.first())
                        .is_some_and(|top| top.method.ends_with("Unsafe.setMemory0"));
                    // `c` is the finding's first culprit.
                    let first = f.culprits.first().is_some_and(|c0| std::ptr::eq(c0, c));
                    if in_fill && f.cause == Cause::NoSafepointPoll && first {
                        let fix = &f.fix;
                        assert!(
                            fix.starts_with(
                                "split the call to Unsafe.setMemory0 in SetMemory.fill (line "
                            ),
                            "{java:?}: {fix}"
                        );
                    }
                }
            }
        }
        let seen: Vec<String> = r
            .stalls
            .iter()
            .map(|s| {
                format!(
                    "{} {:.0} ms: {:?}",
                    s.findings[0].cause.id(),
                    s.duration_ns as f64 / 1e6,
                    first_code(s).map(|c| &c.source)
                )
            })
            .collect();
        assert!(named > 0, "{java:?}: no stall names SetMemory.fill:\n{}", seen.join("\n"));
    }
}

/// Reads the workload's "idle: pid N" line from a recorded run's stdout.
fn spawn_recorded_idle(
    dir: &Path,
    secs: u32,
) -> (Reaper, i32, BufReader<std::process::ChildStdout>) {
    let mut child = stallscope()
        .args(["run", "--out", dir.to_str().unwrap(), "--"])
        .arg(java17())
        .arg("-jar")
        .arg(workloads_jar())
        .args(["idle", "--duration", &format!("{secs}s")])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 =
        line.trim().strip_prefix("idle: pid ").unwrap_or_else(|| panic!("{line}")).parse().unwrap();
    wait_for_heartbeat(pid);
    (Reaper(child), pid, out)
}

/// Waits for a recorded run to end; its stdout is what is left in `out`.
fn finish(mut child: Reaper, mut out: BufReader<std::process::ChildStdout>) -> Output {
    let mut stdout = String::new();
    let _ = std::io::Read::read_to_string(&mut out, &mut stdout);
    let c: &mut Child = &mut child.0;
    let status = c.wait().unwrap();
    Output { status, stdout: stdout.into_bytes(), stderr: vec![] }
}

#[test]
fn a_frozen_jvm_is_a_frozen_process_and_a_quiet_one_has_no_stalls() {
    let _x = exclusive();
    let d = scratch("doctor-freeze");
    let (child, pid, out) = spawn_recorded_idle(&d.join("rec"), 4);
    let f = stallscope()
        .args(["inject", "freeze", &pid.to_string(), "--for", "500ms"])
        .output()
        .unwrap();
    assert!(f.status.success());
    let o = finish(child, out);
    assert!(o.status.success());
    let r = report(&d.join("rec"));
    let frozen = stalls_with(&r, Cause::Frozen);
    assert_eq!(frozen.len(), 1, "{:?}", causes(&r));
    assert!(frozen[0].duration_ns >= 450_000_000);
    assert!(frozen[0].safepoint.is_none(), "a freeze is not a safepoint: {:?}", frozen[0]);
    let control = frozen[0].control_max_late_ns;
    assert!(
        control < 100_000_000,
        "the recorder kept time while the JVM was frozen (control meter {control} ns late)"
    );
    // With the kernel's events (the suite runs as root), a thread stopped since its last read is
    // not read again: after the first look, the frozen JVM's threads are left unread.
    let events: Vec<recording::Event> =
        recording::read_lines(&d.join("rec").join("events.jsonl")).unwrap();
    let reads = events.iter().find_map(|e| match e {
        recording::Event::StallEnd { stall, thread_reads, .. } if *stall == frozen[0].stall => {
            Some(thread_reads.expect("the stall's thread reads are counted"))
        }
        _ => None,
    });
    let reads = reads.expect("the frozen stall's end is in the events");
    assert!(
        reads.still > 2 * reads.read,
        "a frozen JVM's threads are not read again while they stay stopped: {reads:?}"
    );

    // The same JVM left alone: nothing to report. Without the JVM's flight recorder: starting it
    // allocates, and in this small default heap that once made a real 12 ms young GC at start
    // (named, rightly, a long VM operation; docs/frames.md counts it among JFR's costs). What is
    // checked here is the doctor's judgement of a JVM that does nothing.
    let quiet = d.join("quiet");
    let o = stallscope()
        .args(["run", "--no-frames", "--out", quiet.to_str().unwrap(), "--"])
        .arg(java17())
        .arg("-jar")
        .arg(workloads_jar())
        .args(["idle", "--duration", "4s"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let r = report(&quiet);
    // A shared 2-vCPU guest gives even a quiet JVM the odd hiccup (the JIT's start-up burst,
    // the guest itself pausing). The doctor must not blame the JVM for them: CPU starvation, a
    // machine pause, or an honest "unknown" that is short. Nothing JVM-made. A paused guest or
    // a starved CPU can last longer, and then the doctor says which.
    for s in &r.stalls {
        let cause = s.findings.first().map(|f| f.cause);
        assert!(
            [Some(Cause::CpuStarvation), Some(Cause::MachinePause), Some(Cause::Unknown)]
                .contains(&cause),
            "a hiccup of a quiet JVM blamed on it: {s:?}"
        );
        assert!(cause != Some(Cause::Unknown) || s.duration_ns < 50_000_000, "a quiet JVM: {s:?}");
    }
    if r.summary.stalls == 0 {
        assert!(String::from_utf8_lossy(&o.stdout).contains("stalls      none of 5.00 ms or more"));
    }
    assert!(
        r.summary.hiccups.as_ref().unwrap().intervals >= 3,
        "the agent's interval log is in the recording"
    );
    // The control meter: the recorder's own wake-ups, every 250 ms between stalls as root (the
    // BPF watchdog wakes it for a stall), once per threshold without it: 16 or 800 in 4 s.
    let control = r.summary.control.as_ref().unwrap();
    assert!(control.intervals >= 3 && control.count >= 12, "the control meter's log: {control:?}");
}

#[test]
fn safepoints_under_cpu_contention_are_cpu_starvation() {
    let _x = exclusive();
    let d = scratch("doctor-storm");
    let _hog = Reaper(
        stallscope()
            .args(["inject", "cpu-hog", "--threads", "4", "--for", "20s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let o = run_recorded(
        &d.join("rec"),
        &java17(),
        &[],
        &["safepoint-storm", "--threads", "2", "--duration", "4s", "--every", "10ms"],
    );
    assert!(o.status.success());
    let r = report(&d.join("rec"));
    let all = causes(&r);
    let starved = stalls_with(&r, Cause::CpuStarvation);
    // Stalls of a few samples are often honestly unknown (README, known limits): measured over
    // four runs here, 45-60% of the stalls under 10 ms were unknown, against a quarter of the
    // longer ones. "Most" is judged where the evidence has at least five samples. How long
    // the stalls grow depends on how the host shares its cores: one CI run saw 13 stalls, 12 of
    // them CPU starvation, but only two of 10 ms or more. Then "most" is judged on them all.
    let long: Vec<Cause> = r
        .stalls
        .iter()
        .filter(|s| s.duration_ns >= 10_000_000)
        .map(|s| s.findings[0].cause)
        .collect();
    let judged: Vec<Cause> = if long.len() >= 3 { long } else { all.clone() };
    let judged_starved = judged.iter().filter(|c| **c == Cause::CpuStarvation).count();
    assert!(judged.len() >= 3, "contention makes stalls: {all:?}");
    assert!(
        judged_starved * 2 > judged.len(),
        "most stalls (of 10 ms and more, where there are three) are CPU starvation: {judged:?}"
    );
    assert!(
        !all.iter()
            .any(|c| matches!(c, Cause::NoSafepointPoll | Cause::MajorFault | Cause::Frozen)),
        "{all:?}"
    );
    let evidence: Vec<String> =
        starved.iter().flat_map(|s| s.findings[0].evidence.iter().cloned()).collect();
    assert!(
        evidence.iter().any(|e| e.contains("for a CPU") || e.contains("run queue")),
        "run-queue evidence: {evidence:?}"
    );
}

/// Issue 56: a collection of eight GC threads on this 2-CPU machine, nothing else running. Its
/// threads wait for CPUs held by each other: the collection is the stall, not starvation. Before,
/// 562 of 936 such stalls read `cpu-starvation` at high confidence with the fix "keep noisy
/// neighbours out of its way". Needs root and BPF (the kernel's count of every process's CPU
/// time in the stall): without them the test fails.
#[test]
fn a_collection_with_more_gc_threads_than_cpus_is_the_collection_not_starvation() {
    let _x = exclusive();
    let d = scratch("doctor-own-crowd");
    let src = d.join("Alloc.java");
    std::fs::write(
        &src,
        r#"public class Alloc {
    static volatile Object sink;
    public static void main(String[] a) throws Exception {
        for (int k = 0; k < 2; k++) {
            new Thread(() -> {
                Object[] ring = new Object[300_000];
                for (int i = 0; ; i = (i + 1) % ring.length) {
                    ring[i] = new byte[64];
                    sink = new byte[256];
                }
            }, "alloc-" + k).start();
        }
        Thread.sleep(4000);
        System.exit(0);
    }
}
"#,
    )
    .unwrap();
    let rec = d.join("rec");
    let o = stallscope()
        .args(["run", "--out", rec.to_str().unwrap(), "--"])
        .arg(java17())
        .args(["-XX:+UseParallelGC", "-XX:ParallelGCThreads=8", "-Xmn64m", "-Xmx256m"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let meta = std::fs::read_to_string(rec.join("meta.json")).unwrap();
    assert!(meta.contains("\"bpf\": true") || meta.contains("\"bpf\":true"), "root with BPF");
    let r = report(&rec);
    let long: Vec<&StallReport> = r.stalls.iter().filter(|s| s.duration_ns >= 10_000_000).collect();
    assert!(long.len() >= 10, "young collections of 8 threads on 2 CPUs: {}", long.len());
    // A burst of some other process (a kernel thread, the machine's own) may truly starve a
    // stall or two: at most one in twenty of the long ones.
    let confident_starvation: Vec<String> = long
        .iter()
        .flat_map(|s| &s.findings)
        .filter(|f| f.cause == Cause::CpuStarvation && f.confidence == Confidence::High)
        .map(|f| f.evidence.join(" / "))
        .collect();
    assert!(
        confident_starvation.len() * 20 <= long.len(),
        "{} confident starvation findings in {} long stalls, no neighbour running: {:?}",
        confident_starvation.len(),
        long.len(),
        confident_starvation.first()
    );
    // What they were is judged on those of three thresholds or more: in a stall of 10-12 ms the
    // recorder, itself short of a CPU here, noticed up to 4-5 ms late, and half such a stall
    // is unseen (CI on 2026-11-30: 81 of 110 stalls of 10 ms as the operation, 26 of 27 of
    // 15 ms).
    let judged: Vec<&&StallReport> = long.iter().filter(|s| s.duration_ns >= 15_000_000).collect();
    assert!(judged.len() >= 5, "young collections of 15 ms or more: {}", judged.len());
    let operation = judged.iter().filter(|s| s.findings[0].cause == Cause::LongVmOperation).count();
    assert!(operation * 4 >= judged.len() * 3, "{operation} of {} long stalls", judged.len());
    let own = judged.iter().filter(|s| s.findings[0].fix.contains("-XX:ParallelGCThreads")).count();
    assert!(own * 2 >= judged.len(), "the own threads' fix on {own} of {}", judged.len());
}

#[test]
fn ctrl_c_reaches_the_jvm_and_the_recording_is_finished() {
    let _x = exclusive();
    let dir = scratch("doctor-ctrlc").join("rec");
    let (child, pid, out) = spawn_recorded_idle(&dir, 60);
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    let o = finish(child, out);
    assert_eq!(o.status.code(), Some(130), "the JVM ended by SIGINT: {:?}", o.status);
    assert!(String::from_utf8_lossy(&o.stdout).contains("Summary ("), "the report was printed");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("\"detach\"") && events.contains("\"target-exit\""), "{events}");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "the JVM is gone");
}

#[test]
fn stalls_at_the_safepoint_swap_slow_writes_and_reclaim_are_named_on_both_jdks() {
    let _x = exclusive();
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: a swap file and memory cgroups (CI runs as root)"
    );
    // The lab's own scenarios make each happen, baseline only: a heap swapped out then paged in by
    // full GCs, a GC log on a disk whose writes are slow, a JVM touching fresh memory in a full
    // memory cgroup.
    let cases = [
        ("swap", "swappable", Cause::SwapIn),
        ("slow-log", "slow-disk", Cause::VmThreadIo),
        ("memory-pressure", "squeezed", Cause::MemoryReclaim),
    ];
    let lab = |java: &Path, out: &Path, cases: &[(&str, &str, Cause)]| {
        let mut c = stallscope();
        c.args([
            "lab",
            "run",
            "--reps",
            "1",
            "--out",
            out.to_str().unwrap(),
            "--java",
            java.to_str().unwrap(),
        ]);
        for (scenario, variant, _) in cases {
            c.arg(scenario).args(["--variant", variant]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{java:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    // The stall the fault made: the one holding the longest safepoint (a busy two-CPU machine
    // makes stalls of its own, at start-up above all): `longest_safepoint`.
    for (i, java) in [java17(), java25()].into_iter().enumerate() {
        let out = scratch(&format!("doctor-memory-{i}")).join("lab");
        lab(&java, &out, &cases);
        for (scenario, variant, cause) in cases {
            let mut dir = out.join(scenario).join(format!("{variant}-1"));
            // A stall the recorder itself did not look at (one of its /proc reads was held for
            // most of it, seen once in a CI run: one look in a 1 s stall) is rightly unknown,
            // and the recording says why; it says nothing of the doctor. That scenario runs
            // once more, and the second run is judged.
            let first_report = report(&dir);
            let first = longest_safepoint(&first_report);
            let said = serde_json::to_string(&first.findings[0].evidence).unwrap();
            // A late thread that reaches its poll writes stallscope's own debug line (`found
            // polling page … exception`) to the safepoint log, and in the full cgroup that write
            // waits too, where /proc shows a write, not reclaim (JDK 25: 3 of 13 runs by hand on
            // 2026-11-26; JDK 17 once in CI on 2026-11-27). The doctor reads such a write as
            // reclaim when the cgroup hit its limit; a sample that caught the thread between
            // states still leaves it unknown. A miss that says unknown runs once more; the
            // second run is judged.
            let reclaim_missed =
                scenario == "memory-pressure" && first.findings[0].cause == Cause::Unknown;
            if first.findings[0].cause == Cause::Unknown
                && (reclaim_missed
                    || said.contains("the recorder itself was held")
                    || said.contains("the recorder noticed the stall"))
            {
                eprintln!(
                    "{java:?} {scenario}: the stall was not named (or the recorder did not see it), once more: {said}"
                );
                let again = scratch(&format!("doctor-memory-{i}-{scenario}")).join("lab");
                lab(&java, &again, &[(scenario, variant, cause)]);
                dir = again.join(scenario).join(format!("{variant}-1"));
            }
            let r = report(&dir);
            let stalls = &r.stalls;
            // Named with confidence.
            let longest = longest_safepoint(&r);
            let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
            assert_eq!(
                longest.findings[0].cause, cause,
                "{java:?} {scenario}: {longest:?}\nthe recorder's events: {events}"
            );
            // Reclaim is seen directly (reclaim_throttle, shrink_*) only while a thread is inside
            // it; the JVM's own log writes in the squeezed cgroup wait in the filesystem meanwhile,
            // and /proc cannot say that reclaim holds them. The doctor then covers less than two
            // thirds of the stall and says "medium", which is the honest answer: right cause,
            // lower confidence. Swap-in is seen for all of its stall, but on this two-CPU machine
            // the two GC threads paging in also wait for a CPU (the kernel's own reclaim runs
            // beside them): when that wait is a third of their time (measured in a CI run: 658
            // and 724 ms of 2.3 s), the doctor gives it its share and says "medium", swap-in
            // still first. The slow disk is seen for all of its stalls.
            let confident: &[Confidence] = if scenario == "slow-log" {
                &[Confidence::High]
            } else {
                &[Confidence::High, Confidence::Medium]
            };
            let conf = longest.findings[0].confidence;
            assert!(
                confident.contains(&conf),
                "{java:?} {scenario}: confidence {}: {longest:?}",
                conf.word()
            );
            let rec = recording::Recording::read(&dir, None).unwrap();
            for s in stalls {
                let findings = &s.findings;
                let n = s.stall;
                for f in findings.iter().filter(|f| f.confidence == Confidence::High) {
                    // Nothing else is named with confidence beside it. Elsewhere CPU starvation
                    // may be, in a workload that keeps both of this machine's CPUs busy; and a
                    // long VM operation may be, for a GC whose threads paged little in (the
                    // recorder's raw samples are the judge): a GC first touching a growing heap,
                    // or computing while others page, is slow on its own.
                    let other = findings[0].cause != cause;
                    let culprits: Vec<i64> = f.culprits.iter().map(|c| c.tid as i64).collect();
                    let paged = major_faults_in_stall(&rec, n, &culprits);
                    // Paging GC threads take tens of thousands of major faults each (issue 12
                    // measured 36,000 to 71,000); a GC that computes takes a few dozen.
                    let ok = f.cause == cause
                        || (other && f.cause == Cause::CpuStarvation)
                        || (other && paged < 1000 && f.cause == Cause::LongVmOperation);
                    assert!(
                        ok,
                        "{java:?} {scenario}: {} with high confidence (its threads took {paged} major faults): {s:?}",
                        f.cause.id()
                    );
                }
            }
        }
    }
}

/// The `gc-locker` workload: a thread deflating a 24 MB array holds a JNI critical region
/// (`GetPrimitiveArrayCritical`) for about 650 ms while another allocates; the GC locker holds the
/// collection back, and the last thread out of the region runs it (JDK 11-21; JDK 22 on, G1 pins
/// regions instead, and Parallel's new locker blocks the allocator before any safepoint: the
/// `gc-locker` cause, from the locker's flag).
#[test]
fn a_collection_held_back_by_a_jni_critical_region_names_the_thread_in_it() {
    let _x = exclusive();
    let d = scratch("doctor-gc-locker");
    // The workload under `run` on one JDK: its recording.
    let recorded = |jdk: u32, java: std::path::PathBuf| {
        let rec = d.join(format!("rec{jdk}"));
        let mut run = stallscope();
        run.args(["run", "--out", rec.to_str().unwrap(), "--"]).arg(java);
        let o = workload(run, &["-XX:+UseParallelGC", "-Xmn16m", "-Xmx256m"], &["gc-locker"])
            .output()
            .unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        rec
    };
    for (jdk, java) in [(17, java17()), (21, java21())] {
        let r = report(&recorded(jdk, java));
        let findings: Vec<&doctor::Finding> = r.stalls.iter().flat_map(|s| &s.findings).collect();
        let locker: Vec<&&doctor::Finding> = findings
            .iter()
            .filter(|f| {
                f.instigator.as_ref().is_some_and(|i| i.did.contains("JNI critical region"))
            })
            .collect();
        let whole: Vec<String> =
            r.stalls.iter().map(|s| format!("{:?}", s.findings.first().map(|f| &f.fix))).collect();
        assert!(!locker.is_empty(), "JDK {jdk}: no stall laid at the GC locker: {whole:?}");
        for f in &locker {
            let i = f.instigator.as_ref().unwrap();
            assert_eq!(i.name, "deflater", "JDK {jdk}: {}", i.did);
            assert!(
                i.did.contains("the native method java.util.zip.Deflater.deflateBytesBytes"),
                "JDK {jdk}: {}",
                i.did
            );
        }
        // The allocator's wait for the collection, from the kernel's wakers (root with BPF).
        assert!(
            locker.iter().any(|f| {
                let did = &f.instigator.as_ref().unwrap().did;
                did.contains("\"allocator\" waited") && did.contains("woken by \"deflater\"")
            }),
            "JDK {jdk}: {:?}",
            locker.iter().map(|f| &f.instigator.as_ref().unwrap().did).collect::<Vec<_>>()
        );
        // The operation's finding is the locker's to fix (a finding beside it keeps its own).
        let operation: Vec<&&&doctor::Finding> =
            locker.iter().filter(|f| f.cause == Cause::LongVmOperation).collect();
        assert!(!operation.is_empty(), "JDK {jdk}: {whole:?}");
        for f in operation {
            assert!(f.fix.starts_with("the GC locker: while \"deflater\""), "JDK {jdk}: {}", f.fix);
        }
        // The allocator's own collections stay allocations'.
        assert!(
            findings.iter().all(|f| f
                .instigator
                .as_ref()
                .is_none_or(|i| i.name != "allocator" || !i.did.contains("critical"))),
            "JDK {jdk}"
        );
    }
    // JDK 11: the same locker as 17's; the collection it held back is laid at the thread that
    // left the region, in its native method. (Which stalls the waits for it make varies on
    // this JDK: the instigator is what is checked.)
    let r = report(&recorded(11, java11()));
    let dids: Vec<&String> = r
        .stalls
        .iter()
        .flat_map(|s| &s.findings)
        .filter_map(|f| f.instigator.as_ref().map(|i| &i.did))
        .collect();
    assert!(
        dids.iter().any(|d| d.starts_with("thread \"deflater\" left a JNI critical region in the native method java.util.zip.Deflater.deflateBytesBytes")),
        "JDK 11: {dids:?}"
    );
    // JDK 25, Parallel: the new locker blocks the allocator before any safepoint (holding the
    // heap's lock), and the meter with it. The locker's flag, read from the JVM's memory at each
    // look, names the cause; the one thread on a CPU through the hold is the culprit, its code
    // the native method it was in.
    let rec = recorded(25, java25());
    let who = std::fs::read_to_string(rec.join("who.jsonl")).unwrap();
    assert!(who.contains(r#""seen":"gc-locker""#), "JDK 25: the flag is read: {who}");
    let r = report(&rec);
    let longest = r.stalls.iter().max_by_key(|s| s.duration_ns).unwrap();
    assert!(longest.duration_ns >= 200_000_000, "JDK 25: {}", longest.duration_ns);
    let f = &longest.findings[0];
    assert_eq!((f.cause, f.confidence), (Cause::GcLocker, Confidence::High), "JDK 25: {f:?}");
    assert!(
        f.evidence.iter().any(|e| e.starts_with("the JVM's GC locker held a collection back")),
        "JDK 25: {:?}",
        f.evidence
    );
    let culprit = f.culprits.first().unwrap_or_else(|| panic!("JDK 25: no culprit: {f:?}"));
    assert_eq!(culprit.name, "deflater", "JDK 25: {f:?}");
    let code = culprit.code.as_ref().map(|c| format!("{c:?}")).unwrap_or_default();
    assert!(code.contains("java.util.zip.Deflater.deflateBytesBytes"), "JDK 25: {code}");
    // The allocator asked for the collection: spinning and napping, it is no culprit.
    assert!(f.culprits.iter().all(|c| c.name != "allocator"), "JDK 25: {f:?}");
}
