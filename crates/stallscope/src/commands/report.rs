//! `stallscope report DIR`: the diagnosis of a recording again, as text, JSON or an HTML page;
//! or a lab run's results.

use crate::cli::ReportArgs;
use crate::failure::{EXIT_FAILURE, EXIT_OK, Failure};
use crate::output::Render;
use crate::output::diagnosis::ReportText;
use crate::output::html::{html_path, view::recording_view, write_page};
use crate::output::json::Json;
use crate::output::lab::LabText;
use anyhow::Result;
use lab::model::read_result;
use recording::files;
use std::io;
use std::path::Path;

/// The recordings directly in `dir` (what `watch` keeps), oldest first.
fn recordings_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            std::fs::symlink_metadata(e.path().join(files::META))
                .ok()
                .map(|m| (m.modified().unwrap_or(std::time::UNIX_EPOCH), e.path()))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

/// Prints the diagnosis of a finished recording: what `run` and `attach` print at the end, and
/// `report` prints again.
pub fn print_report(dir: &Path, json: bool) -> Result<()> {
    let r =
        doctor::diagnose(&recording::Recording::read(dir, Some(&logs::sandbox::FlightRecordings))?);
    let out = io::stdout().lock();
    if json {
        Json(out).finish(&r)?
    } else {
        ReportText(out).finish(&r)?
    }
    Ok(())
}

pub fn run(a: ReportArgs) -> Result<i32> {
    let dir = &a.dir;
    let html = a.html.as_ref().map(|h| h.as_deref());
    let lab = dir.join("lab.json");
    // A path that is not there at all: say so, not what it is not.
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Err(Failure::error(
            EXIT_FAILURE,
            format!(
                "{}: no such file or directory (give a recording directory, a lab run's directory or a flight recording, app.jfr)",
                dir.display()
            ),
        ));
    }
    if logs::flight::is_flight_input(dir) {
        return flight_report(dir, &a, html);
    }
    if a.gc_log.is_some() {
        return Err(Failure::error(
            EXIT_FAILURE,
            format!(
                "{}: --gc-log goes with a flight recording (app.jfr); a stallscope recording holds its own safepoint log",
                dir.display()
            ),
        ));
    }
    if !dir.join(files::META).exists() && !lab.exists() {
        let kept = recordings_in(dir);
        if !kept.is_empty() {
            // A `watch` directory: one recording per JVM and segment.
            let mut out = io::stdout().lock();
            use std::io::Write;
            writeln!(
                out,
                "{}: {} recordings (kept by stallscope watch); `stallscope report` one of them for its diagnosis:",
                dir.display(),
                kept.len()
            )?;
            for k in &kept {
                let line =
                    match recording::Recording::read(k, Some(&logs::sandbox::FlightRecordings)) {
                        Ok(rec) => {
                            let r = doctor::diagnose(&rec);
                            let main = procwatch::jvms::main_of(&r.meta.command);
                            let worst = r
                                .stalls
                                .iter()
                                .max_by_key(|s| s.duration_ns)
                                .map(|s| {
                                    format!(
                                        ", longest {} ({})",
                                        recording::units::fmt_ns(s.duration_ns),
                                        s.findings.first().map_or("unknown", |f| f.cause.id())
                                    )
                                })
                                .unwrap_or_default();
                            format!("pid {} {main}: {} stalls{worst}", r.meta.pid, r.stalls.len())
                        }
                        Err(e) => format!("cannot be read: {e}"),
                    };
                writeln!(
                    out,
                    "  {}  {line}",
                    k.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
                )?;
            }
            return Ok(EXIT_OK);
        }
        return Err(Failure::error(
            EXIT_FAILURE,
            format!(
                "{}: neither a stallscope recording (no {}), a lab run (no lab.json) nor a flight recording (no JFR chunk)",
                dir.display(),
                files::META
            ),
        ));
    }
    if !dir.join(files::META).exists() {
        let l = read_result(&lab)?;
        match html {
            Some(out) => write_page(&html_path(out, dir, "lab.html"), &l)?,
            None if a.json => Json(io::stdout().lock()).finish(&l)?,
            None => LabText(io::stdout().lock()).finish(&l)?,
        }
        return Ok(EXIT_OK);
    }
    match html {
        Some(out) => {
            let rec = recording::Recording::read(dir, Some(&logs::sandbox::FlightRecordings))?;
            let r = doctor::diagnose(&rec);
            write_page(&html_path(out, dir, "report.html"), &recording_view(&rec, &r))?;
        }
        None => print_report(dir, a.json)?,
    }
    Ok(EXIT_OK)
}

/// `report app.jfr`: the stalls of a flight recording alone.
fn flight_report(path: &Path, a: &ReportArgs, html: Option<Option<&Path>>) -> Result<i32> {
    let threshold = a.threshold.ns();
    let file = logs::flight::read_flight(path, i64::try_from(threshold).unwrap_or(i64::MAX))?;
    let log = match &a.gc_log {
        Some(p) => {
            let (safepoints, notes) = logs::flight::read_log_safepoints(p)?;
            Some(doctor::GcLog { name: p.display().to_string(), safepoints, notes })
        }
        None => None,
    };
    let r = doctor::diagnose_flight(&file, threshold, log.as_ref());
    match html {
        Some(out) => {
            // The file's every safepoint, for the timeline, the percentiles and the operations.
            let rec = recording::Recording {
                safepoints: doctor::flight_safepoints(&file, &r.meta),
                ..recording::Recording::of_report(path, &r.meta)
            };
            // Beside the file (`app.html`), or in the chunk directory.
            let at = match out {
                Some(o) => o.to_path_buf(),
                None if path.is_dir() => path.join("report.html"),
                None => path.with_extension("html"),
            };
            write_page(&at, &recording_view(&rec, &r))?;
        }
        None if a.json => Json(io::stdout().lock()).finish(&r)?,
        None => ReportText(io::stdout().lock()).finish(&r)?,
    }
    Ok(EXIT_OK)
}
