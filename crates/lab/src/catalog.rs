//! Every scenario by name: the one place a scenario's id becomes its type. An id that does not
//! exist is a compile error here, and a parse error (with the list) on the command line.

use super::model::ScenarioResult;
use super::runner;
use super::scenario::{Ctx, Scenario, Spec, VariantSpec};
use super::scenarios::{
    counted_loop::CountedLoop, cpu_contention::CpuContention, cpu_quota::CpuQuota, frozen::Frozen,
    long_gc::LongGc, mapped_write::MappedWrite, memory_pressure::MemoryPressure,
    mmap_fault::MmapFault, mmap_lock::MmapLock, perf_writeback::PerfWriteback, slow_log::SlowLog,
    swap::Swap, tlb_shootdown::TlbShootdown,
};
use anyhow::Result;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScenarioId {
    CountedLoop,
    MmapFault,
    TlbShootdown,
    MmapLock,
    CpuContention,
    Frozen,
    Swap,
    SlowLog,
    PerfWriteback,
    MappedWrite,
    MemoryPressure,
    CpuQuota,
    LongGc,
}

impl ScenarioId {
    /// Every scenario, in the order the lab runs them.
    pub const ALL: [ScenarioId; 13] = [
        ScenarioId::CountedLoop,
        ScenarioId::MmapFault,
        ScenarioId::TlbShootdown,
        ScenarioId::MmapLock,
        ScenarioId::CpuContention,
        ScenarioId::Frozen,
        ScenarioId::Swap,
        ScenarioId::SlowLog,
        ScenarioId::PerfWriteback,
        ScenarioId::MappedWrite,
        ScenarioId::MemoryPressure,
        ScenarioId::CpuQuota,
        ScenarioId::LongGc,
    ];

    pub fn spec(self) -> &'static Spec {
        match self {
            ScenarioId::CountedLoop => &CountedLoop::SPEC,
            ScenarioId::MmapFault => &MmapFault::SPEC,
            ScenarioId::TlbShootdown => &TlbShootdown::SPEC,
            ScenarioId::MmapLock => &MmapLock::SPEC,
            ScenarioId::CpuContention => &CpuContention::SPEC,
            ScenarioId::Frozen => &Frozen::SPEC,
            ScenarioId::Swap => &Swap::SPEC,
            ScenarioId::SlowLog => &SlowLog::SPEC,
            ScenarioId::PerfWriteback => &PerfWriteback::SPEC,
            ScenarioId::MappedWrite => &MappedWrite::SPEC,
            ScenarioId::MemoryPressure => &MemoryPressure::SPEC,
            ScenarioId::CpuQuota => &CpuQuota::SPEC,
            ScenarioId::LongGc => &LongGc::SPEC,
        }
    }

    pub fn variants(self) -> Vec<&'static VariantSpec> {
        fn specs<S: Scenario>() -> Vec<&'static VariantSpec> {
            S::VARIANTS.iter().map(|(_, v)| v).collect()
        }
        match self {
            ScenarioId::CountedLoop => specs::<CountedLoop>(),
            ScenarioId::MmapFault => specs::<MmapFault>(),
            ScenarioId::TlbShootdown => specs::<TlbShootdown>(),
            ScenarioId::MmapLock => specs::<MmapLock>(),
            ScenarioId::CpuContention => specs::<CpuContention>(),
            ScenarioId::Frozen => specs::<Frozen>(),
            ScenarioId::Swap => specs::<Swap>(),
            ScenarioId::SlowLog => specs::<SlowLog>(),
            ScenarioId::PerfWriteback => specs::<PerfWriteback>(),
            ScenarioId::MappedWrite => specs::<MappedWrite>(),
            ScenarioId::MemoryPressure => specs::<MemoryPressure>(),
            ScenarioId::CpuQuota => specs::<CpuQuota>(),
            ScenarioId::LongGc => specs::<LongGc>(),
        }
    }

    /// Runs every variant of the scenario `ctx.reps` times and judges the result.
    pub fn execute(self, ctx: &Ctx) -> Result<ScenarioResult> {
        match self {
            ScenarioId::CountedLoop => runner::execute::<CountedLoop>(ctx),
            ScenarioId::MmapFault => runner::execute::<MmapFault>(ctx),
            ScenarioId::TlbShootdown => runner::execute::<TlbShootdown>(ctx),
            ScenarioId::MmapLock => runner::execute::<MmapLock>(ctx),
            ScenarioId::CpuContention => runner::execute::<CpuContention>(ctx),
            ScenarioId::Frozen => runner::execute::<Frozen>(ctx),
            ScenarioId::Swap => runner::execute::<Swap>(ctx),
            ScenarioId::SlowLog => runner::execute::<SlowLog>(ctx),
            ScenarioId::PerfWriteback => runner::execute::<PerfWriteback>(ctx),
            ScenarioId::MappedWrite => runner::execute::<MappedWrite>(ctx),
            ScenarioId::MemoryPressure => runner::execute::<MemoryPressure>(ctx),
            ScenarioId::CpuQuota => runner::execute::<CpuQuota>(ctx),
            ScenarioId::LongGc => runner::execute::<LongGc>(ctx),
        }
    }

    /// Parses a scenario's id as `lab run` takes it.
    pub fn parse(s: &str) -> Result<ScenarioId, String> {
        ScenarioId::ALL.into_iter().find(|id| id.spec().id == s).ok_or_else(|| {
            let ids: Vec<&str> = ScenarioId::ALL.iter().map(|id| id.spec().id).collect();
            format!("unknown scenario '{s}'; `stallscope lab list` shows them: {}", ids.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_scenarios_once() {
        for id in ScenarioId::ALL {
            assert_eq!(ScenarioId::parse(id.spec().id), Ok(id));
            assert!(!id.variants().is_empty(), "{id:?} has a baseline");
        }
        let ids: std::collections::BTreeSet<&str> =
            ScenarioId::ALL.iter().map(|id| id.spec().id).collect();
        assert_eq!(ids.len(), ScenarioId::ALL.len(), "ids are unique");
        assert!(ScenarioId::parse("nonsense").unwrap_err().contains("unknown scenario 'nonsense'"));
    }
}
