//! A JVM in a Kubernetes pod, on a real container runtime: Debian's containerd with its CRI
//! plugin and runc, driven through the CRI API by `crictl` (cri-tools, built from the Go module
//! proxy by scripts/setup.sh), with an image built here (no registry is reachable). A pod sandbox
//! with a name, a namespace and a UID holds a container running a JVM (Temurin 25 bind-mounted
//! from the host) whose safepoints wait on a counted loop; `watch` on the host names the stall
//! by that pod, namespace and container in its metrics, its event and `report`, and the threads
//! it recorded are the container's.
//!
//! The cgroup layout is the cgroupfs driver's, on this host's cgroup v1 controllers (with the v2
//! hierarchy beside them); the systemd driver needs systemd as init, which this machine lacks
//! (docs/kubernetes/README.md says what was tried). Needs root: it fails without it, as it does
//! when containerd, runc, crictl or gcc is missing. Everything it makes (the runtime and its
//! shims, the pod, its mounts and cgroups) is removed on every exit path.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const IMAGE: &str = "stallscope.test/pause:1";
/// A marker in the JVM's command line, to find it on the host.
const MARK: &str = "67s";
const POD: &str = "orders-7d4b9c6f5-x2k8q";
const NAMESPACE: &str = "shop";
const CONTAINER: &str = "orders-api";

fn tool(name: &str) -> PathBuf {
    let local = root().join("target/tools").join(name);
    if local.exists() {
        return local;
    }
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{name} is needed for the Kubernetes test (scripts/setup.sh installs containerd and runc \
         with apt, and builds crictl into target/tools from sigs.k8s.io/cri-tools)"
    )
}

/// A containerd of this test's own (its root, state and socket in a scratch directory), and
/// everything it made, removed when dropped: pods, shims, mounts, cgroups.
struct Runtime {
    dir: PathBuf,
    sock: PathBuf,
    daemon: Option<Reaper>,
    /// The pod's cgroup, relative to each hierarchy's root.
    pod_cgroup: String,
    /// Its parents' directories (`kubepods`, `kubepods/besteffort`) that did not exist before.
    new_parents: Vec<PathBuf>,
}

impl Runtime {
    fn start(dir: &Path, cgroup_parent: &str) -> Runtime {
        std::fs::create_dir_all(dir).unwrap();
        let sock = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{s}"
[ttrpc]
  address = "{s}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGE}"
  # A sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE; keep ours instead.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state beside the runtime's, not in the host's /run/containerd/runc.
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
"#,
                d = dir.display(),
                s = sock.display()
            ),
        )
        .unwrap();
        // Which levels above the pod's cgroup are new, in every hierarchy, to remove after.
        let pod_cgroup = cgroup_parent.trim_matches('/').to_string();
        let mut new_parents = Vec::new();
        for h in hierarchies() {
            let mut p = h;
            for part in Path::new(&pod_cgroup).parent().into_iter().flat_map(Path::iter) {
                p = p.join(part);
                if !p.exists() {
                    new_parents.push(p.clone());
                }
            }
        }
        let mut daemon = Command::new(tool("containerd"));
        daemon
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("containerd.log")).unwrap());
        // It goes with this test's thread if the test is killed.
        unsafe {
            use std::os::unix::process::CommandExt;
            daemon.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let daemon = daemon.spawn().unwrap();
        let rt = Runtime {
            dir: dir.into(),
            sock,
            daemon: Some(Reaper(daemon)),
            pod_cgroup,
            new_parents,
        };
        let up = poll(Duration::from_secs(30), Duration::from_millis(200), || {
            rt.crictl(&["version"]).ok()
        });
        assert!(up.is_some(), "containerd did not answer: {}", rt.log());
        let image = dir.join("pause.tar");
        let o = Command::new("bash")
            .arg(root().join("crates/stallscope/tests/kubernetes/pause-image.sh"))
            .arg(&image)
            .arg(IMAGE)
            .output()
            .unwrap();
        assert!(o.status.success(), "building the image: {}", String::from_utf8_lossy(&o.stderr));
        rt.import(&image);
        rt
    }

    /// Imports an OCI image archive into this runtime's `k8s.io` namespace (the CRI's).
    fn import(&self, archive: &Path) {
        let o = Command::new(tool("ctr"))
            .arg("--address")
            .arg(&self.sock)
            .args(["-n", "k8s.io", "images", "import"])
            .arg(archive)
            .output()
            .unwrap();
        assert!(o.status.success(), "ctr images import: {}", String::from_utf8_lossy(&o.stderr));
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    /// `crictl ARGS` against this runtime: its standard output, or what it said on failure.
    fn crictl(&self, args: &[&str]) -> Result<String, String> {
        let endpoint = format!("unix://{}", self.sock.display());
        let o = Command::new("timeout")
            .arg("60")
            .arg(tool("crictl"))
            .args(["--runtime-endpoint", &endpoint, "--image-endpoint", &endpoint])
            .args(["--timeout", "30s"])
            .args(args)
            .output()
            .map_err(|e| e.to_string())?;
        let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if o.status.success() {
            Ok(out)
        } else {
            Err(format!("crictl {args:?}: {out} {}", String::from_utf8_lossy(&o.stderr)))
        }
    }

    /// The processes whose command line names this runtime's socket (its shims).
    fn shims(&self) -> Vec<i32> {
        let sock = self.sock.to_string_lossy().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&sock))
            })
            .collect()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.crictl(&["rmp", "--force", "--all"]);
        for pid in self.shims() {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        self.daemon.take();
        empty_pod_cgroups(&self.pod_cgroup);
        for p in self.new_parents.iter().rev() {
            let _ = std::fs::remove_dir(p);
        }
        umount_under(&self.dir.to_string_lossy());
        remove_stale_shim_sockets();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The roots of the cgroup hierarchies: `/sys/fs/cgroup` on a cgroup v2 host, else each v1
/// controller's (and a hybrid host's v2 one) below it.
fn hierarchies() -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return vec![root.to_path_buf()];
    }
    std::fs::read_dir(root).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect()
}

/// Kills whatever is left in a pod's cgroup (`kubepods/besteffort/pod<uid>`, in every hierarchy)
/// and removes it, its containers' groups first; nothing outside that pod is touched.
fn empty_pod_cgroups(pod: &str) {
    for h in hierarchies() {
        let dirs = walk(&h.join(pod));
        for d in &dirs {
            for p in std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default().lines() {
                if let Ok(p) = p.parse::<i32>() {
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
            }
        }
        for d in dirs.iter().rev() {
            // Empty once its processes are dead, which takes a moment.
            poll(Duration::from_secs(10), Duration::from_millis(50), || {
                std::fs::remove_dir(d).ok().or_else(|| (!d.exists()).then_some(()))
            });
        }
    }
}

/// Unmounts what the runtime left mounted under `dir` (a sandbox's shm, a rootfs), deepest first.
fn umount_under(dir: &str) {
    let mut mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(String::from))
        .filter(|m| m.starts_with(dir))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = Command::new("umount").arg("-l").arg(&m).status();
    }
}

/// containerd 1.6 puts its shims' sockets in the host's `/run/containerd/s` whatever its state
/// directory: those no process holds any more (a shim killed) are removed, and the directories
/// too when nothing else is in them (a host's own containerd keeps its own).
fn remove_stale_shim_sockets() {
    let held = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let dir = Path::new("/run/containerd/s");
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if !held.contains(path.to_string_lossy().as_ref()) {
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir(dir);
    let _ = std::fs::remove_dir("/run/containerd");
}

/// A kubelet runs here: then `kubepods` is its, and only this test's own pods are removed.
fn kubelet_running() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "kubelet")
    })
}

/// The prefix of this test's pod UIDs; the test's pid, in hex, completes them.
const UID_PREFIX: &str = "5c1d2e3f-4a5b-4c7d-8e9f-";

/// What a run of this test that was killed left (its runtime and shims, its pod's processes and
/// cgroups, mounts, sockets) is removed by the next run: whatever names this build's scratch
/// directory or pod UID of a test process that is gone.
fn remove_leftovers() {
    // Gone, or a zombie no one reaps (an orphan here may stay one).
    let gone = |pid: &str| {
        pid.parse::<i32>().is_ok_and(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| Some(s.get(s.rfind(')')? + 2..)?.starts_with('Z')))
                .unwrap_or(true)
        })
    };
    let scratch = format!("{}/kubernetes-", env!("CARGO_TARGET_TMPDIR"));
    let of_gone_run = |text: &str| {
        text.split(scratch.as_str()).nth(1).is_some_and(|r| gone(r.split('/').next().unwrap_or("")))
    };
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let cmd =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default())
                .to_string();
        if comm.starts_with("containerd") && of_gone_run(&cmd) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    for h in hierarchies() {
        let qos = h.join("kubepods/besteffort");
        for pod in std::fs::read_dir(&qos).into_iter().flatten().flatten() {
            let name = pod.file_name().to_string_lossy().to_string();
            let owner = name
                .strip_prefix("pod")
                .and_then(|u| u.strip_prefix(UID_PREFIX))
                .and_then(|hex| i64::from_str_radix(hex, 16).ok());
            if owner.is_some_and(|o| gone(&o.to_string())) {
                empty_pod_cgroups(&format!("kubepods/besteffort/{name}"));
            }
        }
        if !kubelet_running() {
            let _ = std::fs::remove_dir(&qos);
            let _ = std::fs::remove_dir(h.join("kubepods"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for m in mounts.lines().filter_map(|l| l.split(' ').nth(4)).filter(|m| of_gone_run(m)) {
        umount_under(m);
    }
    for e in std::fs::read_dir(env!("CARGO_TARGET_TMPDIR")).into_iter().flatten().flatten() {
        if of_gone_run(&e.path().to_string_lossy()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    remove_stale_shim_sockets();
}

/// A cgroup directory and every one below it, parents first.
fn walk(g: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut todo = vec![g.to_path_buf()];
    while let Some(d) = todo.pop() {
        if !d.is_dir() {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            todo.extend(rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        out.push(d);
    }
    out
}

#[test]
fn a_stall_in_a_pod_is_named_by_its_pod_namespace_and_container() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test runs a container runtime: run it as root");
    let _x = exclusive();
    remove_leftovers();
    let d = scratch("kubernetes");
    let uid = format!("{UID_PREFIX}{:012x}", std::process::id());
    let parent = format!("/kubepods/besteffort/pod{uid}");
    let rt = Runtime::start(&d.join("containerd"), &parent);

    // watch first, on every JVM of the host, as the DaemonSet runs it; then the pod.
    let events = d.join("events.jsonl");
    let out = d.join("recordings");
    let (w, addr, said) = start_watch(&[
        "--all",
        "--metrics",
        "127.0.0.1:0",
        "--for",
        "150s",
        "--events",
        events.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let w = Reaper(w);
    let addr = addr.unwrap();

    let pod_json = d.join("pod.json");
    std::fs::write(
        &pod_json,
        serde_json::json!({
            "metadata": {"name": POD, "namespace": NAMESPACE, "uid": uid, "attempt": 0},
            "log_directory": d.join("logs"),
            "linux": {
                "cgroup_parent": parent,
                // The node's network (no CNI here); a pid namespace of the pod's own.
                "security_context": {"namespace_options": {"network": 2, "pid": 0, "ipc": 0}}
            }
        })
        .to_string(),
    )
    .unwrap();
    let java = java25();
    let jdk_home = java.parent().and_then(Path::parent).unwrap();
    assert!(jdk_home.starts_with("/usr"), "the JDK is bind-mounted with /usr: {}", java.display());
    let jar = workloads_jar();
    let ctr_json = d.join("container.json");
    std::fs::write(
        &ctr_json,
        serde_json::json!({
            "metadata": {"name": CONTAINER},
            "image": {"image": IMAGE},
            "command": [java, "-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints",
                "-jar", "/work/stallscope-workloads.jar",
                "counted-loop", "--duration", MARK, "--rounds", "300", "--trigger", "threaddump"],
            "log_path": "orders-api.log",
            "mounts": [
                {"container_path": "/usr", "host_path": "/usr", "readonly": true},
                {"container_path": "/work", "host_path": jar.parent().unwrap(), "readonly": true}
            ],
            "linux": {}
        })
        .to_string(),
    )
    .unwrap();
    let sandbox = rt
        .crictl(&["runp", pod_json.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    let id = rt
        .crictl(&["create", &sandbox, ctr_json.to_str().unwrap(), pod_json.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    rt.crictl(&["start", &id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));

    // The JVM on the host: a process in the container's cgroup.
    let jvm = poll(Duration::from_secs(30), Duration::from_millis(200), || {
        std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (cg.contains(&id) && String::from_utf8_lossy(&cmd).contains(MARK)).then_some(pid)
        })
    })
    .unwrap_or_else(|| {
        panic!("the container's JVM never ran: {}", rt.crictl(&["logs", &id]).unwrap_or_else(|e| e))
    });

    // A process of the pod as a stall's instigator is named (a CPU neighbour, a stopper): by
    // the pod's names, read from the runtime's bundle.
    let line = format!("pod {NAMESPACE}/{POD}, container {CONTAINER} (containerd {})", &id[..12]);
    let named = procwatch::process::describe(jvm).expect("the container's JVM is running");
    assert_eq!(named.container.as_deref(), Some(line.as_str()), "{named:?}");

    // Its stall, under the pod's names, in the metrics.
    let want = format!(
        "namespace=\"{NAMESPACE}\",pod=\"{POD}\",container=\"{CONTAINER}\",workload=\"orders\",main=\"stallscope-workloads.jar\",pid=\"\",cause=\"no-safepoint-poll\""
    );
    let scraped = poll(Duration::from_secs(90), Duration::from_millis(500), || {
        let m = scrape(&addr);
        m.lines()
            .any(|l| l.starts_with("stallscope_stalls_total{") && l.contains(&want))
            .then_some(m)
    });
    let said_so_far: Vec<String> = said.try_iter().collect();
    let scraped = scraped.unwrap_or_else(|| {
        panic!("no stall of the pod's JVM in the metrics: {}\n{said_so_far:#?}", scrape(&addr))
    });
    let info = scraped
        .lines()
        .find(|l| l.starts_with("stallscope_watched_jvm{") && l.contains(POD))
        .unwrap_or_else(|| panic!("no watched_jvm series for the pod: {scraped}"));
    assert!(
        info.contains(&format!("process=\"{jvm}\""))
            && info.contains(&format!("container_id=\"{id}\"")),
        "{info}"
    );
    println!("scraped, the pod's series:");
    for l in scraped.lines().filter(|l| l.contains(POD) && !l.contains("_bucket{")) {
        println!("  {l}");
    }

    // The event names the pod, from the runtime's bundle.
    // (The JVM's first stall may be its start's, named otherwise: the loop's is looked for.)
    let event = poll(Duration::from_secs(30), Duration::from_millis(250), || {
        watch_events(&std::fs::read_to_string(&events).ok()?)
            .into_iter()
            .find(|e| e.cause == doctor::Cause::NoSafepointPoll)
    })
    .unwrap_or_else(|| {
        panic!(
            "no event of the loop's stall: {}",
            std::fs::read_to_string(&events).unwrap_or_default()
        )
    });
    let pod = event.jvm.pod.clone().unwrap_or_else(|| panic!("the event names no pod: {event:?}"));
    assert_eq!(
        (pod.namespace.as_str(), pod.name.as_str(), pod.uid.as_str(), pod.container.as_str()),
        (NAMESPACE, POD, uid.as_str(), CONTAINER),
        "{pod:?}"
    );
    assert_eq!((pod.container_id.as_str(), pod.runtime.as_str()), (id.as_str(), "containerd"));
    assert!(pod.source.ends_with(&format!("{id}/config.json")), "{}", pod.source);
    assert_eq!(event.jvm.pid, jvm);
    let culprit = event.culprit.clone().unwrap_or_else(|| panic!("no culprit thread: {event:?}"));
    assert_eq!(culprit.name, "counted-loop", "{event:?}");
    // The threads recorded are the container's: the culprit is a thread of its JVM.
    assert!(
        Path::new(&format!("/proc/{jvm}/task/{}", culprit.tid)).exists(),
        "the culprit {} is no thread of the container's JVM {jvm}",
        culprit.tid
    );

    // report reads the recording and says where it ran.
    let o = stallscope().arg("report").arg(&event.recording).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains(&line), "report does not say {line:?}:\n{text}");
    println!("report, its first lines:");
    for l in text.lines().take(4) {
        println!("  {l}");
    }
    let html = d.join("report.html");
    let o =
        stallscope().arg("report").arg(&event.recording).arg("--html").arg(&html).output().unwrap();
    assert!(o.status.success(), "report --html: {}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains(&line), "the HTML report does not say {line:?}");
    let r = report(Path::new(&event.recording));
    assert_eq!(r.meta.pod.as_ref().map(|p| p.name.as_str()), Some(POD));
    assert_eq!(r.meta.pid, jvm, "the recording is of the container's JVM");

    drop(w);
    drop(rt);
    let left: Vec<String> = hierarchies()
        .into_iter()
        .map(|h| h.join(parent.trim_start_matches('/')))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    assert!(left.is_empty(), "the pod's cgroups are left: {left:?}");
    assert!(!Path::new(&format!("/proc/{jvm}")).exists(), "the container's JVM is left running");
    let _ = std::fs::remove_dir_all(&d);
}

/// The DaemonSet as written (docs/kubernetes/stallscope-daemonset.yaml), from the image `make
/// image` builds: its pod spec translated to the CRI as a kubelet would (`deploy/kubecheck -cri`:
/// the host's pids, exactly the listed capabilities, not privileged, a read-only root, its
/// mounts, its args), run by containerd beside a JVM on the node whose safepoints wait on a loop.
/// Its metrics are scraped where its port is, the stall's report fetched by its exemplar's link,
/// its events read from the container's log. The image is built twice: the same digest. (The
/// pod's network is the node's: no CNI here; its host paths are put in a scratch directory but
/// tracefs, which is the node's own.)
#[test]
fn the_daemonset_runs_as_written_from_the_projects_image() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test runs a container runtime: run it as root");
    let _x = exclusive();
    remove_leftovers();
    // nobody's JVMs make /tmp/hsperfdata_nobody; removed at the end if this test made it.
    let nobodys = Path::new("/tmp/hsperfdata_nobody");
    let nobodys_before = nobodys.exists();
    let d = scratch("kubernetes-daemonset");
    let manifest = root().join("docs/kubernetes/stallscope-daemonset.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let image = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("image: "))
        .expect("the DaemonSet names its image")
        .to_string();

    // `make image`, twice: the same archive.
    let o = Command::new("bash").arg(root().join("scripts/dist.sh")).output().unwrap();
    assert!(o.status.success(), "make dist: {}", String::from_utf8_lossy(&o.stderr));
    let build = |out: &Path| {
        let o = Command::new("bash")
            .arg(root().join("scripts/image.sh"))
            .arg(out)
            .env("IMAGE_NAME", &image)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(o.status.success(), "make image: {said}{}", String::from_utf8_lossy(&o.stderr));
        said.lines().last().unwrap_or("").to_string()
    };
    let (a, b) = (d.join("image-a.tar"), d.join("image-b.tar"));
    let digest = build(&a);
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    assert_eq!(build(&b), digest, "the same dist tree gives the same image");
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "byte for byte");
    let size = std::fs::metadata(&a).unwrap().len();
    println!("image {image}: {digest}, {:.1} MB", size as f64 / 1e6);

    let uid = format!("{UID_PREFIX}{:012x}", std::process::id() + 1);
    let parent = format!("/kubepods/besteffort/pod{uid}");
    let rt = Runtime::start(&d.join("containerd"), &parent);
    rt.import(&a);

    // The pod spec, as a kubelet gives it to the runtime.
    let host = d.join("host");
    let o = Command::new("go")
        .args(["run", ".", "-cri"])
        .arg(&manifest)
        .arg(&host)
        .current_dir(root().join("deploy/kubecheck"))
        .output()
        .unwrap_or_else(|e| panic!("go: {e}"));
    assert!(o.status.success(), "kubecheck -cri: {}", String::from_utf8_lossy(&o.stderr));
    let mut cri: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for dir in cri["volumes"].as_object().unwrap().values() {
        std::fs::create_dir_all(dir.as_str().unwrap()).unwrap();
    }
    let logs = d.join("logs");
    cri["pod"]["log_directory"] = logs.to_str().unwrap().into();
    cri["pod"]["metadata"]["uid"] = uid.clone().into();
    cri["pod"]["linux"]["cgroup_parent"] = parent.clone().into();
    let caps = &cri["container"]["linux"]["security_context"];
    assert_eq!(caps["privileged"], false);
    assert_eq!(caps["capabilities"]["drop_capabilities"], serde_json::json!(["ALL"]));
    assert_eq!(caps["namespace_options"]["pid"], 2, "the node's pids");
    let (pod_json, ctr_json) = (d.join("pod.json"), d.join("container.json"));
    std::fs::write(&pod_json, cri["pod"].to_string()).unwrap();
    std::fs::write(&ctr_json, cri["container"].to_string()).unwrap();

    // A JVM on the node whose safepoints wait on a loop, then the DaemonSet's pod.
    let jvm = loop_jvm(false);
    let pid = jvm.0.id();
    // And one of another user (nobody's), its perf counters under /tmp/hsperfdata_nobody, mode
    // 0600: what DAC_READ_SEARCH and DAC_OVERRIDE are for.
    let other = loop_jvm(true);
    let other_pid = other.0.id();
    let sandbox = rt
        .crictl(&["runp", pod_json.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    let id = rt
        .crictl(&["create", &sandbox, ctr_json.to_str().unwrap(), pod_json.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    rt.crictl(&["start", &id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    let log = logs.join(cri["container"]["log_path"].as_str().unwrap());
    let said = || std::fs::read_to_string(&log).unwrap_or_default();

    // Its metrics, where the container's port is (the node's network): the JVM's stall.
    let addr = "127.0.0.1:9464";
    let want = format!("pid=\"{pid}\",cause=\"no-safepoint-poll\"");
    let want_other = format!("pid=\"{other_pid}\",cause=\"no-safepoint-poll\"");
    let stall_of = |metrics: &str, want: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with("stallscope_stalls_total{") && l.contains(want))
            .map(str::to_string)
    };
    let seen = poll(Duration::from_secs(60), Duration::from_millis(500), || {
        let m = scrape(addr);
        stall_of(&m, &want_other)?;
        stall_of(&m, &want)
    })
    .unwrap_or_else(|| {
        panic!(
            "no stall of both JVMs (root's {pid}, nobody's {other_pid}) in the DaemonSet's \
             metrics: {}\nits log:\n{}",
            scrape(addr),
            said()
        )
    });
    // With SYS_NICE, its watch loop runs at nice -10.
    assert_eq!(least_nice(container_pid(&rt, &id)), -10, "{}", said());
    // The stall's report by its exemplar's link.
    let report = exemplar_report(&seen).unwrap_or_else(|| panic!("no exemplar: {seen}"));
    let (status, page) = get(addr, &report);
    assert!(status.contains("200") && page.contains("no-safepoint-poll"), "{status}: {report}");
    // Its events, one JSON line per stall on its standard output (the container's log).
    let events = poll(Duration::from_secs(10), Duration::from_millis(250), || {
        let lines: Vec<String> = said()
            .lines()
            .filter_map(|l| l.split_once(" stdout F ").map(|(_, j)| j.to_string()))
            .collect();
        let e = watch_events(&lines.join("\n"));
        e.iter()
            .any(|e| e.jvm.pid == pid as i32 && e.cause == doctor::Cause::NoSafepointPoll)
            .then_some(e)
    });
    assert!(events.is_some(), "no event of the stall in the container's log:\n{}", said());
    // With the kernel's events from inside the container (its BPF, PERFMON and SYSLOG
    // capabilities): the recording on the node's disk (its host path) says so. (`watch` takes
    // no tracepoint evidence, inside a container or not.)
    let recordings = cri["volumes"]["recordings"].as_str().unwrap();
    let meta = meta_of(Path::new(recordings), pid)
        .unwrap_or_else(|| panic!("no recording of {pid} under {recordings}"));
    assert_eq!((meta["bpf"].as_bool(), meta["root"].as_bool()), (Some(true), Some(true)), "{meta}");
    assert_eq!(meta["pid"].as_i64(), Some(pid as i64), "{meta}");

    rt.crictl(&["stop", &id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    rt.crictl(&["rm", &id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));

    // Each capability dropped in turn, and the two that read other users' files together,
    // against the table of what each one buys (docs/kubernetes/README.md), for two JVMs on the
    // node: root's and nobody's. What only --attach needs is tried after, with --attach.
    let all: Vec<String> =
        cri["container"]["linux"]["security_context"]["capabilities"]["add_capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
    let mut drops: Vec<Vec<String>> = all.iter().map(|c| vec![c.clone()]).collect();
    drops.push(vec!["DAC_READ_SEARCH".into(), "DAC_OVERRIDE".into()]);
    // One variant of the DaemonSet's container, `extra` added to its arguments and `without`
    // taken from its capabilities, its recordings in a host directory of its own: started in
    // the pod, with that directory and its log's path.
    let start = |name: &str, extra: &[&str], without: &[String]| -> (String, PathBuf, PathBuf) {
        let mut c = cri["container"].clone();
        c["metadata"]["name"] = name.into();
        c["log_path"] = format!("{name}.log").into();
        c["args"].as_array_mut().unwrap().extend(extra.iter().map(|a| (*a).into()));
        c["linux"]["security_context"]["capabilities"]["add_capabilities"] =
            all.iter().filter(|x| !without.contains(x)).cloned().collect::<Vec<_>>().into();
        let out = host.join(name);
        std::fs::create_dir_all(&out).unwrap();
        for m in c["mounts"].as_array_mut().unwrap() {
            if m["container_path"] == "/var/lib/stallscope" {
                m["host_path"] = out.to_str().unwrap().into();
            }
        }
        let file = d.join(format!("{name}.json"));
        std::fs::write(&file, c.to_string()).unwrap();
        let id = rt
            .crictl(&["create", &sandbox, file.to_str().unwrap(), pod_json.to_str().unwrap()])
            .unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
        rt.crictl(&["start", &id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
        (id, out, logs.join(format!("{name}.log")))
    };
    let stop = |id: &str| {
        rt.crictl(&["stop", id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
        rt.crictl(&["rm", id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    };
    struct Row {
        dropped: Vec<String>,
        roots: bool,
        others: bool,
        bpf: Option<bool>,
        nice: i64,
        unreadable: bool,
        log: String,
    }
    let mut table = Vec::new();
    for dropped in drops {
        let name = format!("no-{}", dropped.join("-").to_lowercase());
        let (id, out, log) = start(&name, &[], &dropped);
        // Stalls come every 300 ms: 30 s without one named is none (the container starts, finds
        // both JVMs and loads its BPF program first).
        let (mut roots, mut others, mut unreadable) = (false, false, false);
        poll(Duration::from_secs(30), Duration::from_millis(500), || {
            let m = scrape(addr);
            // Named at all: without the kernel's events, and with both JVMs' loops on 2 CPUs,
            // some stalls are `unknown` (one run's root's JVM was, all 30 s without BPF).
            roots |= stall_of(&m, &format!("pid=\"{pid}\"")).is_some();
            others |= stall_of(&m, &format!("pid=\"{other_pid}\"")).is_some();
            unreadable |= m.lines().any(|l| {
                l.starts_with("stallscope_skipped_jvms_total{")
                    && l.contains("reason=\"unreadable\"")
                    && !l.ends_with(" 0")
            });
            (roots && others).then_some(())
        });
        let nice = least_nice(container_pid(&rt, &id));
        // Root's JVM's recording's meta.json: `bpf` is left out of one made without the
        // kernel's events.
        let bpf = meta_of(&out, pid).map(|m| m["bpf"].as_bool().unwrap_or(false));
        println!(
            "  without {:<30} root's named: {roots:<5} nobody's named: {others:<5} with the \
             kernel's events: {bpf:?} least nice: {nice} unreadable counted: {unreadable}",
            dropped.join(", ")
        );
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        // What it said of nobody's JVM, other than its stalls' events.
        for l in
            log.lines().filter(|l| l.contains(" stderr F ") && l.contains(&format!("{other_pid}")))
        {
            println!("    {}", l.split(" stderr F ").nth(1).unwrap_or(l));
        }
        table.push(Row { dropped, roots, others, bpf, nice, unreadable, log });
        stop(&id);
    }
    for r in &table {
        let without = |c: &str| r.dropped.iter().any(|d| d == c);
        let what = format!("without {:?}: {}", r.dropped, r.log);
        // SYS_PTRACE even for root's JVM: the JVM holds capabilities the container does not, so
        // its /proc/PID/root (its perf counters, its libjvm.so) and maps are closed to it.
        if without("SYS_PTRACE") {
            assert!(!r.roots && !r.others && r.log.contains("Permission denied"), "{what}");
            continue;
        }
        assert!(r.roots, "root's JVM on the node is still watched, {what}");
        // Another user's perf counters (mode 0600) are read with either of the two; without
        // both, that JVM is watched through /proc alone, which sees a stall only where the JVM
        // stops (a safepoint's wait is not one): not skipped, and said so.
        // (Whether any of its stalls is named then is not asserted: BPF's safepoint probes in
        // its libjvm.so may still see its safepoints.)
        let readable = !(without("DAC_READ_SEARCH") && without("DAC_OVERRIDE"));
        if readable {
            assert!(r.others, "nobody's JVM's stalls named, {what}");
        } else {
            let said = format!("hsperfdata_nobody/{other_pid}: Permission denied");
            assert!(r.log.contains(&said) && r.log.contains("through /proc alone"), "{what}");
        }
        assert!(!r.unreadable, "no JVM is skipped as unreadable, {what}");
        // SYSLOG too: /proc/kallsyms hides the kernel's addresses without it (where
        // perf_event_paranoid is above 1, the default), and the off-CPU recorder does not start
        // with stacks it cannot name.
        let kernel = !(without("BPF") || without("PERFMON") || without("SYSLOG"));
        assert_eq!(r.bpf, Some(kernel), "the kernel's events {kernel}, {what}");
        let nice = if without("SYS_NICE") { 0 } else { -10 };
        assert_eq!(r.nice, nice, "its least nice, {what}");
    }

    drop(jvm);
    drop(other);

    // `--attach` added to the manifest's arguments, against a fresh JVM of nobody's each time (an
    // agent, once loaded, stays): with every capability, then without each that the table says
    // only `--attach` needs.
    let mut attach_table = Vec::new();
    for dropped in ["", "DAC_OVERRIDE", "CHOWN", "FOWNER", "KILL"] {
        let victim = loop_jvm(true);
        let vpid = victim.0.id();
        let name = format!("attach-no-{}", dropped.to_lowercase());
        let (id, out, log) = start(&name, &["--attach"], &[dropped.to_string()]);
        let about = [format!("pid {vpid} "), format!("pid {vpid}:")];
        // Attached: a recording of its made by `attach` whose first stall is named; not: a line
        // that says why.
        let t0 = std::time::Instant::now();
        let outcome = poll(Duration::from_secs(60), Duration::from_millis(500), || {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let refused = said
                .lines()
                .filter(|l| l.contains(" stderr F ") && about.iter().any(|a| l.contains(a)))
                .find(|l| l.contains("not watched") || l.contains("not attached"))
                .map(|l| l.split(" stderr F ").nth(1).unwrap_or(l).to_string());
            if let Some(why) = refused {
                return Some(Err(why));
            }
            let m = meta_of(&out, vpid)?;
            let named =
                stall_of(&scrape(addr), &format!("pid=\"{vpid}\",cause=\"no-safepoint-poll\""));
            (m["mode"] == "attach" && named.is_some()).then_some(Ok(()))
        });
        let took = t0.elapsed().as_secs_f64();
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        // The victim's stalls by cause, with their longest time to safepoint: what its events
        // said, in a line a truncated log cannot hide.
        let mut causes = std::collections::BTreeMap::<String, (u32, u64)>::new();
        for l in said.lines().filter_map(|l| l.split_once(" stdout F ").map(|(_, j)| j)) {
            let Ok(e) = serde_json::from_str::<fleet::events::StallEvent>(l) else { continue };
            if e.jvm.pid == vpid as i32 {
                let c = causes.entry(e.cause.id().to_string()).or_default();
                c.0 += 1;
                c.1 = c.1.max(e.safepoint.map_or(0, |s| s.ttsp_ns) / 1_000_000);
            }
        }
        println!(
            "  --attach without {dropped:<14} {outcome:?} after {took:.1} s; its stalls' causes \
             (count, longest time to safepoint in ms): {causes:?}"
        );
        let said = format!(
            "its stalls' causes (count, longest time to safepoint in ms): {causes:?}\n{said}"
        );
        attach_table.push((dropped, outcome, said));
        stop(&id);
        drop(victim);
    }
    for (dropped, outcome, said) in &attach_table {
        // Each refusal says why, at once (no attach socket waited for).
        let why = match *dropped {
            "DAC_OVERRIDE" => "meta.json: cannot create it: Permission denied",
            "CHOWN" => "cannot hand the recording directory to uid 65534",
            "KILL" => "cannot send it SIGQUIT",
            _ => {
                assert_eq!(outcome, &Some(Ok(())), "attached without {dropped:?}:\n{said}");
                continue;
            }
        };
        assert!(
            matches!(outcome, Some(Err(w)) if w.contains(why)),
            "--attach without {dropped}: refused, saying {why:?}: {outcome:?}\n{said}"
        );
    }

    // `--attach 2/10m` without CHOWN: nobody's JVM, watched from outside, stalls more than
    // twice and is escalated; its recording's directory cannot be handed over, so it stays
    // watched from outside, its later stalls still named (it was dropped from guarding once).
    {
        let victim = loop_jvm(true);
        let vpid = victim.0.id();
        let (id, _, log) = start("escalate-no-chown", &["--attach=2/10m"], &["CHOWN".into()]);
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        let refused = format!("JVM pid {vpid}: not attached (");
        let want = format!("pid=\"{vpid}\",cause=\"no-safepoint-poll\"");
        let count = || {
            stall_of(&scrape(addr), &want)
                .and_then(|l| l.split(' ').nth(1).and_then(|n| n.parse::<f64>().ok()))
                .unwrap_or(0.0)
        };
        let at_refusal = poll(Duration::from_secs(40), Duration::from_millis(500), || {
            said().contains(&refused).then(count)
        })
        .unwrap_or_else(|| panic!("escalating without CHOWN was not refused:\n{}", said()));
        assert!(said().contains("cannot hand the recording directory"), "{}", said());
        let later = poll(Duration::from_secs(20), Duration::from_millis(500), || {
            let n = count();
            (n > at_refusal).then_some(n)
        });
        println!(
            "  --attach=2/10m without CHOWN: refused, stalls named {at_refusal} then {later:?}"
        );
        assert!(later.is_some(), "stalls named after the refusal:\n{}", said());
        assert!(
            !said().contains(&format!("JVM pid {vpid} (stallscope-workloads.jar): not watched"))
        );
        stop(&id);
        drop(victim);
    }

    drop(rt);
    let _ = std::fs::remove_dir_all(&d);
    if !nobodys_before {
        let _ = std::fs::remove_dir_all(nobodys);
    }
}

/// A JVM whose safepoints wait on a counted loop, 20 rounds every 300 ms, for longer than the
/// test (killed by its `Reaper`):
/// root's, or nobody's (its perf counters then under /tmp/hsperfdata_nobody, mode 0600).
fn loop_jvm(nobody: bool) -> Reaper {
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(java17());
        c
    } else {
        Command::new(java17())
    };
    Reaper(
        c.args(["-Xmx64m", "-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints", "-jar"])
            .arg(workloads_jar())
            // 100 rounds: each safepoint held 100 ms or so. At 20 (about 20 ms), a JVM just
            // attached had most stalls `unknown` (10 of 15 in one run, 1 `no-safepoint-poll`),
            // and CI once saw no `no-safepoint-poll` in 40 s.
            .args(["counted-loop", "--duration", "600s", "--rounds", "100", "--every", "300ms"])
            .current_dir("/")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The meta.json of `pid`'s recording under `dir`, if there is one.
fn meta_of(dir: &Path, pid: u32) -> Option<serde_json::Value> {
    walk_files(dir).into_iter().filter(|p| p.ends_with("meta.json")).find_map(|p| {
        let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()?;
        (m["pid"].as_i64() == Some(pid as i64)).then_some(m)
    })
}

/// A container's first process, on the host, as the runtime says.
fn container_pid(rt: &Runtime, id: &str) -> i32 {
    let said = rt.crictl(&["inspect", id]).unwrap_or_else(|e| panic!("{e}\n{}", rt.log()));
    let v: serde_json::Value = serde_json::from_str(&said).unwrap();
    v["info"]["pid"].as_i64().unwrap_or_else(|| panic!("no pid in crictl inspect: {said}")) as i32
}

/// The least nice value among a process's threads: `watch`'s heartbeat loop and its guards
/// raise themselves to -10 where SYS_NICE allows, as each starts (read once a stall was named).
fn least_nice(pid: i32) -> i64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/task: {e}"))
        .flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // After the comm's ')': state is field 3, nice field 19.
            stat.rsplit_once(')')?.1.split_whitespace().nth(16)?.parse().ok()
        })
        .min()
        .unwrap_or_else(|| panic!("no thread of {pid} read"))
}

/// Every file under `dir`, at any depth.
fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk_files(&p)) } else { out.push(p) }
    }
    out
}
