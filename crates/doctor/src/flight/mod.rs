//! The diagnosis of a flight recording alone (`stallscope report app.jfr`): a JFR file a user
//! already holds, made with the JDK's `default` or `profile` settings or stallscope's
//! `stalls.jfc`, with no stallscope beside the JVM.
//!
//! A stall is a safepoint at least the threshold long, put together from its events by
//! `safepointId` (each may be missing under its own threshold: `default` records
//! `jdk.SafepointBegin` and `jdk.ExecuteVMOperation` above 10 ms). What the file can tell:
//! - how the stall split into reaching the safepoint (`jdk.SafepointStateSynchronization`, else
//!   `jdk.SafepointBegin`, which before JDK 22 includes cleanup) and the operation at it;
//! - the operation, and who asked for it (`jdk.ExecuteVMOperation`'s `caller`), with that
//!   thread's stack where JFR sampled it near the stall;
//! - the collection behind a GC operation (`jdk.GarbageCollection`: collector and cause);
//! - the thread that held the time to safepoint, where `jdk.SafepointLatency` (JDK 25, off in
//!   the JDK's own settings) caught it, and its code;
//! - the CPUs' load around it (`jdk.CPULoad`).
//!
//! What it cannot tell: nothing of the kernel (page faults, run-queue waits, reclaim, a stopped
//! process), so a thread slow to reach its poll is never named with more than medium
//! confidence, and a time to safepoint no sample explains is `unknown`, with what would tell.
//!
//! Invariant: like [`crate::diagnose()`], a pure function of what was read.

use crate::causes::Cause;
use crate::report::{
    Confidence, CulpritView, Finding, Instigator, InstigatorKind, Report, SafepointView,
    StallReport, Summary, TimeoutCulprit,
};
use hotspot_log::Safepoint;
use hotspot_log::jfr::{
    FlightFile, FlightGc, FlightGcLocker, FlightThread, FlightVmOperation, JfrStackSample,
};
use recording::units::fmt_ns;
use recording::{FrameSample, Meta};
use std::collections::{BTreeMap, HashMap};

mod late;
mod requester;
mod rules;

use late::*;
use requester::*;
use rules::*;

/// A cause that explains at least this share of a stall is its main one.
const MAIN_SHARE: f64 = 0.5;
/// The machine's CPUs this busy, the JVM's share of it under half, is others taking them.
const BUSY_MACHINE: f64 = 0.9;
/// A collection's start this far before its operation's is the same instant (rounding).
const GC_START_SLACK_NS: i64 = 5_000_000;
/// A collection this long whose threads' CPU time is under this share of it waited.
const GC_WAIT_MIN_NS: u64 = 100_000_000;
const GC_WAIT_CPU_SHARE: f64 = 0.5;
/// An operation longer than twice its collection's pauses and this, spent the rest elsewhere.
const OUTSIDE_GC_SLACK_NS: u64 = 10_000_000;
/// A CPU-load reading this long after the stall still covers it (JFR's period is 1 s).
const LOAD_NEAR_NS: i64 = 1_500_000_000;

/// One safepoint put together from its events.
#[derive(Debug, Default, Clone)]
struct Gathered {
    begin: Option<(i64, i64, Option<u32>)>,
    sync: Option<(i64, i64, Option<u32>)>,
    end: Option<(i64, i64)>,
    op: Option<FlightVmOperation>,
    /// async-profiler's window of its time to safepoint (`profiler.Window`), start and length.
    window: Option<(i64, i64)>,
}

impl Gathered {
    fn start(&self) -> i64 {
        [
            self.begin.map(|b| b.0),
            self.sync.map(|s| s.0),
            self.op.as_ref().map(|o| o.start_epoch_ns),
            self.window.map(|w| w.0),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0)
    }

    fn end(&self) -> i64 {
        [
            self.begin.map(|b| b.0 + b.1),
            self.sync.map(|s| s.0 + s.1),
            self.op.as_ref().map(|o| o.start_epoch_ns + o.duration_ns),
            self.end.map(|e| e.0 + e.1),
            self.window.map(|w| w.0 + w.1),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
    }

    fn total_ns(&self) -> u64 {
        (self.end() - self.start()).max(0) as u64
    }

    /// The time to safepoint, and how it is known.
    fn ttsp_ns(&self) -> Option<(u64, &'static str)> {
        if let Some(s) = self.sync {
            return Some((s.1.max(0) as u64, "jdk.SafepointStateSynchronization"));
        }
        if let Some(w) = self.window {
            return Some((
                w.1.max(0) as u64,
                "async-profiler's time-to-safepoint window, profiler.Window",
            ));
        }
        self.begin.map(|b| (b.1.max(0) as u64, "jdk.SafepointBegin (with cleanup before JDK 22)"))
    }

    fn op_ns(&self) -> Option<u64> {
        self.op.as_ref().map(|o| o.duration_ns.max(0) as u64)
    }

    /// Its operation's name, as `jdk.ExecuteVMOperation` gives it.
    fn op_name(&self) -> String {
        self.op.as_ref().map_or_else(|| "unknown".to_string(), |o| o.op.clone())
    }

    /// Its time at the safepoint: the operation's, else from the end of its begin event to its
    /// end event.
    fn at_safepoint_ns(&self) -> u64 {
        self.op_ns().unwrap_or_else(|| match (self.begin, self.end) {
            (Some(b), Some(e)) => (e.0 - (b.0 + b.1)).max(0) as u64,
            _ => 0,
        })
    }

    /// As the logs' parser gives a safepoint, its end on the report's clock (`meta`).
    fn as_safepoint(&self, meta: &Meta) -> Safepoint {
        let mut end = hotspot_log::jfr::wall_stamps(self.end());
        end.mono_ns = meta.mono_of_epoch_ns(self.end());
        Safepoint {
            op: self.op_name().into(),
            ttsp_ns: self.ttsp_ns().map(|t| t.0),
            cleanup_ns: None,
            at_safepoint_ns: Some(self.at_safepoint_ns()),
            leaving_ns: None,
            total_ns: self.total_ns(),
            since_last_ns: None,
            threads_total: self.begin.and_then(|b| b.2),
            threads_running: self.sync.and_then(|s| s.2),
            page_traps: None,
            end,
            format: hotspot_log::Format::Jfr,
            source: hotspot_log::Source { file: 0, line: 0 },
            culprits: Vec::new(),
        }
    }
}

/// Every safepoint of a flight recording (not only its stalls), as the logs' parser gives a
/// log's, placed on the clock of its report (`meta`, [`Report::meta`]): what a recording's
/// view draws its timeline, its time-to-safepoint percentiles and its operations from.
pub fn flight_safepoints(f: &FlightFile, meta: &Meta) -> Vec<Safepoint> {
    gather(f).iter().map(|g| g.as_safepoint(meta)).collect()
}

fn gather(f: &FlightFile) -> Vec<Gathered> {
    let mut by_id: BTreeMap<i64, Gathered> = BTreeMap::new();
    for e in &f.data.safepoint_events {
        let g = by_id.entry(e.safepoint_id).or_default();
        match e.phase.as_str() {
            "begin" => g.begin = Some((e.start_epoch_ns, e.duration_ns, e.threads)),
            "sync" => g.sync = Some((e.start_epoch_ns, e.duration_ns, e.threads)),
            _ => g.end = Some((e.start_epoch_ns, e.duration_ns)),
        }
    }
    for o in f.data.vm_operations.iter().filter(|o| o.safepoint) {
        let Some(id) = o.safepoint_id else { continue };
        let g = by_id.entry(id).or_default();
        // Before JDK 16 several operations could run in one safepoint: the longest stands.
        if g.op.as_ref().is_none_or(|x| x.duration_ns < o.duration_ns) {
            g.op = Some(o.clone());
        }
    }
    let mut v: Vec<Gathered> = by_id.into_values().collect();
    // async-profiler's windows: the safepoint they overlap, else one of their own (its files
    // hold no safepoint events).
    for &(a, d) in &f.data.windows {
        match v.iter_mut().find(|g| g.start() < a + d && g.end() > a) {
            Some(g) => g.window = Some((a, d)),
            None => v.push(Gathered { window: Some((a, d)), ..Default::default() }),
        }
    }
    v.sort_by_key(Gathered::start);
    v
}

/// The file's clock pair: its start on the wall clock, made the zero of the report's clock.
fn meta_of(f: &FlightFile, threshold_ns: u64) -> Meta {
    let jvm = f.data.jvm.clone().unwrap_or_default();
    let mut command = vec!["java".to_string()];
    command.extend(jvm.jvm_arguments.split_whitespace().map(str::to_string));
    command.extend(jvm.java_arguments.split_whitespace().map(str::to_string));
    Meta {
        format: None,
        stallscope_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: "jfr".into(),
        command,
        pid: i32::try_from(jvm.pid).unwrap_or(0),
        java_home: None,
        java_version: java_version(&jvm.jvm_version),
        kernel: kernel_of(f.data.os_version.as_deref()),
        cpus: f.data.hw_threads.unwrap_or(0) as usize,
        root: false,
        tracepoints: false,
        bpf: false,
        not_a_jvm: false,
        privileges_note: Some(
            "explained from a flight recording alone: it holds nothing of the kernel (no page faults, run-queue waits, reclaim or stops); run the JVM under `stallscope run` or beside `stallscope watch` for that".into(),
        ),
        start_mono_ns: 0,
        start_epoch_ms: f.data.start_epoch_ns.div_euclid(1_000_000),
        utc_offset_min: 0,
        clock_ticks: 100,
        threshold_ns,
        sample_interval_ns: 0,
        safepoint_timeout_ms: None,
        cgroups: None,
        recorder_shares: None,
        pod: None,
    }
}

/// The JDK's version from `jvmVersion` (`OpenJDK 64-Bit Server VM (17.0.15+6-…) for linux-amd64
/// JRE (…), built on …`): the first parenthesis.
fn java_version(v: &str) -> Option<String> {
    if v.is_empty() {
        return None;
    }
    let inner = v.split_once('(').and_then(|(_, r)| r.split_once(')')).map(|(x, _)| x.trim());
    Some(inner.filter(|x| !x.is_empty()).unwrap_or(v).to_string())
}

/// The kernel, from the `uname:` line JFR keeps on Linux (`Linux 6.1.0-… x86_64`).
fn kernel_of(os: Option<&str>) -> String {
    let Some(os) = os else { return "unknown (no jdk.OSInformation)".into() };
    let line = os.lines().find_map(|l| l.trim().strip_prefix("uname:")).map(str::trim);
    let uname = line.unwrap_or_else(|| os.lines().next().unwrap_or("").trim());
    // `Linux 6.1.0-18-amd64 #1 SMP … x86_64`: the release, as `uname -r` says it.
    uname.split_whitespace().nth(1).unwrap_or("unknown").to_string()
}

/// The report's clock: ns since the file's start (its meta's zero).
fn mono(meta: &Meta, epoch_ns: i64) -> u64 {
    meta.mono_of_epoch_ns(epoch_ns).unwrap_or(0)
}

/// The JFR samples as the stack matcher ([`crate::code::for_thread`]) takes them.
fn frame_samples(meta: &Meta, samples: &[JfrStackSample]) -> Vec<FrameSample> {
    samples
        .iter()
        .filter(|s| !s.frames.is_empty())
        .map(|s| FrameSample {
            t: mono(meta, s.epoch_ns),
            tid: i32::try_from(s.os_tid).unwrap_or(0),
            name: s.java_name.clone(),
            event: s.event.clone(),
            latency_ns: s.duration_ns.and_then(|d| u64::try_from(d).ok()),
            frames: recording::disk::all(s.frames.clone()),
            truncated: s.truncated,
            agct: None,
        })
        .collect()
}

/// What the file said of itself: what was read, what was lost, and which of the events that
/// explain stalls it holds.
fn notes(f: &FlightFile) -> Vec<String> {
    let mut v = vec![format!(
        "explained from the flight recording alone ({}: {} chunks, {} events, {}): no kernel view",
        f.name,
        f.chunks,
        f.data.events,
        format!("{:.1} MB", f.bytes as f64 / 1e6)
    )];
    let has = |e: &str| f.data.counts.get(e).copied().unwrap_or(0) > 0;
    let missing: Vec<&str> = [
        "jdk.SafepointBegin",
        "jdk.SafepointStateSynchronization",
        "jdk.ExecuteVMOperation",
        "jdk.SafepointLatency",
        "jdk.ExecutionSample",
        "jdk.CPULoad",
    ]
    .into_iter()
    .filter(|e| !has(e))
    // async-profiler's files have windows instead of the JVM's safepoint events.
    .filter(|e| f.data.windows.is_empty() || !e.starts_with("jdk.Safepoint"))
    .collect();
    if !missing.is_empty() {
        v.push(format!(
            "not in the file (off in its settings, or none above the threshold): {}",
            missing.join(", ")
        ));
    }
    if f.data.runs > 0 {
        v.push(format!(
            "the file holds {} runs of a JVM (chunks of several dumps, or files put together): the header names the first; their safepoints are kept apart",
            f.data.runs + 1
        ));
    }
    v.extend(f.lost.iter().map(|l| format!("not read: {l}")));
    v
}

/// A GC log's safepoint's end on the wall clock (ns since the epoch), and whether that came from
/// its uptime: its wall stamp, else its uptime from the JVM's start as JFR recorded it
/// (`jdk.JVMInformation`, to the millisecond; it is the end of the JVM's start-up, later than
/// the log's zero, so [`uptime_offset`] corrects it).
fn log_end_epoch_ns(s: &Safepoint, jvm_start_ms: Option<i64>) -> Option<(i64, bool)> {
    if let Some(w) = s.end.wall {
        return Some((w.epoch_ms.saturating_mul(1_000_000), false));
    }
    let up = i64::try_from(s.end.uptime_ns?).ok()?;
    Some((jvm_start_ms?.saturating_mul(1_000_000).saturating_add(up), true))
}

/// How far the uptime-placed records are from the flight recording's safepoints: the median
/// of each named operation's distance to the nearest recorded safepoint of that name (within
/// 10 s). `None` when no operation is named in both.
fn uptime_offset(placed: &[(Safepoint, i64)], all: &[Gathered]) -> Option<i64> {
    let mut d: Vec<i64> = placed
        .iter()
        .filter(|(s, _)| &*s.op != "unknown")
        .filter_map(|(s, e)| {
            all.iter()
                .filter(|g| g.op.as_ref().is_some_and(|o| *o.op == *s.op))
                .map(|g| g.end() - e)
                .filter(|x| x.abs() <= 10_000_000_000)
                .min_by_key(|x| x.abs())
        })
        .collect();
    d.sort_unstable();
    d.get(d.len() / 2).copied()
}

/// The GC log's record of a stall: the one ending nearest its end, within a few milliseconds
/// (the log's stamps are to the millisecond, and the JVM's start in JFR too), of the same
/// operation where both name one.
fn log_record<'a>(g: &Gathered, log: &'a [(Safepoint, i64)]) -> Option<&'a Safepoint> {
    let end = g.end();
    let slack = 5_000_000 + (g.total_ns() / 20) as i64;
    log.iter()
        .filter(|(_, e)| (e - end).abs() <= slack)
        .filter(|(s, _)| match &g.op {
            // A log record without its operation's name (JDK 8's) says `unknown`.
            Some(o) => *s.op == *o.op || &*s.op == "unknown",
            None => true,
        })
        .min_by_key(|(_, e)| (e - end).abs())
        .map(|(s, _)| s)
}

/// The report of a flight recording: a stall for every safepoint at least `threshold_ns` long,
/// joined with the GC log's safepoint records where one was given (`gc_log`: its time to
/// safepoint, and the thread SafepointTimeout named).
pub fn diagnose_flight(f: &FlightFile, threshold_ns: u64, gc_log: Option<&GcLog>) -> Report {
    // Everything by time, so that each stall finds its own by binary search (a 1 GB file
    // holds tens of thousands of stalls and of samples).
    // The reader hands them sorted (`logs::flight::read_flight`); a copy is made only if not.
    let in_order = f.data.samples.is_sorted_by_key(|s| s.epoch_ns)
        && f.data.gcs.is_sorted_by_key(|c| c.start_epoch_ns)
        && f.data.cpu_load.is_sorted_by_key(|l| l.epoch_ns);
    let sorted;
    let f = if in_order {
        f
    } else {
        let mut c = f.clone();
        c.data.samples.sort_by_key(|s| s.epoch_ns);
        c.data.gcs.sort_by_key(|c| c.start_epoch_ns);
        c.data.cpu_load.sort_by_key(|l| l.epoch_ns);
        sorted = c;
        &sorted
    };
    let meta = meta_of(f, threshold_ns);
    let mut frames = frame_samples(&meta, &f.data.samples);
    frames.sort_by_key(|s| s.t);
    let all = gather(f);
    let start_ms = f.data.jvm.as_ref().map(|j| j.start_epoch_ms).filter(|m| *m > 0);
    let (mut placed, mut by_uptime) = (Vec::new(), Vec::new());
    for s in gc_log.map(|l| l.safepoints.as_slice()).unwrap_or_default() {
        match log_end_epoch_ns(s, start_ms) {
            Some((e, false)) => placed.push((s.clone(), e)),
            Some((e, true)) => by_uptime.push((s.clone(), e)),
            None => {}
        }
    }
    let offset = uptime_offset(&by_uptime, &all);
    if let Some(o) = offset {
        placed.extend(by_uptime.iter().map(|(s, e)| (s.clone(), e + o)));
    }
    let mut joined = 0;
    let stalls: Vec<StallReport> = all
        .iter()
        .filter(|g| g.total_ns() >= threshold_ns)
        .enumerate()
        .map(|(i, g)| {
            let record = log_record(g, &placed);
            joined += usize::from(record.is_some());
            diagnose_one(f, g, i as u32 + 1, &meta, &frames, record)
        })
        .collect();
    let summary = Summary {
        stalls: stalls.len(),
        by_cause: crate::summary::by_cause(&stalls),
        longest_stall_ns: stalls.iter().map(|s| s.duration_ns).max().unwrap_or(0),
        safepoints: all.len() as u64,
        total_stopped_ns: all.iter().map(Gathered::total_ns).sum(),
        ttsp_max_ns: all.iter().filter_map(|g| g.ttsp_ns().map(|t| t.0)).max(),
        hiccups: None,
        control: None,
        recorded_ns: (f.data.end_epoch_ns - f.data.start_epoch_ns).max(0) as u64,
        recorder_pauses: 0,
        recorder_pause_max_ns: 0,
        boost: None,
    };
    let mut notes = notes(f);
    if let Some(l) = gc_log {
        notes.push(format!(
            "GC log {}: {} safepoint records, {} placed on the recording's clock, {joined} of the {} stalls joined with theirs{}",
            l.name,
            l.safepoints.len(),
            placed.len(),
            stalls.len(),
            if placed.len() < l.safepoints.len() {
                if !by_uptime.is_empty() && offset.is_none() {
                    " (the rest carry only uptime stamps, and no operation named in both places them: log with -Xlog:safepoint:file=…:utctime,uptime)"
                } else {
                    " (the rest carry no wall-clock or uptime stamp, or the file has no JVM start time)"
                }
            } else {
                ""
            }
        ));
        notes.extend(l.notes.iter().cloned());
    }
    Report {
        schema: crate::report::SCHEMA.into(),
        recording: f.name.clone(),
        meta,
        stalls,
        summary,
        notes,
    }
}

/// A GC log given beside a flight recording: its safepoint records, and what reading it said.
#[derive(Debug, Clone, Default)]
pub struct GcLog {
    pub name: String,
    pub safepoints: Vec<Safepoint>,
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use hotspot_log::jfr::{FlightChunk, FlightSafepointEvent, JavaFrame};
    use proptest::prelude::*;

    const T0: i64 = 1_800_000_000_000_000_000;
    const MS: i64 = 1_000_000;

    fn file(c: FlightChunk) -> FlightFile {
        FlightFile { name: "app.jfr".into(), bytes: 1000, chunks: 1, data: c, lost: vec![] }
    }

    fn chunk() -> FlightChunk {
        FlightChunk { start_epoch_ns: T0, end_epoch_ns: T0 + 10_000 * MS, ..Default::default() }
    }

    fn begin(id: i64, at: i64, dur: i64) -> FlightSafepointEvent {
        FlightSafepointEvent {
            phase: "begin".into(),
            safepoint_id: id,
            start_epoch_ns: T0 + at * MS,
            duration_ns: dur * MS,
            threads: Some(12),
        }
    }

    fn op(
        id: i64,
        name: &str,
        at: i64,
        dur: i64,
        caller: Option<(&str, bool)>,
    ) -> FlightVmOperation {
        FlightVmOperation {
            op: name.into(),
            start_epoch_ns: T0 + at * MS,
            duration_ns: dur * MS,
            safepoint: true,
            safepoint_id: Some(id),
            blocking: true,
            caller: caller.map(|(n, java)| FlightThread {
                os_tid: 77,
                java_name: java.then(|| n.to_string()),
                os_name: n.into(),
            }),
        }
    }

    fn latency(tid: i64, name: &str, at: i64, dur: i64, top: &str) -> JfrStackSample {
        JfrStackSample {
            event: "jdk.SafepointLatency".into(),
            epoch_ns: T0 + at * MS,
            duration_ns: Some(dur * MS),
            os_tid: tid,
            java_name: name.into(),
            frames: vec![
                JavaFrame { method: top.into(), line: Some(10), kind: "JIT compiled".into() },
                JavaFrame {
                    method: "io.app.Main.main".into(),
                    line: Some(3),
                    kind: "Interpreted".into(),
                },
            ],
            truncated: false,
        }
    }

    #[test]
    fn an_operation_that_took_most_of_the_stall_is_named_with_its_asker() {
        let mut c = chunk();
        c.safepoint_events.push(begin(1, 1000, 2));
        c.vm_operations.push(op(1, "ThreadDump", 1002, 300, Some(("Attach Listener", true))));
        let r = diagnose_flight(&file(c), 20 * MS as u64, None);
        assert_eq!(r.stalls.len(), 1);
        let f = &r.stalls[0].findings[0];
        assert_eq!((f.cause, f.confidence), (Cause::LongVmOperation, Confidence::High));
        let who = f.instigator.as_ref().unwrap();
        assert_eq!(who.kind, InstigatorKind::AttachClient);
        assert_eq!(f.fix, who.fix);
        assert_eq!(r.stalls[0].duration_ns, 302 * MS as u64);
        assert!(r.notes[0].contains("flight recording alone"), "{:?}", r.notes);
    }

    fn locker(at: i64, dur: i64) -> FlightGcLocker {
        FlightGcLocker {
            start_epoch_ns: T0 + at * MS,
            duration_ns: dur * MS,
            lock_count: 1,
            stall_count: 2,
            thread: Some(FlightThread {
                os_tid: 77,
                java_name: Some("deflater".into()),
                os_name: "deflater".into(),
            }),
            frames: ["java.util.zip.Deflater.deflateBytesBytes", "io.app.Zip.pack"]
                .map(|m| JavaFrame { method: m.into(), line: None, kind: "Native".into() })
                .to_vec(),
        }
    }

    #[test]
    fn a_collection_the_gc_locker_held_back_is_laid_at_the_thread_last_out_of_the_region() {
        let who = |lockers: Vec<FlightGcLocker>, ops: Vec<FlightVmOperation>| {
            let mut c = chunk();
            c.gc_lockers = lockers;
            c.vm_operations = ops;
            let r = diagnose_flight(&file(c), 10 * MS as u64, None);
            let last = r.stalls.last().unwrap();
            last.findings[0].instigator.clone().unwrap()
        };
        let gc = |id, at| op(id, "ParallelGCSystemGC", at, 25, Some(("deflater", true)));
        // JDK 17: the hold is timed, and ends as the collection begins.
        let i = who(vec![locker(1000, 650)], vec![gc(1, 1651)]);
        assert!(
            i.did.starts_with("thread \"deflater\" left a JNI critical region in the native method java.util.zip.Deflater.deflateBytesBytes (called in io.app.Zip.pack)")
                && i.did.ends_with(": collections were held back for 650 ms, while 2 threads waited to allocate (jdk.GCLocker)"),
            "{}",
            i.did
        );
        assert!(i.fix.starts_with("the GC locker: "), "{}", i.fix);
        // JDK 21: an instant where the hold began; the thread's next operation is its collection.
        let i = who(vec![locker(1000, 0)], vec![gc(1, 1700)]);
        assert!(i.did.contains("held back for 700 ms"), "{}", i.did);
        // An operation of that thread came between: the later one is not the locker's.
        let i = who(vec![locker(1000, 0)], vec![gc(1, 1700), gc(2, 3000)]);
        assert!(!i.did.contains("JNI critical region"), "{}", i.did);
        // Another thread's hold, or one that ended long before: not this collection's.
        let other = FlightGcLocker {
            thread: Some(FlightThread { os_tid: 78, java_name: None, os_name: "x".into() }),
            ..locker(1000, 650)
        };
        assert!(!who(vec![other], vec![gc(1, 1651)]).did.contains("JNI critical region"));
        assert!(!who(vec![locker(1000, 650)], vec![gc(1, 2651)]).did.contains("JNI critical"));
        // A thread dump after the hold is not the locker's collection.
        let dump = op(1, "ThreadDump", 1700, 25, Some(("deflater", true)));
        assert!(!who(vec![locker(1000, 0)], vec![dump]).did.contains("JNI critical"));
        // A collection of anyone's between the hold and this one: the hold ended before.
        let mut c = chunk();
        c.gc_lockers = vec![locker(1000, 0)];
        c.gcs = vec![self::gc(1200, 5, "Allocation Failure", None)];
        c.vm_operations = vec![gc(1, 1700)];
        let i = |c: &FlightChunk| {
            let r = diagnose_flight(&file(c.clone()), 10 * MS as u64, None);
            r.stalls.last().unwrap().findings[0].instigator.clone().unwrap()
        };
        assert!(!i(&c).did.contains("JNI critical"), "{}", i(&c).did);
        // Values no JVM writes do not overflow the matching (a file is whatever it says).
        for (at, dur) in [(i64::MAX, i64::MAX), (i64::MIN, i64::MAX), (i64::MIN, 0), (i64::MAX, 0)]
        {
            let l = FlightGcLocker { start_epoch_ns: at, duration_ns: dur, ..locker(0, 0) };
            let o = gc(1, 1651);
            assert!(
                gc_locker_of(&file(FlightChunk { gc_lockers: vec![l], ..chunk() }), &o).is_none()
            );
        }
    }

    #[test]
    fn an_operation_without_its_begin_event_is_still_a_stall_and_the_jvms_own_is_the_jvm() {
        let mut c = chunk();
        c.vm_operations.push(op(
            4,
            "G1CollectFull",
            500,
            80,
            Some(("VM Periodic Task Thread", false)),
        ));
        let r = diagnose_flight(&file(c), 20 * MS as u64, None);
        let f = &r.stalls[0].findings[0];
        assert_eq!(f.cause, Cause::LongVmOperation);
        assert_eq!(f.instigator.as_ref().unwrap().kind, InstigatorKind::Jvm);
        assert!(f.evidence.iter().any(|e| e.contains("not in the file")), "{:?}", f.evidence);
    }

    #[test]
    fn a_late_thread_in_plain_code_is_a_missing_poll_at_medium_and_in_a_buffer_unknown() {
        for (top, cause) in [
            ("io.app.Sum.loop", Cause::NoSafepointPoll),
            ("java.nio.DirectByteBuffer.get", Cause::Unknown),
        ] {
            let mut c = chunk();
            c.safepoint_events.push(begin(2, 2000, 400));
            c.vm_operations.push(op(2, "ThreadDump", 2400, 3, Some(("dumper", true))));
            c.samples.push(latency(55, "worker", 1990, 405, top));
            let r = diagnose_flight(&file(c), 20 * MS as u64, None);
            let f = &r.stalls[0].findings[0];
            assert_eq!(f.cause, cause, "{top}: {f:?}");
            assert!(f.confidence <= Confidence::Medium);
            assert_eq!(f.culprits[0].name, "worker");
            let code = f.culprits[0].code.as_ref().expect("the latency sample's stack");
            assert_eq!(code.frames[0].method, top);
            assert_eq!(f.instigator.as_ref().unwrap().name, "dumper");
        }
    }

    #[test]
    fn an_async_profiler_window_with_one_thread_running_through_it_names_that_thread() {
        let mut c = chunk();
        c.windows.push((T0 + 4000 * MS, 300 * MS));
        for i in 0..10 {
            let mut s = latency(9, "spinner", 4010 + i * 25, 0, "io.app.Spin.run");
            s.event = "jdk.ExecutionSample".into();
            s.duration_ns = None;
            c.samples.push(s);
        }
        let r = diagnose_flight(&file(c.clone()), 20 * MS as u64, None);
        let f = &r.stalls[0].findings[0];
        assert_eq!((f.cause, f.confidence), (Cause::NoSafepointPoll, Confidence::Medium));
        assert_eq!(f.culprits[0].name, "spinner");
        assert!(r.notes.iter().all(|n| !n.contains("jdk.SafepointBegin")), "{:?}", r.notes);
        // Two samples are not a thread running through it.
        c.samples.truncate(2);
        let r = diagnose_flight(&file(c), 20 * MS as u64, None);
        assert_eq!(r.stalls[0].findings[0].cause, Cause::Unknown);
    }

    fn gc(at: i64, dur: i64, cause: &str, cpu: Option<(i64, i64, i64)>) -> FlightGc {
        FlightGc {
            gc_id: 1,
            name: "ParallelOld".into(),
            cause: cause.into(),
            start_epoch_ns: T0 + at * MS,
            duration_ns: dur * MS,
            sum_of_pauses_ns: dur * MS,
            longest_pause_ns: dur * MS,
            cpu,
        }
    }

    #[test]
    fn a_collection_is_medium_at_most_and_one_that_waited_is_unknown() {
        let run = |cpu, op_name: &str| {
            let mut c = chunk();
            c.vm_operations.push(op(5, op_name, 1000, 600, Some(("main", true))));
            c.gcs.push(gc(1000, 600, "System.gc()", cpu));
            diagnose_flight(&file(c), 20 * MS as u64, None).stalls[0].findings[0].clone()
        };
        // Working: its threads on the CPU for its length.
        let f = run(Some((500 * MS, 100 * MS, 600 * MS)), "ParallelGCSystemGC");
        assert_eq!((f.cause, f.confidence), (Cause::LongVmOperation, Confidence::Medium));
        assert!(f.instigator.unwrap().did.contains("System.gc()"));
        // Waiting: 60 ms of CPU in 600 ms.
        let f = run(Some((40 * MS, 20 * MS, 600 * MS)), "ParallelGCSystemGC");
        assert_eq!(f.cause, Cause::Unknown);
        assert!(f.evidence.iter().any(|e| e.contains("jdk.GCCPUTime")));
        // A heap dump runs a collection inside a longer operation of its own: still high.
        let f = run(Some((40 * MS, 20 * MS, 600 * MS)), "HeapDumper");
        assert_eq!((f.cause, f.confidence), (Cause::LongVmOperation, Confidence::High));
    }

    /// The log's safepoint records of `text` (a unified `-Xlog:safepoint` log).
    fn log_of(text: &str) -> GcLog {
        let mut safepoints = vec![];
        let mut sc = hotspot_log::Scanner::new();
        sc.scan(0, text.as_bytes(), &mut |s: &Safepoint| safepoints.push(s.clone())).unwrap();
        sc.finish(&mut |s: &Safepoint| safepoints.push(s.clone()));
        GcLog { name: "sp.log".into(), safepoints, notes: vec![] }
    }

    #[test]
    fn a_log_with_uptime_stamps_only_is_placed_by_its_named_operations() {
        // The JVM's start as JFR has it is 250 ms after the log's zero (the end of start-up).
        let mut c = chunk();
        c.jvm = Some(hotspot_log::jfr::FlightJvm {
            pid: 4,
            start_epoch_ms: T0 / 1_000_000,
            ..Default::default()
        });
        c.safepoint_events.push(begin(1, 1000, 300));
        c.vm_operations.push(op(1, "ThreadDump", 1300, 2, Some(("dumper", true))));
        c.samples.push(JfrStackSample {
            event: "jdk.ExecutionSample".into(),
            ..latency(8, "looper", 990, 0, "io.app.Loop.run")
        });
        // Ends at 1302 ms on JFR's clock, 1552 ms of uptime.
        let log = log_of(
            "[1.552s][info][safepoint] Safepoint \"ThreadDump\", Time since last: 1000000 ns, Reaching safepoint: 299000000 ns, Cleanup: 10000 ns, At safepoint: 2000000 ns, Total: 301010000 ns\n",
        );
        assert_eq!(log.safepoints.len(), 1, "{:?}", log.safepoints);
        let r = diagnose_flight(&file(c.clone()), 20 * MS as u64, Some(&log));
        let sp = r.stalls[0].safepoint.as_ref().unwrap();
        assert_eq!(sp.ttsp_ns, 299 * MS as u64, "the log's time to safepoint: {r:?}");
        assert!(r.notes.iter().any(|n| n.contains("1 of the 1 stalls joined")), "{:?}", r.notes);
    }

    #[test]
    fn a_long_time_to_safepoint_nothing_explains_is_unknown_with_what_would_tell() {
        let mut c = chunk();
        c.safepoint_events.push(begin(3, 3000, 250));
        let r = diagnose_flight(&file(c), 20 * MS as u64, None);
        let f = &r.stalls[0].findings[0];
        assert_eq!(f.cause, Cause::Unknown);
        assert!(f.evidence.iter().any(|e| e.contains("jdk.SafepointLatency")));
        assert!(f.evidence.iter().any(|e| e.contains("who asked for the operation is not known")));
    }

    fn event() -> impl Strategy<Value = (u8, i64, i64, i64)> {
        (0u8..4, 0i64..5, 0i64..5_000, 0i64..2_000)
    }

    proptest! {
        /// Any events, in any order, with any gaps: never a panic; every high-confidence cause
        /// explains at least 80% of its stall, every stall is at least the threshold, and no
        /// kernel cause is ever named from a flight recording.
        #[test]
        fn any_events_give_a_report_whose_confidence_the_evidence_covers(
            evs in proptest::collection::vec(event(), 0..30),
            threshold in 1i64..100,
        ) {
            let mut c = chunk();
            for (kind, id, at, dur) in evs {
                match kind {
                    0 => c.safepoint_events.push(begin(id, at, dur)),
                    1 => c.vm_operations.push(op(id, "ThreadDump", at, dur, Some(("t", true)))),
                    2 => c.samples.push(latency(id, "w", at, dur, "io.app.X.y")),
                    _ => c.safepoint_events.push(FlightSafepointEvent { phase: "end".into(), ..begin(id, at, dur) }),
                }
            }
            let r = diagnose_flight(&file(c), (threshold * MS) as u64, None);
            for s in &r.stalls {
                prop_assert!(s.duration_ns >= (threshold * MS) as u64);
                for f in &s.findings {
                    if f.confidence == Confidence::High {
                        prop_assert!(f.share >= crate::confidence::HIGH_SHARE, "{:?}", f);
                    }
                    prop_assert!(matches!(
                        f.cause,
                        Cause::LongVmOperation | Cause::NoSafepointPoll | Cause::CpuStarvation | Cause::Unknown
                    ));
                }
            }
        }
    }
}
