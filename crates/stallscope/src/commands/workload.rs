//! `stallscope workload …` (hidden): the lab's native workloads alone, each printing a table
//! and one JSON line.

use crate::cli::{FutexMmapArgs, WorkloadCommand};
use anyhow::{Result, bail};
use lab::workload::futex_mmap::{matrix, run_variant};
use recording::units::fmt_ns;
use std::time::Instant;

pub fn run(cmd: WorkloadCommand) -> Result<i32> {
    match cmd {
        WorkloadCommand::FutexMmap(a) => futex_mmap(a),
    }
}

fn futex_mmap(a: FutexMmapArgs) -> Result<i32> {
    let (period, duration) = (a.period.std(), a.duration.std());
    if period.is_zero() || period > duration {
        bail!("--period must be positive and shorter than --duration");
    }
    let region = a.region_mb.max(1) * 1024 * 1024;
    if a.heartbeat && a.matrix {
        bail!("--heartbeat watches one variant: drop --matrix");
    }
    let variants = if a.matrix { matrix(a.fifo) } else { vec![a.variant()] };
    let started = Instant::now();
    let mut outcomes = Vec::new();
    println!(
        "futex-mmap: a thread waits {} at a time on a condition variable; another churns {} MB mappings",
        fmt_ns(period.as_nanos() as u64),
        a.region_mb
    );
    println!(
        "  {:<64} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>11}",
        "variant", "wakeups", "p50", "p99", "p99.9", "max", "cycles", "mmap p50"
    );
    for v in variants {
        let o = run_variant(v, period, duration, region, a.heartbeat)?;
        println!(
            "  {:<64} {:>8} {:>9} {:>9} {:>9} {:>9} {:>7} {:>11}",
            o.name,
            o.wakeups,
            fmt_ns(o.p50_ns),
            fmt_ns(o.p99_ns),
            fmt_ns(o.p99_9_ns),
            fmt_ns(o.max_ns),
            o.churn_cycles,
            if o.churn_cycles > 0 { fmt_ns(o.mmap_p50_ns) } else { "-".into() }
        );
        for n in &o.notes {
            println!("    note: {n}");
        }
        outcomes.push(o);
    }
    println!(
        "{}",
        serde_json::json!({"workload": "futex-mmap", "period_ns": period.as_nanos() as u64, "duration_ns": duration.as_nanos() as u64, "region_mb": a.region_mb, "elapsed_ns": started.elapsed().as_nanos() as u64, "variants": outcomes})
    );
    Ok(0)
}
