//! Seed 001 (Java RTS futexes): a thread mapping 100 MB delays another thread's futex wake-ups
//! through mmap_lock. The workload is stallscope's own native `workload futex-mmap`.

use super::common::{diagnose, json_line, me, ms, quiet_launch};
use crate::lab::model::Published;
use crate::lab::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::lab::verdict::Expect;
use crate::record;
use anyhow::{Context, Result, bail};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::Path;

pub struct MmapLock;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    SharedMlock,
    Private,
    Reuse,
}

impl Scenario for MmapLock {
    type Variant = Variant;
    type Setup = ();
    const SPEC: Spec = Spec {
        id: "mmap-lock",
        seed: "001 (Java RTS futexes)",
        title: "a thread mapping 100 MB delays another thread's futex wake-ups",
        cause: Cause::MmapLock,
        published: || {
            Published::new(
                "up to 1 s of latency in a real-time thread while another thread mapped 100 MB",
                "Java RTS on an RT Linux kernel (2008)",
                Some(1000.0),
                None,
            )
        },
        metric: "waiter's worst lateness",
        unit: "ms",
        needs_fuse: false,
        needs_root: false,
        why_not: "since Linux 6.4 page faults take per-VMA locks, and private futexes never took mmap_lock: the waiter no longer waits on the mapping thread",
        run_secs: (3, 11),
        side_metrics: &[
            ("mmap_hold_p50_ms", "mmap held mmap_lock (p50, ms)"),
            ("p99_9_ms", "waiter p99.9 (ms)"),
        ],
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::SharedMlock,
            VariantSpec {
                id: "shared-mlock",
                label: "process-shared futex, mlockall, mmap churn",
                expect: Expect::IfStall(Cause::MmapLock),
                culprit: None,
            },
        ),
        (
            Variant::Private,
            VariantSpec {
                id: "private",
                label: "private futex (glibc's default), no mlock",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
        (
            Variant::Reuse,
            VariantSpec {
                id: "reuse",
                label: "shared futex, mlockall, one reused mapping",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(_: &Ctx, _: &Path, _: &mut Vec<String>) -> Result<()> {
        Ok(())
    }

    fn run(_: &mut (), v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let (futex, mlock, churn) = match v {
            Variant::SharedMlock => ("shared", true, "churn"),
            Variant::Private => ("private", false, "churn"),
            Variant::Reuse => ("shared", true, "reuse"),
        };
        let mut command = vec![
            me()?.display().to_string(),
            "workload".into(),
            "futex-mmap".into(),
            "--heartbeat".into(),
            "--futex".into(),
            futex.into(),
            "--churn".into(),
            churn.into(),
        ];
        command.extend(["--duration".to_string(), ctx.profile.pick("1500ms", "10s").to_string()]);
        if mlock {
            command.push("--mlock".into());
        }
        let s = ctx.settings(rec)?;
        let r = record::record_native(&s, &command, &quiet_launch(), ctx.stop)?;
        if !r.status.success() {
            bail!("futex-mmap failed ({})", r.status);
        }
        let j = json_line(&r.stdout)?;
        let v = &j["variants"][0];
        let metrics = BTreeMap::from([
            ("metric".to_string(), ms(&v["max_ns"]).context("max")?),
            ("p99_9_ms".to_string(), ms(&v["p99_9_ns"]).unwrap_or(0.0)),
            ("mmap_hold_p50_ms".to_string(), ms(&v["mmap_p50_ns"]).unwrap_or(0.0)),
        ]);
        Ok(Measured { metrics, report: Some(diagnose(&s.dir)?), min_stall_ns: 20_000_000 })
    }
}
