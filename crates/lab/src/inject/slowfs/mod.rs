//! `stallscope inject slowfs`: a slow disk without a kernel module. Mounts a FUSE passthrough
//! of a backing directory whose reads are delayed (and optionally fail), runs in the
//! foreground, and always unmounts.
//!
//! Invariant: the mount is gone when this returns, whatever ended it (`--for`, Ctrl-C,
//! SIGTERM, an error); if the process is killed outright, a guardian process detaches it.

pub mod control;
mod fs;

use anyhow::{Context, Result, bail};
use control::{CONTROL_NAME, Settings};
use recording::units::fmt_ns;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
#[command(after_help = "\
While mounted, `MOUNT/.stallscope-slowfs` shows the settings and counters; writing
`read_delay=5s` (or write_delay=, jitter=, error_rate=, glob=) to it changes them, as
`stallscope inject slowfs-set MOUNT --read-delay 5s` does.

Example, the seed's experiment with a 300 ms disk:
  stallscope inject slowfs /data /mnt/slow --read-delay 300ms &
  stallscope inject evict /mnt/slow/test.dat
  java LongTTSP /mnt/slow/test.dat")]
pub struct SlowfsArgs {
    /// The directory whose files the mount shows.
    pub backing: PathBuf,
    /// Where to mount (created if missing, and then removed afterwards).
    pub mount: PathBuf,
    /// Delay of each read that reaches the file system (page-cache hits are not delayed).
    #[arg(long, default_value = "300ms")]
    pub read_delay: recording::units::Duration,
    /// Delay of each write and fsync (writes are not cached: every write(2) waits, as on a slow
    /// network file system; a JVM's GC log written here slows whatever writes it).
    #[arg(long, default_value = "0ms")]
    pub write_delay: recording::units::Duration,
    /// A random extra delay, uniform between 0 and this.
    #[arg(long, default_value = "0ms")]
    pub jitter: recording::units::Duration,
    /// Only files whose path in the mount matches this glob are slow (e.g. `*.dat`).
    #[arg(long, default_value = "**")]
    pub glob: String,
    /// Fraction of matching reads that fail with EIO, between 0 and 1.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Upper bound on any delay, now or set later.
    #[arg(long, default_value = "10s")]
    pub max_delay: recording::units::Duration,
    /// Unmount after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: Option<recording::units::Duration>,
    /// FUSE worker threads (delayed reads do not occupy them).
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Let other users use the mount too (FUSE `allow_other`; needs root or `user_allow_other`
    /// in /etc/fuse.conf). Off by default: only the user who mounted it can use it, and the
    /// kernel checks every file's mode for them either way (`default_permissions`).
    #[arg(long)]
    pub allow_other: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SlowfsSetArgs {
    /// The slowfs mount point.
    pub mount: PathBuf,
    #[arg(long)]
    pub read_delay: Option<recording::units::Duration>,
    #[arg(long)]
    pub write_delay: Option<recording::units::Duration>,
    #[arg(long)]
    pub jitter: Option<recording::units::Duration>,
    #[arg(long)]
    pub error_rate: Option<f64>,
    #[arg(long)]
    pub glob: Option<String>,
}

/// What the host must provide for FUSE, with what to do when it does not.
pub fn check_fuse() -> Result<()> {
    if !Path::new("/dev/fuse").exists() {
        return Err(anyhow::anyhow!(
            "slowfs needs FUSE, and /dev/fuse is missing: load the module (modprobe fuse), or run the container with --device /dev/fuse"
        ));
    }
    if std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").is_err() {
        return Err(anyhow::anyhow!(
            "slowfs cannot open /dev/fuse: run as root, or give your user access to it"
        ));
    }
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("fusermount3").is_file()))
        .unwrap_or(false);
    if !found {
        return Err(anyhow::anyhow!(
            "slowfs needs fusermount3, which is not on PATH: run scripts/setup.sh (or apt-get install fuse3)"
        ));
    }
    Ok(())
}

/// True when `path` is a mount point in this mount namespace.
pub fn is_mounted(path: &Path) -> bool {
    let Ok(canon) = std::fs::canonicalize(path) else { return false };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    // Field 5 is the mount point, with spaces and such escaped as octal.
    let want = canon.to_string_lossy().replace(' ', "\\040");
    info.lines().any(|l| l.split(' ').nth(4) == Some(want.as_str()))
}

/// A forked process that detaches the mount when our end of a pipe closes: on a normal exit,
/// and also when this process is killed outright (SIGKILL, OOM). fusermount3's own
/// auto_unmount was tried first; its monitor exits early on this kernel, so it cannot be
/// relied on.
struct UnmountGuardian {
    pid: libc::pid_t,
    pipe: libc::c_int,
}

impl UnmountGuardian {
    fn spawn(mount: &Path) -> Result<UnmountGuardian> {
        let target = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes())?;
        let fusermount = std::ffi::CString::new("fusermount3")?;
        let args: Vec<std::ffi::CString> = ["fusermount3", "-u", "-z", "-q", "--"]
            .iter()
            .map(|a| std::ffi::CString::new(*a).expect("no NUL"))
            .collect();
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(target.as_ptr());
        argv.push(std::ptr::null());
        let mut fds = [0i32; 2];
        // SAFETY: an out-array of two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("pipe for the unmount guardian");
        }
        // SAFETY: the child only calls async-signal-safe functions (close, read, umount2,
        // execvp, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("forking the unmount guardian");
        }
        if pid == 0 {
            unsafe {
                libc::close(fds[1]);
                let mut b = 0u8;
                loop {
                    let n = libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
                    if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                        break;
                    }
                }
                if libc::umount2(target.as_ptr(), libc::MNT_DETACH) != 0
                    && *libc::__errno_location() == libc::EPERM
                {
                    libc::execvp(fusermount.as_ptr(), argv.as_ptr());
                }
                libc::_exit(0);
            }
        }
        // SAFETY: our copy of the read end.
        unsafe { libc::close(fds[0]) };
        Ok(UnmountGuardian { pid, pipe: fds[1] })
    }
}

impl Drop for UnmountGuardian {
    fn drop(&mut self) {
        // SAFETY: our write end and the child we forked.
        unsafe {
            libc::close(self.pipe);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

fn lazy_unmount(mount: &Path) {
    let c = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = std::process::Command::new("fusermount3")
            .args(["-u", "-z", "-q", "--"])
            .arg(mount)
            .status();
    }
}

pub fn run(a: SlowfsArgs) -> Result<i32> {
    check_fuse()?;
    let backing = std::fs::canonicalize(&a.backing).with_context(|| {
        format!("{}: the backing directory cannot be read", a.backing.display())
    })?;
    if !backing.is_dir() {
        bail!("{}: the backing path is not a directory", backing.display());
    }
    let max_delay = a.max_delay.ns();
    let settings = Settings::new(
        a.read_delay.ns(),
        a.write_delay.ns(),
        a.jitter.ns(),
        a.error_rate,
        &a.glob,
        max_delay,
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let settings = Arc::new(settings);
    let run_for = a.run_for.map(|d| d.ns());

    // A FUSE mount whose process died with its unmount guardian (a machine or container restart
    // kills them all at once) stays mounted and answers everything with ENOTCONN; found when a
    // killed lab's mount blocked the next run. It serves nothing, so it is detached, and said.
    if std::fs::metadata(&a.mount).err().and_then(|e| e.raw_os_error()) == Some(libc::ENOTCONN) {
        eprintln!(
            "stallscope slowfs: {}: a dead FUSE mount (its process is gone); detaching it",
            a.mount.display()
        );
        lazy_unmount(&a.mount);
    }
    let created = if a.mount.exists() {
        false
    } else {
        std::fs::create_dir_all(&a.mount)
            .with_context(|| format!("{}: cannot create the mount point", a.mount.display()))?;
        true
    };
    let mount = std::fs::canonicalize(&a.mount)?;
    if is_mounted(&mount) {
        bail!("{}: something is already mounted there", mount.display());
    }
    if mount.starts_with(&backing) {
        bail!(
            "{}: the mount point is inside the backing directory {}",
            mount.display(),
            backing.display()
        );
    }

    // Stop on SIGINT/SIGTERM/SIGHUP from here on, so no signal can leave the mount behind.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }

    let guardian = UnmountGuardian::spawn(&mount)?;
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(format!("slowfs:{}", backing.display())),
        fuser::MountOption::Subtype("stallscope-slowfs".into()),
        // The kernel checks modes and owners as on the backing directory: without it, anyone
        // who can reach the mount acts with slowfs's rights (root's, when root mounted it).
        fuser::MountOption::DefaultPermissions,
    ];
    config.acl = if a.allow_other { fuser::SessionACL::All } else { fuser::SessionACL::Owner };
    config.n_threads = Some(a.threads.max(1));
    config.clone_fd = true;
    let session = fuser::spawn_mount(
        fs::SlowFs::new(backing.clone(), Arc::clone(&settings)),
        &mount,
        &config,
    )
    .with_context(|| format!("mounting slowfs on {}", mount.display()))?;

    let started = Instant::now();
    eprintln!(
        "slowfs: {} mirrors {}; reads of '{}' delayed {}, writes {} (jitter {}), error rate {}, max delay {}",
        mount.display(),
        backing.display(),
        a.glob,
        fmt_ns(settings.read_delay_ns.load(Ordering::Relaxed)),
        fmt_ns(settings.write_delay_ns.load(Ordering::Relaxed)),
        fmt_ns(settings.jitter_ns.load(Ordering::Relaxed)),
        a.error_rate,
        fmt_ns(max_delay)
    );
    eprintln!(
        "slowfs: change settings live with `stallscope inject slowfs-set {} --read-delay 5s`; {}",
        mount.display(),
        match run_for {
            Some(d) => format!("unmounts after {}", fmt_ns(d)),
            None => "Ctrl-C unmounts".to_string(),
        }
    );
    while !stop.load(Ordering::Relaxed) {
        if run_for.is_some_and(|d| started.elapsed() >= Duration::from_nanos(d))
            || session.guard.is_finished()
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Detach first: readers blocked in the file system get ENOTCONN instead of keeping the
    // unmount waiting, and the FUSE workers see the device close and return.
    lazy_unmount(&mount);
    let result = session.umount_and_join();
    drop(guardian);
    if created {
        let _ = std::fs::remove_dir(&mount);
    }
    let st = &settings.stats;
    eprintln!(
        "slowfs: unmounted {} after {}; {} reads, {} delayed ({} in all), {} failed with EIO",
        mount.display(),
        fmt_ns(started.elapsed().as_nanos() as u64),
        st.reads.load(Ordering::Relaxed),
        st.delayed.load(Ordering::Relaxed),
        fmt_ns(st.delayed_ns.load(Ordering::Relaxed)),
        st.failed.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        // The session ending with an error after a clean unmount is not worth failing for.
        if is_mounted(&mount) {
            return Err(e).context("unmounting slowfs");
        }
    }
    Ok(0)
}

/// `stallscope inject slowfs-set MOUNT …`: writes the control file.
pub fn set(a: SlowfsSetArgs) -> Result<i32> {
    let control: PathBuf = a.mount.join(CONTROL_NAME);
    if !control.exists() {
        return Err(anyhow::anyhow!(
            "{}: no slowfs is mounted there (no {CONTROL_NAME})",
            a.mount.display()
        ));
    }
    let mut lines = Vec::new();
    if let Some(d) = a.read_delay {
        lines.push(format!("read_delay={}ns", d.ns()));
    }
    if let Some(d) = a.write_delay {
        lines.push(format!("write_delay={}ns", d.ns()));
    }
    if let Some(j) = a.jitter {
        lines.push(format!("jitter={}ns", j.ns()));
    }
    if let Some(r) = a.error_rate {
        lines.push(format!("error_rate={r}"));
    }
    if let Some(g) = &a.glob {
        lines.push(format!("glob={g}"));
    }
    if !lines.is_empty() {
        std::fs::write(&control, lines.join("\n") + "\n").map_err(|e| {
            anyhow::anyhow!("{}: the settings were refused ({e}); the slowfs process printed why (e.g. a delay above its --max-delay)", control.display())
        })?;
    }
    print!("{}", std::fs::read_to_string(&control)?);
    Ok(0)
}
