//! The program's `toff` array mapped into our memory, read-only: whether a target's thread has
//! stayed off a CPU, unwoken, since some moment. Such a thread cannot have changed anything
//! `/proc` shows of it (its state, CPU time, faults, CPU, where it waits, its system call): only
//! a thread that runs changes those. So the recorder reads a thread's `/proc` files again only
//! once the kernel's events say it ran or was woken since its last read, and a frozen JVM, or one
//! whose threads are parked through a stall, costs next to nothing to watch. The other way
//! round, a thread on a CPU without a break since its last read ([`Entries::on_cpu_since`]) has
//! only run on: its CPU time grew by the time elapsed, the rest of what `/proc` shows that the
//! kernel's events tell is as it was, so mid-stall it is not read either.
//!
//! Invariant: a "still" or "on a CPU" answer is only given when the entry is the thread's own
//! (its tid and process), says it is off a CPU (or on one) since before the moment asked about,
//! and no wake-up (or switch) since, read twice around the other fields (the program writes
//! without a lock); or, for "still", when no thread has ever taken its index and its process was
//! a target before the read that found it asleep. Anything else (a thread in the hash because
//! another holds its index, a wait under way being written, an entry of another thread, or any
//! once the program is detached) answers "read it".

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Where the fields read here sit in a `struct off_entry` (raw.rs parses the rest).
const START: usize = 0;
const WOKEN: usize = 8;
const TID: usize = 24;
const TGID: usize = 28;
/// `on`, after the three comms: when the thread came onto a CPU, while it is on one.
const ON: usize = 104;

/// The mapping of `toff`.
pub struct Entries {
    base: *const u8,
    len: usize,
    slots: u32,
    /// False once the program is detached: its entries then say nothing of now.
    live: std::sync::Arc<std::sync::atomic::AtomicBool>,
    registered: Registered,
}

/// When each target process was put in the program's targets (CLOCK_MONOTONIC ns), by the
/// reader thread, once the program makes an entry at each of its threads' first event (it
/// leaves a CPU, comes onto one, or is woken): a thread whose index has never been taken had
/// none since.
#[derive(Clone, Default)]
pub(crate) struct Registered(
    std::sync::Arc<std::sync::RwLock<std::collections::HashMap<i32, u64>>>,
);

impl Registered {
    /// Puts `tgid` in (`on`: stamped now, unless it is in already) or takes it out.
    pub(crate) fn set(&self, tgid: i32, on: bool) {
        let mut m = self.0.write().unwrap_or_else(|p| p.into_inner());
        if on {
            m.entry(tgid).or_insert_with(crate::now_ns);
        } else {
            m.remove(&tgid);
        }
    }

    fn since(&self, tgid: i32) -> Option<u64> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).get(&tgid).copied()
    }
}

// SAFETY: the mapping is owned by the Entries, read only, and only through atomics.
unsafe impl Send for Entries {}
unsafe impl Sync for Entries {}

impl Entries {
    /// Maps `slots` entries of the array map behind `fd` (BPF_F_MMAPABLE: its values start at
    /// offset 0, page-aligned); None when the kernel refuses.
    pub(crate) fn open(
        fd: &std::os::fd::OwnedFd,
        slots: u32,
        live: std::sync::Arc<std::sync::atomic::AtomicBool>,
        registered: Registered,
    ) -> Option<Entries> {
        use std::os::fd::AsRawFd;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (slots as usize * crate::raw::ENTRY_SIZE).div_ceil(page) * page;
        // SAFETY: maps the array map's values read-only, checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(Entries { base: p.cast(), len, slots, live, registered })
    }

    fn u64_at(&self, index: usize, field: usize) -> u64 {
        // SAFETY: index < slots (masked by the caller), field + 8 <= ENTRY_SIZE, and every
        // field read is 8-byte aligned (entries are 128 bytes from a page); the kernel writes
        // these words in place, so they are read atomically.
        unsafe {
            (*self.base.add(index * crate::raw::ENTRY_SIZE + field).cast::<AtomicU64>())
                .load(Ordering::Acquire)
        }
    }

    fn u32_at(&self, index: usize, field: usize) -> u32 {
        // SAFETY: as u64_at, for a 4-byte aligned word.
        unsafe {
            (*self.base.add(index * crate::raw::ENTRY_SIZE + field).cast::<AtomicU32>())
                .load(Ordering::Acquire)
        }
    }

    /// Whether thread `tid` of process `tgid` (host ids) has been off a CPU since before `since`
    /// (CLOCK_MONOTONIC ns) and nobody woke it meanwhile: nothing of it has changed since then.
    /// `asleep_then`: a read begun at `since` found it off a CPU (not R); then a thread whose
    /// index of the array no thread has ever taken, its process a target since before `since`,
    /// had no event since (asleep since before its process became a target: a JVM's reference
    /// handler, finalizer, signal dispatcher). False whenever that cannot be told.
    pub fn still(&self, tgid: i32, tid: i32, since: u64, asleep_then: bool) -> bool {
        if tid <= 0 || tgid <= 0 || !self.live.load(Ordering::Acquire) {
            return false;
        }
        let index = (tid as u32 & (self.slots - 1)) as usize;
        if asleep_then
            && self.u32_at(index, TID) == 0
            && self.registered.since(tgid).is_some_and(|r| r < since)
        {
            return true;
        }
        let start = self.u64_at(index, START);
        if start == 0 || start >= since {
            return false;
        }
        let own = self.u32_at(index, TID) == tid as u32 && self.u32_at(index, TGID) == tgid as u32;
        let woken = self.u64_at(index, WOKEN);
        // The same wait throughout the reads (a new one has a later start).
        own && woken == 0 && self.u64_at(index, START) == start
    }

    /// When thread `tid` of process `tgid` (host ids) came onto the CPU it is on now, if that was
    /// before `since` (CLOCK_MONOTONIC ns) and it has not left a CPU since: it ran without a break
    /// from then to this call, so its CPU time grew by the time elapsed and its state, CPU, run
    /// delay and switch count are as they were. None whenever that cannot be told (its entry
    /// another thread's, or not made yet: a thread's first wait makes it; the program detached).
    pub fn on_cpu_since(&self, tgid: i32, tid: i32, since: u64) -> Option<u64> {
        if tid <= 0 || tgid <= 0 || !self.live.load(Ordering::Acquire) {
            return None;
        }
        let index = (tid as u32 & (self.slots - 1)) as usize;
        let on = self.u64_at(index, ON);
        if on == 0 || on >= since {
            return None;
        }
        let own = self.u32_at(index, TID) == tid as u32 && self.u32_at(index, TGID) == tgid as u32;
        // Not off a CPU, and the same stretch on it throughout the reads: the program clears
        // `on` before it marks a wait begun, and a new stretch has a later `on`.
        let on_still = self.u64_at(index, START) == 0 && self.u64_at(index, ON) == on;
        (own && on_still).then_some(on)
    }
}

impl Drop for Entries {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
