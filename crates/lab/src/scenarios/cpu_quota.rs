//! A CPU quota below the JVM's demand: its threads are throttled for the rest of each period,
//! so the ones a safepoint waits for cannot run to reach it. No seed covers it (seed 003's
//! contention is the cousin without a quota). Baseline: the JVM alone in a cgroup with a quota
//! of 0.6 CPU; mitigation: a quota of two CPUs, above its demand.
//!
//! Needs root (a CPU cgroup). Only the JVM is in the cgroup, which goes on every exit path.

use super::common::{args, ms, quiet_launch, run_jvm};
use crate::inject::temp_cgroup::TempCgroup;
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, machine_paused};
use anyhow::{Context, Result};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

pub struct CpuQuota;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Quota,
    Enough,
}

impl Scenario for CpuQuota {
    type Variant = Variant;
    type Setup = ();
    const SPEC: Spec = Spec {
        id: "cpu-quota",
        seed: "none (a cause the seeds did not cover)",
        title: "a CPU quota below the JVM's demand throttles the threads a safepoint waits for",
        cause: Cause::CgroupThrottling,
        published: || {
            Published::new(
                "none; by hand on this machine: a 0.6-CPU quota gave stalls of up to 80 ms, called cgroup CPU throttling",
                "2 vCPUs, Linux 6.18, JDK 17",
                None,
                None,
            )
        },
        metric: "longest stall (not a whole-machine pause)",
        unit: "ms",
        needs_fuse: false,
        needs_root: true,
        why_not: "",
        run_secs: (5, 17),
        side_metrics: &[
            ("ttsp_p90_ms", "TTSP p90 (ms)"),
            ("ttsp_max_ms", "TTSP max (ms)"),
            ("machine_pauses", "stalls left out: the whole machine paused"),
        ],
        who: None,
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::Quota,
            VariantSpec {
                id: "quota",
                label: "cpu quota 60 ms per 100 ms (0.6 CPU), 2 busy threads",
                expect: Expect::Cause(Cause::CgroupThrottling),
                culprit: None,
            },
        ),
        (
            Variant::Enough,
            VariantSpec {
                id: "enough",
                label: "cpu quota of 2 CPUs",
                expect: Expect::Without(Cause::CgroupThrottling),
                culprit: None,
            },
        ),
    ];

    fn setup(_: &Ctx, _: &Path, notes: &mut Vec<String>) -> Result<()> {
        notes.push("the JVM alone in a CPU cgroup; safepoint-storm with 2 busy threads, a safepoint every 10 ms".into());
        Ok(())
    }

    fn run(_: &mut (), v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let quota = match v {
            Variant::Quota => 60_000,
            Variant::Enough => 200_000,
        };
        let cg =
            TempCgroup::cpu("quota", quota, 100_000)?.guarded(std::sync::Arc::clone(&ctx.guard))?;
        let secs = ctx.profile.pick(3, 15);
        std::fs::create_dir_all(rec)?;
        let log = std::fs::canonicalize(rec)?.join("safepoint.log");
        let workload = args(&[
            "safepoint-storm",
            "--threads",
            "2",
            "--duration",
            &format!("{secs}s"),
            "--every",
            "10ms",
            "--log",
            log.to_str().unwrap_or(""),
        ]);
        let mut launch = quiet_launch();
        launch.cgroups = vec![cg.procs_file()];
        launch.timeout = Some(Duration::from_secs(secs + 60));
        let (j, r) = run_jvm(ctx, rec, &[], &workload, launch)?;
        drop(cg);
        // A stall in which stallscope's own control meter, outside the cgroup, was held as long
        // is the whole machine's, not the quota's (CI on 2026-11-28: one mitigated run's only
        // stall, 104 ms, the control meter 94.5 ms late with it): left out, and counted.
        let longest = r.stalls.iter().filter(|s| !machine_paused(s)).map(|s| s.duration_ns).max();
        let metrics = BTreeMap::from([
            ("metric".to_string(), longest.unwrap_or(0) as f64 / 1e6),
            (
                "machine_pauses".to_string(),
                r.stalls.iter().filter(|s| machine_paused(s)).count() as f64,
            ),
            ("ttsp_p90_ms".to_string(), ms(&j["ttsp"]["p90_ns"]).context("ttsp")?),
            ("ttsp_max_ms".to_string(), ms(&j["ttsp"]["max_ns"]).unwrap_or(0.0)),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 20_000_000 })
    }
}
