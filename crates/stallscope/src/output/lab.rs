//! The lab's human summary and its comparison of two lab runs.

use super::Render;
use lab::model::{LabResult, ScenarioResult, Stats, Verdict};
use recording::units::fmt_num;
use std::fmt::Write as _;
use std::io;

/// A lab run as text: each scenario's figures, verdict and grades, then the confusion matrix.
pub struct LabText<W: io::Write>(pub W);

impl<W: io::Write> Render<LabResult> for LabText<W> {
    fn finish(&mut self, l: &LabResult) -> io::Result<()> {
        self.0.write_all(render(l).as_bytes())?;
        self.0.flush()
    }
}

/// Two lab runs side by side (two kernels, two JDKs), each with the name it was read from.
pub struct Comparison<'a> {
    pub a: &'a LabResult,
    pub b: &'a LabResult,
    pub a_name: String,
    pub b_name: String,
}

/// The comparison as text.
pub struct ComparisonText<W: io::Write>(pub W);

impl<W: io::Write> Render<Comparison<'_>> for ComparisonText<W> {
    fn finish(&mut self, c: &Comparison) -> io::Result<()> {
        self.0.write_all(render_compare(c.a, c.b, &c.a_name, &c.b_name).as_bytes())?;
        self.0.flush()
    }
}

fn scenario(out: &mut String, s: &ScenarioResult) {
    let _ = writeln!(out, "{} — seed {}: {}", s.id, s.seed, s.title);
    let _ = writeln!(out, "  known cause  {}", s.cause);
    if let Some(w) = &s.instigator {
        let _ = writeln!(out, "  set off by   {w}");
    }
    let _ = writeln!(out, "  seed's figure  {} ({})", s.published.text, s.published.machine);
    if s.verdict == Verdict::Skipped {
        let _ = writeln!(out, "  verdict      skipped: {}", s.reason);
        let _ = writeln!(out);
        return;
    }
    let w = s.variants.iter().map(|v| v.id.len()).max().unwrap_or(8).max(8);
    let _ = writeln!(out, "  ours         {} ({}): median, min–max over runs", s.metric, s.unit);
    for v in &s.variants {
        let stats = match &v.stats {
            Some(st) => format!(
                "{:>9}   {}–{}   n={}",
                fmt_num(st.median),
                fmt_num(st.min),
                fmt_num(st.max),
                st.n
            ),
            None => "no measurement".to_string(),
        };
        let _ = writeln!(
            out,
            "    {:<w$}  {}   {}{}",
            v.id,
            stats,
            v.label,
            if v.baseline { " (baseline)" } else { "" }
        );
        for r in v.runs.iter().filter(|r| r.error.is_some()) {
            let _ = writeln!(
                out,
                "    {:<w$}  run {} failed: {}",
                "",
                r.rep,
                r.error.as_deref().unwrap_or("")
            );
        }
    }
    if let Some(e) = s.effect {
        let _ = writeln!(out, "  effect       baseline ÷ best mitigation = {}×", fmt_num(e));
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note         {n}");
    }
    let _ = writeln!(out, "  verdict      {} ({})", s.verdict.words(), s.reason);
    let graded: Vec<_> =
        s.variants.iter().flat_map(|v| v.runs.iter().filter_map(|r| r.grade.as_ref())).collect();
    if !graded.is_empty() {
        let matched = graded.iter().filter(|g| g.matched).count();
        let named: Vec<bool> = graded.iter().filter_map(|g| g.culprit_named).collect();
        let mut culprit = if named.is_empty() {
            String::new()
        } else {
            format!(", culprit named in {}/{}", named.iter().filter(|n| **n).count(), named.len())
        };
        let who: Vec<bool> = graded.iter().filter_map(|g| g.instigator_named).collect();
        if !who.is_empty() {
            culprit.push_str(&format!(
                ", instigator named in {}/{}",
                who.iter().filter(|n| **n).count(),
                who.len()
            ));
        }
        let _ = writeln!(
            out,
            "  doctor       {matched}/{} runs diagnosed as expected{culprit}",
            graded.len()
        );
        for v in &s.variants {
            for r in &v.runs {
                if let Some(g) = r.grade.as_ref().filter(|g| !g.matched) {
                    let _ = writeln!(
                        out,
                        "               {} run {}: expected {}, diagnosed {} ({} stalls)",
                        v.id, r.rep, g.expected, g.diagnosed, g.stalls
                    );
                }
                if let Some(g) = r.grade.as_ref().filter(|g| g.machine_pauses > 0) {
                    let _ = writeln!(
                        out,
                        "               {} run {}: {} whole-machine pause(s) left out of the grade",
                        v.id, r.rep, g.machine_pauses
                    );
                }
                if let Some(g) = r.grade.as_ref().filter(|g| g.unseen_starts > 0) {
                    let _ = writeln!(
                        out,
                        "               {} run {}: {} stall(s) under way before watching left out of the grade",
                        v.id, r.rep, g.unseen_starts
                    );
                }
                if let Some(g) = r.grade.as_ref().filter(|g| g.instigator_named == Some(false)) {
                    let _ = writeln!(
                        out,
                        "               {} run {}: set off by {}, named {}",
                        v.id,
                        r.rep,
                        s.instigator.as_deref().unwrap_or("?"),
                        g.instigator.as_deref().unwrap_or("nobody")
                    );
                }
            }
        }
    }
    let _ = writeln!(out);
}

fn render(l: &LabResult) -> String {
    let mut out = String::new();
    let e = &l.environment;
    let _ = writeln!(
        out,
        "stallscope lab: {} profile, {} repetitions, {:.0} s",
        l.profile,
        l.reps,
        l.elapsed_ms as f64 / 1000.0
    );
    let _ = writeln!(
        out,
        "  machine      Linux {}, {} CPUs{}{}",
        e.kernel,
        e.cpus,
        if e.root { ", root" } else { "" },
        if e.fuse { ", FUSE" } else { ", no FUSE" }
    );
    let _ = writeln!(out, "  java         {} ({})", e.java_version, e.java);
    let _ = writeln!(out);
    for s in &l.scenarios {
        scenario(&mut out, s);
    }
    if !l.confusion.is_empty() {
        let diagnosed: std::collections::BTreeSet<&String> =
            l.confusion.values().flat_map(|m| m.keys()).collect();
        let _ = writeln!(
            out,
            "The doctor against the known causes (rows: expected, columns: diagnosed; runs)"
        );
        let w = l
            .confusion
            .keys()
            .chain(diagnosed.iter().copied())
            .map(|k| k.len())
            .max()
            .unwrap_or(8)
            .max(8);
        let _ = write!(out, "  {:<w$}", "");
        for d in &diagnosed {
            let _ = write!(out, " {:>w$}", d);
        }
        let _ = writeln!(out);
        for (exp, row) in &l.confusion {
            let _ = write!(out, "  {:<w$}", exp);
            for d in &diagnosed {
                let _ = write!(out, " {:>w$}", row.get(*d).copied().unwrap_or(0));
            }
            let _ = writeln!(out);
        }
    }
    out
}

fn render_compare(a: &LabResult, b: &LabResult, an: &str, bn: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "stallscope lab compare\n  A  {an}: Linux {}, {}\n  B  {bn}: Linux {}, {}",
        a.environment.kernel,
        a.environment.java_version,
        b.environment.kernel,
        b.environment.java_version
    );
    let _ = writeln!(out);
    for sa in &a.scenarios {
        let Some(sb) = b.scenarios.iter().find(|s| s.id == sa.id) else {
            let _ = writeln!(out, "{}: only in A", sa.id);
            continue;
        };
        let _ = writeln!(out, "{} ({}, {})", sa.id, sa.metric, sa.unit);
        // A scenario whose metric changed between the runs (swap's, from the longest timed GC
        // to the longest stall, on 2026-11-26): its medians are not set side by side.
        let same_metric = sa.metric == sb.metric && sa.unit == sb.unit;
        if !same_metric {
            let _ = writeln!(
                out,
                "  metric         A {} ({})   B {} ({}): different measures, not compared",
                sa.metric, sa.unit, sb.metric, sb.unit
            );
        }
        for va in sa.variants.iter().filter(|_| same_metric) {
            let vb = sb.variants.iter().find(|v| v.id == va.id);
            let med = |s: Option<&Stats>| s.map_or("-".to_string(), |s| fmt_num(s.median));
            let (ma, mb) = (va.stats.as_ref(), vb.and_then(|v| v.stats.as_ref()));
            let change = match (ma, mb) {
                (Some(x), Some(y)) if x.median > 0.0 => {
                    format!("  B/A {}×", fmt_num(y.median / x.median))
                }
                _ => String::new(),
            };
            let _ = writeln!(out, "  {:<14} A {:>9}   B {:>9}{change}", va.id, med(ma), med(mb));
        }
        let changed = if sa.verdict != sb.verdict { "  ← changed" } else { "" };
        let _ = writeln!(
            out,
            "  verdict        A {}   B {}{changed}",
            sa.verdict.words(),
            sb.verdict.words()
        );
        let _ = writeln!(out);
    }
    for sb in &b.scenarios {
        if !a.scenarios.iter().any(|s| s.id == sb.id) {
            let _ = writeln!(out, "{}: only in B", sb.id);
        }
    }
    out
}
