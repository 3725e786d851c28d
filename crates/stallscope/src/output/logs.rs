//! The human report of `stallscope logs`: summary, percentiles, operations, longest TTSPs,
//! worst windows, timeout culprits, and what was read.

use super::Render;
use hotspot_log::summary::{Clock, Distribution, LogSummary, Window};
use hotspot_log::{Stamps, format_wall};
use logs::view::LogsView;
use recording::units::{fmt_count, fmt_ns, fmt_uptime};
use std::io::{self, Write};

pub struct Terminal<W: Write> {
    pub out: W,
    pub verbose: bool,
}

fn when(s: &Stamps) -> String {
    match (s.uptime_ns, s.wall) {
        (Some(u), Some(w)) => format!("{} ({})", fmt_uptime(u), format_wall(w)),
        (Some(u), None) => fmt_uptime(u),
        (None, Some(w)) => format_wall(w),
        (None, None) => match s.mono_ns {
            Some(m) => format!("{m} ns monotonic"),
            None => "-".to_string(),
        },
    }
}

fn window_edge(w: &Window, ns: u64) -> String {
    match w.clock {
        Clock::Uptime => fmt_uptime(ns),
        Clock::Monotonic => format!("{:.3}s mono", ns as f64 / 1e9),
        Clock::Wall => {
            format_wall(hotspot_log::WallTime { epoch_ms: (ns / 1_000_000) as i64, offset_min: 0 })
        }
    }
}

fn dist_row(out: &mut impl Write, name: &str, d: &Option<Distribution>) -> io::Result<()> {
    match d {
        Some(d) => writeln!(
            out,
            "  {:<14}{:>10}{:>10}{:>10}{:>10}{:>10}",
            name,
            fmt_ns(d.p50_ns),
            fmt_ns(d.p90_ns),
            fmt_ns(d.p99_ns),
            fmt_ns(d.p99_9_ns),
            fmt_ns(d.max_ns)
        ),
        None => writeln!(out, "  {name:<14}{:>10}", "(not in this log)"),
    }
}

fn span_text(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        0..=59 => fmt_ns(ns),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// What was read: the files, their lines and size, and the filter.
fn header(o: &mut impl Write, v: &LogsView) -> io::Result<()> {
    let s = &v.summary;
    let bytes: u64 = v.inputs.iter().map(|i| i.bytes).sum();
    let names: Vec<&str> = v.inputs.iter().map(|i| i.path.as_str()).collect();
    let shown = if names.len() > 3 {
        format!("{} … {} ({} files)", names[0], names[names.len() - 1], names.len())
    } else {
        names.join(", ")
    };
    writeln!(
        o,
        "stallscope logs: {shown} — {} lines, {:.1} MB",
        fmt_count(v.lines.total),
        bytes as f64 / 1e6
    )?;
    for r in &v.rotated_sets {
        writeln!(o, "  rotated set {} ({} files), read oldest first", r.base, r.files)?;
    }
    if let Some(f) = v.filters.filter.describe() {
        writeln!(
            o,
            "  filtered to {f}: {} of {} safepoints",
            fmt_count(s.safepoints),
            fmt_count(v.filters.safepoints_read)
        )?;
    }
    writeln!(o)?;
    Ok(())
}

/// How many safepoints, how long stopped, how much of it reaching them.
fn summary(o: &mut impl Write, s: &LogSummary) -> io::Result<()> {
    writeln!(o, "Summary")?;
    let runs = if s.runs > Some(1) {
        format!(" across {} JVM runs (uptime restarts)", s.runs.unwrap_or(0))
    } else {
        String::new()
    };
    let span = match s.span_ns {
        Some(sp) => format!(" in {} of log{runs}", span_text(sp)),
        None => String::new(),
    };
    writeln!(o, "  safepoints      {}{span}", fmt_count(s.safepoints))?;
    let pct = s
        .stopped_pct
        .map(|p| format!(", {p:.2}% of the time"))
        .unwrap_or_else(|| ", share of time unknown (no timestamps)".into());
    writeln!(o, "  stopped         {}{pct}", fmt_ns(s.total_stopped_ns))?;
    if let (Some(max), Some(all)) = (s.ttsp_max_ns, s.ttsp_total_ns) {
        let share = if s.total_stopped_ns > 0 {
            all as f64 * 100.0 / s.total_stopped_ns as f64
        } else {
            0.0
        };
        writeln!(
            o,
            "  reaching (TTSP) {} in all, {share:.1}% of the stopped time; longest {}",
            fmt_ns(all),
            fmt_ns(max)
        )?;
    }
    writeln!(o)?;
    Ok(())
}

/// TTSP, time at the safepoint and total, as percentiles.
fn percentiles(o: &mut impl Write, s: &LogSummary) -> io::Result<()> {
    writeln!(
        o,
        "  {:<14}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "Percentiles", "p50", "p90", "p99", "p99.9", "max"
    )?;
    dist_row(o, "TTSP", &s.percentiles.ttsp)?;
    dist_row(o, "at safepoint", &s.percentiles.at_safepoint)?;
    dist_row(o, "total", &s.percentiles.total)?;
    writeln!(o)?;
    Ok(())
}

/// Each VM operation, by total stopped time.
fn operations(o: &mut impl Write, s: &LogSummary) -> io::Result<()> {
    if !s.operations.is_empty() {
        writeln!(o, "VM operations, by total stopped time")?;
        let w = s.operations.iter().map(|op| op.name.len()).max().unwrap_or(9).clamp(9, 40);
        writeln!(
            o,
            "  {:<w$} {:>9} {:>10} {:>10} {:>10}",
            "operation", "count", "total", "TTSP max", "op max"
        )?;
        for op in &s.operations {
            writeln!(
                o,
                "  {:<w$} {:>9} {:>10} {:>10} {:>10}",
                op.name,
                fmt_count(op.count),
                fmt_ns(op.total_ns),
                op.ttsp_max_ns.map_or_else(|| "—".to_string(), fmt_ns),
                op.op_max_ns.map_or_else(|| "—".to_string(), fmt_ns)
            )?;
        }
        writeln!(o)?;
    }
    Ok(())
}

/// The longest times to safepoint, with where each is in the logs.
fn longest_ttsp(o: &mut impl Write, v: &LogsView) -> io::Result<()> {
    let s = &v.summary;
    if !s.longest_ttsp.is_empty() {
        writeln!(o, "Longest times to safepoint")?;
        writeln!(
            o,
            "  {:>9} {:>9}  {:<24} {:<34} where",
            "TTSP", "total", "operation", "began at"
        )?;
        for t in &s.longest_ttsp {
            let culprits = if t.culprits.is_empty() {
                String::new()
            } else {
                format!("  blocked by \"{}\"", t.culprits.join("\", \""))
            };
            writeln!(
                o,
                "  {:>9} {:>9}  {:<24} {:<34} {}{}{culprits}",
                fmt_ns(t.ttsp_ns),
                fmt_ns(t.total_ns),
                t.op,
                when(&t.start),
                v.input_name(t.source.file),
                // Line 0: a record with no line (JFR events).
                if t.source.line > 0 { format!(":{}", t.source.line) } else { String::new() }
            )?;
        }
        writeln!(o)?;
    }
    Ok(())
}

/// The windows with the most time stopped.
fn worst_windows(o: &mut impl Write, s: &LogSummary) -> io::Result<()> {
    if !s.worst_windows.is_empty() {
        writeln!(o, "Worst {} windows, by time stopped", span_text(s.window_ns))?;
        writeln!(
            o,
            "  {:<28} {:<14} {:>9} {:>8} {:>11}",
            "from", "to", "stopped", "%", "safepoints"
        )?;
        for w in &s.worst_windows {
            let mut from = match w.start_wall {
                Some(wall) => {
                    format!("{} ({})", window_edge(w, w.start_ns), &format_wall(wall)[11..19])
                }
                None => window_edge(w, w.start_ns),
            };
            if s.runs > Some(1) {
                from = format!("run {}: {from}", w.run);
            }
            writeln!(
                o,
                "  {:<28} {:<14} {:>9} {:>7.2}% {:>11}",
                from,
                window_edge(w, w.end_ns),
                fmt_ns(w.stopped_ns),
                w.stopped_pct,
                fmt_count(w.safepoints)
            )?;
        }
        writeln!(o)?;
    }
    Ok(())
}

/// The threads SafepointTimeout named, with how often.
fn timeout_culprits(o: &mut impl Write, s: &LogSummary) -> io::Result<()> {
    if !s.timeout_culprits.is_empty() {
        writeln!(o, "Threads SafepointTimeout named as not reaching the safepoint in time")?;
        writeln!(o, "  {:<36} {:>6}  native tid", "thread", "times")?;
        for c in &s.timeout_culprits {
            let tids: Vec<String> = c.os_tids.iter().map(|t| format!("{t} ({t:#x})")).collect();
            let unfinished = if c.unfinished > 0 {
                format!("  ({} during a safepoint the log never saw finish)", c.unfinished)
            } else {
                String::new()
            };
            writeln!(
                o,
                "  {:<36} {:>6}  {}{unfinished}",
                format!("\"{}\"", c.name),
                c.count,
                tids.join(", ")
            )?;
        }
        writeln!(o)?;
    }
    Ok(())
}

/// The formats and lines recognised, notes, and (verbose) examples of the rest.
fn lines_read(o: &mut impl Write, v: &LogsView, verbose: bool) -> io::Result<()> {
    let formats: Vec<String> =
        v.formats.iter().map(|f| format!("{} ({})", f.description, fmt_count(f.lines))).collect();
    writeln!(
        o,
        "Formats recognised: {}",
        if formats.is_empty() { "none".to_string() } else { formats.join("; ") }
    )?;
    writeln!(
        o,
        "Lines: {} read, {} recognised, {} not recognised, {} other (GC and application output){}",
        fmt_count(v.lines.total),
        fmt_count(v.lines.recognised),
        fmt_count(v.lines.unrecognised),
        fmt_count(v.lines.other),
        if v.lines.truncated_last > 0 {
            format!(", {} cut off at the end", v.lines.truncated_last)
        } else {
            String::new()
        }
    )?;
    for n in &v.notes {
        writeln!(o, "Note: {n}")?;
    }
    if verbose {
        if !v.unrecognised_examples.is_empty() {
            writeln!(o, "\nFirst lines not recognised:")?;
            for e in &v.unrecognised_examples {
                writeln!(o, "  {}:{}: {}", v.input_name(e.file), e.line, e.text)?;
            }
        }
        if !v.other_examples.is_empty() {
            writeln!(o, "\nFirst other lines (skipped as not safepoint output):")?;
            for e in &v.other_examples {
                writeln!(o, "  {}:{}: {}", v.input_name(e.file), e.line, e.text)?;
            }
        }
    } else if v.lines.unrecognised > 0 {
        writeln!(o, "(run with --verbose to see the lines not recognised)")?;
    }
    Ok(())
}

impl<W: Write> Render<LogsView, hotspot_log::Safepoint> for Terminal<W> {
    fn finish(&mut self, v: &LogsView) -> io::Result<()> {
        let o = &mut self.out;
        let s = &v.summary;
        header(o, v)?;
        summary(o, s)?;
        percentiles(o, s)?;
        operations(o, s)?;
        longest_ttsp(o, v)?;
        worst_windows(o, s)?;
        timeout_culprits(o, s)?;
        lines_read(o, v, self.verbose)?;
        o.flush()
    }
}
