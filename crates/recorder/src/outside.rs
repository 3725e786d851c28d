//! The culprits' code in a JVM that will not answer, read from outside: where each thread worth a
//! stack stands, by the kernel's own sampling of a running thread (`procwatch::perf`: its pc,
//! frame pointers and the top of its stack, taken on its timer tick) or, for a thread blocked in
//! a page fault, from `/proc` (its pc and sp); each pc named as a Java method through the JVM's
//! own structures (`procwatch::codecache`), compiled frames unwound to their callers. Nothing is
//! loaded into the JVM and no thread is stopped. Written to `outside.jsonl`, the lines of
//! `frames.jsonl` with event `outside-sample`.
//!
//! Invariant: the sampling loop only drains ring buffers and hands raw samples over a channel; the
//! code cache is read on a thread of its own. Bounded: at most [`MAX_THREADS`] threads sampled
//! at once, a stack per thread every [`EVERY_NS`], at most [`PER_STALL`] per thread and stall.

use hotspot_log::jfr::JavaFrame;
use procwatch::codecache::{Code, CodeCache};
use procwatch::perf::ThreadSampler;
use procwatch::task::{Syscall, TaskSample};
use recording::Notices;
use recording::{Appender, FrameSample, FramesLine, FramesNote, files};
use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};

/// Threads sampled at once.
const MAX_THREADS: usize = 4;
/// Samplers kept paused between stalls, for the threads that run in the next (the same few,
/// a loop or a collector, stall after stall): opening one costs a system call, a ring mapping
/// and its teardown at the stall's end. No more than are sampled at once: each holds its ring's
/// locked pages, which the kernel counts against the user's `perf_event_mlock_kb` and
/// `RLIMIT_MEMLOCK`.
const MAX_PAUSED: usize = MAX_THREADS;
/// How often, in a thread's CPU time, the kernel samples it.
const PERIOD_NS: u64 = 5_000_000;
/// A stack per thread at most this often (on the recording's clock).
const EVERY_NS: u64 = 20_000_000;
/// Stacks per thread and stall.
const PER_STALL: u32 = 25;
/// Frames walked per stack.
const MAX_FRAMES: usize = 32;
/// The event name of these stacks.
pub const EVENT: &str = recording::OUTSIDE_SAMPLE;

/// What the naming thread is handed.
enum Msg {
    Raw(Raw),
    /// Why some code could not be had, for the recording.
    Note(String),
}

/// A raw sample to name.
struct Raw {
    tid: i32,
    name: String,
    t: u64,
    pc: u64,
    sp: u64,
    fp: u64,
    /// The top of its stack as the kernel copied it (empty for a blocked thread: its stack is
    /// read from the JVM, where it holds still).
    stack: Vec<u8>,
    stack_base: u64,
}

pub struct Outside {
    pid: i32,
    tx: Option<Sender<Msg>>,
    thread: Option<std::thread::JoinHandle<()>>,
    samplers: HashMap<i32, ThreadSampler>,
    /// Samplers of the last stalls' threads, paused: resumed if the thread runs again.
    paused: HashMap<i32, ThreadSampler>,
    /// Per thread: when its last stack was handed over, and how many this stall.
    last: HashMap<i32, (u64, u32)>,
    stall: u32,
    /// Why sampling a running thread was refused, once said.
    refused: bool,
    notices: Notices,
}

impl Outside {
    /// Stacks of JVM `pid` into `dir/outside.jsonl`; a refusal is also told to `notices`.
    pub fn start(
        pid: i32,
        dir: &Path,
        notices: Notices,
        live: Option<&recording::Live>,
    ) -> anyhow::Result<Outside> {
        let mut out = Appender::open(&dir.join(files::OUTSIDE))?;
        if let Some(l) = live {
            l.keep_outside(&mut out);
        }
        let (tx, rx): (Sender<Msg>, Receiver<Msg>) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("stallscope-code".into()).spawn(move || {
            let mut cache: Option<Result<CodeCache, String>> = None;
            for m in rx {
                let r = match m {
                    Msg::Raw(r) => r,
                    Msg::Note(note) => {
                        let _ = out.line(&FramesLine::Note(FramesNote { note }));
                        continue;
                    }
                };
                let cc = cache.get_or_insert_with(|| CodeCache::read(pid).map_err(|e| e.to_string()));
                match cc {
                    Ok(cc) => {
                        let frames = name(cc, pid, &r);
                        if !frames.is_empty() {
                            let _ = out.line(&FramesLine::Sample(FrameSample { t: r.t, tid: r.tid, name: r.name, event: EVENT.into(), latency_ns: None, frames: recording::disk::all(frames), truncated: false, agct: None }));
                        }
                    }
                    Err(e) => {
                        let _ = out.line(&FramesLine::Note(FramesNote { note: format!("no code from outside: the JVM's code cache could not be read ({e})") }));
                        return;
                    }
                }
            }
        })?;
        Ok(Outside {
            pid,
            tx: Some(tx),
            thread: Some(thread),
            samplers: HashMap::new(),
            paused: HashMap::new(),
            last: HashMap::new(),
            stall: 0,
            refused: false,
            notices,
        })
    }

    /// After each look of stall `stall`: sample the running threads worth a stack, and take the
    /// pc of those blocked in a page fault.
    pub fn look(&mut self, cur: &[TaskSample], t: u64, stall: u32) {
        if stall != self.stall {
            self.stall = stall;
            self.last.clear();
            // A paused sampler's thread that is gone is not coming back.
            let alive: std::collections::HashSet<i32> = cur.iter().map(|th| th.tid).collect();
            self.paused.retain(|tid, _| alive.contains(tid));
        }
        for th in cur.iter().filter(|th| worth(th)) {
            let (last_t, n) = self.last.get(&th.tid).copied().unwrap_or((0, 0));
            if n >= PER_STALL {
                continue;
            }
            match (th.state, &th.syscall) {
                (_, Syscall::NotInSyscall { sp, pc })
                    if th.state != 'R' && t >= last_t + EVERY_NS =>
                {
                    self.send(
                        Raw {
                            tid: th.tid,
                            name: th.comm.clone(),
                            t,
                            pc: *pc,
                            sp: *sp,
                            fp: 0,
                            stack: Vec::new(),
                            stack_base: *sp,
                        },
                        n,
                    );
                }
                ('R', _)
                    if !self.samplers.contains_key(&th.tid)
                        && self.samplers.len() < MAX_THREADS
                        && !self.refused =>
                {
                    let resumed =
                        self.paused.remove(&th.tid).and_then(|mut s| s.resume().ok().map(|()| s));
                    if let Some(s) = resumed {
                        self.samplers.insert(th.tid, s);
                        continue;
                    }
                    let mut opened = ThreadSampler::open(th.tid, PERIOD_NS);
                    // The paused samplers' rings may be what the kernel's lock limit refused:
                    // give them up, and try once more.
                    if matches!(&opened, Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
                        && !self.paused.is_empty()
                    {
                        self.paused.clear();
                        opened = ThreadSampler::open(th.tid, PERIOD_NS);
                    }
                    match opened {
                        Ok(s) => {
                            self.samplers.insert(th.tid, s);
                        }
                        // The thread ended between /proc and the open, or descriptors
                        // ran short: another thread, or a later sample, may do.
                        Err(e) if e.kind() != std::io::ErrorKind::PermissionDenied => {}
                        Err(e) => {
                            self.refused = true;
                            let note = format!("no code of running threads from outside: {e}");
                            self.notices.warn(format!("pid {}: {note}", self.pid));
                            if let Some(tx) = &self.tx {
                                let _ = tx.send(Msg::Note(note));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        let names: HashMap<i32, &str> = cur.iter().map(|th| (th.tid, th.comm.as_str())).collect();
        let mut raws = Vec::new();
        for (tid, s) in self.samplers.iter_mut() {
            let (mut last_t, mut n) = self.last.get(tid).copied().unwrap_or((0, 0));
            for u in s.drain() {
                if n >= PER_STALL || u.t < last_t + EVERY_NS {
                    continue;
                }
                last_t = u.t;
                n += 1;
                raws.push(Raw {
                    tid: *tid,
                    name: names.get(tid).unwrap_or(&"").to_string(),
                    t: u.t,
                    pc: u.ip,
                    sp: u.sp,
                    fp: u.bp,
                    stack_base: u.sp,
                    stack: u.stack,
                });
            }
            self.last.insert(*tid, (last_t, n));
        }
        for r in raws {
            if let Some(tx) = &self.tx {
                let _ = tx.send(Msg::Raw(r));
            }
        }
    }

    fn send(&mut self, r: Raw, n: u32) {
        self.last.insert(r.tid, (r.t, n + 1));
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Raw(r));
        }
    }

    /// The stall is over: stop sampling its threads, keeping a few samplers paused.
    pub fn over(&mut self) {
        for (tid, mut s) in self.samplers.drain() {
            if self.paused.len() < MAX_PAUSED {
                s.pause();
                self.paused.insert(tid, s);
            }
        }
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        self.samplers.clear();
        self.paused.clear();
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Threads whose code is worth naming: an application thread on a CPU, in uninterruptible sleep,
/// or stopped in a page fault (outside any system call).
fn worth(t: &TaskSample) -> bool {
    super::stacks::worth_a_stack(t)
        || (matches!(t.syscall, Syscall::NotInSyscall { .. })
            && !procwatch::jvm_threads::jvm_internal(&t.comm))
}

/// The Java frames of a raw sample, top first.
fn name(cc: &CodeCache, pid: i32, r: &Raw) -> Vec<JavaFrame> {
    let mem = procwatch::vmstructs::Memory { pid };
    // A thread blocked in the kernel holds its stack still: read its top at once.
    let mut copied;
    let r = if r.stack.is_empty() {
        copied = Raw {
            stack: vec![0u8; procwatch::perf::STACK_BYTES as usize],
            name: String::new(),
            ..*r
        };
        let n = mem.read_some(r.sp, &mut copied.stack).unwrap_or(0);
        copied.stack.truncate(n);
        &copied
    } else {
        r
    };
    let word = |addr: u64| -> Option<u64> {
        let off = addr.checked_sub(r.stack_base)? as usize;
        match r.stack.get(off..off + 8) {
            Some(b) => Some(u64::from_le_bytes(b.try_into().ok()?)),
            None => mem.u64(addr).ok(),
        }
    };
    // The stack is a copy already; the code cache and the methods' names are read a page at a
    // time.
    procwatch::vmstructs::Memory::snapshot(|| cc.walk(r.pc, r.sp, r.fp, &word, MAX_FRAMES))
        .into_iter()
        .enumerate()
        // Below the top, a stub is the VM's way into Java (the call stub): no frame to show.
        .filter(|(i, c)| *i == 0 || !matches!(c, Code::Stub { .. }))
        .filter_map(|(_, c)| match c {
            Code::Compiled { method, .. } => {
                Some(JavaFrame { method, line: None, kind: "JIT compiled".into() })
            }
            Code::Interpreted { method, .. } => Some(JavaFrame {
                method: method.unwrap_or_else(|| "(interpreted)".into()),
                line: None,
                kind: "Interpreted".into(),
            }),
            Code::Stub { name, .. } => {
                Some(JavaFrame { method: name, line: None, kind: "stub".into() })
            }
            Code::Vm { offset } => Some(JavaFrame {
                method: format!("libjvm.so+{offset:#x}"),
                line: None,
                kind: "VM".into(),
            }),
            Code::Native => None,
        })
        .collect()
}
