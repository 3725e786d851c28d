//! A swap file for the lab's swap scenario: made, formatted and turned on for the time of the
//! scenario, then turned off and removed, by its guardian too if stallscope is killed.
//!
//! Invariant: the undo is registered with the guardian before the swap file is turned on, and
//! `Drop` turns it off and removes it; nothing else ever turns swap on.

use anyhow::{Context, Result, bail};
use guard::{Guard, Token, Undo};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct SwapFile {
    pub path: PathBuf,
    guard: Arc<Mutex<Guard>>,
    token: Token,
}

impl SwapFile {
    /// Makes a swap file of `bytes` at `path` (a file system that supports swap files, such as
    /// ext4 or xfs) and turns it on. Needs root.
    pub fn on(path: &Path, bytes: u64, guard: Arc<Mutex<Guard>>) -> Result<SwapFile> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("turning on a swap file needs root");
        }
        let token = guard
            .lock()
            .map_err(|_| anyhow::anyhow!("the guardian lock is poisoned"))?
            .add(Undo::Swapoff { path: path.to_path_buf() })?;
        let s = SwapFile { path: path.to_path_buf(), guard, token };
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("{}: cannot create the swap file", path.display()))?;
        // Swap needs blocks that exist: fallocate, not a sparse file.
        // SAFETY: a valid descriptor we own.
        if unsafe {
            libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, bytes as libc::off_t)
        } != 0
        {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("{}: cannot allocate {} bytes", path.display(), bytes));
        }
        drop(f);
        let o = std::process::Command::new("mkswap")
            .arg("-q")
            .arg(path)
            .output()
            .context("running mkswap (util-linux)")?;
        if !o.status.success() {
            bail!("mkswap {}: {}", path.display(), String::from_utf8_lossy(&o.stderr).trim());
        }
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
        // SAFETY: a valid C string naming a formatted swap file.
        if unsafe { libc::swapon(c.as_ptr(), 0) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("swapon {}", path.display()));
        }
        Ok(s)
    }
}

impl Drop for SwapFile {
    fn drop(&mut self) {
        let _ = guard::undo(&Undo::Swapoff { path: self.path.clone() });
        if let Ok(mut g) = self.guard.lock() {
            g.forget(self.token);
        }
    }
}
