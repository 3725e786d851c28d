//! A store to a file the application maps shared, waiting for that page's writeback (issue 28):
//! a writer updates a counter per page of a `READ_WRITE` MappedByteBuffer while a flusher thread
//! calls `force()`, and the main thread asks for safepoints. No seed covers it; the perf
//! counters' form of it is `perf-writeback`. Baseline: the file on a slow disk whose writes
//! take the injected delay; mitigations: the same updates with `FileChannel.write` (a native
//! call, where a safepoint does not wait), and the file on tmpfs (never written back to a disk).

use super::common::{Helper, args, mount_slow_writes, ms, quiet_launch, run_jvm};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, ExpectWho};
use anyhow::{Context, Result};
use doctor::{Cause, InstigatorKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct MappedWrite;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Mmap,
    Channel,
    Tmpfs,
}

/// The slow disk, mounted for all the runs, and the state file's place on it.
pub struct Setup {
    _slowfs: Helper,
    file: PathBuf,
    delay_ms: u64,
}

impl Scenario for MappedWrite {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "mapped-write",
        seed: "none (issue 28: the application's own READ_WRITE mapping)",
        title: "a store to a file mapped shared waits for the page's writeback",
        cause: Cause::MappedWriteback,
        published: || {
            Published::new(
                "none; by hand on this machine: 300 ms writes, force() every 150 ms: stores held 250-300 ms, TTSP 290-297 ms",
                "2 vCPUs, Linux 6.18, JDK 17",
                None,
                None,
            )
        },
        metric: "longest safepoint request",
        unit: "ms",
        needs_fuse: true,
        needs_root: false,
        why_not: "",
        run_secs: (4, 9),
        side_metrics: &[
            ("update_max_ms", "the writer's slowest update (ms)"),
            ("ttsp_max_ms", "TTSP max in the JVM log (ms)"),
        ],
        who: Some(ExpectWho {
            kind: InstigatorKind::Writer,
            name: "journal-flusher",
            needs_tracepoints: false,
        }),
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::Mmap,
            VariantSpec {
                id: "mmap",
                label: "stores through a READ_WRITE MappedByteBuffer on the slow disk",
                expect: Expect::Cause(Cause::MappedWriteback),
                culprit: Some("journal-writer"),
            },
        ),
        (
            Variant::Channel,
            VariantSpec {
                id: "channel",
                label: "the same updates with FileChannel.write (native, safepoint-safe)",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
        (
            Variant::Tmpfs,
            VariantSpec {
                id: "tmpfs",
                label: "the same stores, the file on tmpfs (/dev/shm)",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let (back, mnt) = (dir.join("slowfs-backing"), dir.join("slowfs-mount"));
        let delay_ms = ctx.profile.pick(300, 500);
        let slowfs = mount_slow_writes(&back, &mnt, delay_ms, "**")?;
        notes.push(format!(
            "slow disk: slowfs with a {delay_ms} ms delay on every write; the workload's flusher calls force() every 150 ms"
        ));
        Ok(Setup { _slowfs: slowfs, file: mnt.join("state.dat"), delay_ms })
    }

    fn run(s: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let p = ctx.profile;
        let shm =
            PathBuf::from(format!("/dev/shm/stallscope-lab-state-{}.dat", std::process::id()));
        let (file, mode) = match v {
            Variant::Mmap => (s.file.clone(), "mmap"),
            Variant::Channel => (s.file.clone(), "channel"),
            Variant::Tmpfs => (shm.clone(), "mmap"),
        };
        let workload = args(&[
            "mapped-write",
            "--file",
            file.to_str().unwrap_or(""),
            "--mode",
            mode,
            "--duration",
            p.pick("3s", "8s"),
        ]);
        let ran = run_jvm(ctx, rec, &[], &workload, quiet_launch());
        let _ = std::fs::remove_file(&shm);
        let (j, r) = ran?;
        let metrics = BTreeMap::from([
            ("metric".to_string(), ms(&j["safepoints"]["max_ns"]).context("safepoints")?),
            ("update_max_ms".to_string(), ms(&j["writes"]["max_ns"]).context("writes")?),
            ("ttsp_max_ms".to_string(), r.summary.ttsp_max_ns.unwrap_or(0) as f64 / 1e6),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: s.delay_ms * 1_000_000 / 3 })
    }
}
