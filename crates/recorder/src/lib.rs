//! The recorder behind `stallscope run` and `stallscope attach`: put the agent and safepoint
//! logging into a JVM, watch it, and write the recording (the format is the `recording` crate).
//!
//! Invariant: the target's stdout, stderr and exit code pass through untouched (`run`), and
//! whatever ends the recording, the JVM is left as it was found (`attach` switches its logging
//! off and stops the agent's meter).
//!
//! Depends on the recording (the writer), the log analysis, the guardian, the attach protocol
//! and the readers; never on the doctor (a stall is diagnosed by whoever reads what this
//! records: `watch`'s fleet live, `report` later), the lab or the fleet, which call it.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod agent_jar;
pub mod attach;
pub mod boost;
mod changes;
pub mod control;
mod dirs;
pub mod dumps;
pub mod frames;
mod jfr_repository;
mod launch;
pub mod outside;
pub mod pulse;
pub mod resolution;
pub mod safepoint_boost;
pub mod sampler;
pub mod stacks;
pub mod staging;
pub mod to_disk;

use anyhow::{Result, bail};
use procwatch::clock::mono_ns;
use recording::units::fmt_ns;
use recording::{Event, Meta, Notices, Writer};
use sampler::SamplerOptions;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use to_disk::ToDisk;

pub use dirs::{hand_to, option_safe, own_dir, own_empty_dir, unused_name};
pub use launch::{Launch, join_cgroup, record_jvm, record_native};

/// What a recording needs: the agent, the directory, the thresholds.
#[derive(Debug, Clone)]
pub struct Settings {
    pub jar: PathBuf,
    pub dir: PathBuf,
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    /// How the culprits' Java stacks are taken, if at all.
    pub stacks: Stacks,
    /// The agent's meter resolution (`run --resolution`, `watch --resolution`; None: the
    /// agent's 1 ms).
    pub resolution_ns: Option<u64>,
    /// `run --outside`: put nothing into the JVM (no agent, no log, no flags); watch it through
    /// its perf counters and /proc alone, as `attach` does a JVM that will not answer.
    pub outside: bool,
    /// Load the BPF off-CPU recorder when privileged (`--no-bpf` turns it off: the `/proc`
    /// samples alone, as an unprivileged run has).
    pub bpf: bool,
    /// A BPF recorder shared by many recordings (`watch`'s one program, filtering on the JVMs it
    /// guards): used instead of loading one of its own.
    pub shared_offcpu: Option<offcpu::Reader>,
    /// Where what the recorder notices on the way goes (it never prints).
    pub notices: Notices,
    /// Where every line of the recording is also kept in memory, for a diagnosis that reads no
    /// file back (`watch`'s); None: in the files only.
    pub live: Option<recording::Live>,
}

/// How the culprits' Java stacks are taken during stalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stacks {
    /// Not at all (`--no-frames`).
    Off,
    /// With the stacks agent (record/stacks.rs), or the JVM's flight recorder (record/frames.rs)
    /// where the agent library is missing; read from outside (record/outside.rs) when nothing
    /// is put into the JVM.
    Agent,
    /// With the flight recorder even where the stacks agent is there (`run --jfr`).
    Jfr,
}

impl Settings {
    /// Settings for a recording into `dir` (created, empty), with default thresholds; what the
    /// recorder notices goes to `notices`.
    pub fn new(jar: PathBuf, dir: &Path, notices: Notices) -> Result<Settings> {
        own_empty_dir(dir)?;
        Ok(Settings {
            jar,
            dir: std::fs::canonicalize(dir)?,
            threshold_ns: 5_000_000,
            sample_interval_ns: 2_000_000,
            stacks: Stacks::Off,
            resolution_ns: None,
            outside: false,
            bpf: true,
            shared_offcpu: None,
            notices,
            live: None,
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
    /// Load the BPF off-CPU recorder when privileged.
    pub bpf: bool,
    pub notices: Notices,
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
        stacks: if o.frames { Stacks::Agent } else { Stacks::Off },
        resolution_ns: None,
        outside: false,
        bpf: o.bpf,
        shared_offcpu: None,
        notices: o.notices.clone(),
        live: None,
    })
}

fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The kernel's evidence of one target, when privileged: tracepoints (`trace.jsonl`) and the BPF
/// off-CPU recorder (`kwaits.jsonl`), and one line saying what is missing and why.
pub(crate) struct KernelEvidence {
    pub tracer: Option<procwatch::trace::Tracer>,
    /// The BPF recorder this recording loaded, if it loaded one: held only so that it lives as
    /// long as the recording (dropping it detaches the programs).
    pub _loaded: Option<offcpu::OffCpu>,
    /// Where its kernel waits are read from: its own recorder's, or a shared one's.
    pub reader: Option<offcpu::Reader>,
    pub note: Option<String>,
}

impl KernelEvidence {
    /// None of it, for the reason given.
    pub(crate) fn none(why: &str) -> KernelEvidence {
        KernelEvidence { tracer: None, _loaded: None, reader: None, note: Some(why.to_string()) }
    }
}

/// Starts tracepoint evidence for `pid` when privileged, and says in one line what is missing.
/// The instance is registered with `guard` before it is made, so that stallscope killed outright,
/// even mid-start, does not leave its events on (they would tax every page fault on the machine).
/// The BPF recorder needs no guardian: the kernel frees its programs with the process.
/// `watchdog`: the BPF watchdog's alarms are wanted, for a recording whose loop the agent's
/// heartbeat drives (not with --boost, --outside, for a process that is not a JVM, nor under
/// `watch`).
pub(crate) fn start_tracer(
    pid: i32,
    mut guard: Option<&mut guard::Guard>,
    s: &Settings,
    watchdog: bool,
) -> KernelEvidence {
    let bpf = s.bpf;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return KernelEvidence::none(
            "not root: no kernel evidence (BPF off-CPU waits with kernel stacks and wakers; tracepoints: fault addresses, mmap_lock wait times); the /proc samples stand in. Rerun with sudo for it",
        );
    }
    let mut announce = |dir: &Path| match guard {
        Some(ref mut g) => g
            .add(guard::Undo::RemoveTraceInstance { dir: dir.to_path_buf() })
            .map(|_| ())
            .map_err(|e| std::io::Error::other(format!("{e:#}"))),
        None => Ok(()),
    };
    let mut notes = vec![];
    let tracer = match procwatch::trace::Tracer::start_announced(pid, &mut announce) {
        Ok(t) => Some(t),
        Err(e) => {
            notes.push(format!("no tracepoint evidence: {e}"));
            None
        }
    };
    // Loaded only when wanted (a shared one, or --no-bpf, loads nothing).
    let offcpu = if s.shared_offcpu.is_some() {
        None
    } else if !bpf {
        notes.push("--no-bpf: no BPF off-CPU evidence (the /proc samples stand in)".into());
        None
    } else {
        // The watchdog lets the loop sleep between stalls while the agent's meter ticks.
        let opts = offcpu::Options {
            watchdog,
            tlb_row: Some(procwatch::system::read_tlb_shootdowns),
            ..Default::default()
        };
        match offcpu::OffCpu::start(&[pid], opts) {
            Ok(o) => {
                if watchdog && o.reader().alarm().is_err() {
                    notes.push("no BPF watchdog on this kernel (it needs the BTF sched_switch tracepoint with prev_state, Linux 5.18+): the recorder looks at the heartbeat once per threshold".into());
                }
                Some(o)
            }
            Err(e) => {
                notes.push(format!("no BPF off-CPU evidence (the /proc samples stand in): {e}"));
                None
            }
        }
    };
    let reader = offcpu.as_ref().map(|o| o.reader()).or_else(|| s.shared_offcpu.clone());
    KernelEvidence {
        tracer,
        _loaded: offcpu,
        reader,
        note: (!notes.is_empty()).then(|| notes.join("; ")),
    }
}

/// Why the stalls of a process that is not a JVM cannot be found here (they are its threads held
/// off a CPU, which only the kernel's events show), if they cannot: checked before anything
/// starts.
pub(crate) fn no_kernel_events(s: &Settings) -> Option<String> {
    if !s.bpf {
        Some("--no-bpf was given".to_string())
    } else if s.shared_offcpu.is_some() {
        None
    } else {
        offcpu::available().err()
    }
}

/// What the sampling loop watches of a process by `pulse`, with the kernel's events and
/// tracepoints and nothing asked of it: a process that is not a JVM as it is, a JVM with its
/// code asks, hooks or driver set on top (`run` and `attach` alike).
pub(crate) fn process_target<'t>(
    pid: i32,
    pulse: pulse::Pulse,
    tracing: &'t KernelEvidence,
    s: &Settings,
    deadline: Option<Instant>,
) -> sampler::Target<'t> {
    sampler::Target {
        pid,
        pulse,
        tracer: tracing.tracer.as_ref(),
        offcpu: tracing.reader.clone(),
        opts: watch_options(s),
        deadline,
        driven: None,
        code: Default::default(),
        hooks: Default::default(),
    }
}

/// What `run` and `attach` say when a process that is not a JVM cannot be watched.
pub(crate) fn not_a_jvm_refusal(what: &str, why: &str) -> String {
    format!(
        "{what} is not a JVM, and a process that is not a JVM has no heartbeat or safepoint record \
         to find its stalls by: stallscope finds them from the kernel's scheduler events (BPF), \
         which are off here ({why}). Run stallscope as root without --no-bpf, or give it a JVM"
    )
}

pub(crate) fn meta(
    mode: &str,
    command: Vec<String>,
    pid: i32,
    java_home: Option<&Path>,
    s: &Settings,
    timeout_ms: Option<u64>,
    tracing: &KernelEvidence,
) -> Meta {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    Meta {
        format: Some(recording::FORMAT),
        stallscope_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: mode.to_string(),
        // Kept with the recording, which may be shared: its secrets hidden (issue 57).
        command: procwatch::redact::command_line(command),
        pid,
        java_home: java_home.map(|h| h.display().to_string()),
        java_version: java_home.and_then(frames::java_version),
        kernel: kernel(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        root,
        tracepoints: tracing.tracer.is_some(),
        bpf: tracing.reader.is_some(),
        not_a_jvm: false,
        privileges_note: tracing.note.clone(),
        start_mono_ns: mono_ns(),
        start_epoch_ms: chrono::Utc::now().timestamp_millis(),
        utc_offset_min: (chrono::Local::now().offset().local_minus_utc() / 60) as i16,
        clock_ticks: procwatch::task::clock_ticks(),
        threshold_ns: s.threshold_ns,
        sample_interval_ns: s.sample_interval_ns,
        safepoint_timeout_ms: timeout_ms,
        cgroups: Some(procwatch::cgroup::of(pid).to_disk()),
        recorder_shares: Some(sampler::shares(
            &procwatch::cgroup::of(pid),
            &procwatch::cgroup::of(0),
        )),
        pod: procwatch::pods::of_pid(pid).map(ToDisk::to_disk),
    }
}

pub(crate) fn watch_options(s: &Settings) -> SamplerOptions {
    SamplerOptions {
        threshold_ns: s.threshold_ns,
        sample_interval_ns: s.sample_interval_ns,
        system_interval_ns: 50_000_000,
        // `watch`'s host-wide BPF recorder has every wait of a stall exactly.
        full_rate_ns: if s.shared_offcpu.is_some() {
            sampler::WATCH_BPF_FULL_RATE_NS
        } else {
            sampler::FULL_RATE_NS
        },
        boost: None,
    }
}

/// Opens the recording's writer in `s.dir`, each file written by a thread of its own, its lines
/// also kept in `s.live` when given.
pub(crate) fn open_writer(s: &Settings, meta: &recording::Meta) -> anyhow::Result<Writer> {
    let mut w = Writer::open_background(&s.dir, meta)?;
    if let Some(l) = &s.live {
        l.set_meta(meta);
        w.keep_in(l.clone());
    }
    Ok(w)
}

/// Stacks read from outside the JVM during stalls, unless `--no-frames`.
pub(crate) fn outside_stacks(s: &Settings, pid: i32) -> Option<outside::Outside> {
    if s.stacks == Stacks::Off {
        return None;
    }
    match outside::Outside::start(pid, &s.dir, s.notices.clone(), s.live.as_ref()) {
        Ok(o) => Some(o),
        Err(e) => {
            s.notices.warn(format!("pid {pid}: no code from outside: {e:#}"));
            None
        }
    }
}

/// Opens the JVM's perf counters for the recording, and says in it what they are, or why there
/// are none.
pub(crate) fn open_counters(
    pid: i32,
    w: &mut Writer,
) -> Result<Option<procwatch::jvmcounters::JvmCounters>> {
    // A JVM just started may still be creating them: a moment's patience. Looked at often at
    // first: `watch` finds a JVM as it makes the file, some 20 ms before its counters are
    // ready, and its first GC may follow them by as little as 30 ms (issue 58).
    let t0 = Instant::now();
    let opened = loop {
        match procwatch::jvmcounters::JvmCounters::of_pid(pid) {
            Err(
                procwatch::perfdata::Error::NotReady { .. }
                | procwatch::perfdata::Error::Truncated { .. },
            ) if t0.elapsed() < Duration::from_secs(3) => {
                let soon = t0.elapsed() < Duration::from_millis(200);
                std::thread::sleep(Duration::from_millis(if soon { 2 } else { 20 }));
            }
            other => break other,
        }
    };
    match opened {
        Ok(c) => {
            w.events.line(&Event::Counters { t: mono_ns(), info: c.info.clone().to_disk() })?;
            Ok(Some(c))
        }
        Err(e) => {
            w.events.line(&Event::NoCounters { t: mono_ns(), reason: e.to_string() })?;
            Ok(None)
        }
    }
}

/// Makes the [`sampler::Driven`] for a JVM whose heartbeat is found: `stallscope watch` hands its
/// heartbeat to its one loop.
pub type Drive<'a> = &'a (dyn Fn(i32, &procwatch::heartbeat::Heartbeat) -> sampler::Driven + Sync);

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("stallscope-settings-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn request<'a>(out: &'a Path, agent: &'a Path, threshold_ns: u64) -> RecordRequest<'a> {
        RecordRequest {
            out: Some(out),
            threshold_ns,
            sample_interval_ns: 2_000_000,
            agent: Some(agent),
            frames: true,
            bpf: true,
            notices: Notices::ignore(),
        }
    }

    #[test]
    fn settings_make_a_private_directory_and_say_how_stacks_are_taken() {
        let d = scratch("ok");
        let jar = d.join("agent.jar");
        std::fs::write(&jar, b"PK").unwrap();
        let s = settings(&request(&d.join("rec"), &jar, 5_000_000)).unwrap();
        assert!(s.dir.is_absolute() && s.dir.is_dir(), "{}", s.dir.display());
        assert_eq!(s.stacks, Stacks::Agent);
        assert!(!s.outside);
        let o = watch_options(&s);
        assert_eq!((o.threshold_ns, o.sample_interval_ns), (5_000_000, 2_000_000));
        let off =
            settings(&RecordRequest { frames: false, ..request(&d.join("b"), &jar, 5_000_000) });
        assert_eq!(off.unwrap().stacks, Stacks::Off);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn settings_refuse_a_threshold_below_the_agents_resolution_and_a_used_directory() {
        let d = scratch("refused");
        let jar = d.join("agent.jar");
        std::fs::write(&jar, b"PK").unwrap();
        let e = settings(&request(&d.join("rec"), &jar, 500_000)).unwrap_err().to_string();
        assert!(e.contains("below the agent's 1 ms resolution"), "{e}");
        // A directory with something in it is no recording directory of ours.
        let e = settings(&request(&d, &jar, 5_000_000)).unwrap_err().to_string();
        assert!(e.contains(&d.display().to_string()), "{e}");
        let e = settings(&request(&d.join("a,b"), &jar, 5_000_000)).unwrap_err().to_string();
        assert!(e.contains("cannot hold ','"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
