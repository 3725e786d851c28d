//! Competing CPU load (`stallscope inject cpu-hog`): N spinning threads at a chosen nice value.

use anyhow::Result;
use recording::notice::{Kind, Notices};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Spins `threads` threads (at nice `nice`, if given) for `dur` or until `stop` is set, and
/// returns the units of work they did between them. A nice value that cannot be set is told to
/// `notices` and the thread spins at its normal priority.
pub fn spin(
    threads: usize,
    nice: Option<i32>,
    dur: Duration,
    stop: &AtomicBool,
    notices: &Notices,
) -> Result<u64> {
    let done = Arc::new(AtomicBool::new(false));
    let work = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut spinning = Vec::new();
    for i in 0..threads {
        let (done, work, notices) = (Arc::clone(&done), Arc::clone(&work), notices.clone());
        spinning.push(std::thread::Builder::new().name(format!("cpu-hog-{i}")).spawn(
            move || {
                if let Some(n) = nice {
                    // SAFETY: setpriority on our own thread id.
                    let rc = unsafe {
                        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, n)
                    };
                    if rc != 0 {
                        notices.tell(
                            "cpu-hog",
                            Kind::Warning,
                            format!(
                                "cannot set nice {n}: {} (raising priority needs root)",
                                std::io::Error::last_os_error()
                            ),
                        );
                    }
                }
                let mut n = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for _ in 0..100_000 {
                        n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    }
                    work.fetch_add(1, Ordering::Relaxed);
                }
                std::hint::black_box(n);
            },
        )?);
    }
    while started.elapsed() < dur && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, Ordering::Relaxed);
    for t in spinning {
        let _ = t.join();
    }
    Ok(work.load(Ordering::Relaxed))
}
