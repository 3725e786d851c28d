//! The one loop of `stallscope watch`, for every JVM of the host: one timer, whatever the
//! number of JVMs. Each pass looks at every JVM's pulse: its perf counters (a safepoint begun and
//! not ended; a few loads from a shared mapping) and, a few times a second, whether its process
//! is stopped; or, for a JVM the agent was attached to (`--attach`), its heartbeat. A stall is
//! handed to that JVM's watcher (record/watch.rs, driven), which samples it; the loop sleeps
//! until the next look is due. Between stalls it also follows each JVM's safepoints to their
//! end, so every one of them reaches the metrics, not only the stalls.
//!
//! With BPF (root), a JVM whose `libjvm.so` has HotSpot's safepoint probes is not polled: its
//! probes stamp each safepoint's begin and end in a slot of its own, and the BPF watchdog wakes
//! the loop once one has lasted the threshold (`offcpu::Reader::watch_safepoints_of`). Its
//! counters are then looked at only every [`PROBED_LOOK_NS`] (its process's state, and the
//! safepoints for the metrics; safepoints closer together than that reach the histograms as
//! one), and a loop over idle JVMs sleeps instead of waking 1/threshold times a second.
//!
//! Its own wake-up lateness is the control meter between stalls (as in record/control.rs): it is
//! exported as a histogram, so a recorder that was itself held shows in its metrics.
//!
//! Invariant: the loop never does more than read shared memory (and a JVM's `stat`, at most ten
//! times a second) and send wake-ups; the sampling, which can wait on a stalled process's /proc
//! files, happens on the JVM's own watcher thread.

use procwatch::clock::mono_ns;
use procwatch::heartbeat::{Heartbeat, MeterState};
use procwatch::jvmcounters::{CountedSafepoint, CounterLook, JvmCounters};
use recorder::control::sleep_until;
use recorder::pulse::{Check, Pulse};
use recorder::sampler::{Driven, MAX_SLEEP_NS, MIN_SLEEP_NS, Wake};
use recording::Notices;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What one JVM's counters showed since the last pass: its counters' totals, and the safepoints
/// that ended (for the metrics).
pub struct Seen<'a> {
    pub look: &'a CounterLook,
    pub ended: &'a [CountedSafepoint],
}

/// Told what a JVM's counters show, from the loop (it must be quick).
pub type Observer = Box<dyn FnMut(Seen) + Send>;

/// How a watched JVM is looked at.
enum Source {
    /// The agent's heartbeat (`--attach`): the watcher looks at it itself once woken.
    Heartbeat { hb: Heartbeat, resolution_ns: u64 },
    /// Its counters and /proc, from outside.
    Outside {
        pulse: Box<Pulse>,
        /// The looks since the last safepoint ended: what the next ended ones are read from.
        looks: Vec<CounterLook>,
        includes_sync: bool,
        observe: Observer,
        /// Its safepoint probes (BPF), when they find its safepoints.
        probes: Option<Arc<offcpu::SafepointSlot>>,
        /// The safepoint (its begin) last handed to the watcher as a stall.
        handed: u64,
        /// With probes: when its counters are looked at next.
        next_look: u64,
        /// When its watcher joined the loop (its recording began).
        joined: u64,
    },
}

/// One watched JVM.
struct Entry {
    source: Source,
    wake: SyncSender<Wake>,
    busy: Arc<AtomicBool>,
}

/// The loop's shared side: JVMs join it from their watcher threads and leave when their
/// watcher ends (the wake-up channel closes).
#[derive(Clone)]
pub struct Beats {
    entries: Arc<Mutex<Vec<Entry>>>,
    threshold_ns: u64,
    notices: Notices,
}

/// How often a JVM's process state (stopped, or gone) is read: a system call per JVM. A stopped
/// process cannot be timed closer than that anyway (nothing says when it stopped).
const STOPPED_EVERY_NS: u64 = 250_000_000;
/// How often the counters of a JVM whose probes find its safepoints are looked at: for its
/// process's state and its metrics, not for its stalls.
pub const PROBED_LOOK_NS: u64 = 50_000_000;
/// Looks kept while a safepoint goes on (a long one at one look per threshold); past it, the
/// oldest go (its begin is then placed less closely).
const MAX_LOOKS: usize = 4096;

/// What became of a wake-up handed to a watcher.
#[derive(Debug, PartialEq, Eq)]
enum Handed {
    /// The watcher has it, and is busy until it says it is not.
    Sent,
    /// A wake-up is still pending (the queue holds one): this one is left for the next pass.
    Pending,
    /// The watcher has ended.
    Gone,
}

/// Where a watcher's wake-ups go (its channel; a test's stand-in).
trait WakeQueue {
    fn try_send(&self, w: Wake) -> Result<(), TrySendError<Wake>>;
}

impl WakeQueue for SyncSender<Wake> {
    fn try_send(&self, w: Wake) -> Result<(), TrySendError<Wake>> {
        SyncSender::try_send(self, w)
    }
}

/// Hands `wake` to a watcher, marking it busy *before* it can have it: a watcher woken at once
/// (on the other CPU, or preempting this thread) may take a short stall, end it and say it is
/// idle again before this thread runs on; marked busy after that, it would stay busy, and its
/// JVM's stalls go unseen until its next idle look (issue 58's missed dumps: seconds of them
/// after each stall barely over the threshold).
fn hand_over(queue: &impl WakeQueue, busy: &AtomicBool, wake: Wake) -> Handed {
    let was = busy.swap(true, Ordering::AcqRel);
    match queue.try_send(wake) {
        Ok(()) => Handed::Sent,
        Err(e) => {
            // Not handed: as it was. Only ever set back to idle (which the watcher alone says
            // otherwise), so a watcher that said so meanwhile is not overruled.
            if !was {
                busy.store(false, Ordering::Release);
            }
            match e {
                TrySendError::Full(_) => Handed::Pending,
                TrySendError::Disconnected(_) => Handed::Gone,
            }
        }
    }
}

/// The oldest safepoint of `sp` that lasted `threshold` and is over, but was never handed to
/// its watcher: begun after the last one handed (`handed`), and ended after the watcher joined
/// the loop (`joined`: one that ended before is the recording's before a roll, or no
/// recording's). The loop, or the watcher, was held until it had ended (beside two CPU hogs: a
/// watcher held a second on a lock, the loop late by more than the rest of an 11 ms
/// safepoint): still a stall, from its begin to its end as the probes stamped them, its
/// threads' waits from the kernel's events; handed over as soon as the watcher is idle, while
/// the probes still hold it (the last [`offcpu::Safepoints::recent`]).
fn missed_safepoint(
    sp: &offcpu::Safepoints,
    handed: u64,
    joined: u64,
    threshold: u64,
) -> Option<u64> {
    let n = usize::try_from(sp.count).unwrap_or(usize::MAX).min(sp.recent.len());
    sp.recent[..n]
        .iter()
        .filter_map(|&(b, e)| {
            let e = e?;
            (b > handed && e > joined && e >= b + threshold).then_some(b)
        })
        .min()
}

impl Beats {
    pub fn new(threshold_ns: u64, notices: Notices) -> Beats {
        Beats { entries: Arc::new(Mutex::new(Vec::new())), threshold_ns, notices }
    }

    fn driven(
        &self,
        source: Source,
        idle_sample: Duration,
        ended: Box<dyn FnMut(u32, recording::Barrier) + Send>,
        probes: Option<Arc<offcpu::SafepointSlot>>,
    ) -> Driven {
        // A queue of one: a wake-up pending is as good as two.
        let (tx, rx): (SyncSender<Wake>, Receiver<Wake>) = std::sync::mpsc::sync_channel(1);
        let busy = Arc::new(AtomicBool::new(false));
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).push(Entry {
            source,
            wake: tx,
            busy: Arc::clone(&busy),
        });
        Driven { wake: rx, busy, idle_sample, ended, probes, roll: None }
    }

    /// Adds the JVM `pid`'s heartbeat (opened again here: the watcher keeps its own mapping)
    /// and returns what drives its watcher.
    pub fn join(
        &self,
        pid: i32,
        hb: &Heartbeat,
        idle_sample: Duration,
        ended: Box<dyn FnMut(u32, recording::Barrier) + Send>,
    ) -> Driven {
        match Heartbeat::open(&hb.path) {
            Ok(mine) => {
                let resolution_ns = mine.read().resolution_ns.max(1);
                self.driven(
                    Source::Heartbeat { hb: mine.of_pid(pid), resolution_ns },
                    idle_sample,
                    ended,
                    None,
                )
            }
            Err(e) => {
                // The watcher still looks for itself once a second; say why it is slower.
                self.notices.warn(format!(
                    "JVM pid {pid}: cannot map its heartbeat for the sampling loop ({e}); its stalls are noticed up to a second late"
                ));
                let (_, rx) = std::sync::mpsc::sync_channel(1);
                Driven {
                    wake: rx,
                    busy: Arc::new(AtomicBool::new(false)),
                    idle_sample,
                    ended,
                    probes: None,
                    roll: None,
                }
            }
        }
    }

    /// Adds JVM `pid`, watched from outside through its counters (`jc`, this loop's own mapping)
    /// and /proc, and its safepoint probes when it has them (`probes`); `observe` is told what
    /// its counters show.
    pub fn join_outside(
        &self,
        pid: i32,
        jc: Option<JvmCounters>,
        probes: Option<Arc<offcpu::SafepointSlot>>,
        observe: Observer,
        idle_sample: Duration,
        ended: Box<dyn FnMut(u32, recording::Barrier) + Send>,
    ) -> Driven {
        let includes_sync = jc.as_ref().is_some_and(|c| c.info.safepoint_time_includes_sync);
        let pulse = Pulse::counters(pid, jc).stopped_every(STOPPED_EVERY_NS);
        let theirs = probes.clone();
        self.driven(
            Source::Outside {
                pulse: Box::new(pulse),
                looks: Vec::new(),
                includes_sync,
                observe,
                probes,
                handed: 0,
                next_look: 0,
                joined: mono_ns(),
            },
            idle_sample,
            ended,
            theirs,
        )
    }

    /// Wakes every watcher (to see that watching ends).
    pub fn wake_all(&self) {
        for e in self.entries.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = e.wake.try_send(Wake::Look);
        }
    }

    /// One pass: wakes the watchers of stalled JVMs, drops those whose watcher is gone, and
    /// returns when the next look is due.
    fn pass(&self, now: u64) -> u64 {
        let mut due = now + MAX_SLEEP_NS;
        let threshold = self.threshold_ns;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain_mut(|e| {
            // Its watcher ended (the `Driven` holding the other reference is gone).
            if Arc::strong_count(&e.busy) == 1 {
                return false;
            }
            let busy = e.busy.load(Ordering::Acquire);
            // A probe's safepoint handed over with this wake-up, once it is sent.
            let mut hand = None;
            let wake = match &mut e.source {
                Source::Heartbeat { hb, resolution_ns } => {
                    if busy {
                        return true;
                    }
                    let b = hb.read();
                    if matches!(b.state, MeterState::Exited | MeterState::Stopped) {
                        // The watcher sees it too within its wait; nothing to sample.
                        return !matches!(
                            e.wake.try_send(Wake::Look),
                            Err(TrySendError::Disconnected(_))
                        );
                    }
                    let stale_at = b.last_tick_ns + *resolution_ns + threshold;
                    if now < stale_at {
                        due = due.min(stale_at);
                        return true;
                    }
                    Wake::Look
                }
                Source::Outside {
                    pulse,
                    looks,
                    includes_sync,
                    observe,
                    probes,
                    handed,
                    next_look,
                    joined,
                } => {
                    // Its probes, while they read (the BPF recorder may be gone: the counters
                    // alone then, as without BPF).
                    let sp = probes.as_ref().and_then(|p| p.read());
                    if sp.is_none() {
                        *probes = None;
                    }
                    // A safepoint under way as the probes went in has no begin by them.
                    let probes_since = probes.as_ref().map_or(0, |p| p.since());
                    let open = sp.and_then(|s| s.open_since).filter(|b| *b != *handed);
                    let probe_due = open.map_or(u64::MAX, |b| b + threshold);
                    let missed = sp.and_then(|s| missed_safepoint(&s, *handed, *joined, threshold));
                    if missed.is_none() && sp.is_some() && now < probe_due && now < *next_look {
                        due = due.min(probe_due).min(*next_look);
                        return true;
                    }
                    let mut changed = None;
                    let c = pulse.check(now, threshold, &mut |l| changed = Some(l.clone()));
                    if let Some(l) = changed {
                        if looks.len() >= MAX_LOOKS {
                            looks.remove(0);
                        }
                        looks.push(l);
                        let closed = pulse.counters.as_ref().is_some_and(|c| {
                            c.state == procwatch::jvmcounters::SafepointState::Closed
                        });
                        let ended = if closed && looks.len() >= 2 {
                            procwatch::jvmcounters::safepoints(looks, *includes_sync)
                        } else {
                            Vec::new()
                        };
                        if let Some(last) = looks.last() {
                            observe(Seen { look: last, ended: &ended });
                        }
                        if closed {
                            let last = looks.pop();
                            looks.clear();
                            looks.extend(last);
                        }
                    }
                    let c = if sp.is_some() {
                        // On one grid for every JVM: one wake-up looks at them all.
                        *next_look = (now / PROBED_LOOK_NS + 1) * PROBED_LOOK_NS;
                        // The probes time its safepoints: the counters' guess is no stall, but
                        // for one begun before the probes were in.
                        let guess = |c: &Check| {
                            matches!(c, Check::Stalled(st)
                                if st.by == recording::StallTrigger::Safepoint
                                    && st.since >= probes_since)
                        };
                        // Quiet, or as good as quiet: a stall when the probes say so.
                        let expected = match &c {
                            Check::Quiet { expected, .. } => Some(*expected),
                            c if guess(c) => Some(now),
                            _ => None,
                        };
                        match (expected, missed) {
                            (Some(_), Some(b)) => {
                                Check::Stalled(recorder::pulse::Stall::by_probe(b))
                            }
                            (Some(_), None) if now >= probe_due => Check::Stalled(
                                recorder::pulse::Stall::by_probe(probe_due - threshold),
                            ),
                            (Some(expected), None) => {
                                Check::Quiet { expected, due: probe_due.min(*next_look) }
                            }
                            (None, _) => c,
                        }
                    } else {
                        c
                    };
                    match c {
                        Check::Stalled(st) if !busy => {
                            // The safepoint under way is this stall's, whatever found it (a
                            // process stopped inside one): not handed again as missed.
                            hand = if st.by == recording::StallTrigger::SafepointProbe {
                                Some(st.since)
                            } else {
                                sp.and_then(|s| s.open_since)
                            };
                            // One handed over as missed may leave another, or one under way
                            // and due, whose alarm has rung already: look again soon.
                            if missed.is_some() {
                                due = due.min(now + MIN_SLEEP_NS);
                            }
                            Wake::Stall(st, looks.clone())
                        }
                        // Gone: its watcher ends its recording (it is told, and looks).
                        Check::Over(_) => Wake::Look,
                        Check::Quiet { due: d, .. } => {
                            due = due.min(d);
                            return true;
                        }
                        _ => {
                            due = due.min(now + threshold);
                            return true;
                        }
                    }
                }
            };
            match hand_over(&e.wake, &e.busy, wake) {
                Handed::Sent => {
                    if let (Some(b), Source::Outside { handed, .. }) = (hand, &mut e.source) {
                        *handed = (*handed).max(b);
                    }
                    true
                }
                Handed::Pending => true,
                Handed::Gone => false,
            }
        });
        due
    }

    /// Runs the loop until `stop` is set; every wake-up's lateness goes to `lateness`. With the
    /// BPF watchdog's `alarm`, a safepoint past the threshold wakes it early.
    pub fn run(&self, stop: &AtomicBool, lateness: &dyn Fn(u64), alarm: Option<offcpu::Alarm>) {
        // SAFETY: setpriority on this thread's own tid; failure (EPERM) leaves it as it was.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        while !stop.load(Ordering::Relaxed) {
            let now = mono_ns();
            let due = self.pass(now);
            let t = mono_ns();
            let due = due.clamp(t + MIN_SLEEP_NS, t + MAX_SLEEP_NS);
            match &alarm {
                Some(a) => {
                    if a.wait_until(due) == offcpu::Woke::Deadline {
                        lateness(mono_ns().saturating_sub(due));
                    }
                }
                None => lateness(sleep_until(due)),
            }
        }
        self.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// A watcher on the other CPU (or one that preempts the loop as it is woken): it takes the
    /// wake-up, deals with a stall that is already over and says it is idle again, all before
    /// the loop's thread runs on from its send.
    struct AtOnce<'a> {
        busy: &'a AtomicBool,
        taken: RefCell<u32>,
    }

    impl WakeQueue for AtOnce<'_> {
        fn try_send(&self, _: Wake) -> Result<(), TrySendError<Wake>> {
            assert!(self.busy.load(Ordering::Acquire), "handed over before it was marked busy");
            *self.taken.borrow_mut() += 1;
            self.busy.store(false, Ordering::Release);
            Ok(())
        }
    }

    /// The probes' record of the last safepoints, newest first: (begin, end) in ms.
    fn recorded(open: Option<u64>, recent: &[(u64, Option<u64>)]) -> offcpu::Safepoints {
        let ms = 1_000_000;
        let mut sp = offcpu::Safepoints {
            open_since: open.map(|b| b * ms),
            count: recent.len() as u64,
            recent: Default::default(),
        };
        for (slot, (b, e)) in sp.recent.iter_mut().zip(recent) {
            *slot = (b * ms, e.map(|e| e * ms));
        }
        sp
    }

    #[test]
    fn a_safepoint_over_before_the_loop_looked_is_still_handed_over_once() {
        let ms = 1_000_000;
        let threshold = 5 * ms;
        // 100-111 ms, never handed: the oldest such, before 300-320; 200-203 is too short; the
        // one under way (400) is the loop's as usual.
        let sp = recorded(
            Some(400),
            &[(400, None), (300, Some(320)), (200, Some(203)), (100, Some(111))],
        );
        assert_eq!(missed_safepoint(&sp, 0, 0, threshold), Some(100 * ms));
        // Handed (as it began, or as missed): the next.
        assert_eq!(missed_safepoint(&sp, 100 * ms, 0, threshold), Some(300 * ms));
        assert_eq!(missed_safepoint(&sp, 300 * ms, 0, threshold), None);
        // Ended before its watcher joined (a roll's recording before): not this one's.
        assert_eq!(missed_safepoint(&sp, 0, 150 * ms, threshold), Some(300 * ms));
        assert_eq!(missed_safepoint(&sp, 0, 320 * ms, threshold), None);
        // A ring not yet full: its empty slots are nothing.
        assert_eq!(missed_safepoint(&recorded(None, &[]), 0, 0, threshold), None);
    }

    #[test]
    fn a_watcher_done_before_the_loop_runs_on_is_not_left_busy() {
        let busy = AtomicBool::new(false);
        let q = AtOnce { busy: &busy, taken: RefCell::new(0) };
        assert_eq!(hand_over(&q, &busy, Wake::Look), Handed::Sent);
        // Still idle: the next stall of its JVM is handed over too.
        assert!(!busy.load(Ordering::Acquire));
        assert_eq!(hand_over(&q, &busy, Wake::Look), Handed::Sent);
        assert_eq!(*q.taken.borrow(), 2);
    }

    #[test]
    fn a_wake_up_not_taken_leaves_the_watcher_as_it_was() {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let busy = AtomicBool::new(false);
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Sent);
        assert!(busy.load(Ordering::Acquire));
        // The watcher took it, and said it was idle before its next wait: one pending now.
        assert!(rx.try_recv().is_ok());
        busy.store(false, Ordering::Release);
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Sent);
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Pending);
        assert!(busy.load(Ordering::Acquire), "the pending one keeps it busy");
        // Busy mid-stall, and the queue full: left busy.
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Pending);
        assert!(busy.load(Ordering::Acquire));
        // Idle, and the queue full: left idle.
        busy.store(false, Ordering::Release);
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Pending);
        assert!(!busy.load(Ordering::Acquire));
        drop(rx);
        assert_eq!(hand_over(&tx, &busy, Wake::Look), Handed::Gone);
        assert!(!busy.load(Ordering::Acquire));
    }
}
