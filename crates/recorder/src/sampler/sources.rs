//! What is read of the machine, the target's process and its cgroups at each system sample,
//! and which of the files it maps are its data (their pages are looked at when a stall begins,
//! see context.rs).
//!
//! Invariant: every source is read without blocking on the target (no signal, no ptrace), and
//! one that cannot be read is left out of the sample, never guessed.

use crate::to_disk::ToDisk;
use procwatch::cgroup::{self, Cgroups};
use procwatch::task::TaskSample;
use procwatch::{maps, system};
use recording::{JvmTotals, RecorderSelf, Shares, SystemSample};

/// Whether a mapping is of a data file (not code, not the JDK's or the JVM's own files): one
/// whose residency says whether a fault on it read from disk.
pub(super) fn data_file(x: &maps::Mapping) -> bool {
    let p = &x.path;
    x.is_file()
        && !x.perms.contains('x')
        && !(p.ends_with(".so")
            || p.contains(".so.")
            || p.ends_with(".jar")
            || p.ends_with(".jsa")
            || p.ends_with("/modules")
            || p.starts_with("/usr/lib/jvm")
            || p.contains("/hsperfdata_")
            || p.ends_with(".heartbeat"))
}

/// Where the machine-wide, per-process and per-cgroup signals of one target are read.
pub struct Sources {
    pid: i32,
    target: Cgroups,
    /// The recorder's own CPU cgroup, when it is not the root (a quota may bind it).
    own_cpu: Option<cgroup::Group>,
    /// The watch thread's schedstat.
    own_schedstat: Option<std::path::PathBuf>,
    /// The target's cgroup files and our own, kept open while it is watched (each stall reads
    /// them at its first and last looks).
    kept: procwatch::procfile::Kept,
}

impl Sources {
    /// For the calling thread (the sampling loop) watching `pid`.
    pub fn new(pid: i32) -> Sources {
        let own_cpu = cgroup::of(0).cpu.filter(|g| g.path != "/");
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        Sources {
            pid,
            target: cgroup::of(pid),
            own_cpu,
            own_schedstat: Some(format!("/proc/self/task/{tid}/schedstat").into()),
            kept: procwatch::procfile::Kept::default(),
        }
    }

    fn recorder(&self) -> Option<RecorderSelf> {
        let text = self.kept.read(self.own_schedstat.as_ref()?).ok()?;
        let mut it = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
        Some(RecorderSelf {
            exec_ns: it.next()?,
            run_delay_ns: it.next()?,
            throttled_ns: self
                .own_cpu
                .as_ref()
                .and_then(|g| g.throttling_via(Some(&self.kept)))
                .map(|t| t.throttled_ns),
        })
    }
}

/// Which of the target's limits bind the recorder too: it is inside the target's (limited)
/// cgroup, or the target is inside the recorder's.
pub fn shares(target: &Cgroups, own: &Cgroups) -> Shares {
    let binds = |t: Option<&cgroup::Group>, o: Option<&cgroup::Group>| match (t, o) {
        (Some(t), Some(o)) => {
            (o.dir.starts_with(&t.dir) && t.path != "/")
                || (t.dir.starts_with(&o.dir) && o.path != "/")
        }
        _ => false,
    };
    Shares {
        cpu_cgroup: binds(target.cpu.as_ref(), own.cpu.as_ref()),
        memory_cgroup: binds(target.memory.as_ref(), own.memory.as_ref()),
    }
}

pub(super) fn system_sample(t: u64, stall: u32, baseline: bool, src: &Sources) -> SystemSample {
    let unified = src.target.unified.as_ref().filter(|g| g.path != "/");
    // The machine's pressure: each of its three files read once (memory's two lines from one read).
    let psi = cgroup::pressure_in(std::path::Path::new("/proc/pressure"));
    SystemSample {
        t,
        stall,
        baseline,
        // Counted by BPF where loaded (the file costs about three times vmstat's read).
        tlb: offcpu::Counters::loaded()
            .and_then(offcpu::Counters::tlb_shootdowns)
            .or_else(system::read_tlb_shootdowns),
        cpu: system::read_cpu_times().map(ToDisk::to_disk),
        psi_cpu_us: psi.cpu_some_us,
        psi_io_us: psi.io_some_us,
        psi_memory_us: psi.memory_some_us,
        throttling: src
            .target
            .cpu
            .as_ref()
            .and_then(|g| g.throttling_via(Some(&src.kept)))
            .map(ToDisk::to_disk),
        vmstat: system::read_vmstat().map(ToDisk::to_disk),
        psi_memory_full_us: psi.memory_full_us,
        process: procwatch::task::process_memory(src.pid).map(ToDisk::to_disk),
        memcg: src
            .target
            .memory
            .as_ref()
            .filter(|g| g.path != "/")
            .and_then(|g| g.memory_via(Some(&src.kept)))
            .map(ToDisk::to_disk),
        cgroup_pressure: unified.and_then(|g| g.pressure_via(Some(&src.kept))).map(ToDisk::to_disk),
        recorder: src.recorder(),
        jvm: None,
    }
}

pub(super) fn totals(threads: &[TaskSample]) -> JvmTotals {
    JvmTotals {
        threads: threads.len(),
        exec_ns: threads.iter().map(|t| t.exec_ns).sum(),
        run_delay_ns: threads.iter().map(|t| t.run_delay_ns).sum(),
        majflt: threads.iter().map(|t| t.majflt).sum(),
    }
}
