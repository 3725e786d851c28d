//! `attach`: look first, then ask. The moment it has a pid the recorder watches the JVM from
//! outside, through its perf counters and `/proc` (pulse.rs), which a stopped or stuck JVM
//! cannot refuse; the attach protocol (the agent, safepoint logging, stacks) is tried beside
//! that, on a thread of its own, once the JVM runs and is between safepoints. When it gets in,
//! the agent's heartbeat takes over; when it never does, the recording still holds the whole
//! stall.
//!
//! Invariant: nothing is sent to a JVM that is stopped or in a safepoint (SIGQUIT to a stopped
//! JVM waits for SIGCONT and then prints a thread dump into the application's stdout), nor to one
//! that says it has no attach mechanism; and whatever the attach changed is undone at the end,
//! or by the guardian if stallscope dies or the JVM stops answering first.

use super::watch::{self, Ending, Hooks, Joined};
use super::{
    Drive, Settings, Stacks, dumps, frames, open_counters, pulse::Pulse, staging, start_frames,
    start_tracer, watch_options,
};
use crate::attach::Jvm;
use crate::guard::{Guard, Token, Undo};
use anyhow::{Context, Result};
use procwatch::clock::mono_ns;
use recording::units::fmt_ns;
use recording::{Event, Writer, files};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// How the asking ended.
#[derive(Clone)]
struct Asked {
    /// When the agent got in, or why it did not.
    joined_at: Option<u64>,
    refused: Option<(u64, String)>,
}

/// The attach protocol, tried on a thread of its own.
struct Asking {
    thread: std::thread::JoinHandle<()>,
    /// How it went, as soon as that is known (before what it asked is undone).
    outcome: Arc<std::sync::Mutex<Option<Asked>>>,
    /// Set when watching ends: stop asking, undo what was asked, and return.
    done: Arc<AtomicBool>,
}

/// How long the end waits for the asking thread to undo what it asked of the JVM. Past it the
/// JVM is not answering, and the guardian undoes it once stallscope exits.
const UNDO_WAIT: Duration = Duration::from_secs(20);

/// Why the attach protocol must not be tried at all, if it must not.
fn no_attach(pid: i32, counters: Option<&procwatch::jvmcounters::JvmCounters>) -> Option<String> {
    // `sun.rt.jvmCapabilities`: its first character is 1 when the JVM has an attach mechanism.
    let caps = counters.and_then(|c| c.perf_data().get_text("sun.rt.jvmCapabilities"));
    let flag = procwatch::jvms::cmdline(pid).iter().any(|a| a == "-XX:+DisableAttachMechanism");
    (flag || caps.is_some_and(|c| c.starts_with('0'))).then(|| {
        "the JVM was started with -XX:+DisableAttachMechanism: it cannot be asked for anything"
            .to_string()
    })
}

/// Attaches to a running JVM (`jvm`), records it into `s.dir` until `run_for` elapses, `stop`
/// is set or the JVM exits, and leaves it as it was found. `drive`: watched by `stallscope
/// watch`'s heartbeat loop rather than by a loop of its own (it needs the agent first). `now`:
/// told, about a second in, what was written so far (attach says what is happening now).
pub fn record_attached(
    s: &Settings,
    jvm: &Jvm,
    run_for: Option<Duration>,
    stop: &AtomicBool,
    drive: Option<Drive>,
    now: Option<Box<dyn FnOnce(watch::Now) + Send>>,
) -> Result<()> {
    let pid = jvm.pid;
    let command = procwatch::jvms::cmdline(pid);
    // The trace instance is registered with a guardian before it is made.
    let mut guard = Guard::start()?;
    let tracing = start_tracer(pid, Some(&mut guard));
    let mut w = Writer::open_background(
        &s.dir,
        &super::meta("attach", command, pid, jvm.java_home.as_deref(), s, None, &tracing),
    )?;
    let counters = open_counters(pid, &mut w)?;
    let refusal = no_attach(pid, counters.as_ref());
    let askable = Arc::new(AtomicBool::new(false));
    let (joined_tx, joined_rx) = std::sync::mpsc::channel();
    let asking = match &refusal {
        None => Some(ask(s, jvm, Arc::clone(&askable), joined_tx)?),
        Some(why) if drive.is_none() => {
            eprintln!(
                "stallscope: JVM pid {pid}: {why}; recorded from its counters and /proc alone"
            );
            w.events.line(&Event::Attached { t: mono_ns(), refused: Some(why.clone()) })?;
            None
        }
        Some(why) => {
            return Err(crate::failure::Failure::error(
                crate::failure::EXIT_FAILURE,
                format!("JVM pid {pid}: {why}"),
            ));
        }
    };
    let alive = &mut || Path::new(&format!("/proc/{pid}")).exists();
    let deadline = run_for.map(|d| Instant::now() + d);
    let (pulse, driven, code, hooks) = match drive {
        // `watch`'s one loop follows heartbeats: the agent first, as before.
        Some(d) => {
            askable.store(true, Ordering::Relaxed);
            let joined = joined_rx.recv_timeout(Duration::from_secs(30)).map_err(|_| ());
            let Ok(j) = joined else {
                let asked = asking.map(|a| finish(a, pid));
                let why = asked.and_then(|a| a.refused).map_or_else(
                    || refusal.clone().unwrap_or_else(|| "the agent did not start".into()),
                    |r| r.1,
                );
                return Err(crate::failure::Failure::error(
                    crate::failure::EXIT_FAILURE,
                    format!("JVM pid {pid}: {why}"),
                ));
            };
            let driven = d(pid, &j.hb);
            (
                Pulse::heartbeat(pid, j.hb, counters),
                Some(driven),
                watch::CodeAsks { dumper: j.dumper, ..Default::default() },
                Hooks { askable: None, heartbeat: None, now },
            )
        }
        None => (
            Pulse::counters(pid, counters),
            None,
            watch::CodeAsks { outside: super::outside_stacks(s, pid), ..Default::default() },
            Hooks { askable: Some(Arc::clone(&askable)), heartbeat: Some(joined_rx), now },
        ),
    };
    eprintln!(
        "stallscope: watching JVM pid {pid} into {} (stalls ≥ {}){}",
        s.dir.display(),
        fmt_ns(s.threshold_ns),
        match (run_for, drive) {
            (Some(d), _) => format!(" for {}", fmt_ns(d.as_nanos() as u64)),
            (None, None) => "; Ctrl-C detaches".into(),
            (None, Some(_)) => String::new(),
        }
    );
    let what = watch::Watch {
        pid,
        pulse,
        tracer: tracing.0.as_ref(),
        opts: watch_options(s),
        deadline,
        driven,
        code,
        hooks,
    };
    let watched = watch::watch(&mut w, what, stop, alive);
    let ended_at = mono_ns();
    let asked = asking.map(|a| finish(a, pid));
    if let Some(a) = &asked {
        if let Some((t, why)) = &a.refused {
            eprintln!(
                "stallscope: JVM pid {pid}: the attach protocol did not get in ({why}); recorded from its counters and /proc alone"
            );
            w.events.line(&Event::Attached { t: *t, refused: Some(why.clone()) })?;
        } else if let Some(t) = a.joined_at {
            w.events.line(&Event::Attached { t, refused: None })?;
        }
    }
    match watched? {
        Ending::TargetExited => {
            w.events.line(&Event::TargetExit { t: ended_at, code: None, signal: None })?
        }
        Ending::Stopped(reason) => w.events.line(&Event::Detach { t: ended_at, reason })?,
    }
    Ok(())
}

/// Ends the asking: it stops asking, undoes what it asked (the JVM as it was found) and says how
/// it went; a JVM that does not answer within [`UNDO_WAIT`] is left to the guardian.
fn finish(a: Asking, pid: i32) -> Asked {
    a.done.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut said = false;
    while !a.thread.is_finished() && t0.elapsed() < UNDO_WAIT {
        if !said && t0.elapsed() > Duration::from_secs(2) {
            eprintln!(
                "stallscope: JVM pid {pid} answers slowly (its safepoints are held up): leaving it as it was found, up to {} s",
                UNDO_WAIT.as_secs()
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let outcome = a.outcome.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if a.thread.is_finished() {
        let _ = a.thread.join();
    } else {
        eprintln!(
            "stallscope: JVM pid {pid} did not answer within {} s; the guardian undoes what was asked of it once it does",
            UNDO_WAIT.as_secs()
        );
    }
    // Still waiting to ask, or for an answer, when watching ended.
    outcome.unwrap_or_else(|| Asked { joined_at: None, refused: Some((mono_ns(), "the JVM could not be asked before watching ended (it was stopped, or in a safepoint, or did not answer)".into())) })
}

/// Starts asking the JVM, on a thread of its own, once `askable` says it runs between
/// safepoints.
fn ask(
    s: &Settings,
    jvm: &Jvm,
    askable: Arc<AtomicBool>,
    joined: Sender<Joined>,
) -> Result<Asking> {
    let done = Arc::new(AtomicBool::new(false));
    let outcome = Arc::new(std::sync::Mutex::new(None));
    let (s, jvm, d, o) = (s.clone(), jvm.clone(), Arc::clone(&done), Arc::clone(&outcome));
    let thread = std::thread::Builder::new().name("stallscope-attach".into()).spawn(move || {
        let mut changes = Changes::default();
        let asked = match cooperate(&s, &jvm, &askable, &d, &joined, &mut changes) {
            Ok(Some(t)) => Some(Asked { joined_at: Some(t), refused: None }),
            // Watching ended before the JVM could be asked.
            Ok(None) => None,
            Err(e) => Some(Asked { joined_at: None, refused: Some((mono_ns(), format!("{e:#}"))) }),
        };
        *o.lock().unwrap_or_else(|p| p.into_inner()) = asked;
        // Hold the changes until watching ends, then undo them.
        while !d.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        changes.undo(&s, &jvm);
    })?;
    Ok(Asking { thread, outcome, done })
}

/// What the attach changed in the JVM, each registered with the guardian before it was made.
#[derive(Default)]
struct Changes {
    guard: Option<Guard>,
    staging: Option<(staging::Staging, Token)>,
    agent_stop: Option<Token>,
    log_off: Option<Token>,
    /// The JVM's safepoint log, as the JVM names it.
    log: String,
    jvm_jar: Option<std::path::PathBuf>,
    frames: Option<(Token, std::thread::JoinHandle<Result<String>>)>,
}

/// Waits until the JVM may be asked, then loads the agent, switches its safepoint log on, starts
/// its stacks, and hands the heartbeat to the loop. Returns when the agent got in.
fn cooperate(
    s: &Settings,
    jvm: &Jvm,
    askable: &AtomicBool,
    done: &AtomicBool,
    joined: &Sender<Joined>,
    ch: &mut Changes,
) -> Result<Option<u64>> {
    let pid = jvm.pid;
    // Never a signal or a command to a JVM stopped or in a safepoint: wait.
    while !askable.load(Ordering::Relaxed) {
        if done.load(Ordering::Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let guard = ch.guard.insert(Guard::start()?);
    let jar = std::fs::canonicalize(&s.jar)
        .with_context(|| format!("{}: the agent jar is not there", s.jar.display()))?;
    // A JVM in a container sees neither the recording directory nor the jar: both are staged in
    // its own /tmp, and the logs copied out at the end.
    if procwatch::ns::other_mount_ns(pid) {
        // Its removal registered before it exists: a kill in between leaves nothing.
        let name = staging::fresh_name();
        let starttime = procwatch::task::process_starttime(pid)
            .with_context(|| format!("JVM pid {pid}: gone"))?;
        let token =
            guard.add(Undo::RemoveDir { path: staging::reached(pid, &name), pid, starttime })?;
        let mut st = staging::Staging::make(pid, &name)?;
        st.fill(jvm.uid, jvm.gid, &jar)?;
        ch.staging = Some((st, token));
    }
    let (jvm_dir, jvm_jar) = match &ch.staging {
        Some((st, _)) => (st.inside.clone(), st.jar()),
        None => (s.dir.clone(), jar),
    };
    ch.log = format!("file={}/{}", jvm_dir.display(), files::SAFEPOINT_LOG);
    ch.jvm_jar = Some(jvm_jar.clone());
    let stop_agent = guard.add(Undo::JvmCommand {
        pid,
        command: "load".into(),
        args: vec!["instrument".into(), "false".into(), format!("{}=stop", jvm_jar.display())],
    })?;
    // A note left by an earlier attach that died before reading it would be taken for this one's.
    let _ = procwatch::heartbeat::take_failure_note(pid);
    let resolution =
        s.resolution_ns.map(|r| format!(",resolution={}us", r / 1000)).unwrap_or_default();
    if let Err(e) = jvm.load_agent(
        &jvm_jar,
        &format!("log={}/{},interval=1s{resolution}", jvm_dir.display(), files::HICCUPS),
    ) {
        // Refused (no attach socket, the agent failed to start): nothing to undo.
        guard.forget(stop_agent);
        return Err(e);
    }
    ch.agent_stop = Some(stop_agent);
    // The agent starts inside the load command: when it could not, its note is there now, with
    // the reason the JVM's stderr got (a recording directory the JVM cannot write).
    if let Some(why) = procwatch::heartbeat::take_failure_note(pid) {
        if let Some(t) = ch.agent_stop.take() {
            guard.forget(t);
        }
        return Err(crate::failure::Failure::error(
            crate::failure::EXIT_FAILURE,
            format!(
                "the stallscope agent did not start inside it: {why}; give --out a directory the JVM's user (uid {}) can reach and write",
                jvm.uid
            ),
        ));
    }
    let log_off = guard.add(Undo::JvmCommand {
        pid,
        command: "jcmd".into(),
        args: vec![format!("VM.log output={} what=all=off", ch.log)],
    })?;
    if let Err(e) = jvm.jcmd(&format!("VM.log output={} output_options=filecount=0 what=safepoint*=debug decorators=uptime,timenanos,level,tags", ch.log)) {
        guard.forget(log_off);
        return Err(e);
    }
    ch.log_off = Some(log_off);
    // The JVM's own stack samples: a flight recording, ended (and written) at detach. Not yet in
    // a container: JFR keeps a repository in the JVM's own /tmp until it exits, which would be
    // left behind there.
    if s.stacks != Stacks::Off {
        if ch.staging.is_some() {
            let _ = frames::note(
                &s.dir,
                "no stacks: not yet for a JVM in a container (JFR would leave its repository in the container's /tmp)",
            );
        } else {
            ch.frames = start_frames(s, jvm, &jvm_dir, guard)?;
        }
    }
    let mut alive = || Path::new(&format!("/proc/{pid}")).exists();
    let Some(hb) = watch::wait_for_heartbeat(pid, Duration::from_secs(15), &mut alive, done)?
    else {
        return Ok(None);
    };
    let dumper =
        if ch.frames.is_some() { dumps::Dumper::start(jvm.clone(), &s.dir).ok() } else { None };
    let at = mono_ns();
    let _ = joined.send(Joined { hb, dumper });
    eprintln!(
        "stallscope: JVM pid {pid}: the agent is in; its heartbeat drives the recording from here"
    );
    Ok(Some(at))
}

impl Changes {
    /// Leaves the JVM as it was found: its flight recording ended and read, its logging off, the
    /// meter stopped, the staged logs copied out. Harmless for what was never done.
    fn undo(mut self, s: &Settings, jvm: &Jvm) {
        let pid = jvm.pid;
        let running = || Path::new(&format!("/proc/{pid}")).exists();
        let Some(mut guard) = self.guard.take() else { return };
        let frames_on = self.frames.take().and_then(|(token, started)| match started.join() {
            Ok(Ok(out)) if out.contains("Started recording") => Some(token),
            other => {
                guard.forget(token);
                let said = match other {
                    Ok(Ok(out)) => out.trim().to_string(),
                    Ok(Err(e)) => format!("{e:#}"),
                    Err(_) => "the attach thread failed".to_string(),
                };
                let text = format!("no stacks: JFR.start failed: {said}");
                eprintln!("stallscope: JVM pid {pid}: {text}");
                let _ = frames::note(&s.dir, &text);
                None
            }
        });
        if running()
            && frames_on.is_some()
            && let Err(e) = jvm.jcmd(&frames::jcmd_stop())
        {
            eprintln!("stallscope: detaching: {e:#}");
        }
        // The JVM's thread ids as the host numbers them, while it is still there to ask.
        let (host_tids, in_container) =
            (procwatch::ns::host_tids(pid), procwatch::ns::other_pid_ns(pid));
        if running() {
            if self.log_off.is_some()
                && let Err(e) = jvm.jcmd(&format!("VM.log output={} what=all=off", self.log))
            {
                eprintln!("stallscope: detaching: {e:#}");
            }
            if let (Some(_), Some(jar)) = (&self.agent_stop, &self.jvm_jar)
                && let Err(e) = jvm.load_agent(jar, "stop")
            {
                eprintln!("stallscope: detaching: {e:#}");
            }
        }
        // Undone above, or the JVM is gone: nothing for the guardian to do.
        for t in [self.log_off, self.agent_stop, frames_on].into_iter().flatten() {
            guard.forget(t);
        }
        if let Some((st, token)) = self.staging.take() {
            // The stopped agent finishes its hiccup log, then removes its heartbeat: wait for that.
            let hb = procwatch::heartbeat::default_path(pid);
            let t0 = Instant::now();
            while hb.exists() && t0.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let (removed, problem) = st.finish(&s.dir, &[files::SAFEPOINT_LOG, files::HICCUPS]);
            if removed {
                guard.forget(token);
            }
            if let Some(p) = problem {
                eprintln!("stallscope: {p}");
            }
        }
        if frames_on.is_some() {
            // In a container, a thread the JVM numbers is only known on the host while the JVM
            // runs; after it exited, its stacks cannot be placed and are left out.
            frames::extract_or_note(&s.dir, &|t| {
                if in_container && host_tids.is_empty() {
                    0
                } else {
                    procwatch::ns::host_tid(&host_tids, t as i32)
                }
            });
        }
    }
}

/// Drives a JVM's watcher from `watch`'s one loop, which looks at the JVM from outside through
/// its own mapping of the JVM's counters (given it here).
pub type DriveOutside<'a> =
    &'a (dyn Fn(i32, Option<procwatch::jvmcounters::JvmCounters>) -> watch::Driven + Sync);

/// Records JVM `pid` from outside only, driven by `watch`'s one loop, until `stop` is set or it
/// exits: nothing is put into the JVM, nothing is asked of it.
pub fn record_outside(
    s: &Settings,
    pid: i32,
    stop: &AtomicBool,
    drive: DriveOutside,
) -> Result<()> {
    let command = procwatch::jvms::cmdline(pid);
    // No tracepoints: an instance per JVM, each filtering by pid, hooks every context switch on
    // the host (measured: 50 idle JVMs took 84% of a core with one each against 44% without).
    let tracing = (None, Some("watched by `watch` from outside: no tracepoint evidence (fault addresses, mmap_lock wait times); `stallscope attach` as root adds it for one JVM".to_string()));
    let java_home = procwatch::jvms::jvm(pid).ok().flatten().and_then(|j| j.java_home);
    let mut w = Writer::open_background(
        &s.dir,
        &super::meta("watch", command, pid, java_home.as_deref(), s, None, &tracing),
    )?;
    let counters = open_counters(pid, &mut w)?;
    if counters.is_none() {
        let why = procwatch::jvmcounters::JvmCounters::of_pid(pid)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        eprintln!(
            "stallscope: {why}; watched through /proc alone (a stall is seen only when it stops)"
        );
    }
    let driven = drive(pid, procwatch::jvmcounters::JvmCounters::of_pid(pid).ok());
    let alive = &mut || Path::new(&format!("/proc/{pid}")).exists();
    let what = watch::Watch {
        pid,
        pulse: Pulse::counters(pid, counters),
        tracer: None,
        opts: watch_options(s),
        deadline: None,
        driven: Some(driven),
        code: watch::CodeAsks { outside: super::outside_stacks(s, pid), ..Default::default() },
        hooks: Hooks::default(),
    };
    let watched = watch::watch(&mut w, what, stop, alive)?;
    let t = mono_ns();
    match watched {
        Ending::TargetExited => {
            w.events.line(&Event::TargetExit { t, code: None, signal: None })?
        }
        Ending::Stopped(reason) => w.events.line(&Event::Detach { t, reason })?,
    }
    Ok(())
}
