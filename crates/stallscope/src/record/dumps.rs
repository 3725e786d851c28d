//! The JVM's own thread dump, asked for while a long stall is still on: the culprit's code when
//! the flight recorder took no stack of it. JFR cannot sample a thread that is blocked in a page
//! fault or working inside the VM (a MappedByteBuffer read on a slow disk, a huge
//! `Unsafe.setMemory`; docs/frames.md). A `Thread.print` sent during the stall is a VM operation
//! that runs once the stall's own safepoint is over: it stops every thread at its next safepoint
//! poll, which for such a thread is in the method that made the call, and prints its stack.
//!
//! Invariant: at most one dump per `MIN_GAP` per JVM, asked only for stalls longer than
//! `ASK_AFTER`, on a thread of its own (the watch loop never waits on the attach protocol); the
//! dump's stacks go to `dumps.jsonl` (the format of `frames.jsonl`, event `thread-dump`), with
//! thread ids as the host numbers them.

use crate::attach::Jvm;
use doctor::recording::{files, Appender, FrameSample};
use procwatch::clock::mono_ns;
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// A stall is asked about once it has lasted this long: shorter ones are left to JFR (a dump is
/// a safepoint of its own).
pub const ASK_AFTER_NS: u64 = 100_000_000;
/// At most one dump this often per JVM.
const MIN_GAP: Duration = Duration::from_secs(10);

/// Asks for dumps on a thread of its own; finished (and joined) when dropped.
pub struct Dumper {
    tx: Option<SyncSender<u64>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Dumper {
    /// Dumps of `jvm` go to `dir/dumps.jsonl`.
    pub fn start(jvm: Jvm, dir: &std::path::Path) -> anyhow::Result<Dumper> {
        let mut out = Appender::open(&dir.join(files::DUMPS))?;
        let (tx, rx): (SyncSender<u64>, Receiver<u64>) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("stallscope-dump".into()).spawn(move || {
            let mut last: Option<Instant> = None;
            while let Ok(asked) = rx.recv() {
                if last.is_some_and(|l| l.elapsed() < MIN_GAP) {
                    continue;
                }
                last = Some(Instant::now());
                let Ok(text) = jvm.jcmd("Thread.print") else { continue };
                let answered = mono_ns();
                let host = procwatch::ns::host_tids(jvm.pid);
                for t in hotspot_log::threaddump::parse(&text).into_iter().filter(|t| !t.frames.is_empty()) {
                    let tid = procwatch::ns::host_tid(&host, t.nid);
                    if tid <= 0 {
                        continue;
                    }
                    let _ = out.line(&FrameSample { t: asked, tid, name: t.name, event: EVENT.into(), latency_ns: Some(answered.saturating_sub(asked)), frames: t.frames, truncated: false });
                }
            }
        })?;
        Ok(Dumper { tx: Some(tx), thread: Some(thread) })
    }

    /// Asks for a dump now, while a stall is on; a dump already under way, or one taken less
    /// than `MIN_GAP` ago, makes this one moot.
    pub fn ask(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.try_send(mono_ns());
        }
    }
}

/// The event name of a dump's stacks in `dumps.jsonl`.
pub const EVENT: &str = "thread-dump";

impl Drop for Dumper {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
