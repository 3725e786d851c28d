//! The JVM's own thread dump, asked for while a long stall is still on: the culprit's code when
//! the flight recorder took no stack of it. JFR cannot sample a thread that is blocked in a page
//! fault or working inside the VM (a MappedByteBuffer read on a slow disk, a huge
//! `Unsafe.setMemory`; docs/frames.md). A `Thread.print` sent during the stall is a VM operation
//! that runs once the stall's own safepoint is over: it stops every thread at its next safepoint
//! poll, which for such a thread is in the method that made the call, and prints its stack.
//!
//! Invariant: a dump is asked only for a stall longer than [`ASK_AFTER_NS`] in which an
//! application thread is on a CPU or in uninterruptible sleep (so not for a GC pause, whose
//! application threads all wait); at most one per stall, one per [`MIN_GAP`] for stalls shorter
//! than [`LONG_NS`] and, apart from those, one per `MIN_GAP` for longer ones (a long stall is never
//! left without a dump by a short one just before it): at most two safepoints of its own per
//! `MIN_GAP` per JVM. Dumps are taken on a thread of their own (the sampling loop never waits on the
//! attach protocol); their stacks go to `dumps.jsonl` (the format of `frames.jsonl`, event
//! `thread-dump`), with thread ids as the host numbers them.

use hotspot_attach::Jvm;
use procwatch::clock::mono_ns;
use recording::{Appender, FrameSample, files};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// A stall is asked about once it has lasted this long: shorter ones are left to JFR (a dump is
/// a safepoint of its own). Measured (bench/culprit_frames.sh): a huge `Unsafe.setMemory` holds
/// a safepoint 25–35 ms per call and its first call 60–160 ms; at 100 ms the dump was asked in
/// 1 of 6 runs, and JFR never sampled the thread.
pub const ASK_AFTER_NS: u64 = 20_000_000;

/// Whether a look at the threads in a stall shows what only a dump can name: an application
/// thread on a CPU (late to a safepoint, or working inside the VM) or in uninterruptible sleep
/// (a page fault on a slow disk). In a GC pause or a long VM operation every application thread
/// waits (`S`) and the JVM's own threads do the work: a dump would name nothing and cost a
/// safepoint.
pub fn worth_a_dump(threads: &[procwatch::task::TaskSample]) -> bool {
    threads.iter().any(super::stacks::worth_a_stack)
}

/// A stall this long is asked about again (the budget decides): longer stalls have a budget of
/// their own, so a short one that took the last dump does not leave them without one.
pub const LONG_NS: u64 = 100_000_000;
/// Which dump a stall has earned by how long it has lasted, in the order they are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DumpDue {
    /// Shorter than [`ASK_AFTER_NS`]: none.
    None,
    /// One as a short stall.
    Short,
    /// One as a long stall ([`LONG_NS`] and over).
    Long,
}

impl DumpDue {
    pub fn after(lasted_ns: u64) -> DumpDue {
        if lasted_ns >= LONG_NS {
            DumpDue::Long
        } else if lasted_ns >= ASK_AFTER_NS {
            DumpDue::Short
        } else {
            DumpDue::None
        }
    }
}

/// At most one dump of each kind (short stall, long stall) this often per JVM.
const MIN_GAP: Duration = Duration::from_secs(10);

/// One ask: while stall `stall` had lasted `lasted_ns`, at `asked` (CLOCK_MONOTONIC).
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    pub stall: u32,
    pub asked: u64,
    pub lasted_ns: u64,
}

/// Which asks become dumps (the invariant above).
#[derive(Debug, Default)]
struct Budget {
    short: Option<Instant>,
    long: Option<Instant>,
    stall: Option<u32>,
}

impl Budget {
    /// Whether `a`, at `now`, gets a dump of its own; an ask for a stall already dumped spends
    /// nothing, but a long one counts that dump as the long stall's.
    fn grant(&mut self, a: &Ask, now: Instant) -> bool {
        let long = a.lasted_ns >= LONG_NS;
        if self.stall == Some(a.stall) {
            if long {
                self.long = self.long.max(self.short);
            }
            return false;
        }
        let slot = if long { &mut self.long } else { &mut self.short };
        if slot.is_some_and(|l| now.duration_since(l) < MIN_GAP) {
            return false;
        }
        *slot = Some(now);
        self.stall = Some(a.stall);
        true
    }
}

/// Asks for dumps on a thread of its own; finished (and joined) when dropped.
pub struct Dumper {
    tx: Option<SyncSender<Ask>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The stall the last ask was for while it is still on, 0 once it is over: an ask that
    /// waited behind a dump under way until its stall ended is dropped, since a dump taken then
    /// would not show where the thread was after that stall.
    on: Arc<AtomicU32>,
}

impl Dumper {
    /// Dumps of `jvm` go to `dir/dumps.jsonl`.
    pub fn start(
        jvm: Jvm,
        dir: &std::path::Path,
        live: Option<&recording::Live>,
    ) -> anyhow::Result<Dumper> {
        let mut out = Appender::open(&dir.join(files::DUMPS))?;
        if let Some(l) = live {
            l.keep_dumps(&mut out);
        }
        let (tx, rx): (SyncSender<Ask>, Receiver<Ask>) = std::sync::mpsc::sync_channel(1);
        let on = Arc::new(AtomicU32::new(0));
        let still_on = on.clone();
        let thread =
            std::thread::Builder::new().name("stallscope-dump".into()).spawn(move || {
                let mut budget = Budget::default();
                while let Ok(a) = rx.recv() {
                    if still_on.load(Ordering::Relaxed) != a.stall
                        || !budget.grant(&a, Instant::now())
                    {
                        continue;
                    }
                    let asked = a.asked;
                    let Ok(text) = jvm.jcmd("Thread.print") else { continue };
                    let answered = mono_ns();
                    let host = procwatch::ns::host_tids(jvm.pid);
                    for t in hotspot_log::threaddump::parse(&text)
                        .into_iter()
                        .filter(|t| !t.frames.is_empty())
                    {
                        let tid = procwatch::ns::host_tid(&host, t.nid);
                        if tid <= 0 {
                            continue;
                        }
                        let _ = out.line(&FrameSample {
                            t: asked,
                            tid,
                            name: t.name,
                            event: EVENT.into(),
                            latency_ns: Some(answered.saturating_sub(asked)),
                            frames: crate::to_disk::all(t.frames),
                            truncated: false,
                            agct: None,
                        });
                    }
                }
            })?;
        Ok(Dumper { tx: Some(tx), thread: Some(thread), on })
    }

    /// Asks for a dump now, while stall `stall` (numbered from 1) is on and has lasted
    /// `lasted_ns`; the budget decides. Returns whether the ask was queued: while an earlier
    /// one waits behind a dump under way the channel is full, and the caller asks again later.
    pub fn ask(&self, stall: u32, lasted_ns: u64) -> bool {
        self.on.store(stall, Ordering::Relaxed);
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(Ask { stall, asked: mono_ns(), lasted_ns }).is_ok())
    }

    /// The stall being watched is over: an ask for it still queued is dropped.
    pub fn over(&self) {
        self.on.store(0, Ordering::Relaxed);
    }
}

/// The event name of a dump's stacks in `dumps.jsonl`.
pub const EVENT: &str = recording::THREAD_DUMP;

impl Drop for Dumper {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Ask, Budget, MIN_GAP, worth_a_dump};
    use procwatch::task::{Syscall, TaskSample};
    use std::time::{Duration, Instant};

    const MS: u64 = 1_000_000;

    #[test]
    fn a_short_stall_never_leaves_a_long_one_without_a_dump_and_each_kind_has_its_gap() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(s);
        let mut b = Budget::default();
        // A 25 ms stall at start-up takes a dump; a long stall 2 s later still gets its own.
        assert!(b.grant(&Ask { stall: 1, asked: 0, lasted_ns: 25 * MS }, at(0)));
        assert!(
            !b.grant(&Ask { stall: 2, asked: 0, lasted_ns: 30 * MS }, at(1_000)),
            "one short one per gap"
        );
        assert!(b.grant(&Ask { stall: 3, asked: 0, lasted_ns: 120 * MS }, at(2_000)));
        // The same stall asked about again once long: no second dump.
        assert!(!b.grant(&Ask { stall: 3, asked: 0, lasted_ns: 200 * MS }, at(2_100)));
        assert!(
            !b.grant(&Ask { stall: 4, asked: 0, lasted_ns: 150 * MS }, at(5_000)),
            "one long one per gap"
        );
        assert!(b.grant(&Ask { stall: 5, asked: 0, lasted_ns: 20 * MS }, at(10_500)));
        // A short ask whose stall then ran long: its dump was the long stall's too.
        assert!(!b.grant(&Ask { stall: 5, asked: 0, lasted_ns: 100 * MS }, at(10_600)));
        assert!(!b.grant(
            &Ask { stall: 6, asked: 0, lasted_ns: 300 * MS },
            at(10_500 + MIN_GAP.as_millis() as u64 - 1)
        ));
        assert!(b.grant(
            &Ask { stall: 7, asked: 0, lasted_ns: 300 * MS },
            at(10_600 + MIN_GAP.as_millis() as u64)
        ));
    }

    fn t(comm: &str, state: char) -> TaskSample {
        TaskSample {
            tid: 1,
            comm: comm.into(),
            state,
            syscall: Syscall::Running,
            ..Default::default()
        }
    }

    #[test]
    fn a_dump_is_asked_only_when_an_application_thread_runs_or_waits_on_the_disk() {
        // A GC pause: the workers run, every application thread waits.
        let gc = [
            t("VM Thread", 'R'),
            t("GC Thread#0", 'R'),
            t("main", 'S'),
            t("java", 'S'),
            t("stallscope-hicc", 'R'),
            t("JFR Recorder Th", 'R'),
            t("Attach Listener", 'R'),
        ];
        assert!(!worth_a_dump(&gc));
        // A thread late to the safepoint, or in a page fault on a slow disk.
        assert!(worth_a_dump(&[gc.as_slice(), &[t("set-memory", 'R')]].concat()));
        assert!(worth_a_dump(&[gc.as_slice(), &[t("reader", 'D')]].concat()));
        assert!(!worth_a_dump(&[]));
    }
}
