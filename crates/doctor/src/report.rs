//! The report: what the doctor concluded about a recording, as plain data. Every renderer (text,
//! JSON, HTML) reads these types; the JSON form is documented in `docs/formats/report-json.md`.
//!
//! Invariant: nothing here decides anything; the types only carry the diagnosis. Every type
//! reads back from its JSON (`report --json`): tests assert on typed values, not strings.

use crate::causes::Cause;
pub use crate::causes::InstigatorKind;
use recording::Meta;
use recording::hlog::HiccupSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The report's JSON schema name.
pub const SCHEMA: &str = "stallscope.report/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Confidence {
    Low,
    Medium,
    High,
}

impl Confidence {
    pub fn word(self) -> &'static str {
        match self {
            Confidence::Low => "low",
            Confidence::Medium => "medium",
            Confidence::High => "high",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeoutCulprit {
    pub name: String,
    pub tid: Option<i32>,
    /// HotSpot's word for it at the timeout (`runnable`, `waiting on condition` …).
    pub state: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SafepointView {
    pub op: String,
    pub ttsp_ns: u64,
    pub at_safepoint_ns: u64,
    pub total_ns: u64,
    pub start_mono_ns: u64,
    pub threads_total: Option<u32>,
    pub threads_running: Option<u32>,
    pub timeout_culprits: Vec<TimeoutCulprit>,
    /// The record never completed: the JVM ended inside this safepoint.
    pub unfinished: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CulpritView {
    pub tid: i32,
    /// The full Java thread name when the agent or SafepointTimeout gave it, else `comm`.
    pub name: String,
    pub description: String,
    /// Where its pc was, when it was blocked outside a system call.
    pub module: Option<String>,
    /// Mapped files it may have been reading (not in the page cache).
    pub files: Vec<String>,
    pub named_by_safepoint_timeout: bool,
    /// Its Java code: the JVM's own stack sample nearest the stall (null when the JVM recorded
    /// none of this thread near it; see docs/frames.md).
    pub code: Option<crate::code::CulpritCode>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    pub cause: Cause,
    pub title: String,
    pub confidence: Confidence,
    /// The part of the stall this cause explains (0–1); 0 for a contributor without a share.
    pub share: f64,
    pub culprits: Vec<CulpritView>,
    pub evidence: Vec<String>,
    pub fix: String,
    pub doc: String,
    /// Who set this part of the stall off (null when nobody did, or nobody could be named; the
    /// evidence then says why).
    pub instigator: Option<Instigator>,
}

/// Who set (part of) a stall off: a thread or a process, how we know, and the fix addressed to
/// it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instigator {
    pub kind: InstigatorKind,
    /// Who, in a few words: `jcmd`, `"metrics-exporter"`, `/docker/3f2a…`; bounded (no pid): the
    /// metrics label it.
    pub name: String,
    /// Who and what they did, in one line.
    pub did: String,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub command: Option<String>,
    pub user: Option<String>,
    /// Its parent processes, nearest first (`cron (pid 812)`).
    pub parents: Vec<String>,
    pub cgroup: Option<String>,
    pub container: Option<String>,
    /// A remote client's address.
    pub address: Option<String>,
    /// A Java thread's stack where it asked, top first.
    pub java_stack: Vec<String>,
    /// For CPUs taken by others: each process and its share.
    pub processes: Vec<CpuShare>,
    /// How we know, in words.
    pub source: String,
    /// What to do about it.
    pub fix: String,
}

/// One process's use of the CPUs during a stall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    pub pid: i32,
    pub name: String,
    pub command: Option<String>,
    pub cgroup: Option<String>,
    pub container: Option<String>,
    pub user: Option<String>,
    pub cpu_ns: u64,
    /// Of the CPUs' time over the window (its CPU time over window × CPUs).
    pub share: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadLine {
    pub tid: i32,
    pub name: String,
    pub states: String,
    pub wchan: String,
    pub cpu_ns: u64,
    pub run_delay_ns: u64,
    pub majflt: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallReport {
    pub stall: u32,
    pub start_mono_ns: u64,
    pub duration_ns: u64,
    /// Local wall time of the start, `2026-11-22 14:02:11.204`.
    pub start_wall: String,
    /// The safepoint that held the world for most of the stall.
    pub safepoint: Option<SafepointView>,
    /// Every safepoint the stall spans, in time order (the main one among them).
    pub safepoints: Vec<SafepointView>,
    pub findings: Vec<Finding>,
    /// Threads parked in the kernel throughout (they were not holding anything up).
    pub parked_threads: usize,
    pub threads: usize,
    pub samples: usize,
    pub control_max_late_ns: u64,
    /// The target exited before the stall ended.
    pub target_exited: bool,
    /// The busiest threads, shown when the cause is unknown.
    pub raw: Vec<ThreadLine>,
    /// How long the main safepoint had begun before the application stopped: the agent's meter
    /// (a Java thread) still ticked that far into its "Reaching safepoint". The VM thread was
    /// late to stop anyone (held itself, e.g. writing its perf counters); the operation's
    /// caller waited, the application did not. None when it was not late by much, or unknown.
    pub begun_before_stop_ns: Option<u64>,
    /// The kernel's account of the threads held longest off a CPU in the stall, from its
    /// scheduler events (BPF; root only): empty without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<KernelThreadView>,
}

/// One thread's time off a CPU within a stall, as the kernel's scheduler events recorded it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelThreadView {
    pub tid: i32,
    pub name: String,
    /// Off a CPU within the stall (each wait cut at the stall's edges).
    pub off_cpu_ns: u64,
    /// Of the stall.
    pub share: f64,
    /// Waits (of a millisecond or more) that overlapped the stall.
    pub waits: usize,
    /// Its time off a CPU by what it waited for, most first.
    pub kinds: Vec<(String, u64)>,
    /// Its longest wait within the stall.
    pub longest: KernelWaitView,
}

/// One wait off a CPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KernelWaitView {
    /// The state it left the CPU in (`R`: preempted).
    pub state: char,
    /// What it waited for, read from its kernel stack (`writeback`, `page-cache read`, `futex` …).
    pub kind: String,
    /// Within the stall, and whole (null: still going on when read).
    pub within_ns: u64,
    pub whole_ns: Option<u64>,
    /// It began before the stall did.
    pub began_before: bool,
    /// Its kernel stack from the frame that decided its kind outward, innermost first.
    pub stack: Vec<String>,
    /// Who woke it (`comm (pid P, tid T)`; `… or an interrupt on its CPU` for another process's
    /// thread whose stack was not taken), and that thread's kernel stack as it did.
    pub waker: Option<String>,
    pub waker_stack: Vec<String>,
    /// The wake-up followed back (up to three steps): when the waker is a thread of the target
    /// that had itself just come back from a wait (within 2 ms) of at least a tenth of the
    /// wait it ended, that wait, and its waker in turn: `comm (tid T) had been off a CPU 300 ms in page-cache read (filemap_fault), woken
    /// by …`. Empty when the waker was running already, or is another process or an interrupt.
    #[serde(default)]
    pub waker_chain: Vec<String>,
    /// For a preempted thread, who the CPU went to.
    pub instead: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub stalls: usize,
    pub by_cause: BTreeMap<String, usize>,
    pub longest_stall_ns: u64,
    pub safepoints: u64,
    pub total_stopped_ns: u64,
    pub ttsp_max_ns: Option<u64>,
    pub hiccups: Option<HiccupSummary>,
    /// stallscope's own control meter over the whole recording (null in recordings made
    /// before it was logged).
    pub control: Option<HiccupSummary>,
    pub recorded_ns: u64,
    /// Times stallscope itself was held up: its control meter woke late outside the target's
    /// stalls, or one step of its loop (a `/proc` read, a write) took long. Stalls in that time
    /// may be missing or unseen.
    pub recorder_pauses: usize,
    pub recorder_pause_max_ns: u64,
    /// What `run --boost-on safepoint` did (null without it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boost: Option<BoostSummary>,
}

/// `run --boost-on safepoint`: how many safepoints it boosted and how soon after each began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoostSummary {
    pub boosts: usize,
    /// From the safepoint's begin (as the JVM's counters place it) to the last thread raised.
    pub delay_p50_ns: u64,
    pub delay_p90_ns: u64,
    pub delay_max_ns: u64,
    /// Of that, until the booster's look saw it (the rest is raising the threads).
    pub seen_p50_ns: u64,
    /// How closely the begins were placed (the median of their bounds' widths).
    pub begun_within_p50_ns: u64,
    /// Threads raised per boost (median), and threads the kernel refused in all.
    pub threads_p50: u32,
    pub refused: u64,
    /// Boosts put back before their safepoint ended (it was open longer than the longest boost).
    pub capped: usize,
    /// The booster's own CPU time, as a share of one CPU over the time it ran.
    pub cpu_share: f64,
    /// It ran `SCHED_FIFO`.
    pub realtime: bool,
    /// Why it never boosted, if it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub recording: String,
    pub meta: Meta,
    pub stalls: Vec<StallReport>,
    pub summary: Summary,
    pub notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_sample_lines_match_the_documented_schema() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/formats/report-json.md"),
        )
        .unwrap();
        let line = ThreadLine {
            tid: 1,
            name: "x".into(),
            states: "R×1".into(),
            wchan: String::new(),
            cpu_ns: 0,
            run_delay_ns: 0,
            majflt: 0,
        };
        let v = serde_json::to_value(&line).unwrap();
        for k in v.as_object().unwrap().keys() {
            assert!(
                doc.contains(&format!("| `stalls[].raw[].{k}`")),
                "stalls[].raw[].{k} is not documented"
            );
        }
        let documented = doc.lines().filter(|l| l.starts_with("| `stalls[].raw[].")).count();
        assert_eq!(
            documented,
            v.as_object().unwrap().len(),
            "the document lists fields the type does not have"
        );
    }
}
