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

mod guarding;

use guarding::*;

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
        tlb_row: Some(procwatch::system::read_tlb_shootdowns),
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
        // Not a roll (were one asked): a stall under way is cut at once, not followed.
        g.flags.roll.store(false, Ordering::SeqCst);
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
