//! The thread a flight recording shows late to a safepoint (running across it, by its samples),
//! what it ran, and the machine's CPU load around it.

use super::*;

/// What the CPUs did around the stall, when JFR read their load just after it: `(words, others
/// took them)`.
pub(super) fn cpu_words(f: &FlightFile, end: i64) -> Option<(String, bool)> {
    let loads = &f.data.cpu_load;
    let from = loads.partition_point(|l| l.epoch_ns < end);
    let l = loads[from..]
        .iter()
        .take_while(|l| l.epoch_ns - end <= LOAD_NEAR_NS)
        // JFR's first reading of a recording is all zeros: nothing was measured yet.
        .filter(|l| l.machine_total > 0.0)
        .min_by_key(|l| l.epoch_ns)?;
    let jvm = l.jvm_user + l.jvm_system;
    let others = l.machine_total >= BUSY_MACHINE && jvm < l.machine_total / 2.0;
    Some((
        format!(
            "over the second around it the machine's CPUs were {:.0}% busy, {:.0}% of them the JVM's (jdk.CPULoad)",
            l.machine_total * 100.0,
            jvm * 100.0
        ),
        others,
    ))
}

pub(super) fn finding(cause: Cause, confidence: Confidence, share: f64) -> Finding {
    Finding {
        cause,
        title: cause.title().into(),
        confidence,
        share,
        culprits: vec![],
        evidence: vec![],
        fix: cause.fix().into(),
        doc: cause.doc(),
        instigator: None,
    }
}

/// The thread that held the time to safepoint, and how it is known.
pub(super) struct Late {
    pub(super) tid: i32,
    pub(super) name: String,
    pub(super) description: String,
    /// What named it, in words.
    pub(super) said: String,
    /// Its stack (where known) is in a buffer or memory access.
    pub(super) touches_memory: bool,
    /// Its stack is known (a latency sample's, or a sample near the stall).
    pub(super) code_known: bool,
    pub(super) by_timeout: bool,
}

/// The thread that held the time to safepoint: where a `jdk.SafepointLatency` sample of the
/// stall says it ran without a poll for most of it, else where the GC log's SafepointTimeout
/// named it.
pub(super) fn late_thread(
    g: &Gathered,
    ttsp: u64,
    frames: &[FrameSample],
    meta: &Meta,
    log: Option<&Safepoint>,
) -> Option<Late> {
    let (a, b) = (mono(meta, g.start()), mono(meta, g.start()) + ttsp);
    let sampled = frames
        .iter()
        .filter(|s| s.event == "jdk.SafepointLatency")
        .filter(|s| s.t < b && s.t + s.latency_ns.unwrap_or(0) > a)
        .filter(|s| s.latency_ns.unwrap_or(0) as f64 >= MAIN_SHARE * ttsp as f64)
        .max_by_key(|s| s.latency_ns);
    if let Some(s) = sampled {
        let latency = s.latency_ns.unwrap_or(0);
        return Some(Late {
            tid: s.tid,
            name: s.name.clone(),
            description: format!("slow to reach its safepoint poll ({})", fmt_ns(latency)),
            said: format!(
                "JFR's jdk.SafepointLatency sampled \"{}\" taking {} to reach its next safepoint poll inside it",
                s.name,
                fmt_ns(latency)
            ),
            touches_memory: s.frames.iter().any(|f| memory_access(&f.method)),
            code_known: true,
            by_timeout: false,
        });
    }
    if let Some(late) = running_in_window(g, frames, meta) {
        return Some(late);
    }
    let c = log?.culprits.first()?;
    let tid = c.os_tid.and_then(|t| i32::try_from(t).ok()).unwrap_or(0);
    let end = mono(meta, g.end());
    let code = crate::code::for_thread(&near_stall(frames, a, end), tid, a, end, (a, end));
    let state = c.state.clone().unwrap_or_else(|| "state not said".into());
    Some(Late {
        tid,
        name: c.name.clone(),
        description: format!("did not reach the safepoint ({state}, SafepointTimeout)"),
        said: format!(
            "the GC log's SafepointTimeout named \"{}\" ({state}) as the thread that did not reach the safepoint",
            c.name
        ),
        touches_memory: code
            .as_ref()
            .is_some_and(|k| k.frames.iter().any(|f| memory_access(&f.method))),
        code_known: code.is_some(),
        by_timeout: true,
    })
}

/// The samples a stall's rules look at: this far either side of it (more than any of theirs).
pub(super) const LOCAL_NS: u64 = 2_000_000_000;
/// A sample this close to a stall shows a culprit's code there: JFR samples a running thread
/// every 10-20 ms, and one from further away may be of code it had left.
pub(super) const CODE_NEAR_NS: u64 = 100_000_000;

/// The samples within [`CODE_NEAR_NS`] of a stall from `a` to `b`.
pub(super) fn near_stall(frames: &[FrameSample], a: u64, b: u64) -> Vec<FrameSample> {
    frames.iter().filter(|s| s.t + CODE_NEAR_NS >= a && s.t <= b + CODE_NEAR_NS).cloned().collect()
}

/// Samples of one thread, at least, that make it the one running through a window.
pub(super) const WINDOW_MIN_SAMPLES: usize = 3;

/// The thread async-profiler sampled on a CPU through most of its time-to-safepoint window: it
/// samples only inside the windows (`--ttsp`), so a thread sampled there was running, not
/// stopped at a safepoint.
pub(super) fn running_in_window(g: &Gathered, frames: &[FrameSample], meta: &Meta) -> Option<Late> {
    let (a, d) = g.window?;
    let (from, to) = (mono(meta, a), mono(meta, a + d));
    let inside: Vec<&FrameSample> = frames
        .iter()
        .filter(|s| s.event == "jdk.ExecutionSample" && s.t >= from && s.t <= to)
        .collect();
    let mut by: BTreeMap<i32, Vec<&FrameSample>> = BTreeMap::new();
    for s in &inside {
        by.entry(s.tid).or_default().push(s);
    }
    let (tid, mine) = by.into_iter().max_by_key(|(_, v)| v.len())?;
    // More than half the window's samples: one thread, never a tie.
    if mine.len() < WINDOW_MIN_SAMPLES || mine.len() * 2 <= inside.len() {
        return None;
    }
    let name = mine[0].name.clone();
    Some(Late {
        tid,
        name: name.clone(),
        description: format!(
            "running on a CPU through the time to safepoint ({} samples)",
            mine.len()
        ),
        said: format!(
            "async-profiler sampled \"{name}\" running on a CPU {} times in its {} time-to-safepoint window ({} of the window's samples)",
            mine.len(),
            fmt_ns(d.max(0) as u64),
            inside.len()
        ),
        touches_memory: mine.iter().any(|s| s.frames.iter().any(|f| memory_access(&f.method))),
        code_known: true,
        by_timeout: false,
    })
}

/// Whether a frame reads or writes memory a fault can stall: a buffer's, or Unsafe's bulk copies.
pub(super) fn memory_access(method: &str) -> bool {
    [
        "java.nio.",
        "jdk.internal.misc.ScopedMemoryAccess",
        "jdk.internal.misc.Unsafe",
        "sun.misc.Unsafe",
    ]
    .iter()
    .any(|p| method.starts_with(p))
}

/// Threads JFR sampled running Java code both just before and just after the stall: those
/// that may have held the time to safepoint (never more than candidates).
pub(super) fn running_across(g: &Gathered, frames: &[FrameSample], meta: &Meta) -> Vec<String> {
    let (a, b) = (mono(meta, g.start()), mono(meta, g.end()));
    let near = 200_000_000;
    let java = |s: &&FrameSample| s.event == "jdk.ExecutionSample";
    let before: HashMap<i32, &FrameSample> = frames
        .iter()
        .filter(java)
        .filter(|s| s.t <= a && a - s.t <= near)
        .map(|s| (s.tid, s))
        .collect();
    let mut out: Vec<String> = frames
        .iter()
        .filter(java)
        .filter(|s| s.t >= b && s.t - b <= near)
        .filter_map(|s| before.get(&s.tid).map(|p| (s, p)))
        .filter(|(s, p)| s.frames.first().map(|f| &f.method) == p.frames.first().map(|f| &f.method))
        .map(|(s, _)| format!("\"{}\" in {}", s.name, crate::code::describe_frame(&s.frames[0])))
        .collect();
    out.sort();
    out.dedup();
    out
}
