//! Page-cache residency of files (`mincore`, as `vmtouch` reports it) and eviction
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`, as `vmtouch -e` does).
//!
//! Invariant: residency is read without touching the file's pages, so measuring never warms
//! the cache it measures.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// How much of a file is in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    pub resident_pages: u64,
    pub total_pages: u64,
    pub page_size: u64,
}

impl Residency {
    pub fn percent(&self) -> f64 {
        if self.total_pages == 0 {
            100.0
        } else {
            self.resident_pages as f64 * 100.0 / self.total_pages as f64
        }
    }
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Counts the file's pages that are in the page cache.
pub fn residency(path: &Path) -> io::Result<Residency> {
    let f = File::open(path)?;
    let len = f.metadata()?.len();
    let page = page_size();
    let total = len.div_ceil(page);
    if len == 0 {
        return Ok(Residency { resident_pages: 0, total_pages: 0, page_size: page });
    }
    // SAFETY: a read-only shared mapping of an open file, unmapped below; never dereferenced.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; total as usize];
    // SAFETY: `vec` has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, len as usize, vec.as_mut_ptr()) };
    let err = io::Error::last_os_error();
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(addr, len as usize) };
    if rc != 0 {
        return Err(err);
    }
    let resident = vec.iter().filter(|&&b| b & 1 == 1).count() as u64;
    Ok(Residency { resident_pages: resident, total_pages: total, page_size: page })
}

/// Drops the file's clean pages from the page cache. Dirty pages are written back first, as
/// `DONTNEED` cannot drop them.
pub fn evict(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    // Dirty pages survive DONTNEED; flushing makes eviction complete. A read-only file system
    // or a FUSE file without fsync may refuse: eviction of clean pages still works.
    let _ = f.sync_data();
    // SAFETY: a valid descriptor; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn evict_and_read_back_agree_with_mincore() {
        let dir = std::env::temp_dir().join(format!("procwatch-pc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.dat");
        let mut f = File::create(&p).unwrap();
        f.write_all(&vec![7u8; 64 * 4096]).unwrap();
        f.sync_all().unwrap();
        drop(f);
        std::fs::read(&p).unwrap();
        let warm = residency(&p).unwrap();
        assert_eq!(warm.total_pages, 64 * 4096 / warm.page_size);
        assert_eq!(warm.resident_pages, warm.total_pages, "just read, so all resident");
        evict(&p).unwrap();
        let cold = residency(&p).unwrap();
        assert_eq!(cold.resident_pages, 0, "evicted: {cold:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
