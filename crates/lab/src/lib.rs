//! The lab: the fault injectors (`inject`), the workloads that are no JVM (`workload`), and
//! the seeds' experiments built from them. It reruns each seed's experiment, baseline beside
//! mitigation, repeated, under the recorder; puts the seed's figure beside ours; and grades the
//! doctor against the known cause. Each scenario is a value ([`scenario::Scenario`]) in its own
//! file under `scenarios/`, named in one place ([`catalog::ScenarioId`]).
//!
//! Invariant: the lab only orchestrates; workloads, injectors, the recorder and the diagnosis
//! are the same pieces a user runs by hand. It prints nothing itself: progress goes through
//! [`Progress`], results are returned as [`model::LabResult`].
//!
//! Depends on the recorder (each run is a recording), the log analysis, the guardian, the doctor,
//! the recording and procwatch; nothing but the binary depends on it, and the recorder never
//! does.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod catalog;
pub mod inject;
pub mod model;
mod runner;
pub mod scenario;
mod scenarios;
pub mod verdict;
pub mod workload;

/// A `--variant` that no chosen scenario has: a usage error (the CLI's exit code 2).
#[derive(Debug)]
pub struct UnknownVariant(pub String);

impl std::fmt::Display for UnknownVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnknownVariant {}

use anyhow::{Context, Result};
use catalog::ScenarioId;
use model::{Environment, LabResult, SCHEMA, Verdict};
use scenario::{Ctx, Profile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What to run and where.
pub struct LabOptions {
    /// Empty: every scenario.
    pub scenarios: Vec<ScenarioId>,
    pub profile: Profile,
    pub reps: usize,
    /// The results directory (created, empty).
    pub out: PathBuf,
    pub java: PathBuf,
    /// Only these variants, by id (in the scenarios that have them).
    pub variants: Vec<String>,
    /// Record each JVM from outside only (`lab run --outside`).
    pub outside: bool,
    /// Record without the BPF off-CPU recorder (`lab run --no-bpf`).
    pub no_bpf: bool,
    /// Where what the recorder notices during the runs goes.
    pub notices: recording::Notices,
}

/// Where the lab reports its progress (a progress bar, or nothing).
pub trait Progress {
    /// Before the first run: how many runs, and a line saying what is about to happen.
    fn begin(&self, runs: u64, line: &str);
    /// A scenario starts.
    fn scenario(&self, id: &str);
    /// One run finished (or `n` were skipped).
    fn runs_done(&self, n: u64, what: &str);
    /// A line to keep above the bar.
    fn line(&self, text: &str);
}

/// The machine and JDK the lab runs on.
pub fn environment(java: &Path) -> Environment {
    let version = std::process::Command::new(java)
        .arg("-version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string())
        .unwrap_or_default();
    Environment {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        java: java.display().to_string(),
        java_version: version,
        // SAFETY: geteuid has no preconditions.
        root: unsafe { libc::geteuid() } == 0,
        fuse: crate::inject::slowfs::check_fuse().is_ok(),
        stallscope_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The workloads jar, found like the agent: beside the binary, ../lib, or the build tree.
fn workloads_jar() -> Result<PathBuf> {
    let name = "stallscope-workloads.jar";
    let dir = std::env::current_exe()?
        .canonicalize()?
        .parent()
        .map(Path::to_path_buf)
        .context("the executable's directory")?;
    let places = [
        dir.join(name),
        dir.join("../lib").join(name),
        dir.join("../../java/workloads/target").join(name),
        dir.join("../../../java/workloads/target").join(name),
    ];
    for p in &places {
        if p.is_file() {
            return Ok(p.canonicalize()?);
        }
    }
    Err(anyhow::anyhow!(
        "{name} not found (looked in {}); build it with `make build`",
        places.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    ))
}

/// Whether variant `v` of scenario `id` runs, given `--variant`s: all when none is asked for,
/// or when the scenario has none of those asked for.
pub fn runs_variant(asked: &[String], id: &ScenarioId, v: &str) -> bool {
    asked.is_empty()
        || asked.iter().any(|a| a == v)
        || !id.variants().iter().any(|x| asked.iter().any(|a| a == x.id))
}

/// Runs the chosen scenarios and returns the whole result. `stop` ends it early, keeping what
/// ran.
pub fn run(o: &LabOptions, progress: &dyn Progress, stop: &AtomicBool) -> Result<LabResult> {
    let chosen: Vec<ScenarioId> = if o.scenarios.is_empty() {
        ScenarioId::ALL.to_vec()
    } else {
        ScenarioId::ALL.into_iter().filter(|id| o.scenarios.contains(id)).collect()
    };
    for v in &o.variants {
        if !chosen.iter().any(|id| id.variants().iter().any(|x| x.id == v)) {
            let known: Vec<String> = chosen
                .iter()
                .flat_map(|id| {
                    id.variants().into_iter().map(|x| format!("{}/{}", id.spec().id, x.id))
                })
                .collect();
            return Err(UnknownVariant(format!(
                "--variant {v}: no such variant in the scenarios chosen ({})",
                known.join(", ")
            ))
            .into());
        }
    }
    let runs_of = |id: &ScenarioId| {
        id.variants().iter().filter(|x| runs_variant(&o.variants, id, x.id)).count()
    };
    let env = environment(&o.java);
    let agent = recorder::agent_jar::find(None)?;
    let workloads = workloads_jar()?;
    let reps = o.reps;
    let total: u64 = chosen.iter().map(|s| (runs_of(s) * reps) as u64).sum();
    let est: u64 = chosen
        .iter()
        .map(|s| {
            (runs_of(s) * reps) as u64 * o.profile.pick(s.spec().run_secs.0, s.spec().run_secs.1)
        })
        .sum();
    progress.begin(
        total,
        &format!(
            "lab: {} scenario(s), {} profile, {reps} repetitions; about {} s; results in {}",
            chosen.len(),
            o.profile.name(),
            est,
            o.out.display()
        ),
    );
    let started = Instant::now();
    let tick = |msg: &str| progress.runs_done(1, msg);
    let guard = std::sync::Arc::new(std::sync::Mutex::new(guard::Guard::start()?));
    let mut results = Vec::new();
    let mut confusion = BTreeMap::new();
    for id in chosen {
        let spec = id.spec();
        progress.scenario(spec.id);
        let skip = if spec.needs_fuse && !env.fuse {
            Some(
                crate::inject::slowfs::check_fuse()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
            )
        } else if spec.needs_root && !env.root {
            Some("needs root".to_string())
        } else {
            None
        };
        let ctx = Ctx {
            profile: o.profile,
            reps,
            out: o.out.clone(),
            java: o.java.clone(),
            workloads: workloads.clone(),
            agent: agent.clone(),
            stop,
            tick: &tick,
            variants: &o.variants,
            guard: std::sync::Arc::clone(&guard),
            outside: o.outside,
            no_bpf: o.no_bpf,
            notices: o.notices.clone(),
        };
        let r = match skip {
            Some(why) => {
                progress.runs_done((runs_of(&id) * reps) as u64, spec.id);
                runner::result(spec, Verdict::Skipped, &why)
            }
            None => match id.execute(&ctx) {
                Ok(r) => r,
                Err(e) => runner::result(spec, Verdict::Skipped, &format!("{e:#}")),
            },
        };
        for v in &r.variants {
            verdict::confusion(v.runs.iter(), &mut confusion);
        }
        progress.line(&format!("  {:<15} {}", r.id, r.verdict.words()));
        results.push(r);
        if stop.load(Ordering::Relaxed) {
            progress.line("lab: interrupted; what ran so far is written below");
            break;
        }
    }
    Ok(LabResult {
        schema: SCHEMA.into(),
        started: chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        profile: o.profile.name().into(),
        reps,
        environment: env,
        scenarios: results,
        confusion,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}
