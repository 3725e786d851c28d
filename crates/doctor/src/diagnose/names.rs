//! The names a stall's threads go by (the agent's, the JVM's own, a pool's placeholder given way),
//! who set the stall off, and the culprit's code with the fix at that level.

use super::*;

/// A stall's window and the samples and tracepoint events in it, for naming who set it off.
pub(super) struct WhoSpan<'a> {
    pub(super) samples: &'a [&'a Sample],
    pub(super) trace: &'a [recording::disk::TraceEvent],
    pub(super) start_ns: u64,
    pub(super) end_ns: u64,
}

/// Names who set off each finding of a stall (and, for a JVM frozen in place by a cgroup
/// freezer, which its threads' states do not show, replaces them with that).
#[allow(clippy::too_many_arguments)]
pub(super) fn instigators(
    rec: &Recording,
    stall: u32,
    w: WhoSpan,
    names: &HashMap<i32, String>,
    all_names: &HashMap<i32, String>,
    safepoint: Option<&SafepointView>,
    findings: &mut Vec<Finding>,
    raw: &mut Vec<ThreadLine>,
) {
    // Java names from every stall's table where this one's lacks a thread (the agent's table
    // of the first stalls may not be written yet): a thread keeps its id.
    let who_names = stall_names(all_names, names);
    let who = crate::instigator::WhoInputs {
        stall,
        lines: rec.who.iter().filter(|w| w.stall() == stall).collect(),
        has_who: rec.has_who,
        tracepoints: rec.meta.tracepoints,
        names: &who_names,
        start_ns: w.start_ns,
        end_ns: w.end_ns,
        samples: w.samples,
        trace: w.trace,
        not_a_jvm: rec.meta.not_a_jvm,
        kwaits: rec.kwaits.iter().find(|k| k.stall == stall),
    };
    // Frozen in place by a cgroup freezer: its threads' states do not say it, its file does.
    if findings.first().is_none_or(|f| f.cause != Cause::Frozen)
        && let Some(f) = crate::instigator::held_finding(&who, classify::HIGH_SHARE)
    {
        *findings = vec![f];
        raw.clear();
    }
    crate::instigator::assign(findings, &who, safepoint);
}

/// Each thread's name as first seen: the names are for the first stalls, whose own table may
/// not be written yet, and a thread renamed since (an RMI connection thread back in its pool as
/// "RMI TCP Connection(idle)") was called by its earlier name when it acted. A pool's placeholder
/// name gives way to the first real one, whenever seen: the agent's table can lag a pooled
/// thread's rename by a call or two (seen on JDK 25: "(idle)" in the table of the stalls its
/// first JMX calls made, "RMI TCP Connection(1)-127.0.0.1" from the fourth on).
pub(super) fn first_names(contexts: &[StallContext]) -> HashMap<i32, String> {
    let mut all: HashMap<i32, String> = HashMap::new();
    add_first_names(&mut all, contexts);
    all
}

/// Adds to `all` the names `contexts` give threads it has none for, or only a pool's
/// placeholder.
pub(super) fn add_first_names(all: &mut HashMap<i32, String>, contexts: &[StallContext]) {
    for j in contexts.iter().flat_map(|c| c.java_threads.iter()).filter(|j| j.tid > 0) {
        match all.get(&j.tid) {
            Some(n) if !pool_placeholder(n) || pool_placeholder(&j.name) => {}
            _ => {
                all.insert(j.tid, j.name.clone());
            }
        }
    }
}

/// The names for naming who set a stall off: the stall's own table over the recording's, but
/// never a pool's placeholder over a real name.
pub(super) fn stall_names(
    all: &HashMap<i32, String>,
    own: &HashMap<i32, String>,
) -> HashMap<i32, String> {
    let mut names = all.clone();
    for (tid, n) in own {
        if !pool_placeholder(n) || all.get(tid).is_none_or(|a| pool_placeholder(a)) {
            names.insert(*tid, n.clone());
        }
    }
    names
}

/// The name a pool gives a thread between tasks (`RMI TCP Connection(idle)`): it says nothing of
/// what the thread did when it acted.
pub(super) fn pool_placeholder(name: &str) -> bool {
    name.ends_with("(idle)")
}

/// Gives each culprit its code (the JVM's stack sample nearest the stall, see [`crate::code`]),
/// and names the code in the fix of each finding whose first culprit has one.
pub(super) fn name_the_code(
    findings: &mut [Finding],
    frames: &[recording::FrameSample],
    start: u64,
    end: u64,
    stall: (u64, u64),
) {
    for f in findings.iter_mut() {
        for c in f.culprits.iter_mut() {
            c.code = crate::code::for_thread(frames, c.tid, start, end, stall);
        }
        let threads: Vec<String> = f
            .culprits
            .iter()
            .filter(|c| c.code.is_none() && !evidence::jvm_internal(&c.name))
            .map(|c| c.name.clone())
            .collect();
        if !threads.is_empty() && f.cause != Cause::Unknown {
            let near_ns = crate::code::NEAR_NS;
            let said = if frames.iter().any(|s| s.event == crate::code::OUTSIDE) {
                Evidence::NoStackFromOutside { threads, near_ns }
            } else {
                Evidence::NoFlightRecorderStack { threads, near_ns }
            };
            f.evidence.push(said.to_string());
        }
        // Only where the fix is a change to that code: not for CPU starvation, say, whose fix is
        // the machine's.
        let Some(code) = f.culprits.first().and_then(|c| c.code.as_ref()) else { continue };
        // The perf counters are written by the VM itself, whatever Java code a thread ran.
        if f.fix == crate::classify::PERF_DATA_FIX {
            continue;
        }
        if let Some(fix) = fix_in_code(f.cause, code, &f.fix) {
            f.fix = fix;
        }
    }
}

/// A fix that names the culprit's code where the user has a choice: their own frame, and when the
/// thread was inside a well-known library (Lucene, Chronicle, Netty), what that library offers.
/// `None` where the cause's fix is not a change to code.
pub(crate) fn fix_in_code(
    cause: Cause,
    code: &crate::code::CulpritCode,
    fix: &str,
) -> Option<String> {
    use crate::code::{bulk_vm_call, describe_frame, library_of, short_method};
    let top = code.frames.first();
    let bulk = top.filter(|t| bulk_vm_call(&t.method));
    let library = code
        .library_frame
        .and_then(|i| code.frames.get(i))
        .and_then(|fr| Some((fr, library_of(&fr.method)?)));
    let app = code.app_frame.and_then(|i| code.frames.get(i));
    if let Some((frame, lib)) = library {
        let from = app.map(|a| format!(", called from {}", describe_frame(a))).unwrap_or_default();
        let at = format!("{}'s {}{from}", lib.name, describe_frame(frame));
        return match (cause, bulk) {
            (Cause::MajorFault, _) => Some(format!("the read in {at}: {}", lib.mapped_read)),
            (Cause::MappedWriteback, _) => {
                Some(format!("the write in {at}: {}", lib.mapped_write.unwrap_or(fix)))
            }
            (Cause::NoSafepointPoll, Some(t)) => {
                Some(format!("the call to {} in {at}: {}", short_method(&t.method), lib.bulk_call))
            }
            (Cause::NoSafepointPoll, None) => Some(format!("the loop in {at}: {fix}")),
            _ => None,
        };
    }
    let (lead, tail) = match (cause, bulk) {
        // Caught in a bulk copy or fill inside the VM (a huge `Unsafe.setMemory0`): no loop of
        // the application's to change, but the call.
        (Cause::NoSafepointPoll, Some(t)) if app.is_some() => (
            format!("split the call to {} in", short_method(&t.method)),
            " into calls of a few MiB each",
        ),
        _ => (cause.spec().code_lead?.to_string(), ""),
    };
    let frame = code.fix_frame()?;
    Some(format!("{lead} {}{tail}: {fix}", describe_frame(frame)))
}
