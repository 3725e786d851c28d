//! Where an attached JVM in a container writes its logs. It cannot see the recording directory
//! (another mount namespace), and it must not be asked to write into ours: so a directory of
//! ours in its own `/tmp` (reached through `/proc/<pid>/root`, as jattach does), holding a copy
//! of the agent jar; its files are copied into the recording when watching ends, and it is
//! removed.
//!
//! Invariant: nothing here follows a link the container could have planted. The directory is
//! made new (`mkdir` fails on anything already there), the jar is created `O_EXCL|O_NOFOLLOW`
//! before the directory is handed to the JVM's user, and the logs are read back `O_NOFOLLOW`
//! through a descriptor held from the start. That descriptor also keeps the container's
//! filesystem reachable when the JVM exits first: its logs are not lost with it.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The agent jar's name inside the staging directory.
const JAR: &str = "stallscope-agent.jar";

pub struct Staging {
    /// The directory as the JVM names it (`/tmp/stallscope-…`).
    pub inside: PathBuf,
    /// The same directory reached from here (`/proc/<pid>/root/tmp/stallscope-…`): what the
    /// guardian removes if stallscope is killed.
    pub here: PathBuf,
    dir: File,
    tmp: File,
    name: String,
}

fn open_dir(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW).open(path)
}

impl Staging {
    /// Makes the directory in the `/tmp` of `pid` (reached through `root`), empty: the caller
    /// registers its removal before [`Staging::fill`] puts anything in it.
    pub fn make(pid: i32, root: &Path) -> Result<Staging> {
        let tmp_here = procwatch::ns::reach(root, Path::new("/tmp"));
        let tmp = open_dir(&tmp_here).with_context(|| format!("JVM pid {pid}: its /tmp ({}) is not a directory stallscope can use to stage the agent", tmp_here.display()))?;
        let name = format!("stallscope-{}-{:x}", std::process::id(), procwatch::clock::mono_ns() & 0xffff_ffff);
        let here = tmp_here.join(&name);
        std::fs::DirBuilder::new().mode(0o700).create(&here).with_context(|| format!("JVM pid {pid}: cannot make {} to stage the agent in", here.display()))?;
        let dir = open_dir(&here).with_context(|| format!("{}: cannot open it", here.display()))?;
        Ok(Staging { inside: PathBuf::from("/tmp").join(&name), here, dir, tmp, name })
    }

    /// Copies `jar` in and hands the directory to the JVM's user (`uid`, `gid`).
    pub fn fill(&self, uid: u32, gid: u32, jar: &Path) -> Result<()> {
        let staging = self;
        let mut to = staging.create_new(JAR).with_context(|| format!("{}: cannot copy the agent in", staging.here.display()))?;
        let mut from = File::open(jar).with_context(|| format!("{}: the agent jar is not there", jar.display()))?;
        std::io::copy(&mut from, &mut to).and_then(|_| to.flush()).with_context(|| format!("{}: cannot copy the agent in", staging.here.display()))?;
        // SAFETY: fchown on a descriptor we own.
        if unsafe { libc::fchown(staging.dir.as_raw_fd(), uid, gid) } != 0 {
            bail!("{}: cannot hand it to uid {uid} (the JVM's user): {}", staging.here.display(), std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The agent jar, as the JVM names it.
    pub fn jar(&self) -> PathBuf {
        self.inside.join(JAR)
    }

    fn create_new(&self, name: &str) -> std::io::Result<File> {
        let c = CString::new(name)?;
        // SAFETY: a valid C string and a directory descriptor we own; the result is checked.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), c.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o644) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened and owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    fn open_regular(&self, name: &str) -> std::io::Result<File> {
        let c = CString::new(name)?;
        // SAFETY: as in `create_new`.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as in `create_new`.
        let f = unsafe { File::from_raw_fd(fd) };
        if !f.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(f)
    }

    /// Copies the JVM's files `names` (those it wrote) into `dir`, then removes the staging
    /// directory. A file the JVM never wrote is skipped; one that cannot be copied is said.
    pub fn finish(self, dir: &Path, names: &[&str]) -> Result<()> {
        let mut problems = Vec::new();
        for name in names {
            let mut from = match self.open_regular(name) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    problems.push(format!("{name}: {e}"));
                    continue;
                }
            };
            let copied = doctor::recording::create_new(&dir.join(name)).map_err(|e| e.to_string()).and_then(|mut to| std::io::copy(&mut from, &mut to).map_err(|e| e.to_string()));
            if let Err(e) = copied {
                problems.push(format!("{name}: {e}"));
            }
        }
        self.remove();
        if !problems.is_empty() {
            bail!("copying the JVM's logs out of {}: {}", self.here.display(), problems.join("; "));
        }
        Ok(())
    }

    /// Removes what is in the directory (only names, never through a link) and the directory.
    fn remove(&self) {
        if let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", self.dir.as_raw_fd())) {
            for e in entries.flatten() {
                if let Ok(c) = CString::new(e.file_name().as_encoded_bytes()) {
                    // SAFETY: a valid C string and our directory descriptor.
                    unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) };
                }
            }
        }
        if let Ok(c) = CString::new(self.name.as_str()) {
            // SAFETY: as above, on /tmp's descriptor.
            unsafe { libc::unlinkat(self.tmp.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) };
        }
    }
}
