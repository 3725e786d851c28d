//! `major-fault`: major page fault on a file mapping ([docs/causes/major-fault.md](../../../../docs/causes/major-fault.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "major-fault",
    title: "major page fault on a file mapping",
    fix: "read with FileChannel.read (native, safepoint-safe) or pre-fault the mapping off the \
        critical path; MappedByteBuffer.load() does not help",
    fix_for_process: Some("the program read a file it maps and the page was not in memory: fault it \
        in off the critical path (madvise MADV_WILLNEED, MAP_POPULATE, a reader thread), keep it \
        resident (mlock, memory headroom), or read it with pread on another thread; or put the \
        file on faster storage"),
    colour: "D",
    code_lead: Some("the read in"),
    ..Spec::DEFAULT
};
