//! `stallscope lab`: rerun each seed's experiment, baseline beside mitigation, repeated, under
//! the doctor's recorder; put the seed's figure beside ours; grade the doctor against the known
//! cause.
//!
//! Invariant: the lab only orchestrates; workloads, injectors, the recorder and the diagnosis
//! are the same pieces a user runs by hand.

pub mod model;
pub mod scenarios;
pub mod verdict;

use crate::cli::{LabCompareArgs, LabListArgs, LabRunArgs};
use crate::failure::Failure;
use anyhow::{bail, Context, Result};
use model::{Environment, LabResult, SCHEMA};
use scenarios::{catalog, Ctx, Profile};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub fn list(a: LabListArgs) -> Result<i32> {
    let c = catalog();
    if a.json {
        let v: Vec<serde_json::Value> = c
            .iter()
            .map(|s| {
                serde_json::json!({
                    "id": s.id, "seed": s.seed, "title": s.title, "cause": s.cause,
                    "variants": s.variants.iter().map(|v| serde_json::json!({"id": v.id, "label": v.label})).collect::<Vec<_>>(),
                    "published": (s.published)(), "needs_fuse": s.needs_fuse, "needs_root": s.needs_root,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    for s in &c {
        println!("{:<15} seed {} — {}", s.id, s.seed, s.title);
        println!("{:<15} ground truth: {}{}", "", s.cause, if s.needs_fuse { "; needs FUSE" } else { "" });
        for (i, v) in s.variants.iter().enumerate() {
            println!("{:<15} {} {:<13} {}", "", if i == 0 { "baseline  " } else { "mitigation" }, v.id, v.label);
        }
        println!("{:<15} seed's figure: {}", "", (s.published)().text);
        println!();
    }
    Ok(0)
}

fn environment(java: &Path) -> Environment {
    let version = std::process::Command::new(java)
        .arg("-version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string())
        .unwrap_or_default();
    Environment {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
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
    let dir = std::env::current_exe()?.canonicalize()?.parent().map(Path::to_path_buf).context("the executable's directory")?;
    let places = [dir.join(name), dir.join("../lib").join(name), dir.join("../../java/workloads/target").join(name), dir.join("../../../java/workloads/target").join(name)];
    for p in &places {
        if p.is_file() {
            return Ok(p.canonicalize()?);
        }
    }
    Err(Failure::new(1, format!("{name} not found (looked in {}); build it with `make build`", places.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))))
}

pub fn run(a: LabRunArgs) -> Result<i32> {
    let profile = match a.profile.as_str() {
        "quick" => Profile::Quick,
        "full" => Profile::Full,
        p => return Err(Failure::new(2, format!("--profile {p}: use quick or full"))),
    };
    let reps = a.reps.unwrap_or(if profile == Profile::Quick { 2 } else { 5 }).max(1);
    let all = catalog();
    for s in &a.scenarios {
        if !all.iter().any(|c| c.id == s) {
            return Err(Failure::new(2, format!("unknown scenario '{s}'; `stallscope lab list` shows them: {}", all.iter().map(|c| c.id).collect::<Vec<_>>().join(", "))));
        }
    }
    let chosen: Vec<_> = all.into_iter().filter(|c| a.scenarios.is_empty() || a.scenarios.iter().any(|s| s == c.id)).collect();
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from(format!("stallscope-lab-{}", chrono::Local::now().format("%Y%m%d-%H%M%S"))));
    if out.exists() && std::fs::read_dir(&out)?.next().is_some() {
        bail!("{}: exists and is not empty; choose another --out", out.display());
    }
    std::fs::create_dir_all(&out)?;
    let out = out.canonicalize()?;
    let java = a.java.clone().unwrap_or_else(|| PathBuf::from("java"));
    let java = if java.components().count() > 1 { java } else { which(&java).unwrap_or(java) };
    let env = environment(&java);
    let agent = crate::record::agent_jar::find(None)?;
    let workloads = workloads_jar()?;
    let stop = crate::inject::stop_flag()?;

    let total: u64 = chosen.iter().map(|s| (s.variants.len() * reps) as u64).sum();
    let est: u64 = chosen.iter().map(|s| (s.variants.len() * reps) as u64 * if profile == Profile::Quick { s.run_secs.0 } else { s.run_secs.1 }).sum();
    let bar = if a.json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(total) };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} runs, ETA {eta}  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.println(format!("lab: {} scenario(s), {} profile, {reps} repetitions; about {} s; results in {}", chosen.len(), profile.name(), est, out.display()));
    let started = Instant::now();
    let tick = |msg: &str| {
        bar.inc(1);
        bar.set_message(msg.to_string());
    };
    let mut results = Vec::new();
    let mut confusion = BTreeMap::new();
    for sc in &chosen {
        bar.set_message(format!("{} …", sc.id));
        let skip = if sc.needs_fuse && !env.fuse {
            Some(crate::inject::slowfs::check_fuse().err().map(|e| e.to_string()).unwrap_or_default())
        } else if sc.needs_root && !env.root {
            Some("needs root".to_string())
        } else {
            None
        };
        let ctx = Ctx { profile, reps, out: out.clone(), java: java.clone(), workloads: workloads.clone(), agent: agent.clone(), stop: &stop, tick: &tick };
        let r = match skip {
            Some(why) => {
                bar.inc((sc.variants.len() * reps) as u64);
                skipped(sc, &why)
            }
            None => match scenarios::execute(sc, &ctx) {
                Ok(r) => r,
                Err(e) => skipped(sc, &format!("{e:#}")),
            },
        };
        for v in &r.variants {
            verdict::confusion(v.runs.iter(), &mut confusion);
        }
        bar.println(format!("  {:<15} {}", r.id, r.verdict.words()));
        results.push(r);
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            bar.println("lab: interrupted; what ran so far is written below");
            break;
        }
    }
    bar.finish_and_clear();
    let lab = LabResult {
        schema: SCHEMA.into(),
        started: chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string(),
        profile: profile.name().into(),
        reps,
        environment: env,
        scenarios: results,
        confusion,
        elapsed_ms: started.elapsed().as_millis() as u64,
    };
    std::fs::write(out.join("lab.json"), serde_json::to_vec_pretty(&lab)?)?;
    let text = crate::output::lab::render(&lab);
    std::fs::write(out.join("summary.txt"), &text)?;
    if let Some(h) = &a.html {
        crate::record::write_html(&crate::record::html_path(h.as_deref(), &out, "lab.html"), &crate::output::html::lab_page(&lab)?)?;
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&lab)?);
    } else {
        print!("{text}");
        eprintln!("lab: results in {}/lab.json and summary.txt; one recording per run beside them", out.display());
    }
    Ok(0)
}

fn skipped(sc: &scenarios::Scenario, why: &str) -> model::ScenarioResult {
    model::ScenarioResult {
        id: sc.id.into(),
        seed: sc.seed.into(),
        title: sc.title.into(),
        cause: sc.cause.into(),
        published: (sc.published)(),
        metric: sc.metric.into(),
        unit: sc.unit.into(),
        variants: vec![],
        effect: None,
        verdict: model::Verdict::Skipped,
        reason: why.to_string(),
        notes: vec![],
        elapsed_ms: 0,
    }
}

fn which(p: &Path) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| std::env::split_paths(&path).map(|d| d.join(p)).find(|c| c.is_file()))
}

/// Reads a lab result (a lab directory or its lab.json).
pub fn read_result(p: &Path) -> Result<LabResult> {
    let f = if p.is_dir() { p.join("lab.json") } else { p.to_path_buf() };
    let text = std::fs::read_to_string(&f).with_context(|| format!("{}: no lab results there", f.display()))?;
    let v: LabResult = serde_json::from_str(&text).with_context(|| format!("{}: not a lab result", f.display()))?;
    if v.schema != SCHEMA {
        bail!("{}: schema {} (this stallscope reads {SCHEMA})", f.display(), v.schema);
    }
    Ok(v)
}

pub fn compare(a: LabCompareArgs) -> Result<i32> {
    let (x, y) = (read_result(&a.a)?, read_result(&a.b)?);
    print!("{}", crate::output::lab::render_compare(&x, &y, &a.a.display().to_string(), &a.b.display().to_string()));
    Ok(0)
}
