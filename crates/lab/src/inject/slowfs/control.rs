//! slowfs's live settings: what it delays, by how much, and what fails; changed while mounted
//! through a control file (`MOUNT/.stallscope-slowfs`), the way ddi's sysfs knob works.
//!
//! Invariant: every delay is bounded by `max_delay`, fixed at mount time; a setting that would
//! exceed it is refused, never clamped silently.

use globset::{Glob, GlobMatcher};
use recording::units::{fmt_ns, parse_duration};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The control file's name, in the mount's root.
pub const CONTROL_NAME: &str = ".stallscope-slowfs";

pub struct Settings {
    pub read_delay_ns: AtomicU64,
    /// Delay of each write and fsync that reaches the file system (writes are not cached: each
    /// write(2) is answered by slowfs, as on a slow network file system).
    pub write_delay_ns: AtomicU64,
    pub jitter_ns: AtomicU64,
    /// Probability of EIO per matching read, in parts per million.
    pub error_ppm: AtomicU64,
    glob: RwLock<(String, GlobMatcher)>,
    pub max_delay_ns: u64,
    pub stats: Stats,
}

#[derive(Default)]
pub struct Stats {
    pub reads: AtomicU64,
    pub delayed: AtomicU64,
    pub failed: AtomicU64,
    pub delayed_ns: AtomicU64,
    pub writes: AtomicU64,
    pub delayed_writes: AtomicU64,
}

impl Settings {
    pub fn new(
        read_delay_ns: u64,
        write_delay_ns: u64,
        jitter_ns: u64,
        error_rate: f64,
        glob: &str,
        max_delay_ns: u64,
    ) -> Result<Settings, String> {
        let s = Settings {
            read_delay_ns: AtomicU64::new(0),
            write_delay_ns: AtomicU64::new(0),
            jitter_ns: AtomicU64::new(0),
            error_ppm: AtomicU64::new(0),
            glob: RwLock::new((String::new(), compile(glob)?)),
            max_delay_ns,
            stats: Stats::default(),
        };
        s.set_glob(glob)?;
        s.set_delay(Some(read_delay_ns), Some(jitter_ns))?;
        s.set_write_delay(write_delay_ns)?;
        s.set_error_rate(error_rate)?;
        Ok(s)
    }

    pub fn set_delay(&self, delay: Option<u64>, jitter: Option<u64>) -> Result<(), String> {
        let d = delay.unwrap_or(self.read_delay_ns.load(Ordering::Relaxed));
        let j = jitter.unwrap_or(self.jitter_ns.load(Ordering::Relaxed));
        if d.saturating_add(j) > self.max_delay_ns {
            return Err(format!(
                "read delay {} + jitter {} exceeds --max-delay {}; remount with a larger --max-delay",
                fmt_ns(d),
                fmt_ns(j),
                fmt_ns(self.max_delay_ns)
            ));
        }
        let w = self.write_delay_ns.load(Ordering::Relaxed);
        if w.saturating_add(j) > self.max_delay_ns {
            return Err(format!(
                "write delay {} + jitter {} exceeds --max-delay {}; remount with a larger --max-delay",
                fmt_ns(w),
                fmt_ns(j),
                fmt_ns(self.max_delay_ns)
            ));
        }
        self.read_delay_ns.store(d, Ordering::Relaxed);
        self.jitter_ns.store(j, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_write_delay(&self, w: u64) -> Result<(), String> {
        let j = self.jitter_ns.load(Ordering::Relaxed);
        if w.saturating_add(j) > self.max_delay_ns {
            return Err(format!(
                "write delay {} + jitter {} exceeds --max-delay {}; remount with a larger --max-delay",
                fmt_ns(w),
                fmt_ns(j),
                fmt_ns(self.max_delay_ns)
            ));
        }
        self.write_delay_ns.store(w, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_error_rate(&self, rate: f64) -> Result<(), String> {
        if !(0.0..=1.0).contains(&rate) || rate.is_nan() {
            return Err(format!("error rate {rate} is not between 0 and 1"));
        }
        self.error_ppm.store((rate * 1e6).round() as u64, Ordering::Relaxed);
        Ok(())
    }

    pub fn set_glob(&self, glob: &str) -> Result<(), String> {
        let m = compile(glob)?;
        *self.glob.write().map_err(|_| "settings lock poisoned")? = (glob.to_string(), m);
        Ok(())
    }

    /// Whether reads of this path (relative to the mount's root) are affected.
    pub fn matches(&self, rel: &Path) -> bool {
        self.glob.read().map(|g| g.1.is_match(rel)).unwrap_or(true)
    }

    /// The control file's text: the settings and counters, one `key=value` per line.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let glob = self.glob.read().map(|g| g.0.clone()).unwrap_or_default();
        let _ = writeln!(s, "read_delay={}ns", self.read_delay_ns.load(Ordering::Relaxed));
        let _ = writeln!(s, "write_delay={}ns", self.write_delay_ns.load(Ordering::Relaxed));
        let _ = writeln!(s, "jitter={}ns", self.jitter_ns.load(Ordering::Relaxed));
        let _ = writeln!(s, "error_rate={}", self.error_ppm.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(s, "glob={glob}");
        let _ = writeln!(s, "max_delay={}ns", self.max_delay_ns);
        let st = &self.stats;
        let _ = writeln!(s, "reads={}", st.reads.load(Ordering::Relaxed));
        let _ = writeln!(s, "delayed_reads={}", st.delayed.load(Ordering::Relaxed));
        let _ = writeln!(s, "failed_reads={}", st.failed.load(Ordering::Relaxed));
        let _ = writeln!(s, "delayed_total={}ns", st.delayed_ns.load(Ordering::Relaxed));
        let _ = writeln!(s, "writes={}", st.writes.load(Ordering::Relaxed));
        let _ = writeln!(s, "delayed_writes={}", st.delayed_writes.load(Ordering::Relaxed));
        s
    }

    /// Applies `key=value` lines written to the control file. All-or-nothing per write.
    pub fn apply(&self, text: &str) -> Result<(), String> {
        let (mut delay, mut write_delay, mut jitter, mut rate, mut glob) =
            (None, None, None, None, None);
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let (k, v) =
                line.split_once('=').ok_or_else(|| format!("'{line}' is not key=value"))?;
            let (k, v) = (k.trim(), v.trim());
            match k {
                "read_delay" => delay = Some(parse_duration(v).map_err(|e| e.to_string())?),
                "write_delay" => write_delay = Some(parse_duration(v).map_err(|e| e.to_string())?),
                "jitter" => jitter = Some(parse_duration(v).map_err(|e| e.to_string())?),
                "error_rate" => {
                    rate = Some(
                        v.parse::<f64>().map_err(|_| format!("error_rate={v} is not a number"))?,
                    )
                }
                "glob" => glob = Some(v.to_string()),
                _ => {
                    return Err(format!(
                        "unknown setting '{k}' (read_delay, write_delay, jitter, error_rate, glob)"
                    ));
                }
            }
        }
        if let Some(g) = &glob {
            compile(g)?;
        }
        if let Some(r) = rate
            && !(0.0..=1.0).contains(&r)
        {
            return Err(format!("error rate {r} is not between 0 and 1"));
        }
        // Checked together before anything changes: all or nothing.
        let (d, w, j) = (
            delay.unwrap_or(self.read_delay_ns.load(Ordering::Relaxed)),
            write_delay.unwrap_or(self.write_delay_ns.load(Ordering::Relaxed)),
            jitter.unwrap_or(self.jitter_ns.load(Ordering::Relaxed)),
        );
        if d.max(w).saturating_add(j) > self.max_delay_ns {
            return Err(format!(
                "delay {} + jitter {} exceeds --max-delay {}; remount with a larger --max-delay",
                fmt_ns(d.max(w)),
                fmt_ns(j),
                fmt_ns(self.max_delay_ns)
            ));
        }
        self.write_delay_ns.store(w, Ordering::Relaxed);
        self.set_delay(delay, jitter)?;
        if let Some(r) = rate {
            self.set_error_rate(r)?;
        }
        if let Some(g) = glob {
            self.set_glob(&g)?;
        }
        Ok(())
    }
}

fn compile(glob: &str) -> Result<GlobMatcher, String> {
    Glob::new(glob).map(|g| g.compile_matcher()).map_err(|e| format!("glob '{glob}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_bounds() {
        let s = Settings::new(300_000_000, 0, 0, 0.0, "**", 5_000_000_000).unwrap();
        s.apply("read_delay=2s\njitter=100ms\nglob=*.dat\n").unwrap();
        assert!(s.render().contains("read_delay=2000000000ns"));
        assert!(s.matches(Path::new("test.dat")) && !s.matches(Path::new("test.log")));
        let e = s.apply("read_delay=6s").unwrap_err();
        assert!(e.contains("exceeds --max-delay"), "{e}");
        assert_eq!(
            s.read_delay_ns.load(Ordering::Relaxed),
            2_000_000_000,
            "a refused write changes nothing"
        );
        assert!(s.apply("error_rate=2").is_err());
        assert!(s.apply("bogus=1").unwrap_err().contains("unknown setting"));
        assert!(Settings::new(6_000_000_000, 0, 0, 0.0, "**", 5_000_000_000).is_err());
        s.apply("write_delay=1s").unwrap();
        assert!(s.render().contains("write_delay=1000000000ns"));
        assert!(s.apply("write_delay=3s\njitter=3s").unwrap_err().contains("exceeds --max-delay"));
        assert_eq!(s.write_delay_ns.load(Ordering::Relaxed), 1_000_000_000, "all or nothing");
    }
}
