//! `stallscope watch`: always on, for every JVM of a host. It finds JVMs as they start
//! (discover.rs) and watches each from outside, through its perf counters and /proc, from one
//! loop for the whole host (beats.rs): nothing is put into a JVM. With `--attach` (every JVM, or
//! those that stalled often) it escalates to what `attach` does (the agent, safepoint logging;
//! through `/proc/PID/root` for a JVM in a container). It diagnoses each stall as it ends
//! (analyse.rs), keeps the evidence within its bounds (retain.rs), and exports metrics
//! (metrics.rs) and events (events.rs).
//!
//! Invariant: a JVM watched from outside is never changed; whatever ends `watch` (SIGTERM,
//! Ctrl-C, `--for`, an error), every JVM attached to is detached (its logging off, the meter
//! stopped) before it exits; if `watch` is killed outright, each such JVM's guardian does the
//! same (guard.rs). A JVM that exits is closed; its recording stays for `report` until retention
//! removes it, and its series for `--keep-exited`.
//!
//! Depends on the recorder (to escalate to `attach`), the log analysis, the attach protocol, the
//! doctor, the recording and the readers; never on the lab. Only the binary depends on it.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod analyse;
pub mod arrivals;
pub mod beats;
pub mod discover;
pub mod events;
pub mod metrics;
pub mod pages;
pub mod retain;

use analyse::Note;
use anyhow::{Result, bail};
use discover::{Discovery, Selection};
use events::{EventJvm, Events};
use hotspot_attach::Jvm;
use metrics::{JvmInfoLabels, JvmLabels, Metrics, SkipLabels};
use procwatch::jvms::JvmProcess;
use recorder::{self, Settings, Stacks};
use recording::Notices;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What `watch` was asked for.
pub struct Config {
    pub selection: Selection,
    pub out: PathBuf,
    pub metrics: Option<SocketAddr>,
    pub events: Option<String>,
    pub retain: retain::Limits,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    /// The agents' meter resolution (None: the agent's 1 ms).
    pub resolution_ns: Option<u64>,
    pub agent: Option<PathBuf>,
    pub run_for: Option<Duration>,
    /// Which JVMs get the agent and safepoint logging.
    pub attach: Attach,
    /// How long an exited JVM's series stay in the metrics.
    pub keep_exited: Duration,
    /// Where what `watch` notices goes (JVMs found and skipped, escalations, failures).
    pub notices: Notices,
    /// Load one BPF off-CPU recorder for every JVM guarded, when root (`--no-bpf`: not).
    pub bpf: bool,
    /// How each recording's and stall's report is drawn, to be served beside `/metrics`
    /// (None: only the metrics are served).
    pub pages: Option<pages::Render>,
}

/// `--attach`: which JVMs `watch` escalates to a full recording (the agent, safepoint logging).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// None: every JVM is watched from outside (the default).
    Never,
    /// Every JVM (`--attach`).
    All,
    /// A JVM that stalled more than `stalls` times within `window` (`--attach 3/10m`).
    After { stalls: usize, window: Duration },
}

impl Attach {
    /// `all`, or `N/WINDOW` (`3/10m`: more than three stalls within ten minutes).
    pub fn parse(s: &str) -> Result<Attach, String> {
        if s == "all" {
            return Ok(Attach::All);
        }
        let bad = || {
            format!(
                "--attach {s}: give all, or N/WINDOW (more than N stalls within WINDOW), e.g. 3/10m"
            )
        };
        let (n, w) = s.split_once('/').ok_or_else(bad)?;
        let stalls = n.parse::<usize>().map_err(|_| bad())?;
        let window = w.parse::<recording::units::Duration>().map_err(|_| bad())?.std();
        if window.is_zero() {
            return Err(bad());
        }
        Ok(Attach::After { stalls, window })
    }
}

/// How often new JVMs are looked for, exited ones closed and retention applied: a JVM is guarded
/// within a second of its start (its counters exist from then), at once when it makes its
/// perf-data file in the host's `/tmp` ([`arrivals`]).
const PASS_EVERY: Duration = Duration::from_secs(1);
/// Where this host's JVMs make their perf-data files (a container's are in its own `/tmp`, found
/// at the next pass).
const HOST_TMP: &str = "/tmp";
/// How often retention measures and trims what is kept.
const RETAIN_EVERY: Duration = Duration::from_secs(2);
/// How often a watched JVM's threads are looked at between stalls (the next stall's baseline).
const IDLE_SAMPLE: Duration = Duration::from_secs(10);

/// What every JVM's guarding thread shares.
struct Shared {
    out: PathBuf,
    jar: PathBuf,
    threshold_ns: u64,
    sample_interval_ns: u64,
    resolution_ns: Option<u64>,
    beats: beats::Beats,
    notes: Mutex<Sender<Note>>,
    metrics: Metrics,
    /// Set before every JVM's `stop` when watch ends: a roll then attaches no more.
    ending: AtomicBool,
    attach: Attach,
    notices: Notices,
    /// The one BPF recorder, filtering in the kernel on the JVMs guarded (root only).
    offcpu: Option<offcpu::Reader>,
    /// Its watchdog wakes the loop: the JVMs' safepoint probes find their safepoints.
    probes: bool,
}

/// One JVM being guarded: what the main loop and its guarding thread share, and that thread.
struct Guarded {
    info: JvmInfoLabels,
    flags: Guarding,
    thread: std::thread::JoinHandle<()>,
}

/// A JVM's name in labels and directory names: its main class, or its jar's file name.
fn short_main(j: &JvmProcess) -> String {
    let m = if j.main.ends_with(".jar") {
        Path::new(&j.main).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    } else {
        j.main.clone()
    };
    if m.is_empty() { "unknown".into() } else { m }
}

/// The labels of a JVM's series, and its pod when it runs in one (read once, when it is found).
fn labels_of(j: &JvmProcess) -> (JvmLabels, Option<procwatch::pods::Pod>) {
    let pod = procwatch::pods::of_pid(j.pid);
    let main = short_main(j);
    let labels = match &pod {
        // A pod's JVM: named by its pod; its pid would only multiply the series per restart.
        Some(p) if !p.uid.is_empty() || !p.name.is_empty() => JvmLabels {
            namespace: p.namespace.clone(),
            pod: if p.name.is_empty() { p.uid.clone() } else { p.name.clone() },
            container: p.container_label(),
            workload: p.workload(),
            main,
            pid: String::new(),
        },
        _ => JvmLabels {
            container: match &pod {
                Some(p) => p.container_label(),
                None if j.contained => j.cgroup.clone(),
                None => String::new(),
            },
            main,
            pid: j.pid.to_string(),
            ..JvmLabels::default()
        },
    };
    (labels, pod)
}

/// A JVM's `watched_jvm` labels.
fn info_of(
    j: &JvmProcess,
    labels: &JvmLabels,
    pod: Option<&procwatch::pods::Pod>,
) -> JvmInfoLabels {
    JvmInfoLabels {
        jvm: labels.clone(),
        process: j.pid.to_string(),
        container_id: pod.map(|p| p.container_id.clone()).unwrap_or_default(),
        cgroup: j.cgroup.clone(),
        jdk: j.java_version.clone().unwrap_or_default(),
    }
}

/// `DIR/<pid>-<main>-<date>-<time>`, with only characters the JVM's options can carry.
fn recording_dir(out: &Path, j: &JvmProcess) -> PathBuf {
    let main: String = short_main(j)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .take(48)
        .collect();
    recorder::unused_name(
        out,
        &format!("{}-{main}-{}", j.pid, chrono::Local::now().format("%Y%m%d-%H%M%S")),
    )
}

/// The directory the recordings go in: as a recording directory is (recorder::own_dir), but it
/// may hold recordings already.
fn own_out_dir(out: &Path) -> Result<PathBuf> {
    recorder::option_safe(out)?;
    recorder::own_dir(out, false)?;
    Ok(std::fs::canonicalize(out)?)
}

/// Whether another stallscope (`run`, `attach`, another `watch`) already records this JVM: its
/// agent's heartbeat is there and running.
fn recorded_elsewhere(pid: i32) -> Option<PathBuf> {
    let path = procwatch::heartbeat::default_path(pid);
    let hb = procwatch::heartbeat::Heartbeat::open(&path).ok()?;
    (hb.read().state == procwatch::heartbeat::MeterState::Running
        && hb.of_pid(pid).liveness() == procwatch::heartbeat::Liveness::Alive)
        .then_some(path)
}

/// What a JVM's guarding thread shares with the main loop.
#[derive(Clone, Default)]
struct Guarding {
    /// Set to detach (watch ends, or the recording is rolled).
    stop: Arc<AtomicBool>,
    /// Set with `stop` to attach again into a fresh recording.
    roll: Arc<AtomicBool>,
    /// The recording being written.
    current: Arc<Mutex<Option<PathBuf>>>,
    /// When its recent stalls ended (for `--attach N/WINDOW`), and whether it was escalated.
    stalls: Arc<Mutex<std::collections::VecDeque<Instant>>>,
    escalate: Arc<AtomicBool>,
    /// Escalating it failed (it refuses the attach protocol): it stays watched from outside.
    refused: Arc<AtomicBool>,
}

/// Guards one JVM until it exits or `stop` is set without `roll`: one recording after another,
/// from outside until it is escalated (or from the start, with `--attach`).
fn guard_jvm(
    sh: Arc<Shared>,
    j: JvmProcess,
    labels: JvmLabels,
    pod: Option<procwatch::pods::Pod>,
    g: Guarding,
) {
    let Guarding { stop, roll, current, stalls, escalate, refused } = g;
    let pid = j.pid;
    let skip = |reason: &str, why: String| {
        sh.notices.warn(format!("JVM pid {pid} ({}): not watched: {why}", labels.main));
        sh.metrics.skipped.get_or_create(&SkipLabels { reason: reason.into() }).inc();
    };
    if sh.attach == Attach::All {
        escalate.store(true, Ordering::SeqCst);
    }
    if escalate.load(Ordering::SeqCst)
        && let Some(hb) = recorded_elsewhere(pid)
    {
        return skip(
            "recorded",
            format!("another stallscope records it (its heartbeat {} is running)", hb.display()),
        );
    }
    let jvm = match Jvm::find(pid) {
        Ok(jvm) => jvm,
        Err(e) => return skip("refused", format!("{e:#}")),
    };
    let info = EventJvm {
        pid,
        nspid: j.nspid,
        main: labels.main.clone(),
        container: if j.contained || pod.is_some() { j.cgroup.clone() } else { String::new() },
        pod,
        jdk: j.java_version.clone(),
    };
    // Its threads are recorded by the one BPF program from now until it is no longer guarded.
    struct Filtered<'a>(Option<&'a offcpu::Reader>, i32);
    impl Drop for Filtered<'_> {
        fn drop(&mut self) {
            if let Some(r) = self.0 {
                r.remove(self.1);
            }
        }
    }
    if let Some(r) = &sh.offcpu {
        r.add(pid);
        // Attached while its recording opens and its counters are made (a young JVM's first
        // GC may come 50 ms after its perf-data file; see `safepoint_probes`).
        if sh.probes
            && let Some(lib) = offcpu::libjvm_of(pid)
        {
            r.prepare_safepoints(&lib);
        }
    }
    let _filtered = Filtered(sh.offcpu.as_ref(), pid);
    let mut first = true;
    // Since when its recordings could not be written for want of room (said once a spell), and
    // said over as the next recording starts.
    let no_space_since = Mutex::new(None::<Instant>);
    let recording_again = || {
        if let Some(t) = no_space_since.lock().unwrap_or_else(|p| p.into_inner()).take() {
            sh.notices.warn(format!(
                "JVM pid {pid}: recorded again, after {} without room on the disk",
                recording::units::fmt_ns(t.elapsed().as_nanos() as u64)
            ));
        }
    };
    // An escalation refused (the directory not handed over, the attach refused, the agent not
    // started): watched from outside again, and not escalated again.
    let outside_again = |e: &anyhow::Error| {
        sh.notices.warn(format!("JVM pid {pid}: not attached ({e:#}); watched from outside"));
        escalate.store(false, Ordering::SeqCst);
        refused.store(true, Ordering::SeqCst);
    };
    loop {
        let dir = recording_dir(&sh.out, &j);
        let attached = escalate.load(Ordering::SeqCst);
        // Handed to the JVM's user only where the JVM writes into it (the agent, its logs):
        // watched from outside, nothing but stallscope writes there, and a directory handed
        // over would need DAC_OVERRIDE for stallscope's own files (the DaemonSet run without
        // CHOWN or DAC_OVERRIDE skipped every JVM not root's).
        let made = recorder::own_empty_dir(&dir)
            .and_then(|_| if attached { recorder::hand_to(&dir, jvm.uid) } else { Ok(()) });
        if let Err(e) = made {
            if out_of_space(&e, &sh.out) {
                let _ = std::fs::remove_dir(&dir);
                if wait_for_space(&sh, pid, j.starttime, &e, &stop, &roll, &no_space_since) {
                    continue;
                }
                return;
            }
            let _ = std::fs::remove_dir(&dir);
            // Escalating: the directory could not be handed over (no CAP_CHOWN, say).
            if attached && !first && sh.attach != Attach::All {
                outside_again(&e);
                continue;
            }
            return skip("refused", format!("{e:#}"));
        }
        // From outside, the culprits' code is read by the kernel's sampling, at no cost to the
        // JVM between stalls.
        let s = Settings {
            jar: sh.jar.clone(),
            dir: dir.clone(),
            threshold_ns: sh.threshold_ns,
            sample_interval_ns: sh.sample_interval_ns,
            stacks: if attached { Stacks::Off } else { Stacks::Agent },
            resolution_ns: sh.resolution_ns,
            outside: !attached,
            bpf: sh.offcpu.is_some(),
            // One program for the host, not one per JVM (each would hook every context switch).
            shared_offcpu: sh.offcpu.clone(),
            notices: sh.notices.clone(),
            // Every line also kept in memory: each stall is diagnosed from there, not from the
            // files it was written to.
            live: Some(recording::Live::default()),
        };
        let notes = sh.notes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _ = notes.send(Note::Opened {
            dir: dir.clone(),
            jvm: info.clone(),
            labels: labels.clone(),
            live: s.live.clone().unwrap_or_default(),
        });
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.clone());
        let ended_to = Mutex::new(notes.clone());
        let ended = || -> Box<dyn FnMut(u32, recording::Barrier) + Send> {
            let (tx, d, recent) = (
                ended_to.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                dir.clone(),
                Arc::clone(&stalls),
            );
            Box::new(move |stall, barrier| {
                recent.lock().unwrap_or_else(|p| p.into_inner()).push_back(Instant::now());
                let _ = tx.send(Note::Ended { dir: d.clone(), stall, barrier });
            })
        };
        let r = if attached {
            let drive = |p: i32, hb: &procwatch::heartbeat::Heartbeat| {
                recording_again();
                sh.beats.join(p, hb, IDLE_SAMPLE, ended())
            };
            recorder::attach::record_attached(&s, &jvm, None, &stop, Some(&drive), None)
        } else {
            let observer = |jc: &Option<procwatch::jvmcounters::JvmCounters>| {
                sh.metrics.counters_observer(
                    &labels,
                    jc.as_ref().is_some_and(|c| c.info.safepoint_time_includes_sync),
                )
            };
            let drive = |p: i32, jc: Option<procwatch::jvmcounters::JvmCounters>| {
                recording_again();
                let o = observer(&jc);
                sh.beats.join_outside(p, jc, safepoint_probes(&sh, p), o, IDLE_SAMPLE, ended())
            };
            recorder::attach::record_outside(&s, pid, &stop, &drive)
        };
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // Its disk full (a roll's new recording, or the first): nothing of it is kept when its
        // meta.json was not written whole (created empty, cut, or not at all), and the JVM stays
        // guarded: it is recorded again once there is room (issue 58: a full disk ended the
        // guarding of every JVM rolled then, for good, and `watch PID` exited).
        let no_space = r.as_ref().err().is_some_and(|e| out_of_space(e, &sh.out));
        let whole = std::fs::read(dir.join(recording::files::META))
            .is_ok_and(|b| serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_ok());
        if no_space && !whole {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = notes.send(Note::Closed { dir: dir.clone() });
        let alive = procwatch::task::process_starttime(pid) == Some(j.starttime);
        if let (Err(e), true) = (&r, no_space && alive) {
            // A roll or escalation asked meanwhile is for the next recording.
            if roll.swap(false, Ordering::SeqCst) {
                stop.store(false, Ordering::SeqCst);
            }
            if wait_for_space(&sh, pid, j.starttime, e, &stop, &roll, &no_space_since) {
                continue;
            }
            return;
        }
        let mut again = roll.swap(false, Ordering::SeqCst);
        if let Err(e) = r {
            if first {
                let _ = std::fs::remove_dir_all(&dir);
                return skip("refused", format!("{e:#}"));
            }
            if !attached || sh.attach == Attach::All {
                sh.notices.warn(format!("JVM pid {pid}: watching ended: {e:#}"));
                return;
            }
            // Escalating failed (the JVM refuses the attach protocol, or the agent did not
            // start).
            let _ = std::fs::remove_dir_all(&dir);
            outside_again(&e);
            again = true;
        }
        first = false;
        if !(again && alive) {
            return;
        }
        // Rolled: a fresh recording, the finished one left to retention. `stop` is cleared
        // before `ending` is read, and watch sets `ending` before `stop`: either this sees the
        // end, or the end's `stop` comes after this clearing and ends the next recording.
        stop.store(false, Ordering::SeqCst);
        if sh.ending.load(Ordering::SeqCst) {
            return;
        }
    }
}

/// Whether an error is `out`'s disk being full (or a quota reached there): a spell that ends,
/// unlike a refusal. Not a full disk elsewhere (the JVM's own /tmp, which an attach writes to):
/// the error names a path under `out`, or `out`'s disk is short of its reserve.
fn out_of_space(e: &anyhow::Error, out: &Path) -> bool {
    let full = |n: Option<i32>| matches!(n, Some(libc::ENOSPC) | Some(libc::EDQUOT));
    let text = format!("{e:#}");
    let space = e
        .chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| full(io.raw_os_error())))
        || [libc::ENOSPC, libc::EDQUOT].iter().any(|n| text.contains(&format!("(os error {n})")));
    space
        && (text.contains(&*out.to_string_lossy()) || {
            let (free, reserve) = retain::free_space(out);
            free < reserve
        })
}

/// How often a JVM whose recording could not be written for want of room is tried again.
const NO_SPACE_RETRY: Duration = Duration::from_secs(2);

/// Waits to record the JVM again after its disk was full (said once a spell); false when it
/// should not be: watch ends, the JVM was let go or exited.
fn wait_for_space(
    sh: &Shared,
    pid: i32,
    starttime: u64,
    e: &anyhow::Error,
    stop: &AtomicBool,
    roll: &AtomicBool,
    since: &Mutex<Option<Instant>>,
) -> bool {
    {
        let mut since = since.lock().unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            *since = Some(Instant::now());
            sh.notices.warn(format!(
                "JVM pid {pid}: its recording cannot be written ({e:#}); still guarded, \
                 recorded again once there is room (tried every {} s)",
                NO_SPACE_RETRY.as_secs()
            ));
        }
    }
    let t0 = Instant::now();
    while t0.elapsed() < NO_SPACE_RETRY {
        if sh.ending.load(Ordering::SeqCst) {
            return false;
        }
        // A roll asked meanwhile is moot (nothing is being recorded); a stop without one lets
        // the JVM go.
        if stop.load(Ordering::SeqCst) {
            if !roll.swap(false, Ordering::SeqCst) {
                return false;
            }
            stop.store(false, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    procwatch::task::process_starttime(pid) == Some(starttime) && !sh.ending.load(Ordering::SeqCst)
}

/// The JVM `pid`'s safepoint probes, watched in a slot of their own by the one BPF recorder;
/// None (its counters are polled) without BPF, or when they cannot be attached (said once).
fn safepoint_probes(sh: &Shared, pid: i32) -> Option<offcpu::SafepointSlot> {
    let r = sh.offcpu.as_ref().filter(|_| sh.probes)?;
    let Some(lib) = offcpu::libjvm_of(pid) else {
        sh.notices.warn(format!(
            "JVM pid {pid}: no libjvm.so found in its maps; its counters are polled for its safepoints"
        ));
        return None;
    };
    r.watch_safepoints_of(pid, &lib, sh.threshold_ns)
        .map_err(|e| {
            sh.notices
                .warn(format!("JVM pid {pid}: its counters are polled for its safepoints ({e})"))
        })
        .ok()
}

/// Runs `watch` until `stop` is set (SIGTERM, Ctrl-C), `--for` elapses, or (with pids named)
/// every JVM named has exited.
pub fn run(cfg: Config, stop: &AtomicBool) -> Result<()> {
    let jar = recorder::agent_jar::find(cfg.agent.as_deref())?;
    let out = own_out_dir(&cfg.out)?;
    check_named_pids(&cfg.selection)?;
    let metrics = Metrics::new();
    // Where the stalls' reports are served, as events name them.
    let mut base = None;
    if let Some(a) = cfg.metrics {
        let pages = cfg.pages.clone().map(|render| pages::Pages { out: out.clone(), render });
        let served = pages.is_some();
        let bound = metrics.serve(a, pages)?;
        cfg.notices.progress(format!("metrics at http://{bound}/metrics"));
        if served {
            let b = pages::base_url(bound);
            cfg.notices.progress(format!("each stall's report under {b}/recordings/"));
            base = Some(b);
        }
    }
    let events = match &cfg.events {
        Some(t) => Events::open(t, cfg.notices.clone())?,
        None => Events::none(),
    }
    .serving(base);
    let (notes_tx, notes_rx) = std::sync::mpsc::channel();
    let analysis = {
        let (m, keep, n) = (metrics.clone(), cfg.keep_exited, cfg.notices.clone());
        std::thread::Builder::new()
            .name("stallscope-analyse".into())
            .spawn(move || analyse::run(notes_rx, m, events, keep, n))?
    };
    // One BPF program for the host, filtering on the JVMs guarded; none without root. Only a
    // stalled (armed) JVM's waits are recorded: between stalls, many idle JVMs' thousands of
    // waits a second would cost the ring buffer and its reader for nothing.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    // The watchdog: the JVMs' safepoint probes wake the loop, instead of it polling them.
    let only_armed = offcpu::Options {
        record_unarmed: offcpu::Unarmed::Nothing,
        watchdog: true,
        ..Default::default()
    };
    let bpf = match (cfg.bpf, root) {
        (true, true) => match offcpu::OffCpu::start(&[], only_armed) {
            Ok(o) => Some(o),
            Err(e) => {
                cfg.notices
                    .warn(format!("no BPF off-CPU evidence (the /proc samples stand in): {e}"));
                None
            }
        },
        _ => None,
    };
    let alarm = bpf.as_ref().map(|o| o.reader().alarm());
    if let Some(Err(e)) = &alarm {
        cfg.notices.warn(format!(
            "the JVMs' safepoints are found by polling their counters, not by their probes: {e}"
        ));
    }
    let alarm = alarm.and_then(|a| a.ok());
    let probes = alarm.is_some();
    let beats = beats::Beats::new(cfg.threshold_ns, cfg.notices.clone());
    let loop_stop = Arc::new(AtomicBool::new(false));
    let beat_loop = {
        let (b, ls, h) =
            (beats.clone(), Arc::clone(&loop_stop), metrics.control_lateness_seconds.clone());
        std::thread::Builder::new()
            .name("stallscope-beats".into())
            .spawn(move || b.run(&ls, &|late| h.observe(late as f64 / 1e9), alarm))?
    };
    let shared = Arc::new(Shared {
        out: out.clone(),
        jar,
        threshold_ns: cfg.threshold_ns,
        sample_interval_ns: cfg.sample_interval_ns,
        resolution_ns: cfg.resolution_ns,
        beats: beats.clone(),
        notes: Mutex::new(notes_tx),
        metrics: metrics.clone(),
        ending: AtomicBool::new(false),
        attach: cfg.attach,
        notices: cfg.notices.clone(),
        offcpu: bpf.as_ref().map(|o| o.reader()),
        probes,
    });
    cfg.notices.progress(starting_line(&cfg, &out));

    let mut guarded: HashMap<(i32, u64), Guarded> = HashMap::new();
    let mut discovery = Discovery::default();
    let mut arrivals = match cfg.selection {
        Selection::Pids(_) => None,
        _ => arrivals::Arrivals::new(Path::new(HOST_TMP)),
    };
    let deadline = cfg.run_for.map(|d| Instant::now() + d);
    let mut ever = false;
    let mut last_retention = Instant::now() - RETAIN_EVERY;
    loop {
        if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        // Only the attach protocol's SIGQUIT needs a JVM to have settled first.
        let min_age = if cfg.attach == Attach::All { discover::MIN_AGE_S } else { 0.0 };
        let (found, unreadable) = discovery.pass(&cfg.selection, min_age);
        for u in unreadable {
            cfg.notices.warn(format!("pid {}: not watched: {}", u.pid, u.reason));
            metrics.skipped.get_or_create(&SkipLabels { reason: "unreadable".into() }).inc();
        }
        for j in found {
            let key = (j.pid, j.starttime);
            let g = start_guarding(j, &shared, &metrics, &guarded)?;
            guarded.insert(key, g);
            ever = true;
        }
        // Closed: the JVM exited, or could not be watched.
        let done: Vec<(i32, u64)> =
            guarded.iter().filter(|(_, g)| g.thread.is_finished()).map(|(k, _)| *k).collect();
        for k in done {
            if let Some(g) = guarded.remove(&k) {
                let _ = g.thread.join();
                // After what its recording's end still brings (the same queue, in order).
                let _ = shared
                    .notes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .send(Note::Gone { info: g.info });
            }
        }
        // Measuring what is kept walks every recording: not every pass.
        if last_retention.elapsed() >= RETAIN_EVERY {
            last_retention = Instant::now();
            apply_retention(&out, cfg.retain, &guarded, &metrics, &beats, &cfg.notices);
        }
        if let Attach::After { stalls, window } = cfg.attach {
            escalate_often_stalled(&guarded, stalls, window, &beats, &cfg.notices);
        }
        if matches!(cfg.selection, Selection::Pids(_)) && ever && guarded.is_empty() {
            cfg.notices.progress("every JVM named has exited");
            break;
        }
        let t0 = Instant::now();
        while t0.elapsed() < PASS_EVERY
            && !stop.load(Ordering::Relaxed)
            && deadline.is_none_or(|d| Instant::now() < d)
        {
            // A JVM making its perf-data file starts the next pass now, not a second later.
            let step = Duration::from_millis(200);
            match arrivals.as_mut() {
                Some(a) => {
                    if a.wait(step) {
                        break;
                    }
                }
                None => std::thread::sleep(step),
            }
        }
    }
    // Detach from every JVM, then let the analysis finish what they wrote.
    let attached = guarded.values().filter(|g| g.flags.escalate.load(Ordering::Relaxed)).count();
    if attached > 0 {
        cfg.notices.progress(format!(
            "closing the recordings of {} JVM(s), detaching from those attached to",
            guarded.len()
        ));
    } else {
        cfg.notices.progress(format!("closing the recordings of {} JVM(s)", guarded.len()));
    }
    shared.ending.store(true, Ordering::SeqCst);
    for g in guarded.values() {
        g.flags.stop.store(true, Ordering::SeqCst);
    }
    beats.wake_all();
    for (_, g) in guarded.drain() {
        let _ = g.thread.join();
        let _ = shared
            .notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Note::Gone { info: g.info });
    }
    loop_stop.store(true, Ordering::SeqCst);
    let _ = beat_loop.join();
    drop(shared);
    drop(bpf);
    let _ = analysis.join();
    apply_retention(&out, cfg.retain, &guarded, &metrics, &beats, &cfg.notices);
    Ok(())
}

/// Each pid named on the command line is a JVM, or the watch does not start.
fn check_named_pids(selection: &Selection) -> Result<()> {
    if let Selection::Pids(pids) = selection {
        for &pid in pids {
            match procwatch::jvms::jvm(pid) {
                Ok(Some(_)) => {}
                Ok(None) => bail!(
                    "pid {pid}: no such process, or not a JVM (no libjvm.so is mapped); `stallscope jvms` lists the JVMs"
                ),
                Err(u) => bail!("pid {pid}: {}", u.reason),
            }
        }
    }
    Ok(())
}

/// The line that says what is watched, how, and where the recordings go.
fn starting_line(cfg: &Config, out: &std::path::Path) -> String {
    format!(
        "watching {} (stalls ≥ {}) {}; recordings in {}",
        match &cfg.selection {
            Selection::All => "every JVM".to_string(),
            Selection::Matching(m) => format!("JVMs matching '{m}'"),
            Selection::Pids(p) =>
                format!("pid {}", p.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")),
        },
        recording::units::fmt_ns(cfg.threshold_ns),
        match cfg.attach {
            Attach::Never =>
                "from outside (their perf counters and /proc; nothing put into them)".to_string(),
            Attach::All => "with the agent and safepoint logging in each".to_string(),
            Attach::After { stalls, window } => format!(
                "from outside, attaching to a JVM that stalls more than {stalls} times in {}",
                recording::units::fmt_ns(window.as_nanos() as u64)
            ),
        },
        out.display()
    )
}

/// Starts guarding one JVM found: its info series, and a thread of its own.
fn start_guarding(
    j: JvmProcess,
    shared: &Arc<Shared>,
    metrics: &Metrics,
    guarded: &HashMap<(i32, u64), Guarded>,
) -> Result<Guarded> {
    let shared_flags = Guarding::default();
    let (mut labels, pod) = labels_of(&j);
    // Two JVMs running at once in one container with one main class (a build's workers, a
    // script's forks) are told apart by their pids: only a JVM that follows one that exited
    // takes over its series.
    if labels.pid.is_empty() && guarded.values().any(|g| g.info.jvm == labels) {
        labels.pid = j.pid.to_string();
    }
    let info = info_of(&j, &labels, pod.as_ref());
    metrics.watched(&info);
    let thread = {
        let g = shared_flags.clone();
        let sh = Arc::clone(shared);
        std::thread::Builder::new()
            .name(format!("stallscope-jvm-{}", j.pid))
            .spawn(move || guard_jvm(sh, j, labels, pod, g))?
    };
    Ok(Guarded { info, flags: shared_flags, thread })
}

/// Bytes as GiB (MiB under one) with one decimal, for a warning.
fn gib(bytes: u64) -> String {
    if bytes < 1 << 30 {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    } else {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    }
}

/// `--attach N/WINDOW`: a JVM watched from outside that stalled more than `n` times within
/// `window` is rolled into a recording with the agent and safepoint logging.
fn escalate_often_stalled(
    guarded: &HashMap<(i32, u64), Guarded>,
    n: usize,
    window: Duration,
    beats: &beats::Beats,
    notices: &Notices,
) {
    for ((pid, _), g) in guarded {
        if g.flags.escalate.load(Ordering::SeqCst)
            || g.flags.refused.load(Ordering::SeqCst)
            || g.flags.stop.load(Ordering::SeqCst)
        {
            continue;
        }
        let mut recent = g.flags.stalls.lock().unwrap_or_else(|p| p.into_inner());
        while recent.front().is_some_and(|t| t.elapsed() > window) {
            recent.pop_front();
        }
        if recent.len() > n {
            notices.progress(format!(
                "JVM pid {pid} ({}): {} stalls in {}: attaching the agent and safepoint logging",
                g.info.jvm.main,
                recent.len(),
                recording::units::fmt_ns(window.as_nanos() as u64)
            ));
            recent.clear();
            g.flags.escalate.store(true, Ordering::SeqCst);
            g.flags.roll.store(true, Ordering::SeqCst);
            g.flags.stop.store(true, Ordering::SeqCst);
            beats.wake_all();
        }
    }
}

/// One pass of retention over `out`: removes finished recordings and rolls live ones as
/// [`retain::plan`] says.
fn apply_retention(
    out: &Path,
    limits: retain::Limits,
    guarded: &HashMap<(i32, u64), Guarded>,
    metrics: &Metrics,
    beats: &beats::Beats,
    notices: &Notices,
) {
    let live: HashMap<PathBuf, i32> = guarded
        .iter()
        .filter_map(|((pid, _), g)| {
            g.flags.current.lock().unwrap_or_else(|p| p.into_inner()).clone().map(|d| (d, *pid))
        })
        .collect();
    let mut kept = Vec::new();
    for e in std::fs::read_dir(out).into_iter().flatten().flatten() {
        let dir = e.path();
        // Only what watch made: a recording (its meta.json) in a directory of its own.
        let Ok(m) = std::fs::symlink_metadata(dir.join(recording::files::META)) else {
            continue;
        };
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let start = m.modified().unwrap_or(SystemTime::now());
        kept.push(retain::Kept {
            bytes: retain::du(&dir),
            start,
            live: live.get(&dir).copied(),
            dir,
        });
    }
    let (free, reserve) = retain::free_space(out);
    let p = retain::plan(&kept, limits, SystemTime::now(), free, reserve);
    // Recordings removed to keep the disk's reserve, not to keep --retain: said, once per low
    // spell, or a user would find their evidence gone without a word.
    static LOW: AtomicBool = AtomicBool::new(false);
    let low = free < reserve;
    if low && !p.remove.is_empty() && !LOW.swap(true, Ordering::SeqCst) {
        notices.warn(format!(
            "{}: its file system has {} free, under the 5% kept free ({}): recordings are removed, \
             oldest first, to keep it so. Free space there, or point --out at another disk",
            out.display(),
            gib(free),
            gib(reserve)
        ));
    } else if !low {
        LOW.store(false, Ordering::SeqCst);
    }
    for d in &p.remove {
        if std::fs::remove_dir_all(d).is_ok() {
            metrics.retention_removed.inc();
        }
    }
    for pid in &p.roll {
        if let Some(g) = guarded.iter().find(|((p, _), _)| p == pid).map(|(_, g)| g)
            && !g.flags.stop.load(Ordering::SeqCst)
        {
            g.flags.roll.store(true, Ordering::SeqCst);
            g.flags.stop.store(true, Ordering::SeqCst);
            beats.wake_all();
        }
    }
    let removed: std::collections::HashSet<&PathBuf> = p.remove.iter().collect();
    metrics
        .retained_bytes
        .set(kept.iter().filter(|k| !removed.contains(&k.dir)).map(|k| k.bytes as i64).sum());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jvm(main: &str) -> JvmProcess {
        JvmProcess {
            pid: 4242,
            nspid: 4242,
            uid: 0,
            main: main.into(),
            cmdline: Vec::new(),
            java_home: None,
            java_version: None,
            contained: false,
            cgroup: "/system.slice/app.service".into(),
            starttime: 1,
        }
    }

    #[test]
    fn a_jvm_is_named_by_its_main_class_or_its_jars_file_name() {
        assert_eq!(short_main(&jvm("io.x.Main")), "io.x.Main");
        assert_eq!(short_main(&jvm("/opt/app/lib/server.jar")), "server.jar");
        assert_eq!(short_main(&jvm("")), "unknown");
        let l = labels_of(&jvm("io.x.Main")).0;
        assert_eq!((l.pid.as_str(), l.container.as_str()), ("4242", ""), "not in a container");
        let contained = JvmProcess { contained: true, ..jvm("io.x.Main") };
        assert_eq!(labels_of(&contained).0.container, "/system.slice/app.service");
    }

    #[test]
    fn a_recording_directory_name_carries_only_what_jvm_options_can() {
        let out = std::path::Path::new("/nonexistent-stallscope-out");
        let d = recording_dir(out, &jvm("com.example.Weird Name,with:chars=\"q\""));
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("4242-com.example.Weird_Name_with_chars__q_-"), "{name}");
        assert!(recorder::option_safe(&d).is_ok(), "{name}");
    }
}
