//! The JVMs' safepoint probes (USDT `safepoint__begin` and `safepoint__end` in `libjvm.so`): each
//! guarded JVM's slot in the program's map of safepoints, read without a system call.

use crate::*;

/// The program's `sp` map (SP_SLOTS `sp_state`s), mapped into our memory: read and written in
/// place.
pub(crate) struct SpMap {
    words: *mut AtomicU64,
    len: usize,
}

// SAFETY: the mapping is owned by the SpMap and only touched through atomics.
unsafe impl Send for SpMap {}
unsafe impl Sync for SpMap {}

impl SpMap {
    pub(crate) fn open(fd: &std::os::fd::OwnedFd) -> Option<SpMap> {
        use std::os::fd::AsRawFd;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = (SP_SLOTS * SP_WORDS * 8).div_ceil(page) * page;
        // SAFETY: maps the array map's values (BPF_F_MMAPABLE), checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(SpMap { words: p.cast(), len })
    }

    /// Word `i` of slot `slot`'s `sp_state`.
    pub(crate) fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        assert!(i < SP_WORDS && slot < SP_SLOTS);
        // SAFETY: the map is SP_SLOTS `sp_state`s of SP_WORDS u64s each (a multiple of 8 bytes,
        // so laid out back to back) at the start of the live mapping.
        unsafe { &*self.words.add(slot * SP_WORDS + i) }
    }

    /// Clears a slot: not watched first (a reader then reads nothing), then the rest.
    pub(crate) fn clear(&self, slot: usize) {
        use std::sync::atomic::Ordering::Release;
        self.word(slot, SP_AFTER).store(0, Release);
        self.word(slot, SP_GEN).store(0, Release);
        for i in 0..SP_WORDS {
            self.word(slot, i).store(0, Release);
        }
    }

    /// Slot `slot`'s safepoints; None while it is not watched, or (`generation`) watched again since
    /// (another JVM's now).
    pub(crate) fn read(&self, slot: usize, generation: Option<u64>) -> Option<Safepoints> {
        use std::sync::atomic::Ordering::Acquire;
        if self.word(slot, SP_AFTER).load(Acquire) == 0
            || generation.is_some_and(|g| self.word(slot, SP_GEN).load(Acquire) != g)
        {
            return None;
        }
        // The probes write without a lock: read until the begin count holds still around it.
        loop {
            let count = self.word(slot, SP_SEQ).load(Acquire);
            let open = self.word(slot, SP_OPEN).load(Acquire);
            let mut recent = [(0, None); SP_RING];
            for (i, r) in recent.iter_mut().enumerate().take(count.min(SP_RING as u64) as usize) {
                let k = (count - 1 - i as u64) as usize % SP_RING;
                let end = self.word(slot, 4 + 2 * k + 1).load(Acquire);
                *r = (self.word(slot, 4 + 2 * k).load(Acquire), (end != 0).then_some(end));
            }
            if self.word(slot, SP_SEQ).load(Acquire) == count {
                return Some(Safepoints { open_since: (open != 0).then_some(open), count, recent });
            }
        }
    }
}

impl Drop for SpMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, unmapped once.
        unsafe { libc::munmap(self.words.cast(), self.len) };
    }
}

/// `struct sp_state`'s words: open_since, seq, after_ns, gen, then SP_RING (begin, end) pairs.
pub(crate) const SP_RING: usize = 8;
/// Slots in the `sp` map: `run`'s one JVM in slot 0, `watch`'s JVMs from 1.
pub(crate) const SP_SLOTS: usize = 255;
pub(crate) const SP_WORDS: usize = 4 + 2 * SP_RING;
pub(crate) const SP_OPEN: usize = 0;
pub(crate) const SP_SEQ: usize = 1;
pub(crate) const SP_AFTER: usize = 2;
pub(crate) const SP_GEN: usize = 3;

/// The JVM's safepoints as its own probes report them (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Safepoints {
    /// The safepoint under way began then.
    pub open_since: Option<u64>,
    /// How many have begun since the probes were attached.
    pub count: u64,
    /// The last few to begin, newest first: (begin, end), end None while it lasts.
    pub recent: [(u64, Option<u64>); SP_RING],
}

impl Safepoints {
    /// When the safepoint begun at `begin` ended, if it did and is still among the recent.
    pub fn end_of(&self, begin: u64) -> Option<u64> {
        self.recent.iter().find(|(b, _)| *b == begin).and_then(|(_, e)| *e)
    }

    /// The last to begin: (begin, end).
    pub fn last(&self) -> Option<(u64, Option<u64>)> {
        (self.count > 0).then_some(self.recent[0])
    }
}

/// The libjvm.so a running JVM loaded, as a path that reaches it from here (through the
/// process's root, so a container's does too).
pub fn libjvm_of(pid: i32) -> Option<std::path::PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    // A library replaced since the JVM loaded it (`… libjvm.so (deleted)`, after an upgrade)
    // is not the file at its path now: its probes there would never fire.
    let path = maps.lines().find_map(|l| {
        let mut f = l.split_whitespace().skip(5);
        let p = f.next()?;
        (p.ends_with("/libjvm.so") && f.next().is_none()).then(|| p.to_string())
    })?;
    Some(std::path::PathBuf::from(format!("/proc/{pid}/root{path}")))
}

/// Whether this libjvm.so has HotSpot's safepoint probes (`hs_private:safepoint__begin`, a
/// USDT note in every JDK 8-25 build looked at: OpenJDK, Debian's and Temurin's).
pub fn has_safepoint_probes(libjvm: &std::path::Path) -> bool {
    // A note's description ends with the provider's and the probe's names, NUL-terminated.
    const NEEDLE: &[u8] = b"hs_private\0safepoint__begin\0";
    std::fs::read(libjvm).is_ok_and(|b| b.windows(NEEDLE.len()).any(|w| w == NEEDLE))
}
