//! Page-cache residency of files (`cachestat`, Linux 6.5+; else `mincore`, as `vmtouch`
//! reports it), their dirty pages and pages under writeback, and eviction
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`, as `vmtouch -e` does).
//!
//! Invariants:
//! - Residency is read without touching the file's pages, so measuring never warms the cache it
//!   measures.
//! - [`pages`] reads an open descriptor and never maps the file: it cannot wait. Mapping a file
//!   to ask `mincore` can (FUSE in `direct_io` mode invalidates the file's pages on every mmap,
//!   waiting for their writeback under the caller's mmap_lock), so [`residency`] does that only
//!   where `cachestat` is missing, and never on a network or FUSE file system.

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

/// What the page cache holds of one open file, as `cachestat(2)` counts it (in pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilePages {
    /// Pages of the file, from its size.
    pub total: u64,
    /// In the page cache.
    pub cached: u64,
    pub dirty: u64,
    /// Being written back now: a store through a shared mapping to one of these waits for the
    /// write where the file system holds pages stable.
    pub writeback: u64,
    /// Evicted, and of those, recently enough to be read back as a refault.
    pub evicted: u64,
    pub recently_evicted: u64,
}

/// `struct cachestat_range` and `struct cachestat` of `<linux/mman.h>`.
#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}
#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// `cachestat`'s system call number on the architectures built for (the same everywhere since
/// it came, in Linux 6.5).
const SYS_CACHESTAT: libc::c_long = 451;

/// The page-cache state of the whole of the open file `f`. Walks the file's pages in the page
/// cache without locking any (it cannot wait on a page under I/O) and without mapping the file.
/// `ENOSYS` before Linux 6.5.
pub fn pages(f: &File) -> io::Result<FilePages> {
    let size = f.metadata()?.len();
    let range = CachestatRange { off: 0, len: 0 };
    let mut cs = Cachestat::default();
    // SAFETY: a valid descriptor, a range and an out struct of the kernel's layout; flags 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            f.as_raw_fd(),
            &range as *const CachestatRange,
            &mut cs as *mut Cachestat,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(FilePages {
        total: size.div_ceil(page_size()),
        cached: cs.nr_cache,
        dirty: cs.nr_dirty,
        writeback: cs.nr_writeback,
        evicted: cs.nr_evicted,
        recently_evicted: cs.nr_recently_evicted,
    })
}

/// File systems whose mmap can wait on the server or invalidate the file's pages, and whose
/// open and close do too (FUSE and NFS drop a file's cached pages on open, writing dirty ones
/// back first, and write them back on every close): FUSE, NFS, SMB, Ceph, 9p.
const REMOTE: [i64; 6] =
    [0x6573_5546, 0x6969, 0xFF53_4D42_u32 as i64, 0xFE53_4D42_u32 as i64, 0x00C3_6400, 0x0102_1997];

/// tmpfs and ramfs: file systems whose files live in memory and are never written back.
pub const IN_MEMORY: [i64; 2] = [0x0102_1994, 0x8584_58f6];

/// The file system type (`statfs`'s `f_type`) of the file at `path`, looked up without opening
/// it; None when it cannot be told.
pub fn fs_type(path: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills the struct it is given; a zeroed one is valid to pass.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid out pointer.
    (unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0).then_some(st.f_type as i64)
}

/// [`fs_type`] of an open file.
fn fs_type_of(f: &File) -> Option<i64> {
    // SAFETY: fstatfs fills the struct it is given; a zeroed one is valid to pass.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out pointer.
    (unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } == 0).then_some(st.f_type as i64)
}

fn remote(f: &File) -> bool {
    fs_type_of(f).is_none_or(|t| REMOTE.contains(&t))
}

/// Whether the file at `path` lives on a FUSE or network file system (looked up without opening
/// it); true when that cannot be told.
pub fn remote_path(path: &Path) -> bool {
    fs_type(path).is_none_or(|t| REMOTE.contains(&t))
}

/// A descriptor of process `pid`'s own open file `path` with inode `inode`, borrowed with
/// `pidfd_getfd` (Linux 5.6+; needs the right to ptrace it): the same open file, so looking at
/// it opens nothing (a FUSE or NFS open would drop the file's cached pages). Closing it still
/// flushes a FUSE file, once. None when `pid` has no such descriptor, or it cannot be borrowed.
pub fn borrow_fd(pid: i32, path: &str, inode: u64) -> Option<File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::MetadataExt;
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let wanted: Vec<i32> = dir
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == path))
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let pidfd = crate::task::pidfd_open(pid)?;
    wanted.into_iter().find_map(|n| {
        // SAFETY: pidfd_getfd takes a pidfd, the target's descriptor number and flags; it
        // returns a new descriptor (close-on-exec) or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) } as i32;
        if fd < 0 {
            return None;
        }
        // SAFETY: a descriptor just returned to us, owned by the File.
        let f = unsafe { File::from_raw_fd(fd) };
        f.metadata().is_ok_and(|m| m.ino() == inode).then_some(f)
    })
}

/// Counts the file's pages that are in the page cache.
pub fn residency(path: &Path) -> io::Result<Residency> {
    residency_of(&File::open(path)?)
}

/// Counts the open file's pages that are in the page cache: `cachestat`, else `mincore` of a
/// mapping of it (refused on a network or FUSE file system, where mapping a file can wait).
pub fn residency_of(f: &File) -> io::Result<Residency> {
    let page = page_size();
    match pages(f) {
        Ok(p) => {
            return Ok(Residency {
                resident_pages: p.cached,
                total_pages: p.total,
                page_size: page,
            });
        }
        Err(e) if e.raw_os_error() != Some(libc::ENOSYS) => return Err(e),
        Err(_) => {}
    }
    if remote(f) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no cachestat (Linux 6.5+), and mapping a file on a network or FUSE file system can wait",
        ));
    }
    let len = f.metadata()?.len();
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

    #[test]
    fn a_processs_own_descriptor_is_borrowed_by_path_and_inode() {
        use std::os::unix::fs::MetadataExt;
        let exe = std::env::current_exe().unwrap();
        let held = File::open(&exe).unwrap();
        let inode = held.metadata().unwrap().ino();
        let me = std::process::id() as i32;
        let path = exe.to_str().unwrap();
        let f = borrow_fd(me, path, inode).expect("this process holds it open");
        assert_eq!(f.metadata().unwrap().ino(), inode);
        assert!(borrow_fd(me, path, inode + 1).is_none(), "another inode under that name");
        assert!(borrow_fd(me, "/nonexistent/file", inode).is_none());
        assert!(!remote_path(&exe), "a local disk");
        drop(held);
    }

    #[test]
    fn cachestat_counts_a_files_dirty_pages_until_they_are_written() {
        let dir = std::env::temp_dir().join(format!("procwatch-cs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f.dat");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        f.write_all(&vec![7u8; 16 * 4096]).unwrap();
        let dirty = pages(&f).expect("cachestat: Linux 6.5 or later");
        assert_eq!((dirty.total, dirty.cached), (16, 16), "{dirty:?}");
        // tmpfs keeps no dirty count; a disk does. Either way, none once synced.
        f.sync_all().unwrap();
        let clean = pages(&f).unwrap();
        assert_eq!((clean.dirty, clean.writeback, clean.cached), (0, 0, 16), "{clean:?}");
        // Residency agrees with mincore's, which it replaces.
        assert_eq!(residency_of(&f).unwrap().resident_pages, 16);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
