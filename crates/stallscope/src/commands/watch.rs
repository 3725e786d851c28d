//! `stallscope watch`: checks its arguments into a `fleet::Config` and runs it until SIGTERM,
//! Ctrl-C or `--for`.

use crate::cli::WatchArgs;
use crate::failure::{EXIT_OK, EXIT_USAGE, Failure};
use anyhow::Result;
use fleet::{self, discover::Selection, retain};
use std::path::PathBuf;

pub fn run(a: WatchArgs) -> Result<i32> {
    let selection = match (&a.matches, a.pids.is_empty()) {
        (Some(p), _) => Selection::matching(p).map_err(|e| Failure::error(EXIT_USAGE, e))?,
        (None, false) => Selection::Pids(a.pids.clone()),
        (None, true) => Selection::All,
    };
    let bytes = retain::parse_size(&a.retain)
        .map_err(|e| Failure::error(EXIT_USAGE, format!("--retain {e}")))?;
    if a.threshold.ns() < 1_000_000 {
        return Err(Failure::error(
            EXIT_USAGE,
            "--threshold is below the agent's 1 ms resolution".to_string(),
        ));
    }
    if !(100_000..=1_000_000_000).contains(&a.resolution.ns()) {
        return Err(Failure::error(
            EXIT_USAGE,
            "--resolution must be between 100us and 1s, e.g. 1ms or 5ms".to_string(),
        ));
    }
    let out = a.out.clone().unwrap_or_else(|| {
        std::env::var_os("STATE_DIRECTORY")
            .map(|d| PathBuf::from(d.to_string_lossy().split(':').next().unwrap_or_default()))
            .unwrap_or_else(|| PathBuf::from("stallscope-watch"))
    });
    // Events to a pipe that goes away are an error to handle, not a signal that kills watch
    // before it detaches.
    // SAFETY: changing a signal's disposition before any thread of ours writes.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let attach = match &a.attach {
        None => fleet::Attach::Never,
        Some(s) => fleet::Attach::parse(s).map_err(|e| Failure::error(EXIT_USAGE, e))?,
    };
    let stop = super::stop_flag()?;
    let cfg = fleet::Config {
        selection,
        out,
        metrics: a.metrics,
        events: a.events.clone(),
        retain: retain::Limits { bytes, age: a.retain_age.std() },
        threshold_ns: a.threshold.ns(),
        sample_interval_ns: a.sample_interval.ns(),
        resolution_ns: (a.resolution.ns() != 1_000_000).then_some(a.resolution.ns()),
        agent: a.agent.clone(),
        run_for: a.run_for.map(|d| d.std()),
        attach,
        keep_exited: a.keep_exited.std(),
        notices: crate::output::notices(),
        bpf: !a.no_bpf,
        pages: (!a.no_reports).then(|| std::sync::Arc::new(page) as fleet::pages::Render),
    };
    fleet::run(cfg, &stop)?;
    Ok(EXIT_OK)
}

/// A page `watch` serves: the report of a recording, or of one of its stalls (`Ok(None)`: no
/// such stall), drawn as `stallscope report` draws it.
fn page(req: &fleet::pages::Request) -> Result<Option<Vec<u8>>> {
    use crate::output::Render;
    use fleet::pages::{Format, View};
    let rec = recording::Recording::read(&req.dir, Some(&logs::sandbox::FlightRecordings))?;
    let mut r = doctor::diagnose(&rec);
    if let View::Stall(n) = req.view {
        if !r.stalls.iter().any(|s| s.stall == n) {
            return Ok(None);
        }
        r.stalls.retain(|s| s.stall == n);
    }
    let mut out = Vec::new();
    match req.format {
        Format::Json => crate::output::json::Json(&mut out).finish(&r)?,
        Format::Html => crate::output::html::Html(&mut out)
            .finish(&crate::output::html::view::recording_view(&rec, &r))?,
    }
    Ok(Some(out))
}
