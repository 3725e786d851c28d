//! Seed 000 (LongTTSP): a MappedByteBuffer read on a slow disk holds the safepoint, because a
//! page fault cannot be interrupted to reach it. The slow disk is slowfs, built into stallscope.

use super::common::{
    Helper, WritebackBeside, args, me, mount_slowfs, ms, quiet_launch, run_jvm, write_file,
};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, ExpectWho};
use anyhow::{Context, Result, bail};
use doctor::{Cause, InstigatorKind};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct MmapFault;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Mmap,
    /// The file mapped READ_WRITE and only read, with pages under writeback beside: a broker's
    /// index files. Each fault is still a read (issue 56: read as a write fault under writeback).
    MmapReadWrite,
    Pread,
    Prefault,
}

impl Variant {
    /// The workload's `--mode`.
    fn mode(self) -> &'static str {
        match self {
            Variant::Mmap | Variant::MmapReadWrite => "mmap",
            Variant::Pread => "pread",
            Variant::Prefault => "prefault",
        }
    }

    /// The workload's `--map`.
    fn map(self) -> &'static str {
        match self {
            Variant::MmapReadWrite => "read-write",
            _ => "read-only",
        }
    }
}

/// The slow disk, mounted for all the runs, and the file on it.
pub struct Setup {
    _slowfs: Helper,
    file: PathBuf,
    delay_ms: u64,
    /// Where the writes beside a READ_WRITE run go (the local disk, not the slow one).
    beside: PathBuf,
}

impl Scenario for MmapFault {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "mmap-fault",
        seed: "000 (LongTTSP)",
        title: "a MappedByteBuffer read on a slow disk holds the safepoint",
        cause: Cause::MajorFault,
        published: || {
            Published::new(
                "a 5 s injected read delay gave 4.04 s stopped, 4.039 s of it reaching the safepoint",
                "xfs on a ddi-delayed disk, JDK 11 (2022)",
                Some(4040.0),
                None,
            )
        },
        metric: "longest safepoint request",
        unit: "ms",
        needs_fuse: true,
        needs_root: false,
        why_not: "",
        run_secs: (3, 8),
        side_metrics: &[
            ("stopped_over_delay", "longest stop ÷ injected delay"),
            ("ttsp_max_ms", "TTSP max in the JVM log (ms)"),
        ],
        who: Some(ExpectWho {
            kind: InstigatorKind::JavaThread,
            name: "main",
            needs_tracepoints: false,
        }),
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::Mmap,
            VariantSpec {
                id: "mmap",
                label: "MappedByteBuffer.get (the seed)",
                expect: Expect::Cause(Cause::MajorFault),
                culprit: Some("reader-thread"),
            },
        ),
        (
            Variant::MmapReadWrite,
            VariantSpec {
                id: "mmap-rw",
                label: "the same mapped READ_WRITE and only read, writeback beside (a broker's index)",
                expect: Expect::Cause(Cause::MajorFault),
                culprit: Some("reader-thread"),
            },
        ),
        (
            Variant::Pread,
            VariantSpec {
                id: "pread",
                label: "FileChannel.read (native, safepoint-safe)",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
        (
            Variant::Prefault,
            VariantSpec {
                id: "prefault",
                label: "page cache warmed off the critical path",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let (back, mnt) = (dir.join("slowfs-backing"), dir.join("slowfs-mount"));
        std::fs::create_dir_all(&back)?;
        write_file(&back.join("test.dat"), 32 << 20)?;
        let delay_ms = ctx.profile.pick(300, 1000);
        let slowfs = mount_slowfs(
            &back,
            &mnt,
            &["--read-delay", &format!("{delay_ms}ms"), "--max-delay", "10s"],
        )?;
        notes.push(format!(
            "slow disk: slowfs with a {delay_ms} ms read delay (the seed injected 5 s with ddi)"
        ));
        Ok(Setup {
            _slowfs: slowfs,
            file: mnt.join("test.dat"),
            delay_ms,
            beside: dir.join("writeback-beside.dat"),
        })
    }

    fn run(s: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let o = Command::new(me()?).args(["inject", "evict"]).arg(&s.file).output()?;
        if !o.status.success() {
            bail!("evicting {}: {}", s.file.display(), String::from_utf8_lossy(&o.stderr));
        }
        let p = ctx.profile;
        let file = s.file.to_str().unwrap_or("");
        let workload = args(&[
            "mapped-read",
            "--file",
            file,
            "--mode",
            v.mode(),
            "--map",
            v.map(),
            "--reads",
            p.pick("2", "3"),
            "--stride",
            "4m",
            "--every",
            "50ms",
        ]);
        // 64 MB rewritten and synced without pause: pages under writeback all through the run.
        let _beside = match v {
            Variant::MmapReadWrite => Some(WritebackBeside::start(&s.beside, 64 << 20)?),
            _ => None,
        };
        let (j, r) = run_jvm(ctx, rec, &[], &workload, quiet_launch())?;
        let longest = ms(&j["safepoints"]["max_ns"]).context("safepoints")?;
        let metrics = BTreeMap::from([
            ("metric".to_string(), longest),
            ("stopped_over_delay".to_string(), longest / s.delay_ms as f64),
            ("ttsp_max_ms".to_string(), r.summary.ttsp_max_ns.unwrap_or(0) as f64 / 1e6),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: s.delay_ms * 1_000_000 / 3 })
    }
}
