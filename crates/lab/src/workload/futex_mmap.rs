//! The futex-mmap workload (seed 001, Java RTS on Linux): a latency-critical thread waits on a
//! condition variable with an absolute timeout every period and records how late it woke,
//! while another thread maps, touches and unmaps large regions. Shared (process-shared)
//! futexes and mlock made the waker contend with mmap_lock in 2008; since Linux 6.4 neither a
//! futex nor a page fault takes it in the common case. `--path` adds, after each wake-up, one of
//! the operations that still do (and the measured lateness includes it): a fault in a mapping
//! not faulted before (per-VMA locks fall back to mmap_lock to set up its anon_vma), reading
//! `/proc/self/smaps_rollup` or `maps` (mmap_lock for read), `mprotect` or a 64 KiB `mmap`/`munmap` (a
//! large `malloc`; mmap_lock for write).
//!
//! Invariant: the measuring thread allocates nothing in its loop; every variant restores the
//! process (munlockall, scheduling policy) before the next begins.

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use procwatch::clock::mono_ns;
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Churn {
    /// mmap, touch every page, munmap, again: mmap_lock taken for write each cycle.
    #[serde(rename = "churn")]
    MapUnmap,
    /// One mapping, made before the waiter starts, touched and MADV_DONTNEEDed again and
    /// again: faults, no mmap/munmap (under mlockall DONTNEED is refused: writes only).
    Reuse,
    /// No second thread: the baseline.
    None,
}

/// Which futex the waiter sleeps on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Futex {
    /// glibc's default: never takes mmap_lock.
    Private,
    /// pthread_*attr_setpshared: its wake-up looks the address up under mmap_lock.
    Shared,
}

/// What the waiter does after each wake-up, inside the time measured.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WakePath {
    /// Nothing more: the futex wait alone.
    Wait,
    /// Touch a page of a mapping never faulted before (mmap_lock for read, on the fallback
    /// from per-VMA locks). Without --mlock only: mlockall populates every mapping first.
    Fault,
    /// Read /proc/self/smaps_rollup (mmap_lock for read), as a monitoring agent does.
    Smaps,
    /// Read /proc/self/maps (per-VMA locks since Linux 6.17, mmap_lock for read before).
    Maps,
    /// mprotect one page of its own (mmap_lock for write), as a JIT or a guard page does.
    Mprotect,
    /// mmap and munmap 64 KiB (mmap_lock for write, twice), as a large malloc and free do.
    Mmap,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Variant {
    pub shared: bool,
    pub mlock: bool,
    pub churn: Churn,
    pub fifo: bool,
    pub path: WakePath,
}

impl Variant {
    pub fn name(&self) -> String {
        format!(
            "{} futex, {}{}{}{}",
            if self.shared { "shared" } else { "private" },
            match self.churn {
                Churn::MapUnmap => "mmap churn",
                Churn::Reuse => "reused mapping",
                Churn::None => "no churn",
            },
            if self.mlock { ", mlockall" } else { "" },
            if self.fifo { ", SCHED_FIFO" } else { "" },
            match self.path {
                WakePath::Wait => "",
                WakePath::Fault => ", then a first fault",
                WakePath::Smaps => ", then smaps_rollup",
                WakePath::Maps => ", then maps",
                WakePath::Mprotect => ", then mprotect",
                WakePath::Mmap => ", then mmap+munmap",
            }
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub variant: Variant,
    pub name: String,
    pub wakeups: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
    pub churn_cycles: u64,
    /// How long each mmap and munmap call of the churning thread took: the time it held
    /// mmap_lock for write (mlockall makes mmap populate and lock the region inside the call).
    pub mmap_p50_ns: u64,
    pub mmap_max_ns: u64,
    pub munmap_p50_ns: u64,
    pub munmap_max_ns: u64,
    /// What could not be applied (SCHED_FIFO or mlockall without privilege).
    pub notes: Vec<String>,
}

/// A mutex and condition variable, process-private or process-shared, in memory that never
/// moves (a shared anonymous page for the shared variant, as a real shared futex lives).
struct Sync {
    mutex: *mut libc::pthread_mutex_t,
    cond: *mut libc::pthread_cond_t,
    page: *mut libc::c_void,
}

unsafe impl Send for Sync {}
unsafe impl std::marker::Sync for Sync {}

impl Sync {
    fn new(shared: bool) -> Result<Sync> {
        let flags = if shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE } | libc::MAP_ANONYMOUS;
        // SAFETY: an anonymous mapping of one page, unmapped in Drop.
        let page = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0)
        };
        if page == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mapping the futex page");
        }
        let mutex = page as *mut libc::pthread_mutex_t;
        // SAFETY: both objects fit in the page (64 + 48 bytes), suitably aligned.
        let cond = unsafe { (page as *mut u8).add(256) } as *mut libc::pthread_cond_t;
        let pshared =
            if shared { libc::PTHREAD_PROCESS_SHARED } else { libc::PTHREAD_PROCESS_PRIVATE };
        // SAFETY: initialising pthread objects in place with their attributes.
        unsafe {
            let mut ma: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut ma);
            libc::pthread_mutexattr_setpshared(&mut ma, pshared);
            libc::pthread_mutex_init(mutex, &ma);
            libc::pthread_mutexattr_destroy(&mut ma);
            let mut ca: libc::pthread_condattr_t = std::mem::zeroed();
            libc::pthread_condattr_init(&mut ca);
            libc::pthread_condattr_setpshared(&mut ca, pshared);
            libc::pthread_condattr_setclock(&mut ca, libc::CLOCK_MONOTONIC);
            libc::pthread_cond_init(cond, &ca);
            libc::pthread_condattr_destroy(&mut ca);
        }
        Ok(Sync { mutex, cond, page })
    }
}

impl Drop for Sync {
    fn drop(&mut self) {
        // SAFETY: no thread uses the objects any more; then the page goes.
        unsafe {
            libc::pthread_cond_destroy(self.cond);
            libc::pthread_mutex_destroy(self.mutex);
            libc::munmap(self.page, 4096);
        }
    }
}

/// What the waiter needs for its `--path`, made before it starts measuring.
struct PathState {
    path: WakePath,
    /// `Fault`: pages each in a mapping of its own (separated by inaccessible pages, so that
    /// none merges with its neighbour), none faulted yet; `Mprotect`: the page it toggles.
    base: *mut u8,
    pages: usize,
    len: usize,
    next: usize,
    smaps: Option<std::fs::File>,
    buf: Vec<u8>,
    writable: bool,
}

// SAFETY: the pages belong to the state alone, which one thread uses at a time.
unsafe impl Send for PathState {}

/// The most fresh mappings `Fault` prepares (each is a VMA: the default limit is 65,530).
const MAX_FRESH: usize = 20_000;

impl PathState {
    fn new(path: WakePath, wakeups: usize) -> Result<PathState> {
        let mut st = PathState {
            path,
            base: std::ptr::null_mut(),
            pages: 0,
            len: 0,
            next: 0,
            smaps: None,
            buf: vec![0; 64 << 10],
            writable: true,
        };
        match path {
            WakePath::Wait | WakePath::Mmap => {}
            WakePath::Smaps | WakePath::Maps => {
                let f = if path == WakePath::Smaps { "smaps_rollup" } else { "maps" };
                st.smaps = Some(
                    std::fs::File::open(format!("/proc/self/{f}"))
                        .with_context(|| format!("opening /proc/self/{f}"))?,
                )
            }
            WakePath::Mprotect | WakePath::Fault => {
                st.pages = if path == WakePath::Fault { wakeups.clamp(1, MAX_FRESH) } else { 1 };
                st.len = st.pages * 2 * 4096;
                // SAFETY: a fresh inaccessible reservation, unmapped in Drop.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        st.len,
                        libc::PROT_NONE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                        -1,
                        0,
                    )
                };
                if p == libc::MAP_FAILED {
                    return Err(std::io::Error::last_os_error()).context("reserving the pages");
                }
                st.base = p as *mut u8;
                for i in 0..st.pages {
                    // SAFETY: one page inside the reservation; every other page stays
                    // inaccessible, so each accessible page is a mapping of its own.
                    let rc = unsafe {
                        libc::mprotect(
                            st.base.add(i * 2 * 4096) as *mut libc::c_void,
                            4096,
                            libc::PROT_READ | libc::PROT_WRITE,
                        )
                    };
                    if rc != 0 {
                        return Err(std::io::Error::last_os_error())
                            .context("making the fresh mappings (vm.max_map_count?)");
                    }
                }
            }
        }
        Ok(st)
    }

    /// The operation, once.
    fn step(&mut self) {
        match self.path {
            WakePath::Wait => {}
            WakePath::Fault => {
                if self.next < self.pages {
                    // SAFETY: an accessible page of the reservation, touched once.
                    unsafe { std::ptr::write_volatile(self.base.add(self.next * 2 * 4096), 1) };
                    self.next += 1;
                }
            }
            WakePath::Smaps | WakePath::Maps => {
                use std::io::{Read, Seek};
                if let Some(f) = self.smaps.as_mut() {
                    let _ = f.seek(std::io::SeekFrom::Start(0));
                    while matches!(f.read(&mut self.buf), Ok(n) if n > 0) {}
                }
            }
            WakePath::Mprotect => {
                self.writable = !self.writable;
                let prot = if self.writable {
                    libc::PROT_READ | libc::PROT_WRITE
                } else {
                    libc::PROT_READ
                };
                // SAFETY: the one accessible page of the reservation.
                unsafe { libc::mprotect(self.base as *mut libc::c_void, 4096, prot) };
            }
            WakePath::Mmap => {
                if let Some(p) = anon_map(64 << 10) {
                    // SAFETY: the mapping just made, unmapped at once.
                    unsafe { libc::munmap(p as *mut libc::c_void, 64 << 10) };
                }
            }
        }
    }
}

impl Drop for PathState {
    fn drop(&mut self) {
        if !self.base.is_null() {
            // SAFETY: the reservation made in `new`.
            unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
        }
    }
}

/// A fresh private anonymous read-write mapping of `len` bytes (populated at once under
/// mlockall), or `None` if the kernel refused it. The caller unmaps it.
fn anon_map(len: usize) -> Option<*mut u8> {
    // SAFETY: a new anonymous mapping; no existing memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

/// Times of the churning thread's mmap and munmap calls.
struct ChurnTimes {
    mmap: Histogram<u64>,
    munmap: Histogram<u64>,
}

fn churn_loop(
    kind: Churn,
    region: usize,
    premapped: Option<usize>,
    stop: &AtomicBool,
    cycles: &AtomicU64,
) -> ChurnTimes {
    let mut t = ChurnTimes {
        mmap: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds"),
        munmap: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds"),
    };
    let touch = |p: *mut u8| {
        for off in (0..region).step_by(4096) {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile(p.add(off), 1) };
        }
    };
    let map = |t: &mut ChurnTimes| {
        let t0 = mono_ns();
        let p = anon_map(region);
        t.mmap.saturating_record(mono_ns() - t0);
        p
    };
    let unmap = |t: &mut ChurnTimes, p: *mut u8| {
        let t0 = mono_ns();
        // SAFETY: a mapping made by `map`.
        unsafe { libc::munmap(p as *mut libc::c_void, region) };
        t.munmap.saturating_record(mono_ns() - t0);
    };
    match kind {
        Churn::None => {}
        Churn::MapUnmap => {
            while !stop.load(Ordering::Relaxed) {
                let Some(p) = map(&mut t) else { break };
                touch(p);
                unmap(&mut t, p);
                cycles.fetch_add(1, Ordering::Relaxed);
            }
        }
        Churn::Reuse => {
            // Mapped (and, under mlockall, populated) before the waiter started: the one
            // mapping a program makes at startup, off the latency-critical path.
            let Some(p) = premapped.map(|a| a as *mut u8).or_else(|| map(&mut t)) else {
                return t;
            };
            while !stop.load(Ordering::Relaxed) {
                touch(p);
                // SAFETY: the same mapping; DONTNEED makes the next touch fault again.
                unsafe { libc::madvise(p as *mut libc::c_void, region, libc::MADV_DONTNEED) };
                cycles.fetch_add(1, Ordering::Relaxed);
            }
            unmap(&mut t, p);
        }
    }
    t
}

/// Runs one variant for `duration`, waking every `period`.
pub fn run_variant(
    v: Variant,
    period: Duration,
    duration: Duration,
    region: usize,
    heartbeat: bool,
) -> Result<Outcome> {
    let mut notes = Vec::new();
    if v.mlock {
        // SAFETY: mlockall has no memory-safety preconditions.
        if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
            notes.push(format!(
                "mlockall failed: {} (needs CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK)",
                std::io::Error::last_os_error()
            ));
        }
    }
    let sync = Arc::new(Sync::new(v.shared)?);
    let wakeups = (duration.as_nanos() / period.as_nanos().max(1)) as usize + 16;
    let path = PathState::new(v.path, wakeups)?;
    let stop = Arc::new(AtomicBool::new(false));
    let cycles = Arc::new(AtomicU64::new(0));
    // `Reuse`'s one mapping is made before the waiter starts (its address passed as a number).
    // Unmapped by the churning thread.
    let premapped =
        (v.churn == Churn::Reuse).then(|| anon_map(region)).flatten().map(|p| p as usize);
    let churner = {
        let (stop, cycles) = (Arc::clone(&stop), Arc::clone(&cycles));
        std::thread::Builder::new()
            .name("mmap-churn".into())
            .spawn(move || churn_loop(v.churn, region, premapped, &stop, &cycles))?
    };
    let measurer = {
        let sync = Arc::clone(&sync);
        let mut path = path;
        std::thread::Builder::new().name("latency-critical".into()).spawn(
            move || -> (Histogram<u64>, Option<String>) {
                let mut note = None;
                if v.fifo {
                    let param = libc::sched_param { sched_priority: 10 };
                    // SAFETY: our own thread.
                    if unsafe {
                        libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param)
                    } != 0
                    {
                        note = Some(
                            "SCHED_FIFO not permitted (needs CAP_SYS_NICE); ran at normal priority"
                                .to_string(),
                        );
                    }
                }
                let mut hist =
                    Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("static bounds");
                // The recorder watches this thread as it watches a JVM's hiccup meter.
                let mut beat = if heartbeat {
                    procwatch::heartbeat::HeartbeatWriter::create(period.as_nanos() as u64).ok()
                } else {
                    None
                };
                let period_ns = period.as_nanos() as u64;
                let end = mono_ns() + duration.as_nanos() as u64;
                let mut deadline = mono_ns();
                while deadline < end {
                    deadline += period_ns;
                    let ts = libc::timespec {
                        tv_sec: (deadline / 1_000_000_000) as libc::time_t,
                        tv_nsec: (deadline % 1_000_000_000) as libc::c_long,
                    };
                    // SAFETY: initialised objects that outlive this thread; nobody signals, so
                    // the wait always ends by timeout at the deadline.
                    unsafe {
                        libc::pthread_mutex_lock(sync.mutex);
                        while libc::pthread_cond_timedwait(sync.cond, sync.mutex, &ts)
                            != libc::ETIMEDOUT
                        {}
                        libc::pthread_mutex_unlock(sync.mutex);
                    }
                    path.step();
                    let late = mono_ns().saturating_sub(deadline);
                    hist.saturating_record(late);
                    if let Some(b) = beat.as_mut() {
                        b.tick();
                    }
                    // After a long stall, wait for the next period rather than bursting.
                    let now = mono_ns();
                    if now > deadline + period_ns {
                        deadline = now;
                    }
                }
                (hist, note)
            },
        )?
    };
    let (hist, note) =
        measurer.join().map_err(|_| anyhow::anyhow!("the latency thread panicked"))?;
    stop.store(true, Ordering::Relaxed);
    let times = churner.join().map_err(|_| anyhow::anyhow!("the churning thread panicked"))?;
    if v.mlock {
        // SAFETY: undoes mlockall.
        unsafe { libc::munlockall() };
    }
    notes.extend(note);
    Ok(Outcome {
        variant: v,
        name: v.name(),
        wakeups: hist.len(),
        p50_ns: hist.value_at_quantile(0.5),
        p99_ns: hist.value_at_quantile(0.99),
        p99_9_ns: hist.value_at_quantile(0.999),
        max_ns: hist.max(),
        churn_cycles: cycles.load(Ordering::Relaxed),
        mmap_p50_ns: times.mmap.value_at_quantile(0.5),
        mmap_max_ns: times.mmap.max(),
        munmap_p50_ns: times.munmap.value_at_quantile(0.5),
        munmap_max_ns: times.munmap.max(),
        notes,
    })
}

/// The variants `--matrix` runs, baseline first.
pub fn matrix(fifo: bool) -> Vec<Variant> {
    let v = |shared, mlock, churn| Variant { shared, mlock, churn, fifo, path: WakePath::Wait };
    let mut all = vec![
        v(false, false, Churn::None),
        v(false, false, Churn::Reuse),
        v(false, false, Churn::MapUnmap),
        v(true, false, Churn::MapUnmap),
        v(false, true, Churn::MapUnmap),
        v(true, true, Churn::MapUnmap),
    ];
    // The paths that still take mmap_lock, each beside the churn under mlockall, and the write
    // paths without the churn's mappings (one mapping, reused) and without mlockall.
    // Under mlockall every mapping is populated as it is made or made writable, so a first
    // fault can only be had without it.
    all.push(Variant { path: WakePath::Fault, ..v(false, false, Churn::MapUnmap) });
    for path in [WakePath::Smaps, WakePath::Maps, WakePath::Mprotect, WakePath::Mmap] {
        all.push(Variant { path, ..v(false, true, Churn::MapUnmap) });
    }
    for path in [WakePath::Mprotect, WakePath::Mmap] {
        all.push(Variant { path, ..v(false, true, Churn::Reuse) });
        all.push(Variant { path, ..v(false, false, Churn::MapUnmap) });
    }
    all
}
