//! What the scenarios share: running a JVM workload under the recorder, reading its JSON line,
//! and helpers that clean up after themselves.

use crate::scenario::Ctx;
use anyhow::{Context, Result, bail};
use doctor::Report;
use recorder::{self, Launch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// Kills a helper process (an injector) when dropped: SIGTERM, then SIGKILL after 5 s.
pub struct Helper(pub Child);

impl Drop for Helper {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// stallscope's own executable, for injectors and native workloads run as child processes.
pub fn me() -> Result<PathBuf> {
    Ok(procwatch::process::own_exe()?)
}

/// Mounts slowfs over `back` at `mnt` (`inject slowfs`, a helper process of this executable,
/// with `args`) and waits for the mount; unmounted when the helper is dropped.
pub fn mount_slowfs(back: &Path, mnt: &Path, args: &[&str]) -> Result<Helper> {
    crate::inject::slowfs::check_fuse()?;
    std::fs::create_dir_all(back)?;
    let child = std::process::Command::new(me()?)
        .args(["inject", "slowfs"])
        .arg(back)
        .arg(mnt)
        .args(args)
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let slowfs = Helper(child);
    let t0 = Instant::now();
    while !crate::inject::slowfs::is_mounted(mnt) {
        if t0.elapsed() > Duration::from_secs(10) {
            bail!("slowfs did not mount at {}", mnt.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(slowfs)
}

/// Mounts slowfs over `back` at `mnt` with every write (and fsync) of the files matching `glob`
/// taking `delay_ms`, and reads not delayed.
pub fn mount_slow_writes(back: &Path, mnt: &Path, delay_ms: u64, glob: &str) -> Result<Helper> {
    let delay = format!("{delay_ms}ms");
    let args =
        ["--read-delay", "0ms", "--write-delay", &delay, "--glob", glob, "--max-delay", "10s"];
    mount_slowfs(back, mnt, &args)
}

/// The last JSON line a workload printed.
pub fn json_line(stdout: &str) -> Result<Value> {
    let last = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .context("the workload printed no JSON line")?;
    serde_json::from_str(last).context("the workload's JSON line")
}

/// A JSON number of nanoseconds, in ms.
pub fn ms(v: &Value) -> Option<f64> {
    v.as_f64().map(|n| n / 1e6)
}

/// The doctor's report of a finished recording.
pub fn diagnose(dir: &Path) -> Result<Report> {
    Ok(doctor::diagnose(&recording::Recording::read(dir, Some(&logs::sandbox::FlightRecordings))?))
}

/// Records the workloads jar's `workload` under the doctor: its JSON line and the report.
pub fn run_jvm(
    ctx: &Ctx,
    dir: &Path,
    jvm_args: &[&str],
    workload: &[String],
    launch: Launch,
) -> Result<(Value, Report)> {
    let s = ctx.settings(dir)?;
    let mut command: Vec<String> = vec![ctx.java.display().to_string()];
    command.extend(jvm_args.iter().map(|a| a.to_string()));
    command.push("-jar".into());
    command.push(ctx.workloads.display().to_string());
    command.extend(workload.iter().cloned());
    let r = recorder::record_jvm(&s, &command, &launch, ctx.stop)?;
    if !r.status.success() {
        bail!("the workload failed ({}); see {}", r.status, dir.display());
    }
    Ok((json_line(&r.stdout)?, diagnose(&s.dir)?))
}

/// How the lab launches a recorded workload: SafepointTimeout on, its stdout kept, no chatter.
pub fn quiet_launch() -> Launch {
    Launch {
        safepoint_timeout: true,
        boost: None,
        capture_stdout: true,
        chatty: false,
        nice: None,
        cgroups: vec![],
        timeout: Some(Duration::from_secs(300)),
        perf_data_dir: None,
    }
}

/// Arguments as owned strings.
pub fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The pid of the JVM a recording in `dir` is watching, once its header is written.
pub fn wait_for_pid(dir: &Path) -> Result<i32> {
    let t0 = Instant::now();
    loop {
        if let Ok(meta) = recording::read_meta(dir) {
            return Ok(meta.pid);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("the recorded JVM never started");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A file of `bytes` pseudo-random bytes, synced to disk.
pub fn write_file(p: &Path, bytes: usize) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(p)?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..bytes >> 20 {
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf)?;
    }
    f.sync_all()?;
    Ok(())
}

/// Pages under writeback beside a run, as on a server that writes its logs while it serves: a
/// thread rewrites a file of `bytes` at `path` and syncs it, over and over, until dropped (the
/// file then goes).
pub struct WritebackBeside {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: std::path::PathBuf,
}

impl WritebackBeside {
    pub fn start(path: &Path, bytes: usize) -> Result<WritebackBeside> {
        use std::io::Write;
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut f = std::fs::File::create(path)?;
        let (flag, buf) = (std::sync::Arc::clone(&stop), vec![0x5au8; 1 << 20]);
        let thread = std::thread::Builder::new().name("lab-writeback".into()).spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let mut written = 0;
                while written < bytes && !flag.load(Ordering::Relaxed) {
                    if f.write_all(&buf).is_err() {
                        return;
                    }
                    written += buf.len();
                }
                use std::io::Seek;
                if f.sync_all().is_err() || f.rewind().is_err() {
                    return;
                }
            }
        })?;
        Ok(WritebackBeside { stop, thread: Some(thread), path: path.to_path_buf() })
    }
}

impl Drop for WritebackBeside {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
