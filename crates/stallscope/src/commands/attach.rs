//! `stallscope attach`: watch a running JVM (what is happening now first, then a recording),
//! then print the doctor's diagnosis of the recording, as `stallscope report` prints it later.

use super::report::print_report;
use super::run::request;
use crate::cli::AttachArgs;
use crate::failure::EXIT_OK;
use anyhow::Result;
use hotspot_attach::Jvm;
use recorder::{self, sampler};

pub fn attach(a: AttachArgs) -> Result<i32> {
    let jvm = match Jvm::find(a.pid) {
        Ok(j) => j,
        Err(_) if hotspot_attach::maps_libjvm(a.pid) == Some(false) => return attach_process(a),
        Err(e) => return Err(e),
    };
    let mut s = recorder::settings(&request(&a.record))?;
    recorder::hand_to(&s.dir, jvm.uid)?;
    let stop = super::stop_flag()?;
    // What is happening now, said about a second in, on a thread of its own, from what the
    // recorder kept in memory as it wrote (nothing is read back); it keeps nothing after that.
    let live = recording::Live::default();
    s.live = Some(live.clone());
    let (tx, rx) = std::sync::mpsc::channel::<sampler::Now>();
    let (dir, json, pid) = (s.dir.clone(), a.record.json, a.pid);
    let started = procwatch::clock::mono_ns();
    let sayer = std::thread::spawn(move || {
        if let Ok(now) = rx.recv()
            && let Err(e) = say_now(&dir, &live, now, pid, started, json)
        {
            eprintln!("stallscope: what is happening now could not be told: {e:#}");
        }
        live.stop();
    });
    let told: Box<dyn FnOnce(sampler::Now) + Send> = Box::new(move |n| {
        let _ = tx.send(n);
    });
    let r = recorder::attach::record_attached(
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

/// `attach` to a process that is not a JVM: its threads held by the kernel, from the kernel's
/// events; the diagnosis at the end.
fn attach_process(a: AttachArgs) -> Result<i32> {
    let s = recorder::settings(&request(&a.record))?;
    let stop = super::stop_flag()?;
    let r = recorder::attach::record_process(&s, a.pid, a.run_for.map(|d| d.std()), &stop);
    if let Err(e) = r {
        // Nothing was recorded: the directory made for it goes too.
        let _ = std::fs::remove_dir(&s.dir);
        return Err(e);
    }
    print_report(&s.dir, a.record.json)?;
    eprintln!("stallscope: recording in {}", s.dir.display());
    Ok(EXIT_OK)
}

/// Diagnoses the recording as it stood at `now.t`, its open stall cut there, and says what is
/// happening now: on stdout before the final report (on stderr with --json, whose stdout is one
/// document).
fn say_now(
    dir: &std::path::Path,
    live: &recording::Live,
    now: sampler::Now,
    pid: i32,
    started: u64,
    json: bool,
) -> Result<()> {
    now.written.wait();
    let jfr = Some(&logs::sandbox::FlightRecordings as &dyn recording::FlightRecordings);
    let rec =
        recording::Recording::from_live(dir, live, jfr, 0, &mut Default::default())?.as_at(now.t);
    let report = doctor::diagnose(&rec);
    let text = crate::output::diagnosis::now_text(
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
