//! The recorder's own hiccup meter, the control of jHiccup's `-c`: if the JVM and the recorder
//! stall together, the machine (or the recorder) paused, not the JVM.
//!
//! It rides on the sampling loop's own sleeps: every sleep is to an absolute CLOCK_MONOTONIC
//! deadline, and how late the wake-up came is the lateness, as cyclictest measures it. That
//! costs no wake-ups of its own; a separate 1 ms meter thread cost about 1.5% of a core on this
//! kind of VM, three times the sidecar's whole idle budget. Work the loop does between sleeps is
//! not lateness (reading `/proc/<pid>/maps` may wait on the very mmap_lock that stalls the JVM).
//!
//! Each wake-up also reads the watch thread's own run-queue time (schedstat) before and after the
//! sleep: a wake-up late because the recorder waited for a CPU shows that time growing; a wake-up
//! late with no such growth means the whole machine (the virtual CPU) did not run, or the clock
//! jumped. That is what tells "the machine paused" from "every CPU was busy".
//!
//! Every interval the lateness histogram goes to `control.hlog`, an HdrHistogram interval log
//! in the agent's format (values in ns, `Interval_Max` in ms), so the JVM's hiccups and the
//! control can be plotted on the same axes.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use procwatch::clock::mono_ns;
use std::fs::File;
use std::io::Write;
use std::path::Path;

pub struct Control {
    /// The largest lateness since the stall window was opened.
    window_max: u64,
    /// How long the worst wake-up of the window waited on a run queue.
    window_max_queued: u64,
    /// The largest lateness since `take_outside` was last called.
    outside_max: u64,
    /// The lateness of the latest wake-up (the one that found the heartbeat stale, at a stall's start).
    last: u64,
    last_queued: u64,
    /// The calling (watch) thread's schedstat, read after each sleep.
    schedstat: Option<File>,
    /// Its run-queue time after the last sleep, and when read: the next sleep's "before" when
    /// the loop's work between them was short (one read a wake-up between stalls).
    run_delay_after: Option<(u64, u64)>,
    interval: Histogram<u64>,
    interval_start_ns: u64,
    interval_ns: u64,
    log: Option<IntervalLog>,
}

struct IntervalLog {
    file: File,
    start_mono_ns: u64,
    serializer: V2Serializer,
    plain: Vec<u8>,
    /// Kept from one interval to the next: hdrhistogram's `V2DeflateSerializer` makes (and zeroes)
    /// a new compressor for every histogram, which was a fifth of the sidecar's idle time.
    deflate: flate2::Compress,
    packed: Vec<u8>,
}

/// HdrHistogram's cookie of a V2 encoding compressed with deflate (zlib), as its Java log
/// writer writes it: the cookie, the compressed length (both big-endian), the zlib stream.
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9314;

/// The control's histograms: lateness to 1% (two significant digits, jHiccup's default).
fn control_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, hotspot_log::summary::HIST_MAX_NS, 2).expect("static bounds")
}

impl IntervalLog {
    /// `h` in the interval log's compressed encoding.
    fn encode(&mut self, h: &Histogram<u64>) -> Option<&[u8]> {
        self.plain.clear();
        self.serializer.serialize(h, &mut self.plain).ok()?;
        self.deflate.reset();
        self.packed.clear();
        self.packed.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        self.packed.extend_from_slice(&[0; 4]);
        self.packed.reserve(self.plain.len() + 64);
        loop {
            let read = self.deflate.total_in() as usize;
            let status = self
                .deflate
                .compress_vec(&self.plain[read..], &mut self.packed, flate2::FlushCompress::Finish)
                .ok()?;
            if status == flate2::Status::StreamEnd {
                break;
            }
            self.packed.reserve(self.packed.capacity().max(64));
        }
        let len = (self.packed.len() - 8) as u32;
        self.packed[4..8].copy_from_slice(&len.to_be_bytes());
        Some(&self.packed)
    }
}

/// How recent the last wake-up's run-queue reading must be to stand for the next sleep's start.
const REUSE_RUN_DELAY_NS: u64 = 200_000;

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns`; returns how late it woke.
pub fn sleep_until(deadline_ns: u64) -> u64 {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; EINTR just ends the sleep early (and counts as on time).
    unsafe {
        libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut())
    };
    mono_ns().saturating_sub(deadline_ns)
}

/// What ended a [`Control::sleep_or_wake`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    Deadline,
    /// Before the deadline, for a reason (an alarm).
    Alarm,
    /// Before the deadline, for none.
    Early,
}

impl Control {
    /// A meter writing `path` (an interval log) every `interval_ns`, or only counting when
    /// `path` is None. `start_epoch_ms`/`start_mono_ns` are the recording's start on both clocks.
    pub fn open(
        path: Option<&Path>,
        start_epoch_ms: i64,
        start_mono_ns: u64,
        interval_ns: u64,
    ) -> std::io::Result<Control> {
        let log = match path {
            Some(p) => {
                let mut file =
                    recording::create_new(p).map_err(|e| std::io::Error::other(e.to_string()))?;
                let secs = start_epoch_ms as f64 / 1000.0;
                let date = chrono::DateTime::from_timestamp_millis(start_epoch_ms)
                    .map(|d| d.format("%a %b %d %H:%M:%S UTC %Y").to_string())
                    .unwrap_or_default();
                write!(
                    file,
                    "#[Logged with stallscope {} (the recorder's control meter: lateness of its own wake-ups, ns)]\n\
                     #[Histogram log format version 1.3]\n\
                     #[StartTime: {secs:.3} (seconds since epoch), {date}]\n\
                     #[BaseTime: {secs:.3} (seconds since epoch)]\n\
                     \"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
                    env!("CARGO_PKG_VERSION")
                )?;
                Some(IntervalLog {
                    file,
                    start_mono_ns,
                    serializer: V2Serializer::new(),
                    plain: Vec::new(),
                    deflate: flate2::Compress::new(flate2::Compression::fast(), true),
                    packed: Vec::new(),
                })
            }
            None => None,
        };
        Ok(Control {
            window_max: 0,
            window_max_queued: 0,
            outside_max: 0,
            last: 0,
            last_queued: 0,
            // SAFETY: gettid has no preconditions.
            schedstat: File::open(format!("/proc/self/task/{}/schedstat", unsafe {
                libc::gettid()
            }))
            .ok(),
            run_delay_after: None,
            interval: control_histogram(),
            interval_start_ns: mono_ns(),
            interval_ns: interval_ns.max(1),
            log,
        })
    }

    /// The watch thread's run-queue time so far.
    fn run_delay(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 64];
        let n = self.schedstat.as_ref()?.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().nth(1)?.parse().ok()
    }

    /// Records one wake-up's lateness, and how much of it the recorder spent on a run queue; at
    /// the end of an interval, writes it out.
    pub fn note_queued(&mut self, late_ns: u64, queued_ns: u64, now_ns: u64) {
        if late_ns >= self.window_max {
            self.window_max_queued = queued_ns;
        }
        self.last_queued = queued_ns;
        self.note(late_ns, now_ns);
    }

    /// Records one wake-up's lateness; at the end of an interval, writes it out.
    pub fn note(&mut self, late_ns: u64, now_ns: u64) {
        self.last = late_ns;
        self.window_max = self.window_max.max(late_ns);
        self.outside_max = self.outside_max.max(late_ns);
        let _ = self.interval.record(late_ns.clamp(1, self.interval.high()));
        if now_ns.saturating_sub(self.interval_start_ns) >= self.interval_ns {
            self.flush(now_ns);
        }
    }

    /// Sleeps until `deadline_ns` and records how late it woke.
    pub fn sleep_until(&mut self, deadline_ns: u64) {
        self.sleep_or_wake(deadline_ns, |d| {
            sleep_until(d);
            Some(d)
        });
    }

    /// Sleeps until `deadline_ns` through `wait`, which may end early. `wait` says when the
    /// wake-up was due (the deadline, or for an alarm the moment it stood for), or None for one
    /// that stands for nothing (a signal): each due wake-up's lateness goes to the meter.
    pub fn sleep_or_wake(
        &mut self,
        deadline_ns: u64,
        wait: impl FnOnce(u64) -> Option<u64>,
    ) -> Woken {
        let recent = self.run_delay_after.filter(|(_, at)| mono_ns() < at + REUSE_RUN_DELAY_NS);
        let before = recent.map(|(d, _)| d).or_else(|| self.run_delay());
        let due = wait(deadline_ns);
        let woke = mono_ns();
        let after = self.run_delay();
        self.run_delay_after = after.map(|d| (d, mono_ns()));
        let Some(due) = due else { return Woken::Early };
        let late = woke.saturating_sub(due);
        let queued = before.zip(after).map_or(0, |(b, a)| a.saturating_sub(b));
        self.note_queued(late, queued, due + late);
        if due == deadline_ns { Woken::Deadline } else { Woken::Alarm }
    }

    /// Opens a stall's window; the wake-up that noticed the stall belongs to it.
    pub fn open_window(&mut self) {
        self.window_max = self.last;
        self.window_max_queued = self.last_queued;
    }

    /// The window's worst lateness, and how long that wake-up waited on a run queue.
    pub fn take_window(&mut self) -> (u64, u64) {
        (std::mem::take(&mut self.window_max), std::mem::take(&mut self.window_max_queued))
    }

    pub fn take_outside(&mut self) -> u64 {
        std::mem::take(&mut self.outside_max)
    }

    /// Writes the interval in progress (if it holds anything) and starts the next.
    pub fn flush(&mut self, now_ns: u64) {
        if let Some(log) = &mut self.log
            && !self.interval.is_empty()
        {
            let start_s = self.interval_start_ns.saturating_sub(log.start_mono_ns) as f64 / 1e9;
            if let Some(packed) = log.encode(&self.interval) {
                use base64::Engine;
                let line = format!(
                    "{start_s:.3},{:.3},{:.3},{}\n",
                    now_ns.saturating_sub(self.interval_start_ns) as f64 / 1e9,
                    self.interval.max() as f64 / 1e6,
                    base64::engine::general_purpose::STANDARD.encode(packed)
                );
                // One write per line: a killed recorder loses at most the interval in progress.
                let _ = log.file.write_all(line.as_bytes());
            }
        }
        self.interval.reset();
        self.interval_start_ns = now_ns;
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.flush(mono_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept compressor's encoding reads back to the same histogram, one after another.
    #[test]
    fn each_encoding_reads_back_as_the_histogram() {
        use hdrhistogram::serialization::Deserializer;
        let mut log = IntervalLog {
            file: File::open("/dev/null").unwrap(),
            start_mono_ns: 0,
            serializer: V2Serializer::new(),
            plain: Vec::new(),
            deflate: flate2::Compress::new(flate2::Compression::fast(), true),
            packed: Vec::new(),
        };
        let mut de = Deserializer::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for round in 0..300 {
            let mut h = control_histogram();
            for _ in 0..(round * 37 % 3000) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                h.record((x % 1_000_000_000).max(1) >> (x % 20)).unwrap();
            }
            let bytes = log.encode(&h).unwrap().to_vec();
            assert_eq!(u32::from_be_bytes(bytes[..4].try_into().unwrap()), V2_COMPRESSED_COOKIE);
            let back: Histogram<u64> = de.deserialize(&mut std::io::Cursor::new(bytes)).unwrap();
            assert_eq!(back, h, "round {round}");
        }
    }

    #[test]
    fn the_log_reads_back_with_hdrhistogram() {
        use hdrhistogram::serialization::Deserializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        // Removed on every exit of the test, failing ones too.
        struct Scratch(std::path::PathBuf);
        impl Drop for Scratch {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let scratch = Scratch(
            std::env::temp_dir().join(format!("stallscope-control-test-{}", std::process::id())),
        );
        let dir = &scratch.0;
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join("control.hlog");
        let t0 = super::mono_ns();
        {
            let mut c = Control::open(Some(&p), 1_795_320_912_759, t0, 1_000_000_000).unwrap();
            for i in 1..=1000u64 {
                c.note(i * 1000, t0 + i * 1_000_000);
            }
            c.note(7_000_000, t0 + 1_500_000_000); // closes the first interval (1001 values)
            c.note(3_000, t0 + 1_600_000_000);
            assert_eq!(c.take_outside(), 7_000_000);
            c.open_window();
            assert_eq!(c.take_window(), (3_000, 0));
        }
        let text = std::fs::read(&p).unwrap();
        let mut de = Deserializer::new();
        let mut hs = Vec::new();
        let mut start = None;
        for e in IntervalLogIterator::new(&text) {
            match e.unwrap() {
                LogEntry::StartTime(t) => start = Some(t),
                LogEntry::Interval(h) => {
                    use base64::Engine;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(h.encoded_histogram())
                        .unwrap();
                    hs.push((
                        h.start_timestamp(),
                        h.max(),
                        de.deserialize::<u64, _>(&mut std::io::Cursor::new(bytes)).unwrap(),
                    ));
                }
                _ => {}
            }
        }
        assert!((start.unwrap().as_secs_f64() - 1_795_320_912.759).abs() < 0.001);
        assert_eq!(hs.len(), 2, "two intervals");
        assert_eq!(hs[0].2.len(), 1001);
        assert!((hs[0].1 - 7.0).abs() < 0.07, "Interval_Max is in ms, to 1%: {}", hs[0].1);
        let p50 = hs[0].2.value_at_quantile(0.5);
        assert!((500_000..=505_000).contains(&p50), "p50 to 1%: {p50}");
        assert_eq!(hs[1].2.len(), 1);
    }
}
