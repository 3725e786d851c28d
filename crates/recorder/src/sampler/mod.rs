//! The sampling loop: look at the target's pulse (the agent's heartbeat, or the JVM's own perf
//! counters and `/proc`, see pulse.rs); when it shows a stall, sample every thread of the
//! target at the sampling rate (and the machine less often) until it resumes; write it all to
//! the recording.
//!
//! Invariant: the target is only read (never signalled or traced), and nothing here can stop
//! it: if the recorder dies, the target runs on. Idle, the loop wakes once per threshold: it
//! sleeps until the moment the pulse would first count as a stall (the heartbeat's next tick
//! plus the threshold), so a stall is noticed the instant it crosses the threshold and not a
//! poll period later. Samples are taken only
//! during stalls (plus one baseline a second, kept in memory). One thread does it all; its own
//! wake-up lateness is the control meter (see control.rs).

mod context;
mod kwaits;
mod sources;
mod stall;
mod start;
pub use stall::{FULL_RATE_NS, WATCH_BPF_FULL_RATE_NS};
mod traces;
mod who;

pub use sources::{Sources, shares};

use crate::to_disk::ToDisk;
use context::ContextReader;
use kwaits::KwaitsWriter;
use sources::{system_sample, totals};
use traces::TraceWriter;
use who::WhoWriter;

use super::control::{Control, Woken};
use super::pulse::{Check, Over, Pulse};
use anyhow::Result;
use procwatch::clock::mono_ns;
use procwatch::heartbeat::{self, Heartbeat, Liveness, MeterState};
use procwatch::task::{TaskSample, TaskSampler};
use recording::{Event, SystemSample, Writer, files};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct SamplerOptions {
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    /// How often machine-wide counters are read during a stall.
    pub system_interval_ns: u64,
    /// How long a stall is sampled every `sample_interval_ns` before sampling slows down
    /// ([`stall::backoff`]).
    pub full_rate_ns: u64,
    /// `--boost`: raise the target's threads once the heartbeat is this stale.
    pub boost: Option<(super::boost::BoostLevel, u64)>,
}

/// Watching driven by `stallscope watch`'s one heartbeat loop (fleet/beats.rs) instead of by
/// this watcher's own sleeps: between stalls the watcher blocks until the loop wakes it (the
/// heartbeat went stale, or watching should end), or until its next baseline look is due. So
/// many idle JVMs cost one loop's wake-ups, not one per JVM per threshold.
pub struct Driven {
    /// A message here: look now, or sample the stall the loop saw begin.
    pub wake: std::sync::mpsc::Receiver<Wake>,
    /// Set by the loop when it wakes this watcher for a stale heartbeat (it then leaves the
    /// heartbeat alone); cleared here once the stall is over, or was none.
    pub busy: std::sync::Arc<AtomicBool>,
    /// How often between stalls the baseline look (every thread, and the machine) is taken.
    pub idle_sample: Duration,
    /// Told each stall's number once its end is written, with a barrier for the recording's
    /// lines so far and the stall's kernel waits (the diagnosis waits on it, never the
    /// watcher).
    pub ended: Box<dyn FnMut(u32, recording::Barrier) + Send>,
    /// The JVM's safepoint probes, as the loop reads them: the stalls they found are followed
    /// to their ends with them.
    pub probes: Option<std::sync::Arc<offcpu::SafepointSlot>>,
    /// Set with `stop` when the recording is rolled (`watch --retain`, or escalated): a stall
    /// under way then is followed to its end, for [`ROLL_WAIT`] at most, before watching ends.
    /// Cut at the roll, it would be two events: its first part here, and the rest in the next
    /// recording, whose loop finds the safepoint still open.
    pub roll: Option<std::sync::Arc<AtomicBool>>,
}

/// What the driving loop wakes a watcher for.
#[derive(Debug, Clone)]
pub enum Wake {
    /// Look at the heartbeat (it went stale), or whether watching should end.
    Look,
    /// The loop saw this stall begin (from the JVM's counters or /proc): sample it. With the
    /// loop's looks at the counters since the last safepoint ended, for the recording.
    Stall(super::pulse::Stall, Vec<procwatch::jvmcounters::CounterLook>),
}

/// Why watching ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    TargetExited,
    Stopped(String),
}

/// Waits for the agent of `pid` to publish a running heartbeat.
pub fn wait_for_heartbeat(
    pid: i32,
    timeout: Duration,
    alive: &mut dyn FnMut() -> bool,
    stop: &AtomicBool,
) -> Result<Option<Heartbeat>> {
    let t0 = Instant::now();
    loop {
        // Re-resolved each time: where it is depends on where the agent managed to create it.
        let path = heartbeat::default_path(pid);
        if let Ok(hb) = Heartbeat::open(&path)
            && hb.read().state == MeterState::Running
        {
            return Ok(Some(hb.of_pid(pid)));
        }
        if !alive() || stop.load(Ordering::Relaxed) {
            return Ok(None);
        }
        if t0.elapsed() > timeout {
            anyhow::bail!(
                "pid {pid}: the stallscope agent published no heartbeat at {} within {} s (was it started with a delay, or did it fail to load? see the JVM's stderr)",
                heartbeat::default_path(pid).display(),
                timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Once the agent has published its final state, it finishes its logs and then removes the
/// heartbeat file: wait (briefly) for that, so the recording's `.hlog` is complete.
fn settle(hb: &Heartbeat) {
    let t0 = Instant::now();
    while hb.path.exists() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where the loop stands between stalls.
struct Idle {
    /// The newest idle sample of every thread: the next stall's baseline.
    threads: Vec<TaskSample>,
    system: SystemSample,
    last: Instant,
}

/// The sampling loop's state: what it reads, writes and remembers between looks.
struct Watcher<'a> {
    w: &'a mut Writer,
    pid: i32,
    pulse: Pulse,
    /// Reads tracepoint evidence off the sampling loop, which must not miss the next stall while
    /// the ring buffer is formatted.
    traces: Option<TraceWriter>,
    /// Reads each stall's kernel waits (BPF) off the sampling loop.
    kwaits: Option<KwaitsWriter>,
    /// Reads each stall's maps off the sampling loop: the read takes the target's mmap_lock.
    contexts: ContextReader,
    /// Looks for who set each stall off, off the sampling loop.
    who: Option<WhoWriter>,
    opts: SamplerOptions,
    sampler: TaskSampler,
    control: Control,
    sources: Sources,
    /// The agent's table of Java thread names, when the agent is in.
    threads_file: Option<std::path::PathBuf>,
    boost: super::boost::Boost,
    stall: u32,
    /// The sampler's reads as the stall under way began.
    reads_from: procwatch::task::Reads,
    idle: Idle,
    last_alive_check: Instant,
    /// A step of the loop taking longer than this is written down as the recorder held.
    held_after_ns: u64,
    driven: Option<Driven>,
    /// What is asked of the JVM for the culprits' code during a stall.
    code: CodeAsks,
    hooks: Hooks,
    started: Instant,
    /// A stall the driving loop saw begin, to sample next, and its looks since the last
    /// safepoint ended.
    handed: Option<(super::pulse::Stall, Vec<procwatch::jvmcounters::CounterLook>)>,
    /// The BPF watchdog (`run`, `attach` with the agent in, as root): it wakes the loop when the
    /// agent's meter stops sleeping once per tick, so that between stalls the loop sleeps its
    /// longest step instead of waking once per threshold. Armed once the meter is known.
    watchdog: Option<Watchdog>,
    /// The BPF recorder, until the JVM's safepoint probes are attached through it (once the
    /// meter runs).
    probe_reader: Option<offcpu::Reader>,
    /// `--for`'s end.
    deadline: Option<Instant>,
    /// When a roll was first seen asked during the stall under way ([`Driven::roll`]).
    roll_asked: Option<Instant>,
}

struct Watchdog {
    alarm: offcpu::Alarm,
    reader: offcpu::Reader,
    /// The meter is watched.
    armed: bool,
    /// After an alarm that found the heartbeat fresh (it came early), and just after arming:
    /// until then the loop looks once per threshold again, as without the watchdog
    /// (CLOCK_MONOTONIC ns; 0: none).
    look_until: u64,
}

/// What else the loop is told or tells while it watches.
#[derive(Default)]
pub struct Hooks {
    /// The agent's heartbeat, once `attach` got the agent in: it drives the loop from then on.
    pub heartbeat: Option<std::sync::mpsc::Receiver<Joined>>,
    /// Set while the target runs between safepoints (not stalled, not stopped): when `attach`
    /// may ask it for something.
    pub askable: Option<std::sync::Arc<AtomicBool>>,
    /// Called once, [`NOW_AFTER`] into watching (or once the stall then under way has been
    /// sampled that long), with a barrier for what was written so far: `attach` diagnoses the
    /// recording up to then and says what is happening now.
    pub now: Option<Box<dyn FnOnce(Now) + Send>>,
}

/// What the attach protocol hands the sampling loop once the agent runs in the JVM.
pub struct Joined {
    pub hb: Heartbeat,
    /// Thread dumps during long stalls, when the JVM's flight recorder is recording stacks.
    pub dumper: Option<super::dumps::Dumper>,
}

/// What `Hooks::now` is handed.
pub struct Now {
    /// When it was taken, on the recording's clock.
    pub t: u64,
    /// The stall under way then, if one is.
    pub stall: Option<u32>,
    pub written: recording::Barrier,
}

/// How long into watching `attach` says what is happening now.
pub const NOW_AFTER: Duration = Duration::from_millis(700);

/// What the sampling loop asks of the JVM for the culprits' code during a stall: a thread dump in
/// a long one (record/dumps.rs), or the stacks of the threads worth one, after every look
/// (record/stacks.rs).
#[derive(Default)]
pub struct CodeAsks {
    pub dumper: Option<super::dumps::Dumper>,
    pub signaller: Option<super::stacks::Signaller>,
    /// Stacks read from outside the JVM (a JVM nothing was loaded into).
    pub outside: Option<super::outside::Outside>,
}

/// Never sleep so little that the loop spins, nor so long that Ctrl-C, --for, the target's
/// exit (or, for `watch`'s one loop, a JVM joining) go unnoticed.
pub const MIN_SLEEP_NS: u64 = 250_000;
pub const MAX_SLEEP_NS: u64 = 50_000_000;
/// With the BPF watchdog to wake it for a stall, the loop's longest sleep between stalls: what
/// Ctrl-C, --for and the target's exit may wait (and the control meter's step between stalls).
const WATCHDOG_SLEEP_NS: u64 = 250_000_000;
/// The longest a driven watcher waits for its loop before it looks for itself whether watching
/// should end (the target gone).
const DRIVEN_MAX_WAIT: Duration = Duration::from_secs(1);
/// The longest a roll waits for the stall under way to end ([`Driven::roll`]).
pub const ROLL_WAIT: Duration = Duration::from_secs(10);
/// How often the loop checks that the target is still there.
const ALIVE_CHECK: Duration = Duration::from_millis(100);
/// How often, between stalls, the baseline sample and the system timeline are taken.
const IDLE_SAMPLE: Duration = Duration::from_secs(1);
/// When sampling falls this many intervals behind, it starts afresh rather than burst.
const MAX_BACKLOG: u64 = 5;
/// A step of the loop (one look at every thread, the maps, a system sample) that takes this many
/// sampling intervals (or a whole threshold) is written down: the recorder saw nothing meanwhile.
const HELD_INTERVALS: u64 = 10;

impl<'a> Watcher<'a> {
    /// A look at the pulse, writing down the counters when they changed.
    fn check(&mut self, now: u64) -> Result<Check> {
        let mut looked = Vec::new();
        let c = self.pulse.check(now, self.opts.threshold_ns, &mut |l| looked.push(l.clone()));
        for l in looked {
            self.w.counters.line(&l.to_disk())?;
        }
        if let Some(a) = &self.hooks.askable {
            a.store(matches!(c, Check::Quiet { .. }), Ordering::Relaxed);
        }
        Ok(c)
    }

    /// Between stalls: the agent's heartbeat handed over by `attach`, and the moment to say what
    /// is happening now.
    fn between_stalls(&mut self) -> Result<()> {
        self.write_context()?;
        self.contexts.refresh();
        if let Some(rx) = &self.hooks.heartbeat
            && let Ok(j) = rx.try_recv()
        {
            self.pulse.take_heartbeat(j.hb);
            if j.dumper.is_some() {
                self.code.dumper = j.dumper;
            }
            self.hooks.heartbeat = None;
            self.meter_running()?;
        }
        self.now_hook(None);
        Ok(())
    }

    /// Writes a stall's context once its maps are read.
    fn write_context(&mut self) -> Result<()> {
        if let Some(c) = self.contexts.poll() {
            self.w.context.line(&c)?;
        }
        Ok(())
    }

    fn now_hook(&mut self, stall: Option<u32>) {
        if self.started.elapsed() >= NOW_AFTER
            && let Some(f) = self.hooks.now.take()
        {
            f(Now { t: mono_ns(), stall, written: self.w.barrier() });
        }
    }

    /// Writes the step begun at `from` down as the recorder held when it took too long: a stall
    /// the recorder did not look at must not read as one in which nothing happened.
    fn held(&mut self, step: &str, from: u64, stall: u32) -> Result<()> {
        let took = mono_ns().saturating_sub(from);
        if took > self.held_after_ns {
            self.w.events.line(&Event::RecorderHeld {
                t: from,
                stall,
                held_ns: took,
                step: step.into(),
            })?;
        }
        Ok(())
    }

    /// A look at the threads (and the machine, in `system_ns`) begun at `from`, written down as
    /// held as [`Self::held`] does, naming what took longest: one thread's `/proc` file, or the
    /// machine's counters.
    fn held_look(&mut self, step: &str, from: u64, system_ns: u64, stall: u32) -> Result<()> {
        if mono_ns().saturating_sub(from) <= self.held_after_ns {
            return Ok(());
        }
        let slowest = self.sampler.slowest.filter(|s| s.ns >= system_ns);
        let what = match slowest {
            Some(s) => {
                let file = match s.tid {
                    Some(tid) => format!("/proc/{}/task/{tid}/{}", self.pid, s.file),
                    None => format!("/proc/{}/task (listed, new threads' files opened)", self.pid),
                };
                format!("{step}: its slowest read, {file}, took {}", recording::units::fmt_ns(s.ns))
            }
            None if system_ns > 0 => {
                format!(
                    "{step}: the machine's counters took {}",
                    recording::units::fmt_ns(system_ns)
                )
            }
            None => step.to_string(),
        };
        self.held(&what, from, stall)
    }

    /// Whether watching should end now, and why: Ctrl-C, --for, or the target gone.
    fn ending(&mut self, until: &mut Until) -> Option<Ending> {
        if until.stop.load(Ordering::Relaxed) {
            return Some(Ending::Stopped("interrupted".into()));
        }
        if until.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Ending::Stopped("--for elapsed".into()));
        }
        if self.last_alive_check.elapsed() > ALIVE_CHECK {
            self.last_alive_check = Instant::now();
            if !(until.alive)()
                || self.pulse.hb.as_ref().is_some_and(|h| h.liveness() != Liveness::Alive)
            {
                return Some(Ending::TargetExited);
            }
        }
        None
    }

    /// `--boost`: raises the target's threads once the heartbeat is stale enough, restores them
    /// once it moves again.
    fn apply_boost(&mut self, now: u64, expected: u64) -> Result<()> {
        let Some((level, after)) = self.opts.boost else { return Ok(()) };
        if now >= expected + after {
            if !self.boost.active() {
                self.boost.raise(self.pid, level);
                self.w.events.line(&Event::Boost {
                    t: mono_ns(),
                    raised: self.boost.active(),
                    refused: self.boost.refused,
                })?;
            }
        } else if self.boost.active() {
            self.boost.restore();
        }
        Ok(())
    }

    /// Between stalls: keep a fresh baseline and the once-a-second timeline, report the control
    /// meter's own hiccups, and sleep until the heartbeat would first be stale (or a boost is
    /// due). `Some` when the target is gone.
    fn idle_tick(&mut self, now: u64, expected: u64, due: u64) -> Result<Option<Ending>> {
        let idle_sample = self.driven.as_ref().map_or(IDLE_SAMPLE, |d| d.idle_sample);
        if self.idle.last.elapsed() > idle_sample {
            self.idle.last = Instant::now();
            let from = mono_ns();
            // Threads come and go: the list is refreshed with every baseline.
            if self.sampler.rescan().is_err()
                || self.sampler.sample(&mut self.idle.threads).is_err()
            {
                return Ok(Some(Ending::TargetExited));
            }
            self.idle.system = system_sample(mono_ns(), 0, true, &self.sources);
            self.w.system.line(&SystemSample {
                jvm: Some(totals(&self.idle.threads)),
                ..self.idle.system.clone()
            })?;
            self.held("the baseline look", from, 0)?;
            if self.driven.is_some() {
                // The heartbeat loop's own sleeps are the control meter between stalls.
                return Ok(None);
            }
            let late = self.control.take_outside();
            if late > self.opts.threshold_ns {
                self.w.events.line(&Event::ControlHiccup { t: mono_ns(), late_ns: late })?;
            }
        }
        if let Some(d) = &self.driven {
            d.busy.store(false, Ordering::Release);
            // The loop may have found the heartbeat stale while it was still marked busy, and so
            // left it alone: look once more before waiting.
            if self.pulse.stale_at(self.opts.threshold_ns).is_some_and(|at| mono_ns() >= at) {
                return Ok(None);
            }
            // Driven from outside, the loop also says when the JVM is gone: wait for it, or the
            // next baseline look.
            let longest = if self.pulse.hb.is_none() { idle_sample } else { DRIVEN_MAX_WAIT };
            let wait = idle_sample
                .saturating_sub(self.idle.last.elapsed())
                .clamp(Duration::from_millis(1), longest);
            match d.wake.recv_timeout(wait) {
                Ok(Wake::Stall(st, looks)) => self.handed = Some((st, looks)),
                // No loop drives it (it could not map the heartbeat): it looks for itself, once
                // a second at most.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(wait.min(Duration::from_secs(1)))
                }
                _ => {}
            }
            return Ok(None);
        }
        let mut due = due;
        if let Some((_, after)) = self.opts.boost {
            due = if self.boost.active() {
                now + (after / 2).max(MIN_SLEEP_NS)
            } else {
                due.min(expected + after)
            };
        }
        let t = mono_ns();
        let deadline = due.clamp(t + MIN_SLEEP_NS, t + MAX_SLEEP_NS);
        match self.watchdog.as_mut() {
            Some(d) if d.armed && t >= d.look_until => {
                // The watchdog says when the heartbeat goes stale: sleep until the next
                // baseline look or the end of --for, at most WATCHDOG_SLEEP_NS.
                let baseline =
                    t + IDLE_SAMPLE.saturating_sub(self.idle.last.elapsed()).as_nanos() as u64;
                let mut until = (t + WATCHDOG_SLEEP_NS).min(baseline);
                if let Some(end) = self.deadline {
                    until = until
                        .min(t + end.saturating_duration_since(Instant::now()).as_nanos() as u64);
                }
                let alarm = &d.alarm;
                let pulse = &self.pulse;
                let stale_by = self.opts.threshold_ns;
                let mut stale_at = due;
                let woke = self.control.sleep_or_wake(until.max(t + MIN_SLEEP_NS), |at| {
                    match alarm.wait_until(at) {
                        offcpu::Woke::Deadline => Some(at),
                        // Due when the heartbeat went stale (as it is now, not as it was before
                        // the sleep): the wake-up's lateness, for the control meter (a stall's
                        // window opens with it).
                        offcpu::Woke::Alarm => {
                            let now = mono_ns();
                            stale_at = pulse.stale_at(stale_by).unwrap_or(stale_at);
                            Some(stale_at.min(now))
                        }
                        offcpu::Woke::Early => None,
                    }
                });
                if woke == Woken::Alarm && mono_ns() < stale_at {
                    // Early: the heartbeat is fresh yet. Look as without the watchdog for a
                    // tick and a threshold.
                    d.look_until = stale_at + self.pulse.resolution_ns + self.opts.threshold_ns;
                }
            }
            _ => self.control.sleep_until(deadline),
        }
        Ok(None)
    }
}

/// What to sample, and how.
pub struct Target<'a> {
    pub pid: i32,
    pub pulse: Pulse,
    pub tracer: Option<&'a procwatch::trace::Tracer>,
    /// The BPF off-CPU recorder, when it runs: each stall's kernel waits are read from it.
    pub offcpu: Option<offcpu::Reader>,
    pub opts: SamplerOptions,
    /// Watching ends then (`--for`).
    pub deadline: Option<Instant>,
    pub driven: Option<Driven>,
    pub code: CodeAsks,
    pub hooks: Hooks,
}

/// What ends watching: Ctrl-C (`stop`), `--for` (the deadline), or the target gone (`alive`
/// says no).
struct Until<'s> {
    stop: &'s AtomicBool,
    deadline: Option<Instant>,
    alive: &'s mut dyn FnMut() -> bool,
}

/// Watches until the target exits, `stop` is set, or the deadline passes.
pub fn run(
    w: &mut Writer,
    what: Target,
    stop: &AtomicBool,
    alive: &mut dyn FnMut() -> bool,
) -> Result<Ending> {
    let mut until = Until { stop, deadline: what.deadline, alive };
    let mut wt = Watcher::new(w, what)?;
    let end = wt.until_end(&mut until)?;
    // The last stall's maps, if still being read: a little patience, then without them.
    if let Some(c) = wt.contexts.poll().or_else(|| wt.contexts.finish(Duration::from_secs(2))) {
        wt.w.context.line(&c)?;
    }
    if let Some(l) = wt.pulse.counters.as_ref().and_then(|c| c.last()) {
        // The last look closes the last window the doctor reads.
        let l = l.clone();
        wt.w.counters.line(&l.to_disk())?;
    }
    if let (Ending::TargetExited, false, Some(hb)) = (&end, (until.alive)(), &wt.pulse.hb) {
        // A JVM that died without its shutdown hooks (SIGKILL, the OOM killer, a crash) leaves
        // its heartbeat files behind: nobody else will remove them.
        let _ = std::fs::remove_file(procwatch::heartbeat::threads_path(&hb.path));
        let _ = std::fs::remove_file(&hb.path);
    }
    Ok(end)
}

impl Watcher<'_> {
    /// The sampling loop: idle ticks between stalls, each stall begun, sampled and ended.
    fn until_end(&mut self, until: &mut Until) -> Result<Ending> {
        let mut cur = Vec::new();
        loop {
            if let Some(end) = self.ending(until) {
                return Ok(end);
            }
            self.between_stalls()?;
            let now = mono_ns();
            let checked = match self.handed.take() {
                Some((st, looks)) => {
                    // The loop's looks first (the first of them after a gap in this file), then
                    // this watcher's from there on.
                    for (i, l) in looks.iter().enumerate() {
                        self.w.counters.line(&recording::disk::CounterLook {
                            gap: i == 0,
                            ..l.clone().to_disk()
                        })?;
                    }
                    let mut looked = Vec::new();
                    self.pulse.adopt(&st, now, looks.last(), &mut |l| looked.push(l.clone()));
                    for l in looked {
                        self.w.counters.line(&l.to_disk())?;
                    }
                    Check::Stalled(st)
                }
                // Driven by `watch`'s loop from outside: the loop sees the stalls (a look here,
                // rarely made, would place them poorly).
                None if self.driven.is_some() && self.pulse.hb.is_none() => {
                    Check::Quiet { expected: now, due: now + self.opts.threshold_ns }
                }
                None => self.check(now)?,
            };
            let st = match checked {
                Check::Over(o) => {
                    if let Some(hb) = &self.pulse.hb {
                        settle(hb);
                    }
                    return Ok(match o {
                        Over::Exited => Ending::TargetExited,
                        Over::MeterStopped => {
                            Ending::Stopped("the agent's meter was stopped".into())
                        }
                    });
                }
                Check::Quiet { expected, due } => {
                    self.apply_boost(now, expected)?;
                    if let Some(end) = self.idle_tick(now, expected, due)? {
                        return Ok(end);
                    }
                    continue;
                }
                Check::Stalled(st) => st,
            };
            self.apply_boost(now, st.since)?;
            let Some(t_first) = self.begin_stall(&st, now, &mut cur)? else {
                return Ok(Ending::TargetExited);
            };
            let sampled = self.sample_stall(&st, now, t_first, &mut cur, until);
            if let Some(d) = &self.code.dumper {
                d.over();
            }
            if let Some(o) = self.code.outside.as_mut() {
                o.over();
            }
            let sampled = sampled?;
            if self.end_stall(&st, sampled, &mut cur)? {
                return Ok(Ending::TargetExited);
            }
            // A stall the probes ended leaves the watchdog's timer unset until the meter next
            // sleeps: look once per threshold until its heartbeat would show it held.
            if let Some(d) = self.watchdog.as_mut() {
                d.look_until = d
                    .look_until
                    .max(mono_ns() + self.pulse.resolution_ns + 2 * self.opts.threshold_ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sources::data_file;
    use super::stall::{backoff, changed, next_sample_due};
    use super::*;
    use procwatch::heartbeat::HeartbeatWriter;
    use recording::{Meta, Sample, StallContext, read_lines};
    use std::collections::HashMap;

    const MS: u64 = 1_000_000;

    fn opts() -> SamplerOptions {
        SamplerOptions {
            threshold_ns: 5 * MS,
            sample_interval_ns: 2 * MS,
            system_interval_ns: 50 * MS,
            full_rate_ns: FULL_RATE_NS,
            boost: None,
        }
    }

    /// Watching this process's heartbeat `hb`, with nothing else.
    fn of_heartbeat(hb: &Heartbeat, deadline: Option<Instant>) -> Target<'static> {
        let pid = std::process::id() as i32;
        let hb = Heartbeat::open(&hb.path).unwrap();
        Target {
            pid,
            pulse: Pulse::heartbeat(pid, hb, None),
            tracer: None,
            offcpu: None,
            opts: opts(),
            deadline,
            driven: None,
            code: CodeAsks::default(),
            hooks: Hooks::default(),
        }
    }

    fn recording(name: &str) -> (std::path::PathBuf, Writer) {
        let dir =
            std::env::temp_dir().join(format!("stallscope-watch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let meta = Meta {
            format: None,
            stallscope_version: "test".into(),
            mode: "run".into(),
            command: vec![],
            pid: std::process::id() as i32,
            java_home: None,
            java_version: None,
            kernel: String::new(),
            cpus: 2,
            root: false,
            tracepoints: false,
            bpf: false,
            not_a_jvm: false,
            privileges_note: None,
            start_mono_ns: mono_ns(),
            start_epoch_ms: 0,
            utc_offset_min: 0,
            clock_ticks: 100,
            threshold_ns: 5 * MS,
            sample_interval_ns: 2 * MS,
            safepoint_timeout_ms: None,
            cgroups: None,
            recorder_shares: None,
            pod: None,
        };
        let w = Writer::open(&dir, &meta).unwrap();
        (dir, w)
    }

    /// One heartbeat per process (its file is named by the pid): the tests that publish one take
    /// turns.
    fn one_heartbeat() -> std::sync::MutexGuard<'static, ()> {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes this process's heartbeat from a thread named `ticker`: `before` ticks of 1 ms,
    /// then silence for `pause`, then `after` ticks, then the meter's exit.
    fn ticker(
        before: u32,
        pause: Duration,
        after: u32,
    ) -> (std::thread::JoinHandle<()>, Heartbeat) {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::Builder::new()
            .name("ticker".into())
            .spawn(move || {
                let mut hb = HeartbeatWriter::create(MS).unwrap();
                tx.send(hb.path.clone()).unwrap();
                for i in 0..before + after {
                    if i == before {
                        std::thread::sleep(pause);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    hb.tick();
                }
            })
            .unwrap();
        let path = rx.recv().unwrap();
        (h, Heartbeat::open(&path).unwrap())
    }

    #[test]
    fn watching_a_heartbeat_that_pauses_records_one_stall_and_ends_with_it() {
        let _one = one_heartbeat();
        // A heartbeat that goes silent for 80 ms, then ticks again and exits.
        let (dir, mut w) = recording("pause");
        let (h, hb) = ticker(150, Duration::from_millis(80), 150);
        let stop = AtomicBool::new(false);
        let ending = run(&mut w, of_heartbeat(&hb, None), &stop, &mut || true).unwrap();
        h.join().unwrap();
        assert_eq!(ending, Ending::TargetExited, "the meter's exit ends watching");
        let events: Vec<Event> = read_lines(&dir.join(files::EVENTS)).unwrap();
        let begins: Vec<(u32, u64)> = events
            .iter()
            .filter_map(|e| {
                if let Event::StallBegin { stall, expected_ns, .. } = e {
                    Some((*stall, *expected_ns))
                } else {
                    None
                }
            })
            .collect();
        let ends: Vec<(u32, u64)> = events
            .iter()
            .filter_map(|e| {
                if let Event::StallEnd { stall, resumed_ns, .. } = e {
                    Some((*stall, *resumed_ns))
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(begins.len(), ends.len(), "every stall that began ended: {events:?}");
        // Scheduling noise may add short stalls; the pause is among them, whole.
        let long: Vec<u32> = begins
            .iter()
            .zip(&ends)
            .filter(|(b, e)| e.1.saturating_sub(b.1) >= 80 * MS)
            .map(|(b, _)| b.0)
            .collect();
        assert_eq!(long.len(), 1, "{begins:?} {ends:?}");
        let samples: Vec<Sample> = read_lines(&dir.join(files::SAMPLES)).unwrap();
        let of_pause: Vec<&Sample> =
            samples.iter().filter(|s| s.stall == long[0] && !s.baseline).collect();
        assert!(
            of_pause.len() >= 3 && of_pause[0].full && of_pause.last().unwrap().full,
            "a full first and last look, deltas between: {}",
            of_pause.len()
        );
        let seen_asleep =
            of_pause.iter().flat_map(|s| &s.threads).any(|t| t.comm == "ticker" && t.state == 'S');
        assert!(seen_asleep, "the silent thread was sampled asleep");
        let contexts: Vec<StallContext> = read_lines(&dir.join(files::CONTEXT)).unwrap();
        assert!(
            contexts.iter().any(|c| c.stall == long[0] && !c.maps.is_empty()),
            "the stall's context holds the maps"
        );
        assert!(events.iter().any(
            |e| matches!(e, Event::MeterRunning { resolution_ns, .. } if *resolution_ns == MS)
        ));
        drop(w);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn watching_ends_at_the_deadline_or_when_interrupted() {
        let _one = one_heartbeat();
        let (dir, mut w) = recording("ends");
        let (h, hb) = ticker(400, Duration::ZERO, 0);
        let stop = AtomicBool::new(false);
        let deadline = Some(Instant::now() + Duration::from_millis(50));
        assert_eq!(
            run(&mut w, of_heartbeat(&hb, deadline), &stop, &mut || true).unwrap(),
            Ending::Stopped("--for elapsed".into())
        );
        stop.store(true, Ordering::Relaxed);
        // A recording is watched once: its files are created new (O_EXCL).
        let (dir2, mut w2) = recording("ends-again");
        assert_eq!(
            run(&mut w2, of_heartbeat(&hb, None), &stop, &mut || true).unwrap(),
            Ending::Stopped("interrupted".into())
        );
        h.join().unwrap();
        drop(w);
        drop(w2);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&dir2).unwrap();
    }

    #[test]
    fn a_long_stall_is_sampled_less_and_less_often_down_to_a_floor() {
        const S: u64 = 1_000_000_000;
        let full = FULL_RATE_NS;
        assert_eq!(backoff(2 * MS, 0, full), 2 * MS, "the first two seconds at full rate");
        assert_eq!(backoff(2 * MS, 1999 * MS, full), 2 * MS);
        assert_eq!(backoff(2 * MS, 3 * S, full), 10 * MS);
        assert_eq!(backoff(2 * MS, 30 * S, full), 100 * MS);
        assert_eq!(backoff(2 * MS, 3600 * S, full), S, "the floor: once a second");
        assert_eq!(backoff(50 * MS, 3 * S, full), 50 * MS, "never faster than asked");
        // `watch` with BPF: the full rate for 10 ms only.
        let w = WATCH_BPF_FULL_RATE_NS;
        assert_eq!(backoff(2 * MS, 9 * MS, w), 2 * MS);
        assert_eq!(backoff(2 * MS, 10 * MS, w), 10 * MS);
        // How many samples an hour-long stall takes, as the docs say.
        let (mut t, mut n) = (0u64, 0u64);
        while t < 3600 * S {
            t += backoff(2 * MS, t, full);
            n += 1;
        }
        assert!((5_000..7_000).contains(&n), "{n} samples");
    }

    #[test]
    fn a_stall_in_which_nothing_moves_is_looked_at_less_and_less_often_down_to_a_floor() {
        use super::stall::{QUIET_MAX_NS, stretched};
        assert_eq!(stretched(2 * MS, 0), 2 * MS, "something moved: the sampling interval");
        assert_eq!(stretched(2 * MS, 1), 4 * MS);
        assert_eq!(stretched(2 * MS, 3), 16 * MS);
        assert_eq!(stretched(2 * MS, 4), QUIET_MAX_NS);
        assert_eq!(stretched(2 * MS, 1000), QUIET_MAX_NS, "no overflow");
        assert_eq!(stretched(100 * MS, 3), 100 * MS, "never faster than the backoff's interval");
    }

    #[test]
    fn sampling_keeps_its_rate_and_starts_afresh_when_far_behind() {
        assert_eq!(next_sample_due(0, 1000, 10), 1010, "the first sample sets the pace");
        assert_eq!(next_sample_due(1010, 1013, 10), 1020, "on time: the next deadline");
        assert_eq!(next_sample_due(1020, 1045, 10), 1030, "a little behind: catch up at once");
        assert_eq!(next_sample_due(1020, 1100, 10), 1110, "far behind: start afresh, no burst");
    }

    fn task(tid: i32, state: char) -> TaskSample {
        TaskSample { tid, comm: "t".into(), state, ..Default::default() }
    }

    #[test]
    fn a_delta_sample_lists_only_threads_that_changed() {
        let prev: HashMap<i32, TaskSample> =
            [(1, task(1, 'S')), (2, task(2, 'R'))].into_iter().collect();
        let now = vec![task(1, 'S'), task(2, 'D'), task(3, 'R')];
        let tids: Vec<i32> = changed(&prev, &now).iter().map(|t| t.tid).collect();
        assert_eq!(tids, [2, 3]);
    }

    #[test]
    fn data_files_leave_out_code_the_jdk_and_the_jvms_own() {
        let m = procwatch::maps::parse(
            "7f00-7f10 r--s 00000000 fe:00 11 /data/test.dat\n7f10-7f20 r-xp 00000000 fe:00 12 /usr/lib/jvm/x/lib/libjvm.so\n7f20-7f30 r--p 00000000 fe:00 13 /usr/lib/jvm/x/lib/modules\n7f30-7f40 rw-s 00000000 00:1a 14 /dev/shm/stallscope-1.heartbeat\n7f40-7f50 rw-s 00000000 00:1a 15 /tmp/hsperfdata_root/42\n7f50-7f60 rw-s 00000000 fe:00 16 /data/state.dat\n",
        );
        let kept: Vec<&str> = m.iter().filter(|x| data_file(x)).map(|x| x.path.as_str()).collect();
        assert_eq!(kept, ["/data/test.dat", "/data/state.dat"]);
    }
}
