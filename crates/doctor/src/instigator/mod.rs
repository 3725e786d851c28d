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

use crate::causes::{Cause, Search, Writer};
use crate::classify::NEIGHBOURS_MIN_SHARE;
use crate::report::{CpuShare, Finding, Instigator, InstigatorKind, SafepointView};
use recording::disk::Syscall;
use recording::units::fmt_ns;
use recording::{Sample, Who, WhoProcess, WhoThread};
use std::collections::{BTreeMap, HashMap};

mod cpu;
mod mapper;
mod repeats;
mod requester;
mod stopper;
mod writer;

pub use cpu::*;
pub use mapper::*;
pub use repeats::*;
pub use requester::*;
pub use stopper::*;
pub use writer::*;

/// Processes listed of those that took the CPUs.
const MAX_PROCESSES: usize = 5;
/// Those that took less than this share of the CPUs are left out of the words.
const LISTED_MIN_SHARE: f64 = 0.02;

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
            Search::Writer(w) => writer(inp, &culprits, w).or_else(fallback).ok_or(None),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How a cause's writer is looked for.
    fn search_of(c: Cause) -> Writer {
        match c.spec().instigator {
            Search::Writer(w) => w,
            other => panic!("{c:?} looks for {other:?}, not a writer"),
        }
    }
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
        let w = writer(&inp, &[], search_of(Cause::MappedWriteback)).unwrap();
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
        let w = writer(&inputs(vec![&one], &names), &[], search_of(Cause::MemoryReclaim)).unwrap();
        assert_eq!((w.name.as_str(), w.tid), ("file-writer", Some(31)));
        assert!(w.did.contains("31.5 MB (pages dirtied)"), "{}", w.did);
        let many = Who::IoUse {
            stall: 1,
            from: 0,
            to: 1,
            takers: vec![io(None, "a", 10), io(None, "b", 9)],
        };
        assert!(
            writer(&inputs(vec![&many], &names), &[], search_of(Cause::MemoryReclaim)).is_none(),
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
