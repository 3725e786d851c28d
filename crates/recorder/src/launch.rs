//! `run`: start the JVM (or a native workload) with what the recording needs — the agent, the
//! safepoint log, the stacks agent or a flight recording, `-XX:+SafepointTimeout` — watch it
//! until it exits, and say how it ended.
//!
//! Invariant: the JVM is ours and ends with us (a deadline kills it, Ctrl-C sends it SIGINT);
//! only the trace instance needs a guardian here.

use super::frames::{NO_JFR, has_jfr};
use super::sampler::Ending;
use super::sampler::SamplerOptions;
use super::to_disk::ToDisk;
use super::{
    Settings, Stacks, frames, meta, open_counters, outside_stacks, process_target, sampler, stacks,
    start_tracer, watch_options,
};
use super::{boost, dumps, pulse};
use anyhow::{Context, Result};
use hotspot_attach::Jvm;
use procwatch::clock::mono_ns;
use recording::Notices;
use recording::units::fmt_ns;
use recording::{Event, Writer, files};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How to launch a recorded JVM.
pub struct Launch {
    pub safepoint_timeout: bool,
    /// `--boost`: how high, and when (at each safepoint, or once the heartbeat is stale).
    pub boost: Option<(boost::BoostLevel, boost::BoostOn)>,
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
    /// Start the target in a mount namespace of its own with this directory bound over its
    /// `/tmp/hsperfdata_<user>` (root only): the lab puts one JVM's perf counters on a slow disk
    /// without touching any other JVM's.
    pub perf_data_dir: Option<PathBuf>,
}

/// Kills a process with SIGKILL when a time limit passes, unless disarmed (dropped) first.
struct Deadline {
    done: std::sync::Arc<AtomicBool>,
}

impl Deadline {
    fn arm(pid: i32, after: Duration, notices: Notices) -> Deadline {
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
                notices.warn(format!(
                    "pid {pid} ran past its {} limit; killing it",
                    fmt_ns(after.as_nanos() as u64)
                ));
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
    if java.file_name().is_none_or(|n| n != "java") {
        return record_process(s, &java, command, l, stop);
    }
    if s.outside {
        let mut cmd = std::process::Command::new(&java);
        cmd.args(rest);
        let child = Spawn {
            cmd,
            command,
            java_home: java_home.as_deref(),
            timeout_ms: None,
            stacks: false,
            kernel: false,
        };
        return record_child(s, child, l, stop);
    }
    let timeout_ms = l.safepoint_timeout.then(|| s.threshold_ns.div_ceil(1_000_000).max(1));
    let resolution =
        s.resolution_ns.map(|r| format!(",resolution={}us", r / 1000)).unwrap_or_default();
    let mut args = vec![
        format!(
            "-javaagent:{}=log={}/{},interval=1s{resolution}",
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
    let stacks_lib = if s.stacks == Stacks::Agent { stacks::find() } else { None };
    let frames = s.stacks != Stacks::Off && stacks_lib.is_none() && has_jfr(java_home.as_deref());
    if let Some(lib) = &stacks_lib {
        args.push(stacks::launch_option(lib, &s.dir));
    } else if frames {
        frames::write_settings(&s.dir)?;
        args.push(frames::launch_option(&s.dir));
        // JFR says it started on stdout, which is the application's; only `off` silences it (a
        // JFR that cannot start still fails the JVM's start with "Failure when starting JFR").
        // Only where the JVM knows that tag (JDK 17 on): an older one would not start at all.
        if let Some(quiet) = frames::quiet_startup_option(&java, java_home.as_deref()) {
            args.push(quiet.into());
        }
    } else if s.stacks != Stacks::Off {
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
        kernel: false,
    };
    let r = record_child(s, child, l, stop)?;
    if frames {
        // A child of ours in our pid namespace: its thread ids are ours.
        frames::extract_or_note(&s.dir, &|t| t as i32, &s.notices);
    }
    Ok(r)
}

/// Records a program that is not a JVM (`run -- dd …`): started as given, with nothing put into
/// it (handing it -javaagent would only break it: `sleep: invalid option -- 'j'`); its stalls are
/// its threads held off a CPU by the kernel, which only the kernel's events show (BPF), so
/// without them it is refused before it starts.
fn record_process(
    s: &Settings,
    program: &Path,
    command: &[String],
    l: &Launch,
    stop: &AtomicBool,
) -> Result<Recorded> {
    if let Some(why) = super::no_kernel_events(s) {
        anyhow::bail!(super::not_a_jvm_refusal(
            &format!("{} (run -- java … records a JVM)", program.display()),
            &why
        ));
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(&command[1..]);
    let child =
        Spawn { cmd, command, java_home: None, timeout_ms: None, stacks: false, kernel: true };
    record_child(s, child, l, stop)
}

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
    let child =
        Spawn { cmd, command, java_home: None, timeout_ms: None, stacks: false, kernel: false };
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
    /// Not a JVM: its stalls are found from the kernel's events ([`record_process`]).
    kernel: bool,
}

fn record_child(s: &Settings, child: Spawn, l: &Launch, stop: &AtomicBool) -> Result<Recorded> {
    let Spawn { mut cmd, command, java_home, timeout_ms, stacks, kernel } = child;
    configure(&mut cmd, l)?;
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", command.first().map_or("", String::as_str)))?;
    let _deadline = l.timeout.map(|t| Deadline::arm(child.id() as i32, t, s.notices.clone()));
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
        if unsafe { libc::geteuid() } == 0 { Some(guard::Guard::start()?) } else { None };
    let tracing = start_tracer(pid, guard.as_mut(), s, !kernel && !s.outside && l.boost.is_none());
    let mut m = meta("run", command.to_vec(), pid, java_home, s, timeout_ms, &tracing);
    m.not_a_jvm = kernel;
    let mut w = super::open_writer(s, &m)?;
    if l.chatty {
        s.notices.progress(format!(
            "recording pid {pid} into {} (stalls ≥ {})",
            s.dir.display(),
            fmt_ns(s.threshold_ns)
        ));
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
    let booster = match l.boost {
        Some((level, boost::BoostOn::Safepoint { poll_ns })) => {
            Some(super::safepoint_boost::SafepointBooster::start(pid, level, poll_ns)?)
        }
        _ => None,
    };
    if kernel {
        let pulse = match tracing.reader.clone() {
            Some(r) => pulse::Pulse::kernel(pid, r),
            None => {
                s.notices.warn(format!(
                    "pid {pid}: the kernel's events could not be read ({}); only a stopped process is seen from /proc",
                    tracing.note.as_deref().unwrap_or("no BPF")
                ));
                pulse::Pulse::counters(pid, None)
            }
        };
        let what = process_target(pid, pulse, &tracing, s, None);
        ending = sampler::run(&mut w, what, stop, &mut || alive(&mut exit, &mut child))?;
    } else if s.outside {
        // Its counters exist once HotSpot has started: until then only /proc is watched.
        let jc = wait_for_counters(pid, &mut || alive(&mut exit, &mut child), stop);
        if jc.is_none() && alive(&mut exit, &mut child) {
            s.notices.warn(format!(
                "pid {pid}: no perf counters to watch; only a stopped process is seen from /proc"
            ));
        }
        let jc = match jc {
            Some(c) => {
                w.events.line(&Event::Counters { t: mono_ns(), info: c.info.clone().to_disk() })?;
                Some(c)
            }
            None => open_counters(pid, &mut w)?,
        };
        let code = sampler::CodeAsks { outside: outside_stacks(s, pid), ..Default::default() };
        let pulse = pulse::Pulse::counters(pid, jc);
        let what = sampler::Target { code, ..process_target(pid, pulse, &tracing, s, None) };
        ending = sampler::run(&mut w, what, stop, &mut || alive(&mut exit, &mut child))?;
    }
    let hb = if s.outside || kernel {
        None
    } else {
        match sampler::wait_for_heartbeat(
            pid,
            Duration::from_secs(60),
            &mut || alive(&mut exit, &mut child),
            stop,
        ) {
            Ok(h) => h,
            Err(e) => {
                s.notices.warn(format!("{e:#}; recording without stall detection"));
                None
            }
        }
    };
    if let Some(hb) = hb {
        let boost = match l.boost {
            Some((level, boost::BoostOn::Heartbeat { after_ns })) => Some((level, after_ns)),
            _ => None,
        };
        let opts = SamplerOptions { boost, ..watch_options(s) };
        let code = heartbeat_code_asks(s, pid, stacks, java_home);
        let pulse = pulse::Pulse::heartbeat(pid, hb, open_counters(pid, &mut w)?);
        let what = sampler::Target { opts, code, ..process_target(pid, pulse, &tracing, s, None) };
        ending = sampler::run(&mut w, what, stop, &mut || alive(&mut exit, &mut child))?;
    }
    let (status, interrupted) = wait_for_exit(&ending, exit, &mut child, &mut w, stop)?;
    for e in booster.map(|b| b.finish()).unwrap_or_default() {
        if let (Event::SafepointBooster { failed: Some(why), .. }, true) = (&e, l.chatty) {
            s.notices.warn(format!("pid {pid}: did not boost: {why}"));
        }
        w.events.line(&e)?;
    }
    w.events.line(&Event::TargetExit {
        t: mono_ns(),
        code: status.code(),
        signal: status.signal(),
    })?;
    if interrupted {
        stop.store(true, Ordering::Relaxed);
    }
    let stdout = reader.map(|r| r.join().unwrap_or_default()).unwrap_or_default();
    Ok(Recorded { status, stdout })
}

/// Sets up the child before exec: its stdout captured, its nice value, the cgroups it joins,
/// its own perf-data directory.
fn configure(cmd: &mut std::process::Command, l: &Launch) -> Result<()> {
    if l.capture_stdout {
        cmd.stdout(std::process::Stdio::piped());
    }
    // The JVM starts with the open-files limit stallscope was given, not the one it raised.
    procwatch::limits::give_back(cmd);
    if let Some(n) = l.nice {
        // SAFETY: between fork and exec, one async-signal-safe call on ourselves.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                libc::setpriority(libc::PRIO_PROCESS, 0, n);
                Ok(())
            });
        }
    }
    for procs in &l.cgroups {
        let procs = std::ffi::CString::new(procs.as_os_str().as_encoded_bytes())?;
        // SAFETY: between fork and exec only async-signal-safe calls on memory made before.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || join_cgroup(&procs));
        }
    }
    if let Some(dir) = &l.perf_data_dir {
        private_perf_data_dir(cmd, dir)?;
    }
    Ok(())
}

/// How the code of a launched JVM with a heartbeat is named: the stacks agent's samples, taken by
/// signal in the stall; without it, JFR's samples and, during long stalls, the JVM's thread dump.
fn heartbeat_code_asks(
    s: &Settings,
    pid: i32,
    stacks: bool,
    java_home: Option<&Path>,
) -> sampler::CodeAsks {
    if stacks {
        sampler::CodeAsks {
            signaller: Some(stacks::Signaller::new(pid, &s.dir)),
            ..Default::default()
        }
    } else {
        let dumper = if s.stacks != Stacks::Off
            && java_home.is_some()
            && s.dir.join(files::FRAMES_JFC).exists()
        {
            Jvm::find(pid).ok().and_then(|j| dumps::Dumper::start(j, &s.dir, s.live.as_ref()).ok())
        } else {
            None
        };
        sampler::CodeAsks { dumper, ..Default::default() }
    }
}

/// After the sampling loop: the JVM told of a stop it did not see (Ctrl-C reaches a terminal's
/// JVM itself), then waited for; a second interrupt while it exits kills it. Returns its status
/// and whether the caller was interrupted.
fn wait_for_exit(
    ending: &Ending,
    mut exit: Option<std::process::ExitStatus>,
    child: &mut std::process::Child,
    w: &mut Writer,
    stop: &AtomicBool,
) -> Result<(std::process::ExitStatus, bool)> {
    let pid = child.id() as i32;
    let alive =
        |exit: &mut Option<std::process::ExitStatus>, child: &mut std::process::Child| -> bool {
            if exit.is_none() {
                *exit = child.try_wait().ok().flatten();
            }
            exit.is_none()
        };
    if let Ending::Stopped(reason) = ending {
        // Ctrl-C in a terminal reaches the JVM too; forward it only if it did not.
        let t0 = Instant::now();
        while alive(&mut exit, child) && t0.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if alive(&mut exit, child) {
            // SAFETY: plain kill of our child.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        w.events.line(&Event::Detach { t: mono_ns(), reason: reason.clone() })?;
    }
    // Cleared to see a second interrupt while the JVM exits; set again after, so that a caller
    // looping over runs (the lab) stops too.
    let mut interrupted = stop.swap(false, Ordering::Relaxed)
        || matches!(ending, Ending::Stopped(r) if r == "interrupted");
    let status = match exit {
        Some(s) => s,
        None => loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if stop.swap(false, Ordering::Relaxed) {
                // An interrupt while it exits (a second one, or the first after it ended on
                // its own): it is not stopping by itself, and the caller stops too.
                interrupted = true;
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        },
    };
    Ok((status, interrupted))
}

/// Makes the child's `/tmp/hsperfdata_<user>` be `dir`, in a mount namespace of its own (so
/// no other process sees the bind, and it goes when the child does).
fn private_perf_data_dir(cmd: &mut std::process::Command, dir: &Path) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid != 0 {
        anyhow::bail!("a private perf-data folder needs root (a mount namespace and a bind mount)");
    }
    // HotSpot names the folder after the user's name in the password database.
    let user = user_name(uid).unwrap_or_else(|| "root".to_string());
    let target = PathBuf::from(format!("/tmp/hsperfdata_{user}"));
    std::fs::create_dir_all(&target)
        .with_context(|| format!("creating {} (the bind's mount point)", target.display()))?;
    let c = |p: &Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes());
    let (src, dst, root) = (c(dir)?, c(&target)?, c(Path::new("/"))?);
    // SAFETY: between fork and exec, raw system calls on memory made before the fork.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            let fail = || Err(std::io::Error::last_os_error());
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                return fail();
            }
            let private = libc::MS_REC | libc::MS_PRIVATE;
            if libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                private,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            if libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) != 0
            {
                return fail();
            }
            Ok(())
        });
    }
    Ok(())
}

/// The name of user `uid` (getpwuid_r: the recorder has threads of its own).
fn user_name(uid: libc::uid_t) -> Option<String> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: passwd is plain data; getpwuid_r writes only into it and `buf`, both ours.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: the buffers outlive the call; `found` is set to `&pw` or null.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points into `buf`, NUL-terminated.
    Some(unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned())
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

/// Writes the calling process's pid into a `cgroup.procs` file without allocating (it runs
/// between fork and exec): how a child is put into the cgroups a caller names.
pub fn join_cgroup(procs: &std::ffi::CStr) -> std::io::Result<()> {
    let mut buf = [0u8; 16];
    // SAFETY: getpid has no preconditions.
    let mut pid = unsafe { libc::getpid() } as u32;
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 {
            break;
        }
    }
    // SAFETY: a valid C string; a buffer we own.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, buf[i..].as_ptr() as *const libc::c_void, buf.len() - i);
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n < 0 {
            return Err(err);
        }
    }
    Ok(())
}
