//! The kernel's account of each stall from the BPF off-CPU recorder, read off the sampling loop:
//! the loop asks as a stall ends, this thread reads the waits that overlapped it and appends
//! `kwaits.jsonl`.
//!
//! Invariant: the sampling loop never waits for it (a request is queued).

use anyhow::Result;
use recording::{KernelThread, KernelWait, KernelWaker, StallKernelWaits};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most waits written for one stall (the longest within it are kept).
const MAX_PER_STALL: usize = 20_000;
/// How long after a stall's end its waits are read: the threads it released come back onto a
/// CPU (ending their waits) in the moments after.
const SETTLE: Duration = Duration::from_millis(30);

pub(super) struct KwaitsRequest {
    pub(super) stall: u32,
    pub(super) from: u64,
    pub(super) to: u64,
}

/// What the writer is asked, in order.
enum Msg {
    /// A stall's waits, read once its threads came back.
    Stall(KwaitsRequest),
    /// Answered once every stall asked for before is written (`watch` diagnoses a stall only
    /// then: its kernel account is part of the diagnosis).
    Barrier(std::sync::mpsc::SyncSender<()>),
}

/// A thread that writes each stall's kernel waits; finished (and joined) when dropped.
pub(super) struct KwaitsWriter {
    tx: Option<std::sync::mpsc::Sender<Msg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    reader: offcpu::Reader,
    pid: i32,
    /// The newest stall begun: the writer disarms only when it has read that one.
    latest: Arc<Mutex<u32>>,
}

impl KwaitsWriter {
    pub(super) fn start(
        reader: offcpu::Reader,
        pid: i32,
        path: &Path,
        live: Option<&recording::Live>,
    ) -> Result<KwaitsWriter> {
        let mut out = recording::Appender::open(path)?;
        if let Some(l) = live {
            l.keep_kwaits(&mut out);
        }
        let latest = Arc::new(Mutex::new(0u32));
        let (mine, newest) = (reader.clone(), Arc::clone(&latest));
        // The target's threads are recorded from now (a wait begun before is not seen).
        let since = procwatch::clock::mono_ns();
        let (tx, rx) = std::sync::mpsc::channel::<Msg>();
        let thread =
            std::thread::Builder::new().name("stallscope-kwaits".into()).spawn(move || {
                while let Ok(m) = rx.recv() {
                    let r = match m {
                        Msg::Stall(r) => r,
                        Msg::Barrier(done) => {
                            let _ = done.send(());
                            continue;
                        }
                    };
                    let now = procwatch::clock::mono_ns();
                    let due = r.to + SETTLE.as_nanos() as u64;
                    if now < due {
                        std::thread::sleep(Duration::from_nanos(due - now));
                    }
                    let waits = mine.waits(&[pid], r.from, r.to);
                    // Its waits are read: stacks are taken again only once the next stall
                    // begins (unless it has already: under the lock `begin` arms with).
                    let newest = newest.lock().unwrap_or_else(|p| p.into_inner());
                    if *newest == r.stall {
                        mine.arm(pid, false);
                    }
                    drop(newest);
                    let (waits, stacks) = kept(waits, r.from, r.to);
                    let _ = out.line(&StallKernelWaits {
                        stall: r.stall,
                        from: r.from,
                        to: r.to,
                        since: Some(since),
                        waits,
                        stacks,
                        lost: mine.lost(),
                    });
                }
            })?;
        Ok(KwaitsWriter { tx: Some(tx), thread: Some(thread), reader, pid, latest })
    }

    /// A stall began: the waits that end from now on get their kernel stacks.
    pub(super) fn begin(&self, stall: u32) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        *latest = stall;
        self.reader.arm(self.pid, true);
    }

    pub(super) fn request(&self, r: KwaitsRequest) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Stall(r));
        }
    }

    /// An answer given once every stall asked for so far is written (its end dropped unanswered
    /// if the writer is gone), for [`recording::Barrier::also`].
    pub(super) fn barrier(&self) -> std::sync::mpsc::Receiver<()> {
        let (done, answered) = std::sync::mpsc::sync_channel(1);
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Barrier(done));
        }
        answered
    }
}

impl Drop for KwaitsWriter {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A stack as it is worth keeping: without the tracepoint's own frame (`__traceiter_…`), and, for
/// a wake-up from an interrupt, without what the interrupt happened to interrupt.
fn trimmed(mut stack: Vec<String>) -> Vec<String> {
    // The BPF program's own frames (its trampoline, `bpf_trace_run1`, and its code, which
    // kallsyms may name after whatever text symbol precedes it) come before the tracepoint's.
    if let Some(i) = stack.iter().position(|f| f.starts_with("bpf_trace_run")) {
        stack.drain(..=i);
    }
    stack.retain(|f| !f.starts_with("__traceiter_") && !f.starts_with("__bpf_trace_"));
    if let Some(i) = stack.iter().position(|f| f.starts_with("asm_")) {
        stack.truncate(i + 1);
    }
    stack
}

/// The waits as the recording holds them, oldest first, and the stacks they name by index; past
/// [`MAX_PER_STALL`], those that covered the most of `[from, to]`.
fn kept(mut waits: Vec<offcpu::Wait>, from: u64, to: u64) -> (Vec<KernelWait>, Vec<Vec<String>>) {
    if waits.len() > MAX_PER_STALL {
        let within =
            |w: &offcpu::Wait| w.end.unwrap_or(to).min(to).saturating_sub(w.start.max(from));
        waits.sort_by_key(|w| std::cmp::Reverse(within(w)));
        waits.truncate(MAX_PER_STALL);
    }
    waits.sort_by_key(|w| (w.start, w.tid));
    let mut stacks: Vec<Vec<String>> = vec![];
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    let mut id = |s: Vec<String>| -> usize {
        let s = trimmed(s);
        *index.entry(s.clone()).or_insert_with(|| {
            stacks.push(s);
            stacks.len() - 1
        })
    };
    let kept = waits
        .into_iter()
        .map(|w| KernelWait {
            tid: w.tid,
            comm: w.comm,
            start: w.start,
            end: w.end,
            state: w.state,
            cpu: w.cpu,
            stack: id(w.stack),
            waker: w.waker.zip(w.woken).map(|(k, t)| KernelWaker {
                t,
                pid: k.tgid,
                tid: k.tid,
                comm: k.comm,
                stack: (!k.stack.is_empty()).then(|| id(k.stack)),
            }),
            instead: w.instead.map(|(tid, comm)| KernelThread { tid, comm }),
            instead_ns: w.instead_ns,
        })
        .collect();
    (kept, stacks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(tid: i32, start: u64, end: u64, stack: &[&str]) -> offcpu::Wait {
        offcpu::Wait {
            start,
            end: Some(end),
            woken: None,
            state: 'S',
            tid,
            tgid: 1,
            comm: "t".into(),
            cpu: 0,
            stack: stack.iter().map(|s| s.to_string()).collect(),
            waker: None,
            instead: None,
            instead_ns: None,
        }
    }

    #[test]
    fn stacks_are_kept_once_and_trimmed_of_the_tracepoint() {
        let a = ["__traceiter_sched_switch", "__schedule", "schedule", "futex_wait"];
        let (w, stacks) = kept(vec![wait(2, 5, 9, &a), wait(1, 1, 9, &a)], 0, 10);
        assert_eq!(stacks, vec![vec!["__schedule", "schedule", "futex_wait"]]);
        assert_eq!((w[0].tid, w[0].stack, w[1].stack), (1, 0, 0), "oldest first");
        let irq = trimmed(
            ["try_to_wake_up", "hrtimer_wakeup", "asm_sysvec_apic_timer_interrupt", "default_idle"]
                .map(String::from)
                .to_vec(),
        );
        assert_eq!(irq.last().unwrap(), "asm_sysvec_apic_timer_interrupt");
        let bpf = trimmed(
            ["_einittext", "bpf_trace_run1", "wake_up_q", "rwsem_wake"].map(String::from).to_vec(),
        );
        assert_eq!(bpf, ["wake_up_q", "rwsem_wake"]);
    }
}
