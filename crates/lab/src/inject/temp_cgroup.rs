//! Temporary cgroups for the injectors and the lab: created with a limit (I/O, memory) or none
//! (a v2 group of its own, for its pressure), removed when dropped; with a guardian, removed even
//! if stallscope is killed.
//!
//! Invariant: a `TempCgroup` is removed on drop even if processes are still in it (they are
//! moved to the parent first), so no run leaves a cgroup behind.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

pub struct TempCgroup {
    pub path: PathBuf,
    pub version: Version,
    /// The guardian that removes it if stallscope is killed, and the change it holds.
    guard: Option<(std::sync::Arc<std::sync::Mutex<guard::Guard>>, guard::Token)>,
}

use procwatch::cgroup::mounts as cgroup_mounts;

/// Where an I/O-limited cgroup can be made: the cgroup v2 root with the io controller, or the v1
/// blkio hierarchy.
pub fn io_hierarchy() -> Option<(Version, PathBuf)> {
    hierarchy("io", "blkio")
}

/// Where a memory-limited cgroup can be made: the cgroup v2 root with the memory controller,
/// or the v1 memory hierarchy.
pub fn memory_hierarchy() -> Option<(Version, PathBuf)> {
    hierarchy("memory", "memory")
}

/// Where a CPU-limited cgroup can be made: the cgroup v2 root with the cpu controller, or the v1
/// cpu hierarchy.
pub fn cpu_hierarchy() -> Option<(Version, PathBuf)> {
    hierarchy("cpu", "cpu")
}

/// The cgroup v2 root when it has controller `v2`, else the v1 hierarchy mounted with `v1`.
fn hierarchy(v2: &str, v1: &str) -> Option<(Version, PathBuf)> {
    let mounts = cgroup_mounts();
    for (fstype, _, mp) in &mounts {
        if fstype == "cgroup2"
            && std::fs::read_to_string(mp.join("cgroup.controllers"))
                .unwrap_or_default()
                .split_whitespace()
                .any(|c| c == v2)
        {
            return Some((Version::V2, mp.clone()));
        }
    }
    mounts
        .into_iter()
        .find(|(fstype, opts, _)| fstype == "cgroup" && opts.split(',').any(|o| o == v1))
        .map(|(_, _, mp)| (Version::V1, mp))
}

/// The cgroup v2 hierarchy, where a group of its own gives a process its own pressure (PSI)
/// files, whatever controllers it has.
pub fn unified_root() -> Option<PathBuf> {
    cgroup_mounts().into_iter().find(|(t, _, _)| t == "cgroup2").map(|m| m.2)
}

impl TempCgroup {
    /// A memory cgroup with a hard limit of `limit` bytes; `swap` false keeps its anonymous
    /// memory out of swap (v2 `memory.swap.max=0`, v1 `memory.swappiness=0`), true lets it go
    /// there readily (v1 `memory.swappiness=100`).
    pub fn memory(name: &str, limit: u64, swap: bool) -> Result<TempCgroup> {
        let Some((version, root)) = memory_hierarchy() else {
            bail!("no cgroup hierarchy with the memory controller is mounted");
        };
        let cg = TempCgroup::make(&root, version, name)?;
        match version {
            Version::V1 => cg.write("memory.swappiness", if swap { "100" } else { "0" })?,
            Version::V2 => cg.write("memory.swap.max", if swap { "max" } else { "0" })?,
        }
        cg.set_memory_limit(Some(limit))?;
        Ok(cg)
    }

    /// A CPU cgroup whose tasks may use `quota_us` of CPU time every `period_us` (v2 `cpu.max`,
    /// v1 `cpu.cfs_quota_us`).
    pub fn cpu(name: &str, quota_us: u64, period_us: u64) -> Result<TempCgroup> {
        let Some((version, root)) = cpu_hierarchy() else {
            bail!("no cgroup hierarchy with the cpu controller is mounted");
        };
        let cg = TempCgroup::make(&root, version, name)?;
        match version {
            Version::V1 => {
                cg.write("cpu.cfs_period_us", &period_us.to_string())?;
                cg.write("cpu.cfs_quota_us", &quota_us.to_string())?;
            }
            Version::V2 => cg.write("cpu.max", &format!("{quota_us} {period_us}"))?,
        }
        Ok(cg)
    }

    /// A CPU cgroup whose tasks run only when nothing else wants the CPU (`cpu.idle=1`, v1 and
    /// v2 since Linux 5.15): its tasks count as SCHED_IDLE against everything outside it.
    pub fn cpu_idle(name: &str) -> Result<TempCgroup> {
        let Some((version, root)) = cpu_hierarchy() else {
            bail!("no cgroup hierarchy with the cpu controller is mounted");
        };
        let cg = TempCgroup::make(&root, version, name)?;
        cg.write("cpu.idle", "1").context("cpu.idle needs Linux 5.15 or later")?;
        Ok(cg)
    }

    /// A cgroup v2 group with no limit: its own pressure files.
    pub fn unified(name: &str) -> Result<TempCgroup> {
        let root = unified_root().context("cgroup v2 is not mounted")?;
        TempCgroup::make(&root, Version::V2, name)
    }

    fn make(root: &Path, version: Version, name: &str) -> Result<TempCgroup> {
        let path = root.join(format!("stallscope-{name}-{}", std::process::id()));
        std::fs::create_dir(&path)
            .with_context(|| format!("creating cgroup {}", path.display()))?;
        Ok(TempCgroup { path, version, guard: None })
    }

    /// Has `guard` remove it (killing what is in it) if stallscope dies first.
    pub fn guarded(
        mut self,
        guard: std::sync::Arc<std::sync::Mutex<guard::Guard>>,
    ) -> Result<TempCgroup> {
        let token = guard
            .lock()
            .map_err(|_| anyhow::anyhow!("the guardian lock is poisoned"))?
            .add(guard::Undo::RemoveCgroup { dir: self.path.clone() })?;
        self.guard = Some((guard, token));
        Ok(self)
    }

    /// Sets (or, with `None`, lifts) the memory limit. Lowering it below what is in use makes
    /// the kernel reclaim down to it first; v1 refuses (EBUSY) when it cannot.
    pub fn set_memory_limit(&self, limit: Option<u64>) -> Result<()> {
        let v = limit.map_or_else(
            || if self.version == Version::V2 { "max".to_string() } else { "-1".to_string() },
            |b| b.to_string(),
        );
        self.write(
            if self.version == Version::V2 { "memory.max" } else { "memory.limit_in_bytes" },
            &v,
        )
    }

    /// A cgroup whose reads from block device `dev` (major, minor) are limited to `riops` per
    /// second.
    pub fn io_throttled(dev: (u32, u32), riops: u64) -> Result<TempCgroup> {
        let Some((version, root)) = io_hierarchy() else {
            bail!(
                "no cgroup hierarchy with I/O control here (neither cgroup v2 'io' nor v1 'blkio' is mounted)"
            );
        };
        let cg = TempCgroup::make(&root, version, "throttle")?;
        let (maj, min) = dev;
        match version {
            Version::V1 => {
                cg.write("blkio.throttle.read_iops_device", &format!("{maj}:{min} {riops}"))?
            }
            Version::V2 => {
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
                cg.write("io.max", &format!("{maj}:{min} riops={riops}"))?
            }
        }
        Ok(cg)
    }

    pub fn write(&self, file: &str, value: &str) -> Result<()> {
        std::fs::write(self.path.join(file), value)
            .with_context(|| format!("writing '{value}' to {}", self.path.join(file).display()))
    }

    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    fn members(&self) -> Vec<String> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let parent = self.path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut removed = false;
        for _ in 0..50 {
            for pid in self.members() {
                let _ = std::fs::write(parent.join("cgroup.procs"), &pid);
            }
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                removed = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // Forgotten by the guardian only once gone: one it could not remove (a process that
        // would not leave) the guardian removes when stallscope exits, and says so if it
        // cannot either.
        if let Some((g, t)) = self.guard.take()
            && removed
            && let Ok(mut g) = g.lock()
        {
            g.forget(t);
        }
    }
}

/// Resolves `--device` (`/dev/vda`, `254:0`) or, without one, the disk holding `dir`, to the
/// whole disk's (major, minor): throttling applies to disks, not partitions.
pub fn block_device(device: Option<&str>, dir: &Path) -> Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let (maj, min) = match device {
        Some(d) if d.contains(':') && !d.starts_with('/') => {
            let (a, b) = d.split_once(':').expect("checked");
            (
                a.parse().with_context(|| format!("{d}: not MAJOR:MINOR"))?,
                b.parse().with_context(|| format!("{d}: not MAJOR:MINOR"))?,
            )
        }
        Some(d) => {
            let m = std::fs::metadata(d).with_context(|| format!("{d}: cannot stat it"))?;
            if m.rdev() == 0 {
                bail!("{d} is not a block device");
            }
            (libc::major(m.rdev()), libc::minor(m.rdev()))
        }
        None => {
            let m = std::fs::metadata(dir)
                .with_context(|| format!("{}: cannot stat it", dir.display()))?;
            (libc::major(m.dev()), libc::minor(m.dev()))
        }
    };
    let sys = PathBuf::from(format!("/sys/dev/block/{maj}:{min}"));
    if !sys.exists() {
        bail!(
            "{maj}:{min} (holding {}) is not a block device (overlay, tmpfs or network file system?); pass --device /dev/sdX",
            dir.display()
        );
    }
    if sys.join("partition").exists() {
        let parent_dev =
            std::fs::read_to_string(sys.join("../dev")).context("reading the partition's disk")?;
        let (a, b) = parent_dev.trim().split_once(':').context("malformed dev file")?;
        return Ok((a.parse()?, b.parse()?));
    }
    Ok((maj, min))
}
