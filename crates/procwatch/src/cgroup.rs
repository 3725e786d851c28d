//! A process's control groups, cgroup v1 and v2: where its CPU and memory cgroups are, and what
//! they say now: CPU throttling, memory use against its limits and what hitting them cost, and
//! pressure stall information (per cgroup, v2 only).
//!
//! Invariant: paths are found once, through `/proc/<pid>/cgroup` and this process's
//! mountinfo; reading a sample is a few small file reads, and a file a kernel lacks is `None`
//! or zero, never an error.

use crate::procfile::Kept;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Which cgroup interface a controller is used through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    V1,
    V2,
}

/// One controller's cgroup directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub dir: PathBuf,
    pub version: Version,
    /// The cgroup's path as the process sees it in `/proc/<pid>/cgroup` (`/system.slice/x`).
    pub path: String,
}

/// The cgroups of one process that stallscope reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cgroups {
    pub cpu: Option<Group>,
    pub memory: Option<Group>,
    /// The cgroup v2 (unified) directory, for its pressure files, whatever controllers it has.
    pub unified: Option<Group>,
}

/// Mount points of cgroup hierarchies: (fstype, super options, mount point).
pub fn mounts() -> Vec<(String, String, PathBuf)> {
    let info = crate::procfile::read("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split(' ').nth(4)?;
            let mut p = post.split(' ');
            let fstype = p.next()?;
            let _src = p.next()?;
            let opts = p.next().unwrap_or("");
            fstype.starts_with("cgroup").then(|| {
                (fstype.to_string(), opts.to_string(), PathBuf::from(mp.replace("\\040", " ")))
            })
        })
        .collect()
}

/// Parses `/proc/<pid>/cgroup` against the mounts: the directory of each controller.
pub fn parse(proc_cgroup: &str, mounts: &[(String, String, PathBuf)]) -> Cgroups {
    let v2_mount = mounts.iter().find(|(t, _, _)| t == "cgroup2").map(|m| m.2.clone());
    let v2_controllers = v2_mount
        .as_ref()
        .and_then(|m| crate::procfile::read(m.join("cgroup.controllers")).ok())
        .unwrap_or_default();
    let v1_mount = |c: &str| {
        mounts
            .iter()
            .find(|(t, o, _)| t == "cgroup" && o.split(',').any(|x| x == c))
            .map(|m| m.2.clone())
    };
    let join = |mp: &Path, path: &str| mp.join(path.trim_start_matches('/'));
    let mut out = Cgroups::default();
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        if ctrls.is_empty() {
            if let Some(mp) = &v2_mount {
                let g = Group { dir: join(mp, path), version: Version::V2, path: path.to_string() };
                if v2_controllers.split_whitespace().any(|c| c == "cpu") {
                    out.cpu.get_or_insert(g.clone());
                }
                if v2_controllers.split_whitespace().any(|c| c == "memory") {
                    out.memory.get_or_insert(g.clone());
                }
                out.unified = Some(g);
            }
            continue;
        }
        for c in ctrls.split(',') {
            let slot = match c {
                "cpu" => &mut out.cpu,
                "memory" => &mut out.memory,
                _ => continue,
            };
            if let Some(mp) = v1_mount(c) {
                *slot = Some(Group {
                    dir: join(&mp, path),
                    version: Version::V1,
                    path: path.to_string(),
                });
            }
        }
    }
    out
}

/// The cgroups of `pid` (of this process when `pid` is 0).
pub fn of(pid: i32) -> Cgroups {
    let file =
        if pid == 0 { "/proc/self/cgroup".to_string() } else { format!("/proc/{pid}/cgroup") };
    parse(&crate::procfile::read(file).unwrap_or_default(), &mounts())
}

/// A cgroup freezer holding a process: which interface, the frozen cgroup (the process's own,
/// or the ancestor whose freeze it inherits), as `/proc/PID/cgroup` names paths, and what its
/// file says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frozen {
    pub version: Version,
    pub path: String,
    pub state: String,
}

/// The freezer holding `pid`, if one is: cgroup v2's `cgroup.freeze` (set on its group or an
/// ancestor), or the v1 freezer controller's `freezer.state` (`FROZEN` or `FREEZING`, the
/// ancestor that set it found through `freezer.self_freezing`).
pub fn frozen(pid: i32) -> Option<Frozen> {
    let text = crate::procfile::read(format!("/proc/{pid}/cgroup")).ok()?;
    frozen_in(&text, &mounts())
}

/// [`frozen`] from a `/proc/PID/cgroup` text and the mounts.
pub fn frozen_in(proc_cgroup: &str, mounts: &[(String, String, PathBuf)]) -> Option<Frozen> {
    frozen_in_via(proc_cgroup, mounts, None)
}

/// The same, its files read through descriptors `kept` open (a stall looks several times).
pub fn frozen_in_via(
    proc_cgroup: &str,
    mounts: &[(String, String, PathBuf)],
    kept: Option<&Kept>,
) -> Option<Frozen> {
    let read = |d: &Path, f: &str| read_via(kept, d, f);
    let up = |path: &str| -> Vec<String> {
        // The group and its ancestors, nearest first.
        let mut v = vec![path.to_string()];
        let mut p = path.trim_end_matches('/');
        while let Some((parent, _)) = p.rsplit_once('/') {
            v.push(if parent.is_empty() { "/".into() } else { parent.to_string() });
            p = parent;
        }
        v
    };
    let join = |mp: &Path, path: &str| mp.join(path.trim_start_matches('/'));
    for line in proc_cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        if ctrls.is_empty() {
            let Some((_, _, mp)) = mounts.iter().find(|(t, _, _)| t == "cgroup2") else { continue };
            // The root group has no cgroup.freeze (it cannot be frozen): not looked for.
            for p in up(path).into_iter().filter(|p| p != "/") {
                if read(&join(mp, &p), "cgroup.freeze").is_some_and(|v| v.trim() == "1") {
                    return Some(Frozen { version: Version::V2, path: p, state: "1".into() });
                }
            }
        } else if ctrls.split(',').any(|c| c == "freezer") {
            let Some((_, _, mp)) = mounts
                .iter()
                .find(|(t, o, _)| t == "cgroup" && o.split(',').any(|x| x == "freezer"))
            else {
                continue;
            };
            // The root group has no freezer.state: it is never frozen (nor looked at).
            if path == "/" {
                continue;
            }
            let Some(state) = read(&join(mp, path), "freezer.state") else { continue };
            let state = state.trim().to_string();
            if state == "THAWED" {
                continue;
            }
            let setter = up(path)
                .into_iter()
                .find(|p| {
                    read(&join(mp, p), "freezer.self_freezing").is_some_and(|v| v.trim() == "1")
                })
                .unwrap_or_else(|| path.to_string());
            return Some(Frozen { version: Version::V1, path: setter, state });
        }
    }
    None
}

/// `key value` lines (`cpu.stat`, `memory.stat`, `memory.events`) as a lookup.
fn field(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A group file's text, through descriptors kept open by the caller when it gives some.
fn read_via(kept: Option<&Kept>, dir: &Path, file: &str) -> Option<String> {
    match kept {
        Some(k) => k.read(dir.join(file)).ok(),
        None => crate::procfile::read(dir.join(file)).ok(),
    }
}

fn number(kept: Option<&Kept>, dir: &Path, file: &str) -> Option<u64> {
    let t = read_via(kept, dir, file)?;
    let t = t.trim();
    // v2 writes "max" for no limit; v1 writes a huge number.
    if t == "max" { None } else { t.parse().ok().filter(|v| *v < (1u64 << 62)) }
}

/// CPU throttling of a cgroup, normalised to nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttling {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

/// Parses `cpu.stat` (v1 `throttled_time` in ns, v2 `throttled_usec`).
pub fn throttling(cpu_stat: &str) -> Throttling {
    Throttling {
        nr_periods: field(cpu_stat, "nr_periods").unwrap_or(0),
        nr_throttled: field(cpu_stat, "nr_throttled").unwrap_or(0),
        throttled_ns: field(cpu_stat, "throttled_usec")
            .map(|u| u * 1000)
            .or_else(|| field(cpu_stat, "throttled_time"))
            .unwrap_or(0),
    }
}

/// A memory cgroup at one instant: its use against its limits, and counters of what limits
/// and memory pressure did to it. Counters only rise; compare two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    pub usage: u64,
    /// The hard limit (v2 `memory.max`, v1 `memory.limit_in_bytes`), when there is one.
    pub limit: Option<u64>,
    /// v2 `memory.high`: above it, the cgroup's tasks are throttled and reclaim.
    pub high: Option<u64>,
    /// Bytes of the cgroup's memory in swap.
    pub swap: u64,
    /// Times the hard limit was hit (v1 `memory.failcnt`, v2 `memory.events` max).
    pub limit_hits: u64,
    /// Times usage went over `memory.high` (v2).
    pub high_events: u64,
    pub oom_kills: u64,
    pub pgmajfault: u64,
    pub refault_anon: u64,
    pub refault_file: u64,
    /// Pages scanned by reclaim in the cgroup (v2 only).
    pub pgscan: u64,
    pub dirty: u64,
    pub writeback: u64,
}

impl Group {
    /// The `cpu.stat` throttling counters.
    pub fn throttling(&self) -> Option<Throttling> {
        self.throttling_via(None)
    }

    /// The same, read through descriptors `kept` open.
    pub fn throttling_via(&self, kept: Option<&Kept>) -> Option<Throttling> {
        read_via(kept, &self.dir, "cpu.stat").map(|s| throttling(&s))
    }

    /// The memory controller's state (for a memory cgroup).
    pub fn memory(&self) -> Option<Memory> {
        self.memory_via(None)
    }

    /// The same, read through descriptors `kept` open.
    pub fn memory_via(&self, kept: Option<&Kept>) -> Option<Memory> {
        let d = &self.dir;
        let read = |d: &Path, f: &str| read_via(kept, d, f);
        let number = |d: &Path, f: &str| number(kept, d, f);
        let stat = read(d, "memory.stat")?;
        let s = |k: &str| field(&stat, k).unwrap_or(0);
        Some(match self.version {
            Version::V2 => {
                let ev = read(d, "memory.events").unwrap_or_default();
                let e = |k: &str| field(&ev, k).unwrap_or(0);
                Memory {
                    usage: number(d, "memory.current").unwrap_or(0),
                    limit: number(d, "memory.max"),
                    high: number(d, "memory.high"),
                    swap: number(d, "memory.swap.current").unwrap_or(0),
                    limit_hits: e("max"),
                    high_events: e("high"),
                    oom_kills: e("oom_kill"),
                    pgmajfault: s("pgmajfault"),
                    refault_anon: s("workingset_refault_anon"),
                    refault_file: s("workingset_refault_file"),
                    pgscan: s("pgscan"),
                    dirty: s("file_dirty"),
                    writeback: s("file_writeback"),
                }
            }
            Version::V1 => {
                let oom = read(d, "memory.oom_control").unwrap_or_default();
                Memory {
                    usage: number(d, "memory.usage_in_bytes").unwrap_or(0),
                    limit: number(d, "memory.limit_in_bytes"),
                    high: None,
                    swap: s("total_swap"),
                    limit_hits: number(d, "memory.failcnt").unwrap_or(0),
                    high_events: 0,
                    oom_kills: field(&oom, "oom_kill").unwrap_or(0),
                    pgmajfault: s("total_pgmajfault"),
                    refault_anon: s("total_workingset_refault_anon"),
                    refault_file: s("total_workingset_refault_file"),
                    pgscan: 0,
                    dirty: s("total_dirty"),
                    writeback: s("total_writeback"),
                }
            }
        })
    }

    /// The cgroup's pressure stall totals (v2 only).
    pub fn pressure(&self) -> Option<Pressure> {
        self.pressure_via(None)
    }

    /// The same, read through descriptors `kept` open.
    pub fn pressure_via(&self, kept: Option<&Kept>) -> Option<Pressure> {
        (self.version == Version::V2).then(|| pressure_of(kept, &self.dir))
    }
}

/// Pressure stall totals, µs: the time some task (`some`) or every task (`full`) of the
/// group waited for the resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pressure {
    pub cpu_some_us: Option<u64>,
    pub memory_some_us: Option<u64>,
    pub memory_full_us: Option<u64>,
    pub io_some_us: Option<u64>,
    pub io_full_us: Option<u64>,
}

/// `total=` of the `some` or `full` line of a PSI file.
pub fn psi_total_us(text: &str, line: &str) -> Option<u64> {
    let l = text.lines().find(|l| l.starts_with(line) && l[line.len()..].starts_with(' '))?;
    l.split_whitespace().find_map(|f| f.strip_prefix("total=")).and_then(|v| v.parse().ok())
}

/// The PSI files of a v2 cgroup (`cpu.pressure` …), or of the machine when `dir` is
/// `/proc/pressure` (`cpu` …).
pub fn pressure_in(dir: &Path) -> Pressure {
    pressure_of(None, dir)
}

fn pressure_of(kept: Option<&Kept>, dir: &Path) -> Pressure {
    let suffix = if dir == Path::new("/proc/pressure") { "" } else { ".pressure" };
    let cpu = read_via(kept, dir, &format!("cpu{suffix}")).unwrap_or_default();
    let mem = read_via(kept, dir, &format!("memory{suffix}")).unwrap_or_default();
    let io = read_via(kept, dir, &format!("io{suffix}")).unwrap_or_default();
    Pressure {
        cpu_some_us: psi_total_us(&cpu, "some"),
        memory_some_us: psi_total_us(&mem, "some"),
        memory_full_us: psi_total_us(&mem, "full"),
        io_some_us: psi_total_us(&io, "some"),
        io_full_us: psi_total_us(&io, "full"),
    }
}

/// Whether two groups are the same or one contains the other: then a limit on one acts on the
/// tasks of both.
pub fn shares(a: &Group, b: &Group) -> bool {
    a.dir.starts_with(&b.dir) || b.dir.starts_with(&a.dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_freezer_holding_a_process_is_found_in_either_version() {
        let root = std::env::temp_dir().join(format!("procwatch-freezer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (v2, v1) = (root.join("unified"), root.join("freezer"));
        std::fs::create_dir_all(v2.join("pods/app")).unwrap();
        std::fs::create_dir_all(v1.join("docker/abc")).unwrap();
        let mounts = vec![
            ("cgroup2".to_string(), "rw".to_string(), v2.clone()),
            ("cgroup".to_string(), "rw,freezer".to_string(), v1.clone()),
        ];
        let v2_only = "6:freezer:/\n0::/pods/app\n";
        std::fs::write(v2.join("pods/app/cgroup.freeze"), "0\n").unwrap();
        assert_eq!(frozen_in(v2_only, &mounts), None);
        // Frozen at the parent: the child inherits it.
        std::fs::write(v2.join("pods/cgroup.freeze"), "1\n").unwrap();
        assert_eq!(
            frozen_in(v2_only, &mounts),
            Some(Frozen { version: Version::V2, path: "/pods".into(), state: "1".into() })
        );
        let v1_only = "6:freezer:/docker/abc\n";
        std::fs::write(v1.join("docker/abc/freezer.state"), "THAWED\n").unwrap();
        assert_eq!(frozen_in(v1_only, &mounts), None);
        std::fs::write(v1.join("docker/abc/freezer.state"), "FROZEN\n").unwrap();
        std::fs::write(v1.join("docker/abc/freezer.self_freezing"), "1\n").unwrap();
        assert_eq!(
            frozen_in(v1_only, &mounts),
            Some(Frozen {
                version: Version::V1,
                path: "/docker/abc".into(),
                state: "FROZEN".into()
            })
        );
        assert_eq!(frozen_in("garbage", &mounts), None);
        // The root group is never frozen: its files (none in the kernel's) are not read.
        std::fs::write(v2.join("cgroup.freeze"), "1\n").unwrap();
        std::fs::write(v1.join("freezer.state"), "FROZEN\n").unwrap();
        assert_eq!(frozen_in("6:freezer:/\n0::/\n", &mounts), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn finds_each_controllers_directory_in_a_hybrid_hierarchy() {
        let mounts = vec![
            ("cgroup".to_string(), "rw,cpu".to_string(), PathBuf::from("/sys/fs/cgroup/cpu")),
            ("cgroup".to_string(), "rw,memory".to_string(), PathBuf::from("/sys/fs/cgroup/memory")),
            ("cgroup2".to_string(), "rw".to_string(), PathBuf::from("/nonexistent/unified")),
        ];
        let c = parse("4:memory:/jobs/a\n1:cpu:/\n0::/jobs/a\n", &mounts);
        assert_eq!(c.memory.as_ref().unwrap().dir, PathBuf::from("/sys/fs/cgroup/memory/jobs/a"));
        assert_eq!(c.memory.as_ref().unwrap().version, Version::V1);
        assert_eq!(c.cpu.as_ref().unwrap().dir, PathBuf::from("/sys/fs/cgroup/cpu"));
        assert_eq!(c.unified.as_ref().unwrap().dir, PathBuf::from("/nonexistent/unified/jobs/a"));
        assert!(shares(
            c.cpu.as_ref().unwrap(),
            &Group { dir: "/sys/fs/cgroup/cpu/x".into(), version: Version::V1, path: "/x".into() }
        ));
    }

    #[test]
    fn reads_the_kernel_formats() {
        let t = throttling("nr_periods 10\nnr_throttled 3\nthrottled_usec 1500\n");
        assert_eq!(t, Throttling { nr_periods: 10, nr_throttled: 3, throttled_ns: 1_500_000 });
        assert_eq!(
            throttling("nr_periods 10\nnr_throttled 3\nthrottled_time 999\n").throttled_ns,
            999
        );
        let psi = "some avg10=3.19 avg60=2.42 avg300=0.68 total=2381711\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=77\n";
        assert_eq!(
            (psi_total_us(psi, "some"), psi_total_us(psi, "full")),
            (Some(2381711), Some(77))
        );
        // This machine: the process's own groups, whichever version holds them.
        let me = of(0);
        assert!(me.cpu.is_some() || me.unified.is_some(), "{me:?}");
        if let Some(m) = &me.memory {
            assert!(m.memory().is_some_and(|s| s.usage > 0), "{m:?}");
        }
        assert!(
            pressure_in(Path::new("/proc/pressure")).cpu_some_us.is_some(),
            "this kernel has PSI"
        );
    }
}
