//! The signal handler and the ring of slots it writes into.
//!
//! Invariant: the handler only claims a free slot (compare-and-swap), fills it and marks it
//! ready; the writer thread copies a ready slot out and frees it. No lock, no allocation.

use crate::jvmti::{AsyncGetCallTrace, CallFrame, CallTrace, JavaVm};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Frames kept per stack, top first.
pub const DEPTH: usize = 64;
/// Stacks that can wait for the writer (it drains every few ms; the recorder signals a few
/// threads per look).
const SLOTS: usize = 256;

const FREE: u32 = 0;
const FILLING: u32 = 1;
const READY: u32 = 2;

struct Slot {
    state: AtomicU32,
    data: UnsafeCell<Raw>,
}

/// One stack as the handler took it: methods still as jmethodIDs.
#[derive(Clone, Copy)]
pub struct Raw {
    /// When the handler ran, CLOCK_MONOTONIC ns.
    pub t: u64,
    /// When the recorder sent the signal (its `sigqueue` value), 0 when it did not say: a thread
    /// in uninterruptible sleep (a page fault) takes the signal only when it wakes, where it was.
    pub asked: u64,
    pub tid: i32,
    /// AsyncGetCallTrace's count, or below 0 its reason for none.
    pub n: i32,
    pub frames: [CallFrame; DEPTH],
}

// SAFETY: a slot's data is touched only by whoever moved its state (FREE→FILLING: the handler;
// READY→FREE: the writer), with acquire/release on the state.
unsafe impl Sync for Slot {}

static RING: [Slot; SLOTS] = [const {
    Slot {
        state: AtomicU32::new(FREE),
        data: UnsafeCell::new(Raw {
            t: 0,
            asked: 0,
            tid: 0,
            n: 0,
            frames: [CallFrame { lineno: 0, method: std::ptr::null_mut() }; DEPTH],
        }),
    }
}; SLOTS];
static NEXT: AtomicUsize = AtomicUsize::new(0);
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
static AGCT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// The write end of the pipe that wakes the writer thread (-1 before it exists).
static WAKE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// The pipe the handler wakes the writer through: the writer sleeps on its read end between
/// stalls, so the agent wakes nothing while the JVM runs normally. Returns the read end.
pub fn wake_pipe() -> Option<c_int> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
        return None;
    }
    WAKE.store(fds[1], Ordering::Release);
    Some(fds[0])
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes only `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

extern "C" fn on_signal(_sig: c_int, info: *mut libc::siginfo_t, ucontext: *mut c_void) {
    // SAFETY: errno is this thread's; it is put back as it was.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel's siginfo for this delivery; its value is meaningful for SI_QUEUE only.
    let asked = unsafe {
        if !info.is_null() && (*info).si_code == libc::SI_QUEUE {
            (*info).si_value().sival_ptr as u64
        } else {
            0
        }
    };
    take(ucontext, asked);
    unsafe { *libc::__errno_location() = errno };
}

fn take(ucontext: *mut c_void, asked: u64) {
    let vm = crate::VM.load(Ordering::Acquire);
    let agct = AGCT.load(Ordering::Acquire);
    if vm.is_null() || agct.is_null() {
        return;
    }
    // SAFETY: the JVM is live while its threads take signals; GetEnv only reads the thread's own
    // state (a thread the JVM does not know gets null).
    let env = unsafe { JavaVm::jni(vm) };
    if env.is_null() {
        return;
    }
    let i = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    let slot = &RING[i];
    if slot.state.compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: this handler owns the slot (FILLING) until it marks it READY.
    let raw = unsafe { &mut *slot.data.get() };
    raw.t = mono_ns();
    raw.asked = asked;
    raw.tid = unsafe { libc::gettid() };
    let mut trace = CallTrace { env, num_frames: 0, frames: raw.frames.as_mut_ptr() };
    // SAFETY: AsyncGetCallTrace is the JVM's, meant to be called from a signal handler with the
    // handler's ucontext; it writes at most DEPTH frames.
    let f: AsyncGetCallTrace =
        unsafe { std::mem::transmute::<*mut c_void, AsyncGetCallTrace>(agct) };
    unsafe { f(&mut trace, DEPTH as i32, ucontext) };
    raw.n = trace.num_frames;
    slot.state.store(READY, Ordering::Release);
    let w = WAKE.load(Ordering::Acquire);
    if w >= 0 {
        // SAFETY: write(2) is async-signal-safe; a full pipe (EAGAIN) already holds a wake-up.
        unsafe { libc::write(w, [1u8].as_ptr().cast(), 1) };
    }
}

/// Copies out every ready stack and frees its slot.
pub fn drain() -> Vec<Raw> {
    let mut out = Vec::new();
    for slot in RING.iter() {
        if slot.state.load(Ordering::Acquire) == READY {
            // SAFETY: READY slots belong to the (single) writer until freed.
            out.push(unsafe { *slot.data.get() });
            slot.state.store(FREE, Ordering::Release);
        }
    }
    out.sort_by_key(|r| r.t);
    out
}

/// Finds AsyncGetCallTrace and installs the handler on the first free real-time signal from
/// SIGRTMIN+4; returns the signal.
pub fn install() -> Result<c_int, String> {
    // SAFETY: dlsym on the global namespace; libjvm is loaded RTLD_GLOBAL by the launcher, and
    // otherwise found by its name.
    let mut f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"AsyncGetCallTrace".as_ptr()) };
    if f.is_null() {
        let h = unsafe { libc::dlopen(c"libjvm.so".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if !h.is_null() {
            f = unsafe { libc::dlsym(h, c"AsyncGetCallTrace".as_ptr()) };
        }
    }
    if f.is_null() {
        return Err("this JVM has no AsyncGetCallTrace".into());
    }
    AGCT.store(f, Ordering::Release);
    let (lo, hi) = (libc::SIGRTMIN() + 4, libc::SIGRTMAX());
    for sig in lo..=hi {
        // SAFETY: sigaction with a null new action only reads the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        if unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } == 0 {
            return Ok(sig);
        }
    }
    Err("no free real-time signal".into())
}
