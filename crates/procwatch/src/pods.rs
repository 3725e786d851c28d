//! Which Kubernetes pod and container a process runs in, found from the node alone: the
//! process's cgroup path gives the container's id and its pod's UID (the cgroupfs and the systemd
//! drivers' layouts, cgroup v1 and v2 alike); the OCI bundle the CRI runtime wrote for that
//! container gives the names, in the annotations containerd's CRI plugin and CRI-O put there
//! (`io.kubernetes.cri.sandbox-name`…, `io.kubernetes.pod.name`…). The bundle is found through
//! the container's shim (`containerd-shim-runc-v2`'s working directory is its pod's bundle;
//! `conmon` names its bundle with `-b`), else at the runtimes' default state directories, always
//! read through `/proc/PID/root`, so a watcher in a pod of its own (hostPID) reads the node's.
//!
//! Invariant: this only reads files. It never asks the runtime's socket, which a wedged runtime
//! would leave unanswered (the observer must not be held by the observed) and which grants
//! control of every container on the node to whoever can connect (a read-only mount does not
//! stop that). Without a bundle, what the cgroup says (pod UID, container id) is all that is
//! given, and said to be so.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The pod and container a process runs in, as far as the node tells.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Pod {
    /// The pod's namespace and name, empty when no bundle named them.
    pub namespace: String,
    pub name: String,
    /// The pod's UID, empty when neither the cgroup nor the bundle gave it.
    pub uid: String,
    /// The container's name in the pod spec, empty when no bundle named it.
    pub container: String,
    /// The runtime's full id of the container.
    pub container_id: String,
    /// `containerd`, `cri-o`, `docker`, `podman`, or empty when the cgroup does not say.
    pub runtime: String,
    /// Where the names were read (the bundle's `config.json`), empty when only the cgroup spoke.
    pub source: String,
}

impl Pod {
    /// Where a process runs, in one line for a report: `pod shop/orders-…, container orders-api
    /// (containerd 65d5a9da8c0f)`, or what the cgroup alone said.
    pub fn describe(&self) -> String {
        let id = short_id(&self.container_id);
        let runtime =
            if self.runtime.is_empty() { String::new() } else { format!("{} ", self.runtime) };
        if !self.name.is_empty() {
            format!(
                "pod {}/{}, container {} ({runtime}{id})",
                self.namespace,
                self.name,
                self.container_label()
            )
        } else if !self.uid.is_empty() {
            format!("pod uid {}, container {runtime}{id} (no runtime bundle named them)", self.uid)
        } else {
            format!("container {runtime}{id}")
        }
    }

    /// The workload the pod belongs to, from its name: see [`workload_of`].
    pub fn workload(&self) -> String {
        workload_of(&self.name)
    }

    /// The container's name, else its id cut to 12 characters (as `crictl ps` shows it).
    pub fn container_label(&self) -> String {
        if self.container.is_empty() {
            short_id(&self.container_id)
        } else {
            self.container.clone()
        }
    }
}

/// A container id cut to 12 characters, as `docker ps` and `crictl ps` show it.
pub fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

/// What a cgroup path says of a container: its runtime, its id, and its pod's UID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupIds {
    pub runtime: Option<&'static str>,
    /// The container id as the path spells it (64 hex digits in every runtime's layout).
    pub container_id: Option<String>,
    /// The pod's UID with dashes (the systemd driver spells them as underscores).
    pub pod_uid: Option<String>,
}

/// A pod UID as the kubelet writes it: a UUID (36 characters, dashes at 8, 13, 18 and 23), or
/// 32 hex digits (a static pod's, from its manifest's hash).
fn pod_uid(s: &str) -> bool {
    let hex = |c: char| c.is_ascii_hexdigit();
    match s.len() {
        36 => s
            .char_indices()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { hex(c) }),
        32 => s.chars().all(hex),
        _ => false,
    }
}

/// The ids in a cgroup path: Kubernetes' pod level (`pod<uid>` under the cgroupfs driver,
/// `kubepods-<qos>-pod<uid>.slice` under systemd's), and the container below it in each
/// runtime's words (`cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope`,
/// `libpod-<id>.scope` under systemd; `…-pod<uid>.slice:cri-containerd:<id>` where the kubelet
/// uses systemd's driver and the runtime cgroupfs'; a bare id, or `crio-<id>`, under cgroupfs).
pub fn ids_in_cgroup(path: &str) -> CgroupIds {
    let hex = |s: &str| s.len() >= 12 && s.chars().all(|c| c.is_ascii_hexdigit());
    let mut ids = CgroupIds::default();
    let mut parent = "";
    for part in path.split('/').filter(|p| !p.is_empty()) {
        // `<slice>:<runtime>:<id>`: the systemd driver's slice, then the container in it.
        let mut fields = part.split(':');
        let head = fields.next().unwrap_or_default();
        let p = head.strip_suffix(".scope").unwrap_or(head);
        let p = p.strip_suffix(".slice").unwrap_or(p);
        if let Some(uid) = p.rsplit_once("-pod").map(|x| x.1).or_else(|| p.strip_prefix("pod")) {
            let uid = uid.replace('_', "-");
            if pod_uid(&uid) {
                ids.pod_uid = Some(uid);
            }
        }
        if let (Some(runtime), Some(id)) = (fields.next(), fields.next()) {
            if hex(id) {
                let runtime = match runtime {
                    "cri-containerd" => "containerd",
                    "crio" => "cri-o",
                    "docker" => "docker",
                    _ => "",
                };
                ids.runtime = (!runtime.is_empty()).then_some(runtime);
                ids.container_id = Some(id.to_string());
            }
            parent = part;
            continue;
        }
        // conmon's own group (`crio-conmon-<id>.scope`) is the monitor's, not the container's.
        if p.starts_with("crio-conmon-") {
            parent = part;
            continue;
        }
        let mut named = false;
        for (prefix, runtime) in [
            ("docker-", "docker"),
            ("cri-containerd-", "containerd"),
            ("crio-", "cri-o"),
            ("libpod-", "podman"),
        ] {
            if let Some(id) = p.strip_prefix(prefix).filter(|id| hex(id)) {
                (ids.runtime, ids.container_id, named) =
                    (Some(runtime), Some(id.to_string()), true);
            }
        }
        if !named && hex(p) && p.len() == 64 {
            ids.container_id = Some(p.to_string());
            // A bare id right under `docker/` is Docker's; under a pod, the bundle says whose.
            ids.runtime = (parent == "docker").then_some("docker");
        }
        parent = part;
    }
    ids
}

/// The names in an OCI runtime config's annotations, as containerd's CRI plugin and CRI-O write
/// them: (namespace, pod name, pod UID, container name). Each runtime's own keys are read, by
/// which of the two marks the container's type. `None` when the config is no JSON or names no
/// pod (a container started outside Kubernetes, or a pod's sandbox).
pub fn names_in_config(json: &str) -> Option<(String, String, String, String)> {
    #[derive(Deserialize)]
    struct Config {
        #[serde(default)]
        annotations: std::collections::HashMap<String, String>,
    }
    let c: Config = serde_json::from_str(json).ok()?;
    let a = |k: &str| c.annotations.get(k).cloned().unwrap_or_default();
    let (kind, names) = if c.annotations.contains_key("io.kubernetes.cri.container-type") {
        (
            a("io.kubernetes.cri.container-type"),
            (
                a("io.kubernetes.cri.sandbox-namespace"),
                a("io.kubernetes.cri.sandbox-name"),
                a("io.kubernetes.cri.sandbox-uid"),
                a("io.kubernetes.cri.container-name"),
            ),
        )
    } else {
        (
            a("io.kubernetes.cri-o.ContainerType"),
            (
                a("io.kubernetes.pod.namespace"),
                a("io.kubernetes.pod.name"),
                a("io.kubernetes.pod.uid"),
                a("io.kubernetes.container.name"),
            ),
        )
    };
    (kind != "sandbox" && !names.1.is_empty()).then_some(names)
}

/// The workload a pod's name comes from: the name less the suffixes its controller adds. A
/// ReplicaSet's (a Deployment's) pods end in `-<pod-template-hash>-<5>`, a DaemonSet's and a
/// Job's in `-<5>`, a StatefulSet's in `-<ordinal>`; the generated parts use only the
/// characters Kubernetes generates names from (no vowels, no 0, 1 or 3). A name with no such
/// suffix is its own workload. A heuristic: the pod's owner is not on the node, and a name can
/// look generated without being so (a static pod `etcd-node-1` reads as workload `etcd-node`).
pub fn workload_of(pod: &str) -> String {
    const GENERATED: &str = "bcdfghjklmnpqrstvwxz2456789";
    let generated = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.chars().all(|c| GENERATED.contains(c))
    };
    let Some((head, tail)) = pod.rsplit_once('-').filter(|(h, _)| !h.is_empty()) else {
        return pod.to_string();
    };
    if generated(tail, 5, 5) {
        // A Deployment's pod: its ReplicaSet's hash too; a CronJob's: the Job's minute stamp; an
        // indexed Job's: the index.
        if let Some((h2, t2)) = head.rsplit_once('-').filter(|(h, _)| !h.is_empty())
            && (generated(t2, 6, 10) && t2.chars().any(|c| c.is_ascii_alphabetic())
                || !t2.is_empty() && t2.chars().all(|c| c.is_ascii_digit()))
        {
            return h2.to_string();
        }
        return head.to_string();
    }
    if !tail.is_empty() && tail.len() <= 5 && tail.chars().all(|c| c.is_ascii_digit()) {
        return head.to_string();
    }
    pod.to_string()
}

/// The pod and container `pid` runs in: `None` when none of its cgroups names a container.
/// Every hierarchy's line is read (on a hybrid host a container may be named in the v1
/// controllers' and not in the v2 one's). The names come from the runtime's bundle when found.
pub fn of_pid(pid: i32) -> Option<Pod> {
    let lines = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    lines.lines().filter_map(|l| l.splitn(3, ':').nth(2)).find_map(|path| of(pid, path))
}

/// The pod and container `pid` runs in, given its cgroup path: `None` when the path names no
/// container. The names come from the runtime's bundle when one is found.
pub fn of(pid: i32, cgroup: &str) -> Option<Pod> {
    let ids = ids_in_cgroup(cgroup);
    let id = ids.container_id.clone()?;
    let mut pod = Pod {
        uid: ids.pod_uid.clone().unwrap_or_default(),
        container_id: id.clone(),
        runtime: ids.runtime.unwrap_or_default().to_string(),
        ..Pod::default()
    };
    for (config, runtime) in bundle_configs(pid, &id) {
        let Some(text) = read_small(&config) else { continue };
        if let Some((namespace, name, uid, container)) = names_in_config(&text) {
            pod.namespace = namespace;
            pod.name = name;
            if !uid.is_empty() {
                pod.uid = uid;
            }
            pod.container = container;
            if pod.runtime.is_empty() {
                pod.runtime = runtime.to_string();
            }
            pod.source = config.display().to_string();
            break;
        }
    }
    Some(pod)
}

/// A config.json of at most a few megabytes (a bundle's is tens of kilobytes), and only a
/// regular file: opened without blocking and without following a last symlink, so that nothing
/// a container puts in a path can hold the watcher (a FIFO) or send it elsewhere.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let mut s = String::new();
    f.take(4 << 20).read_to_string(&mut s).ok()?;
    Some(s)
}

/// A process's `comm` and parent, from its `stat`.
fn comm_and_parent(pid: i32) -> Option<(String, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let ppid = stat.get(close + 1..)?.split_whitespace().nth(1)?.parse().ok()?;
    Some((stat.get(open + 1..close)?.to_string(), ppid))
}

/// Where the bundle of container `id` may be, most likely first: beside the sandbox's bundle
/// its containerd shim runs in, or where its CRI-O `conmon` says, then the runtimes' defaults.
/// Only the first ancestor outside the container (its cgroups no longer name the id) is asked:
/// a process inside it, whatever its name, is the container's own and could say anything.
fn bundle_configs(pid: i32, id: &str) -> Vec<(PathBuf, &'static str)> {
    let mut out = Vec::new();
    let mut p = pid;
    for _ in 0..64 {
        let Some((comm, ppid)) = comm_and_parent(p) else { break };
        let inside =
            std::fs::read_to_string(format!("/proc/{p}/cgroup")).is_ok_and(|c| c.contains(id));
        if inside {
            if ppid <= 1 {
                break;
            }
            p = ppid;
            continue;
        }
        let root = PathBuf::from(format!("/proc/{p}/root"));
        if comm.starts_with("containerd-shim") {
            if let Ok(cwd) = std::fs::read_link(format!("/proc/{p}/cwd")) {
                let cwd = cwd.strip_prefix("/").unwrap_or(&cwd).to_path_buf();
                // runc v2 shims serve a pod from the sandbox's bundle; v1 shims one container.
                if let Some(parent) = cwd.parent() {
                    out.push((root.join(parent).join(id).join("config.json"), "containerd"));
                }
                out.push((root.join(&cwd).join("config.json"), "containerd"));
            }
        } else if comm == "conmon" {
            let args = crate::jvms::cmdline(p);
            let bundle = args
                .windows(2)
                .find(|w| w[0] == "-b" || w[0] == "--bundle")
                .map(|w| w[1].clone())
                .or_else(|| {
                    args.iter().find_map(|a| a.strip_prefix("--bundle=").map(String::from))
                });
            if let Some(b) = bundle {
                out.push((root.join(b.trim_start_matches('/')).join("config.json"), "cri-o"));
            }
        }
        break;
    }
    for (dir, runtime) in [
        ("run/containerd/io.containerd.runtime.v2.task/k8s.io", "containerd"),
        ("run/containerd/io.containerd.runtime.v1.linux/k8s.io", "containerd"),
        ("run/containers/storage/overlay-containers", "cri-o"),
    ] {
        let d = Path::new("/proc/1/root").join(dir).join(id);
        let config =
            if runtime == "cri-o" { d.join("userdata/config.json") } else { d.join("config.json") };
        out.push((config, runtime));
    }
    // Only a directory named by the id is this container's bundle.
    let userdata = Path::new(id).join("userdata");
    out.retain(|(c, _)| c.parent().is_some_and(|d| d.ends_with(id) || d.ends_with(&userdata)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "65d5a9da8c0fcdd09e237df6405cae50f6f016b0b72cfdd755635648f08dfe1e";
    const UID: &str = "0b6f1c2e-3d4a-4e5f-8a9b-1c2d3e4f5a6b";

    #[test]
    fn every_driver_and_runtime_layout_gives_the_container_and_its_pod() {
        let u = UID.replace('-', "_");
        for (path, runtime) in [
            (format!("/kubepods/besteffort/pod{UID}/{ID}"), None),
            (format!("/kubepods/pod{UID}/{ID}"), None),
            (format!("/kubepods/burstable/pod{UID}/crio-{ID}"), Some("cri-o")),
            (
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
                ),
                Some("containerd"),
            ),
            (format!("/kubepods.slice/kubepods-pod{u}.slice/crio-{ID}.scope"), Some("cri-o")),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice/docker-{ID}.scope"
                ),
                Some("docker"),
            ),
        ] {
            let ids = ids_in_cgroup(&path);
            assert_eq!(ids.container_id.as_deref(), Some(ID), "{path}");
            assert_eq!(ids.pod_uid.as_deref(), Some(UID), "{path}");
            assert_eq!(ids.runtime, runtime, "{path}");
        }
        let conmon =
            ids_in_cgroup(&format!("/kubepods.slice/kubepods-pod{u}.slice/crio-conmon-{ID}.scope"));
        assert_eq!((conmon.container_id, conmon.pod_uid.as_deref()), (None, Some(UID)));
        let docker = ids_in_cgroup(&format!("/docker/{ID}"));
        assert_eq!(
            (docker.container_id.as_deref(), docker.runtime, docker.pod_uid),
            (Some(ID), Some("docker"), None)
        );
        for none in
            ["/", "/user.slice/user-1000.slice/session-2.scope", "/system.slice/app.service"]
        {
            assert_eq!(ids_in_cgroup(none), CgroupIds::default(), "{none}");
        }
    }

    #[test]
    fn the_names_come_from_containerds_and_cri_os_annotations_and_a_sandbox_names_none() {
        let containerd = format!(
            r#"{{"ociVersion":"1.0.2","annotations":{{"io.kubernetes.cri.container-name":"orders-api","io.kubernetes.cri.container-type":"container","io.kubernetes.cri.sandbox-name":"orders-7d4b9c6f5-x2k8q","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-uid":"{UID}"}}}}"#
        );
        let want = (
            "shop".to_string(),
            "orders-7d4b9c6f5-x2k8q".to_string(),
            UID.to_string(),
            "orders-api".to_string(),
        );
        assert_eq!(names_in_config(&containerd), Some(want.clone()));
        let crio = format!(
            r#"{{"annotations":{{"io.kubernetes.cri-o.ContainerType":"container","io.kubernetes.pod.name":"orders-7d4b9c6f5-x2k8q","io.kubernetes.pod.namespace":"shop","io.kubernetes.pod.uid":"{UID}","io.kubernetes.container.name":"orders-api"}}}}"#
        );
        assert_eq!(names_in_config(&crio), Some(want));
        // CRI-O's own keys count on CRI-O, whatever else a pod's annotations passed through.
        let passed = crio.replace(
            "\"annotations\":{",
            "\"annotations\":{\"io.kubernetes.cri.sandbox-name\":\"forged\",",
        );
        assert_eq!(
            names_in_config(&passed).map(|n| n.1),
            Some("orders-7d4b9c6f5-x2k8q".to_string())
        );
        let sandbox = r#"{"annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-name":"p"}}"#;
        assert_eq!(names_in_config(sandbox), None);
        for bad in ["", "{", "[]", r#"{"annotations":7}"#, r#"{"annotations":{}}"#] {
            assert_eq!(names_in_config(bad), None, "{bad}");
        }
    }

    #[test]
    fn workloads_are_pod_names_less_their_controllers_suffixes() {
        for (pod, workload) in [
            ("orders-7d4b9c6f5-x2k8q", "orders"),
            ("payments-api-5f8d7c9b4d-2m4zt", "payments-api"),
            ("node-exporter-7xq2z", "node-exporter"),
            ("kafka-2", "kafka"),
            ("nightly-report-29360160-4gq7s", "nightly-report"),
            ("batch-3-7xq2z", "batch"),
            ("standalone", "standalone"),
            ("my-app", "my-app"),
            ("web-aeiou", "web-aeiou"),
            ("-7xq2z", "-7xq2z"),
            ("", ""),
        ] {
            assert_eq!(workload_of(pod), workload, "{pod}");
        }
    }

    #[test]
    fn this_process_is_in_no_pod_and_its_parent_is_read() {
        let me = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        for line in me.lines() {
            let path = line.splitn(3, ':').nth(2).unwrap_or("");
            assert!(ids_in_cgroup(path).pod_uid.is_none(), "{line}");
        }
        let (comm, ppid) = comm_and_parent(std::process::id() as i32).unwrap();
        assert!(!comm.is_empty() && ppid > 0);
        assert_eq!(of(std::process::id() as i32, "/user.slice"), None);
        assert_eq!(of_pid(std::process::id() as i32), None);
    }

    /// Only a regular file is read: a FIFO (which would block an open for reading) or a symlink
    /// a container put where its bundle is looked for is refused at once.
    #[test]
    fn a_fifo_or_a_symlink_in_place_of_a_config_is_refused_without_blocking() {
        let d = std::env::temp_dir().join(format!("pods-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_small(&fifo), None);
        let real = d.join("config.json");
        std::fs::write(&real, "{}").unwrap();
        std::os::unix::fs::symlink(&real, d.join("link")).unwrap();
        assert_eq!(read_small(&d.join("link")), None);
        assert_eq!(read_small(&real).as_deref(), Some("{}"));
        let _ = std::fs::remove_dir_all(&d);
    }

    proptest! {
        #[test]
        fn any_cgroup_path_or_config_is_read_without_a_panic(path in "(/[a-z0-9_.:-]{0,70}){0,6}", json in ".{0,200}") {
            let ids = ids_in_cgroup(&path);
            if let Some(id) = ids.container_id {
                prop_assert!(path.contains(&id));
            }
            let _ = names_in_config(&json);
            let w = workload_of(&path);
            prop_assert!(path.starts_with(&w));
        }
    }
}
