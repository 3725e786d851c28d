//! What a lab scenario is: one seed's experiment as a value. Its [`Spec`] (seed, the figure the
//! seed published, the ground-truth cause, the metric), its variants (the baseline first, each
//! with what the doctor should say), what it sets up once for all its runs, and how one run is
//! measured, all in the scenario's own file under `scenarios/`.
//!
//! Invariant: whatever a scenario sets up lives in its `Setup` value and is torn down when that
//! is dropped (mounts, helper processes, files), so a failed or interrupted run leaves nothing.

use super::model::{Published, VariantResult, Verdict};
use super::verdict::{self, Expect};
use doctor::{Cause, Report};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// How long a scenario runs: seconds for tests and CI, or the seed's proportions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Quick,
    Full,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Quick => "quick",
            Profile::Full => "full",
        }
    }

    /// The quick or the full value of a setting.
    pub fn pick<T>(self, quick: T, full: T) -> T {
        match self {
            Profile::Quick => quick,
            Profile::Full => full,
        }
    }
}

/// What a scenario is, apart from how it runs.
pub struct Spec {
    pub id: &'static str,
    pub seed: &'static str,
    pub title: &'static str,
    /// The ground truth: what the doctor should find in the baseline.
    pub cause: Cause,
    pub published: fn() -> Published,
    pub metric: &'static str,
    pub unit: &'static str,
    pub needs_fuse: bool,
    pub needs_root: bool,
    /// Why the effect may not show on today's kernel or JDK, for the verdict.
    pub why_not: &'static str,
    /// Roughly how long one run takes, per profile, for the progress bar's first estimate.
    pub run_secs: (u64, u64),
    /// Secondary measurements shown beside the metric, by their key in a run's metrics.
    pub side_metrics: &'static [(&'static str, &'static str)],
    /// Who set the stalls off, when the scenario knows it: graded in each baseline run whose
    /// stalls are of the known cause.
    pub who: Option<verdict::ExpectWho>,
}

pub struct VariantSpec {
    pub id: &'static str,
    pub label: &'static str,
    pub expect: Expect,
    /// The thread the doctor should name, when the scenario knows it.
    pub culprit: Option<&'static str>,
}

/// What the lab run gives every scenario.
pub struct Ctx<'a> {
    pub profile: Profile,
    pub reps: usize,
    pub out: PathBuf,
    pub java: PathBuf,
    pub workloads: PathBuf,
    pub agent: PathBuf,
    pub stop: &'a AtomicBool,
    /// Called after each run, for progress.
    pub tick: &'a dyn Fn(&str),
    /// Only these variants, by id, of a scenario that has any of them.
    pub variants: &'a [String],
    /// Undoes what scenarios change on the machine (swap, cgroups) if stallscope is killed.
    pub guard: std::sync::Arc<std::sync::Mutex<guard::Guard>>,
    /// `lab run --outside`: each JVM recorded from outside (its counters and /proc), nothing
    /// put into it.
    pub outside: bool,
    /// `lab run --no-bpf`: recorded without the BPF off-CPU recorder.
    pub no_bpf: bool,
    /// Where what the recorder notices goes.
    pub notices: recording::Notices,
}

impl Ctx<'_> {
    /// The recorder's settings for a run recorded into `dir`.
    pub fn settings(&self, dir: &std::path::Path) -> anyhow::Result<recorder::Settings> {
        let mut s = recorder::Settings::new(self.agent.clone(), dir, self.notices.clone())?;
        s.outside = self.outside;
        s.bpf = !self.no_bpf;
        // From outside the culprits' code is read by the kernel's sampling, at no cost to the JVM.
        s.stacks = if self.outside { recorder::Stacks::Agent } else { recorder::Stacks::Off };
        Ok(s)
    }
}

/// One run's measurements: the scenario's `metric` among them; the doctor's report of the run
/// when it was recorded; the shortest stall that counts when grading it.
pub struct Measured {
    pub metrics: BTreeMap<String, f64>,
    pub report: Option<Report>,
    pub min_stall_ns: u64,
}

/// The verdict on a scenario's numbers: reproduced or not, the effect, and why.
pub struct Judged {
    pub verdict: Verdict,
    pub effect: Option<f64>,
    pub reason: String,
}

/// One seed's experiment. Implemented by a unit type per scenario; `Variant` is the scenario's
/// own enum, so a run can only ask for a variant that exists.
pub trait Scenario {
    type Variant: Copy + 'static;
    /// What the scenario sets up once for all its runs, torn down when dropped.
    type Setup;
    const SPEC: Spec;
    /// The variants, the baseline first.
    const VARIANTS: &'static [(Self::Variant, VariantSpec)];

    fn setup(ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> anyhow::Result<Self::Setup>;

    /// Runs one variant once, recording into `rec`.
    fn run(
        setup: &mut Self::Setup,
        variant: Self::Variant,
        ctx: &Ctx,
        rec: &Path,
    ) -> anyhow::Result<Measured>;

    /// The verdict: by default, the baseline against its best mitigation.
    fn judge(variants: &[VariantResult]) -> Judged {
        judge_effect(&Self::SPEC, variants)
    }
}

/// The default verdict: the baseline's metric against the best mitigation's, where larger is
/// worse (see `verdict::verdict`).
pub fn judge_effect(spec: &Spec, variants: &[VariantResult]) -> Judged {
    let judged =
        |verdict, effect, reason: &str| Judged { verdict, effect, reason: reason.to_string() };
    let Some(base) = variants.iter().find(|v| v.baseline).and_then(|v| v.stats) else {
        return judged(Verdict::Inconclusive, None, "no baseline measurement");
    };
    let best = variants
        .iter()
        .filter(|v| !v.baseline)
        .filter_map(|v| v.stats)
        .min_by(|a, b| a.median.partial_cmp(&b.median).unwrap_or(std::cmp::Ordering::Equal));
    let Some(best) = best else {
        return judged(Verdict::Inconclusive, None, "no mitigation measurement");
    };
    let (v, effect, why) = verdict::verdict(&base, &best);
    let reason = if v == Verdict::NotReproduced && !spec.why_not.is_empty() {
        format!("{why}: {}", spec.why_not)
    } else {
        why.to_string()
    };
    Judged { verdict: v, effect, reason }
}

/// Medians of each variant's secondary measurements, as text.
pub fn side_notes(spec: &Spec, variants: &[VariantResult]) -> Vec<String> {
    spec.side_metrics
        .iter()
        .map(|(k, label)| {
            let per: Vec<String> = variants
                .iter()
                .map(|v| {
                    let vals: Vec<f64> =
                        v.runs.iter().filter_map(|r| r.metrics.get(*k).copied()).collect();
                    match verdict::stats(&vals) {
                        Some(s) => format!("{} {}", v.id, recording::units::fmt_num(s.median)),
                        None => format!("{} -", v.id),
                    }
                })
                .collect();
            format!("{label}, median: {}", per.join(", "))
        })
        .collect()
}
