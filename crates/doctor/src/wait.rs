//! What a thread was doing at one sample, by what it waited *in*, not by its state letter alone:
//! its state, the kernel function it slept in (`wchan`), and the system call it was in (with the
//! file, for a read or write). A FUSE or NFS write sleeps in `S`; a page coming back from swap
//! waits in the same `folio_wait_bit_common` as one coming from a file; a thread reclaiming
//! memory is often `R` in the kernel. The kernel's function names live here, once.
//!
//! Invariant: a pure function of one sample; when nothing says what the thread waited for, the
//! answer is `Other`, never a guess.

use crate::causes::{self, Cause};
use recording::disk::{Syscall, TaskSample};
use serde::Serialize;

/// What a thread off a CPU was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// In a page fault, outside any system call, waiting for the page to come in (from a file,
    /// or from swap: which one, the counters around it say).
    PageIn,
    /// Waiting for writeback or throttled for dirty pages outside a write of its own: a write
    /// fault on a shared file mapping (hsperfdata), or reclaim waiting for dirty pages to be
    /// written back.
    Writeback,
    /// Reclaiming memory itself: direct reclaim, compaction other than direct compaction (its own
    /// cause, `Named`), or throttled by reclaim.
    Reclaim,
    /// Throttled because its memory cgroup is over `memory.high`.
    MemcgHigh,
    /// Waiting for mmap_lock.
    MmapLock,
    /// In a write, flush or sync of a file.
    FileWrite,
    /// In a read of a file.
    FileRead,
    /// Parked by choice: a futex (a lock, a condition, or idle), a sleep, a poll, a socket or a
    /// pipe. Safe for a safepoint, and holding nothing up by itself.
    Parked,
    /// In a kernel function a cause's module names as its own (`crate::causes::Spec::kernel_frames`).
    Named(Cause),
    /// Blocked somewhere else in the kernel.
    Other,
}

impl Wait {
    /// How the report says it.
    pub fn words(self) -> &'static str {
        match self {
            Wait::PageIn => "waiting for a page to come in (a major fault)",
            Wait::Writeback => "waiting for writeback of dirty pages",
            Wait::Reclaim => "reclaiming memory",
            Wait::MemcgHigh => "throttled over its memory cgroup's high limit",
            Wait::MmapLock => "waiting for mmap_lock",
            Wait::FileWrite => "writing to a file",
            Wait::FileRead => "reading a file",
            Wait::Parked => "parked",
            Wait::Named(c) => c.spec().wait_words,
            Wait::Other => "blocked in the kernel",
        }
    }
}

/// One sample of a thread, in the terms time is accounted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Seen {
    /// State R: on a CPU, or waiting for one (the thread's counters say which).
    Runnable,
    /// State T or t.
    Stopped,
    Waiting(Wait),
}

/// Kernel sleeps that mean "waiting for a page to come in" (from a file, a FUSE server, a disk,
/// or swap).
pub fn fault_wait(wchan: &str) -> bool {
    const W: [&str; 16] = [
        "folio_wait",
        "__folio_lock",
        "wait_on_page",
        "__lock_page",
        "request_wait_answer",
        "fuse_",
        "filemap_",
        "do_read_cache",
        "read_pages",
        "io_schedule",
        "submit_bio_wait",
        "blk_mq_",
        "swap_read",
        "swap_readpage",
        "__wait_on_bit",
        "do_swap_page",
    ];
    W.iter().any(|p| wchan.starts_with(p)) || wchan.starts_with("__read_swap_cache")
}

/// Kernel sleeps on the mmap read-write semaphore.
pub fn mmap_lock_wait(wchan: &str) -> bool {
    wchan.starts_with("rwsem_down")
        || wchan.starts_with("down_read")
        || wchan.starts_with("down_write")
        || wchan.contains("mmap_lock")
        || wchan.starts_with("lock_mm_and_find_vma")
}

/// The system calls that take mmap_lock for write, as `wchan` names them while they wait for
/// it: the lock's own slow path is a scheduler function that `wchan` skips (measured on 6.18:
/// an mprotect waiting 37 ms for the lock showed `do_mprotect_pkey`, the tracepoints the wait).
/// Asleep in state D there, nothing but the lock is waited for (page allocation and reclaim
/// show their own functions).
pub fn mmap_write_caller(wchan: &str) -> bool {
    [
        "do_mprotect_pkey",
        "vm_mmap_pgoff",
        "__vm_munmap",
        "vm_munmap",
        "do_madvise",
        "do_mlock",
        "apply_mlockall_flags",
        "__do_sys_brk",
        "__x64_sys_brk",
        "__do_sys_mremap",
        "__x64_sys_mremap",
        "do_vmi_munmap",
    ]
    .contains(&wchan)
}

/// Kernel functions of memory reclaim and of compaction asked for or done by `kcompactd`, and the
/// throttles reclaim sleeps in. (Direct compaction's are its own cause's,
/// `crate::causes::Spec::kernel_frames`, read first.)
pub fn reclaim_wait(wchan: &str) -> bool {
    [
        "shrink_",
        "try_to_free_",
        "reclaim_throttle",
        "throttle_direct_reclaim",
        "__alloc_pages_slowpath",
        "__perform_reclaim",
        "compact_",
        "kcompactd",
        "wait_iff_congested",
        "try_charge",
        "mem_cgroup_reclaim",
        "drain_all_pages",
        "__drain_all_pages",
        "out_of_memory",
    ]
    .iter()
    .any(|p| wchan.starts_with(p))
}

/// The sleep of a task over its memory cgroup's `memory.high`, on its way back to user space.
pub fn memcg_high_wait(wchan: &str) -> bool {
    wchan.starts_with("mem_cgroup_handle_over_high")
        || wchan.starts_with("__mem_cgroup_handle_over_high")
}

/// A sleep for a page's lock.
pub fn page_lock_wait(wchan: &str) -> bool {
    ["__folio_lock", "folio_lock", "__lock_page", "lock_page"].iter().any(|p| wchan.starts_with(p))
}

/// A kernel stack (innermost first) in a write fault on a page already mapped: the write
/// protection fault and the file system's `page_mkwrite` (`do_page_mkwrite`, `fuse_page_mkwrite`,
/// `ext4_page_mkwrite`, `filemap_page_mkwrite` …).
pub fn write_fault(stack: &[String]) -> bool {
    stack.iter().any(|s| s == "do_wp_page" || s.ends_with("page_mkwrite"))
}

/// Writeback and dirty-page throttling, and the journal waits a write can sit in.
pub fn writeback_wait(wchan: &str) -> bool {
    [
        "balance_dirty_pages",
        "folio_wait_writeback",
        "wait_on_page_writeback",
        "folio_wait_stable",
        "jbd2_",
        "wait_transaction_locked",
        "__wait_on_buffer",
        "wb_wait_for_completion",
        "fuse_wait_on_page_writeback",
        "fuse_wait_on_folio_writeback",
    ]
    .iter()
    .any(|p| wchan.starts_with(p))
}

/// System calls that write, flush or sync a file (by name, from procwatch's table).
pub fn write_call(name: &str) -> bool {
    matches!(
        name,
        "write"
            | "pwrite64"
            | "writev"
            | "pwritev"
            | "pwritev2"
            | "fsync"
            | "fdatasync"
            | "sync_file_range"
            | "msync"
            | "close"
            | "sync"
            | "syncfs"
            | "ftruncate"
            | "truncate"
            | "fallocate"
    )
}

/// System calls that read a file.
pub fn read_call(name: &str) -> bool {
    matches!(name, "read" | "pread64" | "readv" | "preadv" | "preadv2")
}

/// A descriptor's target that is storage, not a pipe, socket or device.
fn is_storage(file: &str) -> bool {
    file.starts_with('/')
        && !file.starts_with("/dev/")
        && !file.starts_with("/proc/")
        && !file.starts_with("/sys/")
}

/// Where a cgroup freezer holds a thread: the v1 freezer's `__refrigerator` (state D), and the
/// v2 freezer's trap (state S in `do_freezer_trap`, which `wchan` shows as `get_signal` where it
/// is inlined). A frozen thread waits for a thaw, not for I/O. (Since Linux 6.1 a thread asleep
/// where it may be frozen is frozen in place instead, its wchan unchanged: only the freezer's
/// own files say so, which the recorder reads.)
pub fn freezer_wait(wchan: &str) -> bool {
    matches!(wchan, "__refrigerator" | "do_freezer_trap" | "get_signal")
}

/// What one sample of a thread shows it doing.
pub fn seen(t: &TaskSample) -> Seen {
    match t.state {
        'R' => return Seen::Runnable,
        'T' | 't' => return Seen::Stopped,
        'S' | 'D' if freezer_wait(&t.wchan) => return Seen::Stopped,
        _ => {}
    }
    Seen::Waiting(wait_of(t))
}

/// What a thread not on a CPU was waiting for.
pub fn wait_of(t: &TaskSample) -> Wait {
    let w = t.wchan.as_str();
    // The wchan of a thread that woke between reading its state and its wchan is "0".
    let known = !w.is_empty() && w != "0";
    if known && let Some((c, _)) = causes::of_kernel_frames([w]) {
        return Wait::Named(c);
    }
    if known && reclaim_wait(w) {
        return Wait::Reclaim;
    }
    if known && memcg_high_wait(w) {
        return Wait::MemcgHigh;
    }
    if known && (mmap_lock_wait(w) || t.state == 'D' && mmap_write_caller(w)) {
        return Wait::MmapLock;
    }
    match t.syscall {
        Syscall::In { nr, .. } => {
            let name = procwatch::syscalls::name(nr).unwrap_or("");
            let storage = t.file.as_deref().is_some_and(is_storage);
            let writing = write_call(name) && (storage || t.file.is_none()) && name != "close"
                || (name == "close" && storage);
            if writing {
                return Wait::FileWrite;
            }
            if known && writeback_wait(w) {
                // Waiting for writeback inside some other call (mmap, munmap, madvise): reclaim
                // waiting for dirty pages, most often; the counters around it tell.
                return Wait::Writeback;
            }
            if read_call(name) && storage {
                return Wait::FileRead;
            }
            // Uninterruptible in a call: blocked in the kernel, though where is not known when
            // it woke between the reads ("0"); the tracepoints may tell (an mmap_lock wait).
            if t.state == 'D' && !(known && procwatch::task::parked_wchan(w)) {
                return Wait::Other;
            }
            Wait::Parked
        }
        Syscall::NotInSyscall { .. } => {
            if known && writeback_wait(w) {
                Wait::Writeback
            } else if !known || fault_wait(w) || t.state == 'D' {
                // Blocked outside a system call is a fault, whatever it sleeps in.
                Wait::PageIn
            } else {
                Wait::Other
            }
        }
        Syscall::Running | Syscall::Unknown => {
            if known && procwatch::task::parked_wchan(w) {
                Wait::Parked
            } else if known && writeback_wait(w) {
                Wait::Writeback
            } else if t.state == 'D' && (!known || fault_wait(w)) {
                // Woke between the reads of its state and of where it slept: most often a page
                // fault just completing (a thread blocked in a system call still shows it).
                Wait::PageIn
            } else if t.state == 'D' {
                Wait::Other
            } else {
                // Asleep (S) where the sampler did not look further: its wchan was a known park.
                Wait::Parked
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(state: char, wchan: &str, syscall: Syscall, file: Option<&str>) -> TaskSample {
        TaskSample {
            tid: 1,
            comm: "x".into(),
            state,
            wchan: wchan.into(),
            syscall,
            file: file.map(String::from),
            ..Default::default()
        }
    }

    const NOT_IN: Syscall = Syscall::NotInSyscall { sp: 1, pc: 2 };

    fn call(name: &str) -> Syscall {
        let nr =
            (0..512).find(|n| procwatch::syscalls::name(*n) == Some(name)).expect("a known call");
        Syscall::In { nr, arg0: 3, sp: 1, pc: 2 }
    }

    #[test]
    fn what_a_thread_waits_in_not_its_state_letter() {
        // Measured here: the VM thread writing a GC log to a slow FUSE file sleeps in S.
        assert_eq!(
            wait_of(&t('S', "request_wait_answer", call("write"), Some("/mnt/slow/gc.log"))),
            Wait::FileWrite
        );
        assert_eq!(
            wait_of(&t('D', "balance_dirty_pages", call("write"), Some("/var/log/gc.log"))),
            Wait::FileWrite
        );
        assert_eq!(
            wait_of(&t('D', "folio_wait_bit_common", call("fsync"), Some("/data/x"))),
            Wait::FileWrite
        );
        // A page fault outside a system call, from swap or a file alike.
        assert_eq!(wait_of(&t('D', "folio_wait_bit_common", NOT_IN, None)), Wait::PageIn);
        assert_eq!(
            wait_of(&t('D', "0", NOT_IN, None)),
            Wait::PageIn,
            "a wchan read as the thread woke"
        );
        // In a call, uninterruptible, its wchan read as it woke (a waiter on a contended
        // mmap_lock woken and put back to sleep): blocked, not parked.
        assert_eq!(wait_of(&t('D', "0", call("mprotect"), None)), Wait::Other);
        assert_eq!(wait_of(&t('S', "0", call("mprotect"), None)), Wait::Parked);
        // Measured here: threads of a JVM in a full memory cgroup.
        assert_eq!(wait_of(&t('D', "reclaim_throttle", NOT_IN, None)), Wait::Reclaim);
        assert_eq!(
            wait_of(&t('D', "reclaim_throttle", call("write"), Some("/tmp/big.dat"))),
            Wait::Reclaim
        );
        assert_eq!(wait_of(&t('S', "mem_cgroup_handle_over_high", NOT_IN, None)), Wait::MemcgHigh);
        // A write fault on a shared file mapping (hsperfdata) waits for its writeback.
        assert_eq!(wait_of(&t('D', "folio_wait_writeback", NOT_IN, None)), Wait::Writeback);
        assert_eq!(wait_of(&t('D', "rwsem_down_read_slowpath", NOT_IN, None)), Wait::MmapLock);
        // 6.18 names the system call's own function, not the lock's slow path.
        assert_eq!(wait_of(&t('D', "do_mprotect_pkey", NOT_IN, None)), Wait::MmapLock);
        assert_eq!(wait_of(&t('D', "vm_mmap_pgoff", NOT_IN, None)), Wait::MmapLock);
        assert_ne!(wait_of(&t('S', "do_mprotect_pkey", NOT_IN, None)), Wait::MmapLock);
        // Inside a call that writes no file (munmap): reclaim waiting for dirty pages.
        assert_eq!(wait_of(&t('D', "folio_wait_writeback", call("munmap"), None)), Wait::Writeback);
        // Parked: futexes, sockets, pipes, sleeps.
        assert_eq!(wait_of(&t('S', "futex_do_wait", Syscall::Unknown, None)), Wait::Parked);
        assert_eq!(
            wait_of(&t('S', "__skb_wait_for_more_packets", call("read"), Some("socket:[123]"))),
            Wait::Parked
        );
        assert_eq!(wait_of(&t('S', "pipe_read", call("read"), Some("pipe:[9]"))), Wait::Parked);
        assert_eq!(
            wait_of(&t('D', "request_wait_answer", call("read"), Some("/mnt/slow/a.dat"))),
            Wait::FileRead
        );
        assert_eq!(seen(&t('R', "", Syscall::Running, None)), Seen::Runnable);
        assert_eq!(seen(&t('T', "do_signal_stop", Syscall::Unknown, None)), Seen::Stopped);
        // Held by a cgroup freezer: no I/O, whatever the state letter says.
        assert_eq!(seen(&t('D', "__refrigerator", Syscall::Unknown, None)), Seen::Stopped);
        assert_eq!(seen(&t('S', "get_signal", Syscall::Unknown, None)), Seen::Stopped);
    }
}
