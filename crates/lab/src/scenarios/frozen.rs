//! The control: a JVM stopped with SIGSTOP for a known time, whose answer is known.

use super::common::{diagnose, wait_for_pid};
use crate::model::{Published, VariantResult, Verdict};
use crate::scenario::{Ctx, Judged, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::{Expect, ExpectWho};
use anyhow::{Result, bail};
use doctor::{Cause, InstigatorKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Frozen;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    Freeze,
}

impl Scenario for Frozen {
    type Variant = Variant;
    type Setup = ();
    const SPEC: Spec = Spec {
        id: "frozen",
        seed: "control",
        title: "a JVM stopped with SIGSTOP for a known time",
        cause: Cause::Frozen,
        published: || Published::new("none: a control whose answer is known", "-", None, None),
        metric: "longest stall",
        unit: "ms",
        needs_fuse: false,
        needs_root: false,
        why_not: "",
        run_secs: (4, 7),
        side_metrics: &[],
        who: Some(ExpectWho {
            kind: InstigatorKind::Signal,
            name: "stallscope",
            needs_tracepoints: true,
        }),
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[(
        Variant::Freeze,
        VariantSpec {
            id: "freeze",
            label: "SIGSTOP, then SIGCONT",
            expect: Expect::Cause(Cause::Frozen),
            culprit: None,
        },
    )];

    fn setup(_: &Ctx, _: &Path, _: &mut Vec<String>) -> Result<()> {
        Ok(())
    }

    fn run(_: &mut (), _: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        let p = ctx.profile;
        let injected = p.pick(500u64, 2000);
        let s = ctx.settings(rec)?;
        let dir = s.dir.clone();
        let command: Vec<String> = vec![
            ctx.java.display().to_string(),
            "-jar".into(),
            ctx.workloads.display().to_string(),
            "idle".into(),
            "--duration".into(),
            p.pick("3s", "6s").into(),
        ];
        let stop = ctx.stop;
        let (status, stopped_ms) =
            std::thread::scope(|scope| -> Result<(std::process::ExitStatus, u64)> {
                let h = scope.spawn(|| {
                    recorder::record_jvm(&s, &command, &super::common::quiet_launch(), stop)
                });
                let pid = wait_for_pid(&dir)?;
                let hb = procwatch::heartbeat::default_path(pid);
                // Watched: the agent's heartbeat is up, or (from outside) the JVM's counters are.
                let watched = || {
                    if ctx.outside { procwatch::perfdata::locate(pid).is_ok() } else { hb.exists() }
                };
                let t0 = Instant::now();
                while !watched() && t0.elapsed() < Duration::from_secs(20) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                std::thread::sleep(Duration::from_millis(800));
                let stopped =
                    crate::inject::freeze::freeze(pid, Duration::from_millis(injected), stop)?;
                let r = h.join().map_err(|_| anyhow::anyhow!("the recorder panicked"))??;
                Ok((r.status, stopped.as_millis() as u64))
            })?;
        if !status.success() {
            bail!("the idle JVM failed ({status})");
        }
        let r = diagnose(&dir)?;
        let metrics = BTreeMap::from([
            ("metric".to_string(), r.summary.longest_stall_ns as f64 / 1e6),
            ("injected".to_string(), stopped_ms as f64),
        ]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 100_000_000 })
    }

    /// Each stall must match the injected pause.
    fn judge(variants: &[VariantResult]) -> Judged {
        let runs = &variants[0].runs;
        let ok = !runs.is_empty() && runs.iter().all(|r| matches!((r.metrics.get("metric"), r.metrics.get("injected")), (Some(m), Some(i)) if *m >= *i * 0.9 && *m <= *i * 1.2 + 50.0));
        if ok {
            Judged {
                verdict: Verdict::Reproduced,
                effect: None,
                reason: "every run's longest stall matched the injected pause".into(),
            }
        } else {
            Judged {
                verdict: Verdict::Inconclusive,
                effect: None,
                reason: "a run's longest stall did not match the injected pause".into(),
            }
        }
    }
}
