//! The HotSpot attach protocol, spoken natively (as jattach does; no `jcmd` needed): find the
//! JVM's socket (starting the attach listener with SIGQUIT if need be), send one command, read
//! its answer.
//!
//! Invariant: every refusal becomes one line naming the pid and what to do: no such process,
//! not a JVM, another user's JVM, a JVM that will not open its attach socket.
//!
//! Depends on procwatch (to find the JVM's namespaces) and nothing else of the workspace.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A JVM that can be attached to.
#[derive(Debug, Clone)]
pub struct Jvm {
    pub pid: i32,
    /// The pid inside the JVM's own pid namespace (names its socket).
    pub nspid: i32,
    /// The JVM's `/tmp`, seen through `/proc/<pid>/root` (right inside containers too).
    tmp: PathBuf,
    cwd: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// The JDK's home (from the mapped libjvm.so), when found.
    pub java_home: Option<PathBuf>,
}

fn status_field(pid: i32, key: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.trim().to_string())
}

/// Whether process `pid` has a JVM in it (maps `libjvm.so`); None when its map cannot be read
/// (gone, or not ours).
pub fn maps_libjvm(pid: i32) -> Option<bool> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    Some(libjvm_in(&maps).is_some())
}

/// The path of `libjvm.so` in a process's memory map (`/proc/PID/maps`), if it maps one.
fn libjvm_in(maps: &str) -> Option<&str> {
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.ends_with("/libjvm.so"))
}

impl Jvm {
    /// Checks that `pid` is a JVM this user may attach to.
    pub fn find(pid: i32) -> Result<Jvm> {
        let proc = PathBuf::from(format!("/proc/{pid}"));
        if pid <= 0 || !proc.exists() {
            return Err(anyhow::anyhow!("pid {pid}: no such process"));
        }
        let uid: u32 = status_field(pid, "Uid:")
            .and_then(|u| u.split_whitespace().nth(1).and_then(|e| e.parse().ok()))
            .with_context(|| format!("pid {pid}: cannot read its status"))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if me != 0 && me != uid {
            return Err(anyhow::anyhow!(
                "pid {pid} belongs to uid {uid}, not you (uid {me}): run stallscope as that user, or as root"
            ));
        }
        let maps = std::fs::read_to_string(proc.join("maps")).map_err(|e| {
            anyhow::anyhow!("pid {pid}: cannot read its memory map ({e}); is it yours?")
        })?;
        let Some(libjvm) = libjvm_in(&maps) else {
            let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
            return Err(anyhow::anyhow!(
                "pid {pid} ({}) is not a JVM: no libjvm.so is mapped",
                comm.trim()
            ));
        };
        // …/lib/server/libjvm.so → the JDK home is three levels up.
        let java_home = Path::new(libjvm)
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let gid: u32 = status_field(pid, "Gid:")
            .and_then(|g| g.split_whitespace().nth(1).and_then(|e| e.parse().ok()))
            .unwrap_or(uid);
        let nspid = procwatch::ns::nspid(pid);
        Ok(Jvm {
            pid,
            nspid,
            tmp: proc.join("root/tmp"),
            cwd: proc.join("cwd"),
            uid,
            gid,
            java_home,
        })
    }

    fn socket_path(&self) -> PathBuf {
        self.tmp.join(format!(".java_pid{}", self.nspid))
    }

    /// Starts the JVM's attach listener if it is not running: an `.attach_pid` file, then
    /// SIGQUIT, then wait for the socket. The file is removed however this ends, and by
    /// [`remove_triggers`] if the process exits while it still waits.
    fn ensure_listener(&self, timeout: Duration) -> Result<PathBuf> {
        let sock = self.socket_path();
        if sock.exists() {
            return Ok(sock);
        }
        let name = format!(".attach_pid{}", self.nspid);
        // HotSpot looks in its working directory and in its /tmp. /tmp first: if stallscope is
        // killed before it removes the file, it is left where temporary files belong, not in the
        // application's own directory.
        let trigger = [self.tmp.join(&name), self.cwd.join(&name)]
            .into_iter()
            .find(|p| std::fs::write(p, b"").is_ok())
            .with_context(|| {
                format!("pid {}: cannot create {name} in its working directory or /tmp", self.pid)
            })?;
        let placed = Placed::new(trigger.clone());
        // The JVM accepts a trigger file owned by its own user (or root).
        let _ = std::os::unix::fs::chown(&trigger, Some(self.uid), None);
        // A stopped JVM takes SIGQUIT only when continued, by which time the trigger file is
        // gone: it would print a full thread dump into the application's own stdout.
        if procwatch::task::stopped(self.pid) {
            drop(placed);
            return Err(anyhow::anyhow!(
                "JVM pid {} is stopped (SIGSTOP or a debugger): not signalled; continue it (kill -CONT {}) and try again",
                self.pid,
                self.pid
            ));
        }
        // SAFETY: plain kill; SIGQUIT makes HotSpot look for the trigger file.
        if unsafe { libc::kill(self.pid, libc::SIGQUIT) } != 0 {
            let e = std::io::Error::last_os_error();
            drop(placed);
            // Said at once, not as a socket that never opened (the DaemonSet run without KILL
            // waited 10 s and blamed -XX:+DisableAttachMechanism).
            let what = if e.raw_os_error() == Some(libc::EPERM) {
                format!(
                    "; another user's JVM needs CAP_KILL (or run stallscope as uid {})",
                    self.uid
                )
            } else {
                String::new()
            };
            return Err(anyhow::anyhow!(
                "JVM pid {}: cannot send it SIGQUIT, which starts its attach listener: {e}{what}",
                self.pid
            ));
        }
        let t0 = Instant::now();
        let found = loop {
            if sock.exists() {
                break true;
            }
            if t0.elapsed() > timeout || !Path::new(&format!("/proc/{}", self.pid)).exists() {
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(placed);
        if !found {
            return Err(anyhow::anyhow!(
                "JVM pid {} did not open its attach socket within {} s (started with -XX:+DisableAttachMechanism, or still starting?)",
                self.pid,
                timeout.as_secs()
            ));
        }
        Ok(sock)
    }

    /// Runs one attach command and returns its output. A non-zero result code is an error
    /// carrying the JVM's own message.
    pub fn execute(&self, cmd: &str, args: &[&str]) -> Result<String> {
        let sock = self.ensure_listener(Duration::from_secs(10))?;
        let refused = |e: std::io::Error| {
            anyhow::anyhow!("JVM pid {}: the attach socket refused us ({e})", self.pid)
        };
        let mut s = match UnixStream::connect(&sock) {
            Ok(s) => s,
            // No one listens on it: the socket of an earlier JVM with this pid, killed before it
            // could remove it (pids are reused). Removed, and this JVM's listener started.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                let _ = std::fs::remove_file(&sock);
                UnixStream::connect(self.ensure_listener(Duration::from_secs(10))?)
                    .map_err(refused)?
            }
            Err(e) => return Err(refused(e)),
        };
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut req = Vec::new();
        req.extend_from_slice(b"1\0");
        req.extend_from_slice(cmd.as_bytes());
        req.push(0);
        // Protocol 1 has exactly three arguments.
        for i in 0..3 {
            req.extend_from_slice(args.get(i).copied().unwrap_or("").as_bytes());
            req.push(0);
        }
        s.write_all(&req).with_context(|| format!("JVM pid {}: sending '{cmd}'", self.pid))?;
        let mut out = String::new();
        s.read_to_string(&mut out)
            .with_context(|| format!("JVM pid {}: reading the answer to '{cmd}'", self.pid))?;
        let (code, rest) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        match code.trim().parse::<i32>() {
            Ok(0) => Ok(rest.to_string()),
            Ok(c) => Err(anyhow::anyhow!(
                "JVM pid {} refused '{cmd}' (code {c}): {}",
                self.pid,
                rest.trim()
            )),
            Err(_) => Err(anyhow::anyhow!(
                "JVM pid {}: unexpected answer to '{cmd}': {}",
                self.pid,
                out.trim()
            )),
        }
    }

    /// Loads a Java agent (`agentmain`): `jar` named as the JVM sees it (absolute), with `options`.
    pub fn load_agent(&self, jar: &Path, options: &str) -> Result<()> {
        let arg = if options.is_empty() {
            jar.display().to_string()
        } else {
            format!("{}={options}", jar.display())
        };
        let out = self.execute("load", &["instrument", "false", &arg])?;
        // JDK 9+ report the agent's own result as `return code: N`.
        if let Some(rc) = out.lines().find_map(|l| l.trim().strip_prefix("return code: "))
            && rc.trim() != "0"
        {
            return Err(anyhow::anyhow!(
                "JVM pid {}: the agent failed to start (return code {rc}); see the JVM's stderr",
                self.pid
            ));
        }
        Ok(())
    }

    /// Runs a diagnostic command, as `jcmd <pid> <line>` would.
    pub fn jcmd(&self, line: &str) -> Result<String> {
        self.execute("jcmd", &[line])
    }
}
/// Trigger files (`.attach_pid<pid>`) placed and not yet removed.
static TRIGGERS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// A trigger file placed: removed when dropped.
struct Placed(PathBuf);

impl Placed {
    fn new(path: PathBuf) -> Placed {
        TRIGGERS.lock().unwrap_or_else(|p| p.into_inner()).push(path.clone());
        Placed(path)
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        TRIGGERS.lock().unwrap_or_else(|p| p.into_inner()).retain(|p| *p != self.0);
    }
}

/// Removes every trigger file an attach still waiting placed: for a process about to exit
/// (the attaching thread would otherwise leave its file behind, in the JVM's /tmp or working
/// directory, where the JVM would take it up at its next SIGQUIT).
pub fn remove_triggers() {
    for p in TRIGGERS.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that never answers SIGQUIT (as a JVM held at a safepoint does not): the trigger
    /// file placed for it is gone once `remove_triggers` runs, while the attach still waits, and
    /// the wait, once the process is gone, leaves nothing either.
    #[test]
    fn a_trigger_file_for_a_process_that_never_answers_is_removed_at_exit() {
        let dir = std::env::temp_dir().join(format!("stallscope-trigger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' QUIT; exec sleep 30"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let jvm = Jvm {
            pid,
            nspid: pid,
            tmp: dir.clone(),
            cwd: dir.clone(),
            // SAFETY: getuid and getgid have no preconditions.
            uid: unsafe { libc::getuid() },
            gid: unsafe { libc::getgid() },
            java_home: None,
        };
        let trigger = dir.join(format!(".attach_pid{pid}"));
        let waiting = std::thread::spawn(move || jvm.ensure_listener(Duration::from_secs(60)));
        let placed = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            trigger.exists()
        });
        assert!(placed, "the trigger file was placed");
        remove_triggers();
        assert!(!trigger.exists(), "removed while the attach still waits");
        let _ = child.kill();
        let _ = child.wait();
        assert!(waiting.join().unwrap().is_err(), "no socket from a process that is gone");
        assert!(!trigger.exists());
        assert!(TRIGGERS.lock().unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
