//! `stallscope logs`: the log analysis, as text, JSON or CSV on stdout.

use crate::cli::LogsArgs;
use crate::failure::EXIT_OK;
use crate::output::{Render, csv::Csv, json::Json, logs::Terminal};
use anyhow::{Context, Result};
use hotspot_log::Safepoint;
use logs::filter::{Filter, TimeBound};
use logs::{self, LogsOptions, inputs};
use std::io;

pub fn run(a: LogsArgs) -> Result<i32> {
    // A time bound is an uptime or a date (`90s`, `2024-01-31T10:00:00`): read here, so that one
    // the log cannot hold is a failure of the analysis (exit 1), with its own explanation.
    let since = a.since.as_deref().map(TimeBound::parse).transpose()?;
    let until = a.until.as_deref().map(TimeBound::parse).transpose()?;
    let filter = Filter::new(since, until, &a.ops, a.min_ttsp.map(|d| d.ns()));
    let plan = inputs::plan(&a.files, !a.no_rotation)?;
    let names: Vec<String> = plan.inputs.iter().map(inputs::Input::display).collect();
    let stdout = io::stdout();
    let out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut output: Box<dyn Render<logs::view::LogsView, Safepoint>> = if a.json {
        Box::new(Json(out))
    } else if a.csv {
        Box::new(Csv::new(out, names))
    } else {
        Box::new(Terminal { out, verbose: a.verbose })
    };
    let options = LogsOptions {
        filter,
        top: a.top,
        window_ns: a.window.ns(),
        verbose: a.verbose,
        threads: a.threads.map(usize::from),
    };
    let view = logs::analyse(plan, &options, &mut |s| output.item(s))?;
    output.finish(&view).context("writing output")?;
    Ok(EXIT_OK)
}
