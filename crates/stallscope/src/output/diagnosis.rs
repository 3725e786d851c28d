//! The human report of a recording (`run`, `attach`, `report`): one block per stall, then a
//! summary. The same renderer serves the live run and `report DIR`, so they match byte for
//! byte.

use super::Render;
use doctor::{Cause, Report, StallReport};
use recording::units::{fmt_count, fmt_ns};
use std::fmt::Write as _;
use std::io;

/// The report as text, for a terminal or a file.
pub struct ReportText<W: io::Write>(pub W);

impl<W: io::Write> Render<Report> for ReportText<W> {
    fn finish(&mut self, r: &Report) -> io::Result<()> {
        self.0.write_all(render(r).as_bytes())?;
        self.0.flush()
    }
}

fn wrap(out: &mut String, label: &str, text: &str) {
    // Continuation lines line up under the text, as in the cause pages.
    let indent = " ".repeat(11);
    let mut line = format!("  {label:<8} ");
    let mut len = line.len();
    for word in text.split(' ') {
        if len + word.len() > 100 && len > indent.len() {
            let _ = writeln!(out, "{}", line.trim_end());
            line = indent.clone();
            len = indent.len();
        }
        line.push_str(word);
        line.push(' ');
        len += word.len() + 1;
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

/// A culprit's Java stack, as a stack trace prints it: where it came from, then its top frames.
fn code_block(out: &mut String, code: &doctor::code::CulpritCode) {
    // Six frames, or down to the application's own frame when it is deeper (inside a library),
    // up to a screenful; the JSON has them all.
    let shown = code.app_frame.map_or(6, |i| (i + 1).clamp(6, 24));
    wrap(out, "code", &format!("{}:", code.source));
    for (i, f) in code.frames.iter().take(shown).enumerate() {
        let mut at = format!("{:11}at {}", "", f.method);
        match (f.line, f.kind.is_empty()) {
            (Some(l), false) => at.push_str(&format!(" (line {l}, {})", f.kind)),
            (Some(l), true) => at.push_str(&format!(" (line {l})")),
            (None, false) => at.push_str(&format!(" ({})", f.kind)),
            (None, true) => {}
        }
        if Some(i) == code.app_frame && i > 0 {
            at.push_str("   <- its code");
        }
        if let (Some(li), Some(name)) = (code.library_frame, code.library.as_deref())
            && li == i
        {
            at.push_str(&format!("   <- in {name}"));
        }
        let _ = writeln!(out, "{at}");
    }
    if code.frames.len() > shown || code.truncated {
        let _ = writeln!(out, "{:11}…", "");
    }
}

/// Who set a finding off: what they did, then a Java thread's stack where it asked.
fn instigator_block(out: &mut String, w: &doctor::Instigator) {
    wrap(out, "who", &w.did);
    for f in w.java_stack.iter().take(6) {
        let _ = writeln!(out, "{:11}at {f}", "");
    }
    if w.java_stack.len() > 6 {
        let _ = writeln!(out, "{:11}…", "");
    }
}

/// What is happening now in a JVM `attach` just reached, from the recording up to `now`: the
/// stall under way (`stall`), as a stall block headed `NOW`, or that it runs.
pub fn now_text(
    r: &Report,
    stall: Option<u32>,
    pid: i32,
    after_ns: u64,
    counters: Option<&recording::disk::CounterLook>,
) -> String {
    let mut out = String::new();
    let open = stall.and_then(|n| r.stalls.iter().find(|s| s.stall == n));
    match open {
        Some(s) => {
            let head = match &s.safepoint {
                Some(sp) if sp.ttsp_ns >= sp.total_ns => {
                    format!(" — in a safepoint not yet reached, for {}", fmt_ns(sp.ttsp_ns))
                }
                Some(sp) => format!(
                    " — at a safepoint (\"{}\") for {}, reached after {}",
                    sp.op,
                    fmt_ns(sp.at_safepoint_ns),
                    fmt_ns(sp.ttsp_ns)
                ),
                None => String::new(),
            };
            let _ = writeln!(
                out,
                "NOW ({} after attaching): JVM pid {pid} has been stalled for {}, since {}, and still is{head}",
                fmt_ns(after_ns),
                fmt_ns(s.duration_ns),
                s.start_wall
            );
            stall_body(&mut out, s);
        }
        None => {
            let totals = counters
                .map(|c| {
                    format!(
                        "; {} safepoints since it started, stopped {} in all",
                        fmt_count(c.safepoints),
                        fmt_ns(c.sync_ns + c.safepoint_ns)
                    )
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "NOW ({} after attaching): JVM pid {pid} runs: no safepoint under way, not stopped{totals}",
                fmt_ns(after_ns)
            );
            for n in r.notes.iter().filter(|n| n.starts_with("no perf counters")) {
                let _ = writeln!(out, "note: {n}");
            }
            let _ = writeln!(out);
        }
    }
    out
}

/// `not_a_jvm`: the target has no safepoints; its stalls are threads the kernel held.
fn stall_block(out: &mut String, s: &StallReport, not_a_jvm: bool) {
    let head = match (&s.safepoint, s.safepoints.len()) {
        (Some(sp), _) if sp.unfinished => {
            let why = if s.target_exited { "the JVM exited" } else { "the recording ended first" };
            format!(
                " — inside a safepoint that never completed ({why}): reaching it {}",
                fmt_ns(sp.ttsp_ns)
            )
        }
        (Some(sp), 0 | 1) => format!(
            " — safepoint \"{}\": reaching {} (TTSP), at safepoint {}",
            sp.op,
            fmt_ns(sp.ttsp_ns),
            fmt_ns(sp.at_safepoint_ns)
        ),
        (_, n) if n > 1 => {
            let each: Vec<String> = s
                .safepoints
                .iter()
                .map(|sp| {
                    format!(
                        "\"{}\" (reaching {}, at safepoint {})",
                        sp.op,
                        fmt_ns(sp.ttsp_ns),
                        fmt_ns(sp.at_safepoint_ns)
                    )
                })
                .collect();
            format!(" — {n} safepoints: {}", each.join(", then "))
        }
        _ if not_a_jvm => " — a thread held by the kernel (not a JVM: no safepoints)".to_string(),
        _ => " — a hiccup outside any safepoint".to_string(),
    };
    let _ = writeln!(out, "STALL {} at {}{head}", fmt_ns(s.duration_ns), s.start_wall);
    stall_body(out, s);
}

/// A stall's findings, culprits, evidence and fixes, below its heading.
fn stall_body(out: &mut String, s: &StallReport) {
    for (i, f) in s.findings.iter().enumerate() {
        let share = if s.findings.len() > 1 && f.share > 0.0 {
            format!(", {:.0}% of the stall", f.share * 100.0)
        } else {
            String::new()
        };
        let label = if i == 0 { "cause" } else { "also" };
        wrap(out, label, &format!("{} ({} confidence{share})", f.title, f.confidence.word()));
        for c in &f.culprits {
            let mut t = format!("\"{}\" (tid {}): {}", c.name, c.tid, c.description);
            if let Some(m) = &c.module {
                t.push_str(&format!("; pc in {m}"));
            }
            for file in &c.files {
                t.push_str(&format!("; mapped file {file}"));
            }
            wrap(out, "culprit", &t);
            // Once per thread and stall: a second finding about the same thread has the same code.
            let shown = s.findings[..i].iter().any(|g| g.culprits.iter().any(|o| o.tid == c.tid));
            if let Some(code) = c.code.as_ref().filter(|_| !shown) {
                code_block(out, code);
            }
        }
        for e in &f.evidence {
            wrap(out, "evidence", e);
        }
        let who = f.instigator.as_ref();
        // Once per stall: a second finding set off by the same one says so.
        let said =
            who.is_some_and(|w| s.findings[..i].iter().any(|g| g.instigator.as_ref() == Some(w)));
        if let Some(w) = who {
            if said {
                wrap(out, "who", &format!("{} (as above)", w.name));
            } else {
                instigator_block(out, w);
            }
        }
        if f.cause != Cause::Unknown || s.findings.len() == 1 {
            wrap(out, "fix", &format!("{} (see {})", f.fix, f.doc));
        }
        if let Some(w) = who.filter(|w| !said && w.fix != f.fix && !w.fix.is_empty()) {
            wrap(out, "fix too", &w.fix);
        }
    }
    if let Some(sp) = &s.safepoint {
        let named: Vec<String> =
            sp.timeout_culprits.iter().map(|c| format!("\"{}\"", c.name)).collect();
        if !named.is_empty()
            && !s.findings.iter().any(|f| f.culprits.iter().any(|c| c.named_by_safepoint_timeout))
        {
            wrap(out, "timeout", &format!("SafepointTimeout named {}", named.join(", ")));
        }
    }
    if let (Some(late), Some(sp)) = (s.begun_before_stop_ns, &s.safepoint) {
        wrap(
            out,
            "note",
            &format!(
                "{} of the log's {} \"Reaching safepoint\" passed before any thread was stopped \
                 (the agent's meter ticked on): the VM thread was late to stop the world, held \
                 by something of its own (its perf counters on a slow disk, for one: see \
                 docs/causes/mapped-writeback.md). Whoever asked for \"{}\" waited all of it; the \
                 application only the {} above",
                fmt_ns(late),
                fmt_ns(sp.ttsp_ns),
                sp.op,
                fmt_ns(s.duration_ns)
            ),
        );
    }
    if s.threads > 0 {
        wrap(
            out,
            "others",
            &format!(
                "{} of {} threads were parked in the kernel throughout ({} samples)",
                s.parked_threads, s.threads, s.samples
            ),
        );
    }
    for k in &s.kernel {
        let l = &k.longest;
        let mut line = format!(
            "\"{}\" (tid {}) off a CPU {} ({:.0}%, {} waits): {}",
            k.name,
            k.tid,
            fmt_ns(k.off_cpu_ns),
            k.share * 100.0,
            k.waits,
            k.kinds
                .iter()
                .take(3)
                .map(|(kind, ns)| format!("{} {kind}", fmt_ns(*ns)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !l.stack.is_empty() {
            line.push_str(&format!(
                "; longest {} in {}",
                fmt_ns(l.within_ns),
                l.stack.iter().take(4).cloned().collect::<Vec<_>>().join(" < ")
            ));
        }
        if let Some(w) = &l.waker {
            line.push_str(&format!(", woken by {w}"));
            if !l.waker_stack.is_empty() {
                line.push_str(&format!(
                    " in {}",
                    l.waker_stack.iter().take(3).cloned().collect::<Vec<_>>().join(" < ")
                ));
            }
            for c in &l.waker_chain {
                line.push_str(&format!("; {c}"));
            }
        }
        if let Some(i) = &l.instead {
            line.push_str(&format!(", the CPU went to {i}"));
        }
        wrap(out, "kernel", &line);
    }
    for r in &s.raw {
        wrap(
            out,
            "sample",
            &format!(
                "\"{}\" (tid {}): {} {} cpu {} run-queue {} +{} major faults",
                r.name,
                r.tid,
                r.states,
                if r.wchan.is_empty() { "-" } else { &r.wchan },
                fmt_ns(r.cpu_ns),
                fmt_ns(r.run_delay_ns),
                r.majflt
            ),
        );
    }
    if s.target_exited {
        wrap(out, "note", "the target exited before this stall ended");
    }
    let _ = writeln!(out);
}

fn render(r: &Report) -> String {
    let mut out = String::new();
    let m = &r.meta;
    let cmd = if m.command.is_empty() { format!("pid {}", m.pid) } else { m.command.join(" ") };
    let _ = writeln!(
        out,
        "stallscope {}: {} (pid {}), {} on Linux {} ({} CPUs), threshold {}",
        m.mode,
        cmd,
        m.pid,
        match m.java_version.as_deref() {
            _ if m.not_a_jvm => "not a JVM".to_string(),
            Some(v) => format!("JDK {v}"),
            None => "JDK unknown".into(),
        },
        m.kernel,
        m.cpus,
        fmt_ns(m.threshold_ns)
    );
    if let Some(p) = &m.pod {
        let _ = writeln!(out, "{}", super::pod_line(p));
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(out);
    for s in &r.stalls {
        stall_block(&mut out, s, m.not_a_jvm);
    }
    let sm = &r.summary;
    let _ = writeln!(out, "Summary ({} recorded)", fmt_ns(sm.recorded_ns));
    if sm.stalls == 0 {
        let _ = writeln!(out, "  stalls      none of {} or more", fmt_ns(m.threshold_ns));
    } else {
        let causes: Vec<String> = sm.by_cause.iter().map(|(c, n)| format!("{n} {c}")).collect();
        let _ = writeln!(
            out,
            "  stalls      {} (longest {}): {}",
            sm.stalls,
            fmt_ns(sm.longest_stall_ns),
            causes.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "  safepoints  {}, stopped {} in all{}",
        fmt_count(sm.safepoints),
        fmt_ns(sm.total_stopped_ns),
        sm.ttsp_max_ns.map(|t| format!(", longest TTSP {}", fmt_ns(t))).unwrap_or_default()
    );
    if let Some(b) = &sm.boost {
        let _ = writeln!(out, "  boost       {}", boost_line(b));
    }
    if sm.recorder_pauses > 0 {
        let _ = writeln!(
            out,
            "  recorder    stallscope itself was held up {} time{} (worst {}): its control meter woke late, or a /proc read or a write took long; stalls then may be missing or unseen",
            sm.recorder_pauses,
            if sm.recorder_pauses == 1 { "" } else { "s" },
            fmt_ns(sm.recorder_pause_max_ns)
        );
    }
    match &sm.hiccups {
        Some(h) => {
            let _ = writeln!(
                out,
                "  hiccups     p50 {}, p99 {}, p99.9 {}, max {} ({} intervals of the agent's meter)",
                fmt_ns(h.p50_ns),
                fmt_ns(h.p99_ns),
                fmt_ns(h.p99_9_ns),
                fmt_ns(h.max_ns),
                h.intervals
            );
        }
        None => {
            let _ = writeln!(out, "  hiccups     no interval log from the agent");
        }
    }
    if let Some(c) = &sm.control {
        let _ = writeln!(
            out,
            "  control     p50 {}, p99 {}, max {} (stallscope's own wake-ups: the floor the hiccups stand on)",
            fmt_ns(c.p50_ns),
            fmt_ns(c.p99_ns),
            fmt_ns(c.max_ns)
        );
    }
    out
}

/// What `run --boost-on safepoint` did, in one line.
fn boost_line(b: &doctor::report::BoostSummary) -> String {
    if let Some(why) = &b.failed {
        return format!("none: {why}");
    }
    let policy = if b.realtime { "SCHED_FIFO" } else { "not real-time (no CAP_SYS_NICE)" };
    let mut refused = if b.refused > 0 {
        format!("; the kernel refused {} thread raises (CAP_SYS_NICE)", b.refused)
    } else {
        String::new()
    };
    if b.capped > 0 {
        refused.push_str(&format!(
            "; {} put back after 50 ms with the safepoint still open",
            b.capped
        ));
    }
    format!(
        "{} safepoints boosted, {} threads each; in place {} after the begin (p50; p90 {}, max {}), seen {} after it; begins placed to {}; the booster ({policy}) used {:.1}% of a CPU{refused}",
        b.boosts,
        b.threads_p50,
        fmt_ns(b.delay_p50_ns),
        fmt_ns(b.delay_p90_ns),
        fmt_ns(b.delay_max_ns),
        fmt_ns(b.seen_p50_ns),
        fmt_ns(b.begun_within_p50_ns),
        b.cpu_share * 100.0
    )
}
