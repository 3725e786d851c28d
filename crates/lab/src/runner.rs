//! Runs one scenario: every variant, repeated, each run recorded and graded; then the numbers,
//! the verdict and the notes.
//!
//! Invariant: runs alternate between variants (baseline, mitigation, baseline, …) so that a
//! drift of the machine during the scenario hits every variant alike.

use super::model::{Run, ScenarioResult, VariantResult, Verdict};
use super::scenario::{Ctx, Judged, Scenario, Spec, side_notes};
use super::verdict;
use anyhow::Result;
use std::collections::BTreeMap;
use std::time::Instant;

pub fn execute<S: Scenario>(ctx: &Ctx) -> Result<ScenarioResult> {
    let spec = &S::SPEC;
    let started = Instant::now();
    let dir = ctx.out.join(spec.id);
    std::fs::create_dir_all(&dir)?;
    let mut variants: Vec<VariantResult> = S::VARIANTS
        .iter()
        .enumerate()
        .map(|(i, (_, v))| VariantResult {
            id: v.id.into(),
            label: v.label.into(),
            baseline: i == 0,
            runs: vec![],
            stats: None,
        })
        .collect();
    let mut notes = Vec::new();
    let mut setup = S::setup(ctx, &dir, &mut notes)?;
    'reps: for rep in 0..ctx.reps {
        for (i, (variant, vs)) in S::VARIANTS.iter().enumerate() {
            if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                break 'reps;
            }
            if !ctx.variants.is_empty()
                && !ctx.variants.iter().any(|v| v == vs.id)
                && S::VARIANTS.iter().any(|(_, x)| ctx.variants.iter().any(|v| v == x.id))
            {
                continue;
            }
            let rec = dir.join(format!("{}-{}", vs.id, rep + 1));
            let t0 = Instant::now();
            let mut run = Run {
                rep: rep + 1,
                metrics: BTreeMap::new(),
                recording: Some(rec.display().to_string()),
                grade: None,
                error: None,
                elapsed_ms: 0,
            };
            match S::run(&mut setup, *variant, ctx, &rec) {
                Ok(m) => {
                    run.metrics = m.metrics;
                    // Who set the stalls off is known of the baseline; a mitigation may leave
                    // stalls of the JVM's own doing (boosted threads starved by their own).
                    let who = spec.who.filter(|_| i == 0);
                    run.grade = m.report.as_ref().and_then(|r| {
                        verdict::grade(r, vs.expect, vs.culprit, who, m.min_stall_ns)
                    });
                }
                Err(e) => run.error = Some(format!("{e:#}")),
            }
            run.elapsed_ms = t0.elapsed().as_millis() as u64;
            (ctx.tick)(&format!("{} {} #{}", spec.id, vs.id, rep + 1));
            variants[i].runs.push(run);
        }
    }
    drop(setup);
    variants.retain(|v| !v.runs.is_empty());
    for v in &mut variants {
        let vals: Vec<f64> =
            v.runs.iter().filter_map(|r| r.metrics.get("metric").copied()).collect();
        v.stats = verdict::stats(&vals);
    }
    let all_failed = variants.iter().any(|v| v.runs.iter().any(|r| r.error.is_some()))
        && variants.iter().all(|v| v.stats.is_none());
    let judged = if all_failed {
        Judged {
            verdict: Verdict::Skipped,
            effect: None,
            reason: "every run failed; see the runs' errors".into(),
        }
    } else {
        S::judge(&variants)
    };
    notes.extend(side_notes(spec, &variants));
    let mut r = result(spec, judged.verdict, &judged.reason);
    r.variants = variants;
    r.effect = judged.effect;
    r.notes = notes;
    r.elapsed_ms = started.elapsed().as_millis() as u64;
    Ok(r)
}

/// A scenario's result with no runs yet: what `skipped` reports, and what `execute` fills in.
pub fn result(spec: &Spec, verdict: Verdict, reason: &str) -> ScenarioResult {
    ScenarioResult {
        id: spec.id.into(),
        seed: spec.seed.into(),
        title: spec.title.into(),
        cause: spec.cause.id().into(),
        instigator: spec.who.map(|w| w.words()),
        published: (spec.published)(),
        metric: spec.metric.into(),
        unit: spec.unit.into(),
        variants: vec![],
        effect: None,
        verdict,
        reason: reason.to_string(),
        notes: vec![],
        elapsed_ms: 0,
    }
}
