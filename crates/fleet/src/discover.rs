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
    /// `--match PATTERN`, or the one line saying why it is no regular expression.
    pub fn matching(pattern: &str) -> Result<Selection, String> {
        regex::Regex::new(pattern).map(Selection::Matching).map_err(|e| {
            format!("--match '{pattern}': not a regular expression ({}); e.g. --match 'com\\.acme\\.Main|orders\\.jar'", e.to_string().lines().last().unwrap_or("").trim_start_matches("error: "))
        })
    }

    pub fn selects(&self, j: &JvmProcess) -> bool {
        match self {
            Selection::All => true,
            Selection::Matching(m) => matches(m, &j.main, &j.cmdline),
            Selection::Pids(p) => p.contains(&j.pid),
        }
    }
}

/// What `--match` tests: the main class or jar, or the whole command line.
fn matches(m: &regex::Regex, main: &str, cmdline: &[String]) -> bool {
    m.is_match(main) || m.is_match(&cmdline.join(" "))
}

/// A JVM this young is left for the next pass, when it is to be attached to.
pub const MIN_AGE_S: f64 = 3.0;

/// The processes seen so far, by pid: their start time and name (a process that execs changes
/// its name and may become a JVM).
#[derive(Default)]
pub struct Discovery {
    seen: HashMap<i32, (u64, String)>,
    passes: u64,
}

/// A process seen before and older than this is looked at again only every few passes: it is
/// not a JVM, and stays one only by exec'ing into java (a wrapper script's `exec java`), which
/// a young process does soon after its start.
const SETTLED_AGE_S: f64 = 10.0;
const SETTLED_EVERY: u64 = 5;

/// A process's start time and name: with its pid, what names this life of it.
fn stat_key(pid: i32) -> Option<(u64, String)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let p = procwatch::task::parse_stat(s.trim_end())?;
    Some((p.starttime, p.comm))
}

fn uptime_s() -> f64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

impl Discovery {
    /// Whether an unreadable process could be one `sel` selects (its command line matches).
    fn could_mean(&self, sel: &Selection, pid: i32) -> bool {
        match sel {
            Selection::All | Selection::Pids(_) => true,
            Selection::Matching(m) => {
                let cmdline = procwatch::jvms::cmdline(pid);
                matches(m, &procwatch::jvms::main_of(&cmdline), &cmdline)
            }
        }
    }

    /// JVMs not offered before that `sel` selects; and, once, each process that could not be
    /// read (another user's, without privilege), with why.
    pub fn pass(
        &mut self,
        sel: &Selection,
        min_age_s: f64,
    ) -> (Vec<JvmProcess>, Vec<procwatch::jvms::Unreadable>) {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let pids: Vec<i32> = match &sel {
            Selection::Pids(p) => p.clone(),
            _ => procwatch::jvms::pids(),
        };
        let live: HashSet<i32> = pids.iter().copied().collect();
        self.seen.retain(|p, _| live.contains(p));
        let (ticks, now) = (procwatch::task::clock_ticks() as f64, uptime_s());
        let (mut found, mut unreadable) = (Vec::new(), Vec::new());
        self.passes += 1;
        let full = self.passes.is_multiple_of(SETTLED_EVERY);
        for pid in pids.into_iter().filter(|p| *p != me) {
            // Each pass reads only the processes it has not seen, and young ones; a settled one
            // every few passes (a stat file read per process is most of a pass's cost).
            if !full
                && self
                    .seen
                    .get(&pid)
                    .is_some_and(|(start, _)| now - *start as f64 / ticks > SETTLED_AGE_S)
            {
                continue;
            }
            let Some(key) = stat_key(pid) else { continue };
            if self.seen.get(&pid) == Some(&key) {
                continue;
            }
            let age = now - key.0 as f64 / ticks;
            match procwatch::jvms::jvm(pid) {
                // Offered once it is old enough.
                Ok(Some(_)) if age < min_age_s => continue,
                // Watched from outside: offered once its counters are there (one started with
                // -XX:-UsePerfData after a few seconds, to /proc alone).
                Ok(Some(_))
                    if min_age_s == 0.0
                        && age < MIN_AGE_S
                        && procwatch::perfdata::locate(pid).is_err() =>
                {
                    continue;
                }
                Ok(Some(j)) => {
                    if sel.selects(&j) {
                        found.push(j);
                    }
                }
                // Not a JVM yet: a young process may still be loading libjvm.so.
                Ok(None) if age < MIN_AGE_S => continue,
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
