//! Finding the JVMs `stallscope watch` should guard, again and again: a cheap pass over `/proc`
//! in which only processes not seen before (by pid, start time and name) are looked at closely
//! (`procwatch::jvms::jvm`, which reads their memory map).
//!
//! Invariant: a process is offered once per life (pid and start time); a JVM younger than
//! `MIN_AGE` is not offered yet: the attach protocol's SIGQUIT kills a JVM that has not yet
//! installed its signal handlers.

use procwatch::jvms::JvmProcess;
use std::collections::{HashMap, HashSet};

/// What `watch` guards: every JVM, those whose main class, jar or command line matches, or the
/// pids named.
pub enum Selection {
    All,
    Matching(regex::Regex),
    Pids(Vec<i32>),
}

impl Selection {
    pub fn selects(&self, j: &JvmProcess) -> bool {
        match self {
            Selection::All => true,
            Selection::Matching(m) => m.is_match(&j.main) || m.is_match(&j.cmdline.join(" ")),
            Selection::Pids(p) => p.contains(&j.pid),
        }
    }
}

/// A JVM this young is left for the next pass.
const MIN_AGE_S: f64 = 3.0;

/// The processes seen so far, by pid: their start time and name (a process that execs changes
/// its name and may become a JVM).
#[derive(Default)]
pub struct Discovery {
    seen: HashMap<i32, (u64, String)>,
}

fn stat_key(pid: i32) -> Option<(u64, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (s.find('(')?, s.rfind(')')?);
    let comm = s[open + 1..close].to_string();
    // Field 22 (starttime) is the 20th after the name's closing parenthesis.
    let start = s[close + 1..].split_whitespace().nth(19)?.parse().ok()?;
    Some((start, comm))
}

fn uptime_s() -> f64 {
    std::fs::read_to_string("/proc/uptime").ok().and_then(|u| u.split_whitespace().next().and_then(|v| v.parse().ok())).unwrap_or(0.0)
}

impl Discovery {
    /// Whether an unreadable process could be one `sel` selects (its command line matches).
    fn could_mean(&self, sel: &Selection, pid: i32) -> bool {
        match sel {
            Selection::All | Selection::Pids(_) => true,
            Selection::Matching(m) => {
                let cmdline: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default().split(|b| *b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
                m.is_match(&cmdline.join(" ")) || m.is_match(&procwatch::jvms::main_of(&cmdline))
            }
        }
    }

    /// JVMs not offered before that `sel` selects; and, once, each process that could not be
    /// read (another user's, without privilege), with why.
    pub fn pass(&mut self, sel: &Selection) -> (Vec<JvmProcess>, Vec<procwatch::jvms::Unreadable>) {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let pids: Vec<i32> = match &sel {
            Selection::Pids(p) => p.clone(),
            _ => std::fs::read_dir("/proc").map(|d| d.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect()).unwrap_or_default(),
        };
        let live: HashSet<i32> = pids.iter().copied().collect();
        self.seen.retain(|p, _| live.contains(p));
        let (ticks, now) = (procwatch::task::clock_ticks() as f64, uptime_s());
        let (mut found, mut unreadable) = (Vec::new(), Vec::new());
        for pid in pids.into_iter().filter(|p| *p != me) {
            let Some(key) = stat_key(pid) else { continue };
            if self.seen.get(&pid) == Some(&key) {
                continue;
            }
            let young = now - key.0 as f64 / ticks < MIN_AGE_S;
            match procwatch::jvms::jvm(pid) {
                // Offered once it is old enough.
                Ok(Some(_)) if young => continue,
                Ok(Some(j)) => {
                    if sel.selects(&j) {
                        found.push(j);
                    }
                }
                // Not a JVM yet: a young process may still be loading libjvm.so.
                Ok(None) if young => continue,
                Ok(None) => {}
                // Said once, and only of a process the selection could mean.
                Err(u) if self.could_mean(sel, pid) => unreadable.push(u),
                Err(_) => {}
            }
            self.seen.insert(pid, key);
        }
        (found, unreadable)
    }
}
