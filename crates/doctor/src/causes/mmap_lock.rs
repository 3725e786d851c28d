//! `mmap-lock`: mmap_lock wait ([docs/causes/mmap-lock.md](../../../../docs/causes/mmap-lock.md)).

use super::{Search, Spec};
use super::InstigatorKind;

pub(super) const SPEC: Spec = Spec {
    id: "mmap-lock",
    title: "mmap_lock wait",
    fix: "stop mapping, unmapping and mprotecting large regions beside latency-critical threads: \
        reuse mappings and direct buffers, fix the heap size (-Xms = -Xmx), avoid \
        mlock/MAP_POPULATE at run time",
    fix_for_process: Some("other threads of the process map, unmap or mprotect memory while this \
        one faults: reuse mappings and pre-size arenas, and keep mmap/munmap off the \
        latency-critical path"),
    colour: "tlb",
    instigator: Search::MemoryMapper,
    answered_by: &[InstigatorKind::MemoryMapper],
    ..Spec::DEFAULT
};
