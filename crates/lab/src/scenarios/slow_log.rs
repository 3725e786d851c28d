//! A GC log on a slow disk: the VM thread writes the log while the application is stopped, so
//! every full GC waits on the disk. No seed covers it; measured by hand first
//! (docs/causes/vm-thread-io.md). Baseline: `-Xlog:gc*` to a file on slowfs with a write delay;
//! mitigations: the same file with `-Xlog:async`, and the log on a local disk.

use super::common::{Helper, args, mount_slow_writes, ms, quiet_launch, run_jvm};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::Expect;
use anyhow::{Context, Result};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct SlowLog;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    SlowDisk,
    Async,
    LocalDisk,
}

/// The slow disk, mounted for all the runs.
pub struct Setup {
    _slowfs: Helper,
    mount: PathBuf,
}

impl Scenario for SlowLog {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "slow-log",
        seed: "none (a cause the seeds did not cover)",
        title: "the VM thread writes the GC log to a slow disk inside every pause",
        cause: Cause::VmThreadIo,
        published: || {
            Published::new(
                "none; by hand on this machine: a 300 ms write delay under -Xlog:gc* made each System.gc() pause 6.6-6.9 s",
                "2 vCPUs, Linux 6.18, JDK 17",
                None,
                None,
            )
        },
        metric: "longest full GC",
        unit: "ms",
        needs_fuse: true,
        needs_root: false,
        why_not: "",
        run_secs: (4, 12),
        side_metrics: &[],
        who: None,
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::SlowDisk,
            VariantSpec {
                id: "slow-disk",
                label: "-Xlog:gc*:file= on a slow disk (slowfs, write delay)",
                expect: Expect::Cause(Cause::VmThreadIo),
                culprit: Some("VM Thread"),
            },
        ),
        (
            Variant::Async,
            VariantSpec {
                id: "async",
                label: "the same file with -Xlog:async",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
        (
            Variant::LocalDisk,
            VariantSpec {
                id: "local-disk",
                label: "the log on a local disk",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let (back, mnt) = (dir.join("slowfs-backing"), dir.join("slowfs-mount"));
        let delay_ms = ctx.profile.pick(50, 300);
        let slowfs = mount_slow_writes(&back, &mnt, delay_ms, "*.log")?;
        notes.push(format!("slow disk: slowfs with a {delay_ms} ms delay on every write of *.log"));
        Ok(Setup { _slowfs: slowfs, mount: mnt })
    }

    fn run(s: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        std::fs::create_dir_all(rec)?;
        let (log, async_log) = match v {
            Variant::SlowDisk => (s.mount.join(format!("gc-{}.log", std::process::id())), false),
            Variant::Async => (s.mount.join(format!("gc-{}.log", std::process::id())), true),
            Variant::LocalDisk => (std::fs::canonicalize(rec)?.join("gc.log"), false),
        };
        let _ = std::fs::remove_file(&log);
        let mut jvm = vec!["-XX:+UseParallelGC".to_string()];
        if async_log {
            jvm.push("-Xlog:async".into());
        }
        jvm.push(format!("-Xlog:gc*:file={}", log.display()));
        let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
        let workload = args(&[
            "heap-gc",
            "--live",
            "32",
            "--gcs",
            ctx.profile.pick("2", "4"),
            "--every",
            "200ms",
        ]);
        let (j, r) = run_jvm(ctx, rec, &jvm, &workload, quiet_launch())?;
        let metrics =
            BTreeMap::from([("metric".to_string(), ms(&j["gcs"]["max_ns"]).context("gcs")?)]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 100_000_000 })
    }
}
