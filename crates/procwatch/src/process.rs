//! Who a process is, as `ps` and the container runtime would name it: its command, command line,
//! user, parent chain, cgroup and the container that cgroup names. Used to say who set a stall
//! off (the tool that asked the JVM for a heap dump, the process that sent SIGSTOP, the
//! neighbours that took the CPUs).
//!
//! Invariant: only `/proc` and `/etc/passwd` are read; a process gone, or another user's without
//! privilege, gives what could be read (at least its pid), never a guess.

use serde::{Deserialize, Serialize};

/// The most command-line arguments and bytes kept (a JVM's class path can be megabytes).
const MAX_ARGS: usize = 32;
const MAX_ARG_BYTES: usize = 512;
/// The most ancestors followed (a process tree is shallow; this bounds a loop in a bad read).
const MAX_ANCESTORS: usize = 8;

/// One process, named.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: i32,
    /// Its `comm` (up to 15 bytes, as `ps -o comm` shows it).
    pub comm: String,
    /// Its command line, shortened: at most 32 arguments of 512 bytes each.
    pub cmdline: Vec<String>,
    pub uid: Option<u32>,
    /// The user's name, from the host's `/etc/passwd`.
    pub user: Option<String>,
    pub ppid: Option<i32>,
    /// Its parents, nearest first, up to init or 8 of them: `(pid, comm)`.
    pub ancestors: Vec<(i32, String)>,
    /// Its cgroup (the v2 group, or on a hybrid host the CPU controller's when the v2 group is
    /// the root), as `/proc/PID/cgroup` says it.
    pub cgroup: String,
    /// The container it runs in, when its cgroup names one: by its pod's names where the
    /// runtime's bundle gives them (`pod shop/orders-7d4b…, container orders-api (containerd
    /// 65d5a9da8c0f)`), else as the cgroup says it (`docker 3f2a…`, `pod 5c1d…, containerd 9e8b…`).
    pub container: Option<String>,
    /// Its start in clock ticks since boot: with the pid, it names this process and no later one.
    pub starttime: u64,
}

impl ProcessInfo {
    /// `jcmd (pid 4242, user root)`, the way a report names it.
    pub fn label(&self) -> String {
        label(&self.comm, self.pid, self.user.as_deref())
    }

    /// The command line as one line, shell-like (arguments with spaces quoted).
    pub fn command(&self) -> String {
        command_line(&self.cmdline)
    }
}

/// `jcmd (pid 4242, user root)`: a process the way a report names it.
pub fn label(comm: &str, pid: i32, user: Option<&str>) -> String {
    let name = if comm.is_empty() { "?" } else { comm };
    match user {
        Some(u) => format!("{name} (pid {pid}, user {u})"),
        None => format!("{name} (pid {pid})"),
    }
}

/// A command line as one line, shell-like (arguments with spaces quoted).
pub fn command_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// This executable, to start its own helpers as child processes: `/proc/self/exe`, which a
/// child's exec resolves to the very file running, even after it was replaced or removed (a
/// package upgrade, a rebuild) while a long run was going; `current_exe()`'s path would then
/// name nothing, or a newer binary.
pub fn own_exe() -> std::io::Result<std::path::PathBuf> {
    let proc = std::path::PathBuf::from("/proc/self/exe");
    if proc.exists() {
        return Ok(proc);
    }
    std::env::current_exe()
}

/// Fields of `/proc/PID/stat` after its `comm`: (comm, state, ppid, starttime).
pub fn parse_stat_head(stat: &str) -> Option<(String, char, i32, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let state = rest.first()?.chars().next()?;
    let ppid = rest.get(1)?.parse().ok()?;
    // Field 22 of stat is the 20th after the comm.
    let starttime = rest.get(19)?.parse().ok()?;
    Some((comm, state, ppid, starttime))
}

/// The real uid of a process, from its `status`.
pub fn uid_of(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Uid:"))?.split_whitespace().next()?.parse().ok()
}

/// A user's name from a `passwd` file's text.
pub fn user_in(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let id: u32 = f.nth(1)?.parse().ok()?;
        (id == uid && !name.is_empty()).then(|| name.to_string())
    })
}

/// A user's name on this host.
pub fn user_name(uid: u32) -> Option<String> {
    user_in(&std::fs::read_to_string("/etc/passwd").ok()?, uid)
}

/// The container a cgroup path names, in the runtime's own words: Docker's and containerd's
/// and CRI-O's scopes under systemd (`docker-<id>.scope`, `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`), their cgroupfs layouts (`/docker/<id>`, `/kubepods/…/pod<uid>/<id>`),
/// and a Kubernetes pod's UID. Ids are cut to 12 characters, as `docker ps` shows them.
pub fn container_of(cgroup: &str) -> Option<String> {
    let ids = crate::pods::ids_in_cgroup(cgroup);
    let container = ids
        .container_id
        .map(|id| format!("{} {}", ids.runtime.unwrap_or("container"), crate::pods::short_id(&id)));
    match (ids.pod_uid, container) {
        (Some(p), Some(c)) => Some(format!("pod {p}, {c}")),
        (Some(p), None) => Some(format!("pod {p}")),
        (None, c) => c,
    }
}

/// The container `pid` runs in, given its cgroup: named by its pod where the runtime's bundle
/// names it (`crate::pods::of`, read once a process by a [`Describer`]), else [`container_of`].
fn container_named(pid: i32, cgroup: &str) -> Option<String> {
    let pod = crate::pods::of(pid, cgroup).filter(|p| !p.name.is_empty());
    pod.map(|p| p.describe()).or_else(|| container_of(cgroup))
}

/// The command line of `pid`, its secrets hidden (before it is cut: a URL cut before its `@`
/// would no longer read as one), shortened as [`ProcessInfo::cmdline`] is.
fn short_cmdline(pid: i32) -> Vec<String> {
    crate::redact::command_line(crate::jvms::cmdline(pid))
        .into_iter()
        .take(MAX_ARGS)
        .map(|mut a| {
            if a.len() > MAX_ARG_BYTES {
                let mut cut = MAX_ARG_BYTES;
                while !a.is_char_boundary(cut) {
                    cut -= 1;
                }
                a.truncate(cut);
                a.push('…');
            }
            a
        })
        .collect()
}

/// The cgroup that names a process: its v2 group, unless that is the root and its CPU
/// controller's (v1, on a hybrid host) is not, then that one.
pub fn cgroup_path(g: &crate::cgroup::Cgroups) -> String {
    let path = |x: Option<&crate::cgroup::Group>| x.map(|g| g.path.clone()).filter(|p| p != "/");
    path(g.unified.as_ref())
        .or_else(|| path(g.cpu.as_ref()))
        .or_else(|| g.unified.as_ref().or(g.cpu.as_ref()).map(|g| g.path.clone()))
        .unwrap_or_default()
}

/// Who `pid` is: `None` only when it is gone (or never was).
pub fn describe(pid: i32) -> Option<ProcessInfo> {
    Describer::default().describe(pid)
}

/// Names processes again and again at little cost: the cgroup mounts and the users read once,
/// and each process (by pid and start time: a pid reused is a new process) described once.
#[derive(Default)]
pub struct Describer {
    mounts: Option<Vec<(String, String, std::path::PathBuf)>>,
    passwd: Option<String>,
    known: std::collections::HashMap<(i32, u64), ProcessInfo>,
}

/// Processes a [`Describer`] remembers before it forgets them all.
const MAX_KNOWN: usize = 512;

impl Describer {
    /// Who `pid` is now; `None` only when it is gone.
    pub fn describe(&mut self, pid: i32) -> Option<ProcessInfo> {
        let stat = crate::procfile::read(format!("/proc/{pid}/stat")).ok()?;
        let (comm, _, ppid, starttime) = parse_stat_head(&stat)?;
        let mounts = self.mounts.get_or_insert_with(crate::cgroup::mounts);
        let cgroup = cgroup_path(&crate::cgroup::parse(
            &crate::procfile::read(format!("/proc/{pid}/cgroup")).unwrap_or_default(),
            mounts,
        ));
        if let Some(p) = self.known.get_mut(&(pid, starttime)) {
            // Its name changes with an exec: then it is described again. Its cgroup can change
            // at any time (a process moved into a container's or a slice's group), so it is
            // read at each look.
            if p.comm == comm || comm == "exe" {
                if p.cgroup != cgroup {
                    p.container = container_named(pid, &cgroup);
                    p.cgroup = cgroup;
                }
                return Some(p.clone());
            }
        }
        // A program started through /proc/self/exe (stallscope's own helpers, many launchers)
        // is named `exe`: its executable's name says who it is.
        let comm = if comm == "exe" {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or(comm)
        } else {
            comm
        };
        let uid =
            crate::procfile::read(format!("/proc/{pid}/status")).ok().and_then(|s| uid_of(&s));
        let mut ancestors = Vec::new();
        let mut up = ppid;
        while up > 0 && ancestors.len() < MAX_ANCESTORS {
            let Some((c, _, p, _)) = crate::procfile::read(format!("/proc/{up}/stat"))
                .ok()
                .and_then(|s| parse_stat_head(&s))
            else {
                break;
            };
            ancestors.push((up, c));
            if p == up {
                break;
            }
            up = p;
        }
        let user = uid.and_then(|u| {
            let found = self.passwd.as_deref().and_then(|t| user_in(t, u));
            found.or_else(|| {
                // Read again: a user added since.
                self.passwd = std::fs::read_to_string("/etc/passwd").ok();
                self.passwd.as_deref().and_then(|t| user_in(t, u))
            })
        });
        let p = ProcessInfo {
            pid,
            comm,
            cmdline: short_cmdline(pid),
            uid,
            user,
            ppid: Some(ppid),
            ancestors,
            container: container_named(pid, &cgroup),
            cgroup,
            starttime,
        };
        if self.known.len() >= MAX_KNOWN {
            self.known.clear();
        }
        self.known.insert((pid, starttime), p.clone());
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_heads_are_read_past_a_comm_with_spaces_and_parentheses() {
        let s =
            "4242 (java (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 10 5 0 0 20 0 30 0 123456 0 0";
        assert_eq!(parse_stat_head(s), Some(("java (x) y".into(), 'S', 1, 123456)));
        assert_eq!(parse_stat_head("garbage"), None);
        assert_eq!(parse_stat_head("1 (a) S"), None);
    }

    #[test]
    fn users_and_uids_are_read_from_their_files() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nops:x:1001:1001::/home/ops:/bin/sh\nbad\n";
        assert_eq!(user_in(passwd, 1001).as_deref(), Some("ops"));
        assert_eq!(user_in(passwd, 0).as_deref(), Some("root"));
        assert_eq!(user_in(passwd, 7), None);
        assert_eq!(uid_of("Name:\tx\nUid:\t1001\t1001\t1001\t1001\n"), Some(1001));
    }

    #[test]
    fn containers_are_named_from_every_runtime_layout() {
        let id = "3f2a9c1d5e7b8a6c4d2e0f1a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c";
        assert_eq!(
            container_of(&format!("/system.slice/docker-{id}.scope")).as_deref(),
            Some("docker 3f2a9c1d5e7b")
        );
        assert_eq!(container_of(&format!("/docker/{id}")).as_deref(), Some("docker 3f2a9c1d5e7b"));
        assert_eq!(
            container_of(&format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5c1d2e3f_4a5b_6c7d_8e9f_0a1b2c3d4e5f.slice/cri-containerd-{id}.scope"
            ))
            .as_deref(),
            Some("pod 5c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f, containerd 3f2a9c1d5e7b")
        );
        assert_eq!(
            container_of(&format!(
                "/kubepods/besteffort/pod5c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f/{id}"
            ))
            .as_deref(),
            Some("pod 5c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f, container 3f2a9c1d5e7b")
        );
        assert_eq!(container_of("/user.slice/user-1000.slice/session-3.scope"), None);
        assert_eq!(container_of("/"), None);
    }

    #[test]
    fn a_process_s_secrets_never_reach_its_description() {
        // A real process whose command line carries a password, a token and a URL's password.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "sleep 30",
                "--password=hunter2",
                "--token",
                "hunter2",
                "jdbc:postgresql://app:hunter2@db/x",
            ])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Until it has exec'd (its command line is the shell's).
        let mut seen = None;
        for _ in 0..500 {
            seen = describe(pid).filter(|p| p.cmdline.first().is_some_and(|a| a == "sh"));
            if seen.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
        let seen = seen.expect("the child");
        assert!(seen.cmdline.len() >= 6, "{:?}", seen.cmdline);
        assert!(!seen.command().contains("hunter2"), "{}", seen.command());
        assert!(seen.command().contains("--password=*** --token ***"), "{}", seen.command());
    }

    #[test]
    fn this_process_is_described_and_a_gone_one_is_none() {
        let me = describe(std::process::id() as i32).expect("this process");
        assert_eq!(me.pid, std::process::id() as i32);
        assert!(!me.comm.is_empty() && !me.cmdline.is_empty());
        assert!(!me.ancestors.is_empty(), "the test runner has a parent");
        assert_eq!(me.uid, Some(unsafe { libc::getuid() }));
        assert!(me.label().contains(&format!("pid {}", me.pid)));
        assert_eq!(describe(i32::MAX), None);
        let mut d = Describer::default();
        assert_eq!(d.describe(me.pid), Some(me.clone()), "the same, described once");
        assert_eq!(d.describe(me.pid), Some(me), "and remembered");
    }
}
