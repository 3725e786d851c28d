//! Temporary cgroups for the injectors: created with a limit, removed when dropped.
//!
//! Invariant: a `TempCgroup` is removed on drop even if processes are still in it (they are
//! moved to the parent first), so no run leaves a cgroup behind.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

#[derive(Debug)]
pub struct TempCgroup {
    pub path: PathBuf,
    pub version: Version,
}

/// Mount points of cgroup hierarchies: (fstype, super options, mount point).
fn cgroup_mounts() -> Vec<(String, String, PathBuf)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split(' ').nth(4)?;
            let mut p = post.split(' ');
            let fstype = p.next()?;
            let _src = p.next()?;
            let opts = p.next().unwrap_or("");
            fstype.starts_with("cgroup").then(|| (fstype.to_string(), opts.to_string(), PathBuf::from(mp.replace("\\040", " "))))
        })
        .collect()
}

/// Where an I/O-limited cgroup can be made: the cgroup v2 root with the io controller, or the
/// v1 blkio hierarchy.
pub fn io_hierarchy() -> Option<(Version, PathBuf)> {
    let mounts = cgroup_mounts();
    for (fstype, _, mp) in &mounts {
        if fstype == "cgroup2" {
            let ctl = std::fs::read_to_string(mp.join("cgroup.controllers")).unwrap_or_default();
            if ctl.split_whitespace().any(|c| c == "io") {
                return Some((Version::V2, mp.clone()));
            }
        }
    }
    mounts
        .into_iter()
        .find(|(fstype, opts, _)| fstype == "cgroup" && opts.split(',').any(|o| o == "blkio"))
        .map(|(_, _, mp)| (Version::V1, mp))
}

impl TempCgroup {
    /// A cgroup whose reads from block device `dev` (major, minor) are limited to `riops` per
    /// second.
    pub fn io_throttled(dev: (u32, u32), riops: u64) -> Result<TempCgroup> {
        let Some((version, root)) = io_hierarchy() else {
            bail!("no cgroup hierarchy with I/O control here (neither cgroup v2 'io' nor v1 'blkio' is mounted)");
        };
        let path = root.join(format!("stallscope-throttle-{}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        let cg = TempCgroup { path, version };
        let (maj, min) = dev;
        match version {
            Version::V1 => cg.write("blkio.throttle.read_iops_device", &format!("{maj}:{min} {riops}"))?,
            Version::V2 => {
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
                cg.write("io.max", &format!("{maj}:{min} riops={riops}"))?
            }
        }
        Ok(cg)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        std::fs::write(self.path.join(file), value).with_context(|| format!("writing '{value}' to {}", self.path.join(file).display()))
    }

    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    fn members(&self) -> Vec<String> {
        std::fs::read_to_string(self.procs_file()).unwrap_or_default().lines().map(str::to_string).collect()
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let parent = self.path.parent().map(Path::to_path_buf).unwrap_or_default();
        for _ in 0..50 {
            for pid in self.members() {
                let _ = std::fs::write(parent.join("cgroup.procs"), &pid);
            }
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("stallscope: could not remove cgroup {}; remove it with rmdir", self.path.display());
    }
}

/// Resolves `--device` (`/dev/vda`, `254:0`) or, without one, the disk holding `dir`, to the
/// whole disk's (major, minor): throttling applies to disks, not partitions.
pub fn block_device(device: Option<&str>, dir: &Path) -> Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let (maj, min) = match device {
        Some(d) if d.contains(':') && !d.starts_with('/') => {
            let (a, b) = d.split_once(':').expect("checked");
            (a.parse().with_context(|| format!("{d}: not MAJOR:MINOR"))?, b.parse().with_context(|| format!("{d}: not MAJOR:MINOR"))?)
        }
        Some(d) => {
            let m = std::fs::metadata(d).with_context(|| format!("{d}: cannot stat it"))?;
            if m.rdev() == 0 {
                bail!("{d} is not a block device");
            }
            (libc::major(m.rdev()), libc::minor(m.rdev()))
        }
        None => {
            let m = std::fs::metadata(dir).with_context(|| format!("{}: cannot stat it", dir.display()))?;
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
        let parent_dev = std::fs::read_to_string(sys.join("../dev")).context("reading the partition's disk")?;
        let (a, b) = parent_dev.trim().split_once(':').context("malformed dev file")?;
        return Ok((a.parse()?, b.parse()?));
    }
    Ok((maj, min))
}
