//! `long-vm-operation`: long VM operation at the safepoint ([docs/causes/long-vm-operation.md](../../../../docs/causes/long-vm-operation.md)).

use super::Spec;
use super::InstigatorKind;

pub(super) const SPEC: Spec = Spec {
    id: "long-vm-operation",
    title: "long VM operation at the safepoint",
    fix: "the operation run at the safepoint was long itself: tune or avoid it (see its name: a \
        full GC, a heap dump, class redefinition)",
    colour: "at",
    answered_by: &[InstigatorKind::JavaThread, InstigatorKind::AttachClient, InstigatorKind::RemoteJmx],
    says_why_no_instigator: true,
    ..Spec::DEFAULT
};
