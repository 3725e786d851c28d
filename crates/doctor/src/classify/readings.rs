//! What each kind of a thread's time in a stall reads as: the cause it explains, whether the
//! evidence is of that cause's own kind (strong), and the evidence lines it rests on. The
//! thread's own state says what it can; where it cannot, the counters around the stall decide
//! (swap against file against reclaim for a page fault, throttling against starvation for a
//! run queue).
//!
//! Invariant: every reading carries the evidence it rests on, and one the evidence does not
//! support is `Unknown`, never a guess.

use super::activity::Activity;
use super::inputs::Inputs;
use super::machine::{
    cold_files, cpu_pressure, reclaim_lines, swap_lines, system_file, traced_fault,
    traced_lock_wait,
};
use super::words::{Role, plural};
use crate::causes::Cause;
use crate::evidence::ThreadEvidence;
use crate::wait::Wait;
use recording::units::fmt_ns;

/// Minor faults in a window that say a thread was touching fresh memory.
const FRESH_MEMORY_FAULTS: u64 = 1000;

/// The cause of a thread's stretch of time, given what it is in the stall (late to a safepoint,
/// running its operation, or the meter outside one). (cause, strong, evidence)
pub(super) fn cause_of(
    t: &ThreadEvidence,
    act: Activity,
    role: Role,
    inp: &Inputs,
) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    match act {
        Activity::User | Activity::Cpu => match role {
            Role::Late => {
                let faults = t.majflt + t.minflt;
                if act == Activity::Cpu && faults > 1000 {
                    kernel_cpu_cause(t, role, inp)
                } else {
                    let how = if act == Activity::User { "in user mode " } else { "" };
                    (
                        Cause::NoSafepointPoll,
                        act == Activity::User,
                        vec![format!(
                            "it ran on a CPU {how}through the stall without entering the kernel"
                        )],
                    )
                }
            }
            Role::Operation => (Cause::LongVmOperation, act == Activity::User, vec![]),
            Role::Meter => (
                Cause::Unknown,
                false,
                vec!["the agent's meter thread was on a CPU but did not tick".into()],
            ),
        },
        Activity::Kernel => kernel_cpu_cause(t, role, inp),
        Activity::RunQueue => {
            let throttled = inp.signals.throttled_ns.unwrap_or(0);
            if throttled > 0 {
                (
                    Cause::CgroupThrottling,
                    true,
                    vec![format!(
                        "the JVM's CPU cgroup was throttled for {} during the stall",
                        fmt_ns(throttled)
                    )],
                )
            } else {
                let (contended, psi) = cpu_pressure(inp);
                let mut ev =
                    vec![format!("{} {} runnable but waited on a run queue", sj.who, sj.was)];
                ev.extend(psi);
                (Cause::CpuStarvation, contended || role == Role::Operation, ev)
            }
        }
        Activity::Runnable => {
            // R in the samples, its counters too short to tell: in a cgroup throttled during the
            // stall, waiting out the quota is the likely reading (a throttled thread stays R);
            // under saturated CPUs, waiting for one; never a confident one.
            let (contended, psi) = cpu_pressure(inp);
            let throttled = inp.signals.throttled_ns.unwrap_or(0);
            if throttled > 0 {
                let ev = vec![
                    format!(
                        "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                        sj.who, sj.was, sj.its, sj.it
                    ),
                    format!(
                        "the JVM's CPU cgroup was throttled for {} during the stall",
                        fmt_ns(throttled)
                    ),
                ];
                (Cause::CgroupThrottling, false, ev)
            } else if contended || role == Role::Meter {
                let mut ev = vec![format!(
                    "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                    sj.who, sj.was, sj.its, sj.it
                )];
                ev.extend(psi);
                (Cause::CpuStarvation, false, ev)
            } else {
                (
                    Cause::Unknown,
                    false,
                    vec![format!(
                        "{} {} runnable (R), too briefly for {} counters to say whether {} ran",
                        sj.who, sj.was, sj.its, sj.it
                    )],
                )
            }
        }
        Activity::Stopped => {
            (Cause::Frozen, true, vec![format!("{} {} stopped (state T)", sj.who, sj.was)])
        }
        Activity::Waiting(w) => match w {
            Wait::PageIn => page_in_cause(t, role, inp),
            Wait::Reclaim => {
                let mut ev = vec![format!(
                    "{} {} in direct reclaim: reclaiming memory before a page could be had",
                    sj.who, sj.was
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            Wait::MemcgHigh => {
                let mut ev = vec![format!(
                    "{} slept on the way back to user space because the memory cgroup was over memory.high",
                    sj.who
                )];
                if let Some(n) = mem.memcg_high_events.filter(|n| *n > 0) {
                    ev.push(format!(
                        "the cgroup went over memory.high {} during the stall",
                        plural(n, "time")
                    ));
                }
                (Cause::MemcgHigh, true, ev)
            }
            // Waiting for writeback while memory is being reclaimed: reclaim waiting for dirty
            // pages, not a write of the thread's own.
            Wait::Writeback if mem.reclaiming() => {
                let mut ev = vec![format!(
                    "{} waited for dirty pages to be written back while memory was being reclaimed",
                    sj.who
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, true, ev)
            }
            Wait::FileWrite | Wait::Writeback | Wait::FileRead if role == Role::Operation => {
                let what = match (w, t.file()) {
                    (Wait::Writeback, _) => "waiting for writeback of a file written through a shared mapping (hsperfdata)".to_string(),
                    (_, Some(f)) => format!("{} {f}", if w == Wait::FileRead { "reading" } else { "writing to" }),
                    _ => w.words().to_string(),
                };
                (
                    Cause::VmThreadIo,
                    true,
                    vec![format!("{} {} {what} while the application was stopped", sj.who, sj.was)],
                )
            }
            Wait::Writeback => (
                Cause::MajorFault,
                false,
                vec![format!(
                    "{} {} blocked outside any system call, waiting for writeback of a page of a file mapping",
                    sj.who, sj.was
                )],
            ),
            Wait::MmapLock => {
                let mut ev = vec![format!("{} waited for mmap_lock", sj.who)];
                if let Some(ns) = traced_lock_wait(t.tid, inp) {
                    ev.push(format!(
                        "the longest mmap_lock wait lasted {} (tracepoints)",
                        fmt_ns(ns)
                    ));
                }
                (Cause::MmapLock, true, ev)
            }
            Wait::FileWrite | Wait::FileRead | Wait::Parked | Wait::Other => (
                Cause::Unknown,
                false,
                vec![format!(
                    "{} {} {}{}",
                    sj.who,
                    sj.was,
                    w.words(),
                    if t.wchan.is_empty() || t.wchan == "0" {
                        String::new()
                    } else {
                        format!(" (in {})", t.wchan)
                    }
                )],
            ),
        },
    }
}

/// A thread on a CPU in the kernel: paging in from swap, reclaiming, or something the counters
/// do not show.
fn kernel_cpu_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    let faults = t.majflt_since_baseline;
    if faults > 0 && mem.swapped_in() {
        let mut ev = vec![format!(
            "{} ran mostly in the kernel, taking major faults: pages coming back from swap",
            sj.who
        )];
        ev.extend(swap_lines(inp));
        return (Cause::SwapIn, true, ev);
    }
    if mem.reclaiming() {
        let mut ev =
            vec![format!("{} ran mostly in the kernel while memory was being reclaimed", sj.who)];
        ev.extend(reclaim_lines(inp));
        return (Cause::MemoryReclaim, false, ev);
    }
    // Minor faults: first touches of fresh memory. A thread late to a safepoint does them inside
    // a fill or copy (a huge Unsafe.setMemory, allocateDirect) that polls for no safepoint; the
    // operation's own threads (a GC) do them as the heap grows into pages never touched.
    if t.minflt >= FRESH_MEMORY_FAULTS {
        let where_ = match role {
            Role::Operation => {
                "the operation itself touching memory it had never used (a heap growing, a young generation first filled)"
            }
            Role::Late | Role::Meter => {
                "inside a fill or copy that never polls (a huge allocateDirect or Unsafe.setMemory)"
            }
        };
        let ev = vec![format!(
            "{} ran mostly in the kernel, taking {}: first touches of fresh memory, {where_}",
            sj.who,
            plural(t.minflt, "minor fault")
        )];
        return match role {
            Role::Late => (Cause::NoSafepointPoll, false, ev),
            Role::Operation => (Cause::LongVmOperation, false, ev),
            Role::Meter => (Cause::Unknown, false, ev),
        };
    }
    (
        Cause::Unknown,
        false,
        vec![format!("{} ran mostly in the kernel, for no reason the counters show", sj.who)],
    )
}

/// Why a thread waited for a page: a file, swap, or reclaim. (cause, strong, evidence)
fn page_in_cause(t: &ThreadEvidence, role: Role, inp: &Inputs) -> (Cause, bool, Vec<String>) {
    let mem = &inp.signals.memory;
    let sj = role.subject();
    let faults = t.majflt_since_baseline;
    let faults_line =
        (faults > 0).then(|| format!("{} major-fault count rose when the waits ended", sj.its));
    // With tracepoints, the fault's address says what it was: a data file, or the JVM's own
    // files (code, the class archive), which only fault when memory pressure evicted them.
    if let Some((addr, _)) = traced_fault(t.tid, t.first_blocked_t.unwrap_or(inp.end_ns), inp)
        && let Some(m) = procwatch::maps::lookup(inp.maps, addr).filter(|m| m.is_file())
    {
        let line = format!(
            "{} fault was at offset {:#x} of {} (page-fault tracepoint)",
            sj.its,
            addr - m.start + m.offset,
            m.path
        );
        if system_file(&m.path) && mem.reclaiming() {
            let mut ev = vec![
                line,
                "that is the JVM's own file, read back because memory pressure had evicted it"
                    .to_string(),
            ];
            ev.extend(reclaim_lines(inp));
            return (Cause::MemoryReclaim, true, ev);
        }
        return (Cause::MajorFault, !system_file(&m.path), vec![line]);
    }
    let swapped = mem.swapped_in();
    let cold = cold_files(inp);
    let swap_line = || swap_lines(inp).join("; ");
    match (swapped, cold.is_empty()) {
        (true, true) => {
            let mut ev = vec!["no data file is mapped cold".to_string()];
            ev.extend(swap_lines(inp));
            ev.extend(faults_line);
            (Cause::SwapIn, true, ev)
        }
        (false, false) => {
            let mut ev = vec![format!(
                "{} {} blocked outside any system call, waiting for a page",
                sj.who, sj.was
            )];
            ev.extend(faults_line.clone());
            (Cause::MajorFault, faults > 0, ev)
        }
        (true, false) => {
            // Both a cold file and swap-ins: the thread's own faults against the swap-ins.
            let swap_pages = mem.pswpin.unwrap_or(0) + mem.memcg_refault_anon.unwrap_or(0);
            if swap_pages >= faults.max(1) {
                (
                    Cause::SwapIn,
                    false,
                    vec![format!(
                        "{}; a cold data file is mapped too, so this is not certain",
                        swap_line()
                    )],
                )
            } else {
                (
                    Cause::MajorFault,
                    false,
                    vec![format!(
                        "a cold data file is mapped, but pages also came back from swap ({})",
                        swap_line()
                    )],
                )
            }
        }
        (false, true) => {
            if mem.reclaiming() {
                let mut ev = vec![format!(
                    "no data file is mapped cold and nothing came back from swap, but memory was being reclaimed: the pages {} waited for had been reclaimed (the JVM's own code or files) and were read back",
                    sj.who
                )];
                ev.extend(reclaim_lines(inp));
                (Cause::MemoryReclaim, false, ev)
            } else {
                (
                    Cause::Unknown,
                    false,
                    vec![format!(
                        "{} waited for a page, but no data file is mapped cold and nothing came back from swap",
                        sj.who
                    )],
                )
            }
        }
    }
}
