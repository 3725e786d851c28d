//! `stallscope workload …` (hidden): the native pathology workloads the lab runs. The JVM ones
//! are in `java/workloads`.

pub mod futex_mmap;

use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum WorkloadCommand {
    /// Seed 001: timed condition-variable waits beside a thread that maps and unmaps large
    /// regions; private vs shared futexes, mlockall, churn vs a reused mapping.
    FutexMmap(futex_mmap::FutexMmapArgs),
}

pub fn run(cmd: WorkloadCommand) -> Result<i32> {
    match cmd {
        WorkloadCommand::FutexMmap(a) => futex_mmap::run(a),
    }
}
