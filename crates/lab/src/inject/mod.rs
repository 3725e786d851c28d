//! `stallscope inject …`: make each pathology happen on demand, and always undo it.
//!
//! Each injector's options live in its file.
//!
//! Invariant: every injector restores what it changed (mounts, cgroups, stopped processes,
//! priorities) on success, on error, on Ctrl-C and on SIGTERM.

pub mod cgroup;
pub mod cpuhog;
pub mod freeze;
pub mod pagecache;
pub mod slowfs;
pub mod swap;
pub mod throttle;

use anyhow::Result;

#[derive(clap::Subcommand, Debug)]
pub enum InjectCommand {
    /// Mount a FUSE passthrough of BACKING at MOUNT whose reads (and mmap page-ins) are slow.
    Slowfs(slowfs::SlowfsArgs),
    /// Change a mounted slowfs's settings without remounting; prints the settings.
    SlowfsSet(slowfs::SlowfsSetArgs),
    /// Drop files from the page cache (posix_fadvise DONTNEED, like vmtouch -e).
    Evict(pagecache::EvictArgs),
    /// Report how much of each file is in the page cache (mincore).
    Resident(pagecache::ResidentArgs),
    /// Run a command in a cgroup whose reads from a block device are throttled (root).
    Throttle(throttle::ThrottleArgs),
    /// Generate competing CPU load.
    CpuHog(cpuhog::CpuHogArgs),
    /// Stop a process with SIGSTOP, then continue it with SIGCONT, guaranteed.
    Freeze(freeze::FreezeArgs),
}

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
    for sig in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))?;
    }
    Ok(stop)
}
