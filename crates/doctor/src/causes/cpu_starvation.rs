//! `cpu-starvation`: CPU starvation ([docs/causes/cpu-starvation.md](../../../../docs/causes/cpu-starvation.md)).

use super::{Search, Spec};
use super::InstigatorKind;

pub(super) const SPEC: Spec = Spec {
    id: "cpu-starvation",
    title: "CPU starvation",
    fix: "give the JVM the CPUs it needs: fewer runnable threads than cores, or noisy neighbours \
        kept out of its way (a cgroup with cpu.idle=1 for batch work, cpusets, a lower \
        cpu.weight); else run its threads SCHED_FIFO while it reaches each safepoint (stallscope \
        run --boost fifo:1)",
    fix_for_process: Some("give the process the CPUs it needs: fewer runnable threads than cores, \
        or the neighbours named kept out of its way (cpusets, a lower cpu.weight or cpu.idle=1 \
        for batch work), or a higher priority for its latency-critical threads"),
    colour: "psi",
    instigator: Search::CpuNeighbours,
    answered_by: &[InstigatorKind::CpuNeighbours],
    ..Spec::DEFAULT
};
