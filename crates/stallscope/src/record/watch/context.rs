//! A stall's context (the target's maps and the page-cache residency of the files it maps) read
//! off the watch loop: reading `/proc/<pid>/maps` takes the target's mmap_lock, and looking at
//! a mapped file opens it, so both can wait behind the very faults a stall is made of (measured:
//! the recorder held up to 146 ms by them in a mapped read from a slow disk).
//!
//! Invariant: the watch loop never waits for a read. At most one is under way; a stall that
//! begins while one is still out gets its context without maps. Every stall's context is
//! written once: with its maps when they come, without them when they do not come in time.

use super::sources::mapped_data_files;
use procwatch::heartbeat::JavaThread;
use procwatch::maps;
use recording::StallContext;
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

/// What the loop asks for one stall.
struct Job {
    stall: u32,
    java_threads: Vec<JavaThread>,
}

/// The reader thread and what is out with it.
pub(super) struct ContextReader {
    jobs: Option<Sender<Job>>,
    done: Receiver<StallContext>,
    /// The stall whose maps are being read, and its threads (to write without maps if the read
    /// never comes back).
    out: Option<(u32, Vec<JavaThread>)>,
}

impl ContextReader {
    pub(super) fn start(pid: i32) -> std::io::Result<ContextReader> {
        let (jobs, rx) = std::sync::mpsc::channel::<Job>();
        let (tx, done) = std::sync::mpsc::channel::<StallContext>();
        std::thread::Builder::new().name("stallscope-maps".into()).spawn(move || {
            while let Ok(job) = rx.recv() {
                let m = maps::read(pid).unwrap_or_default();
                let mapped_files = mapped_data_files(&m);
                let in_memory_files = in_memory_files(pid, &m);
                let maps = m.into_iter().filter(|x| x.perms.contains('x') || x.is_file()).collect();
                let c = StallContext {
                    t: procwatch::clock::mono_ns(),
                    stall: job.stall,
                    java_threads: job.java_threads,
                    maps,
                    mapped_files,
                    in_memory_files,
                };
                if tx.send(c).is_err() {
                    return;
                }
            }
        })?;
        Ok(ContextReader { jobs: Some(jobs), done, out: None })
    }

    /// Asks for stall `stall`'s maps. Returns the context to write now (without maps) when a
    /// read is still out for an earlier stall.
    pub(super) fn ask(
        &mut self,
        stall: u32,
        java_threads: Vec<JavaThread>,
    ) -> Option<StallContext> {
        if self.out.is_some() || self.jobs.is_none() {
            return Some(bare(stall, java_threads));
        }
        let jobs = self.jobs.as_ref()?;
        if jobs.send(Job { stall, java_threads: java_threads.clone() }).is_err() {
            return Some(bare(stall, java_threads));
        }
        self.out = Some((stall, java_threads));
        None
    }

    /// The context that came back, if it has.
    pub(super) fn poll(&mut self) -> Option<StallContext> {
        let c = self.done.try_recv().ok()?;
        self.out = None;
        Some(c)
    }

    /// At the end of watching: the read still out, waited for up to `patience`, or the stall's
    /// context without maps.
    pub(super) fn finish(&mut self, patience: Duration) -> Option<StallContext> {
        self.jobs = None;
        let (stall, threads) = self.out.take()?;
        let until = Instant::now() + patience;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(c) if c.stall == stall => return Some(c),
                Ok(_) => continue,
                Err(_) => return Some(bare(stall, threads)),
            }
        }
    }
}

/// A stall's context without its maps.
fn bare(stall: u32, java_threads: Vec<JavaThread>) -> StallContext {
    StallContext {
        t: procwatch::clock::mono_ns(),
        stall,
        java_threads,
        maps: vec![],
        mapped_files: vec![],
        in_memory_files: vec![],
    }
}

/// The files `pid` maps shared and writable that live on tmpfs or ramfs, looked up in the
/// target's own mount namespace (`/proc/<pid>/root`).
fn in_memory_files(pid: i32, m: &[maps::Mapping]) -> Vec<String> {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let mut out: Vec<String> = Vec::new();
    for x in m.iter().filter(|x| x.is_shared_writable_file()) {
        if out.contains(&x.path) || out.len() >= 64 {
            continue;
        }
        let Ok(c) = std::ffi::CString::new(format!("/proc/{pid}/root{}", x.path)) else {
            continue;
        };
        // SAFETY: statfs fills the struct it is given; a zeroed one is valid to pass.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a valid out pointer.
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0 {
            let kind = st.f_type as i64;
            if kind == TMPFS_MAGIC || kind == RAMFS_MAGIC {
                out.push(x.path.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalls_maps_come_back_and_a_second_ask_meanwhile_gets_none() {
        let mut r = ContextReader::start(std::process::id() as i32).unwrap();
        assert!(r.ask(1, vec![]).is_none(), "the first read goes out");
        let bare = r.ask(2, vec![]).expect("one read at a time: the second is written bare");
        assert_eq!((bare.stall, bare.maps.len()), (2, 0));
        let t0 = Instant::now();
        let c = loop {
            if let Some(c) = r.poll() {
                break c;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "the read never came back");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(c.stall, 1);
        assert!(c.maps.iter().any(|m| m.perms.contains('x')), "our own code is mapped");
        assert!(r.finish(Duration::from_secs(1)).is_none(), "nothing left out");
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
