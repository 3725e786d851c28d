//! When each stall began and ended, from the recorder's events alone: from when the meter
//! should have ticked to its next tick, or to the end of the recording when it never came.
//!
//! Invariant: a pure function of the events; a stall never ends before it was noticed, and one
//! whose end was not recorded ends with the recording and is marked `cut`.

use recording::Event;

/// One stall as the recorder saw it: from when the meter should have ticked to its next tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StallSpan {
    pub stall: u32,
    /// When the recorder noticed the heartbeat was stale.
    pub noticed_ns: u64,
    /// The meter's last tick before it (a stall the heartbeat showed): the JVM's threads ran
    /// until then.
    pub last_tick_ns: Option<u64>,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The recorder's own worst lateness during it, and how much of that wake-up it spent on a
    /// run queue (waiting for a CPU rather than not running at all).
    pub control_max_late_ns: u64,
    pub control_queued_ns: Option<u64>,
    /// Watching ended (the JVM exited) before the stall did.
    pub exited_during: bool,
    /// The recording ended (the JVM exited, or the recorder detached) before the stall did.
    pub cut: bool,
    /// What showed its begin: the heartbeat, or the counters' safepoint, or the process stopped.
    pub by: recording::StallTrigger,
    /// The JVM began to exit inside it.
    pub exiting: bool,
}

impl StallSpan {
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }
}

/// When the recording ended: the target's exit or the recorder's detach; `now` for one read as
/// it stood then, while it was being made (`Recording::now`).
pub fn end_of_recording(events: &[Event], now: Option<u64>) -> Option<u64> {
    now.or_else(|| {
        events.iter().rev().find_map(|e| match e {
            Event::TargetExit { t, .. } | Event::Detach { t, .. } => Some(*t),
            _ => None,
        })
    })
}

/// Every stall the recorder saw, with its start and end; `now`: the recording is read as it
/// stood then, while it was being made, and a stall with no end yet was under way (cut there,
/// the JVM not gone). `last_written`: when the recorder last wrote to the recording; one with
/// no end record (its recorder was killed) ends there, and a stall open then is cut there, the
/// JVM not known to be gone.
pub fn stall_spans(
    events: &[Event],
    now: Option<u64>,
    last_written: Option<u64>,
) -> Vec<StallSpan> {
    let ended = end_of_recording(events, now);
    let end_of_recording = ended.or(last_written);
    let target_exited = events.iter().any(|x| matches!(x, Event::TargetExit { .. }));
    let mut out = Vec::new();
    for e in events {
        let Event::StallBegin { t: noticed, stall, expected_ns, by, last_tick_ns } = e else {
            continue;
        };
        let end = events.iter().find_map(|x| match x {
            Event::StallEnd {
                stall: s,
                resumed_ns,
                control_max_late_ns,
                control_queued_ns,
                resumed,
                ..
            } if s == stall => {
                Some((*resumed_ns, *control_max_late_ns, *control_queued_ns, *resumed))
            }
            _ => None,
        });
        let exiting = events
            .iter()
            .any(|x| matches!(x, Event::StallEnd { stall: s, exiting: true, .. } if s == stall));
        let exited_during = match end {
            None => ended.is_some() && now.is_none(),
            Some((_, _, _, resumed)) => !resumed && target_exited,
        };
        let (end_ns, control, queued, _) =
            end.unwrap_or((end_of_recording.unwrap_or(*expected_ns), 0, None, false));
        // It was still stalled when noticed. (Earlier recorders could write a resumption from
        // before that: the meter's tick time, read before a safepoint held up its publication.)
        let cut = end.is_none_or(|(_, _, _, resumed)| !resumed);
        out.push(StallSpan {
            stall: *stall,
            noticed_ns: *noticed,
            // The meter's last tick (a safepoint probe's stall keeps it too: the world ran
            // while the meter ticked, whatever the probe said).
            last_tick_ns: (matches!(
                by,
                recording::StallTrigger::Heartbeat | recording::StallTrigger::SafepointProbe
            ) && *last_tick_ns > 0)
                .then_some(*last_tick_ns),
            start_ns: *expected_ns,
            end_ns: end_ns.max(*noticed),
            control_max_late_ns: control,
            control_queued_ns: queued,
            exited_during,
            cut,
            by: *by,
            exiting,
        });
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    pub(crate) fn begin(stall: u32, expected_ms: u64, noticed_ms: u64) -> Event {
        Event::StallBegin {
            t: noticed_ms * MS,
            stall,
            last_tick_ns: (expected_ms - 1) * MS,
            expected_ns: expected_ms * MS,
            by: Default::default(),
        }
    }

    pub(crate) fn end(stall: u32, resumed_ms: u64, resumed: bool) -> Event {
        Event::StallEnd {
            t: resumed_ms * MS + 1,
            stall,
            resumed_ns: resumed_ms * MS,
            control_max_late_ns: 7,
            control_queued_ns: None,
            resumed,
            dropped_samples: 0,
            exiting: false,
            thread_reads: None,
        }
    }

    #[test]
    fn stall_spans_run_from_the_missed_tick_to_the_next() {
        let ev = vec![
            begin(1, 2000, 2005),
            end(1, 2300, true),
            begin(2, 3000, 3005),
            Event::TargetExit { t: 3500 * MS, code: Some(0), signal: None },
        ];
        let s = stall_spans(&ev, None, None);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].start_ns, s[0].end_ns, s[0].control_max_late_ns, s[0].exited_during),
            (2000 * MS, 2300 * MS, 7, false)
        );
        assert_eq!(s[0].duration_ns(), 300 * MS);
        // Never ended: it lasted until the target exited.
        assert_eq!((s[1].end_ns, s[1].exited_during), (3500 * MS, true));
    }

    #[test]
    fn a_stall_cannot_end_before_it_was_noticed() {
        let s = stall_spans(&[begin(1, 2000, 2010), end(1, 2004, true)], None, None);
        assert_eq!(
            s[0].end_ns,
            2010 * MS,
            "an early resumption time is clamped to when it was seen"
        );
        // Watching ended with the meter silent but the JVM alive (detach): not an exit.
        let s = stall_spans(
            &[
                begin(1, 2000, 2005),
                end(1, 2100, false),
                Event::Detach { t: 2200 * MS, reason: "x".into() },
            ],
            None,
            None,
        );
        assert!(!s[0].exited_during);
    }

    #[test]
    fn a_recording_read_as_it_stood_cuts_the_stall_under_way_there_and_nobody_exited() {
        let ev = [begin(1, 2000, 2005), end(1, 2100, true), begin(2, 3000, 3005)];
        let s = stall_spans(&ev, Some(3500 * MS), None);
        assert_eq!(s[1].end_ns, 3500 * MS);
        assert!(s[1].cut && !s[1].exited_during, "{:?}", s[1]);
        assert!(!s[0].cut);
        // The same events read after the fact, with no end record: the recorder was killed.
        // The stall lasted at least until it last wrote, and nothing says the JVM exited.
        let s = stall_spans(&ev, None, Some(4200 * MS));
        assert_eq!(s[1].end_ns, 4200 * MS);
        assert!(s[1].cut && !s[1].exited_during, "{:?}", s[1]);
        let s = stall_spans(&ev, None, None);
        assert_eq!(s[1].end_ns, 3005 * MS, "nothing after it: it ends where it was noticed");
        assert!(!s[1].exited_during, "{:?}", s[1]);
        assert_eq!(end_of_recording(&ev, Some(3500 * MS)), Some(3500 * MS));
        assert_eq!(end_of_recording(&ev, None), None);
    }
}
