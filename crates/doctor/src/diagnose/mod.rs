//! The doctor's analysis: a pure function from a recording, already read, to a [`Report`]. The
//! live run prints exactly what `stallscope report DIR` prints, because both call [`diagnose`].
//!
//! Invariant: reads only the [`Recording`] (no `/proc`, no clock, no file system), so the same
//! recording always gives the same report.
//!
//! The steps, each a function with its own test: [`stall_spans`] (when each stall began and ended,
//! from the recorder's events; in [`crate::spans`]), [`match_safepoint`] (the safepoint that held
//! the world then) and [`spanned_safepoints`] (every one the stall spans; both in
//! [`crate::safepoints`]), [`segments`] (the stall
//! cut into reaching each safepoint, at it, and outside any; in `classify`), [`crate::signals`]
//! (machine-wide counters around it), then per stall the evidence ([`crate::evidence`]) and its
//! classification ([`crate::classify`]), an honest `unknown` with the busiest threads when nothing
//! explains it, and finally [`summarise`] (in [`crate::summary`]).

use crate::causes::Cause;
use crate::classify::{self, Evidence, Segment, segments};
use crate::evidence::{self, StallEvidence};
use crate::report::{
    Confidence, Finding, KernelThreadView, Report, SCHEMA, SafepointView, StallReport, ThreadLine,
};
use crate::safepoints::{
    LATE_BEGIN_NS, TICK_AFTER_BEGIN_NS, match_safepoint, spanned_safepoints, unended_safepoint,
};
use crate::signals::system_signals;
use crate::spans::{StallSpan, end_of_recording, stall_spans};
use crate::summary::summarise;
use crate::wait::Wait;
use recording::{Event, Meta, Recording, Sample, StallContext, SystemSample};
use std::collections::HashMap;

mod names;
mod stall;

pub(crate) use names::fix_in_code;
use names::*;
use stall::*;

/// A thread parked this share of a stall was holding nothing up.
const PARKED_THROUGHOUT: f64 = 0.9;
/// A stall the JVM began to exit in, shorter than this, is the exit itself.
const EXIT_NS: u64 = 200_000_000;
/// Threads listed as raw samples when a stall's cause is unknown.
const RAW_THREADS: usize = 8;

/// Local wall time of a monotonic instant, through the recording's start on both clocks.
pub fn wall_of(meta: &Meta, mono_ns: u64) -> String {
    hotspot_log::format_wall(hotspot_log::WallTime {
        epoch_ms: meta.epoch_ms_of_mono(mono_ns),
        offset_min: meta.utc_offset_min,
    })
}

/// The answer when nothing explains a stall: `unknown`, saying what was (not) seen.
fn unknown_finding(ev: &StallEvidence) -> Finding {
    let said = if ev.sample_times.is_empty() {
        Evidence::NoSamples
    } else {
        Evidence::NoThreadHolding { samples: ev.sample_times.len(), threads: ev.threads.len() }
    };
    Finding {
        cause: Cause::Unknown,
        title: Cause::Unknown.title().into(),
        confidence: Confidence::Low,
        share: 1.0,
        culprits: vec![],
        evidence: vec![said.to_string()],
        fix: Cause::Unknown.fix().into(),
        doc: Cause::Unknown.doc(),
        instigator: None,
    }
}

/// What kept the recorder from looking during a stall, when it missed a tenth of it or more:
/// steps of its own loop that took long (`RecorderHeld`), or noticing the stall late. Said
/// beside `unknown`, since a stall nobody looked at is not one in which nothing happened.
/// `span` is the stall as diagnosed, `noticed` as the recorder saw it (from the missed tick).
fn recorder_blind(
    events: &[Event],
    span: &StallSpan,
    noticed: &StallSpan,
    threshold_ns: u64,
) -> Option<Evidence> {
    let (start, end) = (span.start_ns, span.end_ns);
    let mut held = 0;
    let mut steps: Vec<String> = Vec::new();
    for e in events {
        let Event::RecorderHeld { t, held_ns, step, .. } = e else { continue };
        let covered = (t + held_ns).min(end).saturating_sub((*t).max(start));
        if covered > 0 {
            held += covered;
            if !steps.contains(step) {
                steps.push(step.clone());
            }
        }
    }
    // A stall is due to be noticed a threshold after it began.
    let late = noticed.noticed_ns.saturating_sub(noticed.start_ns + threshold_ns);
    let d = span.duration_ns().max(1);
    if (held + late) * 10 < d {
        return None;
    }
    Some(Evidence::RecorderBlind { held_ns: held, steps, late_ns: late, stall_ns: d })
}

/// The busiest threads of a stall (CPU and run-queue time, then samples not asleep), as raw
/// sample lines for the user to judge.
fn busiest_threads(ev: &StallEvidence, names: &HashMap<i32, String>) -> Vec<ThreadLine> {
    let mut busiest: Vec<_> = ev.threads.iter().collect();
    busiest.sort_by_key(|t| {
        std::cmp::Reverse((
            t.cpu_ns + t.run_delay_ns,
            t.samples - t.states.get(&'S').copied().unwrap_or(0),
        ))
    });
    busiest
        .into_iter()
        .take(RAW_THREADS)
        .map(|t| ThreadLine {
            tid: t.tid,
            name: names.get(&t.tid).cloned().unwrap_or_else(|| t.comm.clone()),
            states: t.state_line(),
            wchan: t.wchan.clone(),
            cpu_ns: t.cpu_ns,
            run_delay_ns: t.run_delay_ns,
            majflt: t.majflt_since_baseline,
        })
        .collect()
}

/// Whether a thread spent a stall parked: holding nothing up.
fn parked_throughout(t: &evidence::ThreadEvidence, tick_ns: u64) -> bool {
    let a = t.account(tick_ns);
    a.span_ns > 0 && a.wait_ns(Wait::Parked) as f64 >= PARKED_THROUGHOUT * a.span_ns as f64
}

/// The `wchan` each thread was seen asleep in most often in the samples within `[from, to]` (a
/// delta sample lists a thread only when it changed: each listing counts once).
fn sampled_wchans(samples: &[&Sample], from: u64, to: u64) -> HashMap<i32, String> {
    let mut seen: HashMap<i32, HashMap<&str, u32>> = HashMap::new();
    for s in samples.iter().filter(|s| !s.baseline && s.t >= from && s.t <= to) {
        for t in s.threads.iter().filter(|t| t.state != 'R' && !t.wchan.is_empty()) {
            if t.wchan != "0" {
                *seen.entry(t.tid).or_default().entry(t.wchan.as_str()).or_default() += 1;
            }
        }
    }
    seen.into_iter()
        .filter_map(|(tid, w)| {
            let (w, _) = w.into_iter().max_by_key(|(w, n)| (*n, std::cmp::Reverse(*w)))?;
            Some((tid, w.to_string()))
        })
        .collect()
}

/// The diagnosis of a recording: every stall, its causes and culprits, and a summary.
pub fn diagnose(rec: &Recording) -> Report {
    let mut stalls = stalls_of(rec, 0, u32::MAX, &first_names(&rec.context));
    crate::instigator::count_repeats(&mut stalls);
    report_of(rec, stalls)
}

/// What diagnosing a recording's stalls a few at a time, from readings of the stalls after
/// those done (`watch`), carries from one reading to the next: who set off how many stalls, and
/// the names its threads were first seen with.
#[derive(Debug, Default)]
pub struct Carry {
    repeats: crate::instigator::Repeats,
    names: HashMap<i32, String>,
}

/// The stalls numbered after `after` and up to `upto` of `rec` (a reading of the stalls after
/// `after`, `Recording::read_after`), diagnosed as [`diagnose`] does each (against the one
/// before it, wherever that is), with what earlier readings carried: the names of threads seen
/// before, and the count of who set off how many stalls so far.
pub fn diagnose_stalls(
    rec: &Recording,
    after: u32,
    upto: u32,
    carry: &mut Carry,
) -> Vec<StallReport> {
    add_first_names(&mut carry.names, &rec.context);
    let mut stalls = stalls_of(rec, after, upto, &carry.names);
    carry.repeats.add(&stalls);
    carry.repeats.annotate(&mut stalls);
    stalls
}

/// The stalls numbered after `after` and up to `upto`, each diagnosed; `all_names`: the names
/// of the recording's threads, for naming who set them off.
fn stalls_of(
    rec: &Recording,
    after: u32,
    upto: u32,
    all_names: &HashMap<i32, String>,
) -> Vec<StallReport> {
    let meta = &rec.meta;
    let meter_tid = rec.events.iter().find_map(|e| match e {
        Event::MeterRunning { meter_tid, .. } => Some(*meter_tid as i32),
        _ => None,
    });
    let mut by_stall: HashMap<u32, Vec<&Sample>> = HashMap::new();
    for s in &rec.samples {
        by_stall.entry(s.stall).or_default().push(s);
    }
    // The safepoint a JVM exits in never ends: a short stall the JVM exited in is its exit.
    let mut spans: Vec<StallSpan> = stall_spans(&rec.events, rec.now, rec.last_written_ns())
        .into_iter()
        .filter(|s| !(s.exiting && s.duration_ns() < EXIT_NS))
        .collect();
    // A stall begins no earlier than the one before it ended: a tick held up between reading
    // the clock and publishing it (the meter caught in a page fault) ends one stall and opens
    // the next back inside it.
    for i in 1..spans.len() {
        let prev_end = spans[i - 1].end_ns;
        let s = &mut spans[i];
        if s.start_ns < prev_end {
            s.start_ns = prev_end.min(s.end_ns);
        }
    }
    let mut stalls: Vec<StallReport> = spans
        .iter()
        .enumerate()
        .filter(|(_, span)| span.stall > after && span.stall <= upto)
        .map(|(i, span)| {
            let floor = i.checked_sub(1).map_or(0, |p| spans[p].end_ns);
            diagnose_stall(
                rec,
                span,
                floor,
                by_stall.get(&span.stall).map_or(&[][..], |v| &v[..]),
                meter_tid,
                all_names,
            )
        })
        .collect();
    // Stalls shorter than the threshold can be recorded at its edge; they are not stalls.
    stalls.retain(|s| s.duration_ns >= meta.threshold_ns || s.target_exited);
    stalls
}

/// The report of `rec` with its diagnosed `stalls`: the summary and the notes.
fn report_of(rec: &Recording, stalls: Vec<StallReport>) -> Report {
    let meta = &rec.meta;
    let summary = summarise(rec, &stalls);
    let mut notes: Vec<String> = meta.privileges_note.iter().cloned().collect();
    notes.extend(rec.damage.iter().cloned());
    notes.extend(rec.notes.iter().cloned());
    if end_of_recording(&rec.events, rec.now).is_none() {
        notes.push("the recording has no end record: the recorder was killed or crashed (or is still recording), so it was cut short; a stall open at its end ends there".into());
    }
    notes.extend(rec.frames_notes.iter().cloned());
    if !rec.has_who && !stalls.is_empty() {
        notes.push("the recording was made before stallscope looked for who set stalls off (it has no who.jsonl): no finding names its instigator (the thread or process that asked for an operation, stopped the JVM or took its CPUs)".into());
    }
    let counted =
        rec.safepoints.iter().filter(|s| s.format == hotspot_log::Format::PerfCounters).count();
    if meta.not_a_jvm {
        notes.push(format!(
            "{} is not a JVM: it has no safepoint record, heartbeat or perf counters; a stall here is a thread of it held off a CPU by the kernel for {} or more, not by its own choice (waiting for a CPU, in an uninterruptible wait, stopped), found from the kernel's scheduler events",
            meta.command.first().map_or("the program", String::as_str),
            recording::units::fmt_ns(meta.threshold_ns)
        ));
    } else if counted > 0 || (rec.safepoints.is_empty() && rec.counters_info().is_some()) {
        notes.push(format!(
            "the safepoint log {}: {counted} safepoints are placed from the JVM's perf counters (their time to reach and at the safepoint, not their operation but for GCs)",
            if rec.has_safepoint_log { "has no records" } else { "is not in the recording (the JVM was not asked to write one, or could not be)" }
        ));
    } else if !rec.has_safepoint_log {
        notes.push(
            "no safepoint log in the recording: stalls cannot be joined with safepoints".into(),
        );
    }
    // How the meter ran, and what found the safepoints.
    if let Some((res, probes, refused)) = rec.events.iter().find_map(|e| match e {
        Event::MeterRunning { resolution_ns, safepoint_probes, probes_refused, .. } => {
            Some((*resolution_ns, *safepoint_probes, probes_refused.clone()))
        }
        _ => None,
    }) {
        let res_s = recording::units::fmt_ns(res);
        match (probes, refused) {
            (true, _) if res > 1_000_000 => notes.push(format!(
                "the agent's meter ticked every {res_s}: a safepoint seen under way past the threshold was found and timed by the JVM's own probes (hs_private:safepoint__begin/__end, BPF), the rest by the meter, to within {res_s}"
            )),
            (true, _) => {}
            (false, Some(why)) => notes.push(format!(
                "the JVM's safepoint probes could not be attached ({why}): its stalls were found by the agent's meter alone, every {res_s}"
            )),
            (false, None) if res > 1_000_000 => notes.push(format!(
                "the agent's meter ticked every {res_s}: a pause shorter than that may not be seen, and one just past the threshold may read as up to {res_s} shorter"
            )),
            (false, None) => {}
        }
    }
    if let Some(why) = rec.counters_missing().filter(|_| !meta.not_a_jvm) {
        let heartbeat = rec.events.iter().any(|e| matches!(e, Event::MeterRunning { .. }));
        notes.push(if heartbeat {
            format!("no perf counters ({why})")
        } else {
            format!("no perf counters ({why}): without them and without the agent, a stall is seen only when the process stops")
        });
    }
    // The agent logs its hiccups from inside the JVM: a stall the JVM never came back from (it
    // was killed, or the recording ended first) is not in its log.
    if let (Some(h), Some(longest)) =
        (&summary.hiccups, stalls.iter().max_by_key(|s| s.duration_ns))
        && longest.duration_ns > h.max_ns.saturating_mul(3) / 2
        && longest.duration_ns > meta.threshold_ns * 2
    {
        notes.push(format!(
            "the agent's hiccup log peaks at {} but the longest stall lasted {}: {}",
            recording::units::fmt_ns(h.max_ns),
            recording::units::fmt_ns(longest.duration_ns),
            if longest.target_exited {
                "the JVM ended inside it, before its meter could log it"
            } else {
                "the meter logs an interval only once the JVM runs again"
            }
        ));
    }
    Report {
        schema: SCHEMA.into(),
        recording: rec.dir.display().to_string(),
        meta: meta.clone(),
        stalls,
        summary,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stallscope_s_own_thread_asleep_through_the_stall_did_not_hold_it() {
        let culprit = |tid: i32, name: &str| crate::report::CulpritView {
            tid,
            name: name.into(),
            description: String::new(),
            module: None,
            files: vec![],
            named_by_safepoint_timeout: true,
            code: None,
        };
        let kernel = |tid: i32, share: f64, state: char, within_ns: u64| KernelThreadView {
            tid,
            name: String::new(),
            off_cpu_ns: (share * 1e9) as u64,
            share,
            waits: 1,
            kinds: vec![],
            longest: crate::report::KernelWaitView {
                state,
                kind: "futex".into(),
                within_ns,
                whole_ns: Some(within_ns),
                began_before: false,
                stack: vec![],
                waker: None,
                waker_stack: vec![],
                waker_chain: vec![],
                instead: None,
            },
        };
        let own = Evidence::OwnThreadHeld { name: "stallscope-hiccup-log".into() }.to_string();
        let finding = || Finding {
            cause: Cause::NoSafepointPoll,
            title: String::new(),
            confidence: Confidence::High,
            share: 1.0,
            culprits: vec![culprit(1, "counted-loop"), culprit(2, "stallscope-hiccup-log")],
            evidence: vec![own.clone()],
            fix: String::new(),
            doc: String::new(),
            instigator: None,
        };
        let names = |f: &Finding| f.culprits.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        // Asleep (S) 99% of a 1 s stall, one wait of 0.95 s: not a culprit, and said why.
        let mut f = [finding()];
        not_holding_after_all(
            &mut f,
            &[kernel(1, 0.0, 'R', 0), kernel(2, 0.99, 'S', 950_000_000)],
            1_000_000_000,
        );
        assert_eq!(names(&f[0]), ["counted-loop"]);
        assert!(!f[0].evidence.contains(&own), "{:?}", f[0].evidence);
        assert!(f[0].evidence.iter().any(|e| e.contains("did not hold it")), "{:?}", f[0].evidence);
        // Blocked in D, asleep for half of it, or no kernel account: the JVM's word stands.
        for k in [
            vec![kernel(2, 0.99, 'D', 950_000_000)],
            vec![kernel(2, 0.5, 'S', 500_000_000)],
            vec![],
        ] {
            let mut f = [finding()];
            not_holding_after_all(&mut f, &k, 1_000_000_000);
            assert_eq!(names(&f[0]), ["counted-loop", "stallscope-hiccup-log"], "{k:?}");
            assert!(f[0].evidence.contains(&own));
        }
    }

    #[test]
    fn each_thread_s_most_seen_wchan_within_the_stall_stands_for_a_wait_without_its_stack() {
        let task = |tid: i32, state: char, wchan: &str| recording::disk::TaskSample {
            tid,
            comm: "dd".into(),
            state,
            wchan: wchan.into(),
            ..Default::default()
        };
        let sample = |t: u64, baseline: bool, threads| Sample {
            t,
            stall: 1,
            full: false,
            baseline,
            threads,
            gone: vec![],
        };
        let s = [
            sample(5, true, vec![task(7, 'D', "before_the_stall")]),
            sample(10, false, vec![task(7, 'D', "request_wait_answer"), task(8, 'R', "")]),
            sample(12, false, vec![task(7, 'D', "folio_wait_bit_common")]),
            sample(14, false, vec![task(7, 'D', "request_wait_answer"), task(8, 'S', "0")]),
            sample(99, false, vec![task(7, 'D', "after_it")]),
        ];
        let refs: Vec<&Sample> = s.iter().collect();
        let w = sampled_wchans(&refs, 10, 20);
        assert_eq!(w.get(&7).map(String::as_str), Some("request_wait_answer"));
        assert_eq!(w.get(&8), None, "running, or a wchan of 0, is no wait");
    }

    #[test]
    fn a_pool_s_placeholder_name_gives_way_to_the_thread_s_real_one() {
        // Seen on JDK 25: the agent's table named the RMI connection thread "(idle)" in the first
        // stalls its JMX calls made, and by its connection from the fourth on.
        let ctx = |stall: u32, name: &str| StallContext {
            stall,
            java_threads: vec![recording::disk::JavaThread {
                tid: 7,
                java_id: 30,
                matched: "self".into(),
                daemon: true,
                name: name.into(),
            }],
            t: 0,
            maps: vec![],
            mapped_files: vec![],
            in_memory_files: vec![],
            writeback_files: vec![],
            maps_t: None,
        };
        let contexts = [
            ctx(3, "RMI TCP Connection(idle)"),
            ctx(6, "RMI TCP Connection(1)-127.0.0.1"),
            ctx(16, "RMI TCP Connection(idle)"),
        ];
        let all = first_names(&contexts);
        assert_eq!(all[&7], "RMI TCP Connection(1)-127.0.0.1");
        let own: HashMap<i32, String> = [(7, "RMI TCP Connection(idle)".to_string())].into();
        assert_eq!(stall_names(&all, &own)[&7], "RMI TCP Connection(1)-127.0.0.1");
        // A real name first seen stays (a thread renamed since was called by it when it acted),
        // and a stall's own real name is taken over the recording's.
        let all = first_names(&[ctx(1, "worker-1"), ctx(2, "worker-2")]);
        assert_eq!(all[&7], "worker-1");
        let own: HashMap<i32, String> = [(7, "worker-2".to_string())].into();
        assert_eq!(stall_names(&all, &own)[&7], "worker-2");
        // Only a placeholder known: it is all there is.
        let all = first_names(&[ctx(1, "RMI TCP Connection(idle)")]);
        assert_eq!(stall_names(&all, &HashMap::new())[&7], "RMI TCP Connection(idle)");
        // Read a few stalls at a time (watch), the names seen before are carried on.
        let mut carried = first_names(&[ctx(3, "RMI TCP Connection(1)-127.0.0.1")]);
        add_first_names(&mut carried, &[ctx(4, "RMI TCP Connection(idle)")]);
        assert_eq!(carried[&7], "RMI TCP Connection(1)-127.0.0.1");
        let mut carried = first_names(&[ctx(3, "RMI TCP Connection(idle)")]);
        add_first_names(&mut carried, &[ctx(4, "RMI TCP Connection(2)-127.0.0.1")]);
        assert_eq!(carried[&7], "RMI TCP Connection(2)-127.0.0.1");
    }
    use crate::spans::tests::{begin, end};
    use crate::summary::boost_summary;
    use hotspot_log::Safepoint;
    use recording::StallContext;

    fn code(
        methods: &[&str],
        app: Option<usize>,
        library: Option<(usize, &'static str)>,
    ) -> crate::code::CulpritCode {
        crate::code::CulpritCode {
            event: "jdk.ExecutionSample".into(),
            offset_ns: 0,
            latency_ns: None,
            frames: methods
                .iter()
                .map(|m| recording::disk::JavaFrame {
                    method: m.to_string(),
                    line: Some(9),
                    kind: String::new(),
                })
                .collect(),
            truncated: false,
            app_frame: app,
            library_frame: library.map(|l| l.0),
            library: library.map(|l| l.1.to_string()),
            source: String::new(),
        }
    }

    #[test]
    fn a_fix_names_the_users_frame_and_what_the_library_offers() {
        let generic = Cause::MajorFault.fix();
        let lucene = code(
            &["org.apache.lucene.store.ByteBufferGuard.getByte", "io.acme.Catalog.find"],
            Some(1),
            Some((0, "Lucene")),
        );
        let fix = fix_in_code(Cause::MajorFault, &lucene, generic).unwrap();
        assert!(
            fix.starts_with("the read in Lucene's ByteBufferGuard.getByte (line 9), called from Catalog.find (line 9): Lucene's MMapDirectory"),
            "{fix}"
        );
        assert!(fix.contains("NIOFSDirectory") && !fix.contains(generic), "{fix}");
        // A huge fill asked by Netty: the call and what Netty offers.
        let netty = code(
            &[
                "jdk.internal.misc.Unsafe.setMemory0",
                "io.netty.util.internal.PlatformDependent.setMemory",
                "io.acme.Codec.encode",
            ],
            Some(2),
            Some((1, "Netty")),
        );
        let fix =
            fix_in_code(Cause::NoSafepointPoll, &netty, Cause::NoSafepointPoll.fix()).unwrap();
        assert!(fix.starts_with("the call to Unsafe.setMemory0 in Netty's PlatformDependent.setMemory (line 9), called from Codec.encode (line 9): Netty zeroed"), "{fix}");
        // No library: the user's frame and the cause's own fix, as before.
        let own = code(&["java.util.Arrays.fill", "io.acme.Ledger.fold"], Some(1), None);
        let fix = fix_in_code(Cause::NoSafepointPoll, &own, "F").unwrap();
        assert_eq!(fix, "the loop in Ledger.fold (line 9): F");
        assert_eq!(fix_in_code(Cause::CpuStarvation, &lucene, "F"), None, "not a change to code");
        // A store to a page under writeback: the user's frame that wrote, or what Chronicle
        // offers; a library that writes no mapping leaves the cause's fix.
        let store =
            code(&["java.nio.DirectByteBuffer.putLong", "io.acme.Journal.append"], Some(1), None);
        assert_eq!(
            fix_in_code(Cause::MappedWriteback, &store, "F").unwrap(),
            "the write in Journal.append (line 9): F"
        );
        let chronicle = code(
            &[
                "java.nio.DirectByteBuffer.putLong",
                "net.openhft.chronicle.bytes.MappedBytes.writeLong",
                "io.acme.Orders.publish",
            ],
            Some(2),
            Some((1, "Chronicle")),
        );
        let fix = fix_in_code(Cause::MappedWriteback, &chronicle, "F").unwrap();
        assert!(
            fix.starts_with("the write in Chronicle's MappedBytes.writeLong (line 9), called from Orders.publish (line 9): Chronicle Queue"),
            "{fix}"
        );
        assert_eq!(
            fix_in_code(Cause::MappedWriteback, &lucene, "F").unwrap(),
            "the write in Lucene's ByteBufferGuard.getByte (line 9), called from Catalog.find (line 9): F"
        );
    }

    const MS: u64 = 1_000_000;

    /// A recording of `events` and `safepoints` (a safepoint log read), nothing else in it.
    fn recording(events: Vec<Event>, safepoints: Vec<Safepoint>) -> Recording {
        Recording {
            events,
            has_safepoint_log: true,
            safepoints,
            has_who: true,
            now: None,
            ..Recording::of_report(std::path::Path::new("x"), &meta())
        }
    }

    fn meta() -> Meta {
        Meta {
            format: None,
            stallscope_version: "test".into(),
            mode: "run".into(),
            command: vec![],
            pid: 1,
            java_home: None,
            java_version: None,
            kernel: "6.18".into(),
            cpus: 2,
            root: false,
            tracepoints: false,
            bpf: false,
            not_a_jvm: false,
            privileges_note: None,
            start_mono_ns: 1_000 * MS,
            start_epoch_ms: 1_795_320_912_759,
            utc_offset_min: 0,
            clock_ticks: 100,
            threshold_ns: 5 * MS,
            sample_interval_ns: 2 * MS,
            safepoint_timeout_ms: None,
            ..Meta::default()
        }
    }

    #[test]
    fn a_stall_the_recorder_did_not_look_at_says_so() {
        let held = |t_ms: u64, held_ms: u64| Event::RecorderHeld {
            t: t_ms * MS,
            stall: 1,
            held_ns: held_ms * MS,
            step: "the first look".into(),
        };
        // Held 990 ms of a 1 s stall: said, with the step.
        let ev = vec![begin(1, 2000, 2006), held(2006, 990), end(1, 3000, true)];
        let said = recorder_blind(
            &ev,
            &stall_spans(&ev, None, None)[0],
            &stall_spans(&ev, None, None)[0],
            5 * MS,
        );
        // (Noticed 1 ms after its threshold, too.)
        let steps = vec!["the first look".to_string()];
        assert_eq!(
            said,
            Some(Evidence::RecorderBlind {
                held_ns: 990 * MS,
                steps,
                late_ns: MS,
                stall_ns: 1000 * MS
            })
        );
        // Held before the stall began: only the part inside counts (50 of 1000 ms): not said.
        let ev = vec![held(1900, 150), begin(1, 2000, 2006), end(1, 3000, true)];
        assert_eq!(
            recorder_blind(
                &ev,
                &stall_spans(&ev, None, None)[0],
                &stall_spans(&ev, None, None)[0],
                5 * MS
            ),
            None
        );
        // Noticed on time (a threshold after it began): nothing to say.
        let ev = vec![begin(1, 2000, 2006), end(1, 2030, true)];
        assert_eq!(
            recorder_blind(
                &ev,
                &stall_spans(&ev, None, None)[0],
                &stall_spans(&ev, None, None)[0],
                5 * MS
            ),
            None
        );
        // Noticed 500 ms late.
        let ev = vec![begin(1, 2000, 2505), end(1, 3000, true)];
        let said = recorder_blind(
            &ev,
            &stall_spans(&ev, None, None)[0],
            &stall_spans(&ev, None, None)[0],
            5 * MS,
        );
        assert_eq!(
            said,
            Some(Evidence::RecorderBlind {
                held_ns: 0,
                steps: vec![],
                late_ns: 500 * MS,
                stall_ns: 1000 * MS
            })
        );
    }

    fn safepoint(line: &str) -> Safepoint {
        let mut out = Vec::new();
        let mut sc = hotspot_log::Scanner::new();
        sc.scan(0, line.as_bytes(), &mut |s: &Safepoint| out.push(s.clone())).unwrap();
        sc.finish(&mut |s: &Safepoint| out.push(s.clone()));
        out.pop().expect("a safepoint record")
    }

    #[test]
    fn the_safepoint_that_held_the_world_covers_most_of_the_stall() {
        // Ends at 2.300 s monotonic; 290 ms reaching it, 10 ms at it.
        let long = safepoint(
            "[1.0s][2300000000ns][info][safepoint] Safepoint \"ThreadDump\", Time since last: 1 ns, Reaching safepoint: 290000000 ns, Cleanup: 0 ns, At safepoint: 10000000 ns, Total: 300000000 ns\n",
        );
        let short = safepoint(
            "[1.0s][2150000000ns][info][safepoint] Safepoint \"Cleanup\", Time since last: 1 ns, Reaching safepoint: 10000 ns, Cleanup: 0 ns, At safepoint: 10000 ns, Total: 20000 ns\n",
        );
        let span = StallSpan {
            stall: 1,
            noticed_ns: 2005 * MS,
            last_tick_ns: None,
            start_ns: 2000 * MS,
            end_ns: 2300 * MS,
            control_max_late_ns: 0,
            control_queued_ns: None,
            exited_during: false,
            cut: false,
            by: Default::default(),
            exiting: false,
        };
        let names = HashMap::from([(7, "reader-thread".to_string())]);
        let sp = match_safepoint(&span, &[short.clone(), long], &[], None, &names).unwrap();
        assert_eq!(
            (sp.op.as_str(), sp.ttsp_ns, sp.start_mono_ns),
            ("ThreadDump", 290 * MS, 2000 * MS)
        );
        // A short safepoint inside a longer stall (a freeze) is not what held it.
        assert!(match_safepoint(&span, &[short], &[], None, &names).is_none());
    }

    #[test]
    fn a_stall_cut_by_the_end_of_the_recording_inside_a_safepoint_being_reached_is_in_it() {
        // As seen in CI: `watch` detached 1.88 s into a counted loop's time to safepoint; the
        // log had `Safepoint synchronization initiated` at its start and no record after it.
        let log = "[14.467s][2001000000ns][debug][safepoint        ] Safepoint synchronization initiated using futex wait barrier. (17 threads)\n[15.0s][2500000000ns][info ][safepoint,cleanup] updating inline caches, 0.0000001 secs\n";
        let mut sc = hotspot_log::Scanner::new();
        sc.scan(0, log.as_bytes(), &mut |_: &Safepoint| panic!("no record")).unwrap();
        let open = sc.finish(&mut |_: &Safepoint| panic!("no record")).open_sync_ns;
        assert_eq!(open, Some(2001 * MS));
        let names = HashMap::new();
        let cut = StallSpan {
            stall: 1,
            noticed_ns: 2005 * MS,
            last_tick_ns: None,
            start_ns: 2002 * MS,
            end_ns: 3880 * MS,
            control_max_late_ns: 0,
            control_queued_ns: None,
            exited_during: false,
            cut: true,
            by: Default::default(),
            exiting: false,
        };
        let sp =
            match_safepoint(&cut, &[], &[], open, &names).expect("the safepoint being reached");
        assert!(sp.unfinished && sp.timeout_culprits.is_empty(), "{sp:?}");
        assert_eq!((sp.start_mono_ns, sp.ttsp_ns), (2001 * MS, 1879 * MS));
        // A stall that resumed, or a reaching begun long before it, is not that safepoint's.
        assert!(
            match_safepoint(&StallSpan { cut: false, ..cut.clone() }, &[], &[], open, &names)
                .is_none()
        );
        assert!(
            match_safepoint(
                &StallSpan { start_ns: 2200 * MS, ..cut.clone() },
                &[],
                &[],
                open,
                &names
            )
            .is_none()
        );
        // A record after the line closes it.
        let mut sc = hotspot_log::Scanner::new();
        let closed = format!(
            "{log}[15.1s][2600000000ns][info ][safepoint        ] Safepoint \"Cleanup\", Time since last: 1 ns, Reaching safepoint: 590000000 ns, Cleanup: 0 ns, At safepoint: 9000000 ns, Total: 599000000 ns\n"
        );
        sc.scan(0, closed.as_bytes(), &mut |_: &Safepoint| {}).unwrap();
        assert_eq!(sc.finish(&mut |_: &Safepoint| {}).open_sync_ns, None);
    }

    #[test]
    fn a_stall_is_not_moved_back_into_the_one_before_it() {
        // A 1.6 s safepoint (2.0-3.6 s); the heartbeat resumed at 3.59 s, inside it, and stalled
        // again until 3.61 s: the second stall begins where the first ended, not at 2.0 s.
        let long = safepoint(
            "[1.0s][3600000000ns][info][safepoint] Safepoint \"ThreadDump\", Time since last: 1 ns, Reaching safepoint: 1590000000 ns, Cleanup: 0 ns, At safepoint: 10000000 ns, Total: 1600000000 ns\n",
        );
        let rec = recording(
            vec![
                begin(1, 2001, 2006),
                end(1, 3590, true),
                begin(2, 3591, 3596),
                end(2, 3610, true),
                Event::Detach { t: 4000 * MS, reason: "x".into() },
            ],
            vec![long],
        );
        let r = diagnose(&rec);
        let spans: Vec<(u64, u64)> =
            r.stalls.iter().map(|s| (s.start_mono_ns / MS, s.duration_ns / MS)).collect();
        assert_eq!(
            spans,
            vec![(2000, 1590), (3591, 19)],
            "the first moved back to the safepoint's start, the second not at all"
        );
        assert!(
            r.stalls[0].safepoint.is_some()
                && r.stalls[1].safepoint.is_none()
                && r.stalls[1].safepoints.is_empty(),
            "the safepoint is the first stall's only"
        );
    }

    #[test]
    fn a_stall_starts_no_earlier_than_the_meters_last_tick() {
        // As measured here with the perf counters on a slow disk under writeback: the VM thread
        // was held 145 ms in a write fault before it stopped any thread (the log's "Reaching
        // safepoint" counts it); the meter ticked until 1 ms before the end of it, and the world
        // stood 10 ms. The stall is those 10 ms, not 155.
        let sp = safepoint(
            "[1.0s][2155000000ns][info][safepoint] Safepoint \"ParallelGCSystemGC\", Time since last: 1 ns, Reaching safepoint: 146000000 ns, Cleanup: 0 ns, At safepoint: 9000000 ns, Total: 155000000 ns\n",
        );
        let rec = |tick_ms: u64| {
            recording(
                vec![
                    begin(1, tick_ms + 1, tick_ms + 6),
                    end(1, 2155, true),
                    Event::Detach { t: 4000 * MS, reason: "x".into() },
                ],
                vec![sp.clone()],
            )
        };
        let held_vm = diagnose(&rec(2144));
        assert_eq!(
            (held_vm.stalls[0].start_mono_ns / MS, held_vm.stalls[0].duration_ns / MS),
            (2145, 10),
            "the meter ran until 2144 ms"
        );
        assert_eq!(
            held_vm.stalls[0].begun_before_stop_ns.map(|n| n / MS),
            Some(144),
            "the safepoint began at 2000 ms, 144 ms before the application stopped"
        );
        // A meter stopped with everyone else: the stall begins with the safepoint.
        let stopped = diagnose(&rec(2000));
        assert_eq!(
            (stopped.stalls[0].start_mono_ns / MS, stopped.stalls[0].duration_ns / MS),
            (2000, 155)
        );
        assert_eq!(stopped.stalls[0].begun_before_stop_ns, None, "it was not begun late");
    }

    #[test]
    fn a_stall_never_opens_back_inside_the_one_before() {
        // As measured here: the meter caught in a write fault between reading the clock and
        // publishing its tick; the tick, published 160 ms late, ended the first stall and the
        // next one opened from it, back inside the first.
        let rec = recording(
            vec![
                begin(1, 2000, 2005),
                end(1, 2161, true),
                begin(2, 2001, 2162),
                end(2, 2175, true),
                Event::Detach { t: 4000 * MS, reason: "x".into() },
            ],
            vec![],
        );
        let spans: Vec<(u64, u64)> = diagnose(&rec)
            .stalls
            .iter()
            .map(|s| (s.start_mono_ns / MS, s.duration_ns / MS))
            .collect();
        assert_eq!(spans, vec![(2000, 161), (2161, 14)]);
    }

    #[test]
    fn the_summary_counts_stalls_by_their_main_cause_and_the_recorder_pauses() {
        let rec = Recording {
            has_safepoint_log: false,
            ..recording(
                vec![
                    Event::ControlHiccup { t: 1, late_ns: 9 * MS },
                    Event::ControlHiccup { t: 2, late_ns: 6 * MS },
                    Event::Detach { t: 4000 * MS, reason: "x".into() },
                ],
                vec![],
            )
        };
        let mut r = StallReport {
            stall: 1,
            start_mono_ns: 0,
            duration_ns: 7 * MS,
            start_wall: String::new(),
            safepoint: None,
            safepoints: vec![],
            findings: vec![unknown_finding(&StallEvidence::default())],
            begun_before_stop_ns: None,
            kernel: vec![],
            parked_threads: 0,
            threads: 0,
            samples: 0,
            control_max_late_ns: 0,
            target_exited: false,
            raw: vec![],
        };
        let s = summarise(
            &rec,
            &[r.clone(), {
                r.duration_ns = 9 * MS;
                r
            }],
        );
        assert_eq!(
            (s.stalls, s.longest_stall_ns, s.by_cause.get("unknown").copied()),
            (2, 9 * MS, Some(2))
        );
        assert_eq!(
            (s.recorder_pauses, s.recorder_pause_max_ns, s.recorded_ns),
            (2, 9 * MS, 3000 * MS)
        );
        // With no stalls and no log at all, the report says what is missing.
        let rep = diagnose(&rec);
        assert!(
            rep.stalls.is_empty() && rep.notes.iter().any(|n| n.contains("no safepoint log")),
            "{:?}",
            rep.notes
        );
    }

    #[test]
    fn the_boost_summary_quotes_the_delay_from_each_begin_and_the_booster_cost() {
        let boost = |begun: u64, seen: u64, t: u64, capped: bool| Event::SafepointBoost {
            t: t * 1000,
            begun: begun * 1000,
            begun_within_ns: 2000,
            seen: seen * 1000,
            restored: t * 1000 + 5 * MS,
            threads: 20,
            refused: 1,
            capped,
        };
        // Delays of 100, 200, 300 and 900 µs; seen 50, 60, 70, 80 µs after the begin.
        let events = vec![
            boost(1000, 1050, 1100, false),
            boost(2000, 2060, 2200, false),
            boost(3000, 3070, 3300, false),
            boost(4000, 4080, 4900, true),
            Event::SafepointBooster {
                t: 9 * MS,
                cpu_ns: MS,
                ran_ns: 10 * MS,
                realtime: true,
                dropped: 0,
                failed: None,
            },
        ];
        let s = boost_summary(&events).expect("a booster ran");
        assert_eq!(
            (s.boosts, s.delay_p50_ns, s.delay_p90_ns, s.delay_max_ns),
            (4, 200_000, 900_000, 900_000)
        );
        assert_eq!((s.seen_p50_ns, s.begun_within_p50_ns, s.threads_p50), (60_000, 2000, 20));
        assert_eq!((s.refused, s.capped, s.realtime), (4, 1, true));
        assert!((s.cpu_share - 0.1).abs() < 1e-9);
        // No booster, no summary; a booster that never boosted says why.
        assert!(boost_summary(&[Event::Detach { t: 1, reason: "x".into() }]).is_none());
        let failed = boost_summary(&[Event::SafepointBooster {
            t: 1,
            cpu_ns: 0,
            ran_ns: 0,
            realtime: false,
            dropped: 0,
            failed: Some("no perf counters".into()),
        }])
        .unwrap();
        assert_eq!((failed.boosts, failed.failed.as_deref()), (0, Some("no perf counters")));
    }
}
