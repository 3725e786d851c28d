//! Tracepoint evidence of one stall, read off the sampling loop: the loop asks, this thread reads
//! the ring buffer and appends `trace.jsonl`.
//!
//! Invariant: the sampling loop never waits for it (a request is queued), so formatting the ring
//! buffer cannot make the loop miss the next stall.

use anyhow::Result;
use recording::StallTrace;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// What to read from the ring buffer for one stall.
pub(super) struct TraceRequest {
    pub(super) stall: u32,
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) blocked: HashSet<i32>,
    pub(super) lock_from: u64,
}

/// A thread that reads tracepoint evidence for each stall as it ends and appends it to the
/// recording; finished (and joined) when dropped, so the recording is complete once watching
/// returns.
pub(super) struct TraceWriter {
    tx: Option<std::sync::mpsc::Sender<TraceRequest>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TraceWriter {
    pub(super) fn start(
        reader: procwatch::trace::TraceReader,
        path: &Path,
        live: Option<&recording::Live>,
    ) -> Result<TraceWriter> {
        let mut out = recording::Appender::open(path)?;
        if let Some(l) = live {
            l.keep_trace(&mut out);
        }
        let (tx, rx) = std::sync::mpsc::channel::<TraceRequest>();
        let thread =
            std::thread::Builder::new().name("stallscope-trace".into()).spawn(move || {
                // A stall in which no thread was seen blocked has no fault or lock wait to place.
                // Stalls that end close together are served by one read of the buffer, and reads
                // are at least MIN_TRACE_READ apart, so a storm of stalls costs a bounded share of a
                // CPU (the buffer's events are formatted by the kernel on every read).
                const MIN_TRACE_READ: Duration = Duration::from_millis(250);
                let mut last_read: Option<Instant> = None;
                while let Ok(first) = rx.recv() {
                    if let Some(l) = last_read {
                        std::thread::sleep(MIN_TRACE_READ.saturating_sub(l.elapsed()));
                    }
                    let mut batch = vec![first];
                    batch.extend(rx.try_iter());
                    batch.retain(|r| !r.blocked.is_empty());
                    let (Some(from), Some(to)) =
                        (batch.iter().map(|r| r.from).min(), batch.iter().map(|r| r.to).max())
                    else {
                        continue;
                    };
                    last_read = Some(Instant::now());
                    let Ok(ev) = reader.read(&[], from, to) else { continue };
                    for r in batch {
                        let mine: Vec<_> = ev
                            .iter()
                            .filter(|e| e.t() >= r.from && e.t() <= r.to)
                            .cloned()
                            .collect();
                        let _ = out.line(&StallTrace {
                            stall: r.stall,
                            events: crate::to_disk::all(keep_recent(mine, &r.blocked, r.lock_from)),
                        });
                    }
                }
            })?;
        Ok(TraceWriter { tx: Some(tx), thread: Some(thread) })
    }

    pub(super) fn request(&self, r: TraceRequest) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(r);
        }
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The last 64 page faults of each thread seen blocked during the stall (however long ago: a
/// fault can outlast a stall, and a resumed thread faults again), and mmap_lock events since
/// `lock_from`, oldest first.
fn keep_recent(
    ev: Vec<procwatch::trace::TraceEvent>,
    blocked: &HashSet<i32>,
    lock_from: u64,
) -> Vec<procwatch::trace::TraceEvent> {
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
