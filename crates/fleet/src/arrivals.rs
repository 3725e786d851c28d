//! Wakes `watch`'s discovery as a JVM of this host's `/tmp` starts, instead of at its next pass a
//! second later. Every HotSpot JVM makes its perf-data file, `/tmp/hsperfdata_<user>/<pid>`,
//! early in its start (before its heap); a JVM found only at the next pass had its first second
//! unwatched, and a stall in it (a first GC, a tool's request) missed (issue 58: 7 of 114 stalls
//! of a five-minute soak, all in their JVM's first half second).
//!
//! Invariant: it only ever wakes the pass early; a directory that cannot be watched (another
//! `/tmp`, a container's, or inotify refused) leaves discovery at its once-a-second pace.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// inotify watches of `/tmp` (for new `hsperfdata_*` directories) and of each of those.
pub struct Arrivals {
    fd: OwnedFd,
    /// The `/tmp` watched, and its watch.
    tmp: PathBuf,
    tmp_wd: i32,
}

const PREFIX: &str = "hsperfdata_";

impl Arrivals {
    /// Watches `tmp` (the host's `/tmp`); None when inotify is refused.
    pub fn new(tmp: &Path) -> Option<Arrivals> {
        // SAFETY: inotify_init1 takes flags and returns a new descriptor or -1.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: a descriptor just returned to us, owned from here.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut a = Arrivals { fd, tmp: tmp.to_path_buf(), tmp_wd: -1 };
        a.tmp_wd = a.add(tmp, libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_ONLYDIR)?;
        if let Ok(dir) = std::fs::read_dir(tmp) {
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(PREFIX) {
                    a.add(&e.path(), libc::IN_CREATE | libc::IN_ONLYDIR);
                }
            }
        }
        Some(a)
    }

    fn add(&self, dir: &Path, mask: u32) -> Option<i32> {
        let c = CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: a valid descriptor and a NUL-terminated path.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        (wd >= 0).then_some(wd)
    }

    /// Waits up to `timeout` for a perf-data file to be made; true when one was (or a new
    /// `hsperfdata_` directory, which is watched from then on).
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let mut p = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd, valid for the call.
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            return false;
        }
        let mut buf = [0u8; 4096];
        let mut arrived = false;
        loop {
            // SAFETY: reads into a buffer of the length given.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            for (wd, name) in events(&buf[..n as usize]) {
                if wd == self.tmp_wd {
                    if name.starts_with(PREFIX) {
                        self.add(&self.tmp.join(&name), libc::IN_CREATE | libc::IN_ONLYDIR);
                        arrived = true;
                    }
                } else if !name.is_empty() {
                    arrived = true;
                }
            }
        }
        arrived
    }
}

/// The (watch, name) of each event in what one read of an inotify descriptor gave.
fn events(mut b: &[u8]) -> Vec<(i32, String)> {
    const HEAD: usize = std::mem::size_of::<libc::inotify_event>();
    let mut out = Vec::new();
    while b.len() >= HEAD {
        let wd = i32::from_ne_bytes(b[0..4].try_into().unwrap_or_default());
        let len = u32::from_ne_bytes(b[12..16].try_into().unwrap_or_default()) as usize;
        let Some(name) = b.get(HEAD..HEAD + len) else { break };
        let name = name.split(|c| *c == 0).next().unwrap_or_default();
        out.push((wd, String::from_utf8_lossy(name).into_owned()));
        b = &b[HEAD + len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perf_data_file_made_wakes_the_wait_and_a_new_user_directory_is_watched() {
        let tmp = std::env::temp_dir().join(format!("stallscope-arrivals-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("hsperfdata_old")).unwrap();
        std::fs::create_dir_all(tmp.join("unrelated")).unwrap();
        let mut a = Arrivals::new(&tmp).expect("inotify");
        assert!(!a.wait(Duration::from_millis(10)), "nothing made yet");
        std::fs::write(tmp.join("unrelated/42"), b"").unwrap();
        std::fs::write(tmp.join("not-a-jvm"), b"").unwrap();
        assert!(!a.wait(Duration::from_millis(10)), "not a perf-data file");
        std::fs::write(tmp.join("hsperfdata_old/4242"), b"").unwrap();
        assert!(a.wait(Duration::from_secs(5)), "a JVM's file in a known directory");
        std::fs::create_dir(tmp.join("hsperfdata_new")).unwrap();
        assert!(a.wait(Duration::from_secs(5)), "a new user's directory");
        std::fs::write(tmp.join("hsperfdata_new/4343"), b"").unwrap();
        assert!(a.wait(Duration::from_secs(5)), "a JVM's file in the new directory");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn events_are_split_whatever_their_names_padding() {
        let mut b = Vec::new();
        for (wd, name) in [(1i32, "hsperfdata_a"), (2, "")] {
            let padded = if name.is_empty() { 0 } else { (name.len() / 16 + 1) * 16 };
            b.extend_from_slice(&wd.to_ne_bytes());
            b.extend_from_slice(&libc::IN_CREATE.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            b.extend_from_slice(&(padded as u32).to_ne_bytes());
            let mut n = name.as_bytes().to_vec();
            n.resize(padded, 0);
            b.extend_from_slice(&n);
        }
        assert_eq!(events(&b), vec![(1, "hsperfdata_a".to_string()), (2, String::new())]);
        // Cut short: what is whole is kept, nothing read past the end.
        assert_eq!(events(&b[..b.len() - 1]), vec![(1, "hsperfdata_a".to_string())]);
        assert!(events(&b[..20]).is_empty());
    }
}
