//! Writing a recording: one append-only file per source. The recorder writes; nothing else
//! does.
//!
//! Invariant: every line is written with a single `write` on an `O_APPEND` file, so a killed
//! recorder or target leaves complete lines followed by at most one partial line, which
//! readers skip.

use crate::Error;
use crate::files;
use crate::schema::Meta;
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// An append-only JSON Lines file. Written directly, or (for the recorder) from a thread of its
/// own, so that a disk that blocks writes (dirty-page throttling, a slow device) never holds up
/// the caller: lines queue, and past the queue's bound the lossy ones are counted, not written.
/// Typed by what its lines hold (`Appender<Sample>`), so that nothing but the recording's own
/// types reaches its files.
pub struct Appender<T> {
    path: PathBuf,
    buf: Vec<u8>,
    to: Sink,
    /// Where each value written is also kept in memory, with its line's stall and time
    /// ([`crate::live::Live`]): `watch` diagnoses from there, not from the file.
    keep: Option<Keep<T>>,
    lines: std::marker::PhantomData<fn(&T)>,
}

/// What [`Appender::keep_in`] hands each value written to: the value, its stall and its time.
pub type Keep<T> = Box<dyn FnMut(&T, Option<u32>, Option<u64>) + Send>;

enum Sink {
    File(File),
    Queue {
        tx: Option<std::sync::mpsc::SyncSender<Queued>>,
        /// Which of its thread's files the lines go to.
        file: usize,
        /// The thread, shared by the appenders that feed it: the last one dropped joins it.
        thread: Option<Arc<Mutex<Option<std::thread::JoinHandle<()>>>>>,
        /// Lines dropped because the queue was full.
        dropped: u64,
        /// Whether lines may be dropped (samples) or must wait for room (events).
        lossy: bool,
        /// Lossy lines queued now, against [`Lines::lossy_max`]: they never take the room the
        /// others wait for.
        lossy_queued: Arc<AtomicUsize>,
        lossy_max: usize,
    },
}

/// One thread that writes the lines of several files, and the queue that feeds it.
struct Lines {
    tx: std::sync::mpsc::SyncSender<Queued>,
    thread: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
    /// Lossy lines queued now: past half the queue they are dropped, so that a disk that blocks
    /// never leaves events waiting behind samples.
    lossy_queued: Arc<AtomicUsize>,
    lossy_max: usize,
}

impl Lines {
    /// Starts the thread that writes `files`, named after `name`, fed by a queue of at most
    /// `capacity` lines.
    fn start(files: Vec<File>, capacity: usize, name: &str, at: &Path) -> Result<Lines, Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Queued>(capacity);
        let lossy_queued = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&lossy_queued);
        let thread = std::thread::Builder::new()
            .name(format!("stallscope-write-{name}"))
            .spawn(move || write_lines(files, rx, &counted))
            .map_err(|e| Error::io(at, "cannot start its writer thread", e))?;
        Ok(Lines {
            tx,
            thread: Arc::new(Mutex::new(Some(thread))),
            lossy_queued,
            lossy_max: (capacity / 2).max(1),
        })
    }

    /// An appender of file number `file` of this thread's files.
    fn appender<T>(&self, path: &Path, file: usize, lossy: bool) -> Appender<T> {
        Appender {
            path: path.to_path_buf(),
            buf: Vec::new(),
            to: Sink::Queue {
                tx: Some(self.tx.clone()),
                file,
                thread: Some(Arc::clone(&self.thread)),
                dropped: 0,
                lossy,
                lossy_queued: Arc::clone(&self.lossy_queued),
                lossy_max: self.lossy_max,
            },
            keep: None,
            lines: std::marker::PhantomData,
        }
    }
}

/// The writer thread: what is queued is taken in one go and each file's lines written together;
/// then the thread pauses ([`GATHER`]), so that the lines of a stall's next looks, to every
/// file, gather for it instead of each waking it (and each costing the sampling loop a
/// wake-up). Whole lines in each write: a killed writer leaves at most one partial line.
fn write_lines(
    mut files: Vec<File>,
    rx: std::sync::mpsc::Receiver<Queued>,
    lossy_queued: &AtomicUsize,
) {
    helper_priority();
    let mut batches: Vec<Vec<u8>> = files.iter().map(|_| Vec::new()).collect();
    let flush = |files: &mut Vec<File>, batches: &mut Vec<Vec<u8>>| {
        for (f, b) in files.iter_mut().zip(batches.iter_mut()) {
            if !b.is_empty() {
                let _ = f.write_all(b);
                b.clear();
            }
        }
    };
    while let Ok(q) = rx.recv() {
        let mut next = Some(q);
        let mut closed = false;
        loop {
            let q = match next.take().map(Ok).unwrap_or_else(|| rx.try_recv()) {
                Ok(q) => q,
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    closed = true;
                    break;
                }
            };
            match q {
                Queued::Line(file, line, lossy) => {
                    if lossy {
                        lossy_queued.fetch_sub(1, Ordering::AcqRel);
                    }
                    let Some(b) = batches.get_mut(file) else { continue };
                    b.extend_from_slice(&line);
                    if b.len() >= BATCH_MAX {
                        let _ = files[file].write_all(b);
                        b.clear();
                    }
                }
                Queued::Barrier(done) => {
                    flush(&mut files, &mut batches);
                    let _ = done.send(());
                }
                Queued::Close => {
                    closed = true;
                    break;
                }
            }
        }
        flush(&mut files, &mut batches);
        if closed {
            return;
        }
        // Cut short when the last appender is dropped (see Drop): closing waits for no pause.
        std::thread::park_timeout(GATHER);
    }
}

impl<T: Serialize> Appender<T> {
    pub fn open(path: &Path) -> Result<Appender<T>, Error> {
        let file = create_new(path)?;
        Ok(Appender {
            path: path.to_path_buf(),
            buf: Vec::with_capacity(1 << 16),
            to: Sink::File(file),
            keep: None,
            lines: std::marker::PhantomData,
        })
    }

    /// A barrier for the lines appended so far (see [`Barrier`]); None for a direct appender,
    /// whose lines are written when `line` returns.
    pub fn barrier(&self) -> Option<Barrier> {
        match &self.to {
            Sink::Queue { tx: Some(tx), .. } => {
                Some(Barrier { queues: vec![tx.clone()], others: Vec::new() })
            }
            _ => None,
        }
    }

    /// An appender whose lines are written by a thread of its own, holding at most `capacity`
    /// lines queued; when full, `lossy` ones are dropped (and counted), others wait.
    pub fn background(path: &Path, capacity: usize, lossy: bool) -> Result<Appender<T>, Error> {
        let file = create_new(path)?;
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Lines::start(vec![file], capacity, &name, path)?.appender(path, 0, lossy))
    }

    /// Each value written from now on is also handed to `keep`, with the stall and time its line
    /// says (as a reader of the file would find them); a line dropped is handed nowhere.
    pub fn keep_in(&mut self, keep: Keep<T>) {
        self.keep = Some(keep);
    }

    /// Appends one value as one line, in one write.
    pub fn line(&mut self, v: &T) -> Result<(), Error> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, v)
            .map_err(|e| Error::io(&self.path, "cannot encode a record", e.into()))?;
        self.buf.push(b'\n');
        let stamps = self.keep.is_some().then(|| {
            let line = std::str::from_utf8(&self.buf).unwrap_or_default();
            (crate::stamps::stall_of_line(line), crate::stamps::t_of_line(line))
        });
        let dropped_before = self.dropped();
        self.write_buf()?;
        let written = self.dropped() == dropped_before;
        if let (Some(keep), Some((stall, t))) = (&mut self.keep, stamps)
            && written
        {
            keep(v, stall, t);
        }
        Ok(())
    }

    /// Writes (or queues) the line in `buf`.
    fn write_buf(&mut self) -> Result<(), Error> {
        match &mut self.to {
            Sink::File(f) => {
                f.write_all(&self.buf).map_err(|e| Error::io(&self.path, "cannot append to it", e))
            }
            Sink::Queue { tx, file, dropped, lossy, lossy_queued, lossy_max, .. } => {
                let tx = tx.as_ref().expect("open until dropped");
                let line = Queued::Line(*file, std::mem::take(&mut self.buf), *lossy);
                let sent = if *lossy {
                    if lossy_queued.fetch_add(1, Ordering::AcqRel) >= *lossy_max {
                        lossy_queued.fetch_sub(1, Ordering::AcqRel);
                        *dropped += 1;
                        return Ok(());
                    }
                    match tx.try_send(line) {
                        Ok(()) => Ok(()),
                        Err(std::sync::mpsc::TrySendError::Full(_)) => {
                            lossy_queued.fetch_sub(1, Ordering::AcqRel);
                            *dropped += 1;
                            Ok(())
                        }
                        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => Err(()),
                    }
                } else {
                    tx.send(line).map_err(|_| ())
                };
                sent.map_err(|_| {
                    Error::io(
                        &self.path,
                        "its writer thread is gone",
                        std::io::Error::other("writer stopped"),
                    )
                })
            }
        }
    }

    /// Lines dropped so far because the disk did not keep up.
    pub fn dropped(&self) -> u64 {
        match &self.to {
            Sink::Queue { dropped, .. } => *dropped,
            Sink::File(_) => 0,
        }
    }
}

impl<T> Drop for Appender<T> {
    fn drop(&mut self) {
        if let Sink::Queue { tx, thread, .. } = &mut self.to {
            // The last appender of the thread's files closes it and joins it, once every line is
            // written.
            let last = thread.take().and_then(Arc::into_inner);
            let tx = tx.take();
            if let Some(t) = last {
                if let Some(tx) = &tx {
                    let _ = tx.send(Queued::Close);
                }
                drop(tx);
                let t = t.into_inner().unwrap_or_else(|p| p.into_inner());
                if let Some(t) = t {
                    t.thread().unpark();
                    let _ = t.join();
                }
            }
        }
    }
}

/// The calling thread, one of the recorder's helpers, runs at the usual policy and weight
/// (`SCHED_OTHER`, nice 0): below the sampling loop's nice -10, level with the JVM's threads,
/// never below them. Not `SCHED_IDLE`, as the writers ran before: a helper shares locks with the
/// loop that the kernel does not see (the C library's malloc arenas: a line is allocated by the
/// loop and freed by its writer), and one preempted while it holds one waits until the CPUs
/// are idle. Beside two CPU hogs a writer preempted inside malloc for 1,045 ms held both JVMs'
/// watchers on the arena's lock, and their safepoints of that second were never events
/// (`tests/watch.rs`, `every_safepoint_of_a_jvm_that_stalls_many_times_a_second_is_an_event`).
/// At nice 0 the wait is the fair scheduler's, a few slices.
pub fn helper_priority() {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler and setpriority on the calling thread (0, its own tid) with
    // valid parameters; failure leaves it as it was.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &p);
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 0);
    }
}

/// How long a background appender's thread pauses after writing what was queued, so that the
/// lines of a stall's next looks are written together: at most this much of a recording is
/// lost when the recorder is killed outright. Measured (`watch` over one JVM stalling three
/// times a second): each line woke its writer, about 24 wake-ups a stall.
pub const GATHER: std::time::Duration = std::time::Duration::from_millis(50);
/// The most a background appender's thread writes at once.
const BATCH_MAX: usize = 1 << 20;

/// What a background appender's thread is handed: a line, or a barrier to answer once every
/// line before it is written.
enum Queued {
    /// A line of file number `.0` of the thread's files, lossy or not (`.2`).
    Line(usize, Vec<u8>, bool),
    Barrier(std::sync::mpsc::SyncSender<()>),
    /// The last appender is gone: write what is queued and end. Not left to the queue's
    /// disconnection, which a barrier still held elsewhere (a stall's, waiting in `watch`'s
    /// analysis queue for up to a second) would put off, and the recording's closing with it.
    Close,
}

/// Waits, on another thread than the writer's, until the lines appended before it was taken are
/// in their files: `stallscope watch` diagnoses a stall from the files once its end is written,
/// without its sampling loop ever waiting on the disk itself.
pub struct Barrier {
    queues: Vec<std::sync::mpsc::SyncSender<Queued>>,
    /// Other writers' answers, each given once what was asked of that writer before the barrier
    /// was taken is written (or the writer is gone): see [`Barrier::also`].
    others: Vec<std::sync::mpsc::Receiver<()>>,
}

impl Barrier {
    /// Blocks until every line appended before the barrier was taken is written (or its writer
    /// is gone). The barrier waits behind those lines, so a disk that blocks writes blocks it.
    pub fn wait(self) {
        for q in self.queues {
            let (done, answered) = std::sync::mpsc::sync_channel(1);
            if q.send(Queued::Barrier(done)).is_ok() {
                let _ = answered.recv();
            }
        }
        for answered in self.others {
            let _ = answered.recv();
        }
    }

    /// The barrier, waiting also for `answered`: a writer of its own (the kernel's waits of each
    /// stall, appended off the sampling loop once the stall's threads came back) answers, or
    /// drops its end, once it wrote what it was asked before.
    pub fn also(mut self, answered: std::sync::mpsc::Receiver<()>) -> Barrier {
        self.others.push(answered);
        self
    }
}

/// The writer side of a recording directory (tracepoint evidence, `trace.jsonl`, is appended
/// by its own writer, off the sampling loop).
pub struct Writer {
    pub dir: PathBuf,
    /// The recording's start on CLOCK_MONOTONIC and the wall clock (from the meta).
    pub start_mono_ns: u64,
    pub start_epoch_ms: i64,
    pub events: Appender<crate::schema::Event>,
    pub samples: Appender<crate::schema::Sample>,
    pub system: Appender<crate::schema::SystemSample>,
    pub context: Appender<crate::schema::StallContext>,
    pub counters: Appender<crate::disk::CounterLook>,
    /// Where every line is also kept in memory, for a diagnosis that reads no file back
    /// (`watch`); None: in the files only.
    pub live: Option<crate::Live>,
}

impl Writer {
    /// Every line written from now on, to this writer's files and to those the recorder opens
    /// beside them (given the same `live`), is also kept in `live`.
    pub fn keep_in(&mut self, live: crate::Live) {
        live.keep_writer(self);
        self.live = Some(live);
    }

    /// A barrier for every line written so far to each of the recording's files (one thread
    /// writes them all: see [`Writer::open_background`]).
    pub fn barrier(&self) -> Barrier {
        Barrier {
            queues: self.events.barrier().map(|b| b.queues).unwrap_or_default(),
            others: Vec::new(),
        }
    }

    /// Opens the recording in `dir` (created by the caller) and writes its header; its lines are
    /// written directly.
    pub fn open(dir: &Path, meta: &Meta) -> Result<Writer, Error> {
        Writer::open_with(dir, meta, false)
    }

    /// The same, with the files written by a thread of their own: the recorder's sampling loop
    /// then never waits on the disk. One thread writes all five files, so that a stall's lines
    /// to each wake it once, not once a file. Samples and system samples are dropped (and
    /// counted) past a queue of [`QUEUED`] lines; events and contexts wait for room.
    pub fn open_background(dir: &Path, meta: &Meta) -> Result<Writer, Error> {
        Writer::open_with(dir, meta, true)
    }

    fn open_with(dir: &Path, meta: &Meta, background: bool) -> Result<Writer, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(dir, "cannot create the recording directory", e))?;
        let header = serde_json::to_vec_pretty(meta)
            .map_err(|e| Error::io(dir, "cannot encode the header", e.into()))?;
        let meta_path = dir.join(files::META);
        create_new(&meta_path)?
            .write_all(&header)
            .map_err(|e| Error::io(&meta_path, "cannot write it", e))?;
        let names = [files::EVENTS, files::SAMPLES, files::SYSTEM, files::CONTEXT, files::COUNTERS];
        let paths = names.map(|f| dir.join(f));
        let lines = if background {
            let opened = paths.iter().map(|p| create_new(p)).collect::<Result<Vec<_>, _>>()?;
            Some(Lines::start(opened, QUEUED, "recording", dir)?)
        } else {
            None
        };
        // File number `i`, lossy or not when queued.
        fn at<T: Serialize>(
            lines: &Option<Lines>,
            paths: &[PathBuf],
            i: usize,
            lossy: bool,
        ) -> Result<Appender<T>, Error> {
            match lines {
                Some(l) => Ok(l.appender(&paths[i], i, lossy)),
                None => Appender::open(&paths[i]),
            }
        }
        Ok(Writer {
            dir: dir.to_path_buf(),
            start_mono_ns: meta.start_mono_ns,
            start_epoch_ms: meta.start_epoch_ms,
            events: at(&lines, &paths, 0, false)?,
            samples: at(&lines, &paths, 1, true)?,
            system: at(&lines, &paths, 2, true)?,
            context: at(&lines, &paths, 3, false)?,
            counters: at(&lines, &paths, 4, false)?,
            live: None,
        })
    }
}

/// Lines queued for a recording's writer thread at most.
pub const QUEUED: usize = 16_384;

/// Creates a recording file that must not exist yet, never through a symbolic link
/// (`O_CREAT | O_EXCL | O_NOFOLLOW`): a file planted in the directory beforehand is refused, not
/// followed or overwritten.
pub fn create_new(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| {
            Error::io(
                path,
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "already exists (a recording file is only ever created new)"
                } else {
                    "cannot create it"
                },
                e,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_recordings_barrier_covers_the_lines_of_each_of_its_files() {
        let dir = std::env::temp_dir().join(format!("stallscope-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut w = Writer::open_background(&dir, &Meta::default()).unwrap();
        for i in 0..50u64 {
            let t = 1_000 + i;
            w.counters.line(&crate::disk::CounterLook { t, ..Default::default() }).unwrap();
            w.system.line(&crate::schema::SystemSample { t, ..Default::default() }).unwrap();
        }
        w.events.line(&crate::schema::Event::NoCounters { t: 2_000, reason: "x".into() }).unwrap();
        w.barrier().wait();
        let count = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap().lines().count();
        assert_eq!(
            (count(files::COUNTERS), count(files::SYSTEM), count(files::EVENTS)),
            (50, 50, 1),
            "every file's lines before the barrier"
        );
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn lines_gathered_into_one_write_arrive_whole_and_in_order_and_a_drop_writes_the_rest() {
        let dir = std::env::temp_dir().join(format!("stallscope-gather-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lines.jsonl");
        let mut a: Appender<String> = Appender::background(&path, 8192, false).unwrap();
        // Bursts, each larger than one write (BATCH_MAX) at the end, with barriers between.
        let long = "x".repeat(300_000);
        let mut n = 0;
        for burst in 0..4 {
            for _ in 0..(if burst == 3 { 8 } else { 500 }) {
                a.line(&format!("{n} {}", if burst == 3 { &long[..] } else { "" })).unwrap();
                n += 1;
            }
            if burst == 1 {
                a.barrier().unwrap().wait();
                let text = std::fs::read_to_string(&path).unwrap();
                assert_eq!(text.lines().count(), 1000, "a barrier finds every line before it");
            }
        }
        drop(a);
        let text = std::fs::read_to_string(&path).unwrap();
        let got: Vec<u32> = text
            .lines()
            .map(|l| serde_json::from_str::<String>(l).unwrap())
            .map(|l| l.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(got, (0..n).collect::<Vec<u32>>(), "every line, once, in order");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_barrier_waits_for_the_lines_before_it_and_for_the_other_writer_s_answer() {
        let dir = std::env::temp_dir().join(format!("stallscope-barrier-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lines.jsonl");
        let mut a: Appender<u32> = Appender::background(&path, 16, false).unwrap();
        for i in 0..100 {
            a.line(&i).unwrap();
        }
        // Another writer, which writes its part before it answers.
        let (done, answered) = std::sync::mpsc::sync_channel(1);
        let wrote = Arc::new(AtomicBool::new(false));
        let w = Arc::clone(&wrote);
        let other = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            w.store(true, Ordering::SeqCst);
            done.send(()).unwrap();
        });
        a.barrier().unwrap().also(answered).wait();
        assert!(wrote.load(Ordering::SeqCst), "the barrier waited for the other writer");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 100, "every line before the barrier is written");
        // A writer gone without answering does not hold the barrier.
        let (gone, unanswered) = std::sync::mpsc::sync_channel::<()>(1);
        drop(gone);
        a.barrier().unwrap().also(unanswered).wait();
        other.join().unwrap();
        drop(a);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 58: a roll closes a recording while stalls' barriers wait in `watch`'s analysis
    /// queue. Closing waited for every barrier to be dropped (the queue's disconnection), so the
    /// next recording began up to a second later, its stalls unseen. Closing now writes every
    /// line and ends at once; a barrier waited on afterwards returns.
    #[test]
    fn closing_writes_every_line_and_waits_for_no_barrier_held_elsewhere() {
        let dir = std::env::temp_dir().join(format!("stallscope-close-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lines.jsonl");
        let mut a: Appender<u32> = Appender::background(&path, 16, false).unwrap();
        for i in 0..100 {
            a.line(&i).unwrap();
        }
        let held = a.barrier().unwrap();
        // The barrier is held by another thread until the appender is closed, or a minute.
        let (closed_tx, closed) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let told = closed.recv_timeout(std::time::Duration::from_secs(60)).is_ok();
            held.wait();
            told
        });
        drop(a);
        let _ = closed_tx.send(());
        assert!(
            holder.join().unwrap(),
            "closing returned while another thread held a barrier, and the barrier then returned"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 100, "every line is written by the time closing returns");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
