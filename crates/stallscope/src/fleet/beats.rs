//! The one heartbeat loop of `stallscope watch`: it holds every watched JVM's heartbeat, sleeps
//! until the earliest moment one of them could first count as stale, and wakes that JVM's
//! watcher (record/watch.rs, driven) to sample the stall. Idle, it costs one wake-up per
//! threshold whatever the number of JVMs, each reading a few words of shared memory per JVM.
//!
//! Its own wake-up lateness is the control meter between stalls (as in record/control.rs): it is
//! exported as a histogram, so a recorder that was itself held shows in its metrics.
//!
//! Invariant: the loop never does more than read heartbeats and send wake-ups; the sampling,
//! which can wait on a stalled process's /proc files, happens on the JVM's own watcher thread.

use crate::record::control::sleep_until;
use crate::record::watch::Driven;
use procwatch::clock::mono_ns;
use procwatch::heartbeat::{Heartbeat, MeterState};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One watched heartbeat.
struct Entry {
    hb: Heartbeat,
    resolution_ns: u64,
    wake: SyncSender<()>,
    busy: Arc<AtomicBool>,
}

/// The loop's shared side: JVMs join it from their watcher threads and leave when their
/// watcher ends (the wake-up channel closes).
#[derive(Clone)]
pub struct Beats {
    entries: Arc<Mutex<Vec<Entry>>>,
    threshold_ns: u64,
}

/// Never sleep so little that the loop spins, nor so long that a JVM joining is not looked at.
const MIN_SLEEP_NS: u64 = 250_000;
const MAX_SLEEP_NS: u64 = 50_000_000;

impl Beats {
    pub fn new(threshold_ns: u64) -> Beats {
        Beats { entries: Arc::new(Mutex::new(Vec::new())), threshold_ns }
    }

    /// Adds the JVM `pid`'s heartbeat (opened again here: the watcher keeps its own mapping)
    /// and returns what drives its watcher.
    pub fn join(&self, pid: i32, hb: &Heartbeat, idle_sample: Duration, ended: Box<dyn FnMut(u32, doctor::recording::Barrier) + Send>) -> Driven {
        // A queue of one: a wake-up pending is as good as two.
        let (tx, rx): (SyncSender<()>, Receiver<()>) = std::sync::mpsc::sync_channel(1);
        let busy = Arc::new(AtomicBool::new(false));
        match Heartbeat::open(&hb.path) {
            Ok(mine) => {
                let resolution_ns = mine.read().resolution_ns.max(1);
                self.entries.lock().unwrap_or_else(|p| p.into_inner()).push(Entry { hb: mine.of_pid(pid), resolution_ns, wake: tx, busy: Arc::clone(&busy) });
            }
            Err(e) => {
                // The watcher still looks for itself once a second; say why it is slower.
                eprintln!("stallscope: JVM pid {pid}: cannot map its heartbeat for the watch loop ({e}); its stalls are noticed up to a second late");
            }
        }
        Driven { wake: rx, busy, idle_sample, ended }
    }

    /// Wakes every watcher (to see that watching ends).
    pub fn wake_all(&self) {
        for e in self.entries.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = e.wake.try_send(());
        }
    }

    /// One pass: wakes the watchers of stale heartbeats, drops those whose watcher is gone, and
    /// returns when the next heartbeat could first be stale.
    fn pass(&self, now: u64) -> u64 {
        let mut due = now + MAX_SLEEP_NS;
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.retain(|e| {
            // Its watcher ended (the `Driven` holding the other reference is gone).
            if Arc::strong_count(&e.busy) == 1 {
                return false;
            }
            if e.busy.load(Ordering::Acquire) {
                return true;
            }
            let b = e.hb.read();
            if matches!(b.state, MeterState::Exited | MeterState::Stopped) {
                // The watcher sees it too within its wait; nothing to sample.
                return !matches!(e.wake.try_send(()), Err(TrySendError::Disconnected(_)));
            }
            let stale_at = b.last_tick_ns + e.resolution_ns + self.threshold_ns;
            if now >= stale_at {
                e.busy.store(true, Ordering::Release);
                if let Err(TrySendError::Disconnected(_)) = e.wake.try_send(()) {
                    return false;
                }
            } else {
                due = due.min(stale_at);
            }
            true
        });
        due
    }

    /// Runs the loop until `stop` is set; every wake-up's lateness goes to `lateness`.
    pub fn run(&self, stop: &AtomicBool, lateness: &dyn Fn(u64)) {
        // SAFETY: setpriority on this thread's own tid; failure (EPERM) leaves it as it was.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        while !stop.load(Ordering::Relaxed) {
            let now = mono_ns();
            let due = self.pass(now);
            let t = mono_ns();
            let late = sleep_until(due.clamp(t + MIN_SLEEP_NS, t + MAX_SLEEP_NS));
            lateness(late);
        }
        self.wake_all();
    }
}
