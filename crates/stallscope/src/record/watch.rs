//! The watch loop: poll the agent's heartbeat; when it goes stale, sample every thread of the
//! target at the sampling rate (and the machine less often) until it resumes; write it all to
//! the recording.
//!
//! Invariant: the target is only read (never signalled or traced), and nothing here can stop
//! it: if the recorder dies, the target runs on. Idle, the loop wakes once per threshold: it
//! sleeps until the moment the heartbeat would first count as stale, so a stall is noticed
//! the instant it crosses the threshold and not a poll period later. Samples are taken only
//! during stalls (plus one baseline a second, kept in memory). One thread does it all; its own
//! wake-up lateness is the control meter (see control.rs).

use super::control::Control;
use doctor::recording::{files, Event, JvmTotals, Sample, StallContext, StallTrace, SystemSample, Writer};
use anyhow::Result;
use procwatch::clock::mono_ns;
use procwatch::heartbeat::{self, Heartbeat, Liveness, MeterState};
use procwatch::task::{TaskSample, TaskSampler};
use procwatch::{maps, pagecache, system};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    pub threshold_ns: u64,
    pub sample_interval_ns: u64,
    /// How often machine-wide counters are read during a stall.
    pub system_interval_ns: u64,
    /// `--boost`: raise the target's threads once the heartbeat is this stale.
    pub boost: Option<(super::boost::BoostLevel, u64)>,
}

/// Why watching ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    TargetExited,
    Stopped(String),
}

/// Waits for the agent of `pid` to publish a running heartbeat.
pub fn wait_for_heartbeat(pid: i32, timeout: Duration, alive: &mut dyn FnMut() -> bool, stop: &AtomicBool) -> Result<Option<Heartbeat>> {
    let t0 = Instant::now();
    loop {
        // Re-resolved each time: where it is depends on where the agent managed to create it.
        let path = heartbeat::default_path(pid);
        if let Ok(hb) = Heartbeat::open(&path) {
            if hb.read().state == MeterState::Running {
                return Ok(Some(hb));
            }
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

/// Data files a process maps (not code, not the JDK's own files), with page-cache residency.
fn mapped_data_files(m: &[maps::Mapping]) -> Vec<(String, u64, u64)> {
    let mut seen = Vec::new();
    for x in m.iter().filter(|x| x.is_file() && !x.perms.contains('x')) {
        let p = &x.path;
        if p.ends_with(".so") || p.contains(".so.") || p.ends_with(".jar") || p.ends_with(".jsa") || p.ends_with("/modules") || p.starts_with("/usr/lib/jvm") || p.contains("/hsperfdata_") || p.ends_with(".heartbeat") {
            continue;
        }
        if seen.iter().any(|(s, _, _): &(String, u64, u64)| s == p) || seen.len() >= 16 {
            continue;
        }
        if let Ok(r) = pagecache::residency(Path::new(p)) {
            seen.push((p.clone(), r.resident_pages, r.total_pages));
        }
    }
    seen
}

fn system_sample(t: u64, stall: u32, baseline: bool, cpu_stat: Option<&Path>) -> SystemSample {
    SystemSample {
        t,
        stall,
        baseline,
        tlb: system::read_tlb_shootdowns(),
        cpu: system::read_cpu_times(),
        psi_cpu_us: system::read_psi_some_total_us("cpu"),
        psi_io_us: system::read_psi_some_total_us("io"),
        psi_memory_us: system::read_psi_some_total_us("memory"),
        throttling: cpu_stat.and_then(|p| std::fs::read_to_string(p).ok()).map(|s| system::throttling(&s)),
        jvm: None,
    }
}

fn totals(threads: &[TaskSample]) -> JvmTotals {
    JvmTotals {
        threads: threads.len(),
        exec_ns: threads.iter().map(|t| t.exec_ns).sum(),
        run_delay_ns: threads.iter().map(|t| t.run_delay_ns).sum(),
        majflt: threads.iter().map(|t| t.majflt).sum(),
    }
}

/// Threads whose sample differs from the previous one (what a delta sample lists).
fn changed(prev: &HashMap<i32, TaskSample>, now: &[TaskSample]) -> Vec<TaskSample> {
    now.iter().filter(|t| prev.get(&t.tid) != Some(*t)).cloned().collect()
}

/// The last 64 page faults of each thread seen blocked during the stall (however long ago: a
/// fault can outlast a stall, and a resumed thread faults again), and mmap_lock events since
/// `lock_from`, oldest first.
fn keep_recent(ev: Vec<procwatch::trace::TraceEvent>, blocked: &std::collections::HashSet<i32>, lock_from: u64) -> Vec<procwatch::trace::TraceEvent> {
    use procwatch::trace::TraceEvent;
    let mut faults: HashMap<i32, usize> = HashMap::new();
    let mut kept: Vec<TraceEvent> = ev
        .into_iter()
        .rev()
        .filter(|e| match e {
            TraceEvent::PageFault { tid, .. } => {
                let n = faults.entry(*tid).or_default();
                *n += 1;
                blocked.contains(tid) && *n <= 64
            }
            _ => e.t() >= lock_from,
        })
        .take(10_000)
        .collect();
    kept.reverse();
    kept
}

/// Once the agent has published its final state, it finishes its logs and then removes the
/// heartbeat file: wait (briefly) for that, so the recording's `.hlog` is complete.
fn settle(hb: &Heartbeat) {
    let t0 = Instant::now();
    while hb.path.exists() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Watches until the target exits, `stop` is set, or `deadline` passes.
pub fn watch(
    w: &mut Writer,
    pid: i32,
    hb: &Heartbeat,
    tracer: Option<&procwatch::trace::Tracer>,
    opts: WatchOptions,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    alive: &mut dyn FnMut() -> bool,
) -> Result<Ending> {
    let mut sampler = TaskSampler::new(pid)?;
    // A sidecar starved of CPU sees nothing of the starvation it is there to explain: when
    // allowed (root, CAP_SYS_NICE), this thread runs at nice -10. It sleeps between looks, so
    // it takes no more CPU than before, only gets it sooner.
    // SAFETY: setpriority on this thread's own tid; failure (EPERM) leaves it as it was.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
    let mut control = Control::open(Some(&w.dir.join(files::CONTROL)), w.start_epoch_ms, w.start_mono_ns, 1_000_000_000)?;
    let cpu_stat = system::cpu_stat_path(pid);
    let threads_file = heartbeat::threads_path(&hb.path);
    let beat = hb.read();
    let resolution = beat.resolution_ns.max(1);
    w.events.line(&Event::MeterRunning { t: mono_ns(), resolution_ns: resolution, meter_tid: beat.meter_tid })?;
    // Never sleep so little that the loop spins, nor so long that Ctrl-C, --for or the
    // target's exit go unnoticed.
    const MIN_SLEEP_NS: u64 = 250_000;
    const MAX_SLEEP_NS: u64 = 50_000_000;
    let mut boost = super::boost::Boost::default();
    let mut stall: u32 = 0;
    let mut cur = Vec::new();
    let mut idle: Vec<TaskSample> = Vec::new();
    let mut idle_system = system_sample(mono_ns(), 0, true, cpu_stat.as_deref());
    let mut last_idle = Instant::now() - Duration::from_secs(2);
    let mut last_alive_check = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(Ending::Stopped("interrupted".into()));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Ending::Stopped("--for elapsed".into()));
        }
        if last_alive_check.elapsed() > Duration::from_millis(100) {
            last_alive_check = Instant::now();
            if !alive() || hb.liveness() != Liveness::Alive {
                return Ok(Ending::TargetExited);
            }
        }
        let b = hb.read();
        if matches!(b.state, MeterState::Exited | MeterState::Stopped) {
            settle(hb);
            return Ok(if b.state == MeterState::Exited { Ending::TargetExited } else { Ending::Stopped("the agent's meter was stopped".into()) });
        }
        let now = mono_ns();
        let expected = b.last_tick_ns + resolution;
        if let Some((level, after)) = opts.boost {
            if now >= expected + after {
                if !boost.active() {
                    boost.raise(pid, level);
                    w.events.line(&Event::Boost { t: mono_ns(), raised: boost.active(), refused: boost.refused })?;
                }
            } else if boost.active() {
                boost.restore();
            }
        }
        if now < expected + opts.threshold_ns {
            // Healthy. Keep a fresh baseline, report the control meter's own hiccups.
            if last_idle.elapsed() > Duration::from_secs(1) {
                last_idle = Instant::now();
                if sampler.sample(&mut idle).is_err() {
                    return Ok(Ending::TargetExited);
                }
                idle_system = system_sample(mono_ns(), 0, true, cpu_stat.as_deref());
                // Once a second, outside stalls: the timeline of the machine and the JVM.
                w.system.line(&SystemSample { jvm: Some(totals(&idle)), ..idle_system.clone() })?;
                let late = control.take_outside();
                if late > opts.threshold_ns {
                    w.events.line(&Event::ControlHiccup { t: mono_ns(), late_ns: late })?;
                }
            }
            // Wake when the heartbeat would first be stale (or due a boost), unless it ticks first.
            let mut due = expected + opts.threshold_ns;
            if let Some((_, after)) = opts.boost {
                due = if boost.active() { now + (after / 2).max(MIN_SLEEP_NS) } else { due.min(expected + after) };
            }
            let t = mono_ns();
            control.sleep_until(due.clamp(t + MIN_SLEEP_NS, t + MAX_SLEEP_NS));
            continue;
        }

        // The heartbeat is stale: a stall.
        stall += 1;
        control.open_window();
        // The first look comes before anything else: a short stall under CPU contention may be
        // over by the time the maps are read, and this sample is often the only evidence.
        let t_first = mono_ns();
        if sampler.sample(&mut cur).is_err() {
            // Gone before the first look: it exited, it did not stall.
            return Ok(Ending::TargetExited);
        }
        let mut first_taken = Some(t_first);
        w.events.line(&Event::StallBegin { t: now, stall, last_tick_ns: b.last_tick_ns, expected_ns: expected })?;
        if !idle.is_empty() {
            w.samples.line(&Sample { t: idle_system.t, stall, full: true, baseline: true, threads: idle.clone(), gone: vec![] })?;
        }
        w.system.line(&SystemSample { stall, ..idle_system.clone() })?;
        let java_threads = std::fs::read_to_string(&threads_file).map(|s| heartbeat::parse_threads(&s)).unwrap_or_default();
        let m = maps::read(pid).unwrap_or_default();
        let mapped_files = mapped_data_files(&m);
        let interesting: Vec<_> = m.into_iter().filter(|x| x.perms.contains('x') || x.is_file()).collect();
        w.context.line(&StallContext { t: mono_ns(), stall, java_threads, maps: interesting, mapped_files })?;

        let mut prev: HashMap<i32, TaskSample> = HashMap::new();
        // Threads seen blocked in the kernel outside a system call, or in D: whose faults matter.
        let mut blocked: std::collections::HashSet<i32> = std::collections::HashSet::new();
        let mut next_due = 0u64;
        let mut first = true;
        let mut last_system = 0u64;
        let start_ticks = b.tick_count;
        // The last time the heartbeat was seen not to have moved: it resumed after that.
        let mut unchanged_at = now;
        let mut exited = false;
        loop {
            let t = match first_taken.take() {
                Some(t) => t,
                None => {
                    let t = mono_ns();
                    if sampler.sample(&mut cur).is_err() {
                        exited = true;
                        break;
                    }
                    t
                }
            };
            blocked.extend(cur.iter().filter(|c| c.state == 'D' || matches!(c.syscall, procwatch::task::Syscall::NotInSyscall { .. })).map(|c| c.tid));
            let now_tids: std::collections::HashSet<i32> = cur.iter().map(|c| c.tid).collect();
            let gone: Vec<i32> = prev.keys().filter(|k| !now_tids.contains(k)).copied().collect();
            let threads = if first { cur.clone() } else { changed(&prev, &cur) };
            w.samples.line(&Sample { t, stall, full: first, baseline: false, threads, gone })?;
            first = false;
            prev = cur.iter().map(|s| (s.tid, s.clone())).collect();
            if t - last_system >= opts.system_interval_ns {
                last_system = t;
                w.system.line(&system_sample(t, stall, false, cpu_stat.as_deref()))?;
            }
            let looked = mono_ns();
            let b2 = hb.read();
            if b2.tick_count != start_ticks || matches!(b2.state, MeterState::Exited | MeterState::Stopped) || stop.load(Ordering::Relaxed) {
                break;
            }
            unchanged_at = looked;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if last_alive_check.elapsed() > Duration::from_millis(100) {
                last_alive_check = Instant::now();
                if !alive() {
                    exited = true;
                    break;
                }
            }
            // Fixed rate on absolute deadlines. When behind (a slow /proc read, the once-a-second
            // system sample), sample again at once until caught up, so the rate holds; when far
            // behind (the sidecar itself was descheduled), start afresh rather than burst.
            const MAX_BACKLOG: u64 = 5;
            next_due = if next_due == 0 || t > next_due + MAX_BACKLOG * opts.sample_interval_ns { t } else { next_due } + opts.sample_interval_ns;
            if mono_ns() < next_due {
                control.sleep_until(next_due);
            }
        }
        // The last look, at the moment of resumption.
        let t = mono_ns();
        if sampler.sample(&mut cur).is_ok() && !cur.is_empty() {
            w.samples.line(&Sample { t, stall, full: true, baseline: false, threads: cur.clone(), gone: vec![] })?;
        }
        w.system.line(&system_sample(t, stall, false, cpu_stat.as_deref()))?;
        let b2 = hb.read();
        let ticked = b2.tick_count != start_ticks;
        // A tick's time is read before it is published; a safepoint between the two (the meter
        // is a Java thread) publishes a time from before the stall. The stall cannot have ended
        // before the heartbeat was last seen unmoved.
        let resumed = if ticked { b2.last_tick_ns.max(unchanged_at) } else { t };
        boost.restore();
        if let Some(tr) = tracer {
            // The fault or lock wait behind a stall began before it was noticed: look back.
            if let Ok(ev) = tr.read(&[], b.last_tick_ns.saturating_sub(30_000_000_000), t) {
                w.trace.line(&StallTrace { stall, events: keep_recent(ev, &blocked, b.last_tick_ns.saturating_sub(1_000_000_000)) })?;
            }
        }
        w.events.line(&Event::StallEnd { t, stall, resumed_ns: resumed, control_max_late_ns: control.take_window(), resumed: ticked })?;
        if !ticked && matches!(b2.state, MeterState::Exited) {
            settle(hb);
            exited = true;
        }
        control.take_outside();
        if exited {
            return Ok(Ending::TargetExited);
        }
    }
}
