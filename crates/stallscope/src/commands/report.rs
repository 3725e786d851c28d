//! `stallscope report DIR`: the diagnosis of a recording again, as text, JSON or an HTML page;
//! or a lab run's results.

use crate::cli::ReportArgs;
use crate::failure::{Failure, EXIT_FAILURE, EXIT_OK};
use crate::lab::model::read_result;
use crate::output::html::{html_path, view::recording_view, write_page};
use crate::output::json::Json;
use crate::output::lab::LabText;
use crate::output::report::ReportText;
use crate::output::Render;
use anyhow::Result;
use doctor::recording::files;
use doctor::Recording;
use std::io;
use std::path::Path;

/// Prints the diagnosis of a finished recording: what `run` and `attach` print at the end, and
/// `report` prints again.
pub fn print_report(dir: &Path, json: bool) -> Result<()> {
    let r = doctor::diagnose(&Recording::read(dir)?);
    let out = io::stdout().lock();
    if json { Json(out).finish(&r)? } else { ReportText(out).finish(&r)? }
    Ok(())
}

pub fn run(a: ReportArgs) -> Result<i32> {
    let dir = &a.dir;
    let html = a.html.as_ref().map(|h| h.as_deref());
    let lab = dir.join("lab.json");
    if !dir.join(files::META).exists() && !lab.exists() {
        return Err(Failure::new(EXIT_FAILURE, format!("{}: neither a stallscope recording (no {}) nor a lab run (no lab.json)", dir.display(), files::META)));
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
            let rec = Recording::read(dir)?;
            let r = doctor::diagnose(&rec);
            write_page(&html_path(out, dir, "report.html"), &recording_view(&rec, &r))?;
        }
        None => print_report(dir, a.json)?,
    }
    Ok(EXIT_OK)
}
