//! The watchdog's side in the recorder: sleep until a deadline or until the BPF program says the
//! watched meter stopped ticking, whichever comes first.
//!
//! The program's `alarms` ring buffer carries one record per alarm; only whether one came matters
//! here, so the ring is not parsed: it is emptied by moving its consumer position up to the
//! producer's (the two pages the kernel maps for a BPF ring buffer's reader). Its fd is readable
//! (poll) while the ring holds anything, and the program wakes a reader that has emptied it.
//! The deadline is a timerfd on CLOCK_MONOTONIC, so it keeps a sleep's precision (the control
//! meter measures how late it wakes).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woke {
    /// The deadline passed.
    Deadline,
    /// The watchdog fired: the meter has not slept for its resolution plus the threshold.
    Alarm,
    /// Neither (a signal): look around and wait again.
    Early,
}

/// An open reader of the program's alarms. Owns its own fds (the ring's, duplicated, and a
/// timerfd) and mappings; dropping it releases them.
pub struct Alarm {
    ring: OwnedFd,
    timer: OwnedFd,
    consumer: *mut AtomicU64,
    producer: *const AtomicU64,
    page: usize,
}

// SAFETY: the mappings are owned by the Alarm and only touched through atomics; moving it to
// another thread moves them along.
unsafe impl Send for Alarm {}

impl Alarm {
    /// `ring`: an fd of the `alarms` ring buffer map (duplicated here).
    pub fn open(ring: &OwnedFd) -> Result<Alarm, String> {
        let ring = ring.try_clone().map_err(|e| format!("the BPF alarm ring: {e}"))?;
        // SAFETY: plain syscalls on fds we own; results are checked.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let consumer = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                ring.as_raw_fd(),
                0,
            );
            if consumer == libc::MAP_FAILED {
                return Err(format!(
                    "could not map the BPF alarm ring: {}",
                    std::io::Error::last_os_error()
                ));
            }
            // The producer's page only (the data after it is not read).
            let producer = libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ,
                libc::MAP_SHARED,
                ring.as_raw_fd(),
                page as libc::off_t,
            );
            if producer == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::munmap(consumer, page);
                return Err(format!("could not map the BPF alarm ring: {e}"));
            }
            let fd = libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC);
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                libc::munmap(consumer, page);
                libc::munmap(producer, page);
                return Err(format!("timerfd_create: {e}"));
            }
            let a = Alarm {
                ring,
                timer: OwnedFd::from_raw_fd(fd),
                consumer: consumer as *mut AtomicU64,
                producer: producer as *const AtomicU64,
                page,
            };
            a.take();
            Ok(a)
        }
    }

    /// Empties the ring; whether it held an alarm.
    pub fn take(&self) -> bool {
        // SAFETY: both point into live shared mappings of the ring's first two pages; the
        // kernel reads the consumer position and writes the producer's.
        let (c, p) = unsafe { (&*self.consumer, &*self.producer) };
        let head = p.load(Ordering::Acquire);
        let had = c.load(Ordering::Relaxed) != head;
        if had {
            c.store(head, Ordering::Release);
        }
        had
    }

    /// Sleeps until `deadline_ns` (CLOCK_MONOTONIC) or an alarm. An alarm already waiting
    /// returns at once.
    pub fn wait_until(&self, deadline_ns: u64) -> Woke {
        if self.take() {
            return Woke::Alarm;
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                // Zero would disarm the timer: a deadline on a whole second is 1 ns later.
                tv_nsec: (deadline_ns % 1_000_000_000).max(1) as libc::c_long,
            },
        };
        let mut fds = [
            libc::pollfd { fd: self.ring.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.timer.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        // The timerfd keeps the deadline to the µs; poll's own timeout (whole ms, later) is
        // only a backstop should it not be set.
        let left_ms = deadline_ns.saturating_sub(crate::now_ns()).div_ceil(1_000_000) + 1;
        // SAFETY: valid fds and structures we own.
        let n = unsafe {
            libc::timerfd_settime(
                self.timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            );
            libc::poll(fds.as_mut_ptr(), 2, left_ms.min(i32::MAX as u64) as i32)
        };
        if fds[1].revents & libc::POLLIN != 0 {
            let mut buf = [0u8; 8];
            // SAFETY: reads the expiry count into an 8-byte buffer.
            unsafe { libc::read(self.timer.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        }
        if self.take() {
            Woke::Alarm
        } else if (n > 0 && fds[1].revents & libc::POLLIN != 0)
            || (n == 0 && crate::now_ns() >= deadline_ns)
        {
            Woke::Deadline
        } else {
            Woke::Early
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        // SAFETY: the mappings made in open, unmapped once.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer as *mut libc::c_void, self.page);
        }
    }
}

impl std::fmt::Debug for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("offcpu::Alarm")
    }
}
