//! The one place the classification's evidence becomes English: each [`Evidence`] variant's
//! line, how a role's threads are named ("it", "the operation's threads"), counts with their
//! plurals, and sizes.
//!
//! Invariant: words only; nothing here decides a cause, a share or a confidence, and each
//! variant always reads the same for the same values.

use super::evidence_kind::{Evidence, Role, Swap, Tracepoint};
use crate::wait::Wait;
use recording::units::{fmt_count, fmt_ns};
use std::fmt;

/// How evidence lines name the threads of a role.
struct Subject {
    who: &'static str,
    was: &'static str,
    its: &'static str,
    it: &'static str,
}

impl Role {
    fn subject(self) -> Subject {
        match self {
            Role::Late => Subject { who: "it", was: "was", its: "its", it: "it" },
            Role::Operation => {
                Subject { who: "the operation's threads", was: "were", its: "their", it: "they" }
            }
            Role::Meter => {
                Subject { who: "the agent's meter thread", was: "was", its: "its", it: "it" }
            }
        }
    }
}

/// A finding's evidence as the report prints it: each line once, in order. (Two threads of
/// different roles can read the same: "its major-fault count rose…".)
pub(super) fn lines(evidence: &[Evidence]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(evidence.len());
    for e in evidence {
        let line = e.to_string();
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

/// `n` things, `1 page`, `1,024 pages`.
pub(super) fn plural(n: u64, one: &str) -> String {
    format!("{} {one}{}", fmt_count(n), if n == 1 { "" } else { "s" })
}

/// Thread names in quotes, `"a", "b"`.
fn quoted(names: &[String]) -> String {
    names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
}

/// Bytes as people read them: 1.23 GB, 456 MB, 12.3 kB.
fn fmt_bytes(b: u64) -> String {
    let v = b as f64;
    if v >= 1e9 {
        format!("{:.2} GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.0} MB", v / 1e6)
    } else {
        format!("{:.0} kB", v / 1e3)
    }
}

impl fmt::Display for Swap {
    /// Its counters' lines, joined.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let lines: Vec<String> = self.evidence().iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("; "))
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        use Evidence as E;
        match self {
            // What a thread did, read as a cause.
            E::RanWithoutKernel { user_mode } => {
                let how = if *user_mode { "in user mode " } else { "" };
                write!(f, "it ran on a CPU {how}through the stall without entering the kernel")
            }
            E::MeterOnCpuNoTick => {
                f.write_str("the agent's meter thread was on a CPU but did not tick")
            }
            E::MeterParked { ms } => write!(
                f,
                "the agent's meter thread was parked in the kernel for {ms} ms outside any safepoint: held by a lock or condition of the JVM's (the kernel's line for it names who woke it, where recorded)"
            ),
            E::RunQueue { role } => {
                let sj = role.subject();
                write!(f, "{} {} runnable but waited on a run queue", sj.who, sj.was)
            }
            E::CpuHeldByOwnThreads => f.write_str(
                "the operation's threads waited for CPUs held by the operation's own threads, \
                 not by any other process (the kernel's events): it ran on fewer CPUs than it \
                 had threads",
            ),
            E::CpusHeldByJvm { cpus, target, others } => write!(
                f,
                "the JVM's own threads used {:.0}% of the machine's {cpus} CPUs through the \
                 stall, every other process {:.0}% (the recorder's count): it had more runnable \
                 threads than CPUs, and they waited mostly for each other",
                target * 100.0,
                others * 100.0
            ),
            E::RunnableTooBriefly { role } => {
                let sj = role.subject();
                write!(
                    f,
                    "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                    sj.who, sj.was, sj.its, sj.it
                )
            }
            E::Stopped { role } => {
                let sj = role.subject();
                write!(f, "{} {} stopped (state T)", sj.who, sj.was)
            }
            E::DirectReclaim { role } => {
                let sj = role.subject();
                write!(
                    f,
                    "{} {} in direct reclaim: reclaiming memory before a page could be had",
                    sj.who, sj.was
                )
            }
            E::OverMemoryHigh { role } => write!(
                f,
                "{} slept on the way back to user space because the memory cgroup was over memory.high",
                role.subject().who
            ),
            E::WritebackUnderReclaim { role } => write!(
                f,
                "{} waited for dirty pages to be written back while memory was being reclaimed",
                role.subject().who
            ),
            E::WriteInFullCgroup { role, file } => {
                let sj = role.subject();
                let own = match file.as_deref() {
                    Some(f) if f.ends_with("/safepoint.log") => {
                        format!(" to {f} (the JVM's own safepoint log: the line a thread writes as it takes a poll, see docs/formats/recording.md)")
                    }
                    Some(f) => format!(" to {f} (a write of the JVM's own: the thread was running Java)"),
                    None => " (a write of the JVM's own: the thread was running Java)".to_string(),
                };
                write!(
                    f,
                    "{} {} asleep writing{own} while its memory cgroup was at its limit: the page cache of a write is charged to that cgroup, so the write waited for reclaim (/proc shows the filesystem, not the reclaim)",
                    sj.who, sj.was
                )
            }
            E::VmThreadIo { role, wait, file } => {
                let sj = role.subject();
                let what = match (wait, file) {
                    (Wait::Writeback, _) => "waiting for writeback".to_string(),
                    (_, Some(file)) => format!(
                        "{} {file}",
                        if *wait == Wait::FileRead { "reading" } else { "writing to" }
                    ),
                    _ => wait.words().to_string(),
                };
                write!(f, "{} {} {what} while the application was stopped", sj.who, sj.was)
            }
            E::WriteFaultUnderWriteback { role, files, traced } => {
                let sj = role.subject();
                match traced {
                    Some(Tracepoint::Writeback) => write!(
                        f,
                        "{} {} blocked in a write fault on {}, mapped shared, until the page's writeback ended (writeback tracepoint)",
                        sj.who,
                        sj.was,
                        files.join(", ")
                    ),
                    Some(Tracepoint::PageFault) => write!(
                        f,
                        "{} {} blocked on a page of {}, which the JVM maps shared and writable, and read nothing in: a write fault waiting for writeback (page-fault tracepoint)",
                        sj.who,
                        sj.was,
                        files.join(", ")
                    ),
                    None => {
                        let which = match files.as_slice() {
                            [one] => {
                                format!("{one}, the only file the JVM maps shared and writable")
                            }
                            many => format!(
                                "one of the files the JVM maps shared and writable: {}",
                                many.join(", ")
                            ),
                        };
                        write!(
                            f,
                            "{} {} blocked outside any system call on a page it was not reading in: a write fault waiting for writeback, on {which}",
                            sj.who, sj.was
                        )
                    }
                }
            }
            E::PagesUnderWriteback { pages } => write!(
                f,
                "{} {} under writeback machine-wide during it",
                plural(*pages, "page"),
                if *pages == 1 { "was" } else { "were" }
            ),
            E::FilePagesUnderWriteback { files } => {
                let each: Vec<String> = files
                    .iter()
                    .map(|(p, n)| format!("{} of {p}", plural(*n, "page")))
                    .collect();
                let n: u64 = files.iter().map(|(_, n)| n).sum();
                write!(
                    f,
                    "{} {} under writeback as the stall began (cachestat of the file)",
                    each.join(", "),
                    if n == 1 { "was" } else { "were" }
                )
            }
            E::PerfDataFile => f.write_str(
                "that file is the JVM's perf counters (hsperfdata), which the VM, GC, compiler and periodic threads update at every safepoint and GC",
            ),
            E::MeterParkedBesideWriteFaults { threads } => write!(
                f,
                "the agent's meter thread was parked (on a lock, or in the JVM's own wait) while {} of the JVM {} held in a write fault for at least half of it; the longest:",
                plural(*threads as u64, "thread"),
                if *threads == 1 { "was" } else { "were" }
            ),
            E::GcLockerHeldBack { ms, holder } => {
                write!(
                    f,
                    "the JVM's GC locker held a collection back for {ms} ms of the stall (its flag, read from the JVM's memory at each look): a thread in a JNI critical region kept it from running, and the agent's meter thread, needing memory, was parked until it ran; "
                )?;
                match holder {
                    Some((name, ran)) => write!(
                        f,
                        "\"{name}\" was the one thread of the application on a CPU for most of it ({ran} ms), most likely inside the region"
                    ),
                    None => f.write_str(
                        "the thread inside the region is not told apart (the JVM does not list it; no one thread of the application ran through the hold)",
                    ),
                }
            }
            E::NoMajorFault { role } => {
                write!(f, "{} major-fault count did not move", role.subject().its)
            }
            E::MmapLock { role } => write!(f, "{} waited for mmap_lock", role.subject().who),
            E::LongestMmapLockWait { ns } => {
                write!(f, "the longest mmap_lock wait lasted {} (tracepoints)", fmt_ns(*ns))
            }
            E::Waited { role, wait, wchan } => {
                let sj = role.subject();
                write!(f, "{} {} {}", sj.who, sj.was, wait.words())?;
                if !(wchan.is_empty() || wchan == "0") {
                    write!(f, " (in {wchan})")?;
                }
                Ok(())
            }
            E::KernelSwapFaults { role } => write!(
                f,
                "{} ran mostly in the kernel, taking major faults: pages coming back from swap",
                role.subject().who
            ),
            E::KernelUnderReclaim { role } => write!(
                f,
                "{} ran mostly in the kernel while memory was being reclaimed",
                role.subject().who
            ),
            E::KernelInCause { role, cause } => write!(
                f,
                "{} ran mostly in the kernel while the machine counted {} stalls and no direct reclaim, scanning or swap-out",
                role.subject().who,
                cause.spec().kernel_words
            ),
            E::KernelWaitedIn { role, cause, ns } => {
                let sj = role.subject();
                write!(
                    f,
                    "{} {} off a CPU in {} for {} of the stall (the kernel's stacks of its waits)",
                    sj.who,
                    sj.was,
                    cause.spec().kernel_words,
                    fmt_ns(*ns)
                )
            }
            E::KernelFreshMemory { role, minor_faults } => {
                let where_ = match role {
                    Role::Operation => {
                        "the operation itself touching memory it had never used (a heap growing, a young generation first filled)"
                    }
                    Role::Late | Role::Meter => {
                        "inside a fill or copy that never polls (a huge allocateDirect or Unsafe.setMemory)"
                    }
                };
                write!(
                    f,
                    "{} ran mostly in the kernel, taking {}: first touches of fresh memory, {where_}",
                    role.subject().who,
                    plural(*minor_faults, "minor fault")
                )
            }
            E::FreshMemoryTouched { role, minor_faults } => write!(
                f,
                "{} ran mostly in user mode but took {}: first touches of fresh memory (each a trip into the kernel), inside an allocation, fill or copy that polls for no safepoint (a huge array zeroed, allocateDirect, Unsafe.setMemory)",
                role.subject().who,
                plural(*minor_faults, "minor fault")
            ),
            E::KernelUnexplained { role } => write!(
                f,
                "{} ran mostly in the kernel, for no reason the counters show",
                role.subject().who
            ),

            // Page faults.
            E::MajorFaultsRose { role } => {
                write!(f, "{} major-fault count rose when the waits ended", role.subject().its)
            }
            E::FaultAt { role, offset, path } => write!(
                f,
                "{} fault was at offset {offset:#x} of {path} (page-fault tracepoint)",
                role.subject().its
            ),
            E::OwnFileEvicted => f.write_str(
                "that is the JVM's own file, read back because memory pressure had evicted it",
            ),
            E::FaultWasRead { role } => write!(
                f,
                "{} fault was a read (the tracepoint's error code has no write bit): the page was not in memory, though the file is mapped shared and writable",
                role.subject().its
            ),
            E::KernelReadFault { role, ms } => write!(
                f,
                "{} kernel stack shows a page being read in for a fault for {ms} ms (page-cache read, filemap_fault, with no wait for writeback): a read of the mapping, not a write, though the file is mapped shared and writable",
                role.subject().its
            ),
            E::BlockedForPage { role } => {
                let sj = role.subject();
                write!(
                    f,
                    "{} {} blocked outside any system call, waiting for a page",
                    sj.who, sj.was
                )
            }
            E::NoColdFile => f.write_str("no data file is mapped cold"),
            E::SwapDespiteColdFile(swap) => {
                write!(f, "{swap}; a cold data file is mapped too, so this is not certain")
            }
            E::ColdFileDespiteSwap(swap) => write!(
                f,
                "a cold data file is mapped, but pages also came back from swap ({swap})"
            ),
            E::PagesReclaimedReadBack { role } => write!(
                f,
                "no data file is mapped cold and nothing came back from swap, but memory was being reclaimed: the pages {} waited for had been reclaimed (the JVM's own code or files) and were read back",
                role.subject().who
            ),
            E::PageFromNowhere { role } => write!(
                f,
                "{} waited for a page, but no data file is mapped cold and nothing came back from swap",
                role.subject().who
            ),

            // Memory counters.
            E::SwappedIn { bytes } => write!(
                f,
                "{} of the JVM's memory came back from swap during the stall",
                fmt_bytes(*bytes)
            ),
            E::PagesSwappedIn { pages } => {
                write!(f, "{} swapped in machine-wide", plural(*pages, "page"))
            }
            E::PagesSwappedOut { pages } => {
                write!(f, "{} pushed out to swap machine-wide", plural(*pages, "page"))
            }
            E::CgroupLimitHit { times, using } => {
                write!(f, "its memory cgroup hit its limit {} during the stall", plural(*times, "time"))?;
                if let Some((usage, limit)) = using {
                    write!(f, " (using {} of {})", fmt_bytes(*usage), fmt_bytes(*limit))?;
                }
                Ok(())
            }
            E::CgroupReclaimScanned { pages } => {
                write!(f, "reclaim scanned {} in its memory cgroup", plural(*pages, "page"))
            }
            E::DirectReclaims { count } => {
                write!(f, "{} machine-wide", plural(*count, "direct reclaim"))
            }
            E::CompactionStalls { count } => {
                write!(f, "{} machine-wide", plural(*count, "compaction stall"))
            }
            E::PsiMemoryFull { share } => write!(
                f,
                "all of its tasks waited for memory during {:.0}% of the stall (PSI memory full)",
                share * 100.0
            ),
            E::MemoryHighEvents { times } => write!(
                f,
                "the cgroup went over memory.high {} during the stall",
                plural(*times, "time")
            ),

            // CPUs.
            E::PsiCpuDuring { share } => write!(
                f,
                "some task waited for a CPU during {:.0}% of the stall (PSI cpu)",
                share.min(1.0) * 100.0
            ),
            E::PsiCpuBefore { share } => write!(
                f,
                "some task waited for a CPU during {:.0}% of the time just before the stall (PSI cpu)",
                share.min(1.0) * 100.0
            ),
            E::JvmCgroupThrottled { ns } => write!(
                f,
                "the JVM's CPU cgroup was throttled for {} during the stall",
                fmt_ns(*ns)
            ),
            E::CgroupThrottled { ns } => {
                write!(f, "the cgroup was throttled for {} during the stall", fmt_ns(*ns))
            }
            E::Steal { ns } => write!(f, "{} of CPU time stolen by the hypervisor", fmt_ns(*ns)),
            E::TlbRate { per_s } => {
                write!(f, "{:.0} TLB shootdowns per second during the stall", per_s)
            }
            E::TlbRateBefore { per_s } => write!(f, "{:.0} per second just before", per_s),

            // The safepoint and the meter.
            E::NoneSeenHolding => f.write_str(
                "no thread of the JVM was seen holding the safepoint; the late ones had reached it by the first sample",
            ),
            E::TimeoutSawRunnable => f.write_str(
                "SafepointTimeout saw the late threads runnable; they had reached the safepoint by the first sample",
            ),
            E::MeterRunnable { runnable, samples } => write!(
                f,
                "the hiccup meter thread was runnable (R) in {runnable} of {samples} samples but did not tick: it was waiting for a CPU"
            ),
            E::MeterRunningAgain => {
                f.write_str("the hiccup meter thread was running again by the first sample")
            }
            E::NamedByTimeout => {
                f.write_str("SafepointTimeout named the thread as not reaching the safepoint")
            }
            E::OwnThreadHeld { name } => write!(
                f,
                "\"{name}\" is stallscope's own agent thread: the JVM named it late to this safepoint, so the observer held it too (`run --outside` puts nothing into the JVM, to compare)"
            ),
            E::NamedButParked => f.write_str(
                "SafepointTimeout named it, but /proc showed it parked in the kernel; the evidence is thin",
            ),
            E::MoreCulprits { more } => write!(
                f,
                "{more} more thread{} like the culprits above",
                if *more == 1 { "" } else { "s" }
            ),
            E::AtSafepoint { at_ns, total_ns, op } => write!(
                f,
                "at safepoint {} of {}: the operation \"{op}\" itself, its threads on a CPU",
                fmt_ns(*at_ns),
                fmt_ns(*total_ns)
            ),
            E::Unexplained { ns, stall_ns } => write!(
                f,
                "{} of the {} stall is not explained by the evidence above",
                fmt_ns(*ns),
                fmt_ns(*stall_ns)
            ),

            // The whole JVM, and the recorder beside it.
            E::AllStopped { stopped, samples } => {
                write!(
                    f,
                    "every thread stopped (state T) or held by a cgroup freezer in {stopped} of {samples} samples"
                )
            }
            E::ControlRanOn { worst_late_ns } => write!(
                f,
                "stallscope's own control meter ran on (worst lateness {})",
                fmt_ns(*worst_late_ns)
            ),
            E::ControlLate { late_ns } => {
                write!(f, "stallscope's own control meter was late by {} too", fmt_ns(*late_ns))
            }
            E::SameCpuQuota { throttled_ns } => write!(
                f,
                "stallscope runs under the same CPU quota as the JVM, and that cgroup was throttled for {}: its own lateness is the quota's, not the machine's",
                fmt_ns(*throttled_ns)
            ),
            E::WatchThreadQueued { ns } => write!(
                f,
                "stallscope's watch thread itself waited {} for a CPU: the machine's CPUs were saturated, not paused",
                fmt_ns(*ns)
            ),
            E::SameMemoryCgroup => f.write_str(
                "stallscope shares the JVM's memory cgroup, which was reclaiming: the recorder was held up by the same limit",
            ),

            // What the recording did (not) see.
            E::NoSamples => f.write_str("no thread samples were taken during the stall"),
            E::NoThreadHolding { samples, threads } => write!(
                f,
                "{samples} samples of {threads} threads show no thread holding things up"
            ),
            E::BeganBeforeWatching { unseen_ns, seen_ns } => write!(
                f,
                "it began {} before stallscope started watching; judged on the {} seen",
                fmt_ns(*unseen_ns),
                fmt_ns(*seen_ns)
            ),
            E::RecorderBlind { held_ns, steps, late_ns, stall_ns } => {
                let mut said = Vec::new();
                if *held_ns > 0 {
                    said.push(format!(
                        "the recorder itself was held {} of the {} stall ({}), and took no look at the JVM meanwhile",
                        fmt_ns(*held_ns),
                        fmt_ns(*stall_ns),
                        steps.join(", ")
                    ));
                }
                if *late_ns > 0 {
                    said.push(format!(
                        "the recorder noticed the stall {} later than its threshold (of {})",
                        fmt_ns(*late_ns),
                        fmt_ns(*stall_ns)
                    ));
                }
                write!(f, "{}: what held the JVM then was not seen", said.join("; "))
            }
            E::NoStackFromOutside { threads, near_ns } => write!(
                f,
                "no stack of {} was read from outside within {} of the stall (docs/attach.md)",
                quoted(threads),
                fmt_ns(*near_ns)
            ),
            E::NoFlightRecorderStack { threads, near_ns } => write!(
                f,
                "the JVM's flight recorder took no stack of {} within {} of the stall: it samples a thread only when it can interrupt it in Java code or a native method, and a thread blocked in a page fault or working inside the VM (a bulk copy from a mapping, Unsafe.copyMemory or setMemory) cannot be (docs/frames.md)",
                quoted(threads),
                fmt_ns(*near_ns)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn evidence_reads_as_the_report_prints_it() {
        let said = |e: Evidence| e.to_string();
        assert_eq!(
            said(Evidence::MemoryHighEvents { times: 40 }),
            "the cgroup went over memory.high 40 times during the stall"
        );
        assert_eq!(
            said(Evidence::RunnableTooBriefly { role: Role::Operation }),
            "the operation's threads were runnable (R), too briefly for their counters to say whether they ran"
        );
        assert_eq!(
            said(Evidence::CgroupLimitHit { times: 1, using: Some((500_000, 2_000_000_000)) }),
            "its memory cgroup hit its limit 1 time during the stall (using 500 kB of 2.00 GB)"
        );
        assert_eq!(
            said(Evidence::SwapDespiteColdFile(Swap {
                bytes: Some(365_644 * 1024),
                pages: Some(148_512)
            })),
            "374 MB of the JVM's memory came back from swap during the stall; 148,512 pages swapped in machine-wide; a cold data file is mapped too, so this is not certain"
        );
        assert_eq!(
            said(Evidence::SameCpuQuota { throttled_ns: 85 * MS }),
            "stallscope runs under the same CPU quota as the JVM, and that cgroup was throttled for 85.0 ms: its own lateness is the quota's, not the machine's"
        );
        assert_eq!(
            said(Evidence::Waited { role: Role::Meter, wait: Wait::Other, wchan: "0".into() }),
            "the agent's meter thread was blocked in the kernel"
        );
        assert_eq!(
            said(Evidence::MoreCulprits { more: 1 }),
            "1 more thread like the culprits above"
        );
        assert_eq!(
            said(Evidence::RecorderBlind {
                held_ns: 990 * MS,
                steps: vec!["the first look".into()],
                late_ns: 500 * MS,
                stall_ns: 1000 * MS
            }),
            "the recorder itself was held 990 ms of the 1.00 s stall (the first look), and took no look at the JVM meanwhile; the recorder noticed the stall 500 ms later than its threshold (of 1.00 s): what held the JVM then was not seen"
        );
        assert_eq!(
            said(Evidence::NoStackFromOutside {
                threads: vec!["a".into(), "b".into()],
                near_ns: 2000 * MS
            }),
            "no stack of \"a\", \"b\" was read from outside within 2.00 s of the stall (docs/attach.md)"
        );
    }

    #[test]
    fn a_line_two_roles_read_alike_is_said_once() {
        let e = [
            Evidence::MajorFaultsRose { role: Role::Late },
            Evidence::NoColdFile,
            Evidence::MajorFaultsRose { role: Role::Meter },
        ];
        assert_eq!(
            lines(&e),
            ["its major-fault count rose when the waits ended", "no data file is mapped cold"]
        );
    }
}
