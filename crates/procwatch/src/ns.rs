//! A process as seen from inside its own namespaces (a container): its pid and thread ids there
//! (`NSpid` in `/proc/<pid>/status`), and where its filesystem is reached from here
//! (`/proc/<pid>/root`, as jattach reaches it, when its mount namespace is not ours).
//!
//! Invariant: for a process in our own namespaces every function here is the identity (its pid,
//! `/`, no thread to translate), so callers need no second code path.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};

/// The `NSpid` ids of a `status` file, outermost (ours) first: one in our pid namespace.
fn nspids(status: &str) -> Vec<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| v.split_whitespace().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// The last `NSpid` field of a `status` file: the id in the innermost pid namespace.
fn innermost(status: &str) -> Option<i32> {
    nspids(status).last().copied()
}

/// `pid`'s own pid inside its pid namespace (`pid` itself in ours, or when it cannot be read).
pub fn nspid(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| innermost(&s))
        .unwrap_or(pid)
}

/// The inode of the initial pid namespace (the kernel's `PROC_PID_INIT_INO`, fixed).
const INIT_PID_NS_INO: u64 = 0xEFFF_FFFC;

/// Whether we number processes as the kernel's own events do (we are in the initial pid
/// namespace), so that ids read in our `/proc` are those BPF programs see.
pub fn host_numbering() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").is_ok_and(|m| m.ino() == INIT_PID_NS_INO)
}

/// Whether `pid` is in another namespace of this kind (`mnt`, `pid`) than ours.
fn other_ns(pid: i32, kind: &str) -> bool {
    ns_links(pid, kind).is_some_and(|(theirs, ours)| Some(theirs) != ours)
}

/// Whether `/proc` is our pid namespace's: our own `NSpid` there has one entry (read once).
fn proc_numbers_as_we_do() -> bool {
    static OURS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|s| nspids(&s).len() == 1)
    })
}

/// `pid`'s namespace link of this kind (`mnt`, `pid`), and ours, when theirs can be read.
fn ns_links(pid: i32, kind: &str) -> Option<(PathBuf, Option<PathBuf>)> {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/{kind}")).ok();
    Some((ns(&pid.to_string())?, ns("self")))
}

/// Whether `pid` is known to be in our namespace of this kind (its link read, and ours).
fn same_ns(pid: i32, kind: &str) -> bool {
    ns_links(pid, kind).is_some_and(|(theirs, ours)| Some(theirs) == ours)
}

/// Whether `pid` sees another filesystem than ours (another mount namespace).
pub fn other_mount_ns(pid: i32) -> bool {
    other_ns(pid, "mnt")
}

/// Whether `pid` numbers processes otherwise than we do (another pid namespace).
pub fn other_pid_ns(pid: i32) -> bool {
    other_ns(pid, "pid")
}

/// Where `pid`'s `/` is reached from here: `/` in our mount namespace, else `/proc/<pid>/root`.
pub fn root(pid: i32) -> PathBuf {
    if other_mount_ns(pid) {
        PathBuf::from(format!("/proc/{pid}/root"))
    } else {
        PathBuf::from("/")
    }
}

/// `path` as `pid` names it (absolute, in its filesystem), reached from here through `root`.
pub fn reach(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Opens `path`, never leaving the filesystem it names: a path under `/proc/<pid>/root/` is
/// resolved inside that process's root (`openat2` with `RESOLVE_IN_ROOT`), so a link a container
/// planted (`/dev/shm -> /etc`) stays in the container instead of reaching ours; and the last
/// component is never followed (`O_NOFOLLOW`). `flags` are `open(2)` flags.
pub fn open_reached(path: &Path, flags: i32) -> std::io::Result<File> {
    use std::os::unix::ffi::OsStrExt;
    let text = path.as_os_str().as_bytes();
    let inside = text.strip_prefix(b"/proc/").and_then(|rest| {
        let slash = rest.iter().position(|b| *b == b'/')?;
        let (pid, after) = rest.split_at(slash);
        let rel = after.strip_prefix(b"/root/")?;
        (pid.iter().all(u8::is_ascii_digit) && !pid.is_empty())
            .then(|| (std::str::from_utf8(pid).unwrap_or("0").to_string(), rel.to_vec()))
    });
    let cstr = |b: &[u8]| {
        std::ffi::CString::new(b)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = match inside {
        None => {
            let c = cstr(text)?;
            // SAFETY: a valid C string; the result is checked.
            unsafe { libc::open(c.as_ptr(), flags) }
        }
        Some((pid, rel)) => {
            use std::os::unix::fs::OpenOptionsExt;
            let root = File::options()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(format!("/proc/{pid}/root"))?;
            let c = cstr(&rel)?;
            // SAFETY: open_how is plain data; zeroed is a valid value, then filled in.
            let mut how: libc::open_how = unsafe { std::mem::zeroed() };
            how.flags = flags as u64;
            how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
            // SAFETY: a directory descriptor we own, a valid C string and open_how of its size.
            unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    root.as_raw_fd(),
                    c.as_ptr(),
                    &how as *const libc::open_how,
                    std::mem::size_of::<libc::open_how>(),
                ) as i32
            }
        }
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Thread ids of `pid` as its own namespace numbers them, mapped to ours. Empty when `pid` is
/// in our pid namespace (nothing to translate).
pub fn host_tids(pid: i32) -> HashMap<i32, i32> {
    let mut out = HashMap::new();
    // Two links compared first: a process's `status` is the dearer read (measured: 3% of
    // `watch`'s CPU while one JVM stalled, read at every stall's start). Only where `/proc`
    // numbers as our namespace does: NSpid counts from the namespace `/proc` was mounted in,
    // and under `unshare -p -f` without a `/proc` of its own, its ids are the parent's.
    if proc_numbers_as_we_do() && same_ns(pid, "pid") {
        return out;
    }
    // In our pid namespace NSpid has one entry; the inner id can equal ours by chance.
    if std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |s| nspids(&s).len() < 2)
    {
        return out;
    }
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(inner) =
            std::fs::read_to_string(e.path().join("status")).ok().and_then(|s| innermost(&s))
        {
            out.insert(inner, tid);
        }
    }
    out
}

/// Our id of the thread `inner` names in its own pid namespace, by `host_tids`' map: itself when
/// the map is empty (our namespace), 0 when the thread is not there (gone, or not yet listed),
/// rather than another thread's id.
pub fn host_tid(map: &HashMap<i32, i32>, inner: i32) -> i32 {
    if map.is_empty() { inner } else { map.get(&inner).copied().unwrap_or(0) }
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
        assert_eq!(host_tid(&HashMap::new(), 42), 42);
        assert_eq!(host_tid(&HashMap::from([(8, 4242)]), 8), 4242);
        assert_eq!(host_tid(&HashMap::from([(8, 4242)]), 9), 0);
        assert_eq!(reach(Path::new("/"), Path::new("/dev/shm/x")), PathBuf::from("/dev/shm/x"));
        assert_eq!(
            reach(Path::new("/proc/7/root"), Path::new("/dev/shm/x")),
            PathBuf::from("/proc/7/root/dev/shm/x")
        );
    }

    #[test]
    fn a_path_reached_through_a_root_stays_inside_it() {
        let d = std::env::temp_dir().join(format!("procwatch-ns-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("file"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("file"), d.join("link")).unwrap();
        let me = std::process::id();
        // Our own root is / : the file opens, the link (last component) does not.
        let via_root =
            |name: &str| PathBuf::from(format!("/proc/{me}/root{}", d.join(name).display()));
        assert!(open_reached(&via_root("file"), libc::O_RDONLY).is_ok());
        assert!(
            open_reached(&via_root("link"), libc::O_RDONLY).is_err(),
            "the last component is not followed"
        );
        assert!(open_reached(&d.join("file"), libc::O_RDONLY).is_ok());
        assert!(open_reached(&d.join("link"), libc::O_RDONLY).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_innermost_pid_is_the_last_of_nspid() {
        assert_eq!(innermost("Name:\tjava\nNSpid:\t4242\t8\n"), Some(8));
        assert_eq!(innermost("NSpid:\t4242\n"), Some(4242));
        assert_eq!(innermost("Name:\tjava\n"), None);
    }
}
