//! What the kernel's scheduler events (the BPF off-CPU recorder, `kwaits.jsonl`) say of a stall:
//! each wait's kernel stack read for what it waited on, its time within the stall to the
//! nanosecond, and who woke it.
//!
//! Two uses. [`refine`] gives each `/proc` sample of a thread asleep the kernel function its
//! whole stack says it waited in (the deciding frame, where `wchan` shows only the innermost
//! one that is not the scheduler's), so that everything the doctor decides from samples reads
//! the better name. [`view`] makes the report's per-stall account: the threads held longest, in
//! what, and woken by whom.
//!
//! Invariant: a wait is counted only for the part of it inside the stall (cut at both edges);
//! a stack that says nothing the `/proc` sample did not leaves the sample as it was.

use crate::causes::{self, Cause};
use crate::report::{KernelThreadView, KernelWaitView};
use crate::wait;
use recording::disk::{Mapping, TraceEvent};
use recording::{KernelWait, Sample, StallKernelWaits};
use std::collections::HashMap;

/// Where every thread leaves the CPU, whatever it waits for: the scheduler, and the generic
/// sleeps that many waits share (`wchan` skips the first few; these say nothing of the cause).
const GENERIC: [&str; 30] = [
    "__schedule",
    "schedule",
    "schedule_timeout",
    "io_schedule",
    "io_schedule_timeout",
    "schedule_hrtimeout_range",
    "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled",
    "preempt_schedule",
    "preempt_schedule_common",
    "preempt_schedule_irq",
    "preempt_schedule_notrace",
    "__cond_resched",
    "_cond_resched",
    "__wait_for_common",
    "wait_for_completion",
    "wait_for_completion_state",
    "wait_for_completion_io",
    "wait_for_completion_killable",
    "wait_for_completion_timeout",
    "bit_wait_io",
    "bit_wait",
    "out_of_line_wait_on_bit",
    "out_of_line_wait_on_bit_lock",
    "__wait_on_bit",
    "__wait_on_bit_lock",
    "folio_wait_bit_common",
    "folio_wait_bit",
    "wait_on_page_bit_common",
    "ttwu_do_activate",
];

/// Kernel paths that take `mmap_lock`: an rwsem slow path under one of these is a wait for it;
/// under anything else (an inode's lock) it is not.
const MM_PATHS: [&str; 16] = [
    "lock_mm_and_find_vma",
    "do_user_addr_fault",
    "exc_page_fault",
    "vm_mmap_pgoff",
    "__vm_munmap",
    "vm_munmap",
    "do_mprotect_pkey",
    "do_madvise",
    "do_mlock",
    "__do_sys_brk",
    "__do_sys_mremap",
    "do_vmi_munmap",
    "mmap_read_lock",
    "mmap_write_lock",
    "__access_remote_vm",
    "get_user_pages",
];

/// A read-write semaphore's slow path (mmap_lock is one, an inode's lock another).
fn rwsem(f: &str) -> bool {
    f.starts_with("rwsem_down") || f.starts_with("down_read") || f.starts_with("down_write")
}

fn generic(f: &str) -> bool {
    GENERIC.contains(&f) || f.starts_with("__traceiter_") || f.starts_with("__pfx_")
}

/// Stops a thread by a signal or a tracer.
fn stop_frame(f: &str) -> bool {
    matches!(f, "do_signal_stop" | "ptrace_stop" | "do_jobctl_trap")
}

/// The frame of `stack` (innermost first) that says what the thread waited for: the innermost
/// that one of the doctor's wait tables knows (an rwsem slow path only under a path that takes
/// `mmap_lock`), else the innermost that is not the scheduler's. None for an empty stack.
pub fn deciding_frame(stack: &[String]) -> Option<&str> {
    // A frame a cause's module names decides wherever it is (a compaction waits on a page's lock
    // like a page read does).
    if let Some((_, f)) = causes::of_kernel_frames(stack.iter().map(String::as_str)) {
        return Some(f);
    }
    let mm = stack.iter().any(|f| MM_PATHS.contains(&f.as_str()));
    let mut first = None;
    for f in stack.iter().map(String::as_str).filter(|f| !generic(f)) {
        if rwsem(f) && !mm {
            continue;
        }
        first = first.or(Some(f));
        if wait::reclaim_wait(f)
            || wait::memcg_high_wait(f)
            || wait::mmap_lock_wait(f)
            || wait::writeback_wait(f)
            || wait::fault_wait(f)
            || wait::freezer_wait(f)
            || stop_frame(f)
        {
            return Some(f);
        }
    }
    first
}

/// What a wait off a CPU was for, read from its state and kernel stack ([`kind`]). The report
/// names each in words ([`WaitKind::words`]); `held_cause` says which cause each names, with
/// no catch-all: a kind added must be given its cause (or none) there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitKind {
    /// Under a kernel function a cause's module names as its own
    /// (`crate::causes::Spec::kernel_frames`).
    Named(Cause),
    Preempted,
    Stopped,
    Frozen,
    SwapIn,
    Reclaim,
    MemoryHigh,
    MmapLock,
    Writeback,
    Fuse,
    PageCacheRead,
    KernelRwsem,
    KernelMutex,
    Futex,
    Sleep,
    Poll,
    Uninterruptible,
    Sleeping,
}

impl WaitKind {
    /// How the report names it (`page-cache read`, `mmap_lock` …).
    pub fn words(self) -> &'static str {
        match self {
            WaitKind::Named(c) => c.spec().kernel_words,
            WaitKind::Preempted => "waiting for a CPU (preempted)",
            WaitKind::Stopped => "stopped",
            WaitKind::Frozen => "frozen (cgroup freezer)",
            WaitKind::SwapIn => "swap-in",
            WaitKind::Reclaim => "reclaim",
            WaitKind::MemoryHigh => "memory.high throttle",
            WaitKind::MmapLock => "mmap_lock",
            WaitKind::Writeback => "writeback",
            WaitKind::Fuse => "FUSE",
            WaitKind::PageCacheRead => "page-cache read",
            WaitKind::KernelRwsem => "kernel lock (rwsem)",
            WaitKind::KernelMutex => "kernel lock (mutex)",
            WaitKind::Futex => "futex",
            WaitKind::Sleep => "sleep",
            WaitKind::Poll => "poll",
            WaitKind::Uninterruptible => "uninterruptible",
            WaitKind::Sleeping => "sleeping",
        }
    }

    /// A wait the thread asked for (an interruptible sleep of its own: a futex, a sleep, a
    /// poll), not one the kernel held it in.
    pub fn chosen(self) -> bool {
        matches!(self, WaitKind::Futex | WaitKind::Sleep | WaitKind::Poll | WaitKind::Sleeping)
    }
}

impl std::fmt::Display for WaitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.words())
    }
}

/// What a wait was for: by its state and deciding frame.
pub fn kind(w: &KernelWait, stack: &[String]) -> WaitKind {
    use WaitKind as K;
    let f = deciding_frame(stack).unwrap_or("");
    // The deciding frame is a cause's own wherever the stack holds one (`deciding_frame`).
    if !matches!(w.state, 'R' | 'T' | 't')
        && let Some((c, _)) = causes::of_kernel_frames([f])
    {
        return K::Named(c);
    }
    match w.state {
        'R' => K::Preempted,
        'T' | 't' => K::Stopped,
        _ if wait::freezer_wait(f) => K::Frozen,
        _ if stop_frame(f) => K::Stopped,
        _ if stack.iter().any(|s| s.starts_with("swap_read") || s == "do_swap_page") => K::SwapIn,
        _ if wait::reclaim_wait(f) => K::Reclaim,
        _ if wait::memcg_high_wait(f) => K::MemoryHigh,
        _ if rwsem(f) || f.contains("mmap_lock") || f == "lock_mm_and_find_vma" => K::MmapLock,
        // A stack read while asleep skips the lock's slow path (the scheduler's own text, as
        // `wchan` does): asleep in D in a call that takes mmap_lock for write is that wait.
        'D' if wait::mmap_write_caller(f) => K::MmapLock,
        _ if wait::writeback_wait(f) => K::Writeback,
        // A write fault on a page already there (do_wp_page, the file system's page_mkwrite)
        // waiting for the page's lock: its holder is writing the page back, or waiting for that
        // (`__folio_lock < fuse_page_mkwrite < do_page_mkwrite < do_wp_page`, the holder in
        // folio_wait_writeback under its own page_mkwrite). Not a page read in.
        _ if wait::page_lock_wait(f) && wait::write_fault(stack) => K::Writeback,
        _ if f.starts_with("fuse_") || f == "request_wait_answer" => K::Fuse,
        _ if wait::fault_wait(f) => K::PageCacheRead,
        _ if stack.iter().any(|s| rwsem(s)) => K::KernelRwsem,
        _ if stack.iter().any(|s| s.starts_with("__mutex_lock") || s.starts_with("mutex_lock")) => {
            K::KernelMutex
        }
        _ if stack.iter().any(|s| s.starts_with("futex_")) => K::Futex,
        _ if stack.iter().any(|s| s.contains("nanosleep") || s == "do_nanosleep") => K::Sleep,
        _ if stack.iter().any(|s| {
            s.starts_with("do_epoll") || s.starts_with("do_sys_poll") || s.starts_with("do_select")
        }) =>
        {
            K::Poll
        }
        'D' => K::Uninterruptible,
        _ => K::Sleeping,
    }
}

/// A `wchan` that says nothing of the cause: none (the thread woke between the reads), the
/// scheduler's own sleeps, or a read-write semaphore's slow path (mmap_lock, or an inode's lock:
/// the stack tells). A specific one (a page wait, a FUSE request) is kept: the doctor's rules
/// are built on it, and the stack is shown beside it in the kernel lines.
fn vague(wchan: &str) -> bool {
    const SCHED: [&str; 11] = [
        "schedule",
        "__schedule",
        "schedule_timeout",
        "io_schedule",
        "io_schedule_timeout",
        "schedule_hrtimeout_range",
        "schedule_hrtimeout_range_clock",
        "schedule_preempt_disabled",
        "__wait_for_common",
        "wait_for_completion",
        "wait_for_completion_state",
    ];
    wchan.is_empty() || wchan == "0" || SCHED.contains(&wchan) || rwsem(wchan)
}

/// The samples of a stall with each sleeping thread's `wchan` replaced by the deciding frame of
/// the BPF wait that covered the sample, where that `wchan` was vague (none, a scheduler sleep, an
/// rwsem slow path) and the frame differs. Other samples are returned as they were.
pub fn refine(samples: &[&Sample], kw: &StallKernelWaits) -> Vec<Sample> {
    let mut by_tid: HashMap<i32, Vec<&KernelWait>> = HashMap::new();
    for w in &kw.waits {
        if w.state != 'R' {
            by_tid.entry(w.tid).or_default().push(w);
        }
    }
    samples
        .iter()
        .map(|s| {
            let mut s = (*s).clone();
            for t in s.threads.iter_mut().filter(|t| matches!(t.state, 'S' | 'D')) {
                let covering = by_tid.get(&t.tid).and_then(|ws| {
                    ws.iter().find(|w| w.start <= s.t && w.end.is_none_or(|e| e >= s.t))
                });
                if let Some(f) = covering.and_then(|w| deciding_frame(kw.stack(w.stack)))
                    && f != t.wchan
                    && vague(&t.wchan)
                {
                    t.wchan = f.to_string();
                }
            }
            s
        })
        .collect()
}

/// The part of `w` inside `[from, to]`, in ns.
pub(crate) fn within(w: &KernelWait, from: u64, to: u64) -> u64 {
    w.end.unwrap_or(to).min(to).saturating_sub(w.start.max(from))
}

/// The frames worth showing: from the deciding one outward, without the scheduler's, at most
/// `n`.
fn shown(stack: &[String], n: usize) -> Vec<String> {
    let start = deciding_frame(stack).and_then(|d| stack.iter().position(|f| f == d)).unwrap_or(0);
    stack[start..].iter().filter(|f| !generic(f)).take(n).cloned().collect()
}

/// The threads of the stall `[from, to]` held longest off a CPU (by choice or not), up to `max`,
/// those in `first` (the findings' culprits) before the rest; threads parked by choice
/// throughout (a futex, a sleep, a poll) only when named in `first`.
pub fn view(
    kw: &StallKernelWaits,
    from: u64,
    to: u64,
    names: &HashMap<i32, String>,
    first: &[i32],
    max: usize,
) -> Vec<KernelThreadView> {
    let mut per: HashMap<i32, Vec<&KernelWait>> = HashMap::new();
    for w in kw.waits.iter().filter(|w| within(w, from, to) > 0) {
        per.entry(w.tid).or_default().push(w);
    }
    let span = to.saturating_sub(from);
    let mut views: Vec<(bool, KernelThreadView)> = per
        .into_iter()
        .filter_map(|(tid, ws)| {
            let off: u64 = ws.iter().map(|w| within(w, from, to)).sum();
            let mut kinds: HashMap<WaitKind, u64> = HashMap::new();
            for w in &ws {
                *kinds.entry(kind(w, kw.stack(w.stack))).or_default() += within(w, from, to);
            }
            let chosen: u64 = kinds.iter().filter(|(k, _)| k.chosen()).map(|(_, v)| *v).sum();
            let named = first.contains(&tid);
            if !named && chosen == off {
                return None;
            }
            let longest = ws.iter().max_by_key(|w| within(w, from, to))?;
            let mut kinds: Vec<(String, u64)> =
                kinds.into_iter().map(|(k, v)| (k.words().to_string(), v)).collect();
            kinds.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let name = names.get(&tid).cloned().unwrap_or_else(|| longest.comm.clone());
            Some((
                named,
                KernelThreadView {
                    tid,
                    name,
                    off_cpu_ns: off,
                    share: if span > 0 { off as f64 / span as f64 } else { 0.0 },
                    waits: ws.len(),
                    kinds,
                    longest: wait_view(longest, kw, from, to),
                },
            ))
        })
        .collect();
    // Ties by tid: `per` is a HashMap, and `report` must print what the live run printed.
    views.sort_by(|a, b| {
        b.0.cmp(&a.0).then(b.1.off_cpu_ns.cmp(&a.1.off_cpu_ns)).then(a.1.tid.cmp(&b.1.tid))
    });
    views.into_iter().take(max).map(|(_, v)| v).collect()
}

/// A frame of the page-fault path: a wait under it is a fault, not a system call's I/O.
pub(crate) fn fault_frame(f: &str) -> bool {
    matches!(
        f,
        "exc_page_fault"
            | "do_user_addr_fault"
            | "handle_mm_fault"
            | "filemap_fault"
            | "__do_fault"
            | "do_page_mkwrite"
    )
}

/// The cause a held thread's kind of wait names, for a process that is not a JVM; `fault`: its
/// stack runs through the page-fault path. None where the kind names no cause (a kernel lock, a
/// plain uninterruptible wait, a sleep the thread chose).
fn held_cause(kind: WaitKind, fault: bool) -> Option<Cause> {
    use WaitKind as K;
    Some(match kind {
        K::Named(c) => c,
        K::Preempted => Cause::CpuStarvation,
        K::Stopped | K::Frozen => Cause::Frozen,
        K::SwapIn => Cause::SwapIn,
        K::Reclaim => Cause::MemoryReclaim,
        K::MemoryHigh => Cause::MemcgHigh,
        K::MmapLock => Cause::MmapLock,
        K::PageCacheRead | K::Fuse if fault => Cause::MajorFault,
        K::PageCacheRead | K::Fuse => Cause::BlockedIo,
        K::Writeback if fault => Cause::MappedWriteback,
        K::Writeback => Cause::BlockedIo,
        K::KernelRwsem
        | K::KernelMutex
        | K::Uninterruptible
        | K::Futex
        | K::Sleep
        | K::Poll
        | K::Sleeping => return None,
    })
}

/// The finding of a stall of a process that is not a JVM (found by its threads held off a CPU,
/// `StallTrigger::Kernel`), from its kernel account alone: the thread and kind of wait that held
/// it longest within `[from, to]`, graded by the one policy (`crate::confidence`: high from two
/// thirds of the stall); none below half, or for a kind that names no cause. A wait whose kernel
/// stack was not taken (it is taken as the thread is woken, only while a stall is under way: a
/// wait woken before the recorder armed it has none) is read by the `wchan` the stall's `/proc`
/// samples saw for that thread most (`wchans`), and the finding says so.
pub fn held_finding(
    kw: &StallKernelWaits,
    from: u64,
    to: u64,
    names: &HashMap<i32, String>,
    wchans: &HashMap<i32, String>,
) -> Option<crate::report::Finding> {
    use crate::report::{CulpritView, Finding};
    let span = to.saturating_sub(from);
    let mut per: HashMap<(i32, WaitKind), (u64, bool)> = HashMap::new();
    let mut from_wchan: Option<(i32, &str)> = None;
    for w in kw.waits.iter().filter(|w| involuntary(w.state)) {
        let ns = within(w, from, to);
        if ns == 0 {
            continue;
        }
        let taken = kw.stack(w.stack);
        let sampled: Vec<String>;
        let stack = match wchans.get(&w.tid) {
            Some(wchan) if taken.is_empty() && w.state != 'R' => {
                from_wchan = Some((w.tid, wchan.as_str()));
                sampled = vec![wchan.clone()];
                &sampled[..]
            }
            _ => taken,
        };
        let e = per.entry((w.tid, kind(w, stack))).or_default();
        e.0 += ns;
        e.1 |= stack.iter().any(|f| fault_frame(f));
    }
    let (&(tid, k), &(ns, fault)) =
        per.iter().max_by_key(|((tid, k), (ns, _))| (*ns, std::cmp::Reverse((*tid, k.words()))))?;
    let share = if span > 0 { ns as f64 / span as f64 } else { 0.0 };
    if share < 0.5 {
        return None;
    }
    let cause = held_cause(k, fault)?;
    let t = view(kw, from, to, names, &[tid], 1).into_iter().next()?;
    let mut evidence = vec![evidence_line(&t)];
    if let Some((_, wchan)) = from_wchan.filter(|(t, _)| *t == tid) {
        evidence.push(format!(
            "its kernel stack was not taken (the wait was woken before the recorder armed it); what it waited in is from its /proc samples' wchan, {wchan}"
        ));
    }
    let state = t.longest.state;
    let place = t.longest.stack.iter().take(4).cloned().collect::<Vec<_>>().join(" < ");
    let how = match state {
        'R' => "waiting for a CPU (preempted)".to_string(),
        'T' | 't' => "stopped".to_string(),
        _ => format!("in a {k} wait"),
    };
    let description = format!(
        "state {state} for {} {how}{}",
        recording::units::fmt_ns(ns),
        if place.is_empty() { String::new() } else { format!(" ({place})") }
    );
    Some(Finding {
        cause,
        title: cause.title().into(),
        // The wait, with the stack that names what it waited for, is of the cause's own kind.
        confidence: crate::confidence::grade(share, crate::confidence::Strength::Direct),
        share,
        culprits: vec![CulpritView {
            tid,
            name: t.name.clone(),
            description,
            module: None,
            files: vec![],
            named_by_safepoint_timeout: false,
            code: None,
        }],
        evidence,
        fix: cause.fix_for_process().into(),
        doc: cause.doc(),
        instigator: None,
    })
}

/// Where a held thread's fault was, for a finding of a fault's wait: the last page fault the
/// tracepoint saw `tid` take before its longest involuntary wait within `[from, to]` began, when
/// it is in a file mapping: its offset in the file, and the file. (The tracepoint fires as the
/// fault is taken, before the wait; its times are whole µs, hence the µs of slack.)
pub fn fault_at<'m>(
    kw: &StallKernelWaits,
    tid: i32,
    (from, to): (u64, u64),
    trace: &[TraceEvent],
    maps: &'m [Mapping],
) -> Option<(u64, &'m str)> {
    let longest = kw
        .waits
        .iter()
        .filter(|w| w.tid == tid && involuntary(w.state))
        .max_by_key(|w| within(w, from, to))
        .filter(|w| within(w, from, to) > 0)?;
    let addr = trace.iter().rev().find_map(|e| match e {
        TraceEvent::PageFault { tid: t, t: at, address, .. }
            if *t == tid && *at <= longest.start + 1_000 =>
        {
            Some(*address)
        }
        _ => None,
    })?;
    let m = recording::disk::lookup(maps, addr).filter(|m| m.is_file())?;
    Some((addr - m.start + m.offset, m.path.as_str()))
}

/// Whether a wait that left a CPU in `state` was not the thread's choice.
fn involuntary(state: char) -> bool {
    matches!(state, 'R' | 'D' | 'T' | 't')
}

/// A culprit's kernel account in one line of its finding's evidence.
pub fn evidence_line(t: &KernelThreadView) -> String {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    let kinds: Vec<String> =
        t.kinds.iter().take(3).map(|(k, ns)| format!("{} {k}", ms(*ns))).collect();
    let l = &t.longest;
    let mut s = format!(
        "kernel (BPF scheduler events): {} was off a CPU {} of the stall ({:.0}%): {}; its longest wait {} in {}",
        t.name,
        ms(t.off_cpu_ns),
        t.share * 100.0,
        kinds.join(", "),
        ms(l.within_ns),
        if l.stack.is_empty() {
            l.kind.clone()
        } else {
            l.stack.iter().take(4).cloned().collect::<Vec<_>>().join(" < ")
        },
    );
    if let Some(w) = &l.waker {
        s.push_str(&format!(", woken by {w}"));
        if !l.waker_stack.is_empty() {
            s.push_str(&format!(
                " in {}",
                l.waker_stack.iter().take(3).cloned().collect::<Vec<_>>().join(" < ")
            ));
        }
    }
    if let Some(c) = l.waker_chain.first() {
        s.push_str(&format!("; {c}"));
    }
    if let Some(i) = &l.instead {
        s.push_str(&format!(", the CPU going to {i}"));
    }
    s
}

/// How soon after its own wait ended a waker must have woken the next thread for that wait to be
/// part of the chain: it woke the other as it came back (a lock released after a fault, a reply
/// passed on).
const CHAIN_GAP_NS: u64 = 2_000_000;
const CHAIN_STEPS: usize = 3;

/// The wake-up of `w` followed back through the target's own threads (see
/// `KernelWaitView::waker_chain`).
fn waker_chain(w: &KernelWait, kw: &StallKernelWaits) -> Vec<String> {
    let mut out = vec![];
    let mut cur = w;
    let mut seen = vec![w.tid];
    while out.len() < CHAIN_STEPS {
        let Some(k) = cur.waker.as_ref().filter(|k| k.tid > 0 && !seen.contains(&k.tid)) else {
            break;
        };
        seen.push(k.tid);
        let Some(prev) = kw
            .waits
            .iter()
            .filter(|x| x.tid == k.tid)
            .filter(|x| x.end.is_some_and(|e| e <= k.t && k.t - e <= CHAIN_GAP_NS))
            .max_by_key(|x| x.end)
        else {
            break;
        };
        let stack = kw.stack(prev.stack);
        let whole = prev.end.unwrap_or(prev.start).saturating_sub(prev.start);
        // A waker's nap of a millisecond says nothing of why a thread waited a second: only a
        // wait of a tenth of the one it ended is a link (seen in a counted-loop run: the VM
        // thread's 1 ms polls before it woke threads parked 400 ms).
        let woke = cur.end.unwrap_or(k.t).saturating_sub(cur.start);
        if whole.saturating_mul(10) < woke {
            break;
        }
        let at = deciding_frame(stack).map(|f| format!(" ({f})")).unwrap_or_default();
        let by = prev
            .waker
            .as_ref()
            .map(|x| format!(", woken by {} (pid {}, tid {})", x.comm, x.pid, x.tid))
            .unwrap_or_default();
        out.push(format!(
            "{} (tid {}) had been off a CPU {} in {}{at}{by}",
            k.comm,
            k.tid,
            recording::units::fmt_ns(whole),
            kind(prev, stack)
        ));
        cur = prev;
    }
    out
}

fn wait_view(w: &KernelWait, kw: &StallKernelWaits, from: u64, to: u64) -> KernelWaitView {
    let stack = kw.stack(w.stack);
    KernelWaitView {
        state: w.state,
        kind: kind(w, stack).words().to_string(),
        within_ns: within(w, from, to),
        whole_ns: w.end.map(|e| e.saturating_sub(w.start)),
        began_before: w.start < from,
        stack: shown(stack, 8),
        waker: w.waker.as_ref().map(|k| {
            // A wake-up from an interrupt runs in whatever the CPU was running: name the
            // interrupt, not that thread.
            let ws = k.stack.map(|i| kw.stack(i)).unwrap_or(&[]);
            let irq = ws.iter().any(|f| f.starts_with("asm_") || f.starts_with("irq_"));
            if ws.iter().any(|f| f == "hrtimer_wakeup") {
                "its timer (an interrupt)".to_string()
            } else if irq || k.pid == 0 {
                format!("an interrupt (on the CPU of {} tid {})", k.comm, k.tid)
            } else if k.stack.is_none() && !kw.waits.iter().any(|x| x.tid == k.tid) {
                // Without its stack (a short wait, or one outside a stall) a waker of another
                // process may be only what its CPU ran when a timer or a device interrupted it
                // (seen in the demo: the VM thread's 1 ms naps "woken by" stallscope's own
                // thread).
                format!("{} (pid {}, tid {}) or an interrupt on its CPU", k.comm, k.pid, k.tid)
            } else {
                format!("{} (pid {}, tid {})", k.comm, k.pid, k.tid)
            }
        }),
        waker_stack: w
            .waker
            .as_ref()
            .and_then(|k| k.stack)
            .map(|i| {
                kw.stack(i)
                    .iter()
                    .filter(|f| !generic(f) && *f != "try_to_wake_up")
                    .take(6)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default(),
        waker_chain: waker_chain(w, kw),
        instead: (w.state == 'R')
            .then(|| w.instead.as_ref().map(|i| instead_for(i, w.instead_ns)))
            .flatten(),
    }
}

/// [`instead_of`], with how long it held the CPU where the recording says (a thread that held
/// it for a moment, a timer's wake-up, was named only until another held it longer).
fn instead_for(i: &recording::KernelThread, ns: Option<u64>) -> String {
    match ns {
        Some(ns) => format!("{} for {:.1} ms", instead_of(i), ns as f64 / 1e6),
        None => instead_of(i),
    }
}

/// The thread a preempted thread's CPU went to, in words; stallscope's own (the recorder's, or
/// the agent's in the JVM) said to be, so that the observer is never mistaken for another
/// neighbour, nor left unsaid when it did take the CPU.
fn instead_of(i: &recording::KernelThread) -> String {
    if i.comm == "stallscope" || crate::evidence::stallscope_own(&i.comm) {
        format!("{} (tid {}, stallscope's own thread)", i.comm, i.tid)
    } else {
        format!("{} (tid {})", i.comm, i.tid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_cpu_that_went_to_stallscope_s_own_thread_says_so() {
        let t = |comm: &str| recording::KernelThread { tid: 7, comm: comm.into() };
        assert_eq!(instead_of(&t("java")), "java (tid 7)");
        assert_eq!(
            instead_of(&t("stallscope-writ")),
            "stallscope-writ (tid 7, stallscope's own thread)"
        );
        assert_eq!(instead_of(&t("stallscope")), "stallscope (tid 7, stallscope's own thread)");
        assert_eq!(
            instead_of(&t("stallscope-hicc")),
            "stallscope-hicc (tid 7, stallscope's own thread)"
        );
        assert_eq!(instead_of(&t("stallscoper")), "stallscoper (tid 7)");
        assert_eq!(instead_for(&t("cpu-hog"), Some(2_460_000)), "cpu-hog (tid 7) for 2.5 ms");
        assert_eq!(instead_for(&t("cpu-hog"), None), "cpu-hog (tid 7)");
    }

    #[test]
    fn the_deciding_frame_is_the_innermost_a_table_knows() {
        // Waiting for writeback inside reclaim: the writeback is what it waits on.
        let wb = st(&[
            "__schedule",
            "schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "folio_wait_writeback",
            "shrink_folio_list",
            "shrink_node",
            "try_to_free_mem_cgroup_pages",
        ]);
        assert_eq!(deciding_frame(&wb), Some("folio_wait_writeback"));
        // A page-cache read in a fault.
        let pf = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_fault",
            "__do_fault",
        ]);
        assert_eq!(deciding_frame(&pf), Some("filemap_fault"));
        // An inode's rwsem is not mmap_lock; under a fault it is.
        let inode = st(&[
            "__schedule",
            "rwsem_down_write_slowpath",
            "down_write",
            "ext4_buffered_write_iter",
        ]);
        assert_eq!(deciding_frame(&inode), Some("ext4_buffered_write_iter"));
        let w = KernelWait {
            tid: 1,
            comm: "x".into(),
            start: 0,
            end: Some(10),
            state: 'D',
            cpu: 0,
            stack: 0,
            waker: None,
            instead: None,
            instead_ns: None,
        };
        assert_eq!(kind(&w, &inode), WaitKind::KernelRwsem);
        let mm = st(&[
            "__schedule",
            "rwsem_down_read_slowpath",
            "lock_mm_and_find_vma",
            "do_user_addr_fault",
        ]);
        assert_eq!(deciding_frame(&mm), Some("rwsem_down_read_slowpath"));
        assert_eq!(kind(&w, &mm), WaitKind::MmapLock);
        assert_eq!(kind(&w, &wb), WaitKind::Writeback);
        let swap = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "swap_read_folio",
            "do_swap_page",
        ]);
        assert_eq!(kind(&w, &swap).words(), "swap-in");
        // Nothing known: the first frame not the scheduler's.
        assert_eq!(deciding_frame(&st(&["__schedule", "schedule", "do_wait"])), Some("do_wait"));
        assert_eq!(deciding_frame(&[]), None);
    }

    fn kw(waits: Vec<KernelWait>, stacks: Vec<Vec<String>>) -> StallKernelWaits {
        StallKernelWaits { stall: 1, from: 0, to: 1000, since: None, waits, stacks, lost: 0 }
    }

    fn wait(tid: i32, start: u64, end: Option<u64>, state: char, stack: usize) -> KernelWait {
        KernelWait {
            tid,
            comm: format!("t{tid}"),
            start,
            end,
            state,
            cpu: 0,
            stack,
            waker: None,
            instead: None,
            instead_ns: None,
        }
    }

    #[test]
    fn a_write_fault_waiting_for_the_page_lock_is_writeback_and_a_read_fault_is_a_read() {
        // As seen with the perf counters' file on a slow disk: the VM thread's write fault
        // waits for the lock of a page whose holder waits for its writeback.
        let write = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "__folio_lock",
            "fuse_page_mkwrite",
            "do_page_mkwrite",
            "do_wp_page",
            "__handle_mm_fault",
        ]);
        let w = wait(1, 0, Some(10), 'D', 0);
        assert_eq!(kind(&w, &write), WaitKind::Writeback);
        // The same lock taken reading a page in: a read.
        let read = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "__folio_lock",
            "filemap_fault",
            "__do_fault",
        ]);
        assert_eq!(kind(&w, &read), WaitKind::PageCacheRead);
    }

    #[test]
    fn a_wait_counts_only_inside_the_stall_and_parked_threads_are_left_out() {
        let stacks = vec![
            st(&["__schedule", "io_schedule", "folio_wait_bit_common", "filemap_fault"]),
            st(&["__schedule", "futex_wait_queue", "futex_wait"]),
        ];
        let k = kw(
            vec![
                // Began 50 before the stall [100, 300], ended 50 after: 200 inside.
                wait(1, 50, Some(350), 'D', 0),
                // Parked throughout: left out unless a culprit.
                wait(2, 0, None, 'S', 1),
                // Preempted for 40 inside.
                wait(3, 120, Some(160), 'R', 1),
            ],
            stacks,
        );
        let v = view(&k, 100, 300, &HashMap::new(), &[], 10);
        assert_eq!(v.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(v[0].off_cpu_ns, 200);
        assert!((v[0].share - 1.0).abs() < 1e-9);
        assert!(v[0].longest.began_before);
        assert_eq!(v[0].longest.kind, "page-cache read");
        assert_eq!(v[0].longest.stack, vec!["filemap_fault"]);
        assert_eq!(v[1].longest.kind, "waiting for a CPU (preempted)");
        let named = view(&k, 100, 300, &HashMap::new(), &[2], 10);
        assert_eq!(named[0].tid, 2, "a culprit comes first, parked or not");
    }

    #[test]
    fn a_sample_asleep_reads_the_deciding_frame_of_the_wait_that_covered_it() {
        let k = kw(
            vec![wait(7, 10, Some(90), 'D', 0)],
            vec![st(&[
                "__schedule",
                "io_schedule",
                "folio_wait_bit_common",
                "folio_wait_writeback",
                "shrink_folio_list",
            ])],
        );
        let t = recording::disk::TaskSample {
            tid: 7,
            comm: "x".into(),
            state: 'D',
            utime_ticks: 0,
            stime_ticks: 0,
            minflt: 0,
            majflt: 0,
            processor: 0,
            exec_ns: 0,
            run_delay_ns: 0,
            timeslices: 0,
            wchan: "0".into(),
            syscall: recording::disk::Syscall::Unknown,
            file: None,
        };
        let inside = Sample {
            t: 50,
            stall: 1,
            full: true,
            baseline: false,
            threads: vec![t.clone()],
            gone: vec![],
        };
        let after = Sample { t: 95, ..inside.clone() };
        let r = refine(&[&inside, &after], &k);
        assert_eq!(r[0].threads[0].wchan, "folio_wait_writeback");
        assert_eq!(r[1].threads[0].wchan, "0", "no wait covered it");
        // A specific wchan is kept.
        let mut specific = inside.clone();
        specific.threads[0].wchan = "folio_wait_bit_common".into();
        assert_eq!(refine(&[&specific], &k)[0].threads[0].wchan, "folio_wait_bit_common");
    }

    #[test]
    fn a_held_process_s_cause_is_the_kind_of_wait_that_covers_most_of_its_stall() {
        use crate::{Cause, Confidence};
        let read = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_get_pages",
            "filemap_read",
            "vfs_read",
        ]);
        let fault = st(&[
            "__schedule",
            "io_schedule",
            "folio_wait_bit_common",
            "filemap_fault",
            "__do_fault",
            "handle_mm_fault",
        ]);
        let futex = st(&["__schedule", "futex_wait_queue", "futex_wait"]);
        let names = HashMap::new();
        let none = HashMap::new();
        let one = |w: KernelWait, stacks: Vec<Vec<String>>| {
            held_finding(&kw(vec![w], stacks), 0, 1000, &names, &none)
        };
        // A read held it 900 of 1000 ns: blocked I/O, high; under a fault, a major fault.
        let f = one(wait(7, 50, Some(950), 'D', 0), vec![read.clone()]).unwrap();
        assert_eq!((f.cause, f.confidence), (Cause::BlockedIo, Confidence::High));
        assert_eq!(f.culprits[0].tid, 7);
        assert!(f.culprits[0].description.starts_with("state D for "), "{:?}", f.culprits);
        assert!(!f.fix.contains("JVM"));
        let f = one(wait(7, 50, Some(950), 'D', 0), vec![fault]).unwrap();
        assert_eq!(f.cause, Cause::MajorFault);
        assert!(!f.fix.contains("MappedByteBuffer"), "{}", f.fix);
        // Cut at the stall's edges: 600 of it is medium, 400 names nothing.
        let f = one(wait(7, 400, None, 'D', 0), vec![read.clone()]).unwrap();
        assert_eq!(f.confidence, Confidence::Medium);
        assert!(one(wait(7, 600, Some(5000), 'D', 0), vec![read.clone()]).is_none());
        // Preempted: CPU starvation; asleep by choice: nothing.
        let f = one(wait(7, 0, Some(1000), 'R', 0), vec![vec![]]).unwrap();
        assert_eq!(f.cause, Cause::CpuStarvation);
        assert!(f.culprits[0].description.contains("waiting for a CPU"));
        assert!(one(wait(7, 0, Some(1000), 'S', 0), vec![futex]).is_none());
        // A plain uninterruptible wait names no cause.
        assert!(one(wait(7, 0, Some(1000), 'D', 0), vec![st(&["__schedule", "msleep"])]).is_none());
        // A wait without its stack names nothing, unless the samples saw where it waited: a
        // FUSE read, blocked I/O, which the finding says came from /proc.
        assert!(one(wait(7, 0, Some(1000), 'D', 0), vec![vec![]]).is_none());
        let wchans = HashMap::from([(7, "request_wait_answer".to_string())]);
        let stackless = kw(vec![wait(7, 0, Some(1000), 'D', 0)], vec![vec![]]);
        let f = held_finding(&stackless, 0, 1000, &names, &wchans).unwrap();
        assert_eq!((f.cause, f.confidence), (Cause::BlockedIo, Confidence::High));
        assert!(f.evidence.iter().any(|e| e.contains("wchan, request_wait_answer")), "{f:#?}");
        // Another thread's wchan, or a stack that was taken, is not overridden.
        let other = HashMap::from([(8, "request_wait_answer".to_string())]);
        assert!(held_finding(&stackless, 0, 1000, &names, &other).is_none());
        let with = kw(vec![wait(7, 0, Some(1000), 'D', 0)], vec![read.clone()]);
        let f = held_finding(&with, 0, 1000, &names, &wchans).unwrap();
        assert!(!f.evidence.iter().any(|e| e.contains("wchan")), "{f:#?}");
    }

    #[test]
    fn a_wake_up_is_followed_back_through_the_target_s_threads_that_had_just_come_back() {
        const MS: u64 = 1_000_000;
        let fault = st(&["__schedule", "io_schedule", "folio_wait_bit_common", "filemap_fault"]);
        let futex = st(&["__schedule", "futex_wait_queue", "futex_wait"]);
        let waker = |tid: i32, t: u64, comm: &str| recording::KernelWaker {
            t,
            pid: if tid == 99 { 9 } else { 1 },
            tid,
            comm: comm.into(),
            stack: None,
        };
        // B waits on a lock from 100 ms; A, holding it, faults from 50 ms to 398 ms, woken by
        // the disk's server; A releases the lock and wakes B at 399 ms.
        let mut b = wait(2, 100 * MS, Some(400 * MS), 'S', 1);
        b.waker = Some(waker(1, 399 * MS, "holder"));
        let mut a = wait(1, 50 * MS, Some(398 * MS), 'D', 0);
        a.waker = Some(waker(99, 397 * MS, "slowfs-delay"));
        let k = kw(vec![a.clone(), b.clone()], vec![fault, futex]);
        let chain = waker_chain(&b, &k);
        assert_eq!(chain.len(), 1, "{chain:?}");
        assert!(chain[0].starts_with("holder (tid 1) had been off a CPU 348 ms in page-cache read (filemap_fault), woken by slowfs-delay (pid 9, tid 99)"), "{chain:?}");
        // A waker's short nap is no link: a 20 ms wait before it woke a 300 ms one.
        let mut nap = a.clone();
        nap.start = 378 * MS;
        assert!(waker_chain(&b, &kw(vec![nap, b.clone()], k.stacks.clone())).is_empty());
        // A waker that had been running for a while (its wait ended 10 ms before) ends it there.
        let mut early = a.clone();
        early.end = Some(389 * MS);
        assert!(waker_chain(&b, &kw(vec![early, b.clone()], k.stacks.clone())).is_empty());
        // Two threads that woke each other are followed once each, not forever.
        let mut a2 = a.clone();
        a2.waker = Some(waker(2, 397 * MS, "t2"));
        let mut b0 = wait(2, 10 * MS, Some(396 * MS), 'S', 1);
        b0.waker = Some(waker(1, 395 * MS, "holder"));
        let chain = waker_chain(&b, &kw(vec![a2, b0, b.clone()], k.stacks.clone()));
        assert_eq!(chain.len(), 1, "{chain:?}");
    }
}
