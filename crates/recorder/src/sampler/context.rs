//! A stall's context (the target's maps and the page-cache residency of the files it maps) read
//! off the sampling loop: reading `/proc/<pid>/maps` takes the target's mmap_lock, and looking at
//! a mapped file opens it, so both can wait behind the very faults a stall is made of (measured:
//! the recorder held up to 146 ms by them in a mapped read from a slow disk; the maps thread
//! 590 ms, the whole stall, mapping a FUSE file to ask `mincore` while its pages were written
//! back).
//!
//! Invariants:
//! - The sampling loop never waits for a read. At most one is under way.
//! - A stall that begins while one is still out gets the newest maps read before it, marked with
//!   when they were read (`maps_t`); without any, none. Mappings of data files live long, so an
//!   older read still names the file a fault was on.
//! - Between stalls, the maps are read again once [`REFRESH`] has passed (the JVM runs then,
//!   and the read does not wait): the first stall after a file is mapped has it.
//! - A stall's read lists the maps afresh unless the process's virtual size (`statm`) is what it
//!   was at a listing less than [`REUSE`] old: a mapping made or removed since changes it. The
//!   files' pages (residency, dirty, under writeback) are read afresh at every stall either way.
//!   A listing costs the kernel a walk of every mapping and its path, under the target's
//!   mmap_lock; in a storm of stalls (a loop holding safepoints three times a second) it was a
//!   tenth of `watch`'s CPU.
//! - Every stall's context is written once.
//! - The target's files are looked at through descriptors opened once and kept (closed when
//!   watching ends), with `cachestat`: never mapped (mapping a FUSE file can wait for its
//!   writeback under the recorder's own mmap_lock, which its sampling loop then waits for, most
//!   likely in an allocation: measured, the loop held 191 ms in the first stall of every run,
//!   and never once the file was no longer mapped), and not closed at each look (closing a
//!   FUSE file writes its dirty pages back: the observer would start the very writeback the
//!   target's stores wait for). On FUSE and network file systems the recorder opens nothing:
//!   an open there drops the file's cached pages, writing dirty ones back under their lock. It
//!   borrows the target's own descriptor of the file (`pidfd_getfd`), or does without.
//!   What the open files hold (their dirty pages, their pages under writeback) is read first,
//!   before the maps, since that cannot wait.

use super::sources::data_file;
use procwatch::heartbeat::JavaThread;
use procwatch::maps;
use procwatch::pagecache::{self, FilePages};
use recording::StallContext;
use std::collections::HashMap;
use std::fs::File;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// How old the newest maps may get between stalls before they are read again.
pub(super) const REFRESH: Duration = Duration::from_secs(10);

/// One read of the maps and of what they say.
#[derive(Clone)]
struct Read {
    t: u64,
    maps: Vec<maps::Mapping>,
    mapped_files: Vec<(String, u64, u64)>,
    in_memory_files: Vec<String>,
    writeback_files: Vec<(String, u64, u64)>,
}

/// How old a listing of the maps may be and still serve a stall, the process's virtual size
/// unchanged since.
pub(super) const REUSE: Duration = Duration::from_secs(5);

/// The last listing of the maps: the process's virtual size then (in pages), when, and what it
/// said of code and files (with the files among them that live in memory).
struct Listed {
    size: u64,
    at: Instant,
    maps: Vec<maps::Mapping>,
    in_memory_files: Vec<String>,
}

/// The process's virtual size in pages (`statm`'s first field).
fn vm_pages(pid: i32) -> Option<u64> {
    procwatch::procfile::read(format!("/proc/{pid}/statm"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Data files mapped, and files mapped shared and writable, looked at per read (at most).
const MAX_DATA_FILES: usize = 16;
const MAX_SHARED_FILES: usize = 64;

/// The most files kept open for one target.
const MAX_OPEN: usize = 256;

/// The target's mapped files, opened once each through `/proc/<pid>/root` (its own mount
/// namespace) and kept open, by path and inode (a file replaced under the same name is opened
/// anew); a file that would not open is not tried again.
struct OpenFiles {
    pid: i32,
    open: HashMap<(String, u64), Option<File>>,
}

impl OpenFiles {
    fn pages(&mut self, m: &maps::Mapping) -> Option<FilePages> {
        let (pid, path) = (self.pid, &m.path);
        let key = (path.clone(), m.inode);
        if !self.open.contains_key(&key) && self.open.len() >= MAX_OPEN {
            return None;
        }
        let inode = m.inode;
        let f = self.open.entry(key).or_insert_with(|| {
            use std::os::unix::fs::OpenOptionsExt;
            let reached = format!("/proc/{pid}/root{path}");
            // On FUSE or a network file system an open drops the file's cached pages (writing
            // dirty ones back, under their lock: measured, a 300 ms pause of the JVM writing its
            // perf counters on slowfs): only the target's own descriptor is looked through there.
            if pagecache::remote_path(std::path::Path::new(&reached)) {
                return pagecache::borrow_fd(pid, path, inode);
            }
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOATIME | libc::O_CLOEXEC)
                .open(&reached)
                .or_else(|_| {
                    // O_NOATIME is refused for another user's file.
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                        .open(&reached)
                })
                .ok()
        });
        let f = f.as_ref()?;
        match pagecache::pages(f) {
            Ok(p) => Some(p),
            // Before Linux 6.5: residency by mincore where mapping cannot wait, no writeback.
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                pagecache::residency_of(f).ok().map(|r| FilePages {
                    total: r.total_pages,
                    cached: r.resident_pages,
                    ..Default::default()
                })
            }
            Err(_) => None,
        }
    }

    /// The state now of the files already open among `files` (no open, no wait).
    fn pages_if_open(&self, files: &[(String, u64)]) -> HashMap<(String, u64), FilePages> {
        files
            .iter()
            .filter_map(|k| {
                let f = self.open.get(k)?.as_ref()?;
                Some((k.clone(), pagecache::pages(f).ok()?))
            })
            .collect()
    }
}

/// One read: the open shared files' pages first (that cannot wait), then the maps (which wait
/// behind the target's mmap_lock), then the files newly mapped.
fn read(
    pid: i32,
    files: &mut OpenFiles,
    shared_before: &mut Vec<(String, u64)>,
    listed: &mut Option<Listed>,
) -> Read {
    let early = files.pages_if_open(shared_before);
    let size = vm_pages(pid);
    let reused = listed
        .as_ref()
        .filter(|l| Some(l.size) == size && l.at.elapsed() < REUSE)
        .map(|l| (l.maps.clone(), l.in_memory_files.clone()));
    let (m, in_memory_files) = match reused {
        Some(r) => r,
        None => {
            // What a stall's context keeps of them: code and files (anonymous memory aside).
            let m: Vec<maps::Mapping> = maps::read(pid)
                .unwrap_or_default()
                .into_iter()
                .filter(|x| x.perms.contains('x') || x.is_file())
                .collect();
            let in_memory = in_memory_files(pid, &m);
            *listed = size.filter(|_| !m.is_empty()).map(|size| Listed {
                size,
                at: Instant::now(),
                maps: m.clone(),
                in_memory_files: in_memory.clone(),
            });
            (m, in_memory)
        }
    };
    let mut mapped_files: Vec<(String, u64, u64)> = Vec::new();
    for x in m.iter().filter(|x| data_file(x)) {
        if mapped_files.len() >= MAX_DATA_FILES || mapped_files.iter().any(|(p, _, _)| *p == x.path)
        {
            continue;
        }
        if let Some(p) = files.pages(x) {
            mapped_files.push((x.path.clone(), p.cached, p.total));
        }
    }
    let mut shared: Vec<&maps::Mapping> = Vec::new();
    for x in m.iter().filter(|x| x.is_shared_writable_file() && !x.path.starts_with("/dev/")) {
        if shared.len() < MAX_SHARED_FILES
            && !shared.iter().any(|s| s.path == x.path && s.inode == x.inode)
            && !in_memory_files.contains(&x.path)
        {
            shared.push(x);
        }
    }
    let writeback_files = shared
        .iter()
        .filter_map(|x| {
            let key = (x.path.clone(), x.inode);
            let pages = early.get(&key).copied().or_else(|| files.pages(x))?;
            Some((x.path.clone(), pages.dirty, pages.writeback))
        })
        .collect();
    let shared: Vec<(String, u64)> = shared.iter().map(|x| (x.path.clone(), x.inode)).collect();
    *shared_before = shared;
    Read { t: procwatch::clock::mono_ns(), maps: m, mapped_files, in_memory_files, writeback_files }
}

/// What went out to the reader thread: a stall's read, or a refresh between stalls (`None`).
struct Out {
    stall: Option<u32>,
    java_threads: Vec<JavaThread>,
}

/// The reader thread, what is out with it, and the newest read.
pub(super) struct ContextReader {
    jobs: Option<Sender<()>>,
    done: Receiver<Read>,
    out: Option<Out>,
    last: Option<Read>,
    /// When the last read went out (a refresh is due [`REFRESH`] after).
    asked_at: Option<Instant>,
}

impl ContextReader {
    pub(super) fn start(pid: i32) -> std::io::Result<ContextReader> {
        let (jobs, rx) = std::sync::mpsc::channel::<()>();
        let (tx, done) = std::sync::mpsc::channel::<Read>();
        std::thread::Builder::new().name("stallscope-maps".into()).spawn(move || {
            let mut files = OpenFiles { pid, open: HashMap::new() };
            let mut shared = Vec::new();
            let mut listed = None;
            while rx.recv().is_ok() {
                if tx.send(read(pid, &mut files, &mut shared, &mut listed)).is_err() {
                    return;
                }
            }
        })?;
        Ok(ContextReader { jobs: Some(jobs), done, out: None, last: None, asked_at: None })
    }

    /// Asks for stall `stall`'s maps. Returns the context to write now when a read is still out
    /// for an earlier stall: with the newest maps read before, if any. A refresh still out
    /// becomes this stall's read.
    pub(super) fn ask(
        &mut self,
        stall: u32,
        java_threads: Vec<JavaThread>,
    ) -> Option<StallContext> {
        match self.out.as_ref().map(|o| o.stall) {
            // A refresh out: it becomes this stall's read.
            Some(None) => {}
            Some(Some(_)) => return Some(self.newest_before(stall, java_threads)),
            None if self.send() => {}
            None => return Some(self.newest_before(stall, java_threads)),
        }
        self.out = Some(Out { stall: Some(stall), java_threads });
        None
    }

    /// Between stalls: reads the maps again when the newest read is older than [`REFRESH`].
    pub(super) fn refresh(&mut self) {
        if self.out.is_none() && self.asked_at.is_none_or(|a| a.elapsed() >= REFRESH) && self.send()
        {
            self.out = Some(Out { stall: None, java_threads: vec![] });
        }
    }

    fn send(&mut self) -> bool {
        let sent = self.jobs.as_ref().is_some_and(|j| j.send(()).is_ok());
        if sent {
            self.asked_at = Some(Instant::now());
        }
        sent
    }

    /// The context of the stall whose read came back, if one has (a refresh only updates the
    /// newest maps).
    pub(super) fn poll(&mut self) -> Option<StallContext> {
        while let Ok(r) = self.done.try_recv() {
            let out = self.out.take();
            self.last = Some(r.clone());
            if let Some(Out { stall: Some(stall), java_threads }) = out {
                return Some(context(stall, java_threads, r, false));
            }
        }
        None
    }

    /// At the end of watching: a stall's read still out, waited for up to `patience`, else that
    /// stall's context from the newest maps read before.
    pub(super) fn finish(&mut self, patience: Duration) -> Option<StallContext> {
        self.jobs = None;
        let Out { stall, java_threads } = self.out.take()?;
        let stall = stall?;
        match self.done.recv_timeout(patience) {
            Ok(r) => Some(context(stall, java_threads, r, false)),
            Err(_) => Some(self.newest_before(stall, java_threads)),
        }
    }

    /// A stall's context from the newest maps read before it (none yet: without maps).
    fn newest_before(&self, stall: u32, java_threads: Vec<JavaThread>) -> StallContext {
        match &self.last {
            Some(r) => context(stall, java_threads, r.clone(), true),
            None => StallContext {
                t: procwatch::clock::mono_ns(),
                stall,
                java_threads: crate::to_disk::all(java_threads),
                maps: vec![],
                mapped_files: vec![],
                in_memory_files: vec![],
                writeback_files: vec![],
                maps_t: None,
            },
        }
    }
}

/// Stall `stall`'s context from read `r`; `earlier`: the read was not made for this stall.
fn context(stall: u32, java_threads: Vec<JavaThread>, r: Read, earlier: bool) -> StallContext {
    StallContext {
        t: if earlier { procwatch::clock::mono_ns() } else { r.t },
        stall,
        java_threads: crate::to_disk::all(java_threads),
        maps: crate::to_disk::all(r.maps),
        mapped_files: r.mapped_files,
        in_memory_files: r.in_memory_files,
        writeback_files: r.writeback_files,
        maps_t: earlier.then_some(r.t),
    }
}

/// The files `pid` maps shared and writable that live on tmpfs or ramfs, looked up in the
/// target's own mount namespace (`/proc/<pid>/root`).
fn in_memory_files(pid: i32, m: &[maps::Mapping]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in m.iter().filter(|x| x.is_shared_writable_file()) {
        if out.contains(&x.path) || out.len() >= 64 {
            continue;
        }
        let reached = format!("/proc/{pid}/root{}", x.path);
        if pagecache::fs_type(std::path::Path::new(&reached))
            .is_some_and(|t| pagecache::IN_MEMORY.contains(&t))
        {
            out.push(x.path.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls until a read comes back as a stall's context.
    fn wait_for(r: &mut ContextReader) -> StallContext {
        let t0 = Instant::now();
        loop {
            if let Some(c) = r.poll() {
                return c;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the read never came back");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_stalls_maps_come_back_and_a_second_ask_meanwhile_gets_the_newest_before() {
        let mut r = ContextReader::start(std::process::id() as i32).unwrap();
        assert!(r.ask(1, vec![]).is_none(), "the first read goes out");
        let bare = r.ask(2, vec![]).expect("one read at a time: the second is written now");
        assert_eq!((bare.stall, bare.maps.len(), bare.maps_t), (2, 0, None), "nothing read yet");
        let c = wait_for(&mut r);
        assert_eq!((c.stall, c.maps_t), (1, None));
        assert!(c.maps.iter().any(|m| m.perms.contains('x')), "our own code is mapped");
        // Another read out: the next stall gets stall 1's maps, saying when they were read.
        assert!(r.ask(3, vec![]).is_none());
        let older = r.ask(4, vec![]).expect("written now");
        assert_eq!((older.stall, older.maps_t), (4, Some(c.t)));
        assert_eq!(older.maps, c.maps);
        assert_eq!(wait_for(&mut r).stall, 3);
        assert!(r.finish(Duration::from_secs(1)).is_none(), "nothing left out");
    }

    #[test]
    fn between_stalls_the_maps_are_read_again_and_a_refresh_out_becomes_the_stalls_read() {
        let mut r = ContextReader::start(std::process::id() as i32).unwrap();
        r.refresh();
        // A stall begins while the refresh is out: it takes that read over.
        assert!(r.ask(1, vec![]).is_none());
        let c = wait_for(&mut r);
        assert_eq!((c.stall, c.maps_t), (1, None));
        assert!(!c.maps.is_empty());
        // Just read: no refresh is due, so a stall's read goes out at once.
        r.refresh();
        assert!(r.ask(2, vec![]).is_none(), "no refresh was out");
        assert_eq!(wait_for(&mut r).stall, 2);
        // A refresh that comes back is kept, and no context is written for it.
        r.asked_at = Some(Instant::now() - REFRESH);
        r.refresh();
        let t0 = Instant::now();
        while r.out.is_some() {
            assert!(r.poll().is_none(), "a refresh is no stall's");
            assert!(t0.elapsed() < Duration::from_secs(20), "the refresh never came back");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(r.last.as_ref().is_some_and(|l| l.t > c.t));
    }

    #[test]
    fn a_file_mapped_shared_and_written_shows_its_dirty_pages_and_is_kept_open() {
        // A file on a disk (beside this test's executable: /tmp may be tmpfs, which keeps no
        // dirty count), mapped shared and written through the mapping.
        let exe = std::env::current_exe().unwrap();
        let path = exe.parent().unwrap().join(format!("context-dirty-{}.dat", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        file.set_len(8 * 4096).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a shared mapping of an open file of this length, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                8 * 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        for i in 0..8 {
            // SAFETY: within the mapping.
            unsafe { *(p as *mut u8).add(i * 4096) = 1 };
        }
        let me = std::process::id() as i32;
        let mut files = OpenFiles { pid: me, open: HashMap::new() };
        let mut shared = Vec::new();
        let r = read(me, &mut files, &mut shared, &mut None);
        let name = path.display().to_string();
        let found = r.writeback_files.iter().find(|(f, _, _)| *f == name).cloned();
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, 8 * 4096) };
        drop(file);
        let _ = std::fs::remove_file(&path);
        let (_, dirty, _) = found.expect("the shared writable file is looked at");
        assert!(dirty >= 1, "written through the mapping, not yet written back: {dirty}");
        assert!(shared.iter().any(|(f, _)| *f == name), "remembered for the next look");
        assert_eq!(files.open.len(), files.open.values().flatten().count(), "every file opened");
        // A second read opens nothing new: the descriptor is kept.
        let before = files.open.len();
        let _ = read(me, &mut files, &mut shared, &mut None);
        assert_eq!(files.open.len(), before);
    }

    #[test]
    fn a_listing_serves_the_next_stalls_until_the_process_maps_or_unmaps_or_it_is_old() {
        let me = std::process::id() as i32;
        let mut files = OpenFiles { pid: me, open: HashMap::new() };
        let mut shared = Vec::new();
        let mut listed = None;
        let first = read(me, &mut files, &mut shared, &mut listed);
        assert!(!first.maps.is_empty() && listed.is_some());
        // Marked, to tell a listing served again from one made anew.
        let marker = maps::Mapping {
            start: 1 << 12,
            end: 2 << 12,
            perms: "r-xp".into(),
            offset: 0,
            dev: "00:00".into(),
            inode: 1,
            path: "/listed/before".into(),
        };
        let size = listed.as_ref().unwrap().size;
        let mark = |l: &mut Option<Listed>, size: u64, age: Duration| {
            *l = Some(Listed {
                size,
                at: Instant::now() - age,
                maps: vec![marker.clone()],
                in_memory_files: vec![],
            });
        };
        let has_marker = |r: &Read| r.maps.iter().any(|m| m.path == "/listed/before");
        // The same size, lately: served again, its files' pages read afresh. (The other tests'
        // threads come and go in this process, changing its size: tried a few times.)
        let served = (0..20).any(|_| {
            mark(&mut listed, vm_pages(me).unwrap(), Duration::ZERO);
            has_marker(&read(me, &mut files, &mut shared, &mut listed))
        });
        assert!(served, "a listing of the same size, lately, is served again");
        // Another size (a mapping made or removed since): listed anew.
        mark(&mut listed, size + 1, Duration::ZERO);
        let r = read(me, &mut files, &mut shared, &mut listed);
        assert!(!has_marker(&r) && !r.maps.is_empty());
        assert!(
            listed.as_ref().is_some_and(|l| !l.maps.iter().any(|m| m.path == "/listed/before"))
        );
        // The same size but old: listed anew.
        mark(&mut listed, size, REUSE);
        assert!(!has_marker(&read(me, &mut files, &mut shared, &mut listed)));
        // A file mapped now changes the size: the next read lists it.
        let path = std::env::temp_dir().join(format!("context-listing-{}.dat", std::process::id()));
        std::fs::write(&path, vec![1u8; 16 * 4096]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let _ = read(me, &mut files, &mut shared, &mut listed);
        use std::os::fd::AsRawFd;
        // SAFETY: a private read-only mapping of an open file of this length, unmapped below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                16 * 4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let r = read(me, &mut files, &mut shared, &mut listed);
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(p, 16 * 4096) };
        drop(file);
        let _ = std::fs::remove_file(&path);
        let name = path.display().to_string();
        assert!(r.maps.iter().any(|m| m.path == name), "the new mapping is listed");
    }

    #[test]
    fn a_shared_writable_file_on_tmpfs_is_known_to_live_in_memory() {
        // /dev/shm is tmpfs wherever there is one.
        let path = format!("/dev/shm/stallscope-test-{}", std::process::id());
        std::fs::write(&path, vec![0u8; 4096]).unwrap();
        let line = format!(
            "7f00-7f01 rw-s 00000000 00:1a 99 {path}\n7f01-7f02 r--s 00000000 00:1a 98 {path}\n"
        );
        let m = maps::parse(&line);
        let found = in_memory_files(std::process::id() as i32, &m);
        let _ = std::fs::remove_file(&path);
        assert_eq!(found, vec![path]);
        // A file on a disk (this test's own executable) is not.
        let exe = std::env::current_exe().unwrap().display().to_string();
        let on_disk = maps::parse(&format!("7f00-7f01 rw-s 00000000 fe:00 11 {exe}\n"));
        assert!(in_memory_files(std::process::id() as i32, &on_disk).is_empty());
    }

    #[test]
    fn a_read_still_out_at_the_end_is_waited_for() {
        let mut r = ContextReader::start(std::process::id() as i32).unwrap();
        assert!(r.ask(7, vec![]).is_none());
        let c = r.finish(Duration::from_secs(20)).expect("the stall's context");
        assert_eq!(c.stall, 7);
        assert!(!c.maps.is_empty(), "waited for, it has its maps");
    }
}
