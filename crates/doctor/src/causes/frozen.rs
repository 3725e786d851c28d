//! `frozen`: process frozen or stopped ([docs/causes/frozen.md](../../../../docs/causes/frozen.md)).

use super::{Search, Spec};

pub(super) const SPEC: Spec = Spec {
    id: "frozen",
    title: "process frozen or stopped",
    fix: "something stopped the process (SIGSTOP, a debugger, a paused container or frozen \
        cgroup): find what sent it",
    colour: "T",
    instigator: Search::Stopper,
    answered_by_any: true,
    says_why_no_instigator: true,
    ..Spec::DEFAULT
};
