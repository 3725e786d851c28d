//! `stallscope run`: launch a JVM under the recorder, then print the doctor's diagnosis of the
//! recording, exactly as `stallscope report` prints it later.

use super::report::print_report;
use crate::cli::{BoostOnArg, RecordOptions, RunArgs};
use anyhow::Result;
use recorder::boost::BoostOn;
use recorder::{self, Launch, RecordRequest};
use std::os::unix::process::ExitStatusExt;

/// What `run` and `attach` ask of the recorder.
pub(super) fn request(o: &RecordOptions) -> RecordRequest<'_> {
    RecordRequest {
        out: o.out.as_deref(),
        threshold_ns: o.threshold.ns(),
        sample_interval_ns: o.sample_interval.ns(),
        agent: o.agent.as_deref(),
        frames: !o.no_frames,
        bpf: !o.no_bpf,
        notices: crate::output::notices(),
    }
}

pub fn run(a: RunArgs) -> Result<i32> {
    if let Some(r) = a.resolution
        && (r.ns() < 1_000_000 || r.ns() > a.record.threshold.ns())
    {
        anyhow::bail!(
            "--resolution {r} must be at least 1 ms and at most --threshold ({}): a stall is a heartbeat late by the threshold, and the heartbeat ticks once per resolution",
            a.record.threshold
        );
    }
    let mut s = recorder::settings(&request(&a.record))?;
    // Unless asked for, 5 ms where the JVM's safepoint probes will time its safepoints, else
    // 1 ms (never above the threshold).
    let resolution = a.resolution.map(|r| r.ns()).unwrap_or_else(|| {
        recorder::resolution::default_for(&s, &a.command, a.boost.is_none() && !a.outside).0
    });
    s.resolution_ns = (resolution != 1_000_000).then_some(resolution);
    if a.jfr && s.stacks == recorder::Stacks::Agent {
        s.stacks = recorder::Stacks::Jfr;
    }
    s.outside = a.outside;
    let boost = a.boost.map(|level| {
        (
            level,
            match a.boost_on {
                BoostOnArg::Safepoint => BoostOn::Safepoint { poll_ns: a.boost_poll.ns() },
                BoostOnArg::Heartbeat => BoostOn::Heartbeat { after_ns: a.boost_after.ns() },
            },
        )
    });
    let stop = super::stop_flag()?;
    let launch = Launch {
        safepoint_timeout: !a.no_safepoint_timeout,
        boost,
        capture_stdout: false,
        chatty: true,
        nice: None,
        cgroups: vec![],
        timeout: None,
        perf_data_dir: None,
    };
    let r = recorder::record_jvm(&s, &a.command, &launch, &stop)?;
    print_report(&s.dir, a.record.json)?;
    eprintln!(
        "stallscope: recording in {} (stallscope report {} shows it again)",
        s.dir.display(),
        s.dir.display()
    );
    Ok(r.status.code().unwrap_or_else(|| 128 + r.status.signal().unwrap_or(0)))
}
