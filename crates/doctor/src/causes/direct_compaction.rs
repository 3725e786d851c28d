//! `direct-compaction`: the thread compacted memory itself before a large page could be had
//! ([docs/causes/direct-compaction.md](../../../../docs/causes/direct-compaction.md)).
//!
//! Read from the kernel's stacks of a thread's waits (a wait under the compaction functions,
//! whatever it waits on inside them: a migrating page's lock looks like a page read), from a
//! sample's `wchan` in them (rare: compaction's own functions seldom sleep themselves), and,
//! where no stack was read, from a thread's kernel time over a stall in which the machine
//! counted compaction stalls and nothing else of reclaim.

use super::Spec;
use crate::signals::MemorySignals;

pub(super) const SPEC: Spec = Spec {
    id: "direct-compaction",
    title: "direct compaction for a large page",
    fix: "the thread moved other pages aside until a large page (a transparent huge page of the \
        heap, most often) could be had: get the heap's memory at start (-XX:+AlwaysPreTouch with \
        -Xms equal to -Xmx), let huge-page faults not compact (transparent_hugepage/defrag set to \
        defer or defer+madvise, khugepaged then collapses pages later), or give up transparent \
        huge pages for this JVM (-XX:-UseTransparentHugePages, or explicit huge pages reserved \
        at boot with -XX:+UseLargePages); a machine short of free memory compacts more \
        (vm.min_free_kbytes, vm.compaction_proactiveness)",
    fix_for_process: Some(
        "the thread moved other pages aside until a large page could be had (a transparent huge \
        page of a MADV_HUGEPAGE region, most often): fault the region in at start, set \
        transparent_hugepage/defrag to defer+madvise so faults do not compact, or use huge pages \
        reserved at boot (hugetlbfs)",
    ),
    colour: "D",
    // Direct compaction only: compaction asked for (compact_memory, a node's compact file) or by
    // kcompactd, and alloc_contig_range's isolation, stay memory reclaim's (`wait::reclaim_wait`).
    kernel_frames: &[
        "__alloc_pages_direct_compact",
        "try_to_compact_pages",
        "compact_zone",
        "compaction_alloc",
    ],
    kernel_words: "compaction",
    wait_words: "compacting memory for a large page",
    kernel_cpu: Some(compacting_alone),
    ..Spec::DEFAULT
};

/// The machine counted compaction stalls over the stall and nothing else of reclaim: no direct
/// reclaim, no pages scanned or swapped out by it, no memory cgroup at its limits.
fn compacting_alone(m: &MemorySignals) -> bool {
    let none = |v: Option<u64>| v.unwrap_or(0) == 0;
    m.compact_stall.is_some_and(|n| n > 0)
        && none(m.allocstall)
        && none(m.pgscan_direct)
        && m.pswpout.unwrap_or(0) < 16
        && none(m.memcg_limit_hits)
        && none(m.memcg_high_events)
        && none(m.memcg_pgscan)
}

#[cfg(test)]
mod tests {
    use crate::Cause;
    use crate::kernel::{WaitKind, deciding_frame, held_finding, kind};
    use crate::report::Confidence;
    use crate::signals::MemorySignals;
    use crate::wait::{Wait, wait_of};
    use recording::disk::{Syscall, TaskSample};
    use recording::{KernelWait, StallKernelWaits};
    use std::collections::HashMap;

    /// A huge page faulted into the heap, its compaction waiting for a migrating page's lock:
    /// each frame a symbol of this machine's kernel (6.18), innermost first.
    fn thp_fault() -> Vec<String> {
        [
            "__schedule",
            "schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "__folio_lock",
            "migrate_pages_batch",
            "migrate_pages",
            "compact_zone_order",
            "try_to_compact_pages",
            "__alloc_pages_direct_compact",
            "__alloc_pages_noprof",
            "alloc_pages_mpol",
            "vma_alloc_folio_noprof",
            "do_huge_pmd_anonymous_page",
            "__handle_mm_fault",
            "handle_mm_fault",
            "exc_page_fault",
            "asm_exc_page_fault",
        ]
        .map(String::from)
        .to_vec()
    }

    fn wait(state: char) -> KernelWait {
        KernelWait {
            tid: 41,
            comm: "java".into(),
            start: 0,
            end: Some(900),
            state,
            cpu: 0,
            stack: 0,
            waker: None,
            instead: None,
            instead_ns: None,
        }
    }

    #[test]
    fn a_wait_under_direct_compaction_is_compaction_not_a_page_read() {
        let stack = thp_fault();
        // The page lock it waits on inside is what the fault path's tables would take for a
        // page read in (a major fault).
        assert_eq!(deciding_frame(&stack), Some("compact_zone_order"));
        assert_eq!(kind(&wait('D'), &stack), WaitKind::Named(Cause::DirectCompaction));
        assert_eq!(kind(&wait('D'), &stack).words(), "compaction");
        // Preempted inside it, it waited for a CPU.
        assert_eq!(kind(&wait('R'), &stack), WaitKind::Preempted);
    }

    #[test]
    fn a_process_held_in_direct_compaction_is_named_with_its_fix() {
        let kw = StallKernelWaits {
            stall: 1,
            from: 0,
            to: 1000,
            since: None,
            waits: vec![wait('D')],
            stacks: vec![thp_fault()],
            lost: 0,
        };
        let names = HashMap::from([(41, "worker".to_string())]);
        let f = held_finding(&kw, 0, 1000, &names, &HashMap::new()).unwrap();
        assert_eq!(f.cause, Cause::DirectCompaction);
        assert_eq!(f.confidence, Confidence::High);
        assert_eq!(f.fix, Cause::DirectCompaction.fix_for_process());
        assert!(f.evidence[0].contains("compaction"), "{:?}", f.evidence);
    }

    /// A `wchan` in compaction's own code: rare (its waits are mostly on pages' locks, which only
    /// the kernel's stacks place), but a sample showing one is read so.
    #[test]
    fn a_sample_asleep_in_compaction_is_compaction() {
        let t = TaskSample {
            tid: 41,
            state: 'D',
            wchan: "compaction_alloc".into(),
            syscall: Syscall::NotInSyscall { sp: 0, pc: 0 },
            ..TaskSample::default()
        };
        assert_eq!(wait_of(&t), Wait::Named(Cause::DirectCompaction));
        assert_eq!(wait_of(&t).words(), "compacting memory for a large page");
    }

    #[test]
    fn a_thread_late_to_a_safepoint_asleep_in_compaction_holds_it() {
        use crate::classify::tests::{MS, findings_of, safepoint, thread};
        use crate::signals::SystemSignals;
        use crate::wait::Seen;
        let mut t = thread(7, "allocator", 'D', MS, 0);
        t.wchan = "compaction_alloc".into();
        t.seen_ns = [(Seen::Waiting(Wait::Named(Cause::DirectCompaction)), t.span_ns)].into();
        let sp = safepoint("G1CollectForAllocation", 20 * MS, 2 * MS);
        let f = findings_of(t, sp, 22 * MS, SystemSignals::default(), None);
        assert_eq!(f[0].cause, Cause::DirectCompaction, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "{f:?}");
        let said = &f[0].evidence;
        assert!(
            said.iter().any(|e| e.ends_with("compacting memory for a large page (in compaction_alloc)")),
            "{said:?}"
        );
    }

    #[test]
    fn a_jvm_thread_whose_kernel_stacks_wait_in_compaction_holds_the_safepoint_by_it() {
        use crate::classify::tests::{MS, findings_of, safepoint, thread};
        use crate::signals::SystemSignals;
        use crate::wait::Seen;
        // As /proc sees it: blocked for a page outside any system call, its wchan the page
        // lock's; the machine counted a compaction stall, which reads as reclaim without the
        // kernel's stacks.
        let mut t = thread(7, "allocator", 'D', MS, 0);
        t.wchan = "folio_wait_bit_common".into();
        t.seen_ns = [(Seen::Waiting(Wait::PageIn), t.span_ns)].into();
        let mut sig = SystemSignals::default();
        sig.memory.compact_stall = Some(1);
        let sp = || safepoint("G1CollectForAllocation", 20 * MS, 2 * MS);
        let f = findings_of(t.clone(), sp(), 22 * MS, sig.clone(), None);
        assert_eq!(f[0].cause, Cause::MemoryReclaim, "{f:?}");
        // The kernel's stacks of its waits say where: compaction.
        let kw = StallKernelWaits {
            stall: 1,
            from: 0,
            to: 22 * MS,
            since: None,
            waits: vec![KernelWait { tid: 7, end: Some(21 * MS), ..wait('D') }],
            stacks: vec![thp_fault()],
            lost: 0,
        };
        let f = findings_of(t, sp(), 22 * MS, sig, Some(&kw));
        assert_eq!(f[0].cause, Cause::DirectCompaction, "{f:?}");
        assert_eq!(f[0].confidence, Confidence::High, "{f:?}");
        assert!(
            f[0].evidence.iter().any(|e| e.contains("off a CPU in compaction for 21.0 ms")),
            "{:?}",
            f[0].evidence
        );
    }

    #[test]
    fn kernel_time_is_compaction_only_when_nothing_else_of_reclaim_was_counted() {
        let compacting = MemorySignals { compact_stall: Some(3), ..MemorySignals::default() };
        assert_eq!(crate::causes::of_kernel_cpu(&compacting), Some(Cause::DirectCompaction));
        let reclaiming = MemorySignals { allocstall: Some(1), ..compacting.clone() };
        assert_eq!(crate::causes::of_kernel_cpu(&reclaiming), None);
        assert_eq!(crate::causes::of_kernel_cpu(&MemorySignals::default()), None);
    }
}
