//! Seed 003 (SetPriorityClass): threads starved of a CPU reach the safepoint late. Baseline
//! beside `run --boost` at each safepoint's begin (the seed's priority boost, from outside: nice
//! -10, as the seed's HIGH_PRIORITY_CLASS, and `SCHED_FIFO`), a static nice value, and the lever
//! Linux offers the other way round: the hogs in a `cpu.idle` cgroup.

use super::common::{Helper, args, me, ms, quiet_launch, run_jvm};
use crate::inject::temp_cgroup::TempCgroup;
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, ExpectWho};
use anyhow::{Context, Result};
use doctor::{Cause, InstigatorKind};
use recorder::boost::{BoostLevel, BoostOn};
use recorder::safepoint_boost::POLL_NS;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

pub struct CpuContention;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    NoBoost,
    Boost,
    BoostFifo,
    StaticNice,
    HogsIdle,
}

impl Scenario for CpuContention {
    type Variant = Variant;
    type Setup = ();
    const SPEC: Spec = Spec {
        id: "cpu-contention",
        seed: "003 (SetPriorityClass)",
        title: "threads starved of a CPU reach the safepoint late",
        cause: Cause::CpuStarvation,
        published: || {
            Published::new(
                "TTSP p50 125 → 100 µs and p90 40 ms → 140 µs when boosted, with two or more busy JVMs",
                "Windows, G1, several JVMs on one host (2020)",
                Some(40.0),
                Some(0.14),
            )
        },
        metric: "TTSP p90",
        unit: "ms",
        needs_fuse: false,
        needs_root: true,
        why_not: "the run queue was not long enough to delay the threads",
        run_secs: (5, 17),
        side_metrics: &[
            ("ttsp_p50_ms", "TTSP p50 (ms)"),
            ("ttsp_max_ms", "TTSP max (ms)"),
            ("hiccup_max_ms", "the agent's worst hiccup (ms)"),
            ("boost_delay_p50_ms", "boost in place after the begin, p50 (ms)"),
            ("boost_delay_p90_ms", "boost in place after the begin, p90 (ms)"),
        ],
        who: Some(ExpectWho {
            kind: InstigatorKind::CpuNeighbours,
            name: "stallscope",
            needs_tracepoints: false,
        }),
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::NoBoost,
            VariantSpec {
                id: "no-boost",
                label: "beside 4 CPU-bound threads",
                expect: Expect::IfStall(Cause::CpuStarvation),
                culprit: None,
            },
        ),
        (
            Variant::Boost,
            VariantSpec {
                id: "boost",
                label: "stallscope run --boost (nice -10 from each safepoint's begin to its end)",
                expect: Expect::IfStall(Cause::CpuStarvation),
                culprit: None,
            },
        ),
        (
            Variant::BoostFifo,
            VariantSpec {
                id: "boost-fifo",
                label: "stallscope run --boost fifo:1 (SCHED_FIFO from each safepoint's begin to its end)",
                expect: Expect::IfStall(Cause::CpuStarvation),
                culprit: None,
            },
        ),
        (
            Variant::StaticNice,
            VariantSpec {
                id: "static-nice",
                label: "the JVM at nice -5 throughout",
                expect: Expect::IfStall(Cause::CpuStarvation),
                culprit: None,
            },
        ),
        (
            Variant::HogsIdle,
            VariantSpec {
                id: "hogs-idle",
                label: "the CPU hogs in a cgroup with cpu.idle=1",
                expect: Expect::IfStall(Cause::CpuStarvation),
                culprit: None,
            },
        ),
    ];

    fn setup(_: &Ctx, _: &Path, _: &mut Vec<String>) -> Result<()> {
        Ok(())
    }

    fn run(_: &mut (), v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let secs = ctx.profile.pick(3, 15);
        let hog = Command::new(me()?)
            .args(["inject", "cpu-hog", "--threads", "4", "--for", &format!("{}s", secs + 20)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let hog_pid = hog.id();
        let _hog = Helper(hog);
        let _idle = match v {
            Variant::HogsIdle => {
                let cg =
                    TempCgroup::cpu_idle("hogs")?.guarded(std::sync::Arc::clone(&ctx.guard))?;
                std::fs::write(cg.procs_file(), hog_pid.to_string())
                    .context("moving the CPU hogs into the cpu.idle cgroup")?;
                Some(cg)
            }
            _ => None,
        };
        std::thread::sleep(Duration::from_millis(300));
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
        match v {
            Variant::NoBoost | Variant::HogsIdle => {}
            Variant::Boost => {
                launch.boost =
                    Some((BoostLevel::Nice(-10), BoostOn::Safepoint { poll_ns: POLL_NS }))
            }
            Variant::BoostFifo => {
                launch.boost = Some((BoostLevel::Fifo(1), BoostOn::Safepoint { poll_ns: POLL_NS }))
            }
            Variant::StaticNice => launch.nice = Some(-5),
        }
        let (j, r) = run_jvm(ctx, rec, &[], &workload, launch)?;
        let mut metrics = BTreeMap::from([
            ("metric".to_string(), ms(&j["ttsp"]["p90_ns"]).context("ttsp")?),
            ("ttsp_p50_ms".to_string(), ms(&j["ttsp"]["p50_ns"]).unwrap_or(0.0)),
            ("ttsp_max_ms".to_string(), ms(&j["ttsp"]["max_ns"]).unwrap_or(0.0)),
        ]);
        if let Some(h) = &r.summary.hiccups {
            metrics.insert("hiccup_max_ms".into(), h.max_ns as f64 / 1e6);
        }
        if let Some(b) = &r.summary.boost {
            if let Some(why) = &b.failed {
                anyhow::bail!("the booster did not run: {why}");
            }
            metrics.insert("boost_delay_p50_ms".into(), b.delay_p50_ns as f64 / 1e6);
            metrics.insert("boost_delay_p90_ms".into(), b.delay_p90_ns as f64 / 1e6);
        }
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 5_000_000 })
    }
}
