//! `gc-locker`: a collection held back while a thread was in a JNI critical region, and the
//! threads that needed memory waited for it ([docs/causes/gc-locker.md](../../../../docs/causes/gc-locker.md)).
//!
//! Read from the GC locker's own flag, which the recorder reads from the JVM's memory at each of
//! a stall's looks (`who.jsonl`'s `gc-locker` lines): `GCLocker::_needs_gc` (JDK 8 to 21),
//! `GCLocker::_is_gc_request_pending` (JDK 22 on). On JDK 22 and later the thread that asks for
//! the collection holds `Heap_lock` and spins until every thread has left its region, so the
//! stall is outside any safepoint and nothing wakes the waiters until the region is left: the
//! meter parked on the heap's lock is all the samples show. The thread in the region is not
//! listed by the JVM (`JavaThread::_jni_active_critical` is not in its structures): the one
//! application thread on a CPU through the hold is named, and none where that is not clear.

use super::{InstigatorKind, Spec};
use recording::Who;

pub(super) const SPEC: Spec = Spec {
    id: "gc-locker",
    title: "a collection held back by a JNI critical region (the GC locker)",
    fix: "a thread in a JNI critical region (GetPrimitiveArrayCritical or GetStringCritical: \
        java.util.zip's Deflater, Inflater, CRC32 and Adler32 on heap arrays, or the \
        application's own JNI code) kept the collection that other threads needed from running, \
        and they waited for memory until it left: keep critical regions short (hand the native \
        code smaller arrays at a time; Deflater, Inflater and CRC32 also take direct \
        ByteBuffers, which need no critical region), copy with Get<Type>ArrayRegion instead, or \
        use a collector that pins regions instead of locking collections out (G1 on JDK 22 and \
        later)",
    colour: "at",
    // JDK 8 to 21: the last thread out of the region runs the collection held back, and the
    // requester's reading names it (`GCLocker Initiated GC` from a native method).
    answered_by: &[InstigatorKind::JavaThread],
    code_lead: Some("the JNI critical region held in"),
    ..Spec::DEFAULT
};

/// How long, between `from` and `to`, the GC locker held a collection back, by a stall's
/// `gc-locker` lines (each written as the flag was seen to change; the state holds until the
/// next line, and the last until `to`). 0 without such lines (a JVM whose `libjvm.so` has no
/// full symbol table, a recording made before the flag was read).
pub fn held_back_ns<'a>(lines: impl IntoIterator<Item = &'a Who>, from: u64, to: u64) -> u64 {
    let mut seen: Vec<(u64, bool)> = lines
        .into_iter()
        .filter_map(|w| match w {
            Who::GcLocker { t, held_back, .. } => Some((*t, *held_back)),
            _ => None,
        })
        .collect();
    seen.sort_by_key(|s| s.0);
    let mut held = 0;
    for (i, (t, on)) in seen.iter().enumerate() {
        if !on {
            continue;
        }
        let until = seen.get(i + 1).map_or(to, |n| n.0).min(to);
        held += until.saturating_sub((*t).max(from));
    }
    held
}

#[cfg(test)]
mod tests {
    use super::held_back_ns;
    use crate::Cause;
    use crate::classify::tests::{MS, inputs, thread};
    use crate::classify::{Inputs, Segment, SegmentKind, classify};
    use crate::evidence::{StallEvidence, ThreadEvidence};
    use crate::wait::{Seen, Wait};
    use crate::report::Confidence;
    use crate::signals::SystemSignals;
    use recording::Who;
    use std::collections::{BTreeMap, HashMap};

    fn line(t: u64, held_back: bool) -> Who {
        Who::GcLocker { t, stall: 1, held_back }
    }

    #[test]
    fn the_hold_lasts_from_each_line_that_set_it_to_the_next_line_or_the_end() {
        let lines = [line(10, true), line(40, false), line(60, true)];
        assert_eq!(held_back_ns(&lines, 0, 100), 30 + 40);
        // Clipped to the window asked for, whatever the lines' order.
        let shuffled = [line(60, true), line(10, true), line(40, false)];
        assert_eq!(held_back_ns(&shuffled, 20, 80), 20 + 20);
        assert_eq!(held_back_ns(&[line(10, false)], 0, 100), 0);
        assert_eq!(held_back_ns(&[], 0, 100), 0);
        let other = Who::Resumed { t: 5, stall: 1 };
        assert_eq!(held_back_ns([&other, &line(50, true)], 0, 100), 50);
    }

    /// As measured on Temurin 25 (`gc-locker --mb 24`, ParallelGC, `-Xmn16m`): a 697 ms hiccup
    /// outside any safepoint, the meter parked on the heap's lock throughout, the thread
    /// deflating on a CPU for 683 ms, the allocator that asked for the collection spinning and
    /// napping (148 ms on a CPU), the GC locker's flag set at every look.
    fn stall(held_back_ns: u64, deflaters: usize) -> Vec<crate::report::Finding> {
        let span = 697 * MS;
        let seen = |t: &mut ThreadEvidence, how: Seen| {
            t.span_ns = span;
            t.seen_ns = BTreeMap::from([(how, span)]);
        };
        let mut meter = thread(30, "stallscope-hicc", 'S', 95_000, 0);
        seen(&mut meter, Seen::Waiting(Wait::Parked));
        let mut threads = vec![meter];
        for i in 0..deflaters {
            let mut t = thread(74 + i as i32, "deflater", 'R', 683 * MS, 2 * MS);
            seen(&mut t, Seen::Runnable);
            t.utime_ticks = 68;
            threads.push(t);
        }
        let mut allocator = thread(75 + deflaters as i32, "allocator", 'R', 148 * MS, 31 * MS);
        seen(&mut allocator, Seen::Runnable);
        threads.push(allocator);
        let whole = StallEvidence {
            threads,
            sample_times: (0..=10).map(|i| i * span / 10).collect(),
            stopped_share: vec![],
        };
        let segments =
            [Segment { kind: SegmentKind::Outside, start_ns: 0, end_ns: span, evidence: whole.clone() }];
        let names = HashMap::new();
        let signals = SystemSignals::default();
        classify(&Inputs {
            meter_tid: Some(30),
            outside_safepoints: true,
            gc_locker_held_ns: held_back_ns,
            ..inputs(span, &whole, &segments, &signals, &names)
        })
    }

    #[test]
    fn a_meter_parked_while_the_gc_locker_held_a_collection_back_is_the_gc_locker() {
        let f = stall(690 * MS, 1);
        assert_eq!(f[0].cause, Cause::GcLocker, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "the flag itself, through the stall");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["deflater"], "the one thread on a CPU through the hold, not the allocator: {:?}", f[0].evidence);
        let said = f[0].evidence.join("\n");
        assert!(said.contains("held a collection back for 690 ms"), "{said}");
        assert!(said.contains("\"deflater\""), "{said}");
    }

    #[test]
    fn without_the_flag_or_with_two_threads_running_it_says_no_more_than_it_knows() {
        // The flag seen set for a sliver of the stall: the meter's wait is not put on it.
        let short = stall(100 * MS, 1);
        assert!(short.iter().all(|d| d.cause != Cause::GcLocker), "{short:?}");
        // Two threads ran through it: the cause stands, the region's holder is not guessed.
        let two = stall(690 * MS, 2);
        assert_eq!(two[0].cause, Cause::GcLocker, "{two:?}");
        assert!(two[0].culprits.is_empty(), "{:?}", two[0].culprits);
        assert!(two[0].evidence.join("\n").contains("not told apart"), "{:?}", two[0].evidence);
    }
}
