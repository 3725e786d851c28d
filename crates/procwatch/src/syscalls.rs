//! System call numbers as the kernel's ABI gives them, for the calls stallscope tells apart: file
//! reads, writes and flushes (whose first argument is a file descriptor), and the calls a thread
//! parks in.
//!
//! Invariant: a number this table does not know has no name; nothing is guessed.

/// The name of system call `nr` on this machine's architecture, for those stallscope knows.
pub fn name(nr: i64) -> Option<&'static str> {
    TABLE.iter().find(|(n, _, _)| *n == nr).map(|(_, s, _)| *s)
}

/// Whether the first argument of system call `nr` is a file descriptor worth resolving.
pub fn takes_fd(nr: i64) -> bool {
    TABLE.iter().any(|(n, _, fd)| *n == nr && *fd)
}

#[cfg(target_arch = "x86_64")]
const TABLE: &[(i64, &str, bool)] = &[
    (0, "read", true),
    (1, "write", true),
    (3, "close", true),
    (17, "pread64", true),
    (18, "pwrite64", true),
    (19, "readv", true),
    (20, "writev", true),
    (9, "mmap", false),
    (10, "mprotect", false),
    (11, "munmap", false),
    (26, "msync", false),
    (28, "madvise", false),
    (74, "fsync", true),
    (75, "fdatasync", true),
    (76, "truncate", false),
    (77, "ftruncate", true),
    (162, "sync", false),
    (202, "futex", false),
    (257, "openat", false),
    (277, "sync_file_range", true),
    (285, "fallocate", true),
    (295, "preadv", true),
    (296, "pwritev", true),
    (306, "syncfs", true),
    (327, "preadv2", true),
    (328, "pwritev2", true),
];

#[cfg(target_arch = "aarch64")]
const TABLE: &[(i64, &str, bool)] = &[
    (63, "read", true),
    (64, "write", true),
    (57, "close", true),
    (67, "pread64", true),
    (68, "pwrite64", true),
    (65, "readv", true),
    (66, "writev", true),
    (222, "mmap", false),
    (226, "mprotect", false),
    (215, "munmap", false),
    (227, "msync", false),
    (233, "madvise", false),
    (82, "fsync", true),
    (83, "fdatasync", true),
    (45, "truncate", false),
    (46, "ftruncate", true),
    (81, "sync", false),
    (98, "futex", false),
    (56, "openat", false),
    (84, "sync_file_range", true),
    (47, "fallocate", true),
    (69, "preadv", true),
    (70, "pwritev", true),
    (267, "syncfs", true),
    (286, "preadv2", true),
    (287, "pwritev2", true),
];

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const TABLE: &[(i64, &str, bool)] = &[];
