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

use super::changes::Attachment;
use super::sampler::{self, Ending, Hooks, Joined};
use super::{
    Drive, Settings, Stacks, dumps, open_counters, pulse::Pulse, start_tracer, watch_options,
};
use anyhow::Result;
use guard::Guard;
use hotspot_attach::Jvm;
use procwatch::clock::mono_ns;
use recording::Event;
use recording::Notices;
use recording::units::fmt_ns;
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

/// How long the end waits for the asking thread to undo what it asked of a JVM the agent got
/// into. Past it the JVM is not answering, and the guardian undoes it once stallscope exits.
const UNDO_WAIT: Duration = Duration::from_secs(20);
/// How long the end waits for an asking thread that never got in (the JVM held in a safepoint or
/// stopped all along): what it may have half-asked is the guardian's, and the command ends
/// within a second of its window.
const NOT_IN_WAIT: Duration = Duration::from_secs(1);

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
    now: Option<Box<dyn FnOnce(sampler::Now) + Send>>,
) -> Result<()> {
    let pid = jvm.pid;
    let command = procwatch::jvms::cmdline(pid);
    // The trace instance is registered with a guardian before it is made.
    let mut guard = Guard::start()?;
    let tracing = start_tracer(pid, Some(&mut guard), s, drive.is_none());
    let mut w = super::open_writer(
        s,
        &super::meta("attach", command, pid, jvm.java_home.as_deref(), s, None, &tracing),
    )?;
    let counters = open_counters(pid, &mut w)?;
    let refusal = no_attach(pid, counters.as_ref());
    let askable = Arc::new(AtomicBool::new(false));
    let (joined_tx, joined_rx) = std::sync::mpsc::channel();
    let asking = match &refusal {
        None => Some(ask(s, jvm, Arc::clone(&askable), joined_tx)?),
        Some(why) if drive.is_none() => {
            s.notices
                .warn(format!("JVM pid {pid}: {why}; recorded from its counters and /proc alone"));
            w.events.line(&Event::Attached { t: mono_ns(), refused: Some(why.clone()) })?;
            None
        }
        Some(why) => {
            return Err(anyhow::anyhow!("JVM pid {pid}: {why}"));
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
                let asked = asking.map(|a| finish(a, pid, &s.notices));
                let why = asked.and_then(|a| a.refused).map_or_else(
                    || refusal.clone().unwrap_or_else(|| "the agent did not start".into()),
                    |r| r.1,
                );
                return Err(anyhow::anyhow!("JVM pid {pid}: {why}"));
            };
            let driven = d(pid, &j.hb);
            (
                Pulse::heartbeat(pid, j.hb, counters),
                Some(driven),
                sampler::CodeAsks { dumper: j.dumper, ..Default::default() },
                Hooks { askable: None, heartbeat: None, now },
            )
        }
        None => (
            Pulse::counters(pid, counters),
            None,
            sampler::CodeAsks { outside: super::outside_stacks(s, pid), ..Default::default() },
            Hooks { askable: Some(Arc::clone(&askable)), heartbeat: Some(joined_rx), now },
        ),
    };
    s.notices.progress(format!(
        "watching JVM pid {pid} into {} (stalls ≥ {}){}",
        s.dir.display(),
        fmt_ns(s.threshold_ns),
        match (run_for, drive) {
            (Some(d), _) => format!(" for {}", fmt_ns(d.as_nanos() as u64)),
            (None, None) => "; Ctrl-C detaches".into(),
            (None, Some(_)) => String::new(),
        }
    ));
    let what = sampler::Target {
        driven,
        code,
        hooks,
        ..super::process_target(pid, pulse, &tracing, s, deadline)
    };
    let watched = sampler::run(&mut w, what, stop, alive);
    let ended_at = mono_ns();
    let asked = asking.map(|a| finish(a, pid, &s.notices));
    if let Some(a) = &asked {
        if let Some((t, why)) = &a.refused {
            s.notices.warn(format!(
                "JVM pid {pid}: the attach protocol did not get in ({why}); recorded from its counters and /proc alone"
            ));
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

/// Watches process `pid`, which is not a JVM, into `s.dir` until `run_for` elapses, `stop` is
/// set or it exits: its stalls are its threads held off a CPU by the kernel (the kernel's
/// events, see pulse.rs). Nothing is asked of it. Refused, before anything starts, where the
/// kernel's events cannot be had.
pub fn record_process(
    s: &Settings,
    pid: i32,
    run_for: Option<Duration>,
    stop: &AtomicBool,
) -> Result<()> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if let Some(why) = super::no_kernel_events(s) {
        anyhow::bail!(super::not_a_jvm_refusal(&format!("pid {pid} ({})", comm.trim()), &why));
    }
    let command = procwatch::jvms::cmdline(pid);
    let mut guard = Guard::start()?;
    let tracing = start_tracer(pid, Some(&mut guard), s, false);
    let Some(reader) = tracing.reader.clone() else {
        anyhow::bail!(super::not_a_jvm_refusal(
            &format!("pid {pid} ({})", comm.trim()),
            tracing.note.as_deref().unwrap_or("the BPF program did not load")
        ));
    };
    let mut m = super::meta("attach", command, pid, None, s, None, &tracing);
    m.not_a_jvm = true;
    let mut w = super::open_writer(s, &m)?;
    s.notices.progress(format!(
        "watching pid {pid} ({}, not a JVM: its threads held by the kernel) into {} (stalls ≥ {}){}",
        comm.trim(),
        s.dir.display(),
        fmt_ns(s.threshold_ns),
        match run_for {
            Some(d) => format!(" for {}", fmt_ns(d.as_nanos() as u64)),
            None => "; Ctrl-C detaches".into(),
        }
    ));
    let deadline = run_for.map(|d| Instant::now() + d);
    let what = super::process_target(pid, Pulse::kernel(pid, reader), &tracing, s, deadline);
    let alive = &mut || Path::new(&format!("/proc/{pid}")).exists();
    let watched = sampler::run(&mut w, what, stop, alive);
    let ended_at = mono_ns();
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
fn finish(a: Asking, pid: i32, notices: &Notices) -> Asked {
    a.done.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    let mut said = false;
    let got_in = || {
        a.outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|o| o.joined_at.is_some())
    };
    while !a.thread.is_finished()
        && t0.elapsed() < UNDO_WAIT
        && (t0.elapsed() < NOT_IN_WAIT || got_in())
    {
        if !said && t0.elapsed() > Duration::from_secs(2) {
            notices.warn(format!(
                "JVM pid {pid} answers slowly (its safepoints are held up): leaving it as it was found, up to {} s",
                UNDO_WAIT.as_secs()
            ));
            said = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let outcome = a.outcome.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if a.thread.is_finished() {
        let _ = a.thread.join();
    } else {
        notices.warn(format!(
            "JVM pid {pid} did not answer within {} s; the guardian undoes what was asked of it once it does",
            t0.elapsed().as_secs_f64().round()
        ));
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
        let mut att = None;
        let asked = match cooperate(&s, &jvm, &askable, &d, &joined, &mut att) {
            Ok(Some(t)) => Some(Asked { joined_at: Some(t), refused: None }),
            // Watching ended before the JVM could be asked.
            Ok(None) => None,
            Err(e) => Some(Asked { joined_at: None, refused: Some((mono_ns(), format!("{e:#}"))) }),
        };
        *o.lock().unwrap_or_else(|p| p.into_inner()) = asked;
        // Nothing more will be sent: a loop waiting to be joined learns of a refusal now, not
        // at its timeout (30 s in `watch`).
        drop(joined);
        // Hold the changes until watching ends, then undo them.
        while !d.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(a) = att {
            a.detach();
        }
    })?;
    Ok(Asking { thread, outcome, done })
}

/// Waits until the JVM may be asked, then loads the agent, switches its safepoint log on, starts
/// its stacks, and hands the heartbeat to the loop. Returns when the agent got in; what it changed
/// is in `att`, to be undone when watching ends.
fn cooperate(
    s: &Settings,
    jvm: &Jvm,
    askable: &AtomicBool,
    done: &AtomicBool,
    joined: &Sender<Joined>,
    att: &mut Option<Attachment>,
) -> Result<Option<u64>> {
    let pid = jvm.pid;
    // Never a signal or a command to a JVM stopped or in a safepoint: wait.
    while !askable.load(Ordering::Relaxed) {
        if done.load(Ordering::Relaxed) {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let att = att.insert(Attachment::new(s, jvm)?);
    let (jvm_dir, jvm_jar) = att.stage()?;
    att.load_agent(&jvm_jar, &jvm_dir)?;
    att.log_safepoints(&jvm_dir)?;
    if s.stacks != Stacks::Off {
        att.record_stacks(&jvm_dir)?;
    }
    let mut alive = || Path::new(&format!("/proc/{pid}")).exists();
    let Some(hb) = sampler::wait_for_heartbeat(pid, Duration::from_secs(15), &mut alive, done)?
    else {
        return Ok(None);
    };
    let dumper = if att.stacks_asked() {
        dumps::Dumper::start(jvm.clone(), &s.dir, s.live.as_ref()).ok()
    } else {
        None
    };
    let at = mono_ns();
    let _ = joined.send(Joined { hb, dumper });
    s.notices.progress(format!(
        "JVM pid {pid}: the agent is in; its heartbeat drives the recording from here"
    ));
    Ok(Some(at))
}

/// Drives a JVM's watcher from `watch`'s one loop, which looks at the JVM from outside through
/// its own mapping of the JVM's counters (given it here).
pub type DriveOutside<'a> =
    &'a (dyn Fn(i32, Option<procwatch::jvmcounters::JvmCounters>) -> sampler::Driven + Sync);

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
    let mut tracing = super::KernelEvidence::none(if s.shared_offcpu.is_some() {
        "watched by `watch` from outside: no tracepoint evidence (fault addresses, mmap_lock wait times); `stallscope attach` as root adds it for one JVM"
    } else {
        "watched by `watch` from outside: no kernel evidence (BPF off-CPU waits, tracepoints); `stallscope attach` as root adds it for one JVM"
    });
    // `watch`'s one BPF program, filtering on the JVMs it guards.
    tracing.reader = s.shared_offcpu.clone();
    let java_home = procwatch::jvms::jvm(pid).ok().flatten().and_then(|j| j.java_home);
    let mut w = super::open_writer(
        s,
        &super::meta("watch", command, pid, java_home.as_deref(), s, None, &tracing),
    )?;
    let counters = open_counters(pid, &mut w)?;
    if counters.is_none() {
        let why = procwatch::jvmcounters::JvmCounters::of_pid(pid)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        s.notices.warn(format!(
            "{why}; watched through /proc alone (a stall is seen only when it stops)"
        ));
    }
    let driven = drive(pid, procwatch::jvmcounters::JvmCounters::of_pid(pid).ok());
    let alive = &mut || Path::new(&format!("/proc/{pid}")).exists();
    let what = sampler::Target {
        pid,
        pulse: Pulse::counters(pid, counters),
        tracer: None,
        offcpu: tracing.reader.clone(),
        opts: watch_options(s),
        deadline: None,
        driven: Some(driven),
        code: sampler::CodeAsks { outside: super::outside_stacks(s, pid), ..Default::default() },
        hooks: Hooks::default(),
    };
    let watched = sampler::run(&mut w, what, stop, alive)?;
    let t = mono_ns();
    match watched {
        Ending::TargetExited => {
            w.events.line(&Event::TargetExit { t, code: None, signal: None })?
        }
        Ending::Stopped(reason) => w.events.line(&Event::Detach { t, reason })?,
    }
    Ok(())
}
