//! A log file mapped into memory and read in place: `logs` on a regular file does not copy its
//! bytes through `read(2)` (that copy cost as much as the whole search for safepoint lines:
//! on the 1 GB bench log, counting its lines took 0.17 s through `read` and 0.08 s mapped).
//!
//! Invariant: a mapping that shrinks under us never kills the process. A file truncated while it
//! is read (a `copytruncate` rotation) raises SIGBUS on the pages past its new end. While a
//! mapping is being read ([`read_in_place`]), a SIGBUS handler that finds the fault inside it
//! maps a page of zeros there and notes it; the read runs on to the mapping's end and the caller
//! is told the file shrank. A fault anywhere else gets the default action, as before.
//! Pages already read are let go (`MADV_DONTNEED`), so the resident set stays near one window.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// A read-only private mapping of a whole file.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
    page: usize,
    /// Bytes below this were let go.
    released: AtomicUsize,
}

// SAFETY: the mapping is read-only and lives as long as the value; the only state that changes
// is `released`, an atomic. Threads that read one input at once share it (`logs --threads`),
// and any of them may let pages go.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps `file` when it is a regular, non-empty file; `None` when it is anything else (a
    /// pipe, a character device, an empty file), which is read as a stream instead.
    pub fn of(file: &File) -> std::io::Result<Option<Mapped>> {
        let meta = file.metadata()?;
        let len = usize::try_from(meta.len()).unwrap_or(0);
        if !meta.file_type().is_file() || len == 0 {
            return Ok(None);
        }
        // SAFETY: a fresh read-only private mapping of an open file, at an address of the
        // kernel's choosing; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            // Some file systems cannot map (some FUSE and network ones): read it instead.
            return Ok(None);
        }
        // SAFETY: advice on our own mapping; failure only loses the read-ahead hint.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        Ok(Some(Mapped { ptr, len, page, released: AtomicUsize::new(0) }))
    }

    /// Whether the file starts with the gzip magic (such a file is read through the decoder).
    pub fn is_gzip(&self) -> bool {
        // SAFETY: len >= 1 by construction; a 1-byte file has no second byte to read.
        self.len >= 2
            && unsafe { std::slice::from_raw_parts(self.ptr as *const u8, 2) } == [0x1f, 0x8b]
    }

    /// Lets go of the whole pages below `upto`: they will not be read again. (Two threads that
    /// let the same pages go at once cost a second `madvise`, no more.)
    fn release(&self, upto: usize) {
        let from = self.released.load(Ordering::Relaxed);
        let to = upto.min(self.len) / self.page * self.page;
        if to > from {
            // SAFETY: whole pages inside our own mapping, which nothing reads again.
            unsafe {
                libc::madvise(
                    (self.ptr as *mut u8).add(from) as *mut libc::c_void,
                    to - from,
                    libc::MADV_DONTNEED,
                )
            };
            self.released.fetch_max(to, Ordering::Relaxed);
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The mapping being read, for the SIGBUS handler: [start, end) and whether a fault was seen.
static ACTIVE_START: AtomicUsize = AtomicUsize::new(0);
static ACTIVE_END: AtomicUsize = AtomicUsize::new(0);
static SHRANK: AtomicBool = AtomicBool::new(false);
/// One mapping is read at a time.
static READING: Mutex<()> = Mutex::new(());
static HANDLER: Once = Once::new();

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel hands a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (start, end) = (ACTIVE_START.load(Ordering::SeqCst), ACTIVE_END.load(Ordering::SeqCst));
    if start <= addr && addr < end {
        // SAFETY: sysconf and mmap are system calls safe in a handler; the page is inside the
        // mapping being read, which we own, and becomes zeros.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let at = addr & !(page - 1);
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
        }
        SHRANK.store(true, Ordering::SeqCst);
        return;
    }
    // Not ours: the default action, taken when the faulting instruction runs again.
    // SAFETY: signal() is safe in a handler.
    unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
}

fn install_handler() {
    HANDLER.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler and an empty mask.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        }
    });
}

/// Runs `f` over the mapped bytes; `done(n)` from `f`'s side (any of its threads) lets go of
/// the first `n` bytes.
/// Returns what `f` returned and whether the file shrank while it was read (the bytes past its
/// new end were read as zeros, so what `f` made of them must not be trusted).
pub fn read_in_place<T>(
    m: &Mapped,
    f: impl FnOnce(&[u8], &(dyn Fn(usize) + Sync)) -> T,
) -> (T, bool) {
    let _one = READING.lock().unwrap_or_else(|e| e.into_inner());
    install_handler();
    SHRANK.store(false, Ordering::SeqCst);
    ACTIVE_START.store(m.ptr as usize, Ordering::SeqCst);
    ACTIVE_END.store(m.ptr as usize + m.len, Ordering::SeqCst);
    // SAFETY: the mapping is ours and lives as long as `m`; pages that go away under us are
    // replaced by zeros (see the module's invariant) rather than faulting.
    let bytes = unsafe { std::slice::from_raw_parts(m.ptr as *const u8, m.len) };
    let out = f(bytes, &|n| m.release(n));
    ACTIVE_START.store(0, Ordering::SeqCst);
    ACTIVE_END.store(0, Ordering::SeqCst);
    (out, SHRANK.load(Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("gc.log");
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        (d, p)
    }

    #[test]
    fn reads_a_file_in_place_and_lets_pages_go() {
        let text: Vec<u8> = (0..100_000).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let (_d, p) = file_of(&text);
        let m = Mapped::of(&File::open(&p).unwrap()).unwrap().unwrap();
        assert!(!m.is_gzip());
        let (lines, shrank) = read_in_place(&m, |b, done| {
            assert_eq!(b, &text[..]);
            let half = b.len() / 2;
            let first = b[..half].iter().filter(|&&c| c == b'\n').count();
            done(half);
            first + b[half..].iter().filter(|&&c| c == b'\n').count()
        });
        assert_eq!(lines, 100_000);
        assert!(!shrank);
    }

    #[test]
    fn empty_files_and_pipes_are_not_mapped() {
        let (_d, p) = file_of(b"");
        assert!(Mapped::of(&File::open(&p).unwrap()).unwrap().is_none());
        let mut fds = [0; 2];
        // SAFETY: a pipe into a valid array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the read end, owned from here on (the write end is closed below).
        let r = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fds[0]) };
        unsafe { libc::close(fds[1]) };
        assert!(Mapped::of(&r).unwrap().is_none());
    }

    /// A file cut short while mapped (copytruncate) reads as zeros past its new end, and the
    /// reader is told; the process lives.
    #[test]
    fn a_file_truncated_while_read_is_reported_not_fatal() {
        let text = vec![b'a'; 1 << 20];
        let (_d, p) = file_of(&text);
        let m = Mapped::of(&File::open(&p).unwrap()).unwrap().unwrap();
        let ((head, tail), shrank) = read_in_place(&m, |b, _| {
            std::fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(4096).unwrap();
            (
                b[..4096].iter().filter(|&&c| c == b'a').count(),
                b[4096..].iter().filter(|&&c| c == 0).count(),
            )
        });
        assert!(shrank, "the truncation is noticed");
        assert_eq!(head, 4096, "what is still in the file reads as it was");
        assert_eq!(tail, (1 << 20) - 4096, "what was cut reads as zeros");
    }
}
