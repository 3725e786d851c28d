//! The stall causes stallscope tells apart (see `docs/causes/`): each one's name, its
//! fix, and its documentation page, in one place.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    NoSafepointPoll,
    MajorFault,
    SwapIn,
    MmapLock,
    CpuStarvation,
    CgroupThrottling,
    Frozen,
    MachinePause,
    LongVmOperation,
    VmThreadIo,
    MappedWriteback,
    MemoryReclaim,
    MemcgHigh,
    TlbShootdown,
    BlockedIo,
    Unknown,
}

impl Cause {
    pub const ALL: [Cause; 16] = [
        Cause::NoSafepointPoll,
        Cause::MajorFault,
        Cause::SwapIn,
        Cause::MmapLock,
        Cause::CpuStarvation,
        Cause::CgroupThrottling,
        Cause::Frozen,
        Cause::MachinePause,
        Cause::LongVmOperation,
        Cause::VmThreadIo,
        Cause::MappedWriteback,
        Cause::MemoryReclaim,
        Cause::MemcgHigh,
        Cause::TlbShootdown,
        Cause::BlockedIo,
        Cause::Unknown,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Cause::NoSafepointPoll => "no-safepoint-poll",
            Cause::MajorFault => "major-fault",
            Cause::SwapIn => "swap-in",
            Cause::MmapLock => "mmap-lock",
            Cause::CpuStarvation => "cpu-starvation",
            Cause::CgroupThrottling => "cgroup-throttling",
            Cause::Frozen => "frozen",
            Cause::MachinePause => "machine-pause",
            Cause::LongVmOperation => "long-vm-operation",
            Cause::VmThreadIo => "vm-thread-io",
            Cause::MappedWriteback => "mapped-writeback",
            Cause::MemoryReclaim => "memory-reclaim",
            Cause::MemcgHigh => "memcg-high",
            Cause::TlbShootdown => "tlb-shootdown",
            Cause::BlockedIo => "blocked-io",
            Cause::Unknown => "unknown",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Cause::NoSafepointPoll => "running without a safepoint poll",
            Cause::MajorFault => "major page fault on a file mapping",
            Cause::SwapIn => "swap-in of anonymous memory",
            Cause::MmapLock => "mmap_lock wait",
            Cause::CpuStarvation => "CPU starvation",
            Cause::CgroupThrottling => "cgroup CPU throttling",
            Cause::Frozen => "process frozen or stopped",
            Cause::MachinePause => "whole machine paused",
            Cause::LongVmOperation => "long VM operation at the safepoint",
            Cause::VmThreadIo => "VM or GC thread blocked in I/O at a safepoint",
            Cause::MappedWriteback => "write fault on a shared file mapping under writeback",
            Cause::MemoryReclaim => "memory reclaim or compaction",
            Cause::MemcgHigh => "memory cgroup over its high limit",
            Cause::TlbShootdown => "TLB shootdown storm",
            Cause::BlockedIo => "blocked in a system call on file I/O",
            Cause::Unknown => "unknown",
        }
    }

    pub fn fix(self) -> &'static str {
        match self {
            Cause::NoSafepointPoll => {
                "the thread runs a loop (or a huge copy) that never polls for safepoints: keep loop strip mining on (G1, ZGC and Shenandoah do by default; -XX:+UseCountedLoopSafepoints elsewhere), or give the loop a long index or a call out"
            }
            Cause::MajorFault => {
                "read with FileChannel.read (native, safepoint-safe) or pre-fault the mapping off the critical path; MappedByteBuffer.load() does not help"
            }
            Cause::SwapIn => {
                "keep the JVM's memory resident: no swap for its cgroup (memory.swap.max=0 on cgroup v2, memory.swappiness=0 or memory.memsw.limit_in_bytes = memory.limit_in_bytes on v1) with -XX:+AlwaysPreTouch, more headroom in its memory limit, or a smaller heap"
            }
            Cause::MmapLock => {
                "stop mapping, unmapping and mprotecting large regions beside latency-critical threads: reuse mappings and direct buffers, fix the heap size (-Xms = -Xmx), avoid mlock/MAP_POPULATE at run time"
            }
            Cause::CpuStarvation => {
                "give the JVM the CPUs it needs: fewer runnable threads than cores, or noisy neighbours kept out of its way (a cgroup with cpu.idle=1 for batch work, cpusets, a lower cpu.weight); else run its threads SCHED_FIFO while it reaches each safepoint (stallscope run --boost fifo:1)"
            }
            Cause::CgroupThrottling => {
                "raise the cgroup's CPU quota above the JVM's demand, or size GC and compiler threads to fit it (-XX:ParallelGCThreads, -XX:CICompilerCount)"
            }
            Cause::Frozen => {
                "something stopped the process (SIGSTOP, a debugger, a paused container or frozen cgroup): find what sent it"
            }
            Cause::MachinePause => {
                "the whole machine stopped (VM steal, live migration, an overloaded host): look at the hypervisor, or move to dedicated hosts"
            }
            Cause::LongVmOperation => {
                "the operation run at the safepoint was long itself: tune or avoid it (see its name: a full GC, a heap dump, class redefinition)"
            }
            Cause::VmThreadIo => {
                "the VM or GC thread waited on storage while the application was stopped: log asynchronously (-Xlog:async, JDK 17+), put GC and safepoint logs on a fast local disk or tmpfs, and -XX:+PerfDisableSharedMem for hsperfdata"
            }
            Cause::MappedWriteback => {
                "a write to a file mapped shared waited for that page's writeback to a slow disk: keep such files on tmpfs or a fast local disk; for a MappedByteBuffer of your own (READ_WRITE), write with FileChannel.write or keep the file on tmpfs; for the JVM's perf counters (hsperfdata), -XX:+PerfDisableSharedMem or /tmp on tmpfs"
            }
            Cause::MemoryReclaim => {
                "give the JVM's memory cgroup headroom above its working set (heap, metaspace, code, direct buffers, and the page cache of what it writes), pre-touch the heap at start (-XX:+AlwaysPreTouch), and keep bulk file writes out of its cgroup or write them with O_DIRECT"
            }
            Cause::MemcgHigh => {
                "raise the cgroup's memory.high above the JVM's working set (or remove it and keep memory.max), or shrink the heap and direct memory to fit under it"
            }
            Cause::TlbShootdown => {
                "stop mapping and unmapping small files or regions in hot paths: read with pread into pooled buffers, or keep the mappings open"
            }
            Cause::BlockedIo => {
                "the thread waited in a system call (read, write, fsync) for its disk or filesystem: move that I/O off the latency-critical thread (an I/O thread, asynchronous I/O), keep the files it reads in memory (page-cache headroom, preloading), or put them on faster storage; the waker named is what answered late"
            }
            Cause::Unknown => {
                "the evidence is thin; the raw samples below show what each thread was doing"
            }
        }
    }

    /// The fix for a process that is not a JVM (no safepoints, no JVM options): where it differs
    /// from [`Cause::fix`].
    pub fn fix_for_process(self) -> &'static str {
        match self {
            Cause::MajorFault => {
                "the program read a file it maps and the page was not in memory: fault it in off the critical path (madvise MADV_WILLNEED, MAP_POPULATE, a reader thread), keep it resident (mlock, memory headroom), or read it with pread on another thread; or put the file on faster storage"
            }
            Cause::SwapIn => {
                "keep the process's memory resident: no swap for its cgroup (memory.swap.max=0 on cgroup v2), mlockall, or more headroom in its memory limit"
            }
            Cause::MmapLock => {
                "other threads of the process map, unmap or mprotect memory while this one faults: reuse mappings and pre-size arenas, and keep mmap/munmap off the latency-critical path"
            }
            Cause::CpuStarvation => {
                "give the process the CPUs it needs: fewer runnable threads than cores, or the neighbours named kept out of its way (cpusets, a lower cpu.weight or cpu.idle=1 for batch work), or a higher priority for its latency-critical threads"
            }
            Cause::MappedWriteback => {
                "a write to a file mapped shared waited for that page's writeback to a slow disk: keep such files on tmpfs or a fast local disk, or write them with write(2)"
            }
            Cause::MemoryReclaim => {
                "give the process's memory cgroup headroom above its working set and the page cache of what it writes, and keep bulk file writes out of its cgroup or write them with O_DIRECT"
            }
            Cause::MemcgHigh => {
                "raise the cgroup's memory.high above the process's working set (or remove it and keep memory.max)"
            }
            other => other.fix(),
        }
    }

    /// Parses a cause's id (`swap-in`).
    pub fn from_id(id: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.id() == id)
    }

    pub fn doc(self) -> String {
        format!("docs/causes/{}.md", self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_has_its_page_and_a_fix() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for c in Cause::ALL {
            let page = root.join(c.doc());
            let text = std::fs::read_to_string(&page)
                .unwrap_or_else(|_| panic!("{} is missing", page.display()));
            assert!(
                text.to_lowercase().contains(&c.title().to_lowercase()),
                "{} does not name '{}'",
                page.display(),
                c.title()
            );
            assert!(!c.fix().is_empty());
        }
    }
}
