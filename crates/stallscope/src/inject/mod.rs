//! `stallscope inject …`: make each pathology happen on demand, and always undo it.
//!
//! Invariant: every injector restores what it changed (mounts, cgroups, stopped processes,
//! priorities) on success, on error, on Ctrl-C and on SIGTERM.

pub mod cgroup;
pub mod cpuhog;
pub mod freeze;
pub mod pagecache;
pub mod slowfs;
pub mod throttle;

use crate::cli::InjectCommand;
use anyhow::Result;

pub fn run(cmd: InjectCommand) -> Result<i32> {
    match cmd {
        InjectCommand::Slowfs(a) => slowfs::run(a),
        InjectCommand::SlowfsSet(a) => slowfs::set(a),
        InjectCommand::Evict(a) => pagecache::evict(a),
        InjectCommand::Resident(a) => pagecache::resident(a),
        InjectCommand::Throttle(a) => throttle::run(a),
        InjectCommand::CpuHog(a) => cpuhog::run(a),
        InjectCommand::Freeze(a) => freeze::run(a),
    }
}

/// Registers SIGINT, SIGTERM and SIGHUP to set the returned flag instead of killing us, so
/// the caller can undo what it did.
pub fn stop_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))?;
    }
    Ok(stop)
}
