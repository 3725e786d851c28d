//! Reading a `/proc` or cgroup file whole, in as few system calls as it allows.
//!
//! `std::fs::read_to_string` asks such a file its size (`statx`: 0), then reads it in small
//! probes that double from 32 bytes: nine reads for `/proc/vmstat`, each one a pass of the
//! kernel's `seq_file` code. A stall's system sample reads a dozen of them every 50 ms. Here one
//! open, one read into a buffer large enough for nearly all of them, and one close; a second
//! read to find the end only where a short read may not be the end.
//!
//! When is a short read the end? `seq_file` stops a read early only when its own buffer (a page,
//! grown for one record larger than that) cannot take the next record: a file that lists records
//! (`/proc/vmstat`, `/proc/interrupts`, a cgroup's `cgroup.procs`) may give less than asked
//! before its end. A file whose text is made by one `show` (`single_open`: a process's `stat`,
//! `status`, `schedstat`, `wchan`, `cgroup`, `io`; `/proc/stat`, `pressure/*`, `meminfo`; a
//! cgroup's control files) comes whole in a read large enough, and the read that would find its
//! end costs as much as the first: at an offset past 0, `seq_file` runs `show` again from the
//! start to find its place (for `memory.stat`, flushing the cgroup's counters once more).
//!
//! The machine's own files under `/proc` (`vmstat`, `stat`, `interrupts`, `pressure/*`, `sys/…`:
//! not a process's) are opened once and read again from their start (`pread` at 0 makes
//! `seq_file` build them afresh): a stall's looks read a dozen of them, and each open walks the
//! path. A process's files and cgroup files are opened at every read: kept open for good they
//! would hold an exited process's or a removed cgroup's kernel objects, and grow with the churn.
//! Only an owner that lives as long as one watched process keeps its files open ([`Kept`]),
//! and closes them with it.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Enough for `/proc/vmstat`, `/proc/interrupts` on a few dozen CPUs, a cgroup's `memory.stat`
/// and a process's `status`; a larger file is read on into a buffer twice the size, and so on.
const FIRST_READ: usize = 16 << 10;

/// The file's whole text (invalid UTF-8 is an error, as with `std::fs::read_to_string`).
pub fn read(path: impl AsRef<Path>) -> std::io::Result<String> {
    let mut buf = Vec::new();
    read_into(path, &mut buf)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The same into `buf` (its allocation kept from one file to the next: a look at every process
/// reads hundreds), as text.
pub fn read_into(path: impl AsRef<Path>, buf: &mut Vec<u8>) -> std::io::Result<&str> {
    let path = path.as_ref();
    let kept = machine_file(path).then(|| kept_open(path)).flatten();
    let once = made_whole(path);
    match kept {
        Some(f) if whole(buf, once, |b, at| f.read_at(b, at)).is_ok() => {}
        _ => {
            if kept.is_some() {
                forget(path);
            }
            let mut f = File::open(path)?;
            whole(buf, once, |b, _| f.read(b))?;
        }
    }
    std::str::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Whether `path` is a file whose text one `show` makes (see the module's notes): a read shorter
/// than asked for is its end. A file not known to be is read until a read gives nothing.
fn made_whole(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Ok(rest) = path.strip_prefix("/sys/fs/cgroup") {
        // Control files, each one value or one table; the lists of members iterate.
        return rest.components().count() > 0
            && !matches!(name, "cgroup.procs" | "cgroup.threads" | "tasks");
    }
    let Ok(rest) = path.strip_prefix("/proc") else { return false };
    // Its first components, the rest none (no allocation: the sampler reads through here).
    let mut it = rest.iter().map(|c| c.to_str().unwrap_or("\0"));
    let parts: [Option<&str>; 5] = std::array::from_fn(|_| it.next());
    match parts {
        [Some("stat" | "uptime" | "loadavg" | "meminfo"), None, ..]
        | [Some("pressure"), Some(_), None, ..] => true,
        // A process's or a thread's own files (`/proc/PID/…`, `/proc/PID/task/TID/…`).
        [Some(pid), Some(file), None, ..]
        | [Some(pid), Some("task"), Some(_), Some(file), None]
            if pid.bytes().all(|b| b.is_ascii_digit()) || pid == "self" =>
        {
            matches!(
                file,
                "stat" | "status" | "schedstat" | "wchan" | "cgroup" | "io" | "statm" | "comm"
            )
        }
        _ => false,
    }
}

/// Reads a whole file into `buf` with `read(buf, offset)` until it gives no more, or, for a file
/// one `show` makes (`once`), until a read gives less than asked.
fn whole(
    buf: &mut Vec<u8>,
    once: bool,
    mut read: impl FnMut(&mut [u8], u64) -> std::io::Result<usize>,
) -> std::io::Result<()> {
    buf.clear();
    buf.resize(FIRST_READ.max(buf.capacity()), 0);
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let asked = buf.len() - n;
        match read(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(got) if once && got < asked => {
                n += got;
                break;
            }
            Ok(got) => n += got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(())
}

/// The machine's files under `/proc` that are kept open: a fixed few, never a process's.
fn machine_file(path: &Path) -> bool {
    const KEPT: [&str; 9] = [
        "vmstat",
        "stat",
        "interrupts",
        "pressure",
        "uptime",
        "loadavg",
        "meminfo",
        "sys",
        "diskstats",
    ];
    let first = path.strip_prefix("/proc").ok().and_then(|rest| rest.components().next());
    first.and_then(|c| c.as_os_str().to_str()).is_some_and(|c| KEPT.contains(&c))
}

/// The open file kept for `path`, opened now if it is not yet.
fn kept_open(path: &Path) -> Option<Arc<File>> {
    let mut kept = KEPT_OPEN.lock().unwrap_or_else(|p| p.into_inner());
    let kept = kept.get_or_insert_with(HashMap::new);
    if let Some(f) = kept.get(path) {
        return Some(Arc::clone(f));
    }
    let f = Arc::new(File::open(path).ok()?);
    kept.insert(path.to_path_buf(), Arc::clone(&f));
    Some(f)
}

/// Closes the file kept for `path` (a read of it failed: it is opened afresh).
fn forget(path: &Path) {
    if let Some(kept) = KEPT_OPEN.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        kept.remove(path);
    }
}

static KEPT_OPEN: Mutex<Option<HashMap<PathBuf, Arc<File>>>> = Mutex::new(None);

/// Files kept open by their owner, for as long as it lives, and read again from their start:
/// a guarded JVM's own cgroup files, read at each of a stall's looks (opening a cgroup file
/// walks its path: 5–6 µs of the 7 a read of `memory.stat` takes here). Owned by what guards
/// that JVM, so they are closed with it, and never outlive the process they describe.
#[derive(Default)]
pub struct Kept {
    files: Mutex<HashMap<PathBuf, File>>,
}

impl Kept {
    /// The file's whole text, through the descriptor kept for it (opened now if there is none,
    /// and again once if a read through it fails).
    pub fn read(&self, path: impl AsRef<Path>) -> std::io::Result<String> {
        let path = path.as_ref();
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        let mut buf = Vec::new();
        let once = made_whole(path);
        let through_kept = files.get(path).map(|f| whole(&mut buf, once, |b, at| f.read_at(b, at)));
        if !matches!(through_kept, Some(Ok(()))) {
            files.remove(path);
            let f = File::open(path)?;
            whole(&mut buf, once, |b, at| f.read_at(b, at))?;
            files.insert(path.to_path_buf(), f);
        }
        String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    /// How many files are kept open.
    pub fn len(&self) -> usize {
        self.files.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_file_is_read_whole_whatever_its_size() {
        // Small, a few KiB, and a regular file larger than the first read.
        let stat = read("/proc/self/stat").unwrap();
        assert!(stat.starts_with(&format!("{} (", std::process::id())), "{stat}");
        let maps = read("/proc/self/maps").unwrap();
        assert!(maps.lines().count() > 3 && maps.ends_with('\n'), "{maps}");
        let big = std::env::temp_dir().join(format!("procfile-{}", std::process::id()));
        let text = "x".repeat(3 * FIRST_READ + 5);
        std::fs::write(&big, &text).unwrap();
        let got = read(&big);
        std::fs::remove_file(&big).unwrap();
        assert_eq!(got.unwrap(), text);
        assert_eq!(read("/nonexistent/file").unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn a_kept_file_is_read_afresh_from_one_descriptor_and_reopened_once_replaced() {
        let dir = std::env::temp_dir().join(format!("procfile-kept-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("memory.stat");
        std::fs::write(&f, "pgscan 1\n").unwrap();
        let kept = Kept::default();
        assert_eq!(kept.read(&f).unwrap(), "pgscan 1\n");
        // Written in place: the same descriptor reads the new text.
        std::io::Write::write_all(
            &mut std::fs::OpenOptions::new().write(true).open(&f).unwrap(),
            b"pgscan 2\n",
        )
        .unwrap();
        assert_eq!(kept.read(&f).unwrap(), "pgscan 2\n");
        assert_eq!(kept.len(), 1);
        // /proc's own files, read through it, move between reads.
        let ctxt = |t: &str| -> u64 {
            t.lines().find_map(|l| l.strip_prefix("ctxt ")).unwrap().trim().parse().unwrap()
        };
        let a = ctxt(&kept.read("/proc/stat").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(ctxt(&kept.read("/proc/stat").unwrap()) > a);
        // Gone: an error, and nothing kept for it.
        std::fs::remove_dir_all(&dir).unwrap();
        let before = kept.len();
        assert!(kept.read(dir.join("missing")).is_err());
        assert_eq!(kept.len(), before);
    }

    #[test]
    fn the_machines_files_are_kept_open_and_read_afresh_a_processs_are_not() {
        assert!(machine_file(Path::new("/proc/vmstat")));
        assert!(machine_file(Path::new("/proc/pressure/io")));
        assert!(machine_file(Path::new("/proc/sys/kernel/hostname")));
        for p in
            ["/proc/self/stat", "/proc/1/status", "/proc", "/sys/fs/cgroup/cpu.stat", "/procx/stat"]
        {
            assert!(!machine_file(Path::new(p)), "{p}");
        }
        // Read twice through the same open file: the second is the file as it is now.
        let count = |t: &str| -> u64 {
            let l = t.lines().find(|l| l.starts_with("ctxt ")).unwrap();
            l[5..].trim().parse().unwrap()
        };
        let first = count(&read("/proc/stat").unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = count(&read("/proc/stat").unwrap());
        assert!(second > first, "{first} then {second}");
        assert!(kept_open(Path::new("/proc/stat")).is_some());
        let uptime = read("/proc/uptime").unwrap();
        assert!(uptime.ends_with('\n') && uptime.split_whitespace().count() == 2, "{uptime}");
    }

    #[test]
    fn a_file_one_show_makes_is_read_once_and_a_list_of_records_to_its_end() {
        for p in [
            "/proc/self/status",
            "/proc/self/task/1/schedstat",
            "/proc/42/stat",
            "/proc/stat",
            "/proc/pressure/memory",
            "/sys/fs/cgroup/memory/memory.stat",
            "/sys/fs/cgroup/cpu.stat",
        ] {
            assert!(made_whole(Path::new(p)), "{p}");
        }
        for p in [
            "/proc/vmstat",
            "/proc/interrupts",
            "/proc/self/maps",
            "/proc/diskstats",
            "/sys/fs/cgroup/memory/cgroup.procs",
            "/sys/fs/cgroup/pids/tasks",
            "/proc/self/task",
            "/tmp/stat",
        ] {
            assert!(!made_whole(Path::new(p)), "{p}");
        }
        // Counted: one read for a file one show makes, where the loop takes two; the same text.
        let reads = |path: &str, once: bool| {
            let f = File::open(path).unwrap();
            let (mut buf, mut n) = (Vec::new(), 0);
            whole(&mut buf, once, |b, at| {
                n += 1;
                f.read_at(b, at)
            })
            .unwrap();
            (String::from_utf8(buf).unwrap(), n)
        };
        let (once, n) = reads("/proc/self/cgroup", true);
        let (looped, m) = reads("/proc/self/cgroup", false);
        assert_eq!((n, m), (1, 2));
        assert_eq!(once, looped);
        let (status, _) = reads("/proc/self/status", true);
        assert!(status.contains("\nnonvoluntary_ctxt_switches:"), "read to its end: {status}");
        // A file larger than the first read is read on, even when one show makes it.
        let dir = std::env::temp_dir().join(format!("procfile-{}", std::process::id()));
        std::fs::write(&dir, "x".repeat(FIRST_READ * 3 + 7)).unwrap();
        let (big, _) = reads(dir.to_str().unwrap(), true);
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(big.len(), FIRST_READ * 3 + 7);
    }
}
