//! `cgroup-throttling`: cgroup CPU throttling ([docs/causes/cgroup-throttling.md](../../../../docs/causes/cgroup-throttling.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "cgroup-throttling",
    title: "cgroup CPU throttling",
    fix: "raise the cgroup's CPU quota above the JVM's demand, or size GC and compiler threads to \
        fit it (-XX:ParallelGCThreads, -XX:CICompilerCount)",
    colour: "steal",
    ..Spec::DEFAULT
};
