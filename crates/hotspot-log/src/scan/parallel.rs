//! One mapped input read on several threads at once: its lines are classified window by window
//! on every thread, and the records assembled from them in order on the caller's.
//!
//! Classifying a line is a pure function of its bytes (`line`); only two things carry
//! from one line to the next. The assembler's state stays on the caller's thread, which takes
//! the windows' lines in order. The scanner's context (inside a statistics table or a
//! timeout's thread list, where every line is looked at) is guessed: a window is read as if it
//! began outside both, which it nearly always does, and read again on the caller's thread, in
//! its true context, when it did not.
//!
//! Invariant: the same records in the same order, and the same accounting, as reading the input
//! on one thread (`tests/properties.rs` checks windows of a few bytes against the stream).
//! Memory is bounded by `2 × threads` windows read ahead of the one being assembled.

use super::{Context, LineReader, Scanner, Sink, Span};
use crate::fastpath::Jdk8Pause;
use crate::line::Classified;
use crate::prefilter::Prefilter;
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Bytes a window holds, short of its last line's end: small enough to share the work out
/// evenly, large enough that handing a window over costs nothing beside reading it.
pub const WINDOW: usize = 1 << 20;
/// How much of the input is let go at once (see [`read`]).
const RELEASE: usize = 16 << 20;
/// Threads beyond these wait for the one thread that assembles records.
pub const MAX_THREADS: usize = 4;

/// A span of the input and where it starts.
#[derive(Clone, Copy)]
struct Piece {
    start: usize,
    span: Span,
}

/// The lines a window recognised, numbered from 1 at the window's start. JDK 8's pause lines
/// are kept as what they say, a fifth of the size of a whole `Classified`: the assembling
/// thread reads every event another thread wrote, and each cache line it waits for is one
/// the other core filled (a third of the assembler's time, whole).
#[derive(Default)]
struct Events<'a> {
    pauses: Vec<(u64, Jdk8Pause)>,
    other: Vec<(u64, Classified<'a>)>,
}

impl<'a> Events<'a> {
    fn push(&mut self, line: u64, c: &Classified<'a>) {
        match Jdk8Pause::of(c) {
            Some(p) => self.pauses.push((line, p)),
            None => self.other.push((line, *c)),
        }
    }

    /// Each event in line order, whole again.
    fn each(&self, mut f: impl FnMut(u64, &Classified<'a>)) {
        let (ps, os) = (&self.pauses, &self.other);
        let (mut i, mut j) = (0, 0);
        while i < ps.len() || j < os.len() {
            if j == os.len() || (i < ps.len() && ps[i].0 < os[j].0) {
                f(ps[i].0, &ps[i].1.into());
                i += 1;
            } else {
                f(os[j].0, &os[j].1);
                j += 1;
            }
        }
    }

    fn clear(&mut self) {
        self.pauses.clear();
        self.other.clear();
    }
}

/// A window's lines, classified.
struct Read<'a> {
    piece: Piece,
    /// Its lines' accounting, and the context at its end.
    rd: LineReader,
    lines: u64,
    events: Events<'a>,
}

struct State<'a> {
    /// Where the next piece starts, its index, and the index of the next to assemble.
    pos: usize,
    next: usize,
    consumed: usize,
    ready: BTreeMap<usize, Read<'a>>,
    /// Event buffers handed back, to be filled again.
    spare: Vec<Events<'a>>,
    /// A thread panicked, or the caller's did: everyone stops.
    stop: bool,
    /// The bytes assembled, up to which the input can be let go, once a thread gets to it.
    release: usize,
}

struct Shared<'a> {
    data: &'a [u8],
    file: u32,
    window: usize,
    ahead: usize,
    examples: usize,
    state: Mutex<State<'a>>,
    changed: Condvar,
    /// Tells the input's owner what can be let go; the bytes it was told of, which only grow.
    done: &'a (dyn Fn(usize) + Sync),
    released: Mutex<usize>,
}

impl<'a> Shared<'a> {
    fn lock(&self) -> MutexGuard<'_, State<'a>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'g>(&self, g: MutexGuard<'g, State<'a>>) -> MutexGuard<'g, State<'a>> {
        self.changed.wait(g).unwrap_or_else(|e| e.into_inner())
    }

    /// The next piece to read, if there is one and the read-ahead has room for it.
    fn claim(&self, st: &mut State<'a>) -> Option<(usize, Piece, Events<'a>)> {
        if st.pos >= self.data.len() || st.next >= st.consumed + self.ahead {
            return None;
        }
        // Each piece from the base window: how windows are cut changes nothing read.
        let span = Span::at(self.data, st.pos, &mut self.window.clone());
        let piece = Piece { start: st.pos, span };
        st.pos = span.end();
        st.next += 1;
        Some((st.next - 1, piece, st.spare.pop().unwrap_or_default()))
    }

    /// Classifies a piece's lines, as if it began outside any table or thread list.
    fn read(&self, finder: &Prefilter, piece: Piece, mut events: Events<'a>) -> Read<'a> {
        let mut rd = LineReader::keeping(self.examples);
        let mut lines = 0u64;
        if let Span::Lines { end, eof } = piece.span {
            let hay = &self.data[piece.start..end];
            rd.region(finder, self.file, hay, eof, &mut lines, &mut |line, c| events.push(line, c));
        }
        Read { piece, rd, lines, events }
    }

    /// Lets the input go up to where it was assembled, unless another thread is at it. Off
    /// the assembling thread when another is there: each release is a `madvise` that zaps the
    /// pages (a twentieth of the time), and the assembling thread has the most to do.
    fn let_go(&self, upto: usize) {
        if let Ok(mut released) = self.released.try_lock()
            && upto > *released
        {
            (self.done)(upto);
            *released = upto;
        }
    }

    /// Stops everyone: on a panic, or when the caller is done.
    fn stop(&self) {
        self.lock().stop = true;
        self.changed.notify_all();
    }
}

/// Stops the other threads when its own is done (`always`), or only when it panics.
struct StopGuard<'s, 'a> {
    sh: &'s Shared<'a>,
    always: bool,
}

impl Drop for StopGuard<'_, '_> {
    fn drop(&mut self) {
        if self.always || std::thread::panicking() {
            self.sh.stop();
        }
    }
}

fn worker(sh: &Shared<'_>) {
    let _stop = StopGuard { sh, always: false };
    let finder = Prefilter::new();
    // The last release this thread saw asked for.
    let mut let_go = 0;
    loop {
        let (idx, piece, events) = {
            let mut st = sh.lock();
            loop {
                if st.stop {
                    return;
                }
                if st.release > let_go {
                    let_go = st.release;
                    drop(st);
                    sh.let_go(let_go);
                    st = sh.lock();
                    continue;
                }
                if let Some(c) = sh.claim(&mut st) {
                    break c;
                }
                // Nothing left to read: the thread stays to let the last windows go while the
                // caller assembles them, until they all are.
                if st.pos >= sh.data.len() && st.consumed == st.next {
                    return;
                }
                st = sh.wait(st);
            }
        };
        let r = sh.read(&finder, piece, events);
        sh.lock().ready.insert(idx, r);
        sh.changed.notify_all();
    }
}

/// Reads `data` (input `file`) into `sc` on its threads; what [`Scanner::scan_slice`] does on
/// one thread after the input's first stamps. Returns the input's line count.
pub(crate) fn read(
    sc: &mut Scanner,
    file: u32,
    data: &[u8],
    out: &mut impl Sink,
    done: &(dyn Fn(usize) + Sync),
) -> u64 {
    let threads = sc.threads;
    let sh = Shared {
        data,
        file,
        window: sc.window,
        ahead: 2 * threads,
        examples: sc.rd.examples,
        state: Mutex::new(State {
            pos: 0,
            next: 0,
            consumed: 0,
            ready: BTreeMap::new(),
            spare: Vec::new(),
            stop: false,
            release: 0,
        }),
        changed: Condvar::new(),
        done,
        released: Mutex::new(0),
    };
    let mut line_no = 0u64;
    // `done` in steps of RELEASE bytes, not per window: letting pages go is a TLB shootdown
    // across the threads' cores each time. The other threads do it. Once every window is read,
    // each one is let go as soon as it is assembled, so that little is left for this thread
    // to let go at the end, when it would be all that is running.
    let mut marked = 0usize;
    let mut release = |st: &mut State<'_>, end: usize| {
        if end - marked >= RELEASE || st.pos >= data.len() {
            st.release = end;
            marked = end;
        }
    };
    std::thread::scope(|scope| {
        // Before the threads start: a thread that fails to start panics here, and the guard
        // then stops those already started, which would otherwise wait for windows to be
        // assembled, and the scope for them.
        let _stop = StopGuard { sh: &sh, always: true };
        for _ in 1..threads {
            scope.spawn(|| worker(&sh));
        }
        let finder = Prefilter::new();
        loop {
            let mut st = sh.lock();
            let mut r = loop {
                let want = st.consumed;
                if let Some(r) = st.ready.remove(&want) {
                    break r;
                }
                if st.stop || (st.pos >= data.len() && st.next == st.consumed) {
                    return;
                }
                if let Some((idx, piece, events)) = sh.claim(&mut st) {
                    drop(st);
                    let r = sh.read(&finder, piece, events);
                    st = sh.lock();
                    st.ready.insert(idx, r);
                    continue;
                }
                st = sh.wait(st);
            };
            drop(st);
            match r.piece.span {
                Span::Long { .. } => sc.rd.long_line(&mut line_no),
                Span::Lines { end, eof } => {
                    let start = r.piece.start;
                    if sc.rd.context == Context::default() {
                        sc.rd.absorb(&r.rd, line_no);
                        // By reference: moving each out of the buffer was a copy of a few
                        // hundred bytes a line, a fifth of this thread's time.
                        r.events.each(|line, c| sc.push(file, line_no + line, c, out));
                        line_no += r.lines;
                    } else {
                        // It began inside a table or thread list: read again, knowing so.
                        sc.region(file, &data[start..end], eof, &mut line_no, out);
                    }
                }
            }
            r.events.clear();
            let mut st = sh.lock();
            release(&mut st, r.piece.span.end());
            st.consumed += 1;
            st.spare.push(r.events);
            drop(st);
            sh.changed.notify_all();
        }
    });
    sh.let_go(data.len());
    line_no
}
