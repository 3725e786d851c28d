//! `stallscope lab list | run | compare`: the catalog, a lab run with its progress bar and its
//! files (lab.json, summary.txt, lab.html), and two runs side by side.

use crate::cli::{LabCompareArgs, LabListArgs, LabRunArgs};
use crate::failure::EXIT_OK;
use crate::output::Render;
use crate::output::html::{html_path, write_page};
use crate::output::json::Json;
use crate::output::lab::{Comparison, ComparisonText, LabText};
use anyhow::{Result, bail};
use lab::catalog::ScenarioId;
use lab::model::read_result;
use lab::scenario::Profile;
use lab::{self, LabOptions, Progress};
use std::io;
use std::path::{Path, PathBuf};

pub fn list(a: LabListArgs) -> Result<i32> {
    if a.json {
        let v: Vec<serde_json::Value> = ScenarioId::ALL
            .iter()
            .map(|id| {
                let s = id.spec();
                serde_json::json!({
                    "id": s.id, "seed": s.seed, "title": s.title, "cause": s.cause.id(),
                    "instigator": s.who.map(|w| w.words()),
                    "variants": id.variants().iter().map(|v| serde_json::json!({"id": v.id, "label": v.label})).collect::<Vec<_>>(),
                    "published": (s.published)(), "needs_fuse": s.needs_fuse, "needs_root": s.needs_root,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(EXIT_OK);
    }
    for id in ScenarioId::ALL {
        let s = id.spec();
        println!("{:<15} seed {} — {}", s.id, s.seed, s.title);
        println!(
            "{:<15} ground truth: {}{}{}",
            "",
            s.cause.id(),
            s.who.map(|w| format!(", set off by {}", w.words())).unwrap_or_default(),
            if s.needs_fuse { "; needs FUSE" } else { "" }
        );
        for (i, v) in id.variants().iter().enumerate() {
            println!(
                "{:<15} {} {:<13} {}",
                "",
                if i == 0 { "baseline  " } else { "mitigation" },
                v.id,
                v.label
            );
        }
        println!("{:<15} seed's figure: {}", "", (s.published)().text);
        println!();
    }
    Ok(EXIT_OK)
}

/// The lab's progress as an indicatif bar on stderr (hidden for --json).
struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn begin(&self, runs: u64, line: &str) {
        self.0.set_length(runs);
        self.0.println(line);
    }
    fn scenario(&self, id: &str) {
        self.0.set_message(format!("{id} …"));
    }
    fn runs_done(&self, n: u64, what: &str) {
        self.0.inc(n);
        self.0.set_message(what.to_string());
    }
    fn line(&self, text: &str) {
        self.0.println(text);
    }
}

fn which(p: &Path) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join(p)).find(|c| c.is_file()))
}

pub fn run(a: LabRunArgs) -> Result<i32> {
    let profile = a.profile.profile();
    let reps = a.reps.unwrap_or(if profile == Profile::Quick { 2 } else { 5 }).max(1);
    let out = a.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!("stallscope-lab-{}", chrono::Local::now().format("%Y%m%d-%H%M%S")))
    });
    if out.exists() && std::fs::read_dir(&out)?.next().is_some() {
        bail!("{}: exists and is not empty; choose another --out", out.display());
    }
    std::fs::create_dir_all(&out)?;
    let out = out.canonicalize()?;
    let java = a.java.clone().unwrap_or_else(|| PathBuf::from("java"));
    let java = if java.components().count() > 1 { java } else { which(&java).unwrap_or(java) };
    let stop = super::stop_flag()?;
    let bar =
        if a.json { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(0) };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} runs, ETA {eta}  {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    // What the recorder notices goes above the bar (or straight to stderr, with no bar).
    let notices = if a.json {
        crate::output::notices()
    } else {
        let b = bar.clone();
        recording::Notices::new(move |n| b.println(n.to_string()))
    };
    let bar = Bar(bar);
    let result = lab::run(
        &LabOptions {
            scenarios: a.scenarios.clone(),
            profile,
            reps,
            out: out.clone(),
            java,
            variants: a.variants.clone(),
            outside: a.outside,
            no_bpf: a.no_bpf,
            notices,
        },
        &bar,
        &stop,
    );
    bar.0.finish_and_clear();
    let lab = result?;
    std::fs::write(out.join("lab.json"), serde_json::to_vec_pretty(&lab)?)?;
    let mut text = Vec::new();
    LabText(&mut text).finish(&lab)?;
    std::fs::write(out.join("summary.txt"), &text)?;
    if let Some(h) = &a.html {
        write_page(&html_path(h.as_deref(), &out, "lab.html"), &lab)?;
    }
    if a.json {
        Json(io::stdout().lock()).finish(&lab)?;
    } else {
        io::Write::write_all(&mut io::stdout().lock(), &text)?;
        eprintln!(
            "lab: results in {}/lab.json and summary.txt; one recording per run beside them",
            out.display()
        );
    }
    Ok(EXIT_OK)
}

pub fn compare(a: LabCompareArgs) -> Result<i32> {
    let (x, y) = (read_result(&a.a)?, read_result(&a.b)?);
    ComparisonText(io::stdout().lock()).finish(&Comparison {
        a: &x,
        b: &y,
        a_name: a.a.display().to_string(),
        b_name: a.b.display().to_string(),
    })?;
    Ok(EXIT_OK)
}
