//! `stallscope run --boost`: seed 003's proposed mitigation, done from outside on Linux. While
//! the target's heartbeat is stale (a safepoint being reached, most likely), its threads run at
//! a higher priority, so that threads starved of a CPU reach the safepoint sooner.
//!
//! Invariant: every thread's priority is restored exactly (its own nice value, or its own
//! scheduling policy and priority) when the heartbeat resumes, and on every exit path: `Boost`
//! restores on drop, and a guarded `Boost` registers each change with a guardian process first,
//! so a stallscope killed outright (SIGKILL) still leaves no thread raised.

use guard::{Guard, Token, Undo, nice_of};
use serde::{Deserialize, Serialize};

/// How to boost: a nice value, or `SCHED_FIFO` at a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BoostLevel {
    Nice(i32),
    Fifo(i32),
}

/// When to boost: while a safepoint is open, as the JVM's perf counters show it (the seed's
/// moment, `record/safepoint_boost.rs`), or once the agent's heartbeat is `after_ns` stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoostOn {
    /// The counters looked at every `poll_ns`.
    Safepoint {
        poll_ns: u64,
    },
    Heartbeat {
        after_ns: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Saved {
    tid: i32,
    nice: i32,
    policy: i32,
    rt_priority: i32,
}

/// The threads currently boosted, with what they had before.
#[derive(Default)]
pub struct Boost {
    saved: Vec<Saved>,
    /// Boost attempts refused for lack of privilege (CAP_SYS_NICE).
    pub refused: u64,
    pub boosts: u64,
    guard: Option<Guard>,
    tokens: Vec<Token>,
    /// The boosted process, its level, and its main thread's own attributes: threads started
    /// during the boost inherit it and are put back at these.
    born: Option<(i32, BoostLevel, Saved)>,
    /// The threads to raise next, read ahead (`prepare`).
    plan: Option<Plan>,
}

/// A process's threads and their own attributes, read ahead of a boost.
struct Plan {
    pid: i32,
    own: Saved,
    threads: Vec<Saved>,
}

impl Plan {
    fn read(pid: i32) -> Option<Plan> {
        let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let own = saved_of(pid)?;
        let threads = dir
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()))
            .filter_map(saved_of)
            .collect();
        Some(Plan { pid, own, threads })
    }
}

impl Boost {
    /// A boost whose every change is also registered with a guardian (`guard`).
    pub fn guarded() -> anyhow::Result<Boost> {
        let mut b = Boost::default();
        b.guard = Some(Guard::start()?);
        Ok(b)
    }

    pub fn active(&self) -> bool {
        !self.saved.is_empty()
    }

    /// How many threads are raised now.
    pub fn raised(&self) -> usize {
        self.saved.len()
    }

    /// Reads `pid`'s threads and their own attributes now, ahead of a boost: `raise` then only
    /// registers and makes the changes (the safepoint booster reads them between safepoints, off
    /// the moment that counts). Threads started since are raised by the next plan, or, started
    /// during a boost, inherit it and are put back by `restore`.
    pub fn prepare(&mut self, pid: i32) {
        self.plan = Plan::read(pid);
    }

    /// Raises every thread of `pid` (as `prepare` found them, if it did, else as now). Does
    /// nothing if already boosted.
    pub fn raise(&mut self, pid: i32, level: BoostLevel) {
        if self.active() {
            return;
        }
        let Some(plan) = self.plan.take().filter(|p| p.pid == pid).or_else(|| Plan::read(pid))
        else {
            return;
        };
        let own = plan.own;
        let boosted_nice = match level {
            BoostLevel::Nice(n) => Some(n),
            BoostLevel::Fifo(_) => None,
        };
        let threads: Vec<Saved> = plan
            .threads
            .iter()
            .map(|&was| {
                // A thread already at the boosted level was born boosted (started by a thread
                // raised a moment ago, in this pass or before): its own level is the process's,
                // not the boost. Saving the boost as its level would have the restore put the
                // boost back, for good (the kill test found threads left at nice -10 so).
                let at_boost = match level {
                    BoostLevel::Nice(n) => was.nice == n,
                    BoostLevel::Fifo(_) => was.policy == libc::SCHED_FIFO,
                };
                if at_boost { Saved { tid: was.tid, ..own } } else { was }
            })
            .collect();
        // Every change registered before any is made, in one message: a kill between the two
        // cannot leave one unknown. No guardian, no boost: an unguarded change could outlive us.
        let mut tokens = Vec::new();
        if let Some(g) = &mut self.guard {
            let mut undo = vec![Undo::Unboost {
                pid,
                boosted_nice,
                nice: own.nice,
                policy: own.policy,
                rt_priority: own.rt_priority,
            }];
            undo.extend(threads.iter().map(|was| Undo::Reschedule {
                tid: was.tid,
                nice: was.nice,
                policy: was.policy,
                rt_priority: was.rt_priority,
            }));
            match g.add_all(undo) {
                Ok(t) => tokens = t,
                Err(_) => return,
            }
        }
        let mut tokens = tokens.into_iter();
        if let Some(t) = tokens.next() {
            self.tokens.push(t);
        }
        self.born = Some((pid, level, own));
        self.boosts += 1;
        let mut unused = Vec::new();
        for was in threads {
            let token = tokens.next();
            let ok = match level {
                BoostLevel::Nice(n) => {
                    // SAFETY: setting another thread's nice value; an error is returned.
                    let rc =
                        unsafe { libc::setpriority(libc::PRIO_PROCESS, was.tid as libc::id_t, n) };
                    rc == 0
                }
                BoostLevel::Fifo(p) => {
                    let param = libc::sched_param { sched_priority: p };
                    // SAFETY: setting another thread's policy; an error is returned.
                    let rc = unsafe { libc::sched_setscheduler(was.tid, libc::SCHED_FIFO, &param) };
                    rc == 0
                }
            };
            if ok {
                self.saved.push(was);
                self.tokens.extend(token);
            } else {
                // A thread that ended since the plan was read is not a refusal.
                if std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH) {
                    self.refused += 1;
                }
                unused.extend(token);
            }
        }
        if let Some(g) = &mut self.guard {
            g.forget_all(unused);
        }
    }

    /// Puts every boosted thread back exactly as it was.
    pub fn restore(&mut self) {
        let restored: Vec<i32> = self.saved.iter().map(|s| s.tid).collect();
        for s in self.saved.drain(..) {
            guard::reschedule(s.tid, s.nice, s.policy, s.rt_priority);
        }
        if let Some((pid, level, own)) = self.born.take() {
            let boosted_nice = match level {
                BoostLevel::Nice(n) => Some(n),
                BoostLevel::Fifo(_) => None,
            };
            guard::unboost_born(
                pid,
                boosted_nice,
                own.nice,
                own.policy,
                own.rt_priority,
                &restored,
                false,
            );
        }
        if let Some(g) = &mut self.guard {
            g.forget_all(std::mem::take(&mut self.tokens));
        }
    }
}

/// A thread's own nice value, policy and real-time priority.
fn saved_of(tid: i32) -> Option<Saved> {
    let nice = nice_of(tid)?;
    // SAFETY: plain queries of another thread's scheduling attributes.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as above, with an out-parameter.
    unsafe { libc::sched_getparam(tid, &mut param) };
    Some(Saved { tid, nice, policy, rt_priority: param.sched_priority })
}

impl Drop for Boost {
    fn drop(&mut self) {
        self.restore();
    }
}

impl std::str::FromStr for BoostLevel {
    type Err = String;
    fn from_str(s: &str) -> Result<BoostLevel, String> {
        parse(s)
    }
}

/// Parses `--boost` values: `nice:-10` (default) or `fifo:1`.
pub fn parse(s: &str) -> Result<BoostLevel, String> {
    let (kind, v) = s.split_once(':').unwrap_or((s, ""));
    match kind {
        "nice" => {
            let n = if v.is_empty() {
                -10
            } else {
                v.parse().map_err(|_| format!("--boost {s}: nice needs a number, e.g. nice:-10"))?
            };
            if !(-20..=19).contains(&n) {
                return Err(format!("--boost {s}: nice values run from -20 to 19"));
            }
            Ok(BoostLevel::Nice(n))
        }
        "fifo" => {
            let p = if v.is_empty() {
                1
            } else {
                v.parse().map_err(|_| format!("--boost {s}: fifo needs a priority, e.g. fifo:1"))?
            };
            // 99 is left to the safepoint booster, which must preempt the threads it raised.
            if !(1..=98).contains(&p) {
                return Err(format!("--boost {s}: use a SCHED_FIFO priority from 1 to 98"));
            }
            Ok(BoostLevel::Fifo(p))
        }
        _ => Err(format!("--boost {s}: use nice:N or fifo:N")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boosts_and_restores_exactly() {
        assert_eq!(parse("nice:-5"), Ok(BoostLevel::Nice(-5)));
        assert_eq!(parse("nice"), Ok(BoostLevel::Nice(-10)));
        assert_eq!(parse("fifo:2"), Ok(BoostLevel::Fifo(2)));
        assert!(parse("nice:-30").is_err() && parse("rt").is_err());
        // A child process with one thread at nice 3; boost it and put it back.
        let mut child =
            std::process::Command::new("nice").args(["-n", "3", "sleep", "30"]).spawn().unwrap();
        let pid = child.id() as i32;
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(nice_of(pid), Some(3));
        let mut b = Boost::default();
        b.raise(pid, BoostLevel::Nice(-5));
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(nice_of(pid), Some(-5));
            assert!(b.active());
        }
        drop(b);
        assert_eq!(nice_of(pid), Some(3), "restored on drop");
        let _ = child.kill();
        let _ = child.wait();
    }
}
