//! Who asked for the safepoint's VM operation: a Java thread (its code), the JVM itself, a tool
//! through the attach listener or a `SIGQUIT`, a remote JMX client; and the GC locker's holder.

use super::*;

/// Slack when placing a VM operation seen at `t` in a safepoint.
pub(super) const OP_SLACK_NS: u64 = 5_000_000;

/// The operation's name as the logs give it, from its class (`VM_HeapDumper` → `HeapDumper`).
pub(super) fn op_name(class: &str) -> &str {
    class.strip_prefix("VM_").unwrap_or(class)
}

/// Whether a VM operation's class is the safepoint's operation as the log names it.
pub(super) fn same_op(class: &str, logged: &str) -> bool {
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
pub(super) fn known_op_name(op: &str) -> bool {
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
pub(super) const GC_LOCKER: &str = "the GC locker: ";

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
pub(super) fn from_caller(
    inp: &WhoInputs,
    op: &str,
    c: &WhoThread,
    sp: &SafepointView,
) -> Instigator {
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
pub(super) fn locker_waiters(inp: &WhoInputs, holder: i32, name: &str) -> String {
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
pub(super) const LOCKER_WAIT_MIN_NS: u64 = 10_000_000;
/// How far from the stall the holder may have woken them: JDK 17's wakes them after the
/// collection it ran, as it leaves the operation.
pub(super) const LOCKER_WOKE_NEAR_NS: u64 = 100_000_000;

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
pub(super) fn from_sigquit(
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
pub(super) fn from_attach_client(
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
