//! `stallscope run` and `stallscope attach`: record a JVM, then print the doctor's diagnosis of
//! the recording, exactly as `stallscope report` prints it later.

use crate::failure::EXIT_OK;
use super::report::print_report;
use crate::attach::Jvm;
use crate::cli::{AttachArgs, RecordOptions, RunArgs};
use crate::record::{self, Launch, RecordRequest};
use anyhow::Result;
use std::os::unix::process::ExitStatusExt;

fn request(o: &RecordOptions) -> RecordRequest<'_> {
    RecordRequest { out: o.out.as_deref(), threshold_ns: o.threshold.ns(), sample_interval_ns: o.sample_interval.ns(), agent: o.agent.as_deref(), frames: !o.no_frames }
}

pub fn run(a: RunArgs) -> Result<i32> {
    let mut s = record::settings(&request(&a.record))?;
    s.jfr = a.jfr;
    let boost = a.boost.map(|level| (level, a.boost_after.ns()));
    let stop = crate::inject::stop_flag()?;
    let launch = Launch { safepoint_timeout: !a.no_safepoint_timeout, boost, capture_stdout: false, chatty: true, nice: None, cgroups: vec![], timeout: None };
    let r = record::record_jvm(&s, &a.command, &launch, &stop)?;
    print_report(&s.dir, a.record.json)?;
    eprintln!("stallscope: recording in {} (stallscope report {} shows it again)", s.dir.display(), s.dir.display());
    Ok(r.status.code().unwrap_or_else(|| 128 + r.status.signal().unwrap_or(0)))
}

pub fn attach(a: AttachArgs) -> Result<i32> {
    let jvm = Jvm::find(a.pid)?;
    let s = record::settings(&request(&a.record))?;
    record::hand_to(&s.dir, jvm.uid)?;
    let stop = crate::inject::stop_flag()?;
    record::record_attached(&s, &jvm, a.run_for.map(|d| d.std()), &stop, None)?;
    print_report(&s.dir, a.record.json)?;
    eprintln!("stallscope: recording in {}", s.dir.display());
    Ok(EXIT_OK)
}
