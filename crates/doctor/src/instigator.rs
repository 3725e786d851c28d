//! Who set a stall off: the thread or process behind each finding, from what the recorder saw
//! (`who.jsonl`, see `recording::who`) and the stall's own samples. The thread that asked for the
//! safepoint's VM operation (and, through the attach listener, the tool outside that asked it);
//! the signal's sender, the tracer or the cgroup freezer that stopped the process; the processes
//! that took the CPUs; the thread of the JVM that mapped and unmapped memory under the others.
//! Each comes with how it is known and the fix addressed to it.
//!
//! Invariant: an instigator is named only from a direct observation made in the stall (a VM
//! operation seen running, a signal traced, a freezer read, CPU time counted); otherwise there is
//! none, and where one was expected the evidence says why it is not known. Never a guess.

use crate::causes::{Cause, Search};
use crate::classify::NEIGHBOURS_MIN_SHARE;
use crate::report::{CpuShare, Finding, Instigator, InstigatorKind, SafepointView};
use recording::disk::Syscall;
use recording::units::fmt_ns;
use recording::{Sample, Who, WhoProcess, WhoThread};
use std::collections::{BTreeMap, HashMap};

/// Processes listed of those that took the CPUs.
const MAX_PROCESSES: usize = 5;
/// Those that took less than this share of the CPUs are left out of the words.
const LISTED_MIN_SHARE: f64 = 0.02;
/// Samples (or traced write locks) that make a thread the one mapping memory.
const MAPPER_MIN: usize = 2;
/// A stop signal this long before the stall began is still the one that stopped it.
const SIGNAL_BEFORE_NS: u64 = 2_000_000_000;
/// Slack when placing a VM operation seen at `t` in a safepoint.
const OP_SLACK_NS: u64 = 5_000_000;

/// The system calls that map, unmap or change the protection of memory (x86_64): mmap,
/// mprotect, munmap, brk, mremap, madvise, mlock, munlock, mlockall, munlockall.
const MEMORY_CALLS: [i64; 10] = [9, 10, 11, 12, 25, 28, 149, 150, 151, 152];

/// What the instigators of one stall are found from.
pub struct WhoInputs<'a> {
    pub stall: u32,
    /// The stall's lines of `who.jsonl`.
    pub lines: Vec<&'a Who>,
    /// Whether the recording looked for instigators at all.
    pub has_who: bool,
    /// Whether the recorder had the tracepoints (the signals' senders, the freezes' writers).
    pub tracepoints: bool,
    /// Java thread names by tid (the agent's table).
    pub names: &'a HashMap<i32, String>,
    pub start_ns: u64,
    pub end_ns: u64,
    pub samples: &'a [&'a Sample],
    pub trace: &'a [recording::disk::TraceEvent],
    /// The target is not a JVM (no safepoints to boost it through).
    pub not_a_jvm: bool,
    /// The stall's kernel waits with their wakers (BPF), where recorded.
    pub kwaits: Option<&'a recording::StallKernelWaits>,
}

/// Gives each finding its instigator (where one is known), and where one is expected and none
/// is known, a line saying why. The fix of a finding whose instigator *is* the answer (a long
/// operation someone asked for, a stop, the CPUs taken) is addressed to the instigator.
pub fn assign(findings: &mut [Finding], inp: &WhoInputs, safepoint: Option<&SafepointView>) {
    let requester = safepoint.map(|sp| requester(inp, sp));
    for f in findings.iter_mut() {
        let culprits: Vec<i32> = f.culprits.iter().map(|c| c.tid).collect();
        let fallback = || requester.clone().and_then(Result::ok);
        let found = match f.cause.spec().instigator {
            Search::Stopper => stopper(inp),
            Search::CpuNeighbours => cpu_neighbours(inp).or_else(fallback).ok_or(None),
            Search::MemoryMapper => {
                memory_mapper(inp, &culprits, f.cause).or_else(fallback).ok_or(None)
            }
            Search::Writer => writer(inp, &culprits, f.cause).or_else(fallback).ok_or(None),
            Search::Nobody => Err(None),
            Search::Requester => match &requester {
                Some(r) => r.clone().map_err(Some),
                None => Err(None),
            },
        };
        match found {
            Ok(i) => {
                // An operation held up by its own threads' crowd is fixed there first; what set
                // it off is the fix beside it. But for the GC locker's: the collection, and the
                // allocators' wait for it, are the critical region's doing.
                if f.cause.spec().answered_by(i.kind)
                    && (f.fix != crate::classify::OWN_THREADS_FIX || i.fix.starts_with(GC_LOCKER))
                {
                    f.fix = i.fix.clone();
                }
                f.instigator = Some(i);
            }
            // Said where the instigator is the answer the user came for.
            Err(Some(why)) if f.cause.spec().says_why_no_instigator => {
                f.evidence.push(why);
            }
            Err(_) => {}
        }
    }
}

/// The operation's name as the logs give it, from its class (`VM_HeapDumper` → `HeapDumper`).
fn op_name(class: &str) -> &str {
    class.strip_prefix("VM_").unwrap_or(class)
}

/// Whether a VM operation's class is the safepoint's operation as the log names it.
fn same_op(class: &str, logged: &str) -> bool {
    op_name(class).eq_ignore_ascii_case(logged)
}

/// Who asked for the safepoint's VM operation, or why that is not known.
pub fn requester(inp: &WhoInputs, sp: &SafepointView) -> Result<Instigator, String> {
    if !inp.has_who {
        return Err("who asked for the operation is not known: the recording was made before stallscope looked for it (no who.jsonl)".into());
    }
    let (from, to) = (
        sp.start_mono_ns.saturating_sub(OP_SLACK_NS),
        sp.start_mono_ns
            + sp.total_ns.max(inp.end_ns.saturating_sub(sp.start_mono_ns))
            + OP_SLACK_NS,
    );
    let ops: Vec<(u64, &String, &Option<WhoThread>)> = inp
        .lines
        .iter()
        .filter_map(|w| match w {
            Who::VmOperation { t, op, caller, .. } if *t >= from && *t <= to => {
                Some((*t, op, caller))
            }
            _ => None,
        })
        .collect();
    // The operation the log names; where the log names none (a safepoint placed from the perf
    // counters), the one operation seen in it.
    let named: Vec<_> = ops.iter().filter(|(_, op, _)| same_op(op, &sp.op)).collect();
    let chosen = match named.first() {
        Some(x) => Some(**x),
        None if ops.len() == 1 && !known_op_name(&sp.op) => ops.first().copied(),
        None => None,
    };
    let Some((_, op, caller)) = chosen else {
        let note = inp.lines.iter().find_map(|w| match w {
            Who::Note { note, .. } if note.contains("VM operation") => Some(note.clone()),
            _ => None,
        });
        return Err(match note {
            Some(n) => format!("who asked for the operation is not known: {n}"),
            None => "who asked for the operation is not known: it was not seen running when the recorder looked (over before the first look, or the JVM's memory could not be read)".into(),
        });
    };
    let op = op_name(op).to_string();
    let Some(c) = caller else {
        return Err(format!(
            "who asked for {op} is not known: the VM thread ran it, but its calling thread could not be read"
        ));
    };
    Ok(from_caller(inp, &op, c, sp))
}

/// Whether a safepoint's operation name is one the JVM logged (not a placeholder of ours).
fn known_op_name(op: &str) -> bool {
    !op.is_empty() && !op.starts_with("unknown") && !op.contains(' ')
}

/// What kind of VM operation, for the fix: a thread dump, a heap dump, an explicit GC, a GC an
/// allocation asked for, a class redefinition, or another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    ThreadDump,
    HeapDump,
    ExplicitGc,
    AllocationGc,
    /// The collection the GC locker held back, run by the last thread to leave a JNI critical
    /// region (`GetPrimitiveArrayCritical`, `GetStringCritical`).
    GcLocker,
    Redefine,
    Other,
}

/// How the fix for the GC locker's holder begins.
const GC_LOCKER: &str = "the GC locker: ";

/// Whether a Java thread in JNI code (its top frame a `native` method) asking for `op` was the
/// GC locker's last holder running the collection held back: Parallel's and Serial's operation
/// for it (`ParallelGCSystemGC`, `GenCollectFull`), neither `System.gc()` (`Runtime.gc` is
/// itself native: the stack says so) nor a diagnostic command run through the management
/// beans' native code (`GC.run` over JMX), which ask for the same operations. An allocation
/// from JNI asks for an allocation's collection; G1 before JDK 22 names the locker's collection
/// so too, and it is left to the GC's cause where that is known (a flight recording).
pub(crate) fn gc_locker_op(op: &str, stack: &[String], native: bool) -> bool {
    const MANAGEMENT: [&str; 3] = ["sun.management.", "com.sun.management.", "jdk.management."];
    native
        && matches!(op, "ParallelGCSystemGC" | "GenCollectFull")
        && op_kind(op, stack) == OpKind::Other
        && !stack.iter().any(|f| MANAGEMENT.iter().any(|m| f.starts_with(m)))
}

pub(crate) fn op_kind(op: &str, stack: &[String]) -> OpKind {
    let explicit = stack.iter().any(|f| f == "java.lang.System.gc" || f == "java.lang.Runtime.gc");
    match op {
        "ThreadDump"
        | "PrintThreads"
        | "FindDeadlocks"
        | "GetAllStackTraces"
        | "GetThreadListStackTraces" => OpKind::ThreadDump,
        "HeapDumper" | "GC_HeapInspection" | "HeapWalkOperation" | "HeapIterateOperation" => {
            OpKind::HeapDump
        }
        "RedefineClasses" | "ChangeBreakpoints" => OpKind::Redefine,
        _ if explicit => OpKind::ExplicitGc,
        // G1CollectForAllocation, ParallelGCFailedAllocation, GenCollectForAllocation,
        // CollectForMetadataAllocation …
        o if o.contains("Allocation") => OpKind::AllocationGc,
        _ => OpKind::Other,
    }
}

/// The first frame of the application's own code (outside the JDK), else the top one.
pub(crate) fn app_frame(stack: &[String]) -> Option<&str> {
    const JDK: [&str; 5] = ["java.", "javax.", "jdk.", "sun.", "com.sun."];
    stack
        .iter()
        .find(|f| !JDK.iter().any(|p| f.starts_with(p)))
        .or(stack.first())
        .map(String::as_str)
}

/// ` in the native method T (called in A)`: a stack's top frame, a native method, and the
/// application's frame that called it (only ` in A` where the two are one).
pub(crate) fn in_native_method(stack: &[String]) -> String {
    let app = app_frame(stack).map(|f| format!(" in {f}")).unwrap_or_default();
    match stack.first() {
        Some(top) if !app.ends_with(top.as_str()) => {
            format!(" in the native method {top} (called{app})")
        }
        _ => app,
    }
}

/// The instigator behind a calling thread: the thread itself, the JVM, the tool at the other end
/// of the attach listener, or a remote JMX client.
fn from_caller(inp: &WhoInputs, op: &str, c: &WhoThread, sp: &SafepointView) -> Instigator {
    let name = inp.names.get(&c.tid).cloned().unwrap_or_else(|| c.comm.clone());
    let took = fmt_ns(sp.total_ns);
    let source = "the VM thread's current operation and the thread that asked for it, read from the JVM's memory during the stall (VMThread::_cur_vm_operation)".to_string();
    let base = Instigator {
        tid: Some(c.tid),
        java_stack: c.frames.clone(),
        source: source.clone(),
        ..blank(InstigatorKind::JavaThread, name.clone())
    };
    if c.vm_thread {
        return Instigator {
            kind: InstigatorKind::Jvm,
            did: format!(
                "the JVM's own VM thread began {op} (an operation of its own: cleanup, a guaranteed safepoint, a periodic GC)"
            ),
            fix: format!("{op} is the JVM's own doing: see its cause's fix"),
            ..base
        };
    }
    if c.comm == "Signal Dispatch" || name == "Signal Dispatcher" {
        return from_sigquit(inp, op, &took, &source, base);
    }
    if c.comm == "Attach Listener" || name == "Attach Listener" {
        return from_attach_client(inp, op, &took, &source, base);
    }
    if name.starts_with("RMI TCP Connection") || c.comm.starts_with("RMI TCP Connect") {
        return remote_jmx(&name, op, &took, base);
    }
    if c.frames.is_empty() && !c.class.contains("JavaThread") {
        return Instigator {
            kind: InstigatorKind::Jvm,
            did: format!("the JVM's own thread \"{name}\" ({}) asked for {op}", c.class),
            java_stack: vec![],
            fix: format!("{op} is the JVM's own doing: see its cause's fix"),
            ..base
        };
    }
    let (kind, at) = if gc_locker_op(op, &c.frames, c.native) {
        (OpKind::GcLocker, in_native_method(&c.frames))
    } else {
        (
            op_kind(op, &c.frames),
            app_frame(&c.frames).map(|f| format!(" in {f}")).unwrap_or_default(),
        )
    };
    let (mut did, fix) = java_thread_words(kind, &name, &at, op, &took);
    if kind == OpKind::GcLocker {
        did.push_str(&locker_waiters(inp, c.tid, &name));
    }

    Instigator { did, fix, ..base }
}

/// `: "allocator" waited 574 ms for it, …, each woken by "deflater" as it left the region (the
/// kernel's events)`: the Java threads the GC locker's last holder woke about the stall, each
/// after a wait of at least [`LOCKER_WAIT_MIN_NS`] (those that needed memory while it held the
/// region); empty without the kernel's waits or with none such.
fn locker_waiters(inp: &WhoInputs, holder: i32, name: &str) -> String {
    let Some(kw) = inp.kwaits else { return String::new() };
    let mut waits: Vec<(u64, &str)> = kw
        .waits
        .iter()
        .filter(|w| w.tid != holder && w.waker.as_ref().is_some_and(|k| k.tid == holder))
        // Waiting already when the collection was asked for (the stall began), and woken about
        // it: a thread waiting for the holder's result or a lock of its own waits otherwise.
        .filter(|w| w.start < inp.start_ns)
        .filter_map(|w| {
            let end = w.end?;
            let woke = end >= inp.start_ns.saturating_sub(LOCKER_WOKE_NEAR_NS)
                && end <= inp.end_ns.saturating_add(LOCKER_WOKE_NEAR_NS);
            let waited = end.saturating_sub(w.start);
            let java = inp.names.get(&w.tid)?;
            (woke && waited >= LOCKER_WAIT_MIN_NS).then_some((waited, java.as_str()))
        })
        .collect();
    if waits.is_empty() {
        return String::new();
    }
    waits.sort_by_key(|w| std::cmp::Reverse(w.0));
    let n = waits.len();
    let named: Vec<String> = waits
        .iter()
        .take(3)
        .map(|(ns, t)| format!("\"{t}\" waited {} for it", fmt_ns(*ns)))
        .collect();
    let more = if n > 3 { format!(" and {} more threads", n - 3) } else { String::new() };
    let each = if n > 1 { "each " } else { "" };
    format!(
        ": {}{more}, {each}woken by \"{name}\" as it left the region (the kernel's events)",
        named.join(", ")
    )
}

/// A wait this long, ended by the GC locker's holder, was for the collection it held back.
const LOCKER_WAIT_MIN_NS: u64 = 10_000_000;
/// How far from the stall the holder may have woken them: JDK 17's wakes them after the
/// collection it ran, as it leaves the operation.
const LOCKER_WOKE_NEAR_NS: u64 = 100_000_000;

/// A remote JMX client behind an RMI connection thread (`RMI TCP Connection(N)-addr`): its
/// address, and the words.
pub(crate) fn remote_jmx(name: &str, op: &str, took: &str, base: Instigator) -> Instigator {
    let address = name.rsplit_once(")-").map(|(_, a)| a.to_string());
    let from = address.as_ref().map(|a| format!(" from {a}")).unwrap_or_default();
    Instigator {
        kind: InstigatorKind::RemoteJmx,
        name: "RMI TCP Connection".into(),
        did: format!(
            "a remote JMX client{from} asked for {op} (its RMI connection thread \"{name}\" called it)"
        ),
        address,
        fix: format!(
            "{op} asked over JMX{from} stopped the JVM for {took}: find the monitoring tool connected there and have it ask less often or for less (thread dumps and deadlock checks are safepoints)"
        ),
        ..base
    }
}

/// A thread dump the signal dispatcher ran: SIGQUIT's sender when the tracepoint saw it.
fn from_sigquit(
    inp: &WhoInputs,
    op: &str,
    took: &str,
    source: &str,
    base: Instigator,
) -> Instigator {
    // SIGQUIT asks for a thread dump (kill -3; or a jcmd or jstack whose knock at the attach
    // mechanism was answered too late, after a safepoint held by another was over).
    let quit = inp.lines.iter().rev().find_map(|w| match w {
        Who::Signal { sig: 3, sender, .. } => Some(sender),
        _ => None,
    });
    let Some(p) = quit else {
        return Instigator {
            kind: InstigatorKind::Jvm,
            name: "Signal Dispatcher".into(),
            did: format!(
                "a SIGQUIT asked for {op} (kill -3, or a jcmd or jstack whose attach was answered too late, after another safepoint); {}",
                if inp.tracepoints {
                    "no SIGQUIT to the JVM was traced"
                } else {
                    "its sender is seen only by the signal tracepoint (root)"
                }
            ),
            java_stack: vec![],
            fix: format!(
                "a SIGQUIT thread dump stopped the JVM for {took}: find who sends it SIGQUIT (kill -3, jstack, a supervisor)"
            ),
            ..base
        };
    };
    let hint = parents_hint(&p.ancestors);
    Instigator {
        did: format!(
            "SIGQUIT from {} asked the JVM for a thread dump ({op}){}",
            p.label(),
            if p.command().is_empty() { String::new() } else { format!(": {}", p.command()) }
        ),
        source: format!(
            "{source}: the signal dispatcher; SIGQUIT's sender from the kernel's signal:signal_generate tracepoint"
        ),
        fix: format!(
            "a thread dump on SIGQUIT from {} stopped every thread for {took}: stop sending the JVM SIGQUIT{hint}, or have it dump less often",
            p.comm
        ),
        ..process_fields(InstigatorKind::Signal, p)
    }
}

/// An operation the attach listener ran: the process at the other end of its connection.
fn from_attach_client(
    inp: &WhoInputs,
    op: &str,
    took: &str,
    source: &str,
    base: Instigator,
) -> Instigator {
    let clients: Vec<(&WhoProcess, &String)> = inp
        .lines
        .iter()
        .filter_map(|w| match w {
            Who::AttachClient { client, asked, .. } => Some((client, asked)),
            _ => None,
        })
        .collect();
    let Some((p, asked)) = clients.first() else {
        return Instigator {
            kind: InstigatorKind::AttachClient,
            name: "attach client".into(),
            did: format!(
                "a process outside asked for {op} through the JVM's attach listener (jcmd, jmap, jstack or a profiler); it had gone before it could be named"
            ),
            java_stack: vec![],
            fix: format!(
                "{op} stopped the JVM for {took}: find the tool that asks for it (jcmd, jmap, jstack, a profiler or monitoring agent), and run it less often, off-peak, or against a replica"
            ),
            ..base
        };
    };
    let words = if asked.is_empty() { op.to_string() } else { (*asked).clone() };
    // Its parent, unless that is init (which says nothing of who ran it).
    let started_by = p
        .ancestors
        .first()
        .filter(|(pid, _)| *pid > 1)
        .map(|(pid, c)| format!(", started by {c} (pid {pid})"))
        .unwrap_or_default();
    let what = match op_kind(op, &[]) {
        OpKind::ThreadDump => "a thread dump",
        OpKind::HeapDump => "a heap dump (or class histogram)",
        _ => "this operation",
    };
    Instigator {
        did: format!(
            "{} asked for `{words}` through the JVM's attach listener{started_by}",
            p.label()
        ),
        source: format!(
            "{source}: the attach listener; the process at the other end of its connection (sock_diag), and its command line"
        ),
        fix: format!(
            "`{words}` from {} stopped every thread for {took}: {what} stops the JVM for its whole length, so run {} less often, off-peak, or against a replica, and find what starts it{}",
            p.comm,
            p.comm,
            parents_hint(&p.ancestors)
        ),
        ..process_fields(InstigatorKind::AttachClient, p)
    }
}

/// What a Java thread did and the fix addressed to it, by the kind of operation it asked for.
pub(crate) fn java_thread_words(
    kind: OpKind,
    name: &str,
    at: &str,
    op: &str,
    took: &str,
) -> (String, String) {
    match kind {
        OpKind::ThreadDump => (
            format!("thread \"{name}\" asked for a thread dump ({op}){at}"),
            format!(
                "the thread dumps that \"{name}\" asks for{at} stop every thread ({took} here): ask less often or for less (ThreadMXBean.dumpAllThreads(false, false) skips locks; findDeadlockedThreads and thread metrics in exporters such as Prometheus' ThreadExports are safepoints too), or turn that collector off"
            ),
        ),
        OpKind::HeapDump => (
            format!("thread \"{name}\" asked for a heap dump or class histogram ({op}){at}"),
            format!(
                "the heap dump that \"{name}\" asks for{at} stops the JVM for its whole length ({took} here): take heap dumps on demand only, off-peak or from a replica"
            ),
        ),
        OpKind::ExplicitGc => (
            format!("thread \"{name}\" called System.gc(){at}, a full collection ({op})"),
            format!(
                "the explicit System.gc(){at} costs a full stop-the-world collection ({took} here): remove the call, or have it run concurrently (-XX:+ExplicitGCInvokesConcurrent, G1) or ignored (-XX:+DisableExplicitGC)"
            ),
        ),
        OpKind::AllocationGc => (
            format!(
                "thread \"{name}\" allocated{at} when the young generation was full, and asked for a collection ({op})"
            ),
            format!(
                "a collection the allocation{at} asked for: allocate less there, or give the young generation room for the allocation rate"
            ),
        ),
        OpKind::GcLocker => (
            format!(
                "thread \"{name}\" left a JNI critical region{at} and ran the collection the GC locker had held back while it was inside ({op})"
            ),
            format!(
                "{GC_LOCKER}while \"{name}\" held a JNI critical region (GetPrimitiveArrayCritical or GetStringCritical){at}, no collection could run, so threads that needed memory waited, and the collection ran as it left ({took} here): keep critical regions short (hand the native code smaller arrays at a time; Deflater, Inflater and CRC32 also take direct ByteBuffers, which need no critical region), copy with Get<Type>ArrayRegion instead, or use a collector that pins regions instead of locking collections out (G1 on JDK 22 and later)"
            ),
        ),
        OpKind::Redefine => (
            format!("thread \"{name}\" redefined classes ({op}){at}"),
            format!(
                "class redefinition{at} (an agent: a profiler, an APM or coverage agent, a debugger's hot swap) stops the JVM ({took} here): load such agents at start, or retransform fewer classes at a time"
            ),
        ),
        OpKind::Other => (
            format!("thread \"{name}\" asked for {op}{at}"),
            format!(
                "{op}, asked for by \"{name}\"{at}, stopped the JVM for {took}: ask for it less often"
            ),
        ),
    }
}

/// `: its parents are cron (pid 812), …` when the parents say something (not just init).
fn parents_hint(ancestors: &[(i32, String)]) -> String {
    let named: Vec<String> = ancestors
        .iter()
        .filter(|(p, _)| *p > 1)
        .take(3)
        .map(|(p, c)| format!("{c} (pid {p})"))
        .collect();
    if named.is_empty() { String::new() } else { format!(" (its parents: {})", named.join(", ")) }
}

/// The signal names stallscope speaks of.
fn signal_name(sig: i32) -> String {
    match sig {
        2 => "SIGINT".into(),
        3 => "SIGQUIT".into(),
        9 => "SIGKILL".into(),
        15 => "SIGTERM".into(),
        18 => "SIGCONT".into(),
        19 => "SIGSTOP".into(),
        20 => "SIGTSTP".into(),
        21 => "SIGTTIN".into(),
        22 => "SIGTTOU".into(),
        n => format!("signal {n}"),
    }
}

/// An instigator of `kind` named `name`, nothing else known yet.
pub(crate) fn blank(kind: InstigatorKind, name: String) -> Instigator {
    Instigator {
        kind,
        name,
        did: String::new(),
        pid: None,
        tid: None,
        command: None,
        user: None,
        parents: vec![],
        cgroup: None,
        container: None,
        address: None,
        java_stack: vec![],
        processes: vec![],
        source: String::new(),
        fix: String::new(),
    }
}

/// An instigator of `kind` that is process `p`: its name, pid, command, user, parents, cgroup.
fn process_fields(kind: InstigatorKind, p: &WhoProcess) -> Instigator {
    Instigator {
        pid: Some(p.pid),
        command: Some(p.command()).filter(|c| !c.is_empty()),
        user: p.user.clone(),
        parents: p.ancestors.iter().map(|(pid, c)| format!("{c} (pid {pid})")).collect(),
        cgroup: Some(p.cgroup.clone()).filter(|c| !c.is_empty()),
        container: p.container.clone(),
        ..blank(kind, p.comm.clone())
    }
}

/// What stopped the process: a cgroup freezer, a tracer, or a stop signal and its sender.
pub fn stopper(inp: &WhoInputs) -> Result<Instigator, Option<String>> {
    if !inp.has_who {
        return Err(Some("what stopped the process is not known: the recording was made before stallscope looked for it (no who.jsonl)".into()));
    }
    let stopped = inp.lines.iter().find_map(|w| match w {
        Who::Stopped { state, tracer, freezer, .. } => Some((*state, tracer, freezer)),
        _ => None,
    });
    if let Some((_, _, Some(fz))) = stopped {
        let writer = inp.lines.iter().rev().find_map(|w| match w {
            Who::FreezeWritten { writer, frozen: true, cgroup, .. } if *cgroup == fz.cgroup => {
                Some(writer)
            }
            _ => None,
        });
        let file = if fz.version == "v2" { "cgroup.freeze" } else { "freezer.state" };
        let what =
            fz.container.as_ref().map(|c| format!(" (the container {c})")).unwrap_or_default();
        let by = writer.map(|w| format!(", frozen by {}", w.label())).unwrap_or_default();
        let mut i = match writer {
            Some(w) => process_fields(InstigatorKind::Freezer, w),
            None => blank(InstigatorKind::Freezer, String::new()),
        };
        if writer.is_none() {
            i.pid = None;
        }
        return Ok(Instigator {
            kind: InstigatorKind::Freezer,
            name: fz.container.clone().unwrap_or_else(|| fz.cgroup.clone()),
            did: format!("the cgroup {}{what} was frozen ({file} {}){by}", fz.cgroup, fz.state),
            cgroup: Some(fz.cgroup.clone()),
            container: fz.container.clone(),
            source: format!(
                "the process's cgroup and its {file}{}",
                if writer.is_some() {
                    "; who froze it, the cgroup:cgroup_freeze tracepoint"
                } else {
                    ""
                }
            ),
            fix: format!(
                "a frozen cgroup{what} stops every thread in it (a paused container: docker pause, a checkpoint, an orchestrator's freeze): {}, and thaw it ({})",
                match writer {
                    Some(w) => format!(
                        "find why {} froze {}{}",
                        w.label(),
                        fz.cgroup,
                        parents_hint(&w.ancestors)
                    ),
                    None => format!("find what freezes {}", fz.cgroup),
                },
                if fz.version == "v2" {
                    "echo 0 > cgroup.freeze"
                } else {
                    "echo THAWED > freezer.state"
                }
            ),
            ..i
        });
    }
    if let Some((_, Some(t), _)) = stopped {
        return Ok(Instigator {
            kind: InstigatorKind::Tracer,
            did: format!(
                "{} is attached to the JVM with ptrace (a debugger) and held it stopped",
                t.label()
            ),
            source: "TracerPid in the process's /proc/PID/status".into(),
            fix: format!(
                "{} holds the JVM stopped while it is attached: detach it (gdb: detach), or debug a copy",
                t.comm
            ),
            ..process_fields(InstigatorKind::Tracer, t)
        });
    }
    let stop_signal = inp.lines.iter().rev().find_map(|w| match w {
        Who::Signal { t, sig, sender, .. }
            if matches!(sig, 19..=22)
                && *t + SIGNAL_BEFORE_NS >= inp.start_ns
                && *t <= inp.end_ns =>
        {
            Some((*sig, sender))
        }
        _ => None,
    });
    if let Some((sig, p)) = stop_signal {
        let name = signal_name(sig);
        let hint = parents_hint(&p.ancestors);
        return Ok(Instigator {
            kind: InstigatorKind::Signal,
            did: format!(
                "{name} was sent to the JVM by {}{}",
                p.label(),
                p.command()
                    .is_empty()
                    .then(String::new)
                    .unwrap_or_else(|| format!(": {}", p.command()))
            ),
            source: "the kernel's signal:signal_generate tracepoint, in the sender's context"
                .into(),
            fix: format!(
                "{} stopped the JVM with {name}: find why{hint}; SIGCONT resumes it",
                p.comm
            ),
            ..process_fields(InstigatorKind::Signal, p)
        });
    }
    let Some((state, _, _)) = stopped else {
        return Err(None);
    };
    Err(Some(if inp.tracepoints {
        format!(
            "the process was stopped (state {state}), but no stop signal to it was traced and no freezer or tracer held it"
        )
    } else {
        format!(
            "the process was stopped (state {state}) by a signal whose sender only the kernel's signal tracepoint shows: run stallscope as root (or with CAP_PERFMON) to name it"
        )
    }))
}

/// A stall most of which the recorder saw the process frozen by a cgroup freezer (or stopped),
/// whatever its threads' states said: since Linux 6.1 a thread asleep where it may be frozen is
/// frozen in place (state D, its wchan unchanged), which reads as a wait in the kernel. The
/// freezer's own file, read every few milliseconds, says it. `None` unless it covers at least
/// `min_share` of the stall.
pub fn held_finding(inp: &WhoInputs, min_share: f64) -> Option<Finding> {
    let d = inp.end_ns.saturating_sub(inp.start_ns).max(1);
    let (seen, freezer) = inp.lines.iter().find_map(|w| match w {
        Who::Stopped { t, freezer: Some(f), .. } => Some((*t, f)),
        _ => None,
    })?;
    let resumed = inp
        .lines
        .iter()
        .find_map(|w| match w {
            Who::Resumed { t, .. } if *t >= seen => Some(*t),
            _ => None,
        })
        .unwrap_or(inp.end_ns)
        .min(inp.end_ns);
    // Frozen from before it was first seen: the first look of a stall comes a threshold in.
    let from = if seen.saturating_sub(inp.start_ns) < d / 10 { inp.start_ns } else { seen };
    let covered = resumed.saturating_sub(from);
    let share = covered as f64 / d as f64;
    if share < min_share {
        return None;
    }
    let file = if freezer.version == "v2" { "cgroup.freeze" } else { "freezer.state" };
    Some(Finding {
        cause: Cause::Frozen,
        title: Cause::Frozen.title().into(),
        // The freezer's own state, read through the stall: of the cause's own kind.
        confidence: crate::confidence::grade(share, crate::confidence::Strength::Direct),
        share: share.min(1.0),
        culprits: vec![],
        evidence: vec![
            format!("the cgroup {} was frozen ({file} {}) for {} of the {} stall, read every 10 ms", freezer.cgroup, freezer.state, fmt_ns(covered), fmt_ns(d)),
            "its threads slept where the freezer held them (a frozen thread waits for its thaw, not for I/O, whatever its state letter)".into(),
        ],
        fix: Cause::Frozen.fix().into(),
        doc: Cause::Frozen.doc(),
        instigator: None,
    })
}

/// The processes that took the CPUs while the stall lasted, when others took enough of them.
pub fn cpu_neighbours(inp: &WhoInputs) -> Option<Instigator> {
    let (from, to, cpus, others_ns, takers, counted) = inp.lines.iter().find_map(|w| match w {
        Who::CpuUse { from, to, cpus, others_ns, takers, counted, .. } => {
            Some((*from, *to, *cpus, *others_ns, takers, counted.as_str()))
        }
        _ => None,
    })?;
    let capacity = (to.saturating_sub(from) as f64 * cpus.max(1) as f64).max(1.0);
    let share = others_ns as f64 / capacity;
    if share < NEIGHBOURS_MIN_SHARE || takers.is_empty() {
        return None;
    }
    let processes: Vec<CpuShare> = takers
        .iter()
        .take(MAX_PROCESSES)
        .map(|t| CpuShare {
            pid: t.pid,
            name: t.comm.clone(),
            command: Some(t.named.cmdline.join(" ")).filter(|c| !c.is_empty()),
            cgroup: Some(t.named.cgroup.clone()).filter(|c| !c.is_empty()),
            container: t.named.container.clone(),
            user: t.named.user.clone(),
            cpu_ns: t.cpu_ns + t.children_ns,
            share: ((t.cpu_ns + t.children_ns) as f64 / capacity).min(1.0),
        })
        .collect();
    // Grouped by cgroup: one group taking most of it is the one to act on.
    let mut by_group: BTreeMap<&str, u64> = BTreeMap::new();
    for t in takers {
        *by_group.entry(t.named.cgroup.as_str()).or_default() += t.cpu_ns + t.children_ns;
    }
    let group = by_group
        .iter()
        .max_by_key(|(_, ns)| **ns)
        .filter(|(g, ns)| !g.is_empty() && **g != "/" && **ns as f64 >= 0.6 * others_ns as f64)
        .map(|(g, _)| g.to_string());
    let top = &processes[0];
    // In words, those that took a visible part; the JSON has them all.
    let listed: Vec<String> = processes
        .iter()
        .filter(|p| p.share >= LISTED_MIN_SHARE || p.pid == processes[0].pid)
        .map(|p| {
            let cmd = p
                .command
                .as_ref()
                .filter(|c| c.as_str() != p.name)
                .map(|c| format!(": {}", shorten(&program_named(c), 60)))
                .unwrap_or_default();
            // Where it runs: its pod and container where known, else its cgroup.
            let cg = match (&p.container, &p.cgroup) {
                (Some(c), _) => format!(", {c}"),
                (None, Some(c)) if c != "/" => format!(", cgroup {c}"),
                _ => String::new(),
            };
            format!("{} (pid {}{cg}{cmd}) {:.0}%", p.name, p.pid, p.share * 100.0)
        })
        .collect();
    // The group named by its container (a pod's), where all of its takers share one.
    let group_container = group.as_deref().and_then(|g| {
        let mut of_group =
            takers.iter().filter(|t| t.named.cgroup == g).map(|t| &t.named.container);
        let first = of_group.next()?.as_ref()?;
        of_group.all(|c| c.as_ref() == Some(first)).then(|| first.clone())
    });
    let name = group_container.or_else(|| group.clone()).unwrap_or_else(|| top.name.clone());
    let keep = match &group {
        Some(g) => format!(
            "the cgroup {g}: cpu.idle=1 on it (cgroup v2) or a lower cpu.weight / cpu.shares"
        ),
        None if listed.len() == 1 => format!(
            "{}: run it at a lower weight (in a cgroup with cpu.idle=1, at nice 19, or SCHED_IDLE)",
            top.name
        ),
        None => format!(
            "{} and the others: run them at a lower weight (in a cgroup with cpu.idle=1, at nice 19, or SCHED_IDLE)",
            top.name
        ),
    };
    let (whose, fix) = if inp.not_a_jvm {
        (
            "its",
            format!(
                "keep them out of its way: {keep}; or give it CPUs of its own (a cpuset), or raise its latency-critical threads (a higher weight or nice value, SCHED_FIFO)"
            ),
        )
    } else {
        (
            "the JVM's",
            format!(
                "keep them out of the JVM's way: {keep}; or give the JVM CPUs of its own (a cpuset); else raise its threads while it reaches each safepoint (stallscope run --boost fifo:1)"
            ),
        )
    };
    Some(Instigator {
        did: format!(
            "other processes took {:.0}% of the {cpus} CPUs while {whose} threads waited for one: {}",
            share * 100.0,
            listed.join(", ")
        ),
        pid: Some(top.pid),
        command: top.command.clone(),
        user: top.user.clone(),
        cgroup: group.or_else(|| top.cgroup.clone()),
        container: top.container.clone(),
        processes,
        source: if counted == "bpf" {
            "every process's CPU time, counted by the kernel's scheduler switches (BPF, to the ns; ended children at their parent), from the stall's first look to its end".into()
        } else {
            "every process's CPU time (/proc/PID/stat, in 10 ms ticks; ended children at their parent) from the stall's first look to its end".into()
        },
        fix,
        ..blank(InstigatorKind::CpuNeighbours, name)
    })
}

/// A command line with its program named by its file name (`/usr/bin/rustc --edition…` →
/// `rustc --edition…`).
fn program_named(command: &str) -> String {
    match command.split_once(' ') {
        Some((prog, rest)) => format!("{} {rest}", prog.rsplit('/').next().unwrap_or(prog)),
        None => command.rsplit('/').next().unwrap_or(command).to_string(),
    }
}

/// `text` cut to `max` characters, with an ellipsis.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max).collect();
    s.push('…');
    s
}

/// Says of each instigator that set off more than one stall of the recording how many, how long
/// in all, and how often: "the thread dump asked for every 60 s by jstack costs 600 ms each".
pub fn count_repeats(stalls: &mut [crate::report::StallReport]) {
    let mut r = Repeats::default();
    r.add(stalls);
    r.annotate(stalls);
}

/// Who set off how many stalls of a recording, gathered as its stalls are diagnosed (`watch`
/// diagnoses each as it ends): per instigator, the stalls, their time in all, the first and the
/// last start. A thread of the JVM by its id (its name may be known in one stall and not
/// another); a process outside by its name (each jcmd or kill is a new process).
#[derive(Debug, Default)]
pub struct Repeats {
    by: HashMap<(InstigatorKind, String, Option<i32>), Repeat>,
}

#[derive(Debug, Clone, Copy)]
struct Repeat {
    n: u64,
    total_ns: u64,
    first_ns: u64,
    last_ns: u64,
}

impl Repeats {
    fn key(i: &Instigator) -> (InstigatorKind, String, Option<i32>) {
        match i.kind {
            InstigatorKind::JavaThread
            | InstigatorKind::Jvm
            | InstigatorKind::MemoryMapper
            | InstigatorKind::RemoteJmx => (i.kind, String::new(), i.tid),
            _ => (i.kind, i.name.clone(), None),
        }
    }

    /// Counts `stalls` (in order of time, after those added before).
    pub fn add(&mut self, stalls: &[crate::report::StallReport]) {
        for s in stalls {
            // Once per stall, whatever number of its findings it set off.
            let mut seen = Vec::new();
            for i in s.findings.iter().filter_map(|f| f.instigator.as_ref()) {
                let k = Self::key(i);
                if seen.contains(&k) {
                    continue;
                }
                let r = self.by.entry(k.clone()).or_insert(Repeat {
                    n: 0,
                    total_ns: 0,
                    first_ns: s.start_mono_ns,
                    last_ns: s.start_mono_ns,
                });
                r.n += 1;
                r.total_ns += s.duration_ns;
                r.first_ns = r.first_ns.min(s.start_mono_ns);
                r.last_ns = r.last_ns.max(s.start_mono_ns);
                seen.push(k);
            }
        }
    }

    /// Says in each finding of `stalls` whose instigator set off more than one stall of those
    /// added how many, their time in all, and how often.
    pub fn annotate(&self, stalls: &mut [crate::report::StallReport]) {
        for s in stalls.iter_mut() {
            for f in s.findings.iter_mut() {
                let Some(i) = f.instigator.as_mut() else { continue };
                let Some(r) = self.by.get(&Self::key(i)).filter(|r| r.n > 1) else { continue };
                let every = (r.last_ns - r.first_ns) / (r.n - 1);
                let line = format!(
                    " (the same set off {} stalls of this recording, {} in all, one every {} on average)",
                    r.n,
                    fmt_ns(r.total_ns),
                    fmt_ns(every)
                );
                i.did.push_str(&line);
            }
        }
    }
}

/// The system calls that start writeback and wait for it (x86_64): msync, fsync, fdatasync,
/// sync, syncfs, sync_file_range.
const FLUSH_CALLS: [i64; 6] = [26, 74, 75, 162, 306, 277];
/// The least a thread or process must have read or written during a stall to be named for it.
const WRITER_MIN_BYTES: u64 = 1 << 20;

/// Who wrote or flushed what the stall waited on: a thread of the JVM seen flushing (in msync,
/// fsync …: it started the writeback a store to a shared mapping then waits for), else the
/// thread or process that read or wrote the most storage during the stall (dirtying the pages
/// that were written back, or filling the page cache the kernel had to reclaim).
pub fn writer(inp: &WhoInputs, culprits: &[i32], cause: Cause) -> Option<Instigator> {
    let base = |name: String| blank(InstigatorKind::Writer, name);
    let mut flushing: HashMap<i32, (usize, String, i64)> = HashMap::new();
    for s in inp.samples.iter().filter(|s| !s.baseline && s.t >= inp.start_ns && s.t <= inp.end_ns)
    {
        for t in s.threads.iter().filter(|t| !culprits.contains(&t.tid)) {
            if let Syscall::In { nr, .. } = t.syscall
                && FLUSH_CALLS.contains(&nr)
            {
                let e = flushing.entry(t.tid).or_insert((0, t.comm.clone(), nr));
                e.0 += 1;
            }
        }
    }
    if cause == Cause::MappedWriteback
        && let Some((tid, (n, comm, nr))) =
            flushing.into_iter().max_by_key(|(tid, (n, _, _))| (*n, -*tid))
    {
        let name = inp.names.get(&tid).cloned().unwrap_or(comm);
        let call = procwatch::syscalls::name(nr).unwrap_or("a flush");
        return Some(Instigator {
            tid: Some(tid),
            did: format!(
                "thread \"{name}\" flushed ({call}, seen in {n} samples): it started the writeback the stores to the shared mapping waited for (MappedByteBuffer.force() is msync)"
            ),
            source: "the stall's samples of every thread (the system call it was in)".into(),
            fix: format!(
                "each flush by \"{name}\" makes the pages it writes back wait for the disk: flush less often or off the hot pages, or write with FileChannel.write and force() that instead"
            ),
            ..base(name)
        });
    }
    let takers = inp.lines.iter().find_map(|w| match w {
        Who::IoUse { takers, .. } => Some(takers),
        _ => None,
    })?;
    // One that did most of the storage I/O in the stall (two thirds of what every thread and
    // process listed did), and at least a megabyte of it: not one of many.
    let all: u64 = takers.iter().map(|t| t.read_bytes + t.write_bytes).sum();
    let t = takers.iter().max_by_key(|t| t.read_bytes + t.write_bytes)?;
    let bytes = t.read_bytes + t.write_bytes;
    if bytes < WRITER_MIN_BYTES || bytes * 3 < all * 2 {
        return None;
    }
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    let what = match (t.write_bytes * 10 >= bytes, t.read_bytes * 10 >= bytes) {
        (true, true) => format!("wrote {} and read {}", mb(t.write_bytes), mb(t.read_bytes)),
        (true, false) => format!("wrote {} (pages dirtied)", mb(t.write_bytes)),
        _ => format!("read {}", mb(t.read_bytes)),
    };
    let why = match cause {
        Cause::MemoryReclaim | Cause::MemcgHigh => {
            "filling the page cache the kernel then had to reclaim memory from"
        }
        Cause::VmThreadIo => "keeping busy the storage the VM thread waited on",
        _ => "dirtying the pages whose writeback the stores waited for",
    };
    let (name, who) = match t.tid {
        Some(tid) => {
            let n = inp.names.get(&tid).cloned().unwrap_or_else(|| t.comm.clone());
            (n.clone(), format!("thread \"{n}\" of the JVM"))
        }
        None => (t.comm.clone(), format!("{} (pid {})", t.comm, t.pid)),
    };
    let fix = match (t.tid, cause) {
        (Some(_), Cause::MemoryReclaim | Cause::MemcgHigh) => format!(
            "\"{name}\" streams file data through the JVM's memory cgroup: write it with O_DIRECT or drop what it wrote from the page cache (posix_fadvise DONTNEED, or FileChannel and no caching library), or give the cgroup headroom for it"
        ),
        (None, _) => format!(
            "{name} (pid {}) {what} during the stall: keep its I/O off the JVM's disk and memory cgroup (another disk, io.weight or io.max for its cgroup, a memory cgroup of its own)",
            t.pid
        ),
        _ => format!(
            "\"{name}\" {what} during the stall: write less there, or off the storage and memory the JVM needs"
        ),
    };
    Some(Instigator {
        pid: Some(t.pid),
        tid: t.tid,
        command: Some(t.named.cmdline.join(" ")).filter(|c| !c.is_empty()),
        user: t.named.user.clone(),
        cgroup: Some(t.named.cgroup.clone()).filter(|c| !c.is_empty()),
        container: t.named.container.clone(),
        did: format!("{who} {what} during the stall, {why}"),
        source: "every thread's and process's storage reads and writes (/proc/*/io) from the stall's first look to its end".into(),
        fix,
        ..base(name)
    })
}

/// A wait for mmap_lock at least this long, traced, is one another thread held it through.
const LOCK_WAIT_MIN_NS: u64 = 1_000_000;

/// Who held mmap_lock while others waited for it, from the mmap_lock tracepoints: for each wait
/// of at least [`LOCK_WAIT_MIN_NS`] overlapping the stall, the thread that last took the lock
/// (to read or to write) before the wait began; by the waiting time it explains.
fn lock_holders(inp: &WhoInputs) -> HashMap<i32, u64> {
    use recording::disk::TraceEvent::{MmapLockAcquired, MmapLockStart};
    let mut ev: Vec<&recording::disk::TraceEvent> = inp
        .trace
        .iter()
        .filter(|e| matches!(e, MmapLockStart { .. } | MmapLockAcquired { .. }))
        .collect();
    ev.sort_by_key(|e| e.t());
    let mut held: HashMap<i32, u64> = HashMap::new();
    for (i, e) in ev.iter().enumerate() {
        let MmapLockStart { t: began, tid: waiter, .. } = **e else { continue };
        let got = ev[i..].iter().find_map(|x| match x {
            MmapLockAcquired { t, tid, .. } if *tid == waiter => Some(*t),
            _ => None,
        });
        let until = got.unwrap_or(inp.end_ns);
        let waited = until.min(inp.end_ns).saturating_sub(began.max(inp.start_ns));
        if until.saturating_sub(began) < LOCK_WAIT_MIN_NS || waited == 0 {
            continue;
        }
        let holder = ev[..i].iter().rev().find_map(|x| match x {
            MmapLockAcquired { tid, success: true, .. } if *tid != waiter => Some(*tid),
            _ => None,
        });
        if let Some(h) = holder {
            *held.entry(h).or_default() += waited;
        }
    }
    held
}

/// The thread of the JVM that mapped, unmapped or protected memory during the stall: the one
/// that held mmap_lock while others waited (traced), or one seen inside those system calls and
/// not waiting for the lock itself.
pub fn memory_mapper(inp: &WhoInputs, culprits: &[i32], cause: Cause) -> Option<Instigator> {
    let mut seen: HashMap<i32, (usize, String)> = HashMap::new();
    let mut comms: HashMap<i32, String> = HashMap::new();
    for s in inp.samples.iter().filter(|s| !s.baseline && s.t >= inp.start_ns && s.t <= inp.end_ns)
    {
        for t in &s.threads {
            comms.entry(t.tid).or_insert_with(|| t.comm.clone());
            let in_call = matches!(t.syscall, Syscall::In { nr, .. } if MEMORY_CALLS.contains(&nr));
            // A thread waiting for the lock is a victim, not the one mapping.
            let waiting =
                crate::wait::seen(t) == crate::wait::Seen::Waiting(crate::wait::Wait::MmapLock);
            if in_call && !waiting {
                seen.entry(t.tid).or_insert((0, t.comm.clone())).0 += 1;
            }
        }
    }
    let held = lock_holders(inp);
    let (tid, hits, held_ns) = seen
        .keys()
        .chain(held.keys())
        .filter(|t| !culprits.contains(t))
        .map(|t| (*t, seen.get(t).map_or(0, |x| x.0), held.get(t).copied().unwrap_or(0)))
        .max_by_key(|(t, n, h)| (*h, *n, -*t))?;
    if held_ns == 0 && hits < MAPPER_MIN {
        return None;
    }
    let comm = comms.get(&tid).cloned().unwrap_or_default();
    let name = inp.names.get(&tid).cloned().filter(|n| !n.is_empty()).unwrap_or(comm);
    let name = if name.is_empty() { format!("tid {tid}") } else { name };
    let what = if cause == Cause::TlbShootdown {
        "its unmaps and protection changes make the TLB shootdowns every other thread pays for"
    } else {
        "the others waited for mmap_lock behind it"
    };
    let did = if held_ns > 0 {
        format!(
            "thread \"{name}\" held mmap_lock, mapping or unmapping memory, while other threads waited {} for it (mmap_lock tracepoints{})",
            fmt_ns(held_ns),
            if hits > 0 {
                format!("; seen in mmap, munmap or mprotect in {hits} samples")
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "thread \"{name}\" mapped, unmapped or protected memory through the stall (seen in mmap, munmap or mprotect in {hits} samples): {what}"
        )
    };
    Some(Instigator {
        did,
        tid: Some(tid),
        source: if held_ns > 0 {
            "the mmap_lock tracepoints (who took the lock last before each wait began) and the stall's samples".into()
        } else {
            "the stall's samples of every thread (the system call it was in)".into()
        },
        fix: format!(
            "stop \"{name}\" from mapping, unmapping and mprotecting memory beside latency-critical threads: reuse its mappings and buffers (a pool, pread into a buffer), keep files mapped once, fix the heap size (-Xms = -Xmx)"
        ),
        ..blank(InstigatorKind::MemoryMapper, name.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Confidence;

    fn sp(op: &str, start: u64, total: u64) -> SafepointView {
        SafepointView {
            op: op.into(),
            ttsp_ns: 0,
            at_safepoint_ns: total,
            total_ns: total,
            start_mono_ns: start,
            threads_total: None,
            threads_running: None,
            timeout_culprits: vec![],
            unfinished: false,
        }
    }

    fn inputs<'a>(lines: Vec<&'a Who>, names: &'a HashMap<i32, String>) -> WhoInputs<'a> {
        WhoInputs {
            stall: 1,
            lines,
            has_who: true,
            tracepoints: true,
            names,
            start_ns: 1_000,
            end_ns: 600_000_000,
            samples: &[],
            trace: &[],
            not_a_jvm: false,
            kwaits: None,
        }
    }

    fn finding(cause: Cause) -> Finding {
        Finding {
            cause,
            title: cause.title().into(),
            confidence: Confidence::High,
            share: 1.0,
            culprits: vec![],
            evidence: vec![],
            fix: cause.fix().into(),
            doc: cause.doc(),
            instigator: None,
        }
    }

    fn op(t: u64, class: &str, tid: i32, comm: &str, frames: &[&str]) -> Who {
        Who::VmOperation {
            t,
            stall: 1,
            op: class.into(),
            caller: Some(WhoThread {
                tid,
                comm: comm.into(),
                class: "JavaThread".into(),
                vm_thread: false,
                frames: frames.iter().map(|f| f.to_string()).collect(),
                native: false,
            }),
        }
    }

    /// `op`, asked for by a thread whose top frame is a `native` method.
    fn native_op(t: u64, class: &str, tid: i32, comm: &str, frames: &[&str]) -> Who {
        let mut w = op(t, class, tid, comm, frames);
        if let Who::VmOperation { caller: Some(c), .. } = &mut w {
            c.native = true;
        }
        w
    }

    #[test]
    fn a_collection_asked_for_from_jni_code_is_the_gc_locker_and_its_look_alikes_are_not() {
        let names = HashMap::from([(21, "deflater".to_string())]);
        let deflate = [
            "java.util.zip.Deflater.deflateBytesBytes",
            "java.util.zip.Deflater.deflate",
            "com.acme.Archiver.pack",
        ];
        let one = |w: &Who, op: &str| {
            let mut f = vec![finding(Cause::LongVmOperation)];
            assign(&mut f, &inputs(vec![w], &names), Some(&sp(op, 1_000_000, 23_000_000)));
            (f[0].instigator.clone().unwrap(), f[0].fix.clone())
        };
        // The last thread out of a JNI critical region runs the collection held back (JDK 11-21,
        // Parallel and Serial name it as an explicit collection).
        for op_name in ["ParallelGCSystemGC", "GenCollectFull"] {
            let (i, fix) = one(&native_op(2_000_000, op_name, 21, "deflater", &deflate), op_name);
            assert_eq!((i.kind, i.tid), (InstigatorKind::JavaThread, Some(21)));
            assert!(
                i.did.starts_with("thread \"deflater\" left a JNI critical region in the native method java.util.zip.Deflater.deflateBytesBytes (called in com.acme.Archiver.pack)"),
                "{}",
                i.did
            );
            assert!(
                fix.starts_with("the GC locker: while \"deflater\"")
                    && fix.contains("23.0 ms here")
                    && fix.contains("Get<Type>ArrayRegion"),
                "{fix}"
            );
        }
        // The same thread, not in native code: an explicit collection, not the locker.
        let (i, _) = one(
            &op(2_000_000, "ParallelGCSystemGC", 21, "deflater", &deflate),
            "ParallelGCSystemGC",
        );
        assert!(!i.did.contains("critical"), "{}", i.did);
        // System.gc() is native itself (Runtime.gc): still an explicit collection.
        let gc = ["java.lang.Runtime.gc", "java.lang.System.gc", "com.acme.Job.run"];
        let (i, _) = one(
            &native_op(2_000_000, "ParallelGCSystemGC", 21, "deflater", &gc),
            "ParallelGCSystemGC",
        );
        assert!(i.did.contains("System.gc()"), "{}", i.did);
        // An allocation from JNI code asks for an allocation's collection.
        let (i, _) = one(
            &native_op(2_000_000, "ParallelGCFailedAllocation", 21, "deflater", &deflate),
            "ParallelGCFailedAllocation",
        );
        assert!(i.did.contains("allocated"), "{}", i.did);
        // G1's full collection from native code is not the locker's (G1 names that one an
        // allocation's); nor is GC.run asked for over JMX, through the beans' native code.
        let (i, _) =
            one(&native_op(2_000_000, "G1CollectFull", 21, "deflater", &deflate), "G1CollectFull");
        assert!(!i.did.contains("critical"), "{}", i.did);
        let jmx = [
            "sun.management.DiagnosticCommandImpl.executeDiagnosticCommand",
            "sun.management.DiagnosticCommandImpl.invoke",
            "com.acme.Ops.gc",
        ];
        let (i, _) = one(
            &native_op(2_000_000, "ParallelGCSystemGC", 21, "deflater", &jmx),
            "ParallelGCSystemGC",
        );
        assert!(!i.did.contains("critical"), "{}", i.did);
        // A thread dump asked for from native code is a thread dump.
        let (i, _) =
            one(&native_op(2_000_000, "ThreadDump", 21, "deflater", &deflate), "ThreadDump");
        assert!(i.did.contains("thread dump"), "{}", i.did);
    }

    #[test]
    fn a_thread_dump_asked_for_in_the_jvm_names_the_thread_and_its_code() {
        let names = HashMap::from([(9, "metrics-exporter".to_string())]);
        let l = op(
            2_000_000,
            "VM_ThreadDump",
            9,
            "metrics-exporte",
            &[
                "sun.management.ThreadImpl.dumpThreads0",
                "com.acme.Exporter.scrape",
                "java.lang.Thread.run",
            ],
        );
        let inp = inputs(vec![&l], &names);
        let mut f = vec![finding(Cause::LongVmOperation)];
        assign(&mut f, &inp, Some(&sp("ThreadDump", 1_000_000, 580_000_000)));
        let i = f[0].instigator.as_ref().unwrap();
        assert_eq!(i.kind, InstigatorKind::JavaThread);
        assert_eq!(i.name, "metrics-exporter");
        assert_eq!(i.tid, Some(9));
        assert!(i.did.contains("in com.acme.Exporter.scrape"), "{}", i.did);
        assert!(
            f[0].fix.contains("580 ms") && f[0].fix.contains("dumpAllThreads(false, false)"),
            "{}",
            f[0].fix
        );
    }

    #[test]
    fn an_operation_through_the_attach_listener_names_the_tool_outside() {
        let names = HashMap::new();
        let l = op(2_000_000, "VM_HeapDumper", 50, "Attach Listener", &[]);
        let c = Who::AttachClient {
            t: 3_000_000,
            stall: 1,
            client: WhoProcess {
                pid: 4242,
                comm: "jcmd".into(),
                cmdline: vec!["jcmd".into(), "77".into(), "GC.heap_dump".into(), "/tmp/h".into()],
                user: Some("ops".into()),
                ancestors: vec![(812, "cron".into()), (1, "systemd".into())],
                ..Default::default()
            },
            asked: "GC.heap_dump /tmp/h".into(),
        };
        let inp = inputs(vec![&l, &c], &names);
        let mut f = vec![finding(Cause::LongVmOperation)];
        assign(&mut f, &inp, Some(&sp("HeapDumper", 1_000_000, 3_300_000_000)));
        let i = f[0].instigator.as_ref().unwrap();
        assert_eq!(
            (i.kind, i.pid, i.name.as_str()),
            (InstigatorKind::AttachClient, Some(4242), "jcmd")
        );
        assert_eq!(i.user.as_deref(), Some("ops"));
        assert!(
            i.did.contains("`GC.heap_dump /tmp/h`") && i.did.contains("cron (pid 812)"),
            "{}",
            i.did
        );
        assert!(f[0].fix.contains("3.30 s") && f[0].fix.contains("cron (pid 812)"), "{}", f[0].fix);
    }

    #[test]
    fn a_thread_dump_the_signal_dispatcher_asked_for_is_laid_at_the_sigquit_sender() {
        let names = HashMap::new();
        let l = op(2_000_000, "VM_PrintThreads", 12, "Signal Dispatch", &[]);
        let quit = Who::Signal {
            t: 1_000,
            stall: 1,
            sig: 3,
            target: 77,
            sender: WhoProcess { pid: 55, comm: "kill".into(), ..Default::default() },
        };
        let mut f = vec![finding(Cause::NoSafepointPoll)];
        assign(
            &mut f,
            &inputs(vec![&l, &quit], &names),
            Some(&sp("PrintThreads", 1_000_000, 2_000_000_000)),
        );
        let i = f[0].instigator.as_ref().unwrap();
        assert_eq!((i.kind, i.pid, i.name.as_str()), (InstigatorKind::Signal, Some(55), "kill"));
        assert!(i.did.starts_with("SIGQUIT from kill (pid 55)"), "{}", i.did);
        assert_eq!(f[0].fix, Cause::NoSafepointPoll.fix(), "the loop's fix stays the finding's");
        // Without the sender traced: the JVM's dispatcher, and why it is not known.
        let mut f = vec![finding(Cause::NoSafepointPoll)];
        let untraced = WhoInputs { tracepoints: false, ..inputs(vec![&l], &names) };
        assign(&mut f, &untraced, Some(&sp("PrintThreads", 1_000_000, 2_000_000_000)));
        let i = f[0].instigator.as_ref().unwrap();
        assert_eq!(i.kind, InstigatorKind::Jvm);
        assert!(i.did.contains("signal tracepoint (root)"), "{}", i.did);
    }

    #[test]
    fn an_operation_of_another_safepoint_or_none_seen_names_nobody_and_says_why() {
        let names = HashMap::new();
        let l = op(2_000_000, "VM_ThreadDump", 9, "x", &[]);
        let inp = inputs(vec![&l], &names);
        let mut f = vec![finding(Cause::LongVmOperation)];
        assign(&mut f, &inp, Some(&sp("G1CollectFull", 1_000_000, 100_000_000)));
        assert!(f[0].instigator.is_none());
        assert!(f[0].evidence[0].contains("not known"), "{:?}", f[0].evidence);
        let old = WhoInputs { has_who: false, ..inputs(vec![], &names) };
        let mut f = vec![finding(Cause::LongVmOperation)];
        assign(&mut f, &old, Some(&sp("G1CollectFull", 1_000_000, 100_000_000)));
        assert!(f[0].evidence[0].contains("no who.jsonl"), "{:?}", f[0].evidence);
    }

    #[test]
    fn a_stop_is_laid_at_the_freezer_the_tracer_or_the_signals_sender() {
        let names = HashMap::new();
        let sender = WhoProcess {
            pid: 31,
            comm: "bash".into(),
            cmdline: vec!["bash".into()],
            user: Some("ops".into()),
            ..Default::default()
        };
        let sig = Who::Signal { t: 500, stall: 1, sig: 19, target: 77, sender: sender.clone() };
        let stopped = Who::Stopped { t: 2_000, stall: 1, state: 'T', tracer: None, freezer: None };
        let inp = inputs(vec![&sig, &stopped], &names);
        let i = stopper(&inp).unwrap();
        assert_eq!((i.kind, i.pid), (InstigatorKind::Signal, Some(31)));
        assert!(
            i.did.starts_with("SIGSTOP was sent to the JVM by bash (pid 31, user ops)"),
            "{}",
            i.did
        );
        let frozen = Who::Stopped {
            t: 2_000,
            stall: 1,
            state: 'S',
            tracer: None,
            freezer: Some(recording::Freezer {
                version: "v2".into(),
                cgroup: "/pods/app".into(),
                state: "1".into(),
                container: None,
            }),
        };
        let wrote = Who::FreezeWritten {
            t: 100,
            stall: 1,
            cgroup: "/pods/app".into(),
            frozen: true,
            writer: sender.clone(),
        };
        let i = stopper(&inputs(vec![&frozen, &wrote], &names)).unwrap();
        assert_eq!(
            (i.kind, i.name.as_str(), i.pid),
            (InstigatorKind::Freezer, "/pods/app", Some(31))
        );
        assert!(i.did.contains("frozen by bash"), "{}", i.did);
        let traced = Who::Stopped {
            t: 2_000,
            stall: 1,
            state: 't',
            tracer: Some(WhoProcess { pid: 40, comm: "gdb".into(), ..Default::default() }),
            freezer: None,
        };
        assert_eq!(stopper(&inputs(vec![&traced], &names)).unwrap().kind, InstigatorKind::Tracer);
        let untraced = WhoInputs { tracepoints: false, ..inputs(vec![&stopped], &names) };
        assert!(stopper(&untraced).unwrap_err().unwrap().contains("run stallscope as root"));
    }

    #[test]
    fn who_wrote_or_flushed_is_named_only_when_one_did_most_of_it() {
        let names = HashMap::from([(30, "journal-flusher".to_string())]);
        let flushing = recording::disk::TaskSample {
            tid: 30,
            comm: "journal-flushe".into(),
            state: 'D',
            syscall: Syscall::In { nr: 26, arg0: 0, sp: 0, pc: 0 },
            ..Default::default()
        };
        let sample = Sample {
            t: 5_000_000,
            stall: 1,
            full: true,
            baseline: false,
            threads: vec![flushing],
            gone: vec![],
        };
        let samples = [&sample];
        let inp = WhoInputs { samples: &samples, ..inputs(vec![], &names) };
        let w = writer(&inp, &[], Cause::MappedWriteback).unwrap();
        assert_eq!(
            (w.kind, w.name.as_str(), w.tid),
            (InstigatorKind::Writer, "journal-flusher", Some(30))
        );
        assert!(w.did.contains("flushed (msync"), "{}", w.did);
        let io = |tid: Option<i32>, comm: &str, mb: u64| recording::IoTaker {
            pid: 7,
            tid,
            comm: comm.into(),
            read_bytes: 0,
            write_bytes: mb << 20,
            named: recording::Named::default(),
        };
        let one = Who::IoUse {
            stall: 1,
            from: 0,
            to: 1,
            takers: vec![io(Some(31), "file-writer", 30), io(None, "rsync", 2)],
        };
        let w = writer(&inputs(vec![&one], &names), &[], Cause::MemoryReclaim).unwrap();
        assert_eq!((w.name.as_str(), w.tid), ("file-writer", Some(31)));
        assert!(w.did.contains("31.5 MB (pages dirtied)"), "{}", w.did);
        let many = Who::IoUse {
            stall: 1,
            from: 0,
            to: 1,
            takers: vec![io(None, "a", 10), io(None, "b", 9)],
        };
        assert!(
            writer(&inputs(vec![&many], &names), &[], Cause::MemoryReclaim).is_none(),
            "none did most"
        );
    }

    #[test]
    fn cpus_taken_by_others_name_the_processes_and_their_cgroup_only_when_they_took_enough() {
        let names = HashMap::new();
        let taker = |pid: i32, comm: &str, ms: u64| recording::CpuTaker {
            pid,
            comm: comm.into(),
            cpu_ns: ms * 1_000_000,
            children_ns: 0,
            named: recording::Named {
                cgroup: "/build".into(),
                cmdline: vec![comm.into()],
                ..Default::default()
            },
        };
        let busy = Who::CpuUse {
            stall: 1,
            from: 0,
            to: 1_000_000_000,
            cpus: 2,
            target_ns: 100_000_000,
            others_ns: 1_500_000_000,
            takers: vec![taker(10, "rustc", 900), taker(11, "cc1", 600)],
            counted: "bpf".into(),
        };
        let i = cpu_neighbours(&inputs(vec![&busy], &names)).unwrap();
        assert_eq!((i.kind, i.name.as_str()), (InstigatorKind::CpuNeighbours, "/build"));
        assert_eq!(i.processes[0].name, "rustc");
        assert!((i.processes[0].share - 0.45).abs() < 1e-9);
        assert!(i.did.contains("took 75% of the 2 CPUs"), "{}", i.did);
        assert!(i.source.contains("scheduler switches (BPF"), "{}", i.source);
        let idle = Who::CpuUse {
            stall: 1,
            from: 0,
            to: 1_000_000_000,
            cpus: 2,
            target_ns: 0,
            others_ns: 100_000_000,
            takers: vec![taker(10, "rustc", 100)],
            counted: String::new(),
        };
        assert!(cpu_neighbours(&inputs(vec![&idle], &names)).is_none());
    }

    #[test]
    fn cpus_taken_by_a_pod_name_its_namespace_pod_and_container_not_its_cgroup_path() {
        let names = HashMap::new();
        let cgroup = "/kubepods/burstable/pod7a1e0c2d-4b5f-4c3a-9d8e-1f2a3b4c5d6e/58f8a1b2c3d4";
        let pod = "pod batch/crunch-5f6d7c8b9-q4w2e, container crunch (containerd 58f8a1b2c3d4)";
        let taker = |pid: i32, container: Option<&str>| recording::CpuTaker {
            pid,
            comm: "crunch".into(),
            cpu_ns: 700_000_000,
            children_ns: 0,
            named: recording::Named {
                cgroup: cgroup.into(),
                cmdline: vec!["crunch".into()],
                container: container.map(Into::into),
                ..Default::default()
            },
        };
        let took = |takers| Who::CpuUse {
            stall: 1,
            from: 0,
            to: 1_000_000_000,
            cpus: 2,
            target_ns: 100_000_000,
            others_ns: 1_400_000_000,
            takers,
            counted: "bpf".into(),
        };
        let both = took(vec![taker(20, Some(pod)), taker(21, Some(pod))]);
        let i = cpu_neighbours(&inputs(vec![&both], &names)).unwrap();
        assert_eq!(i.name, pod, "the label");
        assert!(i.did.contains(&format!("crunch (pid 20, {pod}) 35%")), "{}", i.did);
        assert!(!i.did.contains("kubepods"), "{}", i.did);
        assert_eq!(i.cgroup.as_deref(), Some(cgroup), "the cgroup to act on is kept");
        assert!(i.fix.contains(cgroup), "{}", i.fix);
        // Not named by a bundle for every process of the group: the group is named by its path.
        let mixed = took(vec![taker(20, Some(pod)), taker(21, None)]);
        assert_eq!(cpu_neighbours(&inputs(vec![&mixed], &names)).unwrap().name, cgroup);
    }
}
