//! The recorder behind `stallscope run` and `stallscope attach`: put the agent and safepoint
//! logging into a JVM, watch it, and write the recording (the format is the `recording` crate).
//!
//! Invariant: the target's stdout, stderr and exit code pass through untouched (`run`), and
//! whatever ends the recording, the JVM is left as it was found (`attach` switches its logging
//! off and stops the agent's meter).

pub mod agent_jar;
pub mod attached;
pub mod boost;
pub mod control;
pub mod dumps;
pub mod frames;
pub mod outside;
pub mod pulse;
pub mod stacks;
pub mod staging;
pub mod watch;

use crate::attach::Jvm;
use anyhow::{Context, Result, bail};
use procwatch::clock::mono_ns;
use recording::units::fmt_ns;
use recording::{Event, Meta, Writer, files};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use watch::{Ending, WatchOptions};

/// What a recording needs: the agent, the directory, the thresholds.
#[derive(Clone)]
pub struct Settings {
    pub jar: PathBuf,
    pub dir: PathBuf,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    /// Take the culprits' stacks: with the stacks agent (`stacks`), else (or with `jfr`) with
    /// the JVM's flight recorder (`frames`).
    pub frames: bool,
    /// `run --jfr`: the flight recorder even where the stacks agent is there.
    pub jfr: bool,
    /// The agent's meter resolution when attaching (None: the agent's 1 ms).
    pub resolution_ns: Option<u64>,
    /// `run --outside`: put nothing into the JVM (no agent, no log, no flags); watch it through
    /// its perf counters and /proc alone, as `attach` does a JVM that will not answer.
    pub outside: bool,
}

impl Settings {
    /// Settings for a recording into `dir` (created, empty), with default thresholds.
    pub fn new(jar: PathBuf, dir: &Path) -> Result<Settings> {
        own_empty_dir(dir)?;
        Ok(Settings {
            jar,
            dir: std::fs::canonicalize(dir)?,
            threshold_ns: 5_000_000,
            sample_interval_ns: 2_000_000,
            frames: false,
            jfr: false,
            resolution_ns: None,
            outside: false,
        })
    }
}

/// What `run` and `attach` are asked for: where, the stall threshold, the sampling interval, the
/// agent jar.
pub struct RecordRequest<'a> {
    pub out: Option<&'a Path>,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    pub agent: Option<&'a Path>,
    pub frames: bool,
}

/// Settings for a user's recording: checks the request, finds the agent, creates the directory
/// (`./stallscope-<date>-<time>` by default).
pub fn settings(o: &RecordRequest) -> Result<Settings> {
    let (threshold_ns, sample_interval_ns) = (o.threshold_ns, o.sample_interval_ns);
    if threshold_ns < 1_000_000 {
        bail!("--threshold {} is below the agent's 1 ms resolution", fmt_ns(threshold_ns));
    }
    let jar = agent_jar::find(o.agent)?;
    let dir = match o.out {
        Some(d) => d.to_path_buf(),
        None => unused_name(
            Path::new(""),
            &format!("stallscope-{}", chrono::Local::now().format("%Y%m%d-%H%M%S")),
        ),
    };
    option_safe(&dir)?;
    own_empty_dir(&dir)?;
    let dir = std::fs::canonicalize(&dir)?;
    Ok(Settings {
        jar,
        dir,
        threshold_ns,
        sample_interval_ns,
        frames: o.frames,
        jfr: false,
        resolution_ns: None,
        outside: false,
    })
}

/// `parent/base`, or `parent/base-2`, `-3`… when that exists.
pub fn unused_name(parent: &Path, base: &str) -> PathBuf {
    let mut d = parent.join(base);
    let mut i = 2;
    while d.exists() {
        d = parent.join(format!("{base}-{i}"));
        i += 1;
    }
    d
}

/// Refuses a recording directory whose path the JVM's `-Xlog` and agent options would split.
pub fn option_safe(dir: &Path) -> Result<()> {
    let s = dir.to_string_lossy();
    if s.contains([',', ':', '=', '"', ' ']) {
        bail!(
            "{s}: the recording directory's path cannot hold ',', ':', '=', quotes or spaces (the JVM's -Xlog and agent options would split it)"
        );
    }
    Ok(())
}

/// Makes `dir` the recording directory: created here (mode 0755), or an existing empty one that
/// is this user's own and that no one else can write to. The JVM (often root's) writes the
/// recording's files by name in it; in a directory another user can write to, that user could
/// plant `hiccups.hlog -> /etc/…` and have it overwritten. A symbolic link is refused too.
pub fn own_empty_dir(dir: &Path) -> Result<()> {
    own_dir(dir, true)
}

/// The checks of [`own_empty_dir`] on a directory that may already hold recordings (`watch`'s).
pub fn own_dir(dir: &Path, must_be_empty: bool) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| {
            format!("{}: cannot create the recording directory's parent", parent.display())
        })?;
    }
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!("{}: cannot create the recording directory", dir.display())
            });
        }
    }
    let m = std::fs::symlink_metadata(dir)
        .with_context(|| format!("{}: cannot read it", dir.display()))?;
    if m.file_type().is_symlink() {
        bail!(
            "{}: is a symbolic link; name the directory itself with --out (a link could be pointed elsewhere while the JVM writes)",
            dir.display()
        );
    }
    if !m.is_dir() {
        bail!("{}: exists and is not a directory; choose another with --out", dir.display());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        bail!(
            "{}: belongs to uid {}, not to you (uid {me}); another user's directory could redirect the recording's files. Choose another with --out, or let stallscope create it",
            dir.display(),
            m.uid()
        );
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            "{}: others can write to it (mode {:o}); another user could plant links in it. `chmod go-w` it or choose another with --out",
            dir.display(),
            m.mode() & 0o7777
        );
    }
    if must_be_empty && std::fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{}: the recording directory exists and is not empty; choose another with --out",
            dir.display()
        );
    }
    Ok(())
}

/// Root attaching to another user's JVM: the agent, in that JVM, writes the hiccup log and
/// HotSpot the safepoint log into the directory, as that user. Hand the fresh directory to them;
/// stallscope's own files in it are created O_EXCL|O_NOFOLLOW, so nothing they plant can
/// redirect a write of root's.
pub fn hand_to(dir: &Path, uid: u32) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && uid != 0 {
        std::os::unix::fs::chown(dir, Some(uid), None).map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot hand the recording directory to uid {uid} (the JVM's user): {e}",
                dir.display()
            )
        })?;
    }
    Ok(())
}

fn java_version(home: &Path) -> Option<String> {
    let r = std::fs::read_to_string(home.join("release")).ok()?;
    r.lines().find_map(|l| l.strip_prefix("JAVA_VERSION=")).map(|v| v.trim_matches('"').to_string())
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Starts tracepoint evidence for `pid` when privileged, and says in one line what is missing.
/// The instance is registered with `guard` before it is made, so that stallscope killed outright,
/// even mid-start, does not leave its events on (they would tax every page fault on the machine).
pub(crate) fn start_tracer(
    pid: i32,
    mut guard: Option<&mut crate::guard::Guard>,
) -> (Option<procwatch::trace::Tracer>, Option<String>) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return (None, Some("not root: no tracepoint evidence (fault addresses, mmap_lock wait times); rerun with sudo or CAP_PERFMON for it".into()));
    }
    let mut announce = |dir: &Path| match guard {
        Some(ref mut g) => g
            .add(crate::guard::Undo::RemoveTraceInstance { dir: dir.to_path_buf() })
            .map(|_| ())
            .map_err(|e| std::io::Error::other(format!("{e:#}"))),
        None => Ok(()),
    };
    match procwatch::trace::Tracer::start_announced(pid, &mut announce) {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(format!("no tracepoint evidence: {e}"))),
    }
}

pub(crate) fn meta(
    mode: &str,
    command: Vec<String>,
    pid: i32,
    java_home: Option<&Path>,
    s: &Settings,
    timeout_ms: Option<u64>,
    tracing: &(Option<procwatch::trace::Tracer>, Option<String>),
) -> Meta {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    Meta {
        stallscope_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: mode.to_string(),
        command,
        pid,
        java_home: java_home.map(|h| h.display().to_string()),
        java_version: java_home.and_then(java_version),
        kernel: kernel(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        root,
        tracepoints: tracing.0.is_some(),
        privileges_note: tracing.1.clone(),
        start_mono_ns: mono_ns(),
        start_epoch_ms: chrono::Utc::now().timestamp_millis(),
        utc_offset_min: (chrono::Local::now().offset().local_minus_utc() / 60) as i16,
        clock_ticks: procwatch::task::clock_ticks(),
        threshold_ns: s.threshold_ns,
        sample_interval_ns: s.sample_interval_ns,
        safepoint_timeout_ms: timeout_ms,
        cgroups: Some(procwatch::cgroup::of(pid)),
        recorder_shares: Some(watch::shares(
            &procwatch::cgroup::of(pid),
            &procwatch::cgroup::of(0),
        )),
    }
}

pub(crate) fn watch_options(s: &Settings) -> WatchOptions {
    WatchOptions {
        threshold_ns: s.threshold_ns,
        sample_interval_ns: s.sample_interval_ns,
        system_interval_ns: 50_000_000,
        boost: None,
    }
}

fn find_java(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.components().count() > 1 {
        return std::fs::canonicalize(p).ok();
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path).map(|d| d.join(program)).find(|c| c.is_file())
        })
        .and_then(|c| std::fs::canonicalize(c).ok())
}

/// Stacks read from outside the JVM during stalls, unless `--no-frames`.
pub(crate) fn outside_stacks(s: &Settings, pid: i32) -> Option<outside::Outside> {
    if !s.frames {
        return None;
    }
    match outside::Outside::start(pid, &s.dir) {
        Ok(o) => Some(o),
        Err(e) => {
            eprintln!("stallscope: pid {pid}: no code from outside: {e:#}");
            None
        }
    }
}

/// Waits (up to 20 s) for a JVM just started to create its perf counters.
fn wait_for_counters(
    pid: i32,
    alive: &mut dyn FnMut() -> bool,
    stop: &AtomicBool,
) -> Option<procwatch::jvmcounters::JvmCounters> {
    let t0 = Instant::now();
    while alive() && !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20) {
        if let Ok(c) = procwatch::jvmcounters::JvmCounters::of_pid(pid) {
            return Some(c);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Opens the JVM's perf counters for the recording, and says in it what they are, or why there
/// are none.
pub(crate) fn open_counters(
    pid: i32,
    w: &mut Writer,
) -> Result<Option<procwatch::jvmcounters::JvmCounters>> {
    // A JVM just started may still be creating them: a moment's patience.
    let t0 = Instant::now();
    let opened = loop {
        match procwatch::jvmcounters::JvmCounters::of_pid(pid) {
            Err(
                procwatch::perfdata::Error::NotReady { .. }
                | procwatch::perfdata::Error::Truncated { .. },
            ) if t0.elapsed() < Duration::from_secs(3) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other,
        }
    };
    match opened {
        Ok(c) => {
            w.events.line(&Event::Counters { t: mono_ns(), info: c.info.clone() })?;
            Ok(Some(c))
        }
        Err(e) => {
            w.events.line(&Event::NoCounters { t: mono_ns(), reason: e.to_string() })?;
            Ok(None)
        }
    }
}

/// How to launch a recorded JVM.
pub struct Launch {
    pub safepoint_timeout: bool,
    pub boost: Option<(boost::BoostLevel, u64)>,
    /// Keep the JVM's stdout (the lab reads its workload's JSON line) instead of passing it on.
    pub capture_stdout: bool,
    /// Tell the user what is happening on stderr.
    pub chatty: bool,
    /// Start the target at this nice value (a static priority, for comparison with --boost).
    pub nice: Option<i32>,
    /// Put the target in these cgroups (their `cgroup.procs` files) before it starts: the lab's
    /// memory limits apply to the JVM alone, never to the recorder.
    pub cgroups: Vec<PathBuf>,
    /// Kill the target (SIGKILL) if it runs longer than this: a scenario that squeezes memory
    /// must end whatever happens.
    pub timeout: Option<Duration>,
}

/// Kills a process with SIGKILL when a time limit passes, unless disarmed (dropped) first.
struct Deadline {
    done: std::sync::Arc<AtomicBool>,
}

impl Deadline {
    fn arm(pid: i32, after: Duration) -> Deadline {
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let d = std::sync::Arc::clone(&done);
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while t0.elapsed() < after {
                if d.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            if !d.load(Ordering::Relaxed) {
                eprintln!(
                    "stallscope: pid {pid} ran past its {} limit; killing it",
                    fmt_ns(after.as_nanos() as u64)
                );
                // SAFETY: a signal to our own child, still running.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        Deadline { done }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// A finished recorded run.
pub struct Recorded {
    pub status: std::process::ExitStatus,
    pub stdout: String,
}

/// Launches `command` (a java command line) with the agent and safepoint logging, records it
/// into `s.dir` until it exits, and returns how it ended. `stop` ends the recording early (the
/// JVM gets SIGINT).
pub fn record_jvm(
    s: &Settings,
    command: &[String],
    l: &Launch,
    stop: &AtomicBool,
) -> Result<Recorded> {
    let (program, rest) = command
        .split_first()
        .context("no command after --; e.g. stallscope run -- java -jar app.jar")?;
    let java = find_java(program).with_context(|| format!("{program}: not found on PATH"))?;
    let java_home = java.parent().and_then(Path::parent).map(Path::to_path_buf);
    if s.outside {
        let mut cmd = std::process::Command::new(&java);
        cmd.args(rest);
        let child = Spawn {
            cmd,
            command,
            java_home: java_home.as_deref(),
            timeout_ms: None,
            stacks: false,
        };
        return record_child(s, child, l, stop);
    }
    let timeout_ms = l.safepoint_timeout.then(|| s.threshold_ns.div_ceil(1_000_000).max(1));
    let mut args = vec![
        format!(
            "-javaagent:{}=log={}/{},interval=1s",
            s.jar.display(),
            s.dir.display(),
            files::HICCUPS
        ),
        format!(
            "-Xlog:safepoint*=debug:file={}/{}:uptime,timenanos,level,tags:filecount=0",
            s.dir.display(),
            files::SAFEPOINT_LOG
        ),
    ];
    // The stacks agent names the code at no cost between stalls; JFR (whose start costs the JVM
    // 0.5-0.9 s of CPU, docs/frames.md) only where the agent library is missing.
    let stacks_lib = if s.frames && !s.jfr { stacks::find() } else { None };
    let frames = s.frames && stacks_lib.is_none() && has_jfr(java_home.as_deref());
    if let Some(lib) = &stacks_lib {
        args.push(stacks::launch_option(lib, &s.dir));
    } else if frames {
        frames::write_settings(&s.dir)?;
        args.push(frames::launch_option(&s.dir));
        // JFR says it started on stdout, which is the application's; only `off` silences it (a
        // JFR that cannot start still fails the JVM's start with "Failure when starting JFR").
        args.push("-Xlog:jfr+startup=off".into());
    } else if s.frames {
        frames::note(&s.dir, NO_JFR)?;
    }
    if let Some(ms) = timeout_ms {
        args.push("-XX:+SafepointTimeout".into());
        args.push(format!("-XX:SafepointTimeoutDelay={ms}"));
        // Its warnings belong in the recording, not in the application's stdout. The user's own
        // -Xlog options come after this one, so theirs still win.
        args.push("-Xlog:safepoint=off:stdout".into());
    }
    let mut cmd = std::process::Command::new(&java);
    cmd.args(&args).args(rest);
    let child = Spawn {
        cmd,
        command,
        java_home: java_home.as_deref(),
        timeout_ms,
        stacks: stacks_lib.is_some(),
    };
    let r = record_child(s, child, l, stop)?;
    if frames {
        // A child of ours in our pid namespace: its thread ids are ours.
        frames::extract_or_note(&s.dir, &|t| t as i32);
    }
    Ok(r)
}

/// Whether the JDK at `home` has a flight recorder started by `-XX:StartFlightRecording` or
/// `JFR.start` with a settings file (11 and later by its `JAVA_VERSION`; 1.8 has it only from
/// update 262, where stallscope does not use it).
fn has_jfr(home: Option<&Path>) -> bool {
    let major = home
        .and_then(java_version)
        .and_then(|v| v.split(['.', '-', '+']).next().and_then(|m| m.parse::<u32>().ok()));
    major.is_some_and(|m| (11..100).contains(&m))
}

/// What `frames.jsonl` says when [`has_jfr`] does not hold.
const NO_JFR: &str =
    "no stacks: the JVM has no flight recorder stallscope can start (JDK 11 or later has)";

/// Records a native program that publishes a stallscope heartbeat itself (the lab's native
/// workloads): the same watching and recording, without the JVM's logs.
pub fn record_native(
    s: &Settings,
    command: &[String],
    l: &Launch,
    stop: &AtomicBool,
) -> Result<Recorded> {
    let (program, rest) = command.split_first().context("no command")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    let child = Spawn { cmd, command, java_home: None, timeout_ms: None, stacks: false };
    record_child(s, child, l, stop)
}

/// The process [`record_child`] starts, and what the recording says of it.
struct Spawn<'c> {
    cmd: std::process::Command,
    /// The command line as the user gave it.
    command: &'c [String],
    java_home: Option<&'c Path>,
    /// The JVM's `-XX:SafepointTimeoutDelay`, when set.
    timeout_ms: Option<u64>,
    /// The stacks agent is loaded (record/stacks.rs).
    stacks: bool,
}

fn record_child(s: &Settings, child: Spawn, l: &Launch, stop: &AtomicBool) -> Result<Recorded> {
    let Spawn { mut cmd, command, java_home, timeout_ms, stacks } = child;
    if l.capture_stdout {
        cmd.stdout(std::process::Stdio::piped());
    }
    if let Some(n) = l.nice {
        // SAFETY: between fork and exec, one async-signal-safe call on ourselves.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                libc::setpriority(libc::PRIO_PROCESS, 0, n);
                Ok(())
            });
        }
    }
    for procs in &l.cgroups {
        let procs = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes())?;
        // SAFETY: between fork and exec only async-signal-safe calls on memory made before.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                crate::inject::cgroup::join(&procs)
            });
        }
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", command.first().map_or("", String::as_str)))?;
    let _deadline = l.timeout.map(|t| Deadline::arm(child.id() as i32, t));
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
            text
        })
    });
    let pid = child.id() as i32;
    // Only the trace instance needs a guardian here (root only): the JVM is ours and ends with us.
    // SAFETY: geteuid has no preconditions.
    let mut guard =
        if unsafe { libc::geteuid() } == 0 { Some(crate::guard::Guard::start()?) } else { None };
    let tracing = start_tracer(pid, guard.as_mut());
    let mut w = Writer::open_background(
        &s.dir,
        &meta("run", command.to_vec(), pid, java_home, s, timeout_ms, &tracing),
    )?;
    if l.chatty {
        eprintln!(
            "stallscope: recording pid {pid} into {} (stalls ≥ {})",
            s.dir.display(),
            fmt_ns(s.threshold_ns)
        );
    }

    let mut exit: Option<std::process::ExitStatus> = None;
    let alive =
        |exit: &mut Option<std::process::ExitStatus>, child: &mut std::process::Child| -> bool {
            if exit.is_none() {
                *exit = child.try_wait().ok().flatten();
            }
            exit.is_none()
        };
    let mut ending = Ending::TargetExited;
    if s.outside {
        // Its counters exist once HotSpot has started: until then only /proc is watched.
        let jc = wait_for_counters(pid, &mut || alive(&mut exit, &mut child), stop);
        if jc.is_none() && alive(&mut exit, &mut child) {
            eprintln!(
                "stallscope: pid {pid}: no perf counters to watch; only a stopped process is seen from /proc"
            );
        }
        let jc = match jc {
            Some(c) => {
                w.events.line(&Event::Counters { t: mono_ns(), info: c.info.clone() })?;
                Some(c)
            }
            None => open_counters(pid, &mut w)?,
        };
        let code = watch::CodeAsks { outside: outside_stacks(s, pid), ..Default::default() };
        let what = watch::Watch {
            pid,
            pulse: pulse::Pulse::counters(pid, jc),
            tracer: tracing.0.as_ref(),
            opts: watch_options(s),
            deadline: None,
            driven: None,
            code,
            hooks: Default::default(),
        };
        ending = watch::watch(&mut w, what, stop, &mut || alive(&mut exit, &mut child))?;
    }
    let hb = if s.outside {
        None
    } else {
        match watch::wait_for_heartbeat(
            pid,
            Duration::from_secs(60),
            &mut || alive(&mut exit, &mut child),
            stop,
        ) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("stallscope: {e:#}; recording without stall detection");
                None
            }
        }
    };
    if let Some(hb) = hb {
        let opts = WatchOptions { boost: l.boost, ..watch_options(s) };
        // A JVM of ours with its stacks sampled: its thread dump too, during long stalls.
        // Its stacks: the agent's, taken by signal in the stall; without the agent, JFR's
        // samples and, during long stalls, the JVM's thread dump.
        let code = if stacks {
            watch::CodeAsks {
                signaller: Some(stacks::Signaller::new(pid, &s.dir)),
                ..Default::default()
            }
        } else {
            let dumper =
                if s.frames && java_home.is_some() && s.dir.join(files::FRAMES_JFC).exists() {
                    Jvm::find(pid).ok().and_then(|j| dumps::Dumper::start(j, &s.dir).ok())
                } else {
                    None
                };
            watch::CodeAsks { dumper, ..Default::default() }
        };
        let pulse = pulse::Pulse::heartbeat(pid, hb, open_counters(pid, &mut w)?);
        let what = watch::Watch {
            pid,
            pulse,
            tracer: tracing.0.as_ref(),
            opts,
            deadline: None,
            driven: None,
            code,
            hooks: Default::default(),
        };
        ending = watch::watch(&mut w, what, stop, &mut || alive(&mut exit, &mut child))?;
    }
    if let Ending::Stopped(reason) = &ending {
        // Ctrl-C in a terminal reaches the JVM too; forward it only if it did not.
        let t0 = Instant::now();
        while alive(&mut exit, &mut child) && t0.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive(&mut exit, &mut child) {
            // SAFETY: plain kill of our child.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        w.events.line(&Event::Detach { t: mono_ns(), reason: reason.clone() })?;
    }
    stop.store(false, Ordering::Relaxed);
    let status = match exit {
        Some(s) => s,
        None => loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if stop.swap(false, Ordering::Relaxed) {
                // A second interrupt: the JVM is not stopping on its own.
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        },
    };
    w.events.line(&Event::TargetExit {
        t: mono_ns(),
        code: status.code(),
        signal: status.signal(),
    })?;
    let stdout = reader.map(|r| r.join().unwrap_or_default()).unwrap_or_default();
    Ok(Recorded { status, stdout })
}

/// Makes the [`watch::Driven`] for a JVM whose heartbeat is found: `stallscope watch` hands its
/// heartbeat to its one loop.
pub type Drive<'a> = &'a (dyn Fn(i32, &procwatch::heartbeat::Heartbeat) -> watch::Driven + Sync);

/// Starts the JVM's flight recording of stacks, with its stop registered with the guardian
/// first, on a thread of its own (JFR takes a while to start): returns the guardian's token for
/// that stop and the thread, whose answer says whether JFR started. A JVM without a flight
/// recorder gets a note in `frames.jsonl` instead.
#[allow(clippy::type_complexity)]
pub(crate) fn start_frames(
    s: &Settings,
    jvm: &Jvm,
    jvm_dir: &Path,
    guard: &mut crate::guard::Guard,
) -> Result<Option<(crate::guard::Token, std::thread::JoinHandle<Result<String>>)>> {
    if !has_jfr(jvm.java_home.as_deref()) {
        eprintln!("stallscope: JVM pid {}: {NO_JFR}", jvm.pid);
        frames::note(&s.dir, NO_JFR)?;
        return Ok(None);
    }
    frames::write_settings(&s.dir)?;
    let stop = guard.add(crate::guard::Undo::JvmCommand {
        pid: jvm.pid,
        command: "jcmd".into(),
        args: vec![frames::jcmd_stop()],
    })?;
    let (jvm, line) = (jvm.clone(), frames::jcmd_start(jvm_dir));
    Ok(Some((stop, std::thread::spawn(move || jvm.jcmd(&line)))))
}
