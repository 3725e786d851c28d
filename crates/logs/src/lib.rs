//! The analysis behind `stallscope logs`: read safepoint logs, filter, summarise, into one
//! [`view::LogsView`]; each kept record is also handed to the caller as it is read.
//!
//! Invariant: one streaming pass over the inputs; memory does not grow with their size.
//!
//! Depends on hotspot-log (the parsers), the recording (JFR recordings read through its sandbox)
//! and procwatch; the recorder, the fleet and the lab use it.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod filter;
pub mod flight;
pub mod inputs;
pub mod mapped;
pub mod sandbox;
pub mod view;

/// Why there was nothing to analyse: each has its own exit code in the CLI, so scripts can tell
/// "nothing yet" from "this is not a log" from a real failure.
#[derive(Debug, thiserror::Error)]
pub enum Nothing {
    /// An input is binary data, not a text log.
    #[error("{0}")]
    Binary(String),
    /// Every input was empty.
    #[error("{0}")]
    Empty(String),
    /// The inputs are text (or flight recordings) but hold no safepoint records.
    #[error("{0}")]
    NoRecords(String),
}

use anyhow::{Context, Result};
use filter::{Filter, Verdict};
use hotspot_log::summary::Clock;
use hotspot_log::{Safepoint, ScanError, Scanner, Sink, Stamps, Summary, SummaryOptions};
use inputs::Plan;
use recording::units::fmt_count;
use std::io;
use view::{Filtered, FormatCount, InputView, Lines, LogsView, RotatedSet, SCHEMA};

/// How to analyse: which records, how many longest TTSPs, the worst-window length, how many
/// unrecognised lines to keep as examples.
pub struct LogsOptions {
    pub filter: Filter,
    pub top: usize,
    pub window_ns: u64,
    pub verbose: bool,
    /// Threads that read a regular file at once; `None`: the machine's cores, up to four.
    pub threads: Option<usize>,
}

/// Routes each record through the filter into the summary and to the caller.
struct LogsSink<'a> {
    filter: &'a Filter,
    summary: Summary,
    each: &'a mut dyn FnMut(&Safepoint) -> io::Result<()>,
    read: u64,
    no_clock: u64,
    write_error: Option<io::Error>,
}

impl Sink for LogsSink<'_> {
    fn safepoint(&mut self, s: &Safepoint) {
        self.read += 1;
        match self.filter.check(s) {
            Verdict::Keep => {
                self.summary.add(s);
                if self.write_error.is_none()
                    && let Err(e) = (self.each)(s)
                {
                    self.write_error = Some(e);
                }
            }
            Verdict::Drop => {}
            Verdict::NoClock => self.no_clock += 1,
        }
    }

    fn input_start(&mut self, _file: u32, stamps: &Stamps) {
        if !self.filter.is_time_bounded() {
            self.summary.observe_span(stamps);
        }
    }

    fn input_end(&mut self, _file: u32, stamps: &Stamps) {
        // Right after the input's records, so a JVM restart between rotated files is seen.
        if !self.filter.is_time_bounded() {
            self.summary.observe_span(stamps);
        }
    }
}

/// Reads every input of `plan` once, in order, hands each record the filter keeps to `each`,
/// and returns the analysis. Inputs that cannot be analysed are errors with their own exit
/// codes (empty, binary, no safepoint records).
pub fn analyse(
    plan: Plan,
    o: &LogsOptions,
    each: &mut dyn FnMut(&Safepoint) -> io::Result<()>,
) -> Result<LogsView> {
    let filter = &o.filter;
    let mut scanner = Scanner::new().keep_examples(if o.verbose { 10 } else { 3 });
    scanner = match o.threads {
        Some(n) => scanner.threads(n, hotspot_log::scan::WINDOW),
        None => scanner.threads_available(),
    };
    let mut sink = LogsSink {
        filter,
        summary: Summary::new(SummaryOptions { top: o.top, window_ns: o.window_ns, windows: 5 }),
        each,
        read: 0,
        no_clock: 0,
        write_error: None,
    };
    let r = read_inputs(&plan, &mut scanner, &mut sink)?;
    let report = scanner.finish(&mut sink);
    if let Some(e) = sink.write_error.take() {
        return Err(e).context("writing output");
    }
    if filter.is_time_bounded() {
        clip_span_to_filter(&mut sink.summary, filter, &r.first_stamps, &r.last_stamps);
    }
    sink.summary.add_unfinished_culprits(&report.orphan_culprits);

    nothing_to_analyse(&plan, &r, sink.read, &report)?;
    let Inputs { views: input_views, mut notes, jfr_safepoints, .. } = r;
    for (i, v) in input_views.iter().enumerate() {
        if v.bytes == 0 {
            notes.push(format!("{} is empty", plan.inputs[i].display()));
        }
    }
    if sink.no_clock > 0 {
        notes.push(format!(
            "{} safepoints had no stamp on the clock --since/--until use and were left out; use an uptime bound (90s) for uptime-stamped logs, or a date for wall-clock ones",
            fmt_count(sink.no_clock)
        ));
    }
    if report.merges.rows_unmatched > 0 {
        notes.push(format!(
            "{} statistics rows matched no pause line and were not counted twice",
            report.merges.rows_unmatched
        ));
    }
    let summary =
        std::mem::replace(&mut sink.summary, Summary::new(SummaryOptions::default())).finish();
    if summary.safepoints == 0 {
        notes.push("no safepoints match the filters".to_string());
    }
    let mut formats: Vec<FormatCount> =
        report.by_format.iter().map(|(f, n)| FormatCount::new(*f, *n)).collect();
    if jfr_safepoints > 0 {
        formats.push(FormatCount::new(hotspot_log::Format::Jfr, jfr_safepoints));
    }
    formats.sort_by_key(|f| std::cmp::Reverse(f.lines));
    let view = LogsView {
        schema: SCHEMA,
        inputs: input_views,
        rotated_sets: plan
            .rotated
            .into_iter()
            .map(|(base, files)| RotatedSet { base, files })
            .collect(),
        lines: Lines {
            total: report.lines_total,
            recognised: report.lines_recognised,
            unrecognised: report.lines_unrecognised,
            other: report.lines_other,
            truncated_last: report.truncated_last_lines,
        },
        formats,
        filters: Filtered {
            filter: filter.clone(),
            safepoints_read: sink.read,
            left_out_no_clock: sink.no_clock,
        },
        summary,
        unrecognised_examples: report.unrecognised_examples,
        notes,
        other_examples: report.other_examples,
    };
    Ok(view)
}

/// What reading the inputs gave, beside the records handed to the sink.
#[derive(Default)]
struct Inputs {
    views: Vec<InputView>,
    notes: Vec<String>,
    first_stamps: Vec<Stamps>,
    last_stamps: Vec<Stamps>,
    jfr_inputs: usize,
    jfr_events: u64,
    jfr_safepoints: u64,
}

/// Reads every input of `plan` once, in order: a JFR recording through its reader, a regular
/// file in place, the rest (stdin, pipes, gzip) through `read`.
fn read_inputs(plan: &Plan, scanner: &mut Scanner, sink: &mut LogsSink) -> Result<Inputs> {
    let mut r = Inputs::default();
    for (i, input) in plan.inputs.iter().enumerate() {
        let name = input.display();
        if let inputs::Input::File(p) = input
            && flight::is_jfr(p)
        {
            let got = flight::read(p, i as u32, sink)
                .with_context(|| format!("{name}: reading it as a JFR recording"))?;
            for lost in &got.lost {
                r.notes.push(format!("{name}: {lost}"));
            }
            r.jfr_inputs += 1;
            r.jfr_events += got.events;
            r.jfr_safepoints += got.safepoints;
            r.views.push(InputView {
                path: name,
                bytes: got.bytes,
                lines: 0,
                gzip: false,
                truncated: !got.lost.is_empty(),
            });
            continue;
        }
        let binary = |offset: u64| {
            let hint = if name.ends_with(".hlog") {
                " (an HdrHistogram log: read it with HistogramLogProcessor)"
            } else {
                ""
            };
            anyhow::Error::new(Nothing::Binary(format!(
                "{name}: binary data at byte {offset}, not a text log{hint}; pass a HotSpot GC or safepoint log"
            )))
        };
        // A regular file is read in place; stdin, pipes and gzip through `read`.
        if let Some(m) = inputs::map(input)? {
            let (got, shrank) = mapped::read_in_place(&m, |bytes, done| {
                scanner.scan_slice(i as u32, bytes, sink, done)
            });
            if shrank {
                return Err(anyhow::anyhow!(
                    "{name}: the file shrank while it was read (truncated by a log rotation?); read it again, or read the rotated copy"
                ));
            }
            let rep = match got {
                Ok(r) => r,
                Err(ScanError::Binary { offset }) => return Err(binary(offset)),
                Err(ScanError::Io(e)) => {
                    return Err(e).with_context(|| format!("{name}: read failed"));
                }
            };
            r.first_stamps.extend(rep.first);
            r.last_stamps.extend(rep.last);
            r.views.push(InputView {
                path: name,
                bytes: rep.bytes,
                lines: rep.lines,
                gzip: false,
                truncated: false,
            });
            continue;
        }
        let mut reader = inputs::open(input)?;
        let rep = match scanner.scan(i as u32, &mut reader, sink) {
            Ok(r) => r,
            Err(ScanError::Binary { offset }) => return Err(binary(offset)),
            Err(ScanError::Io(e)) => return Err(e).with_context(|| format!("{name}: read failed")),
        };
        if reader.truncated {
            r.notes.push(format!(
                "{name}: the gzip stream ends early; analysed the {} bytes before the cut",
                fmt_count(rep.bytes)
            ));
        }
        r.first_stamps.extend(rep.first);
        r.last_stamps.extend(rep.last);
        r.views.push(InputView {
            path: name,
            bytes: rep.bytes,
            lines: rep.lines,
            gzip: reader.gzip,
            truncated: reader.truncated,
        });
    }
    Ok(r)
}

/// The error for inputs that held nothing to analyse: all empty, JFR recordings without
/// safepoint events, or logs without safepoint records.
fn nothing_to_analyse(
    plan: &Plan,
    r: &Inputs,
    read: u64,
    report: &hotspot_log::scan::ScanReport,
) -> Result<()> {
    if r.views.iter().all(|i| i.bytes == 0) {
        let which = if r.views.len() == 1 {
            format!("{} is empty", r.views[0].path)
        } else {
            "every input is empty".to_string()
        };
        return Err(Nothing::Empty(format!(
            "{which}: nothing to analyse (is the JVM still starting, or logging elsewhere?)"
        ))
        .into());
    }
    if read == 0 && r.jfr_inputs == plan.inputs.len() {
        let names: Vec<&str> = r.views.iter().map(|i| i.path.as_str()).collect();
        return Err(Nothing::NoRecords(format!(
                "{}: no safepoint events in {} JFR events{}",
                names.join(", "),
                fmt_count(r.jfr_events),
                if r.notes.is_empty() {
                    "; JFR's own settings leave them off: record with jdk.SafepointBegin and its companions on (docs/formats/jfr.md gives a settings file)".to_string()
                } else {
                    format!(" that could be read: {}", r.notes.join("; "))
                }
        ))
        .into());
    }
    if read == 0 {
        let names: Vec<&str> = r.views.iter().map(|i| i.path.as_str()).collect();
        let mut msg = format!(
            "{}: no safepoint records in {} lines ({} not recognised",
            names.join(", "),
            fmt_count(report.lines_total),
            fmt_count(report.lines_unrecognised)
        );
        if report.truncated_last_lines > 0 {
            msg.push_str(&format!(
                ", {} cut off at the end of the input",
                fmt_count(report.truncated_last_lines)
            ));
        }
        msg.push(')');
        if report.unrecognised_examples.is_empty() {
            msg.push_str("; log them with -Xlog:safepoint (JDK 9+) or -XX:+PrintGCApplicationStoppedTime (JDK 8)");
        } else {
            // Lines that look like records but did not parse: the user needs to see them, not
            // the advice to turn on a flag that is already on.
            msg.push_str(
                "; these look like safepoint records but were not understood (please report them):",
            );
            for e in report.unrecognised_examples.iter().take(3) {
                let path = r.views.get(e.file as usize).map_or("?", |i| i.path.as_str());
                msg.push_str(&format!("\n  {path}:{}: {}", e.line, e.text));
            }
        }
        return Err(Nothing::NoRecords(msg).into());
    }
    Ok(())
}

/// With --since/--until on uptime, "% of time stopped" is over the part of the log the bounds
/// select, not over the whole log.
fn clip_span_to_filter(summary: &mut Summary, filter: &Filter, first: &[Stamps], last: &[Stamps]) {
    let (since, until) = filter.uptime_range();
    if summary.clock() != Some(Clock::Uptime) && summary.clock().is_some() {
        return;
    }
    let log_start = first.iter().filter_map(|s| s.uptime_ns).min();
    let log_end = last.iter().filter_map(|s| s.uptime_ns).max();
    if let Some(s) = since {
        let s = log_start.map_or(s, |l| s.max(l));
        summary.observe_span(&Stamps { uptime_ns: Some(s), ..Default::default() });
    }
    let end = match (until, log_end) {
        (Some(u), Some(e)) => Some(u.min(e)),
        (Some(u), None) => Some(u),
        (None, e) => e,
    };
    if let Some(e) = end {
        summary.observe_span(&Stamps { uptime_ns: Some(e), ..Default::default() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filter::TimeBound;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/logs")
            .join(name);
        p.to_string_lossy().into_owned()
    }

    /// The analysis of one fixture with `filter`, and the records handed on.
    fn analysed(name: &str, filter: Filter) -> (serde_json::Value, usize) {
        let plan = inputs::plan(&[fixture(name)], true).unwrap();
        let o =
            LogsOptions { filter, top: 5, window_ns: 1_000_000_000, verbose: false, threads: None };
        let mut handed = 0;
        let view = analyse(plan, &o, &mut |_| {
            handed += 1;
            Ok(())
        })
        .unwrap();
        (serde_json::to_value(&view).unwrap(), handed)
    }

    const LOG: &str = "jdk17-g1-churn-gc_all+safepoint-default_decorators.log";

    #[test]
    fn every_record_kept_is_handed_on_and_counted() {
        let (all, n) = analysed(LOG, Filter::new(None, None, &[], None));
        assert!(n > 10, "{n}");
        assert_eq!(all["safepoints"], n as u64);
        assert_eq!(all["lines"]["unrecognised"], 0);
        // An operation filter keeps only its own records, counted the same way.
        let op = all["operations"][0]["name"].as_str().unwrap().to_string();
        let (one, m) = analysed(LOG, Filter::new(None, None, std::slice::from_ref(&op), None));
        assert_eq!(one["safepoints"], m as u64);
        assert_eq!(m as u64, all["operations"][0]["count"].as_u64().unwrap(), "{op}");
    }

    #[test]
    fn an_uptime_bound_clips_the_span_the_stopped_share_is_over() {
        let (all, _) = analysed(LOG, Filter::new(None, None, &[], None));
        let span = all["span_ns"].as_u64().unwrap();
        let since = TimeBound::parse("1s").unwrap();
        let (clipped, kept) = analysed(LOG, Filter::new(Some(since), None, &[], None));
        let clipped_span = clipped["span_ns"].as_u64().unwrap();
        assert!(clipped_span < span, "{clipped_span} < {span}");
        assert_eq!(clipped["safepoints"], kept as u64);
    }
}
