//! `memory-reclaim`: memory reclaim or compaction ([docs/causes/memory-reclaim.md](../../../../docs/causes/memory-reclaim.md)).

use super::{Search, Spec, Writer};

pub(super) const SPEC: Spec = Spec {
    id: "memory-reclaim",
    title: "memory reclaim or compaction",
    fix: "give the JVM's memory cgroup headroom above its working set (heap, metaspace, code, \
        direct buffers, and the page cache of what it writes), pre-touch the heap at start \
        (-XX:+AlwaysPreTouch), and keep bulk file writes out of its cgroup or write them with \
        O_DIRECT",
    fix_for_process: Some("give the process's memory cgroup headroom above its working set and the \
        page cache of what it writes, and keep bulk file writes out of its cgroup or write them \
        with O_DIRECT"),
    instigator: Search::Writer(Writer {
        why: "filling the page cache the kernel then had to reclaim memory from",
        flusher_first: false,
        cgroup_fix: true,
    }),
    ..Spec::DEFAULT
};
