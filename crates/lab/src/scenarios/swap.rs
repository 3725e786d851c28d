//! A heap pushed out to swap, paged back in by a full GC: the GC threads take thousands of major
//! faults each, in kernel mode, while the application is stopped. No seed covers it; measured
//! by hand first (docs/causes/swap-in.md). Baseline: a memory cgroup that may swap, squeezed
//! for a moment (as a neighbour's burst would) while the heap sits idle; mitigation: the same
//! cgroup and squeeze with swap off for it and the heap pre-touched.
//!
//! Needs root (a swap file, a memory cgroup). Only the JVM is in the cgroup, the JVM is killed
//! past a time limit, and the swap file and cgroups go on every exit path (a guardian undoes
//! them if stallscope is killed).

use super::common::{args, diagnose, json_line, ms, quiet_launch, wait_for_pid};
use crate::inject::swap::SwapFile;
use crate::inject::temp_cgroup::TempCgroup;
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::Expect;
use anyhow::{Context, Result, bail};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Swap;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Swappable,
    NoSwap,
}

pub struct Setup {
    _swap: SwapFile,
}

const MB: u64 = 1 << 20;

impl Scenario for Swap {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "swap",
        seed: "none (a cause the seeds did not cover)",
        title: "a full GC pages a swapped-out heap back in",
        cause: Cause::SwapIn,
        published: || {
            Published::new(
                "none; by hand on this machine: a 700 MB heap pushed to swap made a 22 ms full GC take 2.0-2.2 s",
                "2 vCPUs, Linux 6.18, JDK 17",
                None,
                None,
            )
        },
        metric: "longest stall",
        unit: "ms",
        needs_fuse: false,
        needs_root: true,
        why_not: "",
        run_secs: (12, 25),
        side_metrics: &[
            ("swapped_mb", "heap pushed to swap by the squeeze (MB)"),
            (
                "longest_gc_ms",
                "longest full GC the workload timed (ms), the metric until 2026-11-26",
            ),
        ],
        who: None,
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::Swappable,
            VariantSpec {
                id: "swappable",
                label: "memory cgroup that may swap, squeezed while the heap idles",
                expect: Expect::Cause(Cause::SwapIn),
                culprit: None,
            },
        ),
        (
            Variant::NoSwap,
            VariantSpec {
                id: "no-swap",
                label: "no swap for the JVM's cgroup, -XX:+AlwaysPreTouch",
                expect: Expect::IfStall(Cause::LongVmOperation),
                culprit: None,
            },
        ),
    ];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let size = ctx.profile.pick(1024, 2048) * MB;
        let swap = SwapFile::on(&dir.join("swapfile"), size, std::sync::Arc::clone(&ctx.guard))
            .context("the swap scenario's swap file")?;
        notes.push(format!(
            "a {} MB swap file on for the scenario only; the JVM alone in a memory cgroup",
            size / MB
        ));
        Ok(Setup { _swap: swap })
    }

    fn run(_: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let p = ctx.profile;
        let (live, heap, squeeze) =
            (p.pick(256u64, 640), p.pick(384u64, 896), p.pick(64u64, 96) * MB);
        let cg = TempCgroup::memory("swap", 4096 * MB, matches!(v, Variant::Swappable))?
            .guarded(std::sync::Arc::clone(&ctx.guard))?;
        let s = ctx.settings(rec)?;
        let (ready, go) = (s.dir.join("heap-ready"), s.dir.join("go"));
        let mut command: Vec<String> = vec![
            ctx.java.display().to_string(),
            "-XX:+UseParallelGC".into(),
            format!("-Xms{heap}m"),
            format!("-Xmx{heap}m"),
        ];
        if matches!(v, Variant::NoSwap) {
            command.push("-XX:+AlwaysPreTouch".into());
        }
        command.extend(["-jar".to_string(), ctx.workloads.display().to_string()]);
        command.extend(args(&[
            "heap-gc",
            "--live",
            &live.to_string(),
            "--gcs",
            "2",
            "--every",
            "300ms",
            "--ready",
            ready.to_str().unwrap_or(""),
            "--go",
            go.to_str().unwrap_or(""),
            "--wait",
            "60s",
        ]));
        let mut launch = quiet_launch();
        // A v2 group of its own as well: the JVM's own memory and I/O pressure (PSI).
        let own = TempCgroup::unified("swap")?.guarded(std::sync::Arc::clone(&ctx.guard))?;
        launch.cgroups = vec![cg.procs_file(), own.procs_file()];
        launch.timeout = Some(Duration::from_secs(p.pick(120, 300)));
        let stop = ctx.stop;
        let dir = s.dir.clone();
        let (recorded, swapped_kb) = std::thread::scope(|scope| -> Result<_> {
            let h = scope.spawn(|| recorder::record_jvm(&s, &command, &launch, stop));
            let pid = wait_for_pid(&dir)?;
            let t0 = Instant::now();
            while !ready.exists() {
                if t0.elapsed() > Duration::from_secs(60) || h.is_finished() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // The squeeze: the cgroup's limit far below the heap for a moment pushes the idle
            // heap out to swap (when the cgroup may swap; otherwise the kernel refuses it).
            let _ = cg.set_memory_limit(Some(squeeze));
            let swapped = procwatch::task::process_memory(pid).map_or(0, |m| m.swap_kb);
            cg.set_memory_limit(Some(4096 * MB))?;
            std::fs::write(&go, b"")?;
            let r = h.join().map_err(|_| anyhow::anyhow!("the recorder panicked"))??;
            Ok((r, swapped))
        })?;
        drop((cg, own));
        if !recorded.status.success() {
            bail!("the heap-gc workload failed ({}); see {}", recorded.status, dir.display());
        }
        let j = json_line(&recorded.stdout)?;
        let r = diagnose(&dir)?;
        // The stall, not the GC the workload timed: the squeeze does not push out the same part
        // of the heap every run, and the heap often comes back in outside the timed GC (at other
        // safepoints, in the threads' own faults). On 2026-11-26 every JDK 17 baseline run
        // stalled 2.1-4.1 s, all named swap-in, while its longest timed GC was 45.6 ms.
        let metrics = BTreeMap::from([
            ("metric".to_string(), r.summary.longest_stall_ns as f64 / 1e6),
            ("longest_gc_ms".to_string(), ms(&j["gcs"]["max_ns"]).context("gcs")?),
            ("swapped_mb".to_string(), swapped_kb as f64 / 1024.0),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 100_000_000 })
    }
}
