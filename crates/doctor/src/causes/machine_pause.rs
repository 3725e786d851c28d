//! `machine-pause`: whole machine paused ([docs/causes/machine-pause.md](../../../../docs/causes/machine-pause.md)).

use super::{Search, Spec};

pub(super) const SPEC: Spec = Spec {
    id: "machine-pause",
    title: "whole machine paused",
    fix: "the whole machine stopped (VM steal, live migration, an overloaded host): look at the \
        hypervisor, or move to dedicated hosts",
    colour: "control",
    instigator: Search::Nobody,
    ..Spec::DEFAULT
};
