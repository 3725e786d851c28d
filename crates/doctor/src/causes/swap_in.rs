//! `swap-in`: swap-in of anonymous memory ([docs/causes/swap-in.md](../../../../docs/causes/swap-in.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "swap-in",
    title: "swap-in of anonymous memory",
    fix: "keep the JVM's memory resident: no swap for its cgroup (memory.swap.max=0 on cgroup v2, \
        memory.swappiness=0 or memory.memsw.limit_in_bytes = memory.limit_in_bytes on v1) with \
        -XX:+AlwaysPreTouch, more headroom in its memory limit, or a smaller heap",
    fix_for_process: Some("keep the process's memory resident: no swap for its cgroup \
        (memory.swap.max=0 on cgroup v2), mlockall, or more headroom in its memory limit"),
    colour: "D",
    ..Spec::DEFAULT
};
