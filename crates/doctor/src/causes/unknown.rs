//! `unknown`: unknown ([docs/causes/unknown.md](../../../../docs/causes/unknown.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "unknown",
    title: "unknown",
    fix: "the evidence is thin; the raw samples below show what each thread was doing",
    colour: "muted",
    ..Spec::DEFAULT
};
