//! `blocked-io`: blocked in a system call on file I/O ([docs/causes/blocked-io.md](../../../../docs/causes/blocked-io.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "blocked-io",
    title: "blocked in a system call on file I/O",
    fix: "the thread waited in a system call (read, write, fsync) for its disk or filesystem: move \
        that I/O off the latency-critical thread (an I/O thread, asynchronous I/O), keep the \
        files it reads in memory (page-cache headroom, preloading), or put them on faster \
        storage; the waker named is what answered late",
    ..Spec::DEFAULT
};
