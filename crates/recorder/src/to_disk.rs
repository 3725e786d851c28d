//! The readers' values (`procwatch`'s) as the recording's (`recording`'s): the one place the two
//! meet, so the format crate names none of the readers' types and a reader's field renamed or
//! added changes nothing on disk until it is written here.

use recording::{disk, who};

/// A reader's value as the recording writes it.
pub trait ToDisk {
    type Disk;
    fn to_disk(self) -> Self::Disk;
}

/// Each of a reader's values as the recording's.
pub fn all<T: ToDisk>(v: Vec<T>) -> Vec<T::Disk> {
    v.into_iter().map(ToDisk::to_disk).collect()
}

impl ToDisk for hotspot_log::jfr::JavaFrame {
    type Disk = disk::JavaFrame;
    fn to_disk(self) -> disk::JavaFrame {
        self.into()
    }
}

impl ToDisk for procwatch::pods::Pod {
    type Disk = recording::Pod;
    fn to_disk(self) -> recording::Pod {
        let procwatch::pods::Pod { namespace, name, uid, container, container_id, runtime, source } =
            self;
        recording::Pod { namespace, name, uid, container, container_id, runtime, source }
    }
}

impl ToDisk for procwatch::task::Syscall {
    type Disk = disk::Syscall;
    fn to_disk(self) -> disk::Syscall {
        use procwatch::task::Syscall as S;
        match self {
            S::Running => disk::Syscall::Running,
            S::In { nr, arg0, sp, pc } => disk::Syscall::In { nr, arg0, sp, pc },
            S::NotInSyscall { sp, pc } => disk::Syscall::NotInSyscall { sp, pc },
            S::Unknown => disk::Syscall::Unknown,
        }
    }
}

impl ToDisk for procwatch::cgroup::Version {
    type Disk = disk::Version;
    fn to_disk(self) -> disk::Version {
        match self {
            procwatch::cgroup::Version::V1 => disk::Version::V1,
            procwatch::cgroup::Version::V2 => disk::Version::V2,
        }
    }
}

impl ToDisk for procwatch::task::TaskSample {
    type Disk = disk::TaskSample;
    fn to_disk(self) -> disk::TaskSample {
        disk::TaskSample {
            tid: self.tid,
            comm: self.comm,
            state: self.state,
            utime_ticks: self.utime_ticks,
            stime_ticks: self.stime_ticks,
            minflt: self.minflt,
            majflt: self.majflt,
            processor: self.processor,
            exec_ns: self.exec_ns,
            run_delay_ns: self.run_delay_ns,
            timeslices: self.timeslices,
            wchan: self.wchan,
            syscall: self.syscall.to_disk(),
            file: self.file,
        }
    }
}

impl ToDisk for procwatch::task::ProcessMemory {
    type Disk = disk::ProcessMemory;
    fn to_disk(self) -> disk::ProcessMemory {
        disk::ProcessMemory { rss_kb: self.rss_kb, swap_kb: self.swap_kb }
    }
}

impl ToDisk for procwatch::system::CpuTimes {
    type Disk = disk::CpuTimes;
    fn to_disk(self) -> disk::CpuTimes {
        disk::CpuTimes {
            user: self.user,
            nice: self.nice,
            system: self.system,
            idle: self.idle,
            iowait: self.iowait,
            irq: self.irq,
            softirq: self.softirq,
            steal: self.steal,
        }
    }
}

impl ToDisk for procwatch::system::VmStat {
    type Disk = disk::VmStat;
    fn to_disk(self) -> disk::VmStat {
        disk::VmStat {
            pswpin: self.pswpin,
            pswpout: self.pswpout,
            pgmajfault: self.pgmajfault,
            allocstall: self.allocstall,
            pgscan_direct: self.pgscan_direct,
            compact_stall: self.compact_stall,
            refault_anon: self.refault_anon,
            refault_file: self.refault_file,
            nr_dirty: self.nr_dirty,
            nr_writeback: self.nr_writeback,
        }
    }
}

impl ToDisk for procwatch::cgroup::Cgroups {
    type Disk = disk::Cgroups;
    fn to_disk(self) -> disk::Cgroups {
        disk::Cgroups {
            cpu: self.cpu.map(ToDisk::to_disk),
            memory: self.memory.map(ToDisk::to_disk),
            unified: self.unified.map(ToDisk::to_disk),
        }
    }
}

impl ToDisk for procwatch::cgroup::Group {
    type Disk = disk::Group;
    fn to_disk(self) -> disk::Group {
        disk::Group { dir: self.dir, version: self.version.to_disk(), path: self.path }
    }
}

impl ToDisk for procwatch::cgroup::Throttling {
    type Disk = disk::Throttling;
    fn to_disk(self) -> disk::Throttling {
        disk::Throttling {
            nr_periods: self.nr_periods,
            nr_throttled: self.nr_throttled,
            throttled_ns: self.throttled_ns,
        }
    }
}

impl ToDisk for procwatch::cgroup::Memory {
    type Disk = disk::Memory;
    fn to_disk(self) -> disk::Memory {
        disk::Memory {
            usage: self.usage,
            limit: self.limit,
            high: self.high,
            swap: self.swap,
            limit_hits: self.limit_hits,
            high_events: self.high_events,
            oom_kills: self.oom_kills,
            pgmajfault: self.pgmajfault,
            refault_anon: self.refault_anon,
            refault_file: self.refault_file,
            pgscan: self.pgscan,
            dirty: self.dirty,
            writeback: self.writeback,
        }
    }
}

impl ToDisk for procwatch::cgroup::Pressure {
    type Disk = disk::Pressure;
    fn to_disk(self) -> disk::Pressure {
        disk::Pressure {
            cpu_some_us: self.cpu_some_us,
            memory_some_us: self.memory_some_us,
            memory_full_us: self.memory_full_us,
            io_some_us: self.io_some_us,
            io_full_us: self.io_full_us,
        }
    }
}

impl ToDisk for procwatch::heartbeat::JavaThread {
    type Disk = disk::JavaThread;
    fn to_disk(self) -> disk::JavaThread {
        disk::JavaThread {
            tid: self.tid,
            java_id: self.java_id,
            matched: self.matched,
            daemon: self.daemon,
            name: self.name,
        }
    }
}

impl ToDisk for procwatch::maps::Mapping {
    type Disk = disk::Mapping;
    fn to_disk(self) -> disk::Mapping {
        disk::Mapping {
            start: self.start,
            end: self.end,
            perms: self.perms,
            offset: self.offset,
            dev: self.dev,
            inode: self.inode,
            path: self.path,
        }
    }
}

impl ToDisk for procwatch::trace::TraceEvent {
    type Disk = disk::TraceEvent;
    fn to_disk(self) -> disk::TraceEvent {
        use procwatch::trace::TraceEvent as E;
        match self {
            E::PageFault { t, tid, address, ip, error_code } => {
                disk::TraceEvent::PageFault { t, tid, address, ip, error_code }
            }
            E::MmapLockStart { t, tid, write } => disk::TraceEvent::MmapLockStart { t, tid, write },
            E::MmapLockAcquired { t, tid, write, success } => {
                disk::TraceEvent::MmapLockAcquired { t, tid, write, success }
            }
            E::WritebackWait { t, tid, ino, index, bdi } => {
                disk::TraceEvent::WritebackWait { t, tid, ino, index, bdi }
            }
        }
    }
}

impl ToDisk for procwatch::jvmcounters::CounterLook {
    type Disk = disk::CounterLook;
    fn to_disk(self) -> disk::CounterLook {
        disk::CounterLook {
            t: self.t,
            prev_t: self.prev_t,
            safepoints: self.safepoints,
            sync_ns: self.sync_ns,
            safepoint_ns: self.safepoint_ns,
            application_ns: self.application_ns,
            hrt_ns: self.hrt_ns,
            gcs: all(self.gcs),
            gc_cause: self.gc_cause,
            gap: self.gap,
        }
    }
}

impl ToDisk for procwatch::jvmcounters::GcLook {
    type Disk = disk::GcLook;
    fn to_disk(self) -> disk::GcLook {
        disk::GcLook {
            invocations: self.invocations,
            last_entry_ns: self.last_entry_ns,
            last_exit_ns: self.last_exit_ns,
            cycle: self.cycle,
        }
    }
}

impl ToDisk for procwatch::jvmcounters::CountersInfo {
    type Disk = disk::CountersInfo;
    fn to_disk(self) -> disk::CountersInfo {
        disk::CountersInfo {
            path: self.path,
            java_version: self.java_version,
            major: self.major,
            safepoint_time_includes_sync: self.safepoint_time_includes_sync,
            collectors: self.collectors,
            frequency: self.frequency,
            vm_start_epoch_ms: self.vm_start_epoch_ms,
        }
    }
}

impl ToDisk for procwatch::process::ProcessInfo {
    type Disk = who::WhoProcess;
    fn to_disk(self) -> who::WhoProcess {
        who::WhoProcess {
            pid: self.pid,
            comm: self.comm,
            cmdline: self.cmdline,
            uid: self.uid,
            user: self.user,
            ppid: self.ppid,
            ancestors: self.ancestors,
            cgroup: self.cgroup,
            container: self.container,
        }
    }
}

/// What names a process in a list of those that took the CPUs or did I/O.
pub fn named(p: procwatch::process::ProcessInfo) -> who::Named {
    who::Named { cgroup: p.cgroup, user: p.user, cmdline: p.cmdline, container: p.container }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::to_value;

    /// The recording's type writes what the reader's type wrote before the conversion moved
    /// here: a recording of a pod's JVM reads the same.
    #[test]
    fn a_pod_is_written_as_the_reader_gave_it() {
        let p = procwatch::pods::Pod {
            namespace: "shop".into(),
            name: "orders-api-7d9f8-x2x".into(),
            uid: "5f1c".into(),
            container: "api".into(),
            container_id: "65d5a9da8c0f1234".into(),
            runtime: "containerd".into(),
            source: "/run/containerd/config.json".into(),
        };
        assert_eq!(to_value(&p).unwrap(), to_value(p.clone().to_disk()).unwrap());
    }

    #[test]
    fn a_thread_sample_and_a_counter_look_are_written_as_read() {
        let t = procwatch::task::TaskSample {
            tid: 7,
            comm: "VM Thread".into(),
            state: 'D',
            utime_ticks: 3,
            stime_ticks: 4,
            minflt: 5,
            majflt: 6,
            wchan: "folio_wait_bit_common".into(),
            syscall: procwatch::task::Syscall::In { nr: 17, arg0: 3, sp: 0x7f00, pc: 0x4000 },
            ..Default::default()
        };
        assert_eq!(to_value(&t).unwrap(), to_value(t.clone().to_disk()).unwrap());
        let l = procwatch::jvmcounters::CounterLook {
            t: 10,
            prev_t: 5,
            safepoints: 3,
            gcs: vec![procwatch::jvmcounters::GcLook { invocations: 2, ..Default::default() }],
            gc_cause: Some("System.gc()".into()),
            ..Default::default()
        };
        assert_eq!(to_value(&l).unwrap(), to_value(l.clone().to_disk()).unwrap());
    }
}
