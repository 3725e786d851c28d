//! `run --boost-on safepoint`: seed 003's mitigation where the seed put it, at the safepoint's
//! begin. The seed raised the process's priority inside `SafepointSynchronize::begin` and put it
//! back when the operation ended. From outside, the earliest sign of a begin is the JVM's perf
//! counters: `sun.rt.safepoints` is counted as `begin` starts, before the safepoint is armed
//! (`SafepointTracing::begin`, `runtimeService.cpp`). A thread of ours looks at them every
//! `--boost-poll` ([`POLL_NS`]) and raises the target's threads when a safepoint is open, restores them once it
//! is over, and writes down how long after the begin the boost was in place.
//!
//! Invariant: the booster is never held by the target. It reads only the mapped counters (no
//! system call, no lock of the target's), runs `SCHED_FIFO` when allowed, so that the CPU
//! contention it is there to beat does not delay it too, and sleeps between looks, so it takes
//! a small, measured share of a CPU. Every thread is put back exactly (`Boost`, with its
//! guardian: a booster killed outright leaves no thread raised).

use super::boost::{Boost, BoostLevel};
use super::pulse::{CounterWatch, VmThread};
use procwatch::clock::mono_ns;
use procwatch::jvmcounters::{JvmCounters, SafepointState};
use recording::Event;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the counters are looked at by default (`--boost-poll`): every 0.2 ms, so that a
/// boost is in place well before a safepoint starved of CPU (milliseconds) is reached.
pub const POLL_NS: u64 = 200_000;
/// The longest one boost lasts. A safepoint the counters show open for longer is put back at
/// normal priority until the next one begins: should the counters be misread (a safepoint taken
/// as open after it ended), threads raised to `SCHED_FIFO` that never block would keep everything
/// else, the thread that asks for the next safepoint too, off their CPUs. Lab runs found busy
/// threads left raised for up to 14.6 s so, before a safepoint that began and ended between two
/// looks was read as over (`Tracker::update`), then for this cap (200 ms at first) in 1 in 200
/// safepoints. Past this the safepoint's threads are stopped anyway: the boost is for reaching it.
const MAX_BOOST_NS: u64 = 50_000_000;
/// How often, between safepoints, the threads to raise are read again (threads come and go).
const REPLAN_NS: u64 = 100_000_000;
/// How many looks between checks that the JVM is exiting (a system call each).
const EXIT_CHECK_LOOKS: u32 = 256;
/// A boost this long is checked at every look for the JVM exiting.
const EXIT_CHECK_AFTER_NS: u64 = 5_000_000;
/// The most boosts kept for the recording (a safepoint every millisecond for three minutes).
const MAX_EVENTS: usize = 200_000;
/// How long to wait for the JVM's perf-counter file to appear.
const COUNTERS_WAIT: Duration = Duration::from_secs(30);

/// What the booster did.
#[derive(Debug, Default)]
struct Boosted {
    events: Vec<Event>,
    /// Boosts not kept (over [`MAX_EVENTS`]).
    dropped: u64,
    /// Why it did not boost at all, if it did not (no perf counters, no guardian).
    failed: Option<String>,
    /// The booster thread's own CPU time, and for how long it ran.
    cpu_ns: u64,
    ran_ns: u64,
    /// It ran `SCHED_FIFO` (else at the default policy).
    realtime: bool,
}

/// The booster thread, running until [`SafepointBooster::finish`], or until dropped (a recording
/// ended by an error): then it is told to stop, and puts every thread back as it does.
pub struct SafepointBooster {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Boosted>>,
}

impl Drop for SafepointBooster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl SafepointBooster {
    /// Starts boosting `pid`'s threads to `level` for each of its safepoints.
    pub fn start(pid: i32, level: BoostLevel, poll_ns: u64) -> std::io::Result<SafepointBooster> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("stallscope-boost".into())
            .spawn(move || run(pid, level, poll_ns.max(10_000), &s))?;
        Ok(SafepointBooster { stop, handle: Some(handle) })
    }

    /// Stops it (every thread put back) and returns what it did, as the recording's events: one
    /// per boost, then the booster's own account.
    pub fn finish(mut self) -> Vec<Event> {
        self.stop.store(true, Ordering::Relaxed);
        let joined = self.handle.take().map(|h| h.join());
        let mut b = match joined {
            Some(Ok(b)) => b,
            _ => {
                Boosted { failed: Some("the booster thread panicked".into()), ..Boosted::default() }
            }
        };
        b.events.push(Event::SafepointBooster {
            t: mono_ns(),
            cpu_ns: b.cpu_ns,
            ran_ns: b.ran_ns,
            realtime: b.realtime,
            dropped: b.dropped,
            failed: b.failed,
        });
        b.events
    }
}

/// One boost under way: the safepoint's begin as placed, when it was seen and raised.
struct Open {
    begun: u64,
    within: u64,
    seen: u64,
    applied: u64,
    threads: u32,
    refused: u32,
    /// Put back after [`MAX_BOOST_NS`], the safepoint still open.
    capped: bool,
}

fn run(pid: i32, level: BoostLevel, poll_ns: u64, stop: &AtomicBool) -> Boosted {
    let mut out = Boosted::default();
    let t0 = Instant::now();
    // The guardian first: a process started from a real-time thread would inherit its policy.
    let mut boost = match Boost::guarded() {
        Ok(b) => b,
        Err(e) => {
            out.failed = Some(format!("no guardian for the boost: {e:#}"));
            return out;
        }
    };
    out.realtime = make_realtime(level);
    let cpu0 = thread_cpu_ns();
    // The first error says why (the process may be gone by the last).
    let mut first_error = None;
    let counters = loop {
        match JvmCounters::of_pid(pid) {
            Ok(c) => break c,
            Err(e) => {
                let why = first_error.get_or_insert_with(|| e.to_string());
                if t0.elapsed() > COUNTERS_WAIT || stop.load(Ordering::Relaxed) {
                    out.failed = Some(format!(
                        "{why}; --boost-on safepoint needs them (-XX:+UsePerfData, the default); \
                         try --boost-on heartbeat"
                    ));
                    return out;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    let mut cw = CounterWatch::new(pid, counters);
    let mut vm_thread = VmThread::new(pid);
    let mut open: Option<Open> = None;
    // The count of safepoints begun when a boost was cut short: none is raised again until it moves.
    let mut capped_at: Option<u64> = None;
    let mut next = mono_ns();
    boost.prepare(pid);
    let mut prepared = mono_ns();
    let mut looks = 0u32;
    while !stop.load(Ordering::Relaxed) {
        looks = looks.wrapping_add(1);
        // A JVM exits inside a safepoint that never ends: while one is boosted for long, look
        // at every look whether it is exiting, else now and then.
        let long = open.as_ref().is_some_and(|o| mono_ns() > o.applied + EXIT_CHECK_AFTER_NS);
        if (long || looks.is_multiple_of(EXIT_CHECK_LOOKS)) && cw.jc.exiting() {
            break;
        }
        next += poll_ns;
        let now = mono_ns();
        if next < now {
            next = now + poll_ns;
        }
        sleep_until(next);
        let t = mono_ns();
        cw.look(t, &mut vm_thread);
        let begun = cw.jc.quick().0;
        if capped_at.is_some_and(|c| c != begun) {
            capped_at = None;
        }
        match cw.state {
            SafepointState::Open { since, .. } if open.is_none() && capped_at.is_none() => {
                let refused = boost.refused;
                boost.raise(pid, level);
                open = Some(Open {
                    begun: since.0,
                    within: cw
                        .placed_within_ns()
                        .filter(|_| since.0 == since.1)
                        .unwrap_or(since.1.saturating_sub(since.0)),
                    seen: t,
                    applied: mono_ns(),
                    threads: boost.raised() as u32,
                    refused: (boost.refused - refused) as u32,
                    capped: false,
                });
            }
            SafepointState::Open { .. } | SafepointState::Unsure { .. } => {
                if let Some(o) = open.as_mut()
                    && t > o.applied + MAX_BOOST_NS
                {
                    o.capped = true;
                    capped_at = Some(begun);
                    boost.restore();
                    if let Some(o) = open.take() {
                        keep(&mut out, o, mono_ns());
                    }
                }
            }
            SafepointState::Closed => {
                if let Some(o) = open.take() {
                    boost.restore();
                    keep(&mut out, o, mono_ns());
                    boost.prepare(pid);
                    prepared = mono_ns();
                } else if t > prepared + REPLAN_NS {
                    boost.prepare(pid);
                    prepared = mono_ns();
                }
            }
        }
    }
    if let Some(o) = open.take() {
        boost.restore();
        keep(&mut out, o, mono_ns());
    }
    out.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    out.ran_ns = t0.elapsed().as_nanos() as u64;
    out
}

fn keep(out: &mut Boosted, o: Open, restored: u64) {
    if out.events.len() >= MAX_EVENTS {
        out.dropped += 1;
        return;
    }
    out.events.push(Event::SafepointBoost {
        t: o.applied,
        begun: o.begun,
        begun_within_ns: o.within,
        seen: o.seen,
        restored,
        threads: o.threads,
        refused: o.refused,
        capped: o.capped,
    });
}

/// Runs this thread `SCHED_FIFO`, one above a real-time boost (so it can always preempt the
/// threads it raised to put them back: at the same priority it would queue behind them), else at
/// nice -10; says whether it is real-time. Both need CAP_SYS_NICE; without it the
/// thread stays as it was (and the boost itself will be refused).
fn make_realtime(level: BoostLevel) -> bool {
    let prio = match level {
        BoostLevel::Fifo(p) => (p + 1).min(99),
        BoostLevel::Nice(_) => 1,
    };
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: sets this thread's own policy; an error is returned, nothing else changes.
    let ok = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    if !ok {
        // SAFETY: as in the sampling loop: this thread's own nice value; EPERM leaves it.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
    }
    ok
}

fn sleep_until(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: an absolute sleep on CLOCK_MONOTONIC with a valid timespec; EINTR just returns.
    unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    };
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter of the right type.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
