//! Retention for `watch`: the recordings it keeps stay within `--retain` bytes and
//! `--retain-age`, and never fill the disk. The oldest evidence goes first: finished recordings,
//! oldest first; a live recording that grows past its share, or gets old, is rolled (watch
//! detaches from its JVM and attaches again into a fresh recording), so that it too can go.
//!
//! Invariant: the policy is a pure function of what is on disk ([`plan`]); only finished
//! recordings are ever removed, never the one a JVM writes to.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// One recording directory, as the policy sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    pub dir: PathBuf,
    /// Disk used (allocated blocks).
    pub bytes: u64,
    /// When it began.
    pub start: SystemTime,
    /// Being written: the pid of the JVM it records.
    pub live: Option<i32>,
}

#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub bytes: u64,
    pub age: Duration,
}

/// What to do now.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    pub remove: Vec<PathBuf>,
    /// JVMs (pids) whose recording is to be rolled.
    pub roll: Vec<i32>,
}

/// Finished recordings are removed, oldest first, while everything kept is over three quarters
/// of the bound (the rest is room for the live ones to grow into between two passes); a live one
/// is rolled past its share of the last quarter, or past half the age bound. `free` is what the
/// file system has left for us: the bound shrinks to keep 5% of it (`reserve`) free.
pub fn plan(kept: &[Kept], limits: Limits, now: SystemTime, free: u64, reserve: u64) -> Plan {
    let mut p = Plan::default();
    let ours: u64 = kept.iter().map(|k| k.bytes).sum();
    let bound = limits.bytes.min((ours + free).saturating_sub(reserve));
    let live: Vec<&Kept> = kept.iter().filter(|k| k.live.is_some()).collect();
    let share = (bound / 4) / (live.len().max(1) as u64);
    let age = |k: &Kept| now.duration_since(k.start).unwrap_or_default();
    for k in &live {
        if k.bytes > share || age(k) > limits.age / 2 {
            p.roll.extend(k.live);
        }
    }
    let mut finished: Vec<&Kept> = kept.iter().filter(|k| k.live.is_none()).collect();
    finished.sort_by_key(|k| k.start);
    let mut total = ours;
    for k in finished {
        if total > bound / 4 * 3 || age(k) > limits.age {
            p.remove.push(k.dir.clone());
            total -= k.bytes;
        }
    }
    p
}

/// Disk used by a recording directory (its files' allocated blocks).
pub fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if let Ok(m) = e.metadata() {
                n += if m.is_dir() { du(&e.path()) } else { m.blocks() * 512 };
            }
        }
    }
    n
}

/// Bytes free for an unprivileged user, and the reserve to leave (5% of the file system), where
/// `dir` is.
pub fn free_space(dir: &Path) -> (u64, u64) {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return (u64::MAX, 0);
    };
    // SAFETY: a valid path and an out-parameter of the right type.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return (u64::MAX, 0);
    }
    let bs = st.f_frsize as u64;
    (st.f_bavail as u64 * bs, st.f_blocks as u64 * bs / 20)
}

/// Parses `--retain`: bytes with an optional K, M, G or T (powers of 1024), e.g. `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let m: u64 = match unit.trim_end_matches("IB").trim_end_matches('B') {
                "" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                _ => {
                    return Err(format!(
                        "'{s}': unknown unit '{}'; use K, M, G or T, e.g. 2G",
                        &t[i..]
                    ));
                }
            };
            (&t[..i], m)
        }
        None => (t, 1),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("'{s}': not a size; e.g. 500M or 2G"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("'{s}': a size must be above 0"));
    }
    Ok((n * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn kept(name: &str, mb: u64, age_s: u64, live: Option<i32>, now: SystemTime) -> Kept {
        Kept {
            dir: PathBuf::from(name),
            bytes: mb * MB,
            start: now - Duration::from_secs(age_s),
            live,
        }
    }

    #[test]
    fn the_oldest_finished_recordings_go_first_and_live_ones_are_rolled_past_their_share() {
        let now = SystemTime::now();
        let l = Limits { bytes: 100 * MB, age: Duration::from_secs(7 * 86400) };
        let ks = vec![
            kept("new", 30, 10, None, now),
            kept("old", 30, 100, None, now),
            kept("mid", 30, 50, None, now),
            kept("live", 10, 5, Some(7), now),
        ];
        let p = plan(&ks, l, now, u64::MAX / 4, 0);
        // 100 MB kept, over 75: the oldest goes (70 left).
        assert_eq!(p.remove, vec![PathBuf::from("old")]);
        assert!(p.roll.is_empty(), "10 MB is within the live share of 25 MB");
        let ks = vec![kept("live", 30, 5, Some(7), now), kept("live2", 5, 5, Some(8), now)];
        assert_eq!(
            plan(&ks, l, now, u64::MAX / 4, 0).roll,
            vec![7],
            "two live JVMs share a quarter: 12.5 MB each"
        );
    }

    #[test]
    fn age_removes_finished_recordings_and_rolls_live_ones_at_half_of_it() {
        let now = SystemTime::now();
        let l = Limits { bytes: 100 * MB, age: Duration::from_secs(3600) };
        let ks = vec![
            kept("ancient", 1, 4000, None, now),
            kept("recent", 1, 100, None, now),
            kept("live", 1, 2000, Some(3), now),
        ];
        let p = plan(&ks, l, now, u64::MAX / 4, 0);
        assert_eq!(p.remove, vec![PathBuf::from("ancient")]);
        assert_eq!(p.roll, vec![3]);
    }

    #[test]
    fn a_full_disk_shrinks_the_bound() {
        let now = SystemTime::now();
        let l = Limits { bytes: 100 * MB, age: Duration::from_secs(3600) };
        let ks = vec![kept("a", 10, 100, None, now), kept("b", 10, 50, None, now)];
        // 20 MB ours, 5 MB free, 10 MB to keep free: the bound is 15 MB, so 11.25 at most kept.
        let p = plan(&ks, l, now, 5 * MB, 10 * MB);
        assert_eq!(p.remove, vec![PathBuf::from("a")]);
    }

    #[test]
    fn sizes_parse_as_people_write_them() {
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12Q").unwrap_err().contains("unknown unit"));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
    }
}
