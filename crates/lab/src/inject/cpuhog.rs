//! `stallscope inject cpu-hog`: competing CPU load, N spinning threads at a chosen nice value.

use anyhow::Result;
use recording::units::fmt_ns;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct CpuHogArgs {
    /// Spinning threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// How long.
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: recording::units::Duration,
    /// Nice value for the spinning threads (negative needs root).
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
}

pub fn run(a: CpuHogArgs) -> Result<i32> {
    let dur = a.run_for.ns();
    let stop = super::stop_flag()?;
    let done = Arc::new(AtomicBool::new(false));
    let work = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut threads = Vec::new();
    for i in 0..a.threads {
        let (done, work, nice) = (Arc::clone(&done), Arc::clone(&work), a.nice);
        threads.push(std::thread::Builder::new().name(format!("cpu-hog-{i}")).spawn(
            move || {
                if let Some(n) = nice {
                    // SAFETY: setpriority on our own thread id.
                    let rc = unsafe {
                        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, n)
                    };
                    if rc != 0 {
                        eprintln!(
                            "cpu-hog: cannot set nice {n}: {} (raising priority needs root)",
                            std::io::Error::last_os_error()
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
    eprintln!(
        "cpu-hog: {} threads{} for {}",
        a.threads,
        a.nice.map(|n| format!(" at nice {n}")).unwrap_or_default(),
        fmt_ns(dur)
    );
    while started.elapsed() < Duration::from_nanos(dur) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let elapsed = started.elapsed();
    println!(
        "{}",
        serde_json::json!({"injector": "cpu-hog", "threads": a.threads, "nice": a.nice, "elapsed_ns": elapsed.as_nanos() as u64, "work_units": work.load(Ordering::Relaxed)})
    );
    Ok(0)
}
