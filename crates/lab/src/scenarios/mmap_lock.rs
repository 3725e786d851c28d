//! Seed 001 (Java RTS futexes): a thread mapping 100 MB delays another thread's wake-ups through
//! mmap_lock. The workload is stallscope's own native `workload futex-mmap`. Since Linux 6.4 the
//! seed's own path (a futex wake-up, a page fault) no longer takes mmap_lock, so the baseline
//! is the path that still does: the waiter mprotects a page after each wake-up (mmap_lock for
//! write) while the other thread's mmap populates 100 MB under mlockall (mmap_lock held for
//! read throughout). The seed's path is kept as a variant, to show that it no longer waits.

use super::common::{diagnose, json_line, me, ms, quiet_launch};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, ExpectWho};
use anyhow::{Context, Result, bail};
use doctor::{Cause, InstigatorKind};
use std::collections::BTreeMap;
use std::path::Path;

pub struct MmapLock;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    MprotectChurn,
    Reuse,
    NoMlock,
    SeedFutex,
}

impl Scenario for MmapLock {
    type Variant = Variant;
    type Setup = ();
    const SPEC: Spec = Spec {
        id: "mmap-lock",
        seed: "001 (Java RTS futexes)",
        title: "a thread mapping 100 MB under mlockall delays another thread's mprotect after each wake-up",
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
        needs_root: true,
        why_not: "the waiter's mprotect did not wait for the mapping thread's populate",
        run_secs: (3, 11),
        side_metrics: &[
            ("mmap_hold_p50_ms", "mmap held mmap_lock (p50, ms)"),
            ("p99_9_ms", "waiter p99.9 (ms)"),
        ],
        who: Some(ExpectWho {
            kind: InstigatorKind::MemoryMapper,
            name: "mmap-churn",
            needs_tracepoints: true,
        }),
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::MprotectChurn,
            VariantSpec {
                id: "mprotect-churn",
                label: "mprotect after each wake-up, beside 100 MB mmap churn under mlockall",
                expect: Expect::IfStall(Cause::MmapLock),
                culprit: None,
            },
        ),
        (
            Variant::Reuse,
            VariantSpec {
                id: "reuse",
                label: "the same, the 100 MB mapped once before and reused",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
        (
            Variant::NoMlock,
            VariantSpec {
                id: "no-mlock",
                label: "the same churn without mlockall",
                // A mitigation of degree: the waits shrink to the churn's short write holds
                // (10-16 ms at worst here), and are still mmap_lock waits.
                expect: Expect::IfStall(Cause::MmapLock),
                culprit: None,
            },
        ),
        (
            Variant::SeedFutex,
            VariantSpec {
                id: "seed-futex",
                label: "the seed's own path: a process-shared futex, no mprotect, churn under mlockall",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(_: &Ctx, _: &Path, _: &mut Vec<String>) -> Result<()> {
        Ok(())
    }

    fn run(_: &mut (), v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let (futex, mlock, churn, path) = match v {
            Variant::MprotectChurn => ("private", true, "churn", "mprotect"),
            Variant::Reuse => ("private", true, "reuse", "mprotect"),
            Variant::NoMlock => ("private", false, "churn", "mprotect"),
            Variant::SeedFutex => ("shared", true, "churn", "wait"),
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
            "--path".into(),
            path.into(),
        ];
        command.extend(["--duration".to_string(), ctx.profile.pick("1500ms", "10s").to_string()]);
        if mlock {
            command.push("--mlock".into());
        }
        let s = ctx.settings(rec)?;
        let r = recorder::record_native(&s, &command, &quiet_launch(), ctx.stop)?;
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
