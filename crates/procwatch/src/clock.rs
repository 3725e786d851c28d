//! CLOCK_MONOTONIC in nanoseconds: the one time base of everything stallscope records. The JVM's
//! `timenanos` log decorator and `System.nanoTime()` read the same clock, so a safepoint in the
//! log and a thread sample line up without conversion.
//!
//! Invariant: this is the only place the clock is read; callers never mix in wall time.

/// Now, on CLOCK_MONOTONIC, in nanoseconds.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-parameter of the right type; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_moves_forward_with_std_instant() {
        let (a, i) = (super::mono_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, e) = (super::mono_ns(), i.elapsed());
        assert!(b > a);
        // std's Instant is CLOCK_MONOTONIC too: the two agree on how long the sleep took.
        assert!((b - a).abs_diff(e.as_nanos() as u64) < 5_000_000, "{} vs {:?}", b - a, e);
    }
}
