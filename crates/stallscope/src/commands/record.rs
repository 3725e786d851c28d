//! `stallscope run` and `stallscope attach`: record a JVM, then print the doctor's diagnosis of
//! the recording, exactly as `stallscope report` prints it later.

use super::report::print_report;
use crate::cli::{AttachArgs, BoostOnArg, RecordOptions, RunArgs};
use crate::failure::EXIT_OK;
use anyhow::Result;
use hotspot_attach::Jvm;
use recorder::boost::BoostOn;
use recorder::{self, Launch, RecordRequest, watch};
use recording::Event;
use std::os::unix::process::ExitStatusExt;

fn request(o: &RecordOptions) -> RecordRequest<'_> {
    RecordRequest {
        out: o.out.as_deref(),
        threshold_ns: o.threshold.ns(),
        sample_interval_ns: o.sample_interval.ns(),
        agent: o.agent.as_deref(),
        frames: !o.no_frames,
        notices: crate::output::notices(),
    }
}

pub fn run(a: RunArgs) -> Result<i32> {
    let mut s = recorder::settings(&request(&a.record))?;
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

pub fn attach(a: AttachArgs) -> Result<i32> {
    let jvm = Jvm::find(a.pid)?;
    let s = recorder::settings(&request(&a.record))?;
    recorder::hand_to(&s.dir, jvm.uid)?;
    let stop = super::stop_flag()?;
    // What is happening now, said about a second in, on a thread of its own: the watch loop
    // only hands it a barrier for what it wrote so far.
    let (tx, rx) = std::sync::mpsc::channel::<watch::Now>();
    let (dir, json, pid) = (s.dir.clone(), a.record.json, a.pid);
    let started = procwatch::clock::mono_ns();
    let sayer = std::thread::spawn(move || {
        if let Ok(now) = rx.recv()
            && let Err(e) = say_now(&dir, now, pid, started, json)
        {
            eprintln!("stallscope: what is happening now could not be told: {e:#}");
        }
    });
    let told: Box<dyn FnOnce(watch::Now) + Send> = Box::new(move |n| {
        let _ = tx.send(n);
    });
    let r = recorder::attached::record_attached(
        &s,
        &jvm,
        a.run_for.map(|d| d.std()),
        &stop,
        None,
        Some(told),
    );
    let _ = sayer.join();
    r?;
    print_report(&s.dir, a.record.json)?;
    eprintln!("stallscope: recording in {}", s.dir.display());
    Ok(EXIT_OK)
}

/// Diagnoses the recording as it stood at `now.t`, its open stall cut there, and says what is
/// happening now: on stdout before the final report (on stderr with --json, whose stdout is one
/// document).
fn say_now(
    dir: &std::path::Path,
    now: watch::Now,
    pid: i32,
    started: u64,
    json: bool,
) -> Result<()> {
    now.written.wait();
    let mut rec = recording::Recording::read(dir, Some(&logs::sandbox::FlightRecordings))?;
    rec.events.retain(|e| e.t() <= now.t);
    rec.samples.retain(|x| x.t <= now.t);
    // The stall under way goes on: cut here, not ended by an exit.
    if let Some(stall) = now.stall {
        rec.events.push(Event::StallEnd {
            t: now.t,
            stall,
            resumed_ns: now.t,
            control_max_late_ns: 0,
            control_queued_ns: None,
            resumed: false,
            dropped_samples: 0,
            exiting: false,
        });
    }
    rec.events.push(Event::Detach { t: now.t, reason: "what is happening now".into() });
    let report = doctor::diagnose(&rec);
    let text = crate::output::report::now_text(
        &report,
        now.stall,
        pid,
        now.t.saturating_sub(started),
        rec.counters.last(),
    );
    if json {
        eprint!("{text}");
    } else {
        print!("{text}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    Ok(())
}
