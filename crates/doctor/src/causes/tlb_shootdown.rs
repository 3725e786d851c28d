//! `tlb-shootdown`: TLB shootdown storm ([docs/causes/tlb-shootdown.md](../../../../docs/causes/tlb-shootdown.md)).

use super::{Search, Spec};
use super::InstigatorKind;

pub(super) const SPEC: Spec = Spec {
    id: "tlb-shootdown",
    title: "TLB shootdown storm",
    fix: "stop mapping and unmapping small files or regions in hot paths: read with pread into \
        pooled buffers, or keep the mappings open",
    colour: "tlb",
    instigator: Search::MemoryMapper,
    answered_by: &[InstigatorKind::MemoryMapper],
    ..Spec::DEFAULT
};
