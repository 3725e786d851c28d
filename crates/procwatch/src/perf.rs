//! Where a running thread's code is, without stopping it: a `perf_event_open` software clock
//! (`PERF_COUNT_SW_TASK_CLOCK`) on one thread, user space only, whose samples carry the
//! instruction pointer, the frame and stack pointers, and a copy of the top of the user stack.
//! The kernel takes them on the thread's own timer tick; the thread never notices. A thread
//! blocked in the kernel is not sampled (its clock does not run): its pc and sp are in
//! `/proc/<pid>/task/<tid>/syscall` instead.
//!
//! Invariant: read-only towards the target, bounded in memory (one ring buffer per thread), and a
//! refusal (`perf_event_paranoid`, another user's thread) is an error saying what would allow it.

use std::io;

/// One sample of a thread's user-space state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSample {
    pub tid: i32,
    /// `perf_clock` (CLOCK_MONOTONIC on x86_64 Linux) when it was taken.
    pub t: u64,
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The user stack from `sp` up, as much as was copied.
    pub stack: Vec<u8>,
}

impl UserSample {
    /// The 8 bytes at `addr`, if the copy of the stack holds them.
    pub fn stack_word(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.sp)? as usize;
        self.stack.get(off..off + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

/// The user stack copied with each sample: deep enough for a few dozen compiled frames.
pub const STACK_BYTES: u32 = 16 << 10;
const RING_PAGES: usize = 16;
const PAGE: usize = 4096;

// x86_64 perf register numbers (arch/x86/include/uapi/asm/perf_regs.h).
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_SAMPLE_IP: u64 = 1 << 0;
const PERF_SAMPLE_TID: u64 = 1 << 1;
const PERF_SAMPLE_TIME: u64 = 1 << 2;
const PERF_SAMPLE_REGS_USER: u64 = 1 << 12;
const PERF_SAMPLE_STACK_USER: u64 = 1 << 13;
const PERF_RECORD_SAMPLE: u32 = 9;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `perf_event_attr` flag bits: disabled (0), exclude_kernel (5), exclude_hv (6),
/// use_clockid (25).
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const FLAG_USE_CLOCKID: u64 = 1 << 25;

/// `struct perf_event_attr` as of its size 128 (PERF_ATTR_SIZE_VER8); the kernel accepts it.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
    aux_sample_size: u32,
    reserved_3: u32,
    sig_data: u64,
    config3: u64,
}

/// Samples of one thread, taken by the kernel every `period_ns` of the thread's CPU time.
pub struct ThreadSampler {
    pub tid: i32,
    fd: i32,
    ring: *mut u8,
    ring_len: usize,
    /// Where reading stopped in the ring (its `data_tail`, kept here too).
    tail: u64,
}

// The ring buffer is ours alone; the kernel only appends to it.
unsafe impl Send for ThreadSampler {}

impl ThreadSampler {
    /// Starts sampling thread `tid` every `period_ns` of its CPU time, in user space only.
    pub fn open(tid: i32, period_ns: u64) -> io::Result<ThreadSampler> {
        let attr = Attr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<Attr>() as u32,
            config: PERF_COUNT_SW_TASK_CLOCK,
            sample_period: period_ns,
            sample_type: PERF_SAMPLE_IP
                | PERF_SAMPLE_TID
                | PERF_SAMPLE_TIME
                | PERF_SAMPLE_REGS_USER
                | PERF_SAMPLE_STACK_USER,
            flags: FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            sample_regs_user: (1 << REG_BP) | (1 << REG_SP) | (1 << REG_IP),
            sample_stack_user: STACK_BYTES,
            ..Attr::default()
        };
        // SAFETY: a valid attr of its declared size; the result is checked.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const Attr,
                tid,
                -1i32,
                -1i32,
                PERF_FLAG_FD_CLOEXEC,
            )
        } as i32;
        if fd < 0 {
            let e = io::Error::last_os_error();
            let paranoid =
                std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "perf_event_open on thread {tid}: {e} (kernel.perf_event_paranoid is {}; 2 or less lets a user sample its own processes, root any)",
                    paranoid.trim()
                ),
            ));
        }
        let ring_len = PAGE * (1 + RING_PAGES);
        // SAFETY: mapping the event's ring buffer as the perf ABI asks (a control page and 2^n
        // data pages, shared, read-write so that data_tail can be written).
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: our descriptor, closed once.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(ThreadSampler { tid, fd, ring: ring as *mut u8, ring_len, tail: 0 })
    }

    /// The samples taken since the last call, oldest first.
    pub fn drain(&mut self) -> Vec<UserSample> {
        // The control page: data_head at 1024, data_tail at 1032 (struct perf_event_mmap_page).
        // SAFETY: inside the mapped control page; the kernel writes data_head, we data_tail.
        let head = unsafe { std::ptr::read_volatile(self.ring.add(1024) as *const u64) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let size = (PAGE * RING_PAGES) as u64;
        // SAFETY: the data pages follow the control page.
        let data = unsafe { std::slice::from_raw_parts(self.ring.add(PAGE), size as usize) };
        let copy = |at: u64, len: usize| ring_copy(data, at, len);
        let word = |at: u64| u64::from_le_bytes(copy(at, 8).try_into().unwrap_or_default());
        let mut out = Vec::new();
        let mut at = self.tail;
        while at + 8 <= head {
            let h = copy(at, 8);
            let kind = u32::from_le_bytes(h[0..4].try_into().unwrap_or_default());
            let len = u16::from_le_bytes(h[6..8].try_into().unwrap_or_default()) as u64;
            if len < 8 || at + len > head {
                break;
            }
            if kind == PERF_RECORD_SAMPLE {
                // ip, pid/tid, time, abi, regs (bp, sp, ip in bit order), stack size, stack, dyn size.
                let mut p = at + 8;
                let ip = word(p);
                p += 8;
                let tid = (word(p) >> 32) as i32;
                p += 8;
                let t = word(p);
                p += 8;
                let abi = word(p);
                p += 8;
                let (mut bp, mut sp) = (0, 0);
                if abi != 0 {
                    bp = word(p);
                    sp = word(p + 8);
                    p += 24;
                }
                let stack_len = word(p) as usize;
                p += 8;
                let stack_len = stack_len.min(STACK_BYTES as usize);
                let dyn_size = if stack_len > 0 { word(p + stack_len as u64) as usize } else { 0 };
                let stack = copy(p, dyn_size.min(stack_len));
                out.push(UserSample { tid, t, ip, sp, bp, stack });
            }
            at += len;
        }
        self.tail = at;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: data_tail in the control page: tells the kernel the space is free again.
        unsafe { std::ptr::write_volatile(self.ring.add(1032) as *mut u64, at) };
        out
    }
}

/// `len` bytes of `ring` from position `at` on, around its end (at most the whole ring): two
/// slices copied, not byte by byte (a sample carries a 16 KiB stack).
fn ring_copy(ring: &[u8], at: u64, len: usize) -> Vec<u8> {
    if ring.is_empty() {
        return Vec::new();
    }
    let len = len.min(ring.len());
    let start = (at % ring.len() as u64) as usize;
    let first = len.min(ring.len() - start);
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&ring[start..start + first]);
    v.extend_from_slice(&ring[..len - first]);
    v
}

/// `PERF_EVENT_IOC_ENABLE` and `PERF_EVENT_IOC_DISABLE` (`_IO('$', 0)`, `_IO('$', 1)`).
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

impl ThreadSampler {
    /// Stops sampling, keeping the event and its ring for [`ThreadSampler::resume`] (opening a
    /// sampler costs a system call, a mapping and its teardown); what was taken is dropped.
    pub fn pause(&mut self) {
        // SAFETY: an ioctl without argument on our own perf descriptor.
        unsafe { libc::ioctl(self.fd, PERF_EVENT_IOC_DISABLE, 0) };
        self.skip();
    }

    /// Samples again after [`ThreadSampler::pause`]. An error when its thread is gone (the
    /// event then reports a hang-up; its id may be another thread's now): open another.
    pub fn resume(&mut self) -> io::Result<()> {
        let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n > 0 && p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(io::Error::other(format!("thread {} is gone", self.tid)));
        }
        self.skip();
        // SAFETY: as in pause.
        if unsafe { libc::ioctl(self.fd, PERF_EVENT_IOC_ENABLE, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Marks everything in the ring as read.
    fn skip(&mut self) {
        // SAFETY: data_head and data_tail in the mapped control page, as in drain.
        let head = unsafe { std::ptr::read_volatile(self.ring.add(1024) as *const u64) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::AcqRel);
        self.tail = head;
        // SAFETY: as in drain.
        unsafe { std::ptr::write_volatile(self.ring.add(1032) as *mut u64, head) };
    }
}

impl Drop for ThreadSampler {
    fn drop(&mut self) {
        // SAFETY: the mapping and descriptor made in open, released once.
        unsafe {
            libc::munmap(self.ring as *mut libc::c_void, self.ring_len);
            libc::close(self.fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread of ours spinning on a CPU until its flag is set: its id, the flag, its handle.
    fn spinner()
    -> (i32, std::sync::Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<u64>) {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            let mut x = 0u64;
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            x
        });
        (rx.recv().unwrap(), stop, spinner)
    }

    #[test]
    fn a_spinning_thread_of_ours_is_sampled_in_its_own_code() {
        let (tid, stop, spinner) = spinner();
        let mut s = match ThreadSampler::open(tid, 1_000_000) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        // The kernel's rate depends on the machine (a VM's timer, perf_event_max_sample_rate):
        // wait for a few, however long they take.
        let mut got = Vec::new();
        let t0 = std::time::Instant::now();
        while got.len() < 3 && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            got.extend(s.drain());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(got.len() >= 3, "{} samples of a thread that spun for 10 s", got.len());
        let t0 = crate::clock::mono_ns();
        for g in &got {
            assert_eq!(g.tid, tid);
            assert!(g.ip != 0 && g.sp != 0 && !g.stack.is_empty());
            assert!(g.t <= t0 && t0 - g.t < 1_000_000_000, "stamped on CLOCK_MONOTONIC");
        }
        // This test binary's own code.
        let maps = crate::maps::read(std::process::id() as i32).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(
            got.iter().all(|g| crate::maps::lookup(&maps, g.ip)
                .is_some_and(|m| std::path::Path::new(&m.path) == exe)),
            "ips in this binary"
        );
        assert!(s.drain().len() < got.len(), "drained samples are not read twice");
    }

    #[test]
    fn a_copy_from_the_ring_wraps_around_its_end() {
        let ring: Vec<u8> = (0..16).collect();
        assert_eq!(ring_copy(&ring, 3, 4), vec![3, 4, 5, 6]);
        assert_eq!(ring_copy(&ring, 14, 4), vec![14, 15, 0, 1]);
        assert_eq!(ring_copy(&ring, 16 * 5 + 15, 2), vec![15, 0], "positions grow past the ring");
        assert_eq!(ring_copy(&ring, 8, 40).len(), 16, "never more than the ring");
        assert_eq!(ring_copy(&ring, 0, 0), Vec::<u8>::new());
        assert_eq!(ring_copy(&[], 5, 3), Vec::<u8>::new());
    }

    #[test]
    fn a_paused_sampler_takes_nothing_and_samples_again_once_resumed() {
        let (tid, stop, spinner) = spinner();
        let mut s = ThreadSampler::open(tid, 1_000_000).unwrap_or_else(|e| panic!("{e}"));
        let wait_for = |s: &mut ThreadSampler| {
            let mut got = Vec::new();
            let t0 = std::time::Instant::now();
            while got.is_empty() && t0.elapsed() < std::time::Duration::from_secs(10) {
                std::thread::sleep(std::time::Duration::from_millis(20));
                got.extend(s.drain());
            }
            got
        };
        assert!(!wait_for(&mut s).is_empty(), "sampled before the pause");
        s.pause();
        let paused_at = crate::clock::mono_ns();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(s.drain().is_empty(), "nothing taken while paused, the spinner on a CPU");
        s.resume().unwrap();
        let again = wait_for(&mut s);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(!again.is_empty(), "sampled again once resumed");
        assert!(again.iter().all(|g| g.t > paused_at + 150_000_000), "none from before the pause");
        // Its thread gone, a paused sampler is not resumed (a reused id would get a dead one).
        s.pause();
        assert!(s.resume().is_err(), "the spinner has exited");
    }
}
