//! `mapped-writeback`: write fault on a shared file mapping under writeback ([docs/causes/mapped-writeback.md](../../../../docs/causes/mapped-writeback.md)).

use super::{Search, Spec, Writer};

pub(super) const SPEC: Spec = Spec {
    id: "mapped-writeback",
    title: "write fault on a shared file mapping under writeback",
    fix: "a write to a file mapped shared waited for that page's writeback to a slow disk: keep \
        such files on tmpfs or a fast local disk; for a MappedByteBuffer of your own \
        (READ_WRITE), write with FileChannel.write or keep the file on tmpfs; for the JVM's perf \
        counters (hsperfdata), -XX:+PerfDisableSharedMem or /tmp on tmpfs",
    fix_for_process: Some("a write to a file mapped shared waited for that page's writeback to a \
        slow disk: keep such files on tmpfs or a fast local disk, or write them with write(2)"),
    instigator: Search::Writer(Writer {
        why: "dirtying the pages whose writeback the stores waited for",
        flusher_first: true,
        cgroup_fix: false,
    }),
    code_lead: Some("the write in"),
    ..Spec::DEFAULT
};
