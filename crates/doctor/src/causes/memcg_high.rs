//! `memcg-high`: memory cgroup over its high limit ([docs/causes/memcg-high.md](../../../../docs/causes/memcg-high.md)).

use super::{Search, Spec, Writer};

pub(super) const SPEC: Spec = Spec {
    id: "memcg-high",
    title: "memory cgroup over its high limit",
    fix: "raise the cgroup's memory.high above the JVM's working set (or remove it and keep \
        memory.max), or shrink the heap and direct memory to fit under it",
    fix_for_process: Some("raise the cgroup's memory.high above the process's working set (or \
        remove it and keep memory.max)"),
    instigator: Search::Writer(Writer {
        why: "filling the page cache the kernel then had to reclaim memory from",
        flusher_first: false,
        cgroup_fix: true,
    }),
    ..Spec::DEFAULT
};
