//! `no-safepoint-poll`: running without a safepoint poll ([docs/causes/no-safepoint-poll.md](../../../../docs/causes/no-safepoint-poll.md)).

use super::Spec;

pub(super) const SPEC: Spec = Spec {
    id: "no-safepoint-poll",
    title: "running without a safepoint poll",
    fix: "the thread runs a loop (or a huge copy) that never polls for safepoints: keep loop strip \
        mining on (G1, ZGC and Shenandoah do by default; -XX:+UseCountedLoopSafepoints \
        elsewhere), or give the loop a long index or a call out",
    colour: "ttsp",
    code_lead: Some("the loop in"),
    ..Spec::DEFAULT
};
