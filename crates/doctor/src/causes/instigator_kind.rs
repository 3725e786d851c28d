//! The kinds of instigator (who set a stall off), which a cause's [`super::Spec`] names.

use serde::{Deserialize, Serialize};

/// What kind of one set a stall off (`docs/causes/*.md` say how each is found).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstigatorKind {
    /// A thread of the application asked the JVM for the VM operation (a thread dump, a GC).
    JavaThread,
    /// The JVM itself: its VM thread, a GC or compiler thread asked for the operation.
    Jvm,
    /// A process outside talking to the JVM's attach listener (`jcmd`, `jmap`, a profiler).
    AttachClient,
    /// A remote JMX client, through an RMI connection thread.
    RemoteJmx,
    /// A process that sent the JVM a signal that stopped it.
    Signal,
    /// A debugger or other tracer attached with ptrace.
    Tracer,
    /// A cgroup freezer (a paused container), and who froze it when known.
    Freezer,
    /// Other processes that took the CPUs while the JVM's threads waited for one.
    CpuNeighbours,
    /// A thread of the JVM that mapped, unmapped or protected memory, holding `mmap_lock` or
    /// making the TLB shootdowns.
    MemoryMapper,
    /// A thread of the JVM, or another process, that wrote (dirtied pages) or read storage, or
    /// started the writeback others waited for (a flush).
    Writer,
}

impl InstigatorKind {
    pub fn id(self) -> &'static str {
        match self {
            InstigatorKind::JavaThread => "java-thread",
            InstigatorKind::Jvm => "jvm",
            InstigatorKind::AttachClient => "attach-client",
            InstigatorKind::RemoteJmx => "remote-jmx",
            InstigatorKind::Signal => "signal",
            InstigatorKind::Tracer => "tracer",
            InstigatorKind::Freezer => "freezer",
            InstigatorKind::CpuNeighbours => "cpu-neighbours",
            InstigatorKind::MemoryMapper => "memory-mapper",
            InstigatorKind::Writer => "writer",
        }
    }
}
