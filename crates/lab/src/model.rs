//! The lab's results as plain data: what `lab.json` holds, what `lab compare` reads back.

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const SCHEMA: &str = "stallscope.lab/1";

/// Where and on what the lab ran.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Environment {
    pub kernel: String,
    pub cpus: usize,
    pub java: String,
    pub java_version: String,
    pub root: bool,
    pub fuse: bool,
    pub stallscope_version: String,
}

/// The seed's own figure, as published.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Published {
    pub text: String,
    pub machine: String,
    /// The seed's baseline and mitigation in the metric's unit, where it gave them.
    pub baseline: Option<f64>,
    pub mitigation: Option<f64>,
}

impl Published {
    pub fn new(
        text: &str,
        machine: &str,
        baseline: Option<f64>,
        mitigation: Option<f64>,
    ) -> Published {
        Published { text: text.into(), machine: machine.into(), baseline, mitigation }
    }
}

/// How one run's diagnosis compares with the scenario's known cause.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Grade {
    /// The cause expected for this run (`none` when no stall should happen).
    pub expected: String,
    /// The main cause of the longest significant stall, or `none`.
    pub diagnosed: String,
    pub matched: bool,
    /// Whether the expected culprit thread was named (when one is expected).
    pub culprit_named: Option<bool>,
    /// Whether the expected instigator was named (when one is expected and the recording could
    /// tell), and who was named for the longest stall of the known cause.
    #[serde(default)]
    pub instigator_named: Option<bool>,
    #[serde(default)]
    pub instigator: Option<String>,
    pub stalls: usize,
    pub longest_stall_ns: u64,
    /// Significant stalls left out of the grade: the doctor found the recorder's own control
    /// meter, outside the experiment, held as long (a whole-machine pause no scenario makes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub machine_pauses: usize,
    /// Significant stalls left out of the grade: under way before the recorder watched, judged
    /// on the part it saw.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unseen_starts: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Run {
    pub rep: usize,
    /// Measurements by name; the scenario's metric is among them.
    pub metrics: BTreeMap<String, f64>,
    pub recording: Option<String>,
    /// None when the run was not recorded or its diagnosis cannot be graded.
    pub grade: Option<Grade>,
    pub error: Option<String>,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VariantResult {
    pub id: String,
    pub label: String,
    pub baseline: bool,
    pub runs: Vec<Run>,
    /// The scenario's metric over the runs.
    pub stats: Option<Stats>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Reproduced,
    NotReproduced,
    Inconclusive,
    Skipped,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::NotReproduced => "not reproduced on this kernel/JDK",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioResult {
    pub id: String,
    pub seed: String,
    pub title: String,
    /// The ground-truth cause (a docs/causes id).
    pub cause: String,
    /// Who should be named as having set the stalls off (`java-thread "safepoint-trigger"`),
    /// when the scenario knows it.
    #[serde(default)]
    pub instigator: Option<String>,
    pub published: Published,
    pub metric: String,
    pub unit: String,
    pub variants: Vec<VariantResult>,
    /// Baseline median over the best mitigation's median (how much the mitigation helps).
    pub effect: Option<f64>,
    pub verdict: Verdict,
    pub reason: String,
    /// Other measurements worth showing beside the metric (e.g. TLB shootdowns), as text.
    pub notes: Vec<String>,
    pub elapsed_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LabResult {
    pub schema: String,
    pub started: String,
    pub profile: String,
    pub reps: usize,
    pub environment: Environment,
    pub scenarios: Vec<ScenarioResult>,
    /// expected cause → diagnosed cause → runs, over every graded run.
    pub confusion: BTreeMap<String, BTreeMap<String, usize>>,
    pub elapsed_ms: u64,
}

/// Reads a lab result (a lab directory or its lab.json).
pub fn read_result(p: &Path) -> Result<LabResult> {
    let f = if p.is_dir() { p.join("lab.json") } else { p.to_path_buf() };
    let text = std::fs::read_to_string(&f)
        .with_context(|| format!("{}: no lab results there", f.display()))?;
    let v: LabResult = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a lab result", f.display()))?;
    if v.schema != SCHEMA {
        bail!("{}: schema {} (this stallscope reads {SCHEMA})", f.display(), v.schema);
    }
    Ok(v)
}
