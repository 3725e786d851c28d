//! One stall diagnosed: its extent and safepoints, its evidence, the classifier's findings, the
//! kernel's account and the instigators.

use super::*;

/// The whole diagnosis of one stall.
/// `seen`: the stall as the recorder saw it; `floor`: where the previous stall ended.
pub(super) fn diagnose_stall(
    rec: &Recording,
    seen: &StallSpan,
    floor: u64,
    samples: &[&Sample],
    meter_tid: Option<i32>,
    all_names: &HashMap<i32, String>,
) -> StallReport {
    let meta = &rec.meta;
    let stall = seen.stall;
    // The kernel's scheduler events, where recorded: the stall's kernel lines. The causes are
    // decided from the samples as without them (kernel::refine is not applied: giving a
    // sample's vague wchan the stack's deciding frame improved one stall of 1,555 in the lab and
    // named a swap run's short stall memory-reclaim with high confidence in another).
    let kw = rec.kwaits.iter().find(|k| k.stall == stall);
    let ctx = rec.context.iter().find(|c| c.stall == stall);
    let names: HashMap<i32, String> = ctx
        .map(|c| {
            c.java_threads.iter().filter(|j| j.tid > 0).map(|j| (j.tid, j.name.clone())).collect()
        })
        .unwrap_or_default();
    let (safepoint, spanned) = stall_safepoints(rec, seen, floor, &names);
    let (full, span, unseen_ns, begun_before_stop_ns) =
        stall_extent(seen, &spanned, safepoint.as_ref(), meta.start_mono_ns);
    let span = &span;
    let until = if span.exited_during { u64::MAX } else { span.end_ns };
    // From the stall's start: a thread's run-queue wait before its first sample counts from there.
    let ev = evidence::rebuild(samples, meta.clock_ticks, span.start_ns, until);
    let segs: Vec<Segment> = segments(span.start_ns, span.end_ns.max(span.start_ns), &spanned)
        .into_iter()
        .map(|(kind, start, end)| Segment {
            kind,
            start_ns: start,
            end_ns: end,
            evidence: evidence::rebuild(samples, meta.clock_ticks, start, end.min(until)),
        })
        .collect();
    let sys: Vec<&SystemSample> = rec.system.iter().filter(|s| s.stall == stall).collect();
    let signals = system_signals(meta, &sys);
    let trace = rec.trace.iter().find(|t| t.stall == stall).map_or(&[][..], |t| &t.events[..]);
    let duration = span.duration_ns();
    // Outside any safepoint for certain: the JVM's safepoints are known (its log, its counters),
    // none is the stall's, and none was under way as it began (one given to the stall before,
    // the tick resumed inside it). One that ends it (a collection the held thread asked for) is
    // not the stall's beginning.
    let outside_safepoints = spanned.is_empty()
        && (rec.has_safepoint_log || !rec.safepoints.is_empty())
        && !rec.safepoints.iter().any(|s| {
            s.end.mono_ns.is_some_and(|end| {
                end > full.start_ns && end.saturating_sub(s.total_ns) <= full.start_ns
            })
        });
    let inputs = classify::Inputs {
        duration_ns: duration,
        start_ns: span.start_ns,
        end_ns: span.end_ns,
        evidence: &ev,
        segments: &segs,
        safepoints: &spanned,
        control_max_late_ns: span.control_max_late_ns,
        control_queued_ns: span.control_queued_ns,
        signals: &signals,
        shares: meta.recorder_shares.unwrap_or_default(),
        names: &names,
        maps: ctx.map_or(&[][..], |c| &c.maps),
        mapped_files: ctx.map_or(&[][..], |c| &c.mapped_files),
        in_memory_files: ctx.map_or(&[][..], |c| &c.in_memory_files),
        writeback_files: ctx.map_or(&[][..], |c| &c.writeback_files),
        meter_tid,
        trace,
        kwaits: kw,
        cpu_use: rec.who.iter().filter(|w| w.stall() == stall).find_map(classify::CpuUse::of),
        clock_ticks: meta.clock_ticks,
        outside_safepoints,
        gc_locker_held_ns: crate::causes::gc_locker_held_back_ns(
            rec.who.iter().filter(|w| w.stall() == stall),
            span.start_ns,
            span.end_ns,
        ),
    };
    let mut findings = classify::classify(&inputs);
    // A process that is not a JVM stalls when the kernel holds a thread of it: what held it is
    // the stall's cause, from the kernel's account, where that covers half of it or more.
    if seen.by == recording::StallTrigger::Kernel
        && let Some(f) = kw.and_then(|k| {
            let (from, to) = (span.start_ns, span.end_ns.max(span.start_ns));
            let wchans = sampled_wchans(samples, from, to);
            let mut f = crate::kernel::held_finding(k, from, to, &names, &wchans)?;
            // A fault's wait: the page, as the JVM's findings name it.
            if matches!(f.cause, Cause::MajorFault | Cause::MappedWriteback)
                && let Some(c) = f.culprits.first_mut()
                && let Some((offset, path)) =
                    crate::kernel::fault_at(k, c.tid, (from, to), trace, inputs.maps)
            {
                let line =
                    Evidence::FaultAt { role: classify::Role::Late, offset, path: path.into() };
                c.files.push(classify::fault_file(offset, path));
                f.evidence.insert(1, line.to_string());
            }
            Some(f)
        })
    {
        findings = vec![f];
    }
    let culprit_tids: Vec<i32> =
        findings.iter().flat_map(|f| f.culprits.iter().map(|c| c.tid)).collect();
    let tick_ns = 1_000_000_000 / meta.clock_ticks.max(1);
    let parked = ev
        .threads
        .iter()
        .filter(|t| !culprit_tids.contains(&t.tid) && parked_throughout(t, tick_ns))
        .count();
    let mut raw = Vec::new();
    if findings.is_empty() {
        findings.push(unknown_finding(&ev));
    }
    if unseen_ns > 0
        && let Some(f) = findings.first_mut()
    {
        let began = Evidence::BeganBeforeWatching { unseen_ns, seen_ns: span.duration_ns() };
        f.evidence.push(began.to_string());
    }
    let seen_part = StallSpan {
        noticed_ns: seen.noticed_ns.max(span.start_ns + meta.threshold_ns),
        start_ns: seen.start_ns.max(span.start_ns),
        ..seen.clone()
    };
    if let Some(said) = recorder_blind(&rec.events, span, &seen_part, meta.threshold_ns) {
        for f in findings.iter_mut().filter(|f| f.cause == Cause::Unknown) {
            f.evidence.push(said.to_string());
        }
    }
    if findings.iter().any(|f| f.cause == Cause::Unknown) {
        raw = busiest_threads(&ev, &names);
    }
    // A thread late to the safepoint was late while it was being reached: that is when its code
    // held the world (after it, the thread runs on elsewhere while the operation runs).
    let (code_from, code_to) =
        match safepoint.as_ref().filter(|sp| !sp.unfinished && sp.ttsp_ns > 0) {
            Some(sp) => (sp.start_mono_ns, sp.start_mono_ns + sp.ttsp_ns),
            None => (span.start_ns, span.start_ns + duration),
        };
    if rec.frames_recorded {
        name_the_code(
            &mut findings,
            &rec.frames,
            code_from,
            code_to,
            (span.start_ns, span.start_ns + duration),
        );
    }
    let who = WhoSpan { samples, trace, start_ns: full.start_ns, end_ns: span.end_ns };
    instigators(rec, stall, who, &names, all_names, safepoint.as_ref(), &mut findings, &mut raw);
    let culprits: Vec<i32> =
        findings.iter().flat_map(|f| f.culprits.iter().map(|c| c.tid)).collect();
    // A stall that began before the target's waits were recorded (the recorder started during
    // it) has no whole kernel account: its waits from before are not seen.
    let began_unseen = kw.and_then(|k| k.since).filter(|&s| s > full.start_ns);
    // Outside any safepoint the meter is the thread that was held: its waits (a lock's futex,
    // with who woke it) are shown even where they are of the kinds left out for others.
    let mut shown = culprits.clone();
    if outside_safepoints && let Some(m) = meter_tid.filter(|m| !shown.contains(m)) {
        shown.push(m);
    }
    let kernel = kw
        .filter(|_| began_unseen.is_none())
        .map(|k| crate::kernel::view(k, span.start_ns, span.end_ns, &names, &shown, 6))
        .unwrap_or_default();
    if let (Some(f), Some(since)) = (findings.first_mut(), began_unseen) {
        f.evidence.push(format!(
            "no kernel account (BPF): the stall began {:.1} ms before the kernel's scheduler events were recorded",
            (since - full.start_ns) as f64 / 1e6
        ));
    }
    not_holding_after_all(&mut findings, &kernel, duration);
    if let Some(f) = findings.first_mut() {
        // A culprit that was off a CPU for a tenth of the stall or more: what held it there.
        for t in
            kernel.iter().filter(|t| t.share >= 0.1 && f.culprits.iter().any(|c| c.tid == t.tid))
        {
            let line = crate::kernel::evidence_line(t);
            if !f.evidence.contains(&line) {
                f.evidence.push(line);
            }
        }
    }
    StallReport {
        stall,
        start_mono_ns: full.start_ns,
        duration_ns: full.duration_ns(),
        start_wall: wall_of(meta, full.start_ns),
        safepoint,
        safepoints: spanned,
        findings,
        parked_threads: parked,
        threads: ev.threads.len(),
        samples: ev.sample_times.len(),
        control_max_late_ns: span.control_max_late_ns,
        target_exited: span.exited_during,
        raw,
        begun_before_stop_ns,
        kernel,
    }
}

/// stallscope's own agent thread named late by SafepointTimeout (a culprit, the doctor says
/// "the observer held it too"), which the kernel's events show asleep off a CPU through nearly
/// all of the stall: it waited for the safepoint and was woken after it, so it cannot have held
/// it (the JVM's list is of when it looked). Not a culprit then; the finding says why. Seen
/// once in a CI run: the agent's hiccup log thread asleep in a futex for 1,797 ms of a 1,806 ms
/// stall, woken by the VM thread.
pub(super) fn not_holding_after_all(
    findings: &mut [Finding],
    kernel: &[KernelThreadView],
    duration: u64,
) {
    for f in findings.iter_mut() {
        let asleep: Vec<(i32, String, f64)> = f
            .culprits
            .iter()
            .filter(|c| c.named_by_safepoint_timeout && evidence::stallscope_own(&c.name))
            .filter_map(|c| {
                let t = kernel.iter().find(|t| t.tid == c.tid)?;
                let slept = t.share >= 0.9
                    && t.longest.state == 'S'
                    && t.longest.within_ns.saturating_mul(10) >= duration.saturating_mul(8);
                slept.then(|| (c.tid, c.name.clone(), t.share))
            })
            .collect();
        for (tid, name, share) in asleep {
            f.culprits.retain(|c| c.tid != tid);
            let held = Evidence::OwnThreadHeld { name: name.clone() }.to_string();
            f.evidence.retain(|e| *e != held);
            f.evidence.push(format!(
                "SafepointTimeout also named \"{name}\", stallscope's own agent thread, but the kernel's events show it asleep off a CPU for {:.0}% of the stall: it waited for the safepoint, it did not hold it",
                share * 100.0
            ));
        }
    }
}

/// The safepoint that held the world during a stall, and every one it spans; none that began
/// before the previous stall ended at `floor` (that stall's already).
pub(super) fn stall_safepoints(
    rec: &Recording,
    seen: &StallSpan,
    floor: u64,
    names: &HashMap<i32, String>,
) -> (Option<SafepointView>, Vec<SafepointView>) {
    // A safepoint that began before the previous stall ended is that stall's (see below).
    let own = |s: &SafepointView| floor == 0 || s.start_mono_ns >= floor;
    let safepoint =
        match_safepoint(seen, &rec.safepoints, &rec.unfinished_culprits, rec.open_sync_ns, names)
            .filter(own)
            .or_else(|| unended_safepoint(rec, seen));
    let spanned: Vec<SafepointView> = if safepoint.as_ref().is_some_and(|s| s.unfinished) {
        safepoint.iter().cloned().collect()
    } else {
        spanned_safepoints(seen, &rec.safepoints, safepoint.as_ref(), names)
    };
    let spanned: Vec<SafepointView> = spanned.into_iter().filter(own).collect();
    (safepoint, spanned)
}

/// When a stall really began and ended (`full`), the part of it after the recorder started, how
/// much of it came before the recorder started, and how long the VM thread began its safepoint
/// before it stopped anyone.
pub(super) fn stall_extent(
    seen: &StallSpan,
    spanned: &[SafepointView],
    safepoint: Option<&SafepointView>,
    recording_start_ns: u64,
) -> (StallSpan, StallSpan, u64, Option<u64>) {
    // The world stopped when the safepoint began, even if the meter noticed later (it was
    // asleep, or the recorder itself was held up): the stall starts there.
    // Not, though, into the previous stall: when the heartbeat resumed inside a safepoint (its
    // tick held up, then published) and stalled again, that safepoint is already explained there
    // (seen in a lab run: a second 1.6 s "unknown" stall made of the first one's safepoint), and
    // `stall_safepoints` left it out.
    // Nor back past the meter's last tick: the meter is a Java thread, so while it ticked no
    // thread was stopped yet. (A VM thread held before it stops any thread, e.g. in a write
    // fault on its perf counters, starts the safepoint's clock long before the world stops.)
    let mut span = seen.clone();
    let ran_until = seen.last_tick_ns.unwrap_or(0);
    if let Some(first) = spanned.first().filter(|s| {
        s.start_mono_ns < span.start_ns
            && s.start_mono_ns + s.total_ns > span.start_ns
            && ran_until <= s.start_mono_ns + TICK_AFTER_BEGIN_NS
    }) {
        span.start_ns = first.start_mono_ns;
    }
    // The other case: the meter ticked well into the safepoint's TTSP, so the VM thread began it
    // (and started its clock) long before it stopped anyone. The log's TTSP is not what the
    // application felt; say how much of it was the VM thread's own lateness.
    let begun_before_stop_ns = safepoint
        .filter(|s| {
            s.start_mono_ns < span.start_ns
                && ran_until > s.start_mono_ns + LATE_BEGIN_NS
                && !s.unfinished
        })
        .map(|s| ran_until.min(s.start_mono_ns + s.ttsp_ns) - s.start_mono_ns);
    // A stall under way when the recorder started (`attach` to a JVM stuck already) is judged on
    // the part it saw: what held the JVM before is not known, and not counted against the cause.
    let full = span.clone();
    let unseen_ns = recording_start_ns.saturating_sub(span.start_ns).min(span.duration_ns());
    span.start_ns += unseen_ns;
    (full, span, unseen_ns, begun_before_stop_ns)
}
