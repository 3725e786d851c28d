//! `stallscope workload …` (hidden): the native pathology workloads the lab runs. The JVM ones
//! are in `java/workloads`.

pub mod futex_mmap;

use crate::cli::WorkloadCommand;
use anyhow::Result;

pub fn run(cmd: WorkloadCommand) -> Result<i32> {
    match cmd {
        WorkloadCommand::FutexMmap(a) => futex_mmap::run(a),
    }
}
