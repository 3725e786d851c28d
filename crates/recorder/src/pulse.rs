//! What tells the sampling loop that its target stalled, and when it resumed: the stallscope
//! agent's heartbeat when the agent is in the JVM; otherwise the JVM's own perf counters (a
//! safepoint begun and not ended, `procwatch::jvmcounters`) and `/proc` (the process stopped),
//! which need nothing from the JVM, so a JVM that is stuck, stopped or refusing attach is
//! watched all the same.
//!
//! Invariant: a look is a few memory loads from the mapped counters plus one `pread` of the
//! process's `stat`; the VM thread's `syscall` file is read only when the counters cannot tell
//! whether a safepoint is being reached. Every counter look that differs from the one before is
//! handed back for the recording (`counters.jsonl`), so the doctor sees what the loop saw.

use procwatch::heartbeat::{Heartbeat, MeterState};
use procwatch::jvmcounters::{CounterLook, JvmCounters, SafepointState, Tracker};
use recording::StallTrigger;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The JVM's counters as the loop follows them.
pub struct CounterWatch {
    pub jc: JvmCounters,
    tracker: Tracker,
    last: Option<CounterLook>,
    /// The last look written down (a look like it is not written again).
    written: Option<CounterLook>,
    pub state: SafepointState,
    /// The first look found the VM thread as it is while reaching a safepoint, and no count
    /// moved: since when. A safepoint is taken as open only once that has lasted
    /// [`CONFIRM_NS`] (a handshake, or the end of a safepoint, looks the same for a moment).
    reaching_since: Option<u64>,
}

/// How long the VM thread must look as if reaching a safepoint, at the first looks, before a
/// safepoint is taken as open (its begin then placed from the counters' sums).
const CONFIRM_NS: u64 = 10_000_000;

impl CounterWatch {
    pub fn new(pid: i32, jc: JvmCounters) -> CounterWatch {
        let mut tracker = Tracker::for_jvm(&jc.info);
        // The JVM's clock starts as HotSpot initialises, within tens of milliseconds of the
        // process's start (measured 20-25 ms): the bounds when its counters do not sample it.
        if let Some(start) = procwatch::task::process_start_mono_ns(pid) {
            tracker.origin_hint(start, start + 60_000_000);
        }
        CounterWatch {
            jc,
            tracker,
            last: None,
            written: None,
            state: SafepointState::Closed,
            reaching_since: None,
        }
    }

    /// Looks at the counters at `t`; returns the look when it is worth writing down (the first,
    /// and any that changed).
    pub fn look(&mut self, t: u64, vm_thread: &mut VmThread) -> Option<CounterLook> {
        // Between safepoints nothing else moves: three loads, no allocation (`watch` looks at
        // every JVM of the host 200 times a second).
        if let (Some(last), SafepointState::Closed, None) =
            (self.last.as_mut(), self.state, self.reaching_since)
            && self.jc.quick() == (last.safepoints, last.sync_ns, last.safepoint_ns)
        {
            last.t = t;
            return None;
        }
        let prev_t = self.last.as_ref().map_or(t, |l| l.t);
        let mut look = self.jc.look(t, prev_t);
        let first = self.last.is_none();
        self.state = self.tracker.update(&look);
        if let SafepointState::Unsure { .. } = self.state {
            self.tracker.settle(vm_thread.reaching());
            self.state = self.tracker.state();
        } else if self.state == SafepointState::Closed && (first || self.reaching_since.is_some()) {
            // Confirmed over a few looks: a look that catches the VM thread at another moment's
            // work would otherwise open a safepoint from long ago (the sums then end at the
            // last safepoint's end), held open until the next one ends.
            self.reaching_since = match (vm_thread.reaching(), self.reaching_since) {
                (false, _) => None,
                (true, None) => Some(t),
                (true, Some(since)) if t >= since + CONFIRM_NS => {
                    self.state = self.tracker.open_at_first_look(&self.jc.info);
                    None
                }
                (true, since) => since,
            };
        } else {
            self.reaching_since = None;
        }
        if look.gc_in_progress().is_some() {
            look.gc_cause = self.jc.gc_cause();
        }
        self.last = Some(look.clone());
        let changed = self.written.as_ref().is_none_or(|w| !w.same_as(&look));
        if changed {
            self.written = Some(look.clone());
            return Some(look);
        }
        None
    }

    /// The last look, to write down at the end (its time closes the last window).
    pub fn last(&self) -> Option<&CounterLook> {
        self.last.as_ref()
    }

    /// Takes over a safepoint another loop saw open since `since` (`watch`'s one loop hands its
    /// stalls to each JVM's watcher): a first look, then that safepoint followed to its end;
    /// or, when it is `over` already, followed no further.
    fn adopt(
        &mut self,
        t: u64,
        since: u64,
        after: Option<&CounterLook>,
        over: bool,
    ) -> Option<CounterLook> {
        if let Some(a) = after {
            // The loop's last look is the one before this (written just before it).
            self.last = Some(a.clone());
            self.written = Some(a.clone());
        }
        let prev_t = self.last.as_ref().map_or(t, |l| l.t);
        let mut look = self.jc.look(t, prev_t);
        if look.gc_in_progress().is_some() {
            look.gc_cause = self.jc.gc_cause();
        }
        self.state =
            if over { self.tracker.update(&look) } else { self.tracker.adopt_open(&look, since) };
        self.last = Some(look.clone());
        let changed = self.written.as_ref().is_none_or(|w| !w.same_as(&look));
        changed.then(|| {
            self.written = Some(look.clone());
            look
        })
    }

    /// How closely a safepoint's begin is placed now (see `Tracker::placed_within_ns`).
    pub fn placed_within_ns(&self) -> Option<u64> {
        self.tracker.placed_within_ns()
    }

    /// When the GC under way began, if one is.
    pub fn gc_began(&self) -> Option<u64> {
        self.tracker.gc_began(self.last.as_ref()?)
    }
}

/// The JVM's VM thread, whose system call tells a safepoint being reached (it sleeps in
/// `clock_nanosleep` between polls of the threads, or runs) from none (it waits on a futex for
/// the next operation): measured on JDK 11, 17, 21 and 25.
pub struct VmThread {
    pid: i32,
    syscall: Option<File>,
    looked_for: bool,
}

impl VmThread {
    pub fn new(pid: i32) -> VmThread {
        VmThread { pid, syscall: None, looked_for: false }
    }

    fn find(&mut self) {
        self.looked_for = true;
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else { return };
        for e in dir.flatten() {
            if std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim_end() == "VM Thread")
            {
                self.syscall = File::open(e.path().join("syscall")).ok();
                return;
            }
        }
    }

    /// Whether the VM thread is reaching a safepoint now.
    pub fn reaching(&mut self) -> bool {
        if self.syscall.is_none() && !self.looked_for {
            self.find();
        }
        let Some(f) = &self.syscall else { return false };
        let mut buf = [0u8; 160];
        let Ok(n) = f.read_at(&mut buf, 0) else { return false };
        match procwatch::task::parse_syscall(&String::from_utf8_lossy(&buf[..n])) {
            procwatch::task::Syscall::Running => true,
            procwatch::task::Syscall::In { nr, .. } => matches!(nr, 35 | 230 | 24),
            _ => false,
        }
    }
}

/// The process's own `stat`, read in place: its state letter says stopped (`T`, `t`). Read at
/// most every `every_ns` (`watch` reads hundreds of JVMs' from one loop: a system call each).
pub struct ProcState {
    pid: i32,
    stat: Option<File>,
    every_ns: u64,
    read_at: u64,
    was: bool,
    /// The process is gone (its `stat` no longer reads).
    gone: bool,
}

impl ProcState {
    pub fn new(pid: i32) -> ProcState {
        ProcState {
            pid,
            // The main thread's own: the same state letter as the process's (the leader's),
            // without the process's times, summed over every thread at each read (a JVM's
            // dozens: `watch` reads hundreds of JVMs').
            stat: File::open(format!("/proc/{pid}/task/{pid}/stat")).ok(),
            every_ns: 0,
            read_at: 0,
            was: false,
            gone: false,
        }
    }

    /// Whether it is stopped, as last read within `every_ns` of `now`.
    fn stopped_at(&mut self, now: u64) -> bool {
        if self.read_at == 0 || now >= self.read_at + self.every_ns {
            self.read_at = now;
            self.was = self.stopped();
            let mut b = [0u8; 1];
            self.gone = self.stat.as_ref().is_none_or(|f| f.read_at(&mut b, 0).is_err());
        }
        self.was
    }

    pub fn stopped(&self) -> bool {
        let Some(f) = &self.stat else { return false };
        let mut buf = [0u8; 512];
        let Ok(n) = f.read_at(&mut buf, 0) else { return false };
        let s = &buf[..n];
        let Some(close) = s.iter().rposition(|b| *b == b')') else { return false };
        matches!(s.get(close + 2), Some(b'T' | b't'))
    }
}

/// What a look found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing is stalled. `expected`: when the target was last seen doing well (for the
    /// heartbeat, its next tick); look again by `due`.
    Quiet {
        expected: u64,
        due: u64,
    },
    Stalled(Stall),
    Over(Over),
}

/// The heartbeat's meter ended: the JVM exits, or the meter was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    Exited,
    MeterStopped,
}

/// A stall as the pulse saw it begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// When it began (the heartbeat: when its tick was due).
    pub since: u64,
    /// The last sign of life before it (the heartbeat's last tick; the counters' last look
    /// without it).
    pub last_ok: u64,
    pub by: StallTrigger,
    /// The heartbeat's tick count then.
    tick_count: u64,
    /// A stall by the JVM's safepoint probes: when its safepoint began by the probe (`since`
    /// may be later: the meter's last tick, or the last stall's end).
    probe_begin: u64,
}

impl Stall {
    /// A safepoint under way since `began`, by the JVM's probes, past the threshold: found by
    /// another loop than the one that samples it (`watch`'s, which has no heartbeat). Its
    /// watcher follows it to its end with the loop's probes ([`Pulse::use_slot`]), or with the
    /// counters where those no longer read ([`Pulse::adopt`]).
    pub fn by_probe(began: u64) -> Stall {
        Stall {
            since: began,
            // The world ran until the safepoint began (its evidence is read from there).
            last_ok: began,
            by: StallTrigger::SafepointProbe,
            tick_count: 0,
            probe_begin: began,
        }
    }
}

/// How a look during a stall found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Still {
    Stalled,
    /// Over: the heartbeat ticked (`ticked`), or the counters show no safepoint and the
    /// process runs.
    Resumed,
    /// The meter ended (the JVM exits, or the meter was stopped) before the heartbeat moved; or
    /// the JVM removed its counters (it exits) inside the safepoint.
    MeterEnded,
}

/// The loop's source of stalls: the heartbeat when there is one, else the counters and `/proc`.
pub struct Pulse {
    pub hb: Option<Heartbeat>,
    pub resolution_ns: u64,
    pub counters: Option<CounterWatch>,
    proc_state: ProcState,
    vm_thread: VmThread,
    /// The last look at which the counters and /proc showed no stall.
    last_ok: u64,
    /// A process that is not a JVM: its threads held off a CPU, from the kernel's events.
    kernel: Option<offcpu::Reader>,
    /// The JVM's own safepoint probes, once attached (BPF): a safepoint past the threshold is
    /// a stall from its begin to its end, whatever the meter saw.
    probes: Option<Probes>,
    /// A resolution after the last stall the probes found ended: the heartbeat's next tick is
    /// not expected before (a meter that blocked at the safepoint on its way into a sleep
    /// sleeps a whole resolution once it is let go).
    probe_floor: u64,
    /// When the last stall ended: a stall by the probes does not begin before it.
    stall_end: u64,
}

/// Where the JVM's safepoint probes are read: `run`'s own BPF recorder (its one JVM), or the
/// slot `watch`'s host-wide recorder keeps for this JVM.
pub enum Probes {
    Own(offcpu::Reader),
    Slot(std::sync::Arc<offcpu::SafepointSlot>),
}

impl Probes {
    fn read(&self) -> Option<offcpu::Safepoints> {
        match self {
            Probes::Own(r) => r.safepoints(),
            Probes::Slot(s) => s.read(),
        }
    }
}

/// A wait younger than this does not keep a stall found by the kernel's events going: a thread
/// preempted for a moment while the one that was held runs again is not still held.
const HELD_AT_LEAST_NS: u64 = 1_000_000;

impl Pulse {
    /// A pulse for `pid` from its counters (when it has them) and `/proc`.
    pub fn counters(pid: i32, jc: Option<JvmCounters>) -> Pulse {
        Pulse {
            hb: None,
            resolution_ns: 0,
            counters: jc.map(|c| CounterWatch::new(pid, c)),
            proc_state: ProcState::new(pid),
            vm_thread: VmThread::new(pid),
            last_ok: procwatch::clock::mono_ns(),
            kernel: None,
            probes: None,
            probe_floor: 0,
            stall_end: 0,
        }
    }

    /// A pulse for `pid`, a process that is not a JVM (no heartbeat, no safepoints): it stalls
    /// when one of its threads is held off a CPU by the kernel, not by its own choice, for the
    /// threshold (the kernel's events, `reader`), or when it is stopped (`/proc`).
    pub fn kernel(pid: i32, reader: offcpu::Reader) -> Pulse {
        Pulse { kernel: Some(reader), ..Pulse::counters(pid, None) }
    }

    /// The longest held thread's wait, when one has lasted `at_least` by `now`.
    fn held_since(&self, now: u64, at_least: u64) -> Option<u64> {
        let r = self.kernel.as_ref()?;
        r.held(self.proc_state.pid).iter().map(|h| h.start).filter(|s| *s + at_least <= now).min()
    }

    /// A pulse from the agent's heartbeat, looking at the counters too (for the recording).
    pub fn heartbeat(pid: i32, hb: Heartbeat, jc: Option<JvmCounters>) -> Pulse {
        let resolution_ns = hb.read().resolution_ns.max(1);
        Pulse { hb: Some(hb), resolution_ns, ..Pulse::counters(pid, jc) }
    }

    /// Reads the process's state (stopped or not) at most this often.
    pub fn stopped_every(mut self, every_ns: u64) -> Pulse {
        self.proc_state.every_ns = every_ns;
        self
    }

    /// Takes over a stall another loop saw begin (`watch`'s one loop, for this JVM's watcher).
    pub fn adopt(
        &mut self,
        s: &Stall,
        now: u64,
        after: Option<&CounterLook>,
        out: &mut dyn FnMut(&CounterLook),
    ) {
        // A safepoint over already (handed late, or as missed) is not followed as open: its
        // counters have moved, and would read as open until the next one ended.
        let over = s.by == StallTrigger::SafepointProbe
            && self.probes.as_ref().and_then(|p| p.read()?.end_of(s.probe_begin)).is_some();
        if matches!(s.by, StallTrigger::Safepoint | StallTrigger::SafepointProbe)
            && let Some(c) = self.counters.as_mut()
            && let Some(l) = c.adopt(now, s.since, after, over)
        {
            out(&l);
        }
        self.last_ok = s.last_ok;
    }

    /// Hands the loop the agent's heartbeat, once the agent got in: it drives from then on.
    pub fn take_heartbeat(&mut self, hb: Heartbeat) {
        self.resolution_ns = hb.read().resolution_ns.max(1);
        self.hb = Some(hb);
    }

    /// Looks at the counters now; a look worth writing down goes to `out`.
    fn look_counters(&mut self, t: u64, out: &mut dyn FnMut(&CounterLook)) {
        if let Some(c) = self.counters.as_mut()
            && let Some(l) = c.look(t, &mut self.vm_thread)
        {
            out(&l);
        }
    }

    /// Whether the target is stalled now, by `threshold_ns`.
    pub fn check(
        &mut self,
        now: u64,
        threshold_ns: u64,
        out: &mut dyn FnMut(&CounterLook),
    ) -> Check {
        self.look_counters(now, out);
        if let Some(hb) = &self.hb {
            let b = hb.read();
            match b.state {
                MeterState::Exited => return Check::Over(Over::Exited),
                MeterState::Stopped => return Check::Over(Over::MeterStopped),
                _ => {}
            }
            let expected = (b.last_tick_ns + self.resolution_ns).max(self.probe_floor);
            // A safepoint under way, by the JVM's probes: a stall from its begin once it has
            // lasted the threshold. Unless the meter ticked after it began (the heartbeat then
            // says when the world stopped), or the heartbeat was late by half a threshold
            // before it began (the meter was held first, and the heartbeat's stall covers it).
            if let Some((began_at, began)) =
                self.probe_since(b.last_tick_ns, expected, threshold_ns)
            {
                if now < began + threshold_ns {
                    return Check::Quiet { expected, due: began + threshold_ns };
                }
                return Check::Stalled(Stall {
                    since: began,
                    last_ok: b.last_tick_ns,
                    by: StallTrigger::SafepointProbe,
                    tick_count: b.tick_count,
                    probe_begin: began_at,
                });
            }
            if now < expected + threshold_ns {
                return Check::Quiet { expected, due: expected + threshold_ns };
            }
            return Check::Stalled(Stall {
                since: expected,
                last_ok: b.last_tick_ns,
                by: StallTrigger::Heartbeat,
                tick_count: b.tick_count,
                probe_begin: 0,
            });
        }
        if self.proc_state.stopped_at(now) {
            let since = if self.last_ok + threshold_ns.max(self.proc_state.every_ns) >= now {
                self.last_ok + now.saturating_sub(self.last_ok) / 2
            } else {
                now
            };
            return Check::Stalled(Stall {
                since,
                last_ok: self.last_ok,
                by: StallTrigger::Stopped,
                tick_count: 0,
                probe_begin: 0,
            });
        }
        if self.kernel.is_some() {
            if self.proc_state.gone {
                return Check::Over(Over::Exited);
            }
            // The oldest wait going on, whatever its age: due when it reaches the threshold.
            let oldest = self.held_since(now, 0);
            if let Some(since) = oldest.filter(|s| now >= s + threshold_ns) {
                return Check::Stalled(Stall {
                    since,
                    last_ok: since,
                    by: StallTrigger::Kernel,
                    tick_count: 0,
                    probe_begin: 0,
                });
            }
            self.last_ok = now;
            let due = oldest.map_or(now + threshold_ns, |s| s + threshold_ns);
            return Check::Quiet { expected: now, due: due.max(now + HELD_AT_LEAST_NS) };
        }
        if let Some(SafepointState::Open { since, .. }) = self.counters.as_ref().map(|c| c.state) {
            let began = since.0 + (since.1 - since.0) / 2;
            // A safepoint begins before the GC inside it: a GC begun before the look that first
            // saw the safepoint (at attach) moves its begin back.
            let began =
                self.counters.as_ref().and_then(|c| c.gc_began()).map_or(began, |g| g.min(began));
            if now >= began + threshold_ns {
                // The JVM's last safepoint, the one it exits in, never ends.
                if self.exiting() {
                    return Check::Over(Over::Exited);
                }
                return Check::Stalled(Stall {
                    since: began,
                    last_ok: since.0,
                    by: StallTrigger::Safepoint,
                    tick_count: 0,
                    probe_begin: 0,
                });
            }
            return Check::Quiet { expected: began, due: began + threshold_ns };
        }
        if self.proc_state.gone {
            return Check::Over(Over::Exited);
        }
        self.last_ok = now;
        Check::Quiet { expected: now, due: now + threshold_ns }
    }

    /// Whether the stall `s` goes on, at a look at `now`.
    pub fn still(&mut self, s: &Stall, now: u64, out: &mut dyn FnMut(&CounterLook)) -> Still {
        self.look_counters(now, out);
        // Without a heartbeat (`watch`), a probe's stall lasts while its safepoint does, by the
        // probes (read in the loop's slot); where they no longer read, by the counters, below.
        if s.by == StallTrigger::SafepointProbe
            && self.hb.is_none()
            && let Some(sp) = self.probes.as_ref().and_then(|p| p.read())
        {
            return match sp.open_since {
                Some(b) if b == s.probe_begin && self.exiting() => Still::MeterEnded,
                Some(b) if b == s.probe_begin => Still::Stalled,
                _ => Still::Resumed,
            };
        }
        if s.by == StallTrigger::Heartbeat
            || (s.by == StallTrigger::SafepointProbe && self.hb.is_some())
        {
            let Some(hb) = &self.hb else { return Still::Resumed };
            let b = hb.read();
            // The meter ticked; or, for a stall by the probes, its safepoint ended (a tick then
            // also says the world was not stopped after all).
            let probe_over = s.by == StallTrigger::SafepointProbe
                && self.open_safepoint() != Some(s.probe_begin);
            if probe_over || b.tick_count != s.tick_count {
                return Still::Resumed;
            }
            return if matches!(b.state, MeterState::Exited | MeterState::Stopped) {
                Still::MeterEnded
            } else {
                Still::Stalled
            };
        }
        if s.by == StallTrigger::Kernel {
            let held =
                self.proc_state.stopped() || self.held_since(now, HELD_AT_LEAST_NS).is_some();
            return if held { Still::Stalled } else { Still::Resumed };
        }
        let open =
            self.counters.as_ref().is_some_and(|c| matches!(c.state, SafepointState::Open { .. }));
        if self.proc_state.stopped() || open {
            return if open && self.exiting() { Still::MeterEnded } else { Still::Stalled };
        }
        Still::Resumed
    }

    /// When the stall `s` ended, seen over at `now` and last seen going on at `unchanged_at`;
    /// and whether the target showed it was running again (else watching ended first).
    pub fn resumed_at(
        &mut self,
        s: &Stall,
        still: Still,
        unchanged_at: u64,
        now: u64,
    ) -> (u64, bool) {
        let r = match (s.by, still) {
            (StallTrigger::SafepointProbe, Still::Resumed) => {
                // Its end as the probe stamped it (still known when the next few began first),
                // else the meter's tick that showed the world running.
                let tick = self.hb.as_ref().map(|h| h.read().last_tick_ns);
                let end = self
                    .probes
                    .as_ref()
                    .and_then(|r| r.read()?.end_of(s.probe_begin))
                    .or(tick.filter(|t| *t > s.since))
                    .unwrap_or(unchanged_at + now.saturating_sub(unchanged_at) / 2);
                // A meter that blocked on its way into a sleep sleeps a whole resolution
                // after the safepoint lets it go: its heartbeat is due only then.
                self.probe_floor = end + self.resolution_ns;
                (end, true)
            }
            (StallTrigger::Heartbeat, Still::Resumed) => {
                // A tick's time is read before it is published; a safepoint between the two (the
                // meter is a Java thread) publishes a time from before the stall. The stall cannot
                // have ended before the heartbeat was last seen unmoved.
                let b = self.hb.as_ref().map(|h| h.read());
                (b.map_or(now, |b| b.last_tick_ns).max(unchanged_at), true)
            }
            (_, Still::Resumed) => (unchanged_at + now.saturating_sub(unchanged_at) / 2, true),
            _ => (now, false),
        };
        self.stall_end = self.stall_end.max(r.0);
        r
    }

    /// Whether the JVM is exiting: its meter said so, or it removed its perf counters.
    pub fn exiting(&self) -> bool {
        match &self.hb {
            Some(hb) => hb.read().state == MeterState::Exited,
            None => self.counters.as_ref().is_some_and(|c| c.jc.exiting()),
        }
    }

    /// When the heartbeat, as it reads now, goes stale by `threshold_ns`: its last tick, then
    /// the tick due a resolution later, then the threshold. None without a heartbeat.
    /// With the JVM's safepoint probes, a safepoint under way is due a threshold after it began.
    pub fn stale_at(&self, threshold_ns: u64) -> Option<u64> {
        let expected = self
            .hb
            .as_ref()
            .map(|h| (h.read().last_tick_ns + self.resolution_ns).max(self.probe_floor))?;
        let last_tick = self.hb.as_ref().map(|h| h.read().last_tick_ns)?;
        let began = self.probe_since(last_tick, expected, threshold_ns).map(|(_, since)| since);
        Some(began.unwrap_or(expected) + threshold_ns)
    }

    /// Where a stall by the safepoint under way would begin (see [`Pulse::check`]), if one is
    /// under way and the heartbeat was not late by half a threshold before it began.
    /// Returns (the safepoint's begin by the probe, the stall's begin). None too when the
    /// meter ticked after the begin probe: the world still ran then (the probe fires before
    /// HotSpot stops any thread; a VM thread held there, in a write fault on its perf counters
    /// or on a contended `Threads_lock`, has stopped nobody), so only the heartbeat can say
    /// when it stopped; a stall from that tick would end at the meter's next and begin again.
    fn probe_since(&self, last_tick: u64, expected: u64, threshold_ns: u64) -> Option<(u64, u64)> {
        let began = self.open_safepoint()?;
        (began >= last_tick && began < expected + threshold_ns / 2)
            .then_some((began, began.max(self.stall_end)))
    }

    /// When the safepoint under way began, by the JVM's probes.
    fn open_safepoint(&self) -> Option<u64> {
        self.probes.as_ref().and_then(|r| r.read()?.open_since)
    }

    /// Finds and times the JVM's safepoints with its own probes from now (`reader` has them
    /// attached).
    pub fn use_probes(&mut self, reader: offcpu::Reader) {
        self.probes = Some(Probes::Own(reader));
    }

    /// Follows the stalls `watch`'s loop found by this JVM's probes to their ends with them
    /// (`slot`, the loop's), to the µs, however often it looks.
    pub fn use_slot(&mut self, slot: std::sync::Arc<offcpu::SafepointSlot>) {
        self.probes = Some(Probes::Slot(slot));
    }

    /// The heartbeat's meter thread, as the JVM's own namespace numbers it, and its resolution.
    pub fn meter(&self) -> Option<(u32, u64)> {
        self.hb.as_ref().map(|h| (h.read().meter_tid, self.resolution_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_is_seen_stopped_and_a_running_one_not() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let p = ProcState::new(pid);
        assert!(!p.stopped());
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let seen = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            p.stopped()
        });
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen, "SIGSTOP was not seen in /proc");
    }

    #[test]
    fn a_process_without_counters_or_heartbeat_stalls_only_when_stopped() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as i32;
        let mut p = Pulse::counters(pid, None);
        let mut written = 0;
        let t = procwatch::clock::mono_ns();
        assert!(matches!(p.check(t, 5_000_000, &mut |_| written += 1), Check::Quiet { .. }));
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(std::time::Duration::from_millis(50));
        let c = p.check(procwatch::clock::mono_ns(), 5_000_000, &mut |_| written += 1);
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        let Check::Stalled(s) = c else { panic!("{c:?}") };
        assert_eq!(s.by, StallTrigger::Stopped);
        assert!(s.since >= t);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(p.still(&s, procwatch::clock::mono_ns(), &mut |_| written += 1), Still::Resumed);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(written, 0, "no counters, nothing written");
    }
}
