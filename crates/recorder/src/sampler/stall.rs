//! One stall, from the sampling loop's side: its first look and header (begin event, baseline,
//! context), its samples at the sampling rate until it resumes, and its end.
//!
//! Invariant: the first look is taken before anything else (a short stall under CPU contention
//! may be over by the time the maps are read), and a stall that lasts is sampled less and less
//! often down to a floor ([`backoff`]), so an hour costs thousands of samples, not millions. The
//! threads of a process found stopped are read only every tenth of the stall's age, 20 to 250 ms
//! ([`stopped_every`]; the pulse still at the sampling rate): they cannot change until it is
//! continued.

use super::sources::system_sample;
use super::traces::TraceRequest;
use super::{ALIVE_CHECK, MAX_BACKLOG, Until, Watcher, settle};
use crate::dumps::DumpDue;
use crate::pulse::Still;
use crate::to_disk::ToDisk;
use anyhow::Result;
use procwatch::clock::mono_ns;
use procwatch::heartbeat;
use procwatch::task::TaskSample;
use recording::{Event, Sample, StallTrigger, SystemSample};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// What sampling one stall found out.
pub(super) struct Sampled {
    /// The last time the heartbeat was seen not to have moved: it resumed after that.
    pub(super) unchanged_at: u64,
    pub(super) exited: bool,
    /// Threads seen blocked in the kernel outside a system call, or in D: whose faults matter.
    pub(super) blocked: HashSet<i32>,
    /// Samples the writer had dropped before this stall (a disk that did not keep up).
    pub(super) dropped_before: u64,
    /// How the last look found the stall.
    pub(super) still: Still,
}

/// The least wait between reads of the threads of a process found stopped (every one in `T` or
/// `t`) during its stall: nothing in them changes until it is continued, which the pulse sees at
/// the full rate. A frozen JVM of 200 threads cost 20% of a core read at 500 Hz.
pub const STOPPED_EVERY_NS: u64 = 20_000_000;
/// The most: a stop that lasts is looked at four times a second.
pub const STOPPED_MAX_NS: u64 = 250_000_000;

/// How long to wait before looking again at a process seen stopped `age_ns` into its stall, at
/// least `floor_ns`: a tenth of what the stall lasted so far, between `floor_ns` and
/// [`STOPPED_MAX_NS`], so that a change (a thread let go, another stopper) is seen within a tenth
/// of the stop's age. Measured on a 200-thread JVM frozen 5 s under `run`: the loop's reads of
/// its threads every 20 ms and `who`'s looks every 50 ms were 20% and 26% of the sidecar's perf
/// samples.
pub(super) fn stopped_every(age_ns: u64, floor_ns: u64) -> u64 {
    (age_ns / 10).clamp(floor_ns, STOPPED_MAX_NS.max(floor_ns))
}

/// The longest the loop waits between looks at a stall in which nothing moves (every thread left
/// unread at the last look, each still since its last read by the kernel's events, and none
/// waiting for a CPU; or every one stopped): each such look doubles the wait from the sampling
/// interval up to this. Only where
/// the stall's end is stamped by the target itself (the meter's tick, the safepoint's end probe),
/// so that looking later places nothing later; the first thread that runs or is woken brings the
/// next look back to the full rate.
pub const QUIET_MAX_NS: u64 = 20_000_000;

/// The wait before the next look of a stall after `quiet` looks in a row at which nothing moved.
pub(super) fn stretched(interval_ns: u64, quiet: u32) -> u64 {
    if quiet == 0 {
        return interval_ns;
    }
    interval_ns.saturating_mul(1 << quiet.min(16)).min(QUIET_MAX_NS.max(interval_ns))
}

/// How long a stall is sampled at the full rate before [`backoff`] slows down.
pub const FULL_RATE_NS: u64 = 2_000_000_000;
/// The same for `watch` with BPF: the kernel's events give every wait of the stalled JVM's
/// threads to the µs, and its probes the safepoint's end, so after its first 10 ms (its first
/// look and the five after it, which see how it began) a stall's threads are read every 10 ms.
/// Measured (`bench/watch_overhead.sh`, 30 idle JVMs and one whose safepoints wait on a loop
/// for 20 to 40 ms every 300 ms): reading its threads at 500 Hz took more than the other 30
/// JVMs and the loop together; 200 ms at the full rate left nearly every stall at it.
pub const WATCH_BPF_FULL_RATE_NS: u64 = 10_000_000;

/// How far apart samples of a stall are once it has lasted `age_ns`: the full rate for its first
/// `full_ns` (2 s, [`FULL_RATE_NS`]), then 10 ms until 10 s, 100 ms until a minute, then once a
/// second, the floor. A stall that lasts an hour costs about 6,000 samples, not 1.8 million
/// (docs/formats/recording.md).
pub fn backoff(base_ns: u64, age_ns: u64, full_ns: u64) -> u64 {
    const S: u64 = 1_000_000_000;
    let stage = match age_ns {
        a if a < full_ns => base_ns,
        a if a < 10 * S => 10_000_000,
        a if a < 60 * S => 100_000_000,
        _ => S,
    };
    stage.max(base_ns)
}

/// When the next sample is due: a fixed rate on absolute deadlines. When behind (a slow /proc
/// read, a system sample), sample again at once until caught up, so the rate holds; when far
/// behind (the sidecar itself was descheduled), start afresh rather than burst.
pub(super) fn next_sample_due(prev_due: u64, t: u64, interval_ns: u64) -> u64 {
    let base = if prev_due == 0 || t > prev_due + MAX_BACKLOG * interval_ns { t } else { prev_due };
    base + interval_ns
}

/// Threads whose sample differs from the previous one (what a delta sample lists).
pub(super) fn changed(prev: &HashMap<i32, TaskSample>, now: &[TaskSample]) -> Vec<TaskSample> {
    now.iter().filter(|t| prev.get(&t.tid) != Some(*t)).cloned().collect()
}

impl Watcher<'_> {
    /// The heartbeat went stale: the first look (before anything else, since a short stall
    /// under CPU contention may be over by the time the maps are read, and this sample is often
    /// the only evidence), then the stall's header: its begin event, baseline and context.
    /// `None` when the target was already gone: it exited, it did not stall.
    pub(super) fn begin_stall(
        &mut self,
        st: &crate::pulse::Stall,
        now: u64,
        cur: &mut Vec<TaskSample>,
    ) -> Result<Option<u64>> {
        self.stall += 1;
        let stall = self.stall;
        self.roll_asked = None;
        if let Some(k) = &self.kwaits {
            k.begin(stall);
        }
        if let Some(w) = &self.who {
            w.begin(stall);
        }
        self.control.open_window();
        let t_first = mono_ns();
        self.reads_from = self.sampler.reads;
        // A thread started since the last baseline must be in the first look: it is often the
        // one the stall is about (measured: a reader thread started 100 ms before its fault was
        // missing from the first 48 samples). Listing the task directory costs tens of µs.
        if self.sampler.rescan().is_err() || self.sampler.sample(cur).is_err() {
            return Ok(None);
        }
        self.w.events.line(&Event::StallBegin {
            t: now,
            stall,
            last_tick_ns: st.last_ok,
            expected_ns: st.since,
            by: st.by,
        })?;
        self.held_look("the first look", t_first, 0, stall)?;
        let from = mono_ns();
        if !self.idle.threads.is_empty() {
            self.w.samples.line(&Sample {
                t: self.idle.system.t,
                stall,
                full: true,
                baseline: true,
                threads: crate::to_disk::all(self.idle.threads.clone()),
                gone: vec![],
            })?;
        }
        self.w.system.line(&SystemSample { stall, ..self.idle.system.clone() })?;
        let mut java_threads = self
            .threads_file
            .as_ref()
            .and_then(|f| heartbeat::read_threads(f).ok())
            .unwrap_or_default();
        let host = procwatch::ns::host_tids(self.pid);
        for j in java_threads.iter_mut() {
            j.tid = procwatch::ns::host_tid(&host, j.tid);
        }
        // The maps are read off this thread (the read can wait behind the stall's own faults).
        // A read just finished is written first, so this stall's can go out.
        self.write_context()?;
        if let Some(c) = self.contexts.ask(stall, java_threads) {
            self.w.context.line(&c)?;
        }
        self.held("the stall's header", from, stall)?;
        Ok(Some(t_first))
    }

    /// Samples every thread at the sampling rate (the machine every `system_interval_ns`) until
    /// the heartbeat moves, the meter stops, watching ends or the target exits.
    pub(super) fn sample_stall(
        &mut self,
        st: &crate::pulse::Stall,
        now: u64,
        t_first: u64,
        cur: &mut Vec<TaskSample>,
        until: &mut Until,
    ) -> Result<Sampled> {
        let stall = self.stall;
        let mut prev: HashMap<i32, TaskSample> = HashMap::new();
        let mut out = Sampled {
            unchanged_at: now,
            exited: false,
            blocked: HashSet::new(),
            dropped_before: self.w.samples.dropped(),
            still: Still::Stalled,
        };
        let mut first_taken = Some(t_first);
        let mut next_due = 0u64;
        let mut first = true;
        let mut last_system = 0u64;
        // The dump asked in this stall so far.
        let mut asked = DumpDue::None;
        // When every thread was last read, and whether all were stopped then.
        let mut threads_at = 0u64;
        let mut all_stopped = false;
        let mut told_storage = false;
        // Looks in a row at which nothing moved, where the stall's end is stamped (see stretched).
        let stamped = matches!(st.by, StallTrigger::Heartbeat | StallTrigger::SafepointProbe);
        let mut quiet = 0u32;
        loop {
            // No thread read at this look (each was still since its last read, see
            // TaskSampler::set_still) and none came or went: nothing changed since the last.
            let reads_before = (self.sampler.reads.read, self.sampler.reads.on_cpu);
            let t = match first_taken.take() {
                Some(t) => t,
                None => {
                    let t = mono_ns();
                    // Every thread of a stopped process stays as it is until it is continued,
                    // which the pulse sees (one read of its `stat`): its threads are read again
                    // only every `stopped_every`, the pulse at the full rate.
                    let every = stopped_every(t.saturating_sub(now), STOPPED_EVERY_NS);
                    if all_stopped && t < threads_at + every {
                        let interval = backoff(
                            self.opts.sample_interval_ns,
                            t.saturating_sub(now),
                            self.opts.full_rate_ns,
                        );
                        if self.look_at_pulse(st, &mut out, until)? {
                            return Ok(out);
                        }
                        if stamped {
                            quiet += 1;
                        }
                        next_due = next_sample_due(next_due, t, stretched(interval, quiet));
                        if mono_ns() < next_due {
                            self.control.sleep_until(next_due);
                        }
                        continue;
                    }
                    // Between the first and last looks, a thread on a CPU without a break since
                    // its last read is carried on, not read (the kernel's events say so): what
                    // its fault and mode counters did is left to the last look.
                    self.sampler.carry_on_cpu = true;
                    let sampled = self.sampler.sample(cur);
                    self.sampler.carry_on_cpu = false;
                    if sampled.is_err() {
                        out.exited = true;
                        return Ok(out);
                    }
                    t
                }
            };
            threads_at = t;
            all_stopped = !cur.is_empty() && cur.iter().all(|c| matches!(c.state, 'T' | 't'));
            // A thread waiting uninterruptibly: who took storage is worth counting (who.rs).
            if !told_storage && cur.iter().any(|c| c.state == 'D') {
                told_storage = true;
                if let Some(w) = &self.who {
                    w.storage(stall);
                }
            }
            out.blocked.extend(
                cur.iter()
                    .filter(|c| {
                        c.state == 'D'
                            || matches!(c.syscall, procwatch::task::Syscall::NotInSyscall { .. })
                    })
                    .map(|c| c.tid),
            );
            let unread = !first
                && (self.sampler.reads.read, self.sampler.reads.on_cpu) == reads_before
                && cur.len() == prev.len()
                && cur.iter().all(|c| prev.contains_key(&c.tid));
            let (threads, gone) = if unread {
                (vec![], vec![])
            } else {
                let now_tids: HashSet<i32> = cur.iter().map(|c| c.tid).collect();
                let gone = prev.keys().filter(|k| !now_tids.contains(k)).copied().collect();
                (if first { cur.clone() } else { changed(&prev, cur) }, gone)
            };
            self.w.samples.line(&Sample {
                t,
                stall,
                full: first,
                baseline: false,
                threads: crate::to_disk::all(threads),
                gone,
            })?;
            first = false;
            if !unread {
                prev = cur.iter().map(|s| (s.tid, s.clone())).collect();
            }
            let interval = backoff(
                self.opts.sample_interval_ns,
                t.saturating_sub(now),
                self.opts.full_rate_ns,
            );
            let mut system_ns = 0;
            // The machine's counters, a quarter as often while nothing moves: what the doctor
            // reads of them is their change over the stall, which its first and last looks
            // bracket (a look at /proc/interrupts alone is ~100 µs here).
            let system_every =
                self.opts.system_interval_ns.max(interval) * if quiet > 0 { 4 } else { 1 };
            if t - last_system >= system_every {
                last_system = t;
                let from = mono_ns();
                self.w.system.line(&system_sample(t, stall, false, &self.sources))?;
                system_ns = mono_ns() - from;
            }
            if t != t_first {
                self.held_look("a look", t, system_ns, stall)?;
            }
            self.write_context()?;
            let lasted = t.saturating_sub(st.last_ok);
            let due = DumpDue::after(lasted);
            if due > asked {
                // The threads are looked over only where dumps are taken (not in the lab or
                // `watch`). Marked asked only once the ask is queued: behind a dump still under
                // way, a long stall's ask is tried again at the next look, not lost.
                if self
                    .code
                    .dumper
                    .as_ref()
                    .is_some_and(|d| crate::dumps::worth_a_dump(cur) && d.ask(stall, lasted))
                {
                    asked = due;
                }
            }
            if let Some(s) = self.code.signaller.as_mut() {
                s.look(cur, t, stall);
            }
            if let Some(o) = self.code.outside.as_mut() {
                o.look(cur, t, stall);
            }
            if self.look_at_pulse(st, &mut out, until)? {
                return Ok(out);
            }
            // Nothing moved, and nobody waits for a CPU: a thread preempted (R) is as still as
            // a parked one to the kernel's events, but a stall of threads waiting for CPUs is
            // starvation under way, sampled at the full rate.
            let idle = unread && cur.iter().all(|c| c.state != 'R');
            quiet = if stamped && (idle || all_stopped) { quiet + 1 } else { 0 };
            next_due = next_sample_due(next_due, t, stretched(interval, quiet));
            if mono_ns() < next_due {
                self.control.sleep_until(next_due);
            }
        }
    }

    /// Looks at the pulse: true when the stall is over (or watching should end), `out` then
    /// saying how.
    fn look_at_pulse(
        &mut self,
        st: &crate::pulse::Stall,
        out: &mut Sampled,
        until: &mut Until,
    ) -> Result<bool> {
        let looked = mono_ns();
        let mut counted = Vec::new();
        out.still = self.pulse.still(st, looked, &mut |l| counted.push(l.clone()));
        for l in counted {
            self.w.counters.line(&l.to_disk())?;
        }
        if out.still != Still::Stalled || (until.stop.load(Ordering::SeqCst) && !self.roll_waits())
        {
            return Ok(true);
        }
        out.unchanged_at = looked;
        self.now_hook(Some(self.stall));
        if until.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(true);
        }
        if self.last_alive_check.elapsed() > ALIVE_CHECK {
            self.last_alive_check = Instant::now();
            if !(until.alive)() {
                out.exited = true;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the stop asked is a roll that waits for the stall under way to end: a roll is
    /// told from watch's end by `Driven::roll`, set with `stop` for a roll alone. The wait is
    /// timed from the first look that saw it (reset as each stall begins).
    fn roll_waits(&mut self) -> bool {
        self.driven.as_ref().and_then(|d| d.roll.as_ref()).is_some_and(|r| r.load(Ordering::SeqCst))
            && self.roll_asked.get_or_insert_with(Instant::now).elapsed() < super::ROLL_WAIT
    }

    /// The last look, at the moment of resumption; tracepoint evidence; the stall's end event.
    /// True when the target exited.
    pub(super) fn end_stall(
        &mut self,
        st: &crate::pulse::Stall,
        sampled: Sampled,
        cur: &mut Vec<TaskSample>,
    ) -> Result<bool> {
        let stall = self.stall;
        let t = mono_ns();
        if self.sampler.sample(cur).is_ok() && !cur.is_empty() {
            self.w.samples.line(&Sample {
                t,
                stall,
                full: true,
                baseline: false,
                threads: crate::to_disk::all(cur.clone()),
                gone: vec![],
            })?;
        }
        let from = mono_ns();
        self.w.system.line(&system_sample(t, stall, false, &self.sources))?;
        self.held_look("the last look", t, mono_ns() - from, stall)?;
        let (resumed, ticked) = self.pulse.resumed_at(st, sampled.still, sampled.unchanged_at, t);
        self.boost.restore();
        if let Some(tr) = &self.traces {
            // The fault or lock wait behind a stall began before it was noticed: look back.
            tr.request(TraceRequest {
                stall,
                from: st.last_ok.saturating_sub(30_000_000_000),
                to: t,
                blocked: sampled.blocked.clone(),
                lock_from: st.last_ok.saturating_sub(1_000_000_000),
            });
        }
        if let Some(k) = &self.kwaits {
            k.request(super::kwaits::KwaitsRequest { stall, from: st.last_ok, to: t });
        }
        if let Some(w) = &self.who {
            w.end(stall);
        }
        let dropped_samples = self.w.samples.dropped() - sampled.dropped_before;
        let reads = self.sampler.reads;
        let thread_reads = Some(recording::ThreadReads {
            read: reads.read - self.reads_from.read,
            still: reads.still - self.reads_from.still,
            on_cpu: reads.on_cpu - self.reads_from.on_cpu,
        });
        let (control_max_late_ns, queued) = self.control.take_window();
        let exiting = self.pulse.exiting();
        self.w.events.line(&Event::StallEnd {
            t,
            stall,
            resumed_ns: resumed,
            control_max_late_ns,
            control_queued_ns: Some(queued),
            resumed: ticked,
            dropped_samples,
            exiting,
            thread_reads,
        })?;
        if let Some(d) = &mut self.driven {
            // The stall's lines, and its kernel waits (asked for above, written once its
            // threads came back): `watch` diagnoses it from both.
            let mut written = self.w.barrier();
            if let Some(k) = &self.kwaits {
                written = written.also(k.barrier());
            }
            (d.ended)(stall, written);
        }
        let mut exited = sampled.exited;
        if !ticked && exiting {
            if let Some(hb) = &self.pulse.hb {
                settle(hb);
            }
            exited = true;
        }
        self.control.take_outside();
        Ok(exited)
    }
}
