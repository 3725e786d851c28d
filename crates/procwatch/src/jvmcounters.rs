//! What a HotSpot JVM's perf counters say of its safepoints and GCs, on every JDK: one look is
//! a handful of loads from the mapped file ([`JvmCounters::look`]); a sequence of looks says
//! whether a safepoint is open now and since when ([`Tracker`]), and which safepoints began and
//! ended between them ([`safepoints`]).
//!
//! The counters (`runtimeService.cpp`): `sun.rt.safepoints` counts safepoints *begun*;
//! `sun.rt.safepointSyncTime` adds each one's time to synchronize (its TTSP) once all threads
//! have stopped; `sun.rt.safepointTime` adds its time once it ends: the time after
//! synchronizing on JDK 13 and later, its whole time on JDK 8 and 11 (checked on Temurin
//! 11.0.13 and OpenJDK 17.0.15). `sun.rt.applicationTime` adds the time since the previous one
//! ended, at each begin. `sun.gc.collector.N.invocations` counts a collector's pauses as they
//! start, with `lastEntryTime` and `lastExitTime` on the JVM's tick clock; `sun.os.hrt.ticks`
//! is that clock, sampled every 50 ms (`PerfDataSamplingInterval`) whatever the JVM is doing.
//!
//! Invariant: only the JVM's own numbers are read; nothing here samples `/proc` or guesses a
//! cause. Where the counters cannot tell (a safepoint that began in the same look as the
//! previous one ended), [`Tracker`] says so, and the caller looks at the VM thread.

use crate::perfdata::{Counter, Error, PerfData};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One look at a JVM's safepoint and GC counters, their ticks in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterLook {
    /// When it was taken (CLOCK_MONOTONIC), and when the previous look was: what changed did so
    /// in between.
    pub t: u64,
    #[serde(default)]
    pub prev_t: u64,
    pub safepoints: u64,
    pub sync_ns: u64,
    pub safepoint_ns: u64,
    pub application_ns: u64,
    /// `sun.os.hrt.ticks`: the JVM's clock, as last sampled.
    pub hrt_ns: u64,
    /// Per collector (`sun.gc.collector.N`): pauses begun, last entry and exit on the JVM's clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gcs: Vec<GcLook>,
    /// `sun.gc.cause` while a GC is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gc_cause: Option<String>,
    /// Looks were left out before this one (it follows a look taken by another loop than the one
    /// before it): nothing is to be read from the difference between the two.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gap: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcLook {
    pub invocations: u64,
    pub last_entry_ns: u64,
    pub last_exit_ns: u64,
    /// This collector's counters span a whole concurrent cycle, not a pause (Shenandoah's,
    /// but for its `… pauses`): entered and not left says nothing of a safepoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cycle: bool,
}

impl CounterLook {
    /// Whether anything but the JVM's clock and the look's own times differ.
    pub fn same_as(&self, o: &CounterLook) -> bool {
        (self.safepoints, self.sync_ns, self.safepoint_ns, self.application_ns, &self.gcs)
            == (o.safepoints, o.sync_ns, o.safepoint_ns, o.application_ns, &o.gcs)
    }

    /// The collector whose pause is under way (entered and not yet left), if any.
    pub fn gc_in_progress(&self) -> Option<usize> {
        pause_under_way(
            self.gcs.iter().map(|g| (g.cycle, g.invocations, g.last_entry_ns, g.last_exit_ns)),
        )
    }
}

/// Which collector's pause is under way (entered and not yet left), given each collector's
/// (cycle, invocations, last entry, last exit); a concurrent cycle's counters say nothing of a
/// pause. Also for the recording's copy of a look.
pub fn pause_under_way(gcs: impl IntoIterator<Item = (bool, u64, u64, u64)>) -> Option<usize> {
    gcs.into_iter()
        .position(|(cycle, invocations, entry, exit)| !cycle && invocations > 0 && entry > exit)
}

/// What the JVM says of itself in its counters, for the recording's header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersInfo {
    /// The file read (as the JVM names it).
    pub path: String,
    /// `java.property.java.version` (`1.8.0_392`, `11.0.13`, `25`), and its feature release.
    pub java_version: String,
    pub major: u32,
    /// `sun.rt.safepointTime` holds the whole safepoint (JDK 8–12), not only its time after
    /// synchronizing (13 and later).
    pub safepoint_time_includes_sync: bool,
    /// `sun.gc.collector.N.name`, in order.
    pub collectors: Vec<String>,
    /// `sun.os.hrt.frequency`: ticks per second.
    pub frequency: u64,
    /// `sun.rt.createVmBeginTime`: when the JVM started, ms since the epoch.
    pub vm_start_epoch_ms: i64,
}

/// The feature release of a `java.version` string: `1.8.0_392` → 8, `17.0.15` → 17, `25` → 25.
pub fn feature_release(v: &str) -> u32 {
    let mut parts = v.split(['.', '-', '+', '_']);
    match parts.next().and_then(|p| p.parse::<u32>().ok()) {
        Some(1) => parts.next().and_then(|p| p.parse().ok()).unwrap_or(0),
        Some(n) => n,
        None => 0,
    }
}

/// The most a counter is taken to hold (2^60 ns: 36 years): a damaged file's values, added up,
/// stay far from overflowing.
const MAX_VALUE: u64 = 1 << 60;

struct Collector {
    invocations: Option<Counter>,
    last_entry: Option<Counter>,
    last_exit: Option<Counter>,
    cycle: bool,
}

/// Whether a collector's counters span a concurrent cycle rather than a pause. Every HotSpot
/// collector counts its pauses (`G1 concurrent cycle pauses`, `Z major_concurrent cycle pauses`:
/// the remark and cleanup pauses), except Shenandoah's cycle counters: `Shenandoah concurrent
/// phases`/`… collections`, and `Shenandoah partial`/`Shenandoah full`, which count whole
/// concurrent cycles too.
pub fn counts_cycles(collector: &str) -> bool {
    collector.starts_with("Shenandoah") && !collector.ends_with("pauses")
}

/// A JVM's safepoint and GC counters, mapped.
pub struct JvmCounters {
    pd: PerfData,
    pub info: CountersInfo,
    safepoints: Option<Counter>,
    sync: Option<Counter>,
    safepoint_time: Option<Counter>,
    application: Option<Counter>,
    hrt: Option<Counter>,
    gc_cause: Option<Counter>,
    collectors: Vec<Collector>,
}

impl JvmCounters {
    /// The counters of JVM `pid` (see `perfdata::locate`).
    pub fn of_pid(pid: i32) -> Result<JvmCounters, Error> {
        let path = crate::perfdata::locate(pid)?;
        let mut c = JvmCounters::open(&path)?;
        // As the JVM names it (inside its container).
        c.info.path = format!(
            "/tmp/{}",
            path.iter()
                .rev()
                .take(2)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .map(|p| p.to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        );
        Ok(c)
    }

    pub fn open(path: &Path) -> Result<JvmCounters, Error> {
        let pd = PerfData::open(path)?;
        let java_version = pd
            .get_text("java.property.java.version")
            .or_else(|| pd.get_text("java.property.java.vm.specification.version"))
            .unwrap_or_default();
        let major = feature_release(&java_version);
        let mut collectors = Vec::new();
        let mut names = Vec::new();
        for n in 0..16 {
            let Some(name) = pd.get_text(&format!("sun.gc.collector.{n}.name")) else { break };
            let c = |f: &str| pd.counter(&format!("sun.gc.collector.{n}.{f}"));
            collectors.push(Collector {
                invocations: c("invocations"),
                last_entry: c("lastEntryTime"),
                last_exit: c("lastExitTime"),
                cycle: counts_cycles(&name),
            });
            names.push(name);
        }
        let frequency =
            pd.get_long("sun.os.hrt.frequency").filter(|f| *f > 0).unwrap_or(1_000_000_000) as u64;
        let info = CountersInfo {
            path: path.display().to_string(),
            java_version,
            major,
            safepoint_time_includes_sync: major != 0 && major < 13,
            collectors: names,
            frequency,
            vm_start_epoch_ms: pd.get_long("sun.rt.createVmBeginTime").unwrap_or(0),
        };
        Ok(JvmCounters {
            safepoints: pd.counter("sun.rt.safepoints"),
            sync: pd.counter("sun.rt.safepointSyncTime"),
            safepoint_time: pd.counter("sun.rt.safepointTime"),
            application: pd.counter("sun.rt.applicationTime"),
            hrt: pd.counter("sun.os.hrt.ticks"),
            gc_cause: pd.counter("sun.gc.cause"),
            collectors,
            info,
            pd,
        })
    }

    fn ns(&self, c: Option<Counter>) -> u64 {
        let Some(c) = c else { return 0 };
        let ticks = self.pd.long(c).max(0) as u128;
        let ns = if self.info.frequency == 1_000_000_000 {
            ticks
        } else {
            ticks * 1_000_000_000 / self.info.frequency as u128
        };
        ns.min(MAX_VALUE as u128) as u64
    }

    /// The three counters that move with every safepoint (begun, sync time, safepoint time), in
    /// three loads: what a look between safepoints needs to see that nothing happened.
    pub fn quick(&self) -> (u64, u64, u64) {
        (
            self.safepoints.map_or(0, |c| (self.pd.long(c).max(0) as u64).min(MAX_VALUE)),
            self.ns(self.sync),
            self.ns(self.safepoint_time),
        )
    }

    /// The counters now, stamped `t` (the caller's clock reading), the previous look at `prev_t`.
    pub fn look(&self, t: u64, prev_t: u64) -> CounterLook {
        CounterLook {
            t,
            prev_t,
            safepoints: self
                .safepoints
                .map_or(0, |c| (self.pd.long(c).max(0) as u64).min(MAX_VALUE)),
            sync_ns: self.ns(self.sync),
            safepoint_ns: self.ns(self.safepoint_time),
            application_ns: self.ns(self.application),
            hrt_ns: self.ns(self.hrt),
            gcs: self
                .collectors
                .iter()
                .map(|c| GcLook {
                    invocations: c
                        .invocations
                        .map_or(0, |i| (self.pd.long(i).max(0) as u64).min(MAX_VALUE)),
                    last_entry_ns: self.ns(c.last_entry),
                    last_exit_ns: self.ns(c.last_exit),
                    cycle: c.cycle,
                })
                .collect(),
            gc_cause: None,
            gap: false,
        }
    }

    /// `sun.gc.cause`: why the GC under way runs (`No GC` between GCs).
    pub fn gc_cause(&self) -> Option<String> {
        self.gc_cause.and_then(|c| match self.pd.value(c) {
            crate::perfdata::Value::Text(s) => Some(s),
            _ => None,
        })
    }

    /// Whether the JVM is exiting: it removed its perf-data file.
    pub fn exiting(&self) -> bool {
        self.pd.removed()
    }

    pub fn perf_data(&self) -> &PerfData {
        &self.pd
    }
}

/// Where the safepoints stand after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafepointState {
    /// None is open.
    Closed,
    /// One is open: begun after `since.0` and by `since.1` (CLOCK_MONOTONIC), synchronized or
    /// still being reached.
    Open { since: (u64, u64), synchronized: bool },
    /// The counters cannot tell: one ended and another began since the last look, and the new
    /// one may be open (being reached) or over already. The VM thread can tell.
    Unsure { since: (u64, u64) },
}

/// Follows a JVM's safepoints from one look to the next.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    prev: Option<CounterLook>,
    state: Option<SafepointState>,
    /// Bounds on the JVM's clock's zero on CLOCK_MONOTONIC: `sun.os.hrt.ticks` is stamped
    /// between the previous look and this one.
    origin: Option<(u64, u64)>,
    /// Bounds on when the JVM's safepoint accounting started, on CLOCK_MONOTONIC: each safepoint
    /// begins that long before its sums (`sums_at_begin`), inside the window its count rose in.
    /// Each begin seen narrows it; a begin is then placed to well under a look's window.
    accounting: Option<(u64, u64)>,
    /// `sun.rt.safepointTime` holds the sync time too (JDK 8-12).
    includes_sync: bool,
    /// The sync time when a safepoint became `Unsure`.
    unsure_from: Option<CounterLook>,
    /// Looks taken through `update`.
    looks: u64,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// A tracker for a JVM whose safepoint time holds its sync time (JDK 8-12) or not.
    pub fn for_jvm(info: &CountersInfo) -> Tracker {
        Tracker { includes_sync: info.safepoint_time_includes_sync, ..Tracker::default() }
    }

    /// What the counters have added up when a safepoint begins: the time since safepoint
    /// accounting started (application time, and the time in every earlier safepoint).
    fn sums_at_begin(&self, l: &CounterLook) -> u64 {
        l.application_ns.saturating_add(l.safepoint_ns).saturating_add(if self.includes_sync {
            0
        } else {
            l.sync_ns
        })
    }

    /// A safepoint began inside `window` (and had not synchronized by its end): narrow when
    /// accounting started, and place the begin by it.
    fn placed(&mut self, window: (u64, u64), l: &CounterLook) -> (u64, u64) {
        let s = self.sums_at_begin(l);
        let (lo, hi) = (window.0.saturating_sub(s), window.1.saturating_sub(s));
        self.accounting = Some(match self.accounting {
            // A torn read (the count stored before the sums) can leave nothing in common: start
            // again from this window.
            Some((a, b)) if a.max(lo) <= b.min(hi) => (a.max(lo), b.min(hi)),
            _ => (lo, hi),
        });
        let (a, b) = self.accounting.unwrap_or((lo, hi));
        let at =
            (a + b.saturating_sub(a) / 2).saturating_add(s).clamp(window.0, window.1.max(window.0));
        (at, at)
    }

    /// The state after `look`. The first look cannot see a safepoint begin: it says `Closed`
    /// unless a GC is under way; see [`Tracker::open_at_first_look`].
    pub fn update(&mut self, look: &CounterLook) -> SafepointState {
        let state = match (&self.prev, self.state) {
            (None, _) | (_, None) => match look.gc_in_progress() {
                Some(_) => SafepointState::Open { since: (look.t, look.t), synchronized: true },
                None => SafepointState::Closed,
            },
            (Some(p), Some(s)) => {
                let window = (look.prev_t.max(p.t), look.t);
                let began = look.safepoints > p.safepoints;
                let synced = look.sync_ns != p.sync_ns;
                let ended = look.safepoint_ns != p.safepoint_ns;
                match s {
                    _ if began && !ended && !synced => SafepointState::Open {
                        since: self.placed(window, look),
                        synchronized: false,
                    },
                    _ if began && !ended => {
                        SafepointState::Open { since: window, synchronized: true }
                    }
                    // None was open, one began and one ended: the one that began is over.
                    // (After the first look only: a first look cannot see one being reached.)
                    SafepointState::Closed
                        if began
                            && ended
                            && look.safepoints == p.safepoints + 1
                            && self.looks > 1 =>
                    {
                        SafepointState::Closed
                    }
                    // Several began and something ended: the newest may still be open.
                    _ if began && ended => {
                        // The sync time as the one that ended left it: the new one's moves it.
                        self.unsure_from =
                            Some(CounterLook { sync_ns: look.sync_ns, ..CounterLook::default() });
                        SafepointState::Unsure { since: window }
                    }
                    SafepointState::Open { since, synchronized } if !ended => {
                        SafepointState::Open { since, synchronized: synchronized || synced }
                    }
                    SafepointState::Unsure { since } if !ended => {
                        if synced {
                            SafepointState::Open { since, synchronized: true }
                        } else {
                            SafepointState::Unsure { since }
                        }
                    }
                    _ => SafepointState::Closed,
                }
            }
        };
        if let Some(p) = &self.prev {
            if look.hrt_ns != p.hrt_ns && look.hrt_ns > 0 {
                let b = (p.t.saturating_sub(look.hrt_ns), look.t.saturating_sub(look.hrt_ns));
                self.origin = Some(match self.origin {
                    Some(o) => (o.0.max(b.0), o.1.min(b.1).max(o.0.max(b.0))),
                    None => b,
                });
            }
        } else if look.hrt_ns > 0 && look.t > look.hrt_ns {
            // Stamped at most a sampling interval (50 ms) before this first look.
            self.origin = Some((
                look.t.saturating_sub(look.hrt_ns.saturating_add(60_000_000)),
                look.t - look.hrt_ns,
            ));
        }
        self.prev = Some(look.clone());
        self.state = Some(state);
        self.looks += 1;
        state
    }

    /// Another observer saw a safepoint open since `since`: follow it from `look` on (what
    /// happened since this tracker's own last look is that observer's to tell).
    pub fn adopt_open(&mut self, look: &CounterLook, since: u64) -> SafepointState {
        let s = SafepointState::Open { since: (since, since), synchronized: false };
        if self.origin.is_none() && look.hrt_ns > 0 && look.t > look.hrt_ns {
            self.origin = Some((
                look.t.saturating_sub(look.hrt_ns.saturating_add(60_000_000)),
                look.t - look.hrt_ns,
            ));
        }
        self.prev = Some(look.clone());
        self.state = Some(s);
        s
    }

    /// How closely a safepoint's begin is placed now: the width of the bounds on when the JVM's
    /// safepoint accounting started (see `placed`), once one begin was seen.
    pub fn placed_within_ns(&self) -> Option<u64> {
        self.accounting.map(|(a, b)| b.saturating_sub(a))
    }

    /// The state after the last look (and any `settle`).
    pub fn state(&self) -> SafepointState {
        self.state.unwrap_or(SafepointState::Closed)
    }

    /// Bounds on the JVM's clock's zero from elsewhere (its process's start), for JVMs whose
    /// counters do not sample their clock (JDK 25 dropped `sun.os.hrt.ticks`).
    pub fn origin_hint(&mut self, lo: u64, hi: u64) {
        if self.origin.is_none() {
            self.origin = Some((lo, hi.max(lo)));
        }
    }

    /// The caller saw (from the VM thread) that an `Unsure` safepoint is open, or over.
    pub fn settle(&mut self, open: bool) {
        if let Some(SafepointState::Unsure { since }) = self.state {
            // Open and not reached yet: the last look's sums are its begin's (the one before it
            // ended, this one began), so it is placed as any other.
            let unreached = self
                .prev
                .as_ref()
                .zip(self.unsure_from.as_ref())
                .is_some_and(|(l, f)| l.sync_ns == f.sync_ns);
            let since = match (open && unreached, self.prev.clone()) {
                (true, Some(l)) if since.0 != since.1 => self.placed(since, &l),
                _ => since,
            };
            self.state = Some(if open {
                SafepointState::Open { since, synchronized: false }
            } else {
                SafepointState::Closed
            });
        }
    }

    /// The caller saw (from the VM thread, over its first looks) that a safepoint is being reached:
    /// it began when the counters say it did, estimated from their sums (`begin - vm_zero =
    /// application + sync + safepoint time` on JDK 13+, without the sync time on 8-12: checked
    /// against the looks' windows on Temurin 11.0.13 and OpenJDK 17.0.15), else at the first look.
    pub fn open_at_first_look(&mut self, info: &CountersInfo) -> SafepointState {
        let Some(look) = &self.prev else { return SafepointState::Closed };
        let since = self.estimated_begin(look, info).map_or((look.t, look.t), |b| (b, b));
        let s = SafepointState::Open { since, synchronized: false };
        self.state = Some(s);
        s
    }

    /// When the JVM's clock read zero, on CLOCK_MONOTONIC, as well as the looks so far tell.
    pub fn clock_origin(&self) -> Option<u64> {
        self.origin.map(|(lo, hi)| lo + hi.saturating_sub(lo) / 2)
    }

    /// The begin of the newest safepoint, from the counters' sums: the sums run from the moment
    /// safepoint tracing started, about [`VM_ZERO_AFTER_ORIGIN_NS`] after the JVM's clock's zero.
    fn estimated_begin(&self, look: &CounterLook, info: &CountersInfo) -> Option<u64> {
        let origin = self.clock_origin()?;
        // JDK 8-12 count the time to reach inside the safepoint time.
        let sums = look
            .application_ns
            .saturating_add(look.safepoint_ns)
            .saturating_add(if info.safepoint_time_includes_sync { 0 } else { look.sync_ns });
        Some(origin.saturating_add(VM_ZERO_AFTER_ORIGIN_NS).saturating_add(sums))
            .filter(|b| *b <= look.t)
    }

    /// When a GC under way began, on CLOCK_MONOTONIC.
    pub fn gc_began(&self, look: &CounterLook) -> Option<u64> {
        let g = look.gcs.get(look.gc_in_progress()?)?;
        Some(self.clock_origin()?.saturating_add(g.last_entry_ns)).filter(|b| *b <= look.t)
    }
}

/// How long after the JVM's clock's zero (`os::init`) its safepoint accounting starts: measured
/// 34-38 ms on OpenJDK 17 and 57-62 ms on Temurin 11 on this project's machine. Only estimates
/// use it; they are good to a few tens of milliseconds.
pub const VM_ZERO_AFTER_ORIGIN_NS: u64 = 45_000_000;

/// One safepoint as the counters show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountedSafepoint {
    /// Between these two looks it began, and between `end_window` it ended (CLOCK_MONOTONIC).
    pub begin_window: (u64, u64),
    pub end_window: (u64, u64),
    /// Safepoints the window holds (more than one when several began and ended between looks).
    pub count: u64,
    pub ttsp_ns: u64,
    /// After synchronizing (the VM operation and cleanup).
    pub at_safepoint_ns: u64,
    /// The collector that paused in it, if one did.
    pub collector: Option<usize>,
}

impl CountedSafepoint {
    pub fn total_ns(&self) -> u64 {
        self.ttsp_ns.saturating_add(self.at_safepoint_ns)
    }

    /// Its end, as well as the two windows and its length tell: the end lies in its own window
    /// and `total` after a point of the begin window.
    pub fn end_ns(&self) -> u64 {
        let (lo, hi) = (
            self.end_window.0.max(self.begin_window.0.saturating_add(self.total_ns())),
            self.end_window.1.min(self.begin_window.1.saturating_add(self.total_ns())),
        );
        if lo <= hi { lo + (hi - lo) / 2 } else { self.end_window.1 }
    }
}

/// A safepoint begun and not yet seen to end, while rebuilding them.
struct Pending {
    since: (u64, u64),
    count: u64,
    sync_ns: u64,
    /// Collectors' invocations before it began.
    invocations: Vec<u64>,
    /// Begun in the window in which the one before it ended: it may have ended there too.
    maybe: bool,
}

/// The safepoints a sequence of looks saw end, oldest first. Looks are in time order; a look
/// that repeats its predecessor's values may be left out (each carries its predecessor's time).
pub fn safepoints(looks: &[CounterLook], includes_sync: bool) -> Vec<CountedSafepoint> {
    let mut out = Vec::new();
    let mut open: Option<Pending> = None;
    let invocations = |x: &CounterLook| x.gcs.iter().map(|g| g.invocations).collect::<Vec<u64>>();
    for w in looks.windows(2) {
        let (p, l) = (&w[0], &w[1]);
        if l.gap {
            open = None;
            continue;
        }
        let window = (l.prev_t.max(p.t), l.t);
        let began = l.safepoints.saturating_sub(p.safepoints);
        let (dsync, dsp) =
            (l.sync_ns.saturating_sub(p.sync_ns), l.safepoint_ns.saturating_sub(p.safepoint_ns));
        let ending = |o: Pending, out: &mut Vec<CountedSafepoint>| {
            let sync = o.sync_ns.saturating_add(dsync);
            let at = if includes_sync { dsp.saturating_sub(sync) } else { dsp };
            let collector = l
                .gcs
                .iter()
                .zip(&o.invocations)
                .position(|(g, before)| !g.cycle && g.invocations > *before);
            out.push(CountedSafepoint {
                begin_window: o.since,
                end_window: window,
                count: o.count,
                ttsp_ns: sync,
                at_safepoint_ns: at,
                collector,
            });
        };
        open = match open.take() {
            // Safepoints follow one another: a new begin means a "maybe" one had ended already.
            Some(o) if o.maybe && began > 0 && dsp == 0 => Some(Pending {
                since: window,
                count: began,
                sync_ns: dsync,
                invocations: invocations(p),
                maybe: false,
            }),
            Some(o) if dsp > 0 => {
                ending(
                    Pending { count: o.count.saturating_add(began.saturating_sub(1)), ..o },
                    &mut out,
                );
                (began > 0).then(|| Pending {
                    since: window,
                    count: 1,
                    sync_ns: 0,
                    invocations: invocations(l),
                    maybe: true,
                })
            }
            Some(o) => Some(Pending {
                count: o.count.saturating_add(began),
                sync_ns: o.sync_ns.saturating_add(dsync),
                maybe: o.maybe && dsync == 0,
                ..o
            }),
            None if began > 0 && dsp > 0 => {
                ending(
                    Pending {
                        since: window,
                        count: began,
                        sync_ns: 0,
                        invocations: invocations(p),
                        maybe: false,
                    },
                    &mut out,
                );
                None
            }
            None if began > 0 => Some(Pending {
                since: window,
                count: began,
                sync_ns: dsync,
                invocations: invocations(p),
                maybe: false,
            }),
            None => None,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn look(t_ms: u64, safepoints: u64, sync_ms: u64, sp_ms: u64) -> CounterLook {
        CounterLook {
            t: t_ms * MS,
            prev_t: t_ms.saturating_sub(5) * MS,
            safepoints,
            sync_ns: sync_ms * MS,
            safepoint_ns: sp_ms * MS,
            ..CounterLook::default()
        }
    }

    #[test]
    fn feature_releases_of_every_version_string() {
        assert_eq!(feature_release("1.8.0_392"), 8);
        assert_eq!(feature_release("11.0.13"), 11);
        assert_eq!(feature_release("17.0.15"), 17);
        assert_eq!(feature_release("25"), 25);
        assert_eq!(feature_release("21-ea"), 21);
        assert_eq!(feature_release(""), 0);
    }

    #[test]
    fn a_safepoint_is_open_from_its_begin_to_its_end() {
        let mut t = Tracker::new();
        assert_eq!(t.update(&look(100, 3, 10, 20)), SafepointState::Closed);
        // Placed inside the window its count rose in (the middle, with nothing known yet).
        let open = SafepointState::Open { since: (102_500_000, 102_500_000), synchronized: false };
        assert_eq!(t.update(&look(105, 4, 10, 20)), open);
        assert_eq!(t.update(&look(110, 4, 10, 20)), open);
        // Reached after 1.4 s: synchronized, still open while the operation runs.
        assert_eq!(
            t.update(&look(1505, 4, 1410, 20)),
            SafepointState::Open { since: (102_500_000, 102_500_000), synchronized: true }
        );
        assert_eq!(t.update(&look(1510, 4, 1410, 22)), SafepointState::Closed);
        // One that began and ended between two looks, none open before: over, never open (a
        // lab run found a booster that took it as open, the VM thread still running after it,
        // and kept the JVM's busy threads real-time until the next one ended).
        assert_eq!(t.update(&look(1515, 5, 1411, 23)), SafepointState::Closed);
        assert_eq!(t.update(&look(1520, 5, 1411, 23)), SafepointState::Closed);
        // Two began and one ended: the second may still be open.
        assert_eq!(
            t.update(&look(1525, 7, 1412, 24)),
            SafepointState::Unsure { since: (1520 * MS, 1525 * MS) }
        );
        t.settle(false);
        assert_eq!(t.update(&look(1530, 7, 1412, 24)), SafepointState::Closed);
    }

    #[test]
    fn each_begin_seen_places_the_next_more_closely() {
        // JDK 17: safepoint accounting started at 1000.3 ms; each begin falls somewhere in its
        // 5 ms look window, its sums saying how long after that start it was.
        let zero = 1_000_300_000u64;
        let mut t = Tracker::new();
        let (mut app, mut sync, mut sp) = (0u64, 0u64, 0u64);
        let mut now = 1_001 * MS;
        t.update(&CounterLook { t: now, prev_t: now, ..CounterLook::default() });
        let mut errs = Vec::new();
        for i in 1..=12u64 {
            // The next safepoint begins 97.3 ms of application time after the previous ended.
            app += 97_300_000 + i * 1_700_000;
            let begin = zero + app + sync + sp;
            // Looks every 5 ms; the first after the begin sees the count rise.
            let before = now;
            now = begin + 5 * MS - (begin - before) % (5 * MS);
            let l = CounterLook {
                t: now,
                prev_t: now - 5 * MS,
                safepoints: i,
                sync_ns: sync,
                safepoint_ns: sp,
                application_ns: app,
                ..CounterLook::default()
            };
            let SafepointState::Open { since, .. } = t.update(&l) else { panic!("open") };
            errs.push(since.0 as i64 - begin as i64);
            // Reached 2 ms later, ended 1 ms after that: seen at the next look.
            sync += 2 * MS;
            sp += MS;
            now += 5 * MS;
            t.update(&CounterLook {
                t: now,
                prev_t: now - 5 * MS,
                safepoints: i,
                sync_ns: sync,
                safepoint_ns: sp,
                application_ns: app,
                ..CounterLook::default()
            });
        }
        assert!(
            errs[0].unsigned_abs() <= 2_500_000,
            "the first is placed within its window: {errs:?}"
        );
        assert!(
            errs[11].unsigned_abs() < 1_000_000,
            "after a dozen, within a millisecond: {errs:?}"
        );
    }

    #[test]
    fn a_safepoint_begun_as_another_ended_is_unsure_until_it_synchronizes() {
        // As on JDK 17 (counted loop, then a queued System.gc()): the first one's end and the
        // second one's begin fall in one look.
        let mut t = Tracker::new();
        t.update(&look(100, 1, 0, 0));
        t.update(&look(105, 2, 0, 0));
        assert_eq!(
            t.update(&look(800, 3, 690, 1)),
            SafepointState::Unsure { since: (795 * MS, 800 * MS) }
        );
        assert_eq!(
            t.update(&look(805, 3, 690, 1)),
            SafepointState::Unsure { since: (795 * MS, 800 * MS) }
        );
        assert_eq!(
            t.update(&look(1640, 3, 1530, 1)),
            SafepointState::Open { since: (795 * MS, 800 * MS), synchronized: true }
        );
    }

    #[test]
    fn the_safepoints_between_looks_are_rebuilt_with_their_times() {
        // JDK 17: a 1.4 s TTSP, 2 ms at it; then a short one inside one look.
        let looks = [
            look(100, 3, 10, 20),
            look(105, 4, 10, 20),
            look(1505, 4, 1410, 20),
            look(1510, 4, 1410, 22),
            look(1515, 5, 1411, 23),
        ];
        let s = safepoints(&looks, false);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(
            (s[0].ttsp_ns, s[0].at_safepoint_ns, s[0].begin_window, s[0].end_window),
            (1400 * MS, 2 * MS, (100 * MS, 105 * MS), (1505 * MS, 1510 * MS))
        );
        // It ended 1.402 s after a point of its begin window (1502-1507 ms), inside its end window.
        assert_eq!(s[0].end_ns(), 1506 * MS);
        assert_eq!((s[1].ttsp_ns, s[1].at_safepoint_ns, s[1].count), (MS, MS, 1));
        // JDK 11: the safepoint time holds the sync time too.
        let s = safepoints(
            &[
                look(100, 3, 10, 20),
                look(105, 4, 10, 20),
                look(1505, 4, 1410, 20),
                look(1510, 4, 1410, 1422),
            ],
            true,
        );
        assert_eq!((s[0].ttsp_ns, s[0].at_safepoint_ns), (1400 * MS, 2 * MS));
    }

    #[test]
    fn a_gc_under_way_is_seen_at_the_first_look_and_timed_on_the_jvm_clock() {
        let mut l = look(5000, 9, 10, 20);
        l.hrt_ns = 4000 * MS;
        l.gcs = vec![GcLook {
            invocations: 3,
            last_entry_ns: 3900 * MS,
            last_exit_ns: 3000 * MS,
            cycle: false,
        }];
        let mut t = Tracker::new();
        assert!(matches!(t.update(&l), SafepointState::Open { synchronized: true, .. }));
        let began = t.gc_began(&l).unwrap();
        assert!((4840 * MS..=4900 * MS).contains(&began), "{began}");
    }

    #[test]
    fn a_concurrent_cycle_under_way_is_no_pause() {
        assert!(
            counts_cycles("Shenandoah concurrent phases")
                && counts_cycles("Shenandoah full")
                && counts_cycles("Shenandoah partial")
        );
        assert!(!counts_cycles("Shenandoah pauses") && !counts_cycles("Shenandoah full GC pauses"));
        assert!(
            !counts_cycles("G1 concurrent cycle pauses")
                && !counts_cycles("Z major_concurrent cycle pauses")
                && !counts_cycles("PSParallelCompact")
        );
        // Shenandoah entered its cycle counters for the whole concurrent cycle: the first look
        // inside one sees no safepoint, and a safepoint ending meanwhile is not the cycle's.
        let mut l = look(5000, 9, 10, 20);
        l.gcs = vec![GcLook {
            invocations: 3,
            last_entry_ns: 3900 * MS,
            last_exit_ns: 3000 * MS,
            cycle: true,
        }];
        assert_eq!(l.gc_in_progress(), None);
        assert_eq!(Tracker::new().update(&l), SafepointState::Closed);
        let mut after = look(5010, 10, 11, 22);
        after.gcs = vec![GcLook { invocations: 4, cycle: true, ..Default::default() }];
        let mut begun = look(5005, 10, 10, 20);
        begun.gcs = l.gcs.clone();
        let s = safepoints(&[l, begun, after], false);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s.iter().all(|c| c.collector.is_none()), "{s:?}");
    }
}
