//! A process as seen from inside its own namespaces (a container): its pid and thread ids there
//! (`NSpid` in `/proc/<pid>/status`), and where its filesystem is reached from here
//! (`/proc/<pid>/root`, as jattach reaches it, when its mount namespace is not ours).
//!
//! Invariant: for a process in our own namespaces every function here is the identity (its pid,
//! `/`, no thread to translate), so callers need no second code path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The last `NSpid` field of a `status` file: the id in the innermost pid namespace.
fn innermost(status: &str) -> Option<i32> {
    status.lines().find_map(|l| l.strip_prefix("NSpid:")).and_then(|v| v.split_whitespace().last()).and_then(|n| n.parse().ok())
}

/// `pid`'s own pid inside its pid namespace (`pid` itself in ours, or when it cannot be read).
pub fn nspid(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok().and_then(|s| innermost(&s)).unwrap_or(pid)
}

/// Whether `pid` sees another filesystem than ours (another mount namespace).
pub fn other_mount_ns(pid: i32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/mnt")).ok();
    let theirs = ns(&pid.to_string());
    theirs.is_some() && theirs != ns("self")
}

/// Where `pid`'s `/` is reached from here: `/` in our mount namespace, else `/proc/<pid>/root`.
pub fn root(pid: i32) -> PathBuf {
    if other_mount_ns(pid) { PathBuf::from(format!("/proc/{pid}/root")) } else { PathBuf::from("/") }
}

/// `path` as `pid` names it (absolute, in its filesystem), reached from here through `root`.
pub fn reach(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Thread ids of `pid` as its own namespace numbers them, mapped to ours. Empty when `pid` is
/// in our pid namespace (nothing to translate).
pub fn host_tids(pid: i32) -> HashMap<i32, i32> {
    let mut out = HashMap::new();
    if nspid(pid) == pid {
        return out;
    }
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if let Some(inner) = std::fs::read_to_string(e.path().join("status")).ok().and_then(|s| innermost(&s)) {
            out.insert(inner, tid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_is_seen_as_itself() {
        let me = std::process::id() as i32;
        assert_eq!(nspid(me), me);
        assert!(!other_mount_ns(me));
        assert_eq!(root(me), PathBuf::from("/"));
        assert!(host_tids(me).is_empty());
        assert_eq!(reach(Path::new("/"), Path::new("/dev/shm/x")), PathBuf::from("/dev/shm/x"));
        assert_eq!(reach(Path::new("/proc/7/root"), Path::new("/dev/shm/x")), PathBuf::from("/proc/7/root/dev/shm/x"));
    }

    #[test]
    fn the_innermost_pid_is_the_last_of_nspid() {
        assert_eq!(innermost("Name:\tjava\nNSpid:\t4242\t8\n"), Some(8));
        assert_eq!(innermost("NSpid:\t4242\n"), Some(4242));
        assert_eq!(innermost("Name:\tjava\n"), None);
    }
}
