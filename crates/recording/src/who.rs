//! What the recorder saw of who set a stall off (`who.jsonl`): the VM operation the VM thread
//! ran and the thread that asked for it, the processes talking to the JVM's attach listener,
//! how the process was stopped and by whom, the signals sent to it, the cgroup freezes written,
//! and the processes that took the CPUs while it stalled. The doctor turns these into each
//! finding's instigator.
//!
//! Invariant: these types are the recording's own (the on-disk format), converted from
//! `procwatch`'s readers where the recorder writes them (`recorder::to_disk`); a field added later is optional on
//! reading, so an older recording still reads.

use serde::{Deserialize, Serialize};

/// A process, named as the report names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoProcess {
    pub pid: i32,
    pub comm: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmdline: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<i32>,
    /// Its parents, nearest first: (pid, comm).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<(i32, String)>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cgroup: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

impl WhoProcess {
    /// `jcmd (pid 4242, user root)`.
    pub fn label(&self) -> String {
        procwatch::process::label(&self.comm, self.pid, self.user.as_deref())
    }

    /// Its command line as one line (arguments with spaces quoted).
    pub fn command(&self) -> String {
        procwatch::process::command_line(&self.cmdline)
    }
}

/// The thread that asked the VM thread for an operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoThread {
    /// Its id on the host.
    pub tid: i32,
    /// Its name as the kernel has it (`comm`: the first 15 bytes of a Java thread's name).
    #[serde(default)]
    pub comm: String,
    /// Its class in the VM (`JavaThread`, `VMThread`, `G1ConcurrentMarkThread`…).
    #[serde(default)]
    pub class: String,
    /// It is the VM thread itself.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vm_thread: bool,
    /// Its Java frames, top first (`Class.method`), read from its last Java frame.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<String>,
    /// Its top Java frame is a method declared `native` (it was in JNI code).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub native: bool,
}

/// A cgroup freezer holding the process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Freezer {
    /// `v1` (the freezer controller's `freezer.state`) or `v2` (`cgroup.freeze`).
    pub version: String,
    /// The cgroup that is frozen (the process's own or an ancestor), as `/proc/PID/cgroup`
    /// names paths.
    pub cgroup: String,
    /// What it says (`FROZEN`, `FREEZING`, `1`).
    pub state: String,
    /// The container the cgroup names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// What names a process in a list of those that took the CPUs or did I/O: its cgroup, user,
/// command line and container (empty where it could not be read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Named {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cgroup: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cmdline: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// A process that ran while the target stalled, and how much.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTaker {
    pub pid: i32,
    pub comm: String,
    /// CPU time it used in the window (user and system), and that of its children that ended
    /// in it (a build's short compiler processes are counted at their parent).
    pub cpu_ns: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub children_ns: u64,
    #[serde(flatten)]
    pub named: Named,
}

/// A thread of the target, or another process, that read from or wrote to storage while the
/// target stalled (bytes dirtied count as written when dirtied, through a mapping too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoTaker {
    pub pid: i32,
    /// Set for a thread of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i32>,
    pub comm: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    #[serde(flatten)]
    pub named: Named,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One line of `who.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "seen", rename_all = "kebab-case")]
pub enum Who {
    /// The VM thread ran operation `op` (its class, `VM_HeapDumper`), asked for by `caller`,
    /// first seen at `t` (read from the JVM's memory: `VMThread::_cur_vm_operation`).
    VmOperation {
        t: u64,
        stall: u32,
        op: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<WhoThread>,
    },
    /// The JVM's safepoint state changed to `state` (`synchronizing`: being reached;
    /// `synchronized`: every thread stopped; `not-synchronized`), seen at `t`
    /// (`SafepointSynchronize::_state`, read from the JVM's memory every 10 ms of a stall).
    Safepoint { t: u64, stall: u32, state: String },
    /// Whether the JVM's GC locker held a collection back (a thread in a JNI critical region
    /// kept it from running), seen at `t` and written when it changed, not at a stall's first
    /// look when it is not set (`GCLocker::_needs_gc`, JDK 8 to 21;
    /// `GCLocker::_is_gc_request_pending`, JDK 22 on; read from the JVM's memory with the
    /// safepoint state).
    GcLocker { t: u64, stall: u32, held_back: bool },
    /// A process connected to the JVM's attach listener at `t`, and what it asked for in its own
    /// words (from its command line).
    AttachClient { t: u64, stall: u32, client: WhoProcess, asked: String },
    /// The process was seen stopped at `t`: its state letter, its tracer (`TracerPid`), the
    /// cgroup freezer holding it.
    Stopped {
        t: u64,
        stall: u32,
        state: char,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tracer: Option<WhoProcess>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        freezer: Option<Freezer>,
    },
    /// The process, seen stopped or frozen before, was seen running again at `t`.
    Resumed { t: u64, stall: u32 },
    /// The kernel generated signal `sig` for thread `target` of the process at `t`, sent by
    /// `sender` (the `signal:signal_generate` tracepoint; root only). `stall` is the stall it
    /// was read for.
    Signal { t: u64, stall: u32, sig: i32, target: i32, sender: WhoProcess },
    /// A cgroup v2 freeze (or thaw) was written at `t` by `writer` (the `cgroup:cgroup_freeze`
    /// tracepoint; root only).
    FreezeWritten { t: u64, stall: u32, cgroup: String, frozen: bool, writer: WhoProcess },
    /// Who read from and wrote to storage between `from` and `to` while the stall lasted, the
    /// most first: the target's own threads and other processes (`/proc/*/io`; another user's
    /// only as root).
    IoUse { stall: u32, from: u64, to: u64, takers: Vec<IoTaker> },
    /// Why something was not looked for (the JVM's memory unreadable, a stripped `libjvm.so`).
    Note { t: u64, stall: u32, note: String },
    /// The processes that used a CPU between `from` and `to` while the stall lasted, the most
    /// first (the target itself and stallscope left out), on a machine of `cpus` CPUs; the
    /// target used `target_ns` and every other process `others_ns` in all. `counted`: how,
    /// `bpf` (the scheduler's switches, to the ns) or `proc` (every process's `/proc/PID/stat`
    /// at both ends, in clock ticks; a recording without the field counted so).
    CpuUse {
        stall: u32,
        from: u64,
        to: u64,
        cpus: usize,
        target_ns: u64,
        others_ns: u64,
        takers: Vec<CpuTaker>,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        counted: String,
    },
}

impl Who {
    /// The stall it was recorded for.
    pub fn stall(&self) -> u32 {
        match self {
            Who::VmOperation { stall, .. }
            | Who::AttachClient { stall, .. }
            | Who::Stopped { stall, .. }
            | Who::Signal { stall, .. }
            | Who::FreezeWritten { stall, .. }
            | Who::Note { stall, .. }
            | Who::Resumed { stall, .. }
            | Who::Safepoint { stall, .. }
            | Who::GcLocker { stall, .. }
            | Who::IoUse { stall, .. }
            | Who::CpuUse { stall, .. } => *stall,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_older_lines_without_new_fields_still_read() {
        let lines = [
            Who::VmOperation {
                t: 5,
                stall: 1,
                op: "VM_HeapDumper".into(),
                caller: Some(WhoThread {
                    tid: 42,
                    comm: "Attach Listener".into(),
                    class: "JavaThread".into(),
                    vm_thread: false,
                    frames: vec![],
                    native: false,
                }),
            },
            Who::AttachClient {
                t: 6,
                stall: 1,
                client: WhoProcess { pid: 7, comm: "jcmd".into(), ..Default::default() },
                asked: "GC.heap_dump /tmp/h".into(),
            },
            Who::Stopped { t: 7, stall: 2, state: 'T', tracer: None, freezer: None },
        ];
        for l in lines {
            let s = serde_json::to_string(&l).unwrap();
            assert_eq!(serde_json::from_str::<Who>(&s).unwrap(), l, "{s}");
        }
        let old: Who = serde_json::from_str(
            r#"{"seen":"vm-operation","t":1,"stall":1,"op":"VM_ThreadDump","caller":{"tid":9}}"#,
        )
        .unwrap();
        assert!(matches!(old, Who::VmOperation { caller: Some(WhoThread { tid: 9, .. }), .. }));
    }
}
