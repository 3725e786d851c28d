//! Where an attached JVM in a container writes its logs. It cannot see the recording directory
//! (another mount namespace), and it must not be asked to write into ours: so a directory of
//! ours in its own `/tmp` (reached through `/proc/<pid>/root`, as jattach does), holding a copy
//! of the agent jar; its files are copied into the recording when watching ends, and it is
//! removed.
//!
//! Invariant: nothing here follows a link the container could have planted. Its `/tmp` is
//! opened inside its own root (`RESOLVE_IN_ROOT`), the directory is made relative to that
//! descriptor (`mkdirat` fails on anything already there), the jar is created
//! `O_EXCL|O_NOFOLLOW` before the directory is handed to the JVM's user, and the logs are read
//! back only when they are regular files of the JVM's user, through a descriptor held from the
//! start. That descriptor also keeps the container's
//! filesystem reachable when the JVM exits first: its logs are not lost with it.

use anyhow::{Context, Result, bail};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The agent jar's name inside the staging directory.
const JAR: &str = "stallscope-agent.jar";

/// The most of one log copied out (a bigger one is cut there, and said): a file the JVM's user
/// can grow must not fill the recording's disk.
const COPY_LIMIT: u64 = 8 << 30;

pub struct Staging {
    /// The directory as the JVM names it (`/tmp/stallscope-…`).
    pub inside: PathBuf,
    dir: File,
    tmp: File,
    name: String,
    /// Whose files are copied out: the JVM's user (or ours).
    owner: u32,
}

/// A name for a staging directory, unique to this stallscope and moment.
pub fn fresh_name() -> String {
    format!("stallscope-{}-{:x}", std::process::id(), procwatch::clock::mono_ns() & 0xffff_ffff)
}

/// Where the staging directory `name` of `pid` is reached from here: what the guardian removes
/// if stallscope is killed.
pub fn reached(pid: i32, name: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/root/tmp")).join(name)
}

impl Staging {
    /// Makes the directory `name` in the `/tmp` of `pid`, empty: the caller registers its removal
    /// (at [`reached`]) before, and [`Staging::fill`] puts the agent in.
    pub fn make(pid: i32, name: &str) -> Result<Staging> {
        let tmp_path = PathBuf::from(format!("/proc/{pid}/root/tmp"));
        let tmp = procwatch::ns::open_reached(&tmp_path, libc::O_RDONLY | libc::O_DIRECTORY)
            .with_context(|| {
                format!(
                    "JVM pid {pid}: its /tmp is not a directory stallscope can stage the agent in"
                )
            })?;
        let c = CString::new(name)?;
        // SAFETY: a directory descriptor we own and a valid C string; relative to the descriptor,
        // so no link in the container's /tmp path is followed.
        if unsafe { libc::mkdirat(tmp.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
            bail!(
                "JVM pid {pid}: cannot make /tmp/{name} in it to stage the agent: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: as above; the result is checked.
        let fd = unsafe {
            libc::openat(
                tmp.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            bail!(
                "JVM pid {pid}: cannot open /tmp/{name} just made: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: a descriptor just opened and owned by nobody else.
        let dir = unsafe { File::from_raw_fd(fd) };
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        Ok(Staging {
            inside: PathBuf::from("/tmp").join(name),
            dir,
            tmp,
            name: name.to_string(),
            owner: me,
        })
    }

    /// Copies `jar` in and hands the directory to the JVM's user (`uid`, `gid`).
    pub fn fill(&mut self, uid: u32, gid: u32, jar: &Path) -> Result<()> {
        let mut to = self
            .create_new(JAR)
            .with_context(|| format!("{}: cannot copy the agent in", self.inside.display()))?;
        let mut from = File::open(jar)
            .with_context(|| format!("{}: the agent jar is not there", jar.display()))?;
        std::io::copy(&mut from, &mut to)
            .and_then(|_| to.flush())
            .with_context(|| format!("{}: cannot copy the agent in", self.inside.display()))?;
        // SAFETY: fchown on a descriptor we own.
        if unsafe { libc::fchown(self.dir.as_raw_fd(), uid, gid) } != 0 {
            bail!(
                "{}: cannot hand it to uid {uid} (the JVM's user): {}",
                self.inside.display(),
                std::io::Error::last_os_error()
            );
        }
        self.owner = uid;
        Ok(())
    }

    /// The agent jar, as the JVM names it.
    pub fn jar(&self) -> PathBuf {
        self.inside.join(JAR)
    }

    fn create_new(&self, name: &str) -> std::io::Result<File> {
        let c = CString::new(name)?;
        // SAFETY: a valid C string and a directory descriptor we own; the result is checked.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just opened and owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Opens the JVM's file `name` for reading only once it is known to be a regular file of the
    /// JVM's user with one link: first as a bare path (`O_PATH`, which opens nothing: a device
    /// node planted there is never opened), then reopened through that descriptor.
    fn open_regular(&self, name: &str) -> std::io::Result<File> {
        use std::os::unix::fs::MetadataExt;
        let c = CString::new(name)?;
        // SAFETY: as in `create_new`.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: as in `create_new`.
        let bare = unsafe { File::from_raw_fd(fd) };
        let m = bare.metadata()?;
        if !m.is_file() || m.nlink() != 1 || m.uid() != self.owner {
            return Err(std::io::Error::other(
                "not a regular file of the JVM's user with one link",
            ));
        }
        // The magic link of our own descriptor: it is followed by design (no O_NOFOLLOW here).
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(format!("/proc/self/fd/{}", bare.as_raw_fd()))
    }

    /// Copies the JVM's files `names` (those it wrote) into `dir`, then removes the staging
    /// directory. Returns whether it is gone, and what could not be copied (a file the JVM never
    /// wrote is not missed).
    pub fn finish(self, dir: &Path, names: &[&str]) -> (bool, Option<String>) {
        let mut problems = Vec::new();
        for name in names {
            let from = match self.open_regular(name) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    problems.push(format!("{name}: {e}"));
                    continue;
                }
            };
            let copied = recording::create_new(&dir.join(name))
                .map_err(|e| e.to_string())
                .and_then(|mut to| {
                    std::io::copy(&mut from.take(COPY_LIMIT), &mut to).map_err(|e| e.to_string())
                });
            match copied {
                Ok(n) if n >= COPY_LIMIT => {
                    problems.push(format!("{name}: cut at {} GiB", COPY_LIMIT >> 30))
                }
                Ok(_) => {}
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        let removed = self.remove();
        (
            removed,
            (!problems.is_empty()).then(|| {
                format!(
                    "copying the JVM's logs out of its {}: {}",
                    self.inside.display(),
                    problems.join("; ")
                )
            }),
        )
    }

    /// Removes what is in the directory (by name, never through a link; an empty subdirectory
    /// too) and the directory. True when it is gone.
    fn remove(&self) -> bool {
        if let Ok(entries) = std::fs::read_dir(format!("/proc/self/fd/{}", self.dir.as_raw_fd())) {
            for e in entries.flatten() {
                if let Ok(c) = CString::new(e.file_name().as_encoded_bytes()) {
                    // SAFETY: a valid C string and our directory descriptor.
                    if unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
                        // SAFETY: as above.
                        unsafe {
                            libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR)
                        };
                    }
                }
            }
        }
        let Ok(c) = CString::new(self.name.as_str()) else { return false };
        // SAFETY: as above, on /tmp's descriptor.
        unsafe { libc::unlinkat(self.tmp.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) == 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Staged in our own /tmp (our pid's root is /): what the JVM's user could plant in place of
    /// its logs (a link to another file, a FIFO) is not read, its real log is, and nothing stays.
    #[test]
    fn only_the_jvms_own_regular_files_are_copied_out_and_nothing_stays() {
        let me = std::process::id() as i32;
        let name = fresh_name();
        let mut st = Staging::make(me, &name).unwrap();
        let jar = std::env::temp_dir().join(format!("{name}.jar"));
        std::fs::write(&jar, b"PK").unwrap();
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        st.fill(uid, gid, &jar).unwrap();
        let staged = reached(me, &name);
        assert_eq!(std::fs::read(staged.join(JAR)).unwrap(), b"PK");
        std::os::unix::fs::symlink(&jar, staged.join("safepoint.log")).unwrap();
        let fifo =
            CString::new(staged.join("hiccups.hlog").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(staged.join("gc.log"), b"real").unwrap();
        let out = std::env::temp_dir().join(format!("{name}-out"));
        std::fs::create_dir(&out).unwrap();
        let (removed, problem) =
            st.finish(&out, &["safepoint.log", "hiccups.hlog", "gc.log", "absent.log"]);
        let problem = problem.expect("the planted files are said");
        assert!(
            problem.contains("safepoint.log")
                && problem.contains("hiccups.hlog")
                && !problem.contains("absent"),
            "{problem}"
        );
        assert_eq!(std::fs::read(out.join("gc.log")).unwrap(), b"real");
        assert!(!out.join("safepoint.log").exists() && !out.join("hiccups.hlog").exists());
        assert!(removed && !staged.exists(), "the staging directory is gone");
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_file(&jar);
    }
}
