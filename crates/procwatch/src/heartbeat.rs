//! The stallscope agent's heartbeat, read from shared memory without system calls, and its
//! table of Java thread names. The layout is documented in `docs/heartbeat.md`.
//!
//! Invariant: `read` is a handful of memory loads (acquire on `tick_count`, read twice so the
//! tick and its time are a consistent pair); only `liveness` touches `/proc`.

use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const MAGIC: &[u8; 8] = b"STSCPHB1";
pub const VERSION: u32 = 1;
const SIZE: usize = 4096;

/// Where each field lives in the page, named as the agent's writer (`Heartbeat.java`) names them.
mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 8;
    pub const PID: usize = 12;
    pub const PROC_STARTTIME: usize = 16;
    pub const RESOLUTION_NS: usize = 24;
    pub const LAST_TICK_NS: usize = 32;
    pub const TICK_COUNT: usize = 40;
    pub const STATE: usize = 48;
    pub const METER_TID: usize = 52;
    pub const START_NS: usize = 56;
    pub const START_EPOCH_MS: usize = 64;
    pub const INTERVAL_NS: usize = 72;
    pub const DELAY_NS: usize = 80;
}

/// State words, as the writer's `STATE_*` constants.
const STATE_RUNNING: u32 = 1;
const STATE_EXITED: u32 = 3;

/// The heartbeat's state word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MeterState {
    Starting,
    Running,
    /// The meter was stopped on request (the sidecar detached).
    Stopped,
    /// The JVM is exiting normally.
    Exited,
    Unknown(u32),
}

impl From<u32> for MeterState {
    fn from(v: u32) -> Self {
        match v {
            0 => MeterState::Starting,
            1 => MeterState::Running,
            2 => MeterState::Stopped,
            3 => MeterState::Exited,
            o => MeterState::Unknown(o),
        }
    }
}

/// One consistent reading of the heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Beat {
    pub pid: u32,
    pub proc_starttime: u64,
    pub resolution_ns: u64,
    /// `System.nanoTime()` (CLOCK_MONOTONIC) when the meter last woke.
    pub last_tick_ns: u64,
    pub tick_count: u64,
    pub state: MeterState,
    pub meter_tid: u32,
    pub start_ns: u64,
    pub start_epoch_ms: u64,
    pub interval_ns: u64,
    pub delay_ns: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// The pid no longer exists: the file is stale.
    Dead,
    /// The pid exists but is another process (its start time differs): stale.
    Reused,
}

/// Where the JVM `pid` has the heartbeat file at `path` mapped, plus the offset of its
/// `last_tick_ns`: the address of the meter's last tick in the JVM's own memory (the BPF
/// watchdog reads it there). Found by the file's inode, so a JVM in a container, which names the
/// file by another path, is found too. None when it is not mapped (yet) or maps cannot be read.
pub fn mapped_last_tick(pid: i32, path: &std::path::Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(path).ok()?.ino();
    let maps = crate::maps::read(pid).ok()?;
    maps.iter()
        .find(|m| m.inode == ino && m.offset == 0 && m.end - m.start >= SIZE as u64)
        .map(|m| m.start + off::LAST_TICK_NS as u64)
}

#[derive(Debug)]
pub struct Heartbeat {
    base: *const u8,
    pub path: PathBuf,
    /// The JVM's pid here, when known: the heartbeat holds its pid inside its own namespace.
    pid: Option<i32>,
    /// Once found alive: a pidfd of that process and its start time. Polling it tells that it
    /// exited without reading `/proc/PID/stat`, which sums over every thread of the JVM and was
    /// a fifth of the sidecar's time between stalls, checked ten times a second.
    pidfd: std::sync::OnceLock<Option<(std::os::fd::OwnedFd, u64)>>,
}

// The mapping is read-only and only read through atomics.
unsafe impl Send for Heartbeat {}
unsafe impl Sync for Heartbeat {}

/// Where the agent of `pid` puts its heartbeat: the JVM's own `$XDG_RUNTIME_DIR` (read from
/// its environment, which may differ from ours) when that is an absolute directory and the file
/// is there, else `/dev/shm`. A JVM in a container names it by its pid inside its namespace, in
/// its own filesystem: that place is reached through `/proc/<pid>/root`.
pub fn default_path(pid: i32) -> PathBuf {
    beside_heartbeat(pid, "heartbeat")
}

/// Where an agent loaded into `pid` by a tool leaves the one line saying why it did not start
/// (docs/heartbeat.md): beside where its heartbeat would be.
pub fn failure_note_path(pid: i32) -> PathBuf {
    beside_heartbeat(pid, "failed")
}

/// Takes (reads and removes) the agent's failure note for `pid`, if one is there and is the JVM's
/// own: a regular file (not a link) owned by the JVM's user, its first line, at most 1 KiB.
pub fn take_failure_note(pid: i32) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    let path = failure_note_path(pid);
    let f = crate::ns::open_reached(&path, libc::O_RDONLY | libc::O_NONBLOCK).ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || m.uid() != owner {
        return None;
    }
    let mut text = String::new();
    f.take(1024).read_to_string(&mut text).ok()?;
    let _ = std::fs::remove_file(&path);
    let line = text
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .collect::<String>();
    (!line.is_empty()).then_some(line)
}

/// A file of the agent's for `pid` with extension `ext`: in the JVM's $XDG_RUNTIME_DIR (or ours,
/// when we share its filesystem) when it is there, else in its /dev/shm.
fn beside_heartbeat(pid: i32, ext: &str) -> PathBuf {
    let name = format!("stallscope-{}.{ext}", crate::ns::nspid(pid));
    let root = crate::ns::root(pid);
    let theirs = std::fs::read(format!("/proc/{pid}/environ"))
        .ok()
        .and_then(|env| {
            env.split(|b| *b == 0).find_map(|kv| {
                kv.strip_prefix(b"XDG_RUNTIME_DIR=")
                    .map(|v| PathBuf::from(String::from_utf8_lossy(v).into_owned()))
            })
        })
        .filter(|d| d.is_absolute())
        .map(|d| crate::ns::reach(&root, &d));
    let ours =
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|_| root == Path::new("/"));
    for dir in [theirs, ours].into_iter().flatten() {
        if dir.is_absolute() && dir.is_dir() && dir.join(&name).exists() {
            return dir.join(name);
        }
    }
    crate::ns::reach(&root, Path::new("/dev/shm")).join(name)
}

/// Reads the thread table at `path` (see [`threads_path`]) as [`Heartbeat::open`] opens the
/// heartbeat, at most 4 MiB of it.
pub fn read_threads(path: &Path) -> io::Result<Vec<JavaThread>> {
    use std::io::Read;
    let f = crate::ns::open_reached(path, libc::O_RDONLY | libc::O_NONBLOCK)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not a regular file", path.display()),
        ));
    }
    let mut text = String::new();
    f.take(4 << 20).read_to_string(&mut text)?;
    Ok(parse_threads(&text))
}

/// The thread table beside a heartbeat file.
pub fn threads_path(heartbeat: &Path) -> PathBuf {
    heartbeat.with_extension("threads")
}

impl Heartbeat {
    /// Opens the heartbeat at `path`: a regular file, never through a link at its last component
    /// nor (under `/proc/<pid>/root`) out of the JVM's filesystem.
    pub fn open(path: &Path) -> io::Result<Heartbeat> {
        let f = crate::ns::open_reached(path, libc::O_RDONLY | libc::O_NONBLOCK)?;
        let m = f.metadata()?;
        if !m.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a regular file", path.display()),
            ));
        }
        if m.len() < SIZE as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: shorter than a heartbeat ({SIZE} bytes)", path.display()),
            ));
        }
        // SAFETY: a read-only shared mapping of an open file, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let hb = Heartbeat {
            base: p as *const u8,
            path: path.to_path_buf(),
            pid: None,
            pidfd: std::sync::OnceLock::new(),
        };
        // SAFETY: within the mapping.
        let magic = unsafe { std::slice::from_raw_parts(hb.base.add(off::MAGIC), MAGIC.len()) };
        if magic != MAGIC {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a stallscope heartbeat (bad magic)", path.display()),
            ));
        }
        if hb.u32(off::VERSION) != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: heartbeat version {} (this stallscope reads {VERSION})",
                    path.display(),
                    hb.u32(off::VERSION)
                ),
            ));
        }
        Ok(hb)
    }

    fn u64(&self, off: usize) -> u64 {
        // SAFETY: 8-aligned offsets inside the page; the writer uses atomic stores.
        u64::from_le(unsafe { &*(self.base.add(off) as *const AtomicU64) }.load(Ordering::Acquire))
    }

    fn u32(&self, off: usize) -> u32 {
        // SAFETY: 4-aligned offsets inside the page.
        u32::from_le(unsafe { &*(self.base.add(off) as *const AtomicU32) }.load(Ordering::Acquire))
    }

    /// A consistent reading: `tick_count` is read before and after `last_tick_ns`; the writer
    /// stores the time first and the count after it with release semantics.
    pub fn read(&self) -> Beat {
        let (mut count, mut last) = (self.u64(off::TICK_COUNT), self.u64(off::LAST_TICK_NS));
        for _ in 0..8 {
            let again = self.u64(off::TICK_COUNT);
            if again == count {
                break;
            }
            count = again;
            last = self.u64(off::LAST_TICK_NS);
        }
        Beat {
            pid: self.u32(off::PID),
            proc_starttime: self.u64(off::PROC_STARTTIME),
            resolution_ns: self.u64(off::RESOLUTION_NS),
            last_tick_ns: last,
            tick_count: count,
            state: MeterState::from(self.u32(off::STATE)),
            meter_tid: self.u32(off::METER_TID),
            start_ns: self.u64(off::START_NS),
            start_epoch_ms: self.u64(off::START_EPOCH_MS),
            interval_ns: self.u64(off::INTERVAL_NS),
            delay_ns: self.u64(off::DELAY_NS),
        }
    }

    /// The heartbeat of the JVM that is `pid` here (in a container, the heartbeat holds its pid
    /// there): its liveness is judged by `pid`.
    pub fn of_pid(mut self, pid: i32) -> Heartbeat {
        self.pid = Some(pid);
        self.pidfd = std::sync::OnceLock::new();
        self
    }

    /// Whether the JVM that wrote this file is still the process behind its pid.
    pub fn liveness(&self) -> Liveness {
        let b = self.read();
        let pid = self.pid.unwrap_or(b.pid as i32);
        let judge = |start: u64| {
            if b.proc_starttime != 0 && start != b.proc_starttime {
                Liveness::Reused
            } else {
                Liveness::Alive
            }
        };
        if let Some(Some((fd, start))) = self.pidfd.get() {
            return if exited(fd) { Liveness::Dead } else { judge(*start) };
        }
        // The pidfd first, then the start time: the process that pid is now has that start time.
        let fd = crate::task::pidfd_open(pid);
        let Some(start) = crate::task::process_starttime(pid) else { return Liveness::Dead };
        let _ = self.pidfd.set(fd.map(|fd| (fd, start)));
        judge(start)
    }
}

/// Whether the process of a pidfd has exited (it is readable then).
fn exited(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, SIZE) };
    }
}

/// Publishes a heartbeat in the same layout, for native programs (the lab's native workloads)
/// so that the recorder can watch them as it watches a JVM.
pub struct HeartbeatWriter {
    base: *mut u8,
    pub path: PathBuf,
    ticks: u64,
}

unsafe impl Send for HeartbeatWriter {}

impl HeartbeatWriter {
    /// Creates `default_path(own pid)` (mode 0600) and marks the meter running.
    pub fn create(resolution_ns: u64) -> io::Result<HeartbeatWriter> {
        use std::os::unix::fs::OpenOptionsExt;
        let pid = std::process::id();
        let path = default_path(pid as i32);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        f.set_len(SIZE as u64)?;
        // SAFETY: a shared read-write mapping of the file, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let w = HeartbeatWriter { base: p as *mut u8, path, ticks: 0 };
        // SAFETY: header bytes inside the page, written before anyone reads state.
        unsafe {
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), w.base.add(off::MAGIC), MAGIC.len())
        };
        w.store32(off::VERSION, VERSION);
        w.store32(off::PID, pid);
        w.store64(off::PROC_STARTTIME, crate::task::process_starttime(pid as i32).unwrap_or(0));
        w.store64(off::RESOLUTION_NS, resolution_ns);
        w.store32(off::METER_TID, unsafe { libc::gettid() } as u32);
        let now = crate::clock::mono_ns();
        w.store64(off::START_NS, now);
        w.store64(
            off::START_EPOCH_MS,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        );
        w.store64(off::LAST_TICK_NS, now);
        w.store32(off::STATE, STATE_RUNNING);
        Ok(w)
    }

    fn store64(&self, off: usize, v: u64) {
        // SAFETY: 8-aligned offsets inside the page.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }.store(v.to_le(), Ordering::Release);
    }

    fn store32(&self, off: usize, v: u32) {
        // SAFETY: 4-aligned offsets inside the page.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }.store(v.to_le(), Ordering::Release);
    }

    /// One tick: the time first, then the count (release), as readers expect.
    pub fn tick(&mut self) {
        self.store64(off::LAST_TICK_NS, crate::clock::mono_ns());
        self.ticks += 1;
        self.store64(off::TICK_COUNT, self.ticks);
    }
}

impl Drop for HeartbeatWriter {
    fn drop(&mut self) {
        self.store32(off::STATE, STATE_EXITED);
        // SAFETY: the mapping made in `create`.
        unsafe { libc::munmap(self.base as *mut libc::c_void, SIZE) };
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One row of the agent's thread table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JavaThread {
    pub tid: i32,
    pub java_id: u64,
    /// How the agent matched it to a native thread: `self`, `comm`, `cputime`, `ambiguous`.
    pub matched: String,
    pub daemon: bool,
    pub name: String,
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('t') => out.push('\t'),
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parses the thread table (`# stallscope threads v1 <pid> <nanotime>`, then
/// `tid<TAB>java id<TAB>match<TAB>daemon<TAB>name` lines). Malformed lines are skipped.
pub fn parse_threads(text: &str) -> Vec<JavaThread> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let mut f = l.splitn(5, '\t');
            Some(JavaThread {
                tid: f.next()?.parse().ok()?,
                java_id: f.next()?.parse().ok()?,
                matched: f.next()?.to_string(),
                daemon: f.next()? == "1",
                name: unescape(f.next()?),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_table_lines() {
        let t = parse_threads(
            "# stallscope threads v1 42 123\n7\t1\tcomm\t0\tmain\n9\t14\tcputime\t1\tpool-1-thread-1\\tx\\\\y\nbroken\n",
        );
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].name, "pool-1-thread-1\tx\\y");
        assert!(t[1].daemon);
    }

    #[test]
    fn the_offsets_are_the_agents() {
        let java =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
                "../../java/agent-core/src/main/java/io/stallscope/agent/core/Heartbeat.java",
            ))
            .unwrap();
        let named = |name: &str| -> usize {
            let l = java
                .lines()
                .find(|l| l.contains(&format!(" {name} = ")))
                .unwrap_or_else(|| panic!("{name} is not in Heartbeat.java"));
            l.split('=').nth(1).unwrap().trim().trim_end_matches(';').parse().unwrap()
        };
        let ours = [
            ("OFF_MAGIC", off::MAGIC),
            ("OFF_VERSION", off::VERSION),
            ("OFF_PID", off::PID),
            ("OFF_PROC_STARTTIME", off::PROC_STARTTIME),
            ("OFF_RESOLUTION_NS", off::RESOLUTION_NS),
            ("OFF_LAST_TICK_NS", off::LAST_TICK_NS),
            ("OFF_TICK_COUNT", off::TICK_COUNT),
            ("OFF_STATE", off::STATE),
            ("OFF_METER_TID", off::METER_TID),
            ("OFF_START_NS", off::START_NS),
            ("OFF_START_EPOCH_MS", off::START_EPOCH_MS),
            ("OFF_INTERVAL_NS", off::INTERVAL_NS),
            ("OFF_DELAY_NS", off::DELAY_NS),
            ("STATE_RUNNING", STATE_RUNNING as usize),
            ("STATE_EXITED", STATE_EXITED as usize),
            ("VERSION", VERSION as usize),
        ];
        for (name, v) in ours {
            assert_eq!(named(name), v, "{name}");
        }
    }

    #[test]
    fn the_writer_and_the_reader_agree() {
        let mut w = HeartbeatWriter::create(1_000_000).unwrap();
        let r = Heartbeat::open(&w.path).unwrap();
        let before = r.read();
        w.tick();
        w.tick();
        let after = r.read();
        assert_eq!(after.tick_count, before.tick_count + 2);
        assert!(after.last_tick_ns >= before.last_tick_ns);
        assert_eq!(after.state, MeterState::Running);
        assert_eq!(r.liveness(), Liveness::Alive);
        let path = w.path.clone();
        drop(w);
        assert!(!path.exists(), "removed on drop");
    }

    /// Liveness follows the process itself (its pidfd once found alive): dead once it exited,
    /// reaped or not.
    #[test]
    fn a_heartbeat_s_process_is_dead_once_it_exits() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let p = std::env::temp_dir().join(format!("stallscope-hb-exit-{}.heartbeat", pid));
        let mut page = vec![0u8; SIZE];
        page[..8].copy_from_slice(MAGIC);
        page[8..12].copy_from_slice(&VERSION.to_le_bytes());
        page[12..16].copy_from_slice(&(pid as u32).to_le_bytes());
        let start = crate::task::process_starttime(pid).unwrap();
        page[16..24].copy_from_slice(&start.to_le_bytes());
        std::fs::write(&p, &page).unwrap();
        let hb = Heartbeat::open(&p).unwrap();
        assert_eq!(hb.liveness(), Liveness::Alive);
        assert_eq!(hb.liveness(), Liveness::Alive, "the second look, through the pidfd");
        child.kill().unwrap();
        // Not reaped yet: a zombie has exited.
        let dead = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            hb.liveness() == Liveness::Dead
        });
        let _ = child.wait();
        assert!(dead, "an exited process is dead before it is reaped");
        assert_eq!(hb.liveness(), Liveness::Dead);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn reads_a_heartbeat_written_to_the_documented_layout() {
        let p = std::env::temp_dir()
            .join(format!("stallscope-hb-test-{}.heartbeat", std::process::id()));
        let mut page = vec![0u8; SIZE];
        page[..8].copy_from_slice(MAGIC);
        page[8..12].copy_from_slice(&1u32.to_le_bytes());
        page[12..16].copy_from_slice(&std::process::id().to_le_bytes());
        page[16..24].copy_from_slice(
            &crate::task::process_starttime(std::process::id() as i32).unwrap().to_le_bytes(),
        );
        page[24..32].copy_from_slice(&1_000_000u64.to_le_bytes());
        page[32..40].copy_from_slice(&555u64.to_le_bytes());
        page[40..48].copy_from_slice(&7u64.to_le_bytes());
        page[48..52].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&p, &page).unwrap();
        let hb = Heartbeat::open(&p).unwrap();
        let b = hb.read();
        assert_eq!(
            (b.last_tick_ns, b.tick_count, b.state, b.resolution_ns),
            (555, 7, MeterState::Running, 1_000_000)
        );
        assert_eq!(hb.liveness(), Liveness::Alive);
        page[16..24].copy_from_slice(&1u64.to_le_bytes());
        std::fs::write(&p, &page).unwrap();
        assert_eq!(hb.liveness(), Liveness::Reused, "a different start time means another process");
        page[0] = b'X';
        std::fs::write(&p, &page).unwrap();
        assert!(Heartbeat::open(&p).unwrap_err().to_string().contains("bad magic"));
        std::fs::remove_file(&p).unwrap();
    }
}
