//! slowfs, a slow disk without a kernel module (`stallscope inject slowfs`): a FUSE passthrough
//! of a backing directory whose reads are delayed (and optionally fail).
//!
//! Invariant: the mount is gone once its [`Slowfs`] is unmounted or dropped, whatever ended it
//! (`--for`, Ctrl-C, SIGTERM, an error); if the process is killed outright, a guardian process
//! detaches it.

pub mod control;
mod fs;

use anyhow::{Context, Result, bail};
use control::{CONTROL_NAME, Settings};
use recording::notice::{Kind, Notices};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a slowfs mount is asked for: what it mirrors, where, and how slow.
#[derive(Debug, Clone)]
pub struct Options {
    /// The directory whose files the mount shows.
    pub backing: PathBuf,
    /// Where to mount (created if missing, and then removed afterwards).
    pub mount: PathBuf,
    pub read_delay_ns: u64,
    pub write_delay_ns: u64,
    pub jitter_ns: u64,
    /// Only files whose path in the mount matches this glob are slow.
    pub glob: String,
    /// Fraction of matching reads that fail with EIO, between 0 and 1.
    pub error_rate: f64,
    /// Upper bound on any delay, now or set later.
    pub max_delay_ns: u64,
    /// FUSE worker threads.
    pub threads: usize,
    /// FUSE `allow_other`.
    pub allow_other: bool,
}

/// A change of a mounted slowfs's settings (`slowfs-set`): each `Some` is set.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub read_delay_ns: Option<u64>,
    pub write_delay_ns: Option<u64>,
    pub jitter_ns: Option<u64>,
    pub error_rate: Option<f64>,
    pub glob: Option<String>,
}

/// What a mount served, told when it is unmounted.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub elapsed: Duration,
    pub reads: u64,
    pub delayed: u64,
    pub delayed_ns: u64,
    pub failed: u64,
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

/// A mounted slowfs, served by FUSE threads until [`Slowfs::unmount`] (or its drop, or, if
/// this process is killed, its unmount guardian).
pub struct Slowfs {
    mount: PathBuf,
    backing: PathBuf,
    created: bool,
    settings: Arc<Settings>,
    session: Option<fuser::BackgroundSession>,
    guardian: Option<UnmountGuardian>,
    started: Instant,
}

impl Slowfs {
    /// Mounts `o.backing` at `o.mount`, slow as asked. A dead FUSE mount left at the mount
    /// point is detached first, and told to `notices`; so are the FUSE threads' warnings.
    pub fn mount(o: &Options, notices: &Notices) -> Result<Slowfs> {
        check_fuse()?;
        let backing = std::fs::canonicalize(&o.backing).with_context(|| {
            format!("{}: the backing directory cannot be read", o.backing.display())
        })?;
        if !backing.is_dir() {
            bail!("{}: the backing path is not a directory", backing.display());
        }
        let settings = Settings::new(
            o.read_delay_ns,
            o.write_delay_ns,
            o.jitter_ns,
            o.error_rate,
            &o.glob,
            o.max_delay_ns,
        )
        .map_err(|e| anyhow::anyhow!(e))?;
        let settings = Arc::new(settings);

        // A FUSE mount whose process died with its unmount guardian (a machine or container
        // restart kills them all at once) stays mounted and answers everything with ENOTCONN;
        // found when a killed lab's mount blocked the next run. It serves nothing, so it is
        // detached, and said.
        if std::fs::metadata(&o.mount).err().and_then(|e| e.raw_os_error()) == Some(libc::ENOTCONN)
        {
            notices.tell(
                "stallscope slowfs",
                Kind::Warning,
                format!(
                    "{}: a dead FUSE mount (its process is gone); detaching it",
                    o.mount.display()
                ),
            );
            lazy_unmount(&o.mount);
        }
        let created = if o.mount.exists() {
            false
        } else {
            std::fs::create_dir_all(&o.mount)
                .with_context(|| format!("{}: cannot create the mount point", o.mount.display()))?;
            true
        };
        let mount = std::fs::canonicalize(&o.mount)?;
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

        let guardian = UnmountGuardian::spawn(&mount)?;
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::FSName(format!("slowfs:{}", backing.display())),
            fuser::MountOption::Subtype("stallscope-slowfs".into()),
            // The kernel checks modes and owners as on the backing directory: without it,
            // anyone who can reach the mount acts with slowfs's rights (root's, when root
            // mounted it).
            fuser::MountOption::DefaultPermissions,
        ];
        config.acl = if o.allow_other { fuser::SessionACL::All } else { fuser::SessionACL::Owner };
        config.n_threads = Some(o.threads.max(1));
        config.clone_fd = true;
        let session = fuser::spawn_mount(
            fs::SlowFs::new(backing.clone(), Arc::clone(&settings), notices.clone()),
            &mount,
            &config,
        )
        .with_context(|| format!("mounting slowfs on {}", mount.display()))?;
        Ok(Slowfs {
            mount,
            backing,
            created,
            settings,
            session: Some(session),
            guardian: Some(guardian),
            started: Instant::now(),
        })
    }

    /// The mount point (canonical).
    pub fn mount_point(&self) -> &Path {
        &self.mount
    }

    /// The backing directory (canonical).
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// Its live settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Serves until `run_for` has passed since the mount, `stop` is set, or the session ends
    /// by itself (someone unmounted it).
    pub fn serve(&self, run_for: Option<Duration>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            if run_for.is_some_and(|d| self.started.elapsed() >= d)
                || self.session.as_ref().is_none_or(|s| s.guard.is_finished())
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Unmounts, removes a mount point it created, and says what it served.
    pub fn unmount(mut self) -> Result<Served> {
        let result = self.take_down();
        let st = &self.settings.stats;
        let served = Served {
            elapsed: self.started.elapsed(),
            reads: st.reads.load(Ordering::Relaxed),
            delayed: st.delayed.load(Ordering::Relaxed),
            delayed_ns: st.delayed_ns.load(Ordering::Relaxed),
            failed: st.failed.load(Ordering::Relaxed),
        };
        if let Err(e) = result {
            // The session ending with an error after a clean unmount is not worth failing for.
            if is_mounted(&self.mount) {
                return Err(e).context("unmounting slowfs");
            }
        }
        Ok(served)
    }

    fn take_down(&mut self) -> std::io::Result<()> {
        let Some(session) = self.session.take() else { return Ok(()) };
        // Detach first: readers blocked in the file system get ENOTCONN instead of keeping the
        // unmount waiting, and the FUSE workers see the device close and return.
        lazy_unmount(&self.mount);
        let result = session.umount_and_join();
        drop(self.guardian.take());
        if self.created {
            let _ = std::fs::remove_dir(&self.mount);
        }
        result
    }
}

impl Drop for Slowfs {
    fn drop(&mut self) {
        let _ = self.take_down();
    }
}

/// `slowfs-set`: writes `changes` to the control file of the slowfs mounted at `mount` and
/// returns the settings it shows afterwards.
pub fn set(mount: &Path, changes: &Changes) -> Result<String> {
    let control: PathBuf = mount.join(CONTROL_NAME);
    if !control.exists() {
        return Err(anyhow::anyhow!(
            "{}: no slowfs is mounted there (no {CONTROL_NAME})",
            mount.display()
        ));
    }
    let mut lines = Vec::new();
    if let Some(d) = changes.read_delay_ns {
        lines.push(format!("read_delay={d}ns"));
    }
    if let Some(d) = changes.write_delay_ns {
        lines.push(format!("write_delay={d}ns"));
    }
    if let Some(j) = changes.jitter_ns {
        lines.push(format!("jitter={j}ns"));
    }
    if let Some(r) = changes.error_rate {
        lines.push(format!("error_rate={r}"));
    }
    if let Some(g) = &changes.glob {
        lines.push(format!("glob={g}"));
    }
    if !lines.is_empty() {
        std::fs::write(&control, lines.join("\n") + "\n").map_err(|e| {
            anyhow::anyhow!("{}: the settings were refused ({e}); the slowfs process printed why (e.g. a delay above its --max-delay)", control.display())
        })?;
    }
    Ok(std::fs::read_to_string(&control)?)
}
