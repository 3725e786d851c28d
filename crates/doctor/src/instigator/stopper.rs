//! Who stopped or froze the process: a signal's sender, a tracer, a cgroup freezer.

use super::*;

/// A stop signal this long before the stall began is still the one that stopped it.
pub(super) const SIGNAL_BEFORE_NS: u64 = 2_000_000_000;

/// What stopped the process: a cgroup freezer, a tracer, or a stop signal and its sender.
pub fn stopper(inp: &WhoInputs) -> Result<Instigator, Option<String>> {
    if !inp.has_who {
        return Err(Some("what stopped the process is not known: the recording was made before stallscope looked for it (no who.jsonl)".into()));
    }
    let stopped = inp.lines.iter().find_map(|w| match w {
        Who::Stopped { state, tracer, freezer, .. } => Some((*state, tracer, freezer)),
        _ => None,
    });
    if let Some((_, _, Some(fz))) = stopped {
        let writer = inp.lines.iter().rev().find_map(|w| match w {
            Who::FreezeWritten { writer, frozen: true, cgroup, .. } if *cgroup == fz.cgroup => {
                Some(writer)
            }
            _ => None,
        });
        let file = if fz.version == "v2" { "cgroup.freeze" } else { "freezer.state" };
        let what =
            fz.container.as_ref().map(|c| format!(" (the container {c})")).unwrap_or_default();
        let by = writer.map(|w| format!(", frozen by {}", w.label())).unwrap_or_default();
        let mut i = match writer {
            Some(w) => process_fields(InstigatorKind::Freezer, w),
            None => blank(InstigatorKind::Freezer, String::new()),
        };
        if writer.is_none() {
            i.pid = None;
        }
        return Ok(Instigator {
            kind: InstigatorKind::Freezer,
            name: fz.container.clone().unwrap_or_else(|| fz.cgroup.clone()),
            did: format!("the cgroup {}{what} was frozen ({file} {}){by}", fz.cgroup, fz.state),
            cgroup: Some(fz.cgroup.clone()),
            container: fz.container.clone(),
            source: format!(
                "the process's cgroup and its {file}{}",
                if writer.is_some() {
                    "; who froze it, the cgroup:cgroup_freeze tracepoint"
                } else {
                    ""
                }
            ),
            fix: format!(
                "a frozen cgroup{what} stops every thread in it (a paused container: docker pause, a checkpoint, an orchestrator's freeze): {}, and thaw it ({})",
                match writer {
                    Some(w) => format!(
                        "find why {} froze {}{}",
                        w.label(),
                        fz.cgroup,
                        parents_hint(&w.ancestors)
                    ),
                    None => format!("find what freezes {}", fz.cgroup),
                },
                if fz.version == "v2" {
                    "echo 0 > cgroup.freeze"
                } else {
                    "echo THAWED > freezer.state"
                }
            ),
            ..i
        });
    }
    if let Some((_, Some(t), _)) = stopped {
        return Ok(Instigator {
            kind: InstigatorKind::Tracer,
            did: format!(
                "{} is attached to the JVM with ptrace (a debugger) and held it stopped",
                t.label()
            ),
            source: "TracerPid in the process's /proc/PID/status".into(),
            fix: format!(
                "{} holds the JVM stopped while it is attached: detach it (gdb: detach), or debug a copy",
                t.comm
            ),
            ..process_fields(InstigatorKind::Tracer, t)
        });
    }
    let stop_signal = inp.lines.iter().rev().find_map(|w| match w {
        Who::Signal { t, sig, sender, .. }
            if matches!(sig, 19..=22)
                && *t + SIGNAL_BEFORE_NS >= inp.start_ns
                && *t <= inp.end_ns =>
        {
            Some((*sig, sender))
        }
        _ => None,
    });
    if let Some((sig, p)) = stop_signal {
        let name = signal_name(sig);
        let hint = parents_hint(&p.ancestors);
        return Ok(Instigator {
            kind: InstigatorKind::Signal,
            did: format!(
                "{name} was sent to the JVM by {}{}",
                p.label(),
                p.command()
                    .is_empty()
                    .then(String::new)
                    .unwrap_or_else(|| format!(": {}", p.command()))
            ),
            source: "the kernel's signal:signal_generate tracepoint, in the sender's context"
                .into(),
            fix: format!(
                "{} stopped the JVM with {name}: find why{hint}; SIGCONT resumes it",
                p.comm
            ),
            ..process_fields(InstigatorKind::Signal, p)
        });
    }
    let Some((state, _, _)) = stopped else {
        return Err(None);
    };
    Err(Some(if inp.tracepoints {
        format!(
            "the process was stopped (state {state}), but no stop signal to it was traced and no freezer or tracer held it"
        )
    } else {
        format!(
            "the process was stopped (state {state}) by a signal whose sender only the kernel's signal tracepoint shows: run stallscope as root (or with CAP_PERFMON) to name it"
        )
    }))
}

/// A stall most of which the recorder saw the process frozen by a cgroup freezer (or stopped),
/// whatever its threads' states said: since Linux 6.1 a thread asleep where it may be frozen is
/// frozen in place (state D, its wchan unchanged), which reads as a wait in the kernel. The
/// freezer's own file, read every few milliseconds, says it. `None` unless it covers at least
/// `min_share` of the stall.
pub fn held_finding(inp: &WhoInputs, min_share: f64) -> Option<Finding> {
    let d = inp.end_ns.saturating_sub(inp.start_ns).max(1);
    let (seen, freezer) = inp.lines.iter().find_map(|w| match w {
        Who::Stopped { t, freezer: Some(f), .. } => Some((*t, f)),
        _ => None,
    })?;
    let resumed = inp
        .lines
        .iter()
        .find_map(|w| match w {
            Who::Resumed { t, .. } if *t >= seen => Some(*t),
            _ => None,
        })
        .unwrap_or(inp.end_ns)
        .min(inp.end_ns);
    // Frozen from before it was first seen: the first look of a stall comes a threshold in.
    let from = if seen.saturating_sub(inp.start_ns) < d / 10 { inp.start_ns } else { seen };
    let covered = resumed.saturating_sub(from);
    let share = covered as f64 / d as f64;
    if share < min_share {
        return None;
    }
    let file = if freezer.version == "v2" { "cgroup.freeze" } else { "freezer.state" };
    Some(Finding {
        cause: Cause::Frozen,
        title: Cause::Frozen.title().into(),
        // The freezer's own state, read through the stall: of the cause's own kind.
        confidence: crate::confidence::grade(share, crate::confidence::Strength::Direct),
        share: share.min(1.0),
        culprits: vec![],
        evidence: vec![
            format!("the cgroup {} was frozen ({file} {}) for {} of the {} stall, read every 10 ms", freezer.cgroup, freezer.state, fmt_ns(covered), fmt_ns(d)),
            "its threads slept where the freezer held them (a frozen thread waits for its thaw, not for I/O, whatever its state letter)".into(),
        ],
        fix: Cause::Frozen.fix().into(),
        doc: Cause::Frozen.doc(),
        instigator: None,
    })
}
