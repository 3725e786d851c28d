//! The JVMs running on this host, found as `jcmd -l` and jattach find them, in containers too:
//! a process is a JVM when it maps `libjvm.so`; its main class or jar is read off its command
//! line as `jps` does; a JVM in another pid or mount namespace is named by its pid there and by
//! its cgroup path, the label a container runtime gives it.
//!
//! Invariant: listing never changes anything (it only reads `/proc`), and a process that cannot
//! be read (gone, another user's without privilege) is left out of the list with its reason,
//! never guessed at.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// One JVM as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JvmProcess {
    pub pid: i32,
    /// Its pid in its own pid namespace (equal to `pid` in ours).
    pub nspid: i32,
    pub uid: u32,
    /// The main class, or the jar after `-jar`, or the module's main class after `-m`; empty
    /// when the command line names none (a JVM started through JNI).
    pub main: String,
    pub cmdline: Vec<String>,
    /// The JDK's home, from the `libjvm.so` it maps (as the JVM names the path), and its
    /// version from the home's `release` file.
    pub java_home: Option<PathBuf>,
    pub java_version: Option<String>,
    /// In another pid or mount namespace than ours: a container.
    pub contained: bool,
    /// Its cgroup's path (the v2 group, else the CPU controller's): what names a container.
    pub cgroup: String,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22): with the pid, it
    /// names this process and no later one with the same pid.
    pub starttime: u64,
}

/// Options that take a value in the next argument, which is then no main class (`jps` skips
/// them the same way).
const WITH_VALUE: [&str; 12] = [
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--add-modules",
    "--add-opens",
    "--add-exports",
    "--add-reads",
    "--patch-module",
    "--upgrade-module-path",
    "--limit-modules",
];

/// The main class or jar a java command line runs: the value of `-jar` or `-m`/`--module`
/// (`module/Class` gives `Class`), else its first argument that is no option.
pub fn main_of(cmdline: &[String]) -> String {
    let mut args = cmdline.iter().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-jar" => return args.next().cloned().unwrap_or_default(),
            "-m" | "--module" => {
                return args
                    .next()
                    .map(|m| m.rsplit('/').next().unwrap_or(m).to_string())
                    .unwrap_or_default();
            }
            o if WITH_VALUE.contains(&o) => {
                args.next();
            }
            o if o.starts_with("--module=") => {
                return o["--module=".len()..].rsplit('/').next().unwrap_or("").to_string();
            }
            o if o.starts_with('-') => {}
            main => return main.to_string(),
        }
    }
    String::new()
}

/// Why a process was left out of the list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub pid: i32,
    pub reason: String,
}

fn libjvm_home(maps: &str) -> Option<Option<PathBuf>> {
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with("/libjvm.so"))?;
    // …/lib/server/libjvm.so → the JDK home is three levels up.
    Some(
        Path::new(lib)
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .map(Path::to_path_buf),
    )
}

/// A process's command line, split at its NULs (empty for a kernel thread or a process gone).
pub fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// The pids in `/proc`, ascending.
pub fn pids() -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// The JVM with pid `pid`, if it is one. `Err` when it cannot be told (its maps unreadable).
pub fn jvm(pid: i32) -> Result<Option<JvmProcess>, Unreadable> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let unreadable = |what: &str, e: std::io::Error| Unreadable {
        pid,
        reason: format!("cannot read its {what}: {e}"),
    };
    let maps = match std::fs::read_to_string(proc.join("maps")) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // Its command line (readable by anyone) says whether it could be one at all: a host's
        // init or a sandbox's agent that keeps us out is no JVM to warn about.
        Err(_) if !may_be_java(&cmdline(pid)) => return Ok(None),
        Err(e) => return Err(unreadable("memory map", e)),
    };
    let Some(java_home) = libjvm_home(&maps) else { return Ok(None) };
    let status =
        std::fs::read_to_string(proc.join("status")).map_err(|e| unreadable("status", e))?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|u| u.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .unwrap_or(u32::MAX);
    let cmdline = cmdline(pid);
    let nspid = crate::ns::nspid(pid);
    let java_version = java_home.as_ref().and_then(|h| {
        // Inside a container's root: resolved there (a planted link stays in the container), a
        // regular file only (a planted FIFO would hang the listing).
        let f = crate::ns::open_reached(
            &crate::ns::reach(&crate::ns::root(pid), &h.join("release")),
            libc::O_RDONLY | libc::O_NONBLOCK,
        )
        .ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut release = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 << 10), &mut release).ok()?;
        release
            .lines()
            .find_map(|l| l.strip_prefix("JAVA_VERSION="))
            .map(|v| v.trim_matches('"').to_string())
    });
    let groups = crate::cgroup::of(pid);
    let cgroup =
        groups.unified.as_ref().or(groups.cpu.as_ref()).map(|g| g.path.clone()).unwrap_or_default();
    Ok(Some(JvmProcess {
        pid,
        nspid,
        uid,
        main: main_of(&cmdline),
        cmdline,
        java_home,
        java_version,
        contained: crate::ns::other_pid_ns(pid) || crate::ns::other_mount_ns(pid),
        cgroup,
        starttime: crate::task::process_starttime(pid).unwrap_or(0),
    }))
}

/// Whether a command line may be a JVM's: its program is named like java, or it carries an
/// option only a JVM's launcher takes (a custom launcher that embeds libjvm.so passes them on).
fn may_be_java(cmdline: &[String]) -> bool {
    let program = cmdline.first().map(|p| p.rsplit('/').next().unwrap_or(p)).unwrap_or("");
    program.contains("java")
        || cmdline.iter().skip(1).any(|a| {
            ["-jar", "-cp", "-classpath", "--class-path", "--module-path"].contains(&a.as_str())
                || ["-XX:", "-Xmx", "-Xms", "-Xss", "-Xlog", "-javaagent:", "-agentpath:"]
                    .iter()
                    .any(|p| a.starts_with(p))
        })
}

/// Every JVM on the host, by pid, and the processes that could not be read (another user's,
/// without privilege), each with why.
pub fn list() -> (Vec<JvmProcess>, Vec<Unreadable>) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let (mut found, mut unreadable) = (Vec::new(), Vec::new());
    for pid in pids().into_iter().filter(|p| *p != me) {
        // Kernel threads map nothing: skip them without reading their (empty) maps.
        if std::fs::read(format!("/proc/{pid}/cmdline")).map_or(true, |c| c.is_empty()) {
            continue;
        }
        match jvm(pid) {
            Ok(Some(j)) => found.push(j),
            Ok(None) => {}
            Err(u) => unreadable.push(u),
        }
    }
    (found, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn a_process_that_cannot_be_read_is_warned_of_only_if_it_may_be_a_jvm() {
        assert!(may_be_java(&line("/usr/lib/jvm/temurin-25/bin/java -jar app.jar")));
        assert!(may_be_java(&line("javaw -cp x Main")));
        assert!(may_be_java(&line("/opt/app/bin/launcher -Xmx2g -XX:+UseG1GC")));
        assert!(may_be_java(&line("/opt/app/bin/launcher -cp lib/* com.acme.Main")));
        assert!(!may_be_java(&line("/process_api --firecracker-init --addr 0.0.0.0:2024")));
        assert!(!may_be_java(&line("/sbin/init splash")));
        assert!(!may_be_java(&[]));
    }

    #[test]
    fn the_main_class_is_read_off_the_command_line_as_jps_does() {
        assert_eq!(main_of(&line("java -Xmx1g -jar /opt/app.jar --port 8080")), "/opt/app.jar");
        assert_eq!(main_of(&line("java -cp a.jar:b.jar -Dx=y com.acme.Main arg")), "com.acme.Main");
        assert_eq!(
            main_of(&line("java --module-path mods -m com.acme/com.acme.Main")),
            "com.acme.Main"
        );
        assert_eq!(
            main_of(&line("java --add-opens java.base/java.lang=ALL-UNNAMED --module=m/p.Main")),
            "p.Main"
        );
        assert_eq!(main_of(&line("java -version")), "");
        assert_eq!(main_of(&line("/usr/bin/java")), "");
    }

    #[test]
    fn this_test_process_is_no_jvm_and_a_gone_pid_is_none() {
        // SAFETY: getpid has no preconditions.
        assert_eq!(jvm(unsafe { libc::getpid() }), Ok(None));
        assert_eq!(jvm(i32::MAX), Ok(None));
    }
}
