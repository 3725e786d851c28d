//! `stallscope inject throttle --riops N [--device DEV] -- CMD…`: run a command in a cgroup
//! whose reads from a real block device are throttled (cgroup v2 `io.max` or v1
//! `blkio.throttle.read_iops_device`), for realistic D-state page faults on ext4.
//!
//! Invariant: the cgroup is removed afterwards, on every exit path.

use super::cgroup::{TempCgroup, block_device};
use anyhow::{Context, Result};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::atomic::Ordering;

#[derive(clap::Args, Debug, Clone)]
pub struct ThrottleArgs {
    /// Read operations per second allowed from the device.
    #[arg(long)]
    pub riops: u64,
    /// The block device (`/dev/vda`, `254:0`); default: the disk holding the working directory.
    #[arg(long)]
    pub device: Option<String>,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(a: ThrottleArgs) -> Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow::anyhow!("throttle needs root to create a cgroup; run it with sudo"));
    }
    let (program, args) = a.command.split_first().context("no command given after --")?;
    let cwd = std::env::current_dir()?;
    let dev = block_device(a.device.as_deref(), &cwd)?;
    // A guardian removes the cgroup, and ends the command in it, if throttle is killed outright.
    let guard = std::sync::Arc::new(std::sync::Mutex::new(guard::Guard::start()?));
    let cg = TempCgroup::io_throttled(dev, a.riops)?.guarded(guard)?;
    eprintln!(
        "throttle: reads from {}:{} limited to {} IOPS in cgroup {} ({:?})",
        dev.0,
        dev.1,
        a.riops,
        cg.path.display(),
        cg.version
    );
    let procs = std::ffi::CString::new(cg.procs_file().as_os_str().as_encoded_bytes())?;
    let stop = super::stop_flag()?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    // SAFETY: between fork and exec only async-signal-safe calls, and no allocation.
    unsafe {
        cmd.pre_exec(move || recorder::join_cgroup(&procs));
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {program}"))?;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(Ordering::Relaxed) {
            // SAFETY: plain kill of our child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            break child.wait()?;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    drop(cg);
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
