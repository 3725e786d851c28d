//! The JVM workloads of the lab in their quick profiles, on real JVMs (JDK 17 and Temurin 25):
//! each shows its seed's effect, baseline against mitigation, by a margin of at least 5×.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

#[test]
fn every_workload_explains_itself() {
    // Five JVM starts would disturb the measuring tests beside it.
    let _x = exclusive();
    for w in ["counted-loop", "mapped-read", "tlb-readers", "safepoint-storm", "gc-locker"] {
        let o = Command::new(java17())
            .args(["-jar", workloads_jar().to_str().unwrap(), w, "--help"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{w}: {}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stdout).contains("usage:"), "{w}");
    }
    let o = Command::new(java17())
        .args(["-jar", workloads_jar().to_str().unwrap(), "counted-loop", "--rounds", "many"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--rounds many is not a whole number"));
    let o = Command::new(java17())
        .args(["-jar", workloads_jar().to_str().unwrap(), "mapped-read", "--file", "/x"])
        .args(["--map", "rw"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--map rw: use read-only or read-write"));
}

#[test]
fn counted_loop_stalls_without_strip_mining_on_every_lts_jdk() {
    let _x = exclusive();
    for jdk in Jdk::LTS {
        // C2 on JDK 21 and later vectorises the seed's sum, so a call of 300 rounds holds a
        // safepoint for tens of ms there (37 ms once on a fresh machine) against 1.6-1.9 s on 11
        // and 17. 1,000 rounds held 105-1,096 ms on 21 and 25 (2026-11-25, two runs each).
        let (rounds, at_least_ns) =
            if jdk.feature() >= 21 { ("1000", 20_000_000) } else { ("300", 50_000_000) };
        // A thread dump is a cheap safepoint: what the jitter thread feels is the time to reach
        // it.
        let args =
            ["counted-loop", "--duration", "4s", "--rounds", rounds, "--trigger", "threaddump"];
        let java = jdk.java();
        let stalled =
            run_workload(&java, &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"], &args);
        // The mitigated side twice, the quieter as the baseline: one scheduling hiccup of a
        // shared machine in it says nothing about strip mining.
        let mitigated = run_workload(&java, &[], &args);
        let again = run_workload(&java, &[], &args);
        let max_of = |v: &serde_json::Value| v["jitter"]["max_ns"].as_u64().unwrap();
        let (a, b) = (max_of(&stalled), max_of(&mitigated).min(max_of(&again)));
        assert!(
            a >= 5 * b,
            "{jdk:?}: jitter max {a} ns without a poll vs {b} ns with strip mining"
        );
        assert!(
            a >= at_least_ns,
            "{jdk:?}: a counted loop should hold the jitter thread for tens of ms at least: {a} ns"
        );
        assert!(mitigated["gc"].as_str().unwrap().contains("G1"), "{mitigated}");
    }
}

#[test]
fn mapped_read_holds_the_safepoint_while_pread_does_not() {
    let _x = exclusive();
    let d = scratch("mapped-read");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_random(&back.join("test.dat"), 16 << 20);
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "300ms"]);
    let file = mnt.join("test.dat");
    let mut ttsp = Vec::new();
    for mode in ["mmap", "pread"] {
        evict(&file);
        let log = d.join(format!("{mode}.log"));
        let v = run_workload(
            &java17(),
            &[&format!("-Xlog:safepoint:file={}", log.display())],
            &[
                "mapped-read",
                "--file",
                file.to_str().unwrap(),
                "--mode",
                mode,
                "--reads",
                "2",
                "--stride",
                "4m",
                "--chunk",
                "512k",
            ],
        );
        assert!(
            v["reads"]["max_ns"].as_u64().unwrap() >= 300_000_000,
            "{mode}: the reads themselves were slow: {v}"
        );
        ttsp.push(max_reaching_ns(&log));
    }
    assert!(ttsp[0] >= 300_000_000, "mmap: the JVM's log shows TTSP >= the delay: {} ns", ttsp[0]);
    assert!(ttsp[0] >= 5 * ttsp[1].max(1), "mmap {} ns vs pread {} ns", ttsp[0], ttsp[1]);
}

#[test]
fn tlb_readers_mmap_shoots_down_tlbs_the_pool_does_not() {
    let _x = exclusive();
    let d = scratch("tlb");
    let dir = d.join("data");
    let jar = workloads_jar();
    let o = Command::new(java17())
        .args([
            "-jar",
            jar.to_str().unwrap(),
            "tlb-readers",
            "create",
            "--dir",
            dir.to_str().unwrap(),
            "--files",
            "20000",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |mode: &str| {
        run_workload(
            &java17(),
            &[],
            &[
                "tlb-readers",
                "read",
                "--dir",
                dir.to_str().unwrap(),
                "--files",
                "20000",
                "--threads",
                "2",
                "--reads",
                "100",
                "--mode",
                mode,
            ],
        )
    };
    let (mut mmap, mut pool) = (0, u64::MAX);
    for _ in 0..2 {
        let m = read("mmap");
        let p = read("pool");
        for v in [&m, &p] {
            assert_eq!(v["verified"], 2_000_000, "every read is real and verified: {v}");
            assert_eq!(v["failed"], 0);
        }
        mmap = mmap.max(m["tlb_shootdowns_total"].as_u64().unwrap());
        pool = pool.min(p["tlb_shootdowns_total"].as_u64().unwrap());
    }
    assert!(mmap >= 5 * pool.max(20), "TLB shootdowns: mmap {mmap} vs pool {pool}");
}

#[test]
fn safepoint_storm_reaches_safepoints_slowly_beside_cpu_hogs() {
    let _x = exclusive();
    let d = scratch("storm");
    // TTSP p50 and p90 (seed 003 quoted p90: 140 µs alone, 40 ms with busy neighbours). One
    // busy thread: with two on this two-CPU machine, the VM thread and main already take a CPU
    // from one of them, and "alone" measured the JVM's own contention (p90 2.3 ms on one day of
    // slow wake-ups, against 7-9 ms beside the hogs); with one, alone is 0.2-0.3 ms.
    let ttsp = |hog: bool| {
        let log = d.join(format!("storm-{hog}.log"));
        let mut h = hog.then(|| {
            stallscope()
                .args(["inject", "cpu-hog", "--threads", "4", "--for", "9s"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        });
        if let Some(h) = h.as_mut() {
            // The hogs must be burning CPU before the JVM starts.
            std::thread::sleep(Duration::from_millis(300));
            assert!(h.try_wait().unwrap().is_none(), "cpu-hog ended early");
        }
        let v = run_workload(
            &java17(),
            &[&format!("-Xlog:safepoint:file={}", log.display())],
            &[
                "safepoint-storm",
                "--threads",
                "1",
                "--duration",
                "4s",
                "--every",
                "10ms",
                "--log",
                log.to_str().unwrap(),
            ],
        );
        if let Some(h) = h.as_mut() {
            let _ = h.kill();
            let _ = h.wait();
        }
        assert!(v["ttsp"]["count"].as_u64().unwrap() > 100, "{v}");
        (v["ttsp"]["p50_ns"].as_u64().unwrap(), v["ttsp"]["p90_ns"].as_u64().unwrap())
    };
    // Alone on both sides of the contended run, the better of the two as the baseline: a single
    // alone run caught a slow moment of a shared machine once in CI (p90 2.37 ms where it is
    // usually a few hundred µs), which says nothing about what CPU hogs do.
    let before = ttsp(false);
    std::thread::sleep(Duration::from_millis(200));
    let contended = ttsp(true);
    std::thread::sleep(Duration::from_millis(200));
    let after = ttsp(false);
    let alone = if before.1 <= after.1 { before } else { after };
    eprintln!("TTSP p50/p90: alone {before:?} and {after:?} ns, beside cpu-hogs {contended:?} ns");
    // The tail is what starvation makes and what the seed measured, but either the p90 or the
    // median must move 5x: the median moved only 3.8x in one CI run of many (usually 20-40x),
    // and in a rehearsal on 2026-12-03 the p90 moved 4.5x (6.49 ms against 1.43 ms) on a slow
    // moment of the machine, whose alone p90s (1.43 and 2.11 ms) were 5-7x their usual while the
    // median moved 10.8x. Hogs that did nothing would move neither.
    assert!(
        contended.1 >= 5 * alone.1 || contended.0 >= 5 * alone.0,
        "TTSP p90 {} ns beside cpu-hogs vs {} ns alone (p50 {} vs {}; the alone runs' p90s {} and {} ns)",
        contended.1,
        alone.1,
        contended.0,
        alone.0,
        before.1,
        after.1
    );
}
