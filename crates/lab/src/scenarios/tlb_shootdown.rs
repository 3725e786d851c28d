//! Seed 002 (tlb-shootdown, CIDR 2022): mapping and unmapping many small files floods every CPU
//! with TLB flushes; reading them with pread into pooled buffers does not.

use super::common::{args, ms, quiet_launch, run_jvm};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::Expect;
use anyhow::{Context, Result, bail};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct TlbShootdown;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Mmap,
    Pool,
}

/// The data files, made once for every run.
pub struct Setup {
    data: PathBuf,
}

impl Scenario for TlbShootdown {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "tlb-shootdown",
        seed: "002 (tlb-shootdown, CIDR 2022)",
        title: "mapping and unmapping many small files floods every CPU with TLB flushes",
        cause: Cause::TlbShootdown,
        published: || {
            Published::new(
                "50,000 files × 100 reads: mmap 834.9 ms, buffer pool 657.0 ms (21% faster); TLB shootdowns +321,785 vs +779",
                "12 cores, 64 GB (2025)",
                Some(834.9),
                Some(657.0),
            )
        },
        metric: "time to read every file",
        unit: "ms",
        needs_fuse: false,
        needs_root: false,
        why_not: "with two CPUs there are few others to interrupt, and KVM's paravirtual flush skips idle vCPUs",
        run_secs: (3, 10),
        side_metrics: &[("tlb_shootdowns", "TLB shootdowns")],
        who: None,
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::Mmap,
            VariantSpec {
                id: "mmap",
                label: "map, read, unmap each file",
                expect: Expect::IfStall(Cause::TlbShootdown),
                culprit: None,
            },
        ),
        (
            Variant::Pool,
            VariantSpec {
                id: "pool",
                label: "pread into pooled buffers (cleared before reuse)",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let data = dir.join("data");
        let files = files(ctx);
        let o = Command::new(&ctx.java)
            .arg("-jar")
            .arg(&ctx.workloads)
            .args([
                "tlb-readers",
                "create",
                "--dir",
                data.to_str().unwrap_or("."),
                "--files",
                files,
            ])
            .output()?;
        if !o.status.success() {
            bail!("creating the data files: {}", String::from_utf8_lossy(&o.stderr));
        }
        notes.push(format!("{files} one-page files, 2 reader threads (the seed used 12), 100 verified reads per file"));
        Ok(Setup { data })
    }

    fn run(s: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let mode = match v {
            Variant::Mmap => "mmap",
            Variant::Pool => "pool",
        };
        let workload = args(&[
            "tlb-readers",
            "read",
            "--dir",
            s.data.to_str().unwrap_or(""),
            "--files",
            files(ctx),
            "--threads",
            "2",
            "--reads",
            "100",
            "--mode",
            mode,
        ]);
        let (j, r) = run_jvm(ctx, rec, &[], &workload, quiet_launch())?;
        if j["failed"].as_u64() != Some(0) {
            bail!("reads failed verification: {j}");
        }
        let metrics = BTreeMap::from([
            ("metric".to_string(), ms(&j["elapsed_ns"]).context("elapsed")?),
            ("tlb_shootdowns".to_string(), j["tlb_shootdowns_total"].as_f64().unwrap_or(0.0)),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 50_000_000 })
    }
}

fn files(ctx: &Ctx) -> &'static str {
    ctx.profile.pick("5000", "50000")
}
