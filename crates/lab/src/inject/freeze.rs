//! Freeze a process (`stallscope inject freeze PID --for D`): SIGSTOP it, then SIGCONT it.
//!
//! Invariant: the process is continued on every exit path. A forked guardian waits on a pipe
//! and sends SIGCONT when the pipe closes, which happens even if this process is SIGKILLed.

use anyhow::{Context, Result};
use std::time::{Duration, Instant};

/// The process state letter from `/proc/<pid>/stat` (after the `comm` field).
pub fn process_state(pid: i32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Freezes `pid` for `dur` or until a stop signal arrives; returns how long it was stopped.
pub fn freeze(pid: i32, dur: Duration, stop: &std::sync::atomic::AtomicBool) -> Result<Duration> {
    if pid <= 1 || pid == std::process::id() as i32 {
        return Err(anyhow::anyhow!("refusing to freeze pid {pid}"));
    }
    // SAFETY: signal 0 only checks existence and permission.
    if unsafe { libc::kill(pid, 0) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(anyhow::anyhow!(
            "pid {pid}: cannot signal it ({e}); is it running, and yours?"
        ));
    }
    let mut fds = [0i32; 2];
    // SAFETY: an out-array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe for the freeze guardian");
    }
    let (r, w) = (fds[0], fds[1]);
    // SAFETY: the child only calls async-signal-safe functions (close, read, kill, _exit).
    let guardian = unsafe { libc::fork() };
    if guardian < 0 {
        return Err(std::io::Error::last_os_error()).context("forking the freeze guardian");
    }
    if guardian == 0 {
        unsafe {
            libc::close(w);
            let mut b = 0u8;
            loop {
                let n = libc::read(r, &mut b as *mut u8 as *mut libc::c_void, 1);
                if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                    break;
                }
            }
            libc::kill(pid, libc::SIGCONT);
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the read end.
    unsafe { libc::close(r) };
    // SAFETY: plain kill.
    let rc = unsafe { libc::kill(pid, libc::SIGSTOP) };
    let t0 = Instant::now();
    let result = if rc != 0 {
        Err(std::io::Error::last_os_error()).with_context(|| format!("SIGSTOP to pid {pid}"))
    } else {
        while t0.elapsed() < dur && !stop.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep((dur.saturating_sub(t0.elapsed())).min(Duration::from_millis(5)));
        }
        // SAFETY: plain kill.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        Ok(t0.elapsed())
    };
    // Closing the pipe releases the guardian (which sends a harmless second SIGCONT).
    // SAFETY: our write end, and the guardian we forked.
    unsafe {
        libc::close(w);
        libc::waitpid(guardian, std::ptr::null_mut(), 0);
    }
    result
}
