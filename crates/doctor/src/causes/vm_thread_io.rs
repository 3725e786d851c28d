//! `vm-thread-io`: VM or GC thread blocked in I/O at a safepoint ([docs/causes/vm-thread-io.md](../../../../docs/causes/vm-thread-io.md)).

use super::{Search, Spec, Writer};

pub(super) const SPEC: Spec = Spec {
    id: "vm-thread-io",
    title: "VM or GC thread blocked in I/O at a safepoint",
    fix: "the VM or GC thread waited on storage while the application was stopped: log \
        asynchronously (-Xlog:async, JDK 17+), put GC and safepoint logs on a fast local disk or \
        tmpfs, and -XX:+PerfDisableSharedMem for hsperfdata",
    colour: "D",
    instigator: Search::Writer(Writer {
        why: "keeping busy the storage the VM thread waited on",
        flusher_first: false,
        cgroup_fix: false,
    }),
    ..Spec::DEFAULT
};
