//! Machine-wide signals around a stall: TLB shootdown interrupts per CPU, CPU time split
//! (steal above all) from `/proc/stat`, pressure stall information, and a cgroup's CPU
//! throttling counters.
//!
//! Invariant: each reader returns plain counters; rates and deltas are the caller's.

use serde::{Deserialize, Serialize};

/// The `TLB` row of `/proc/interrupts`: shootdowns received, per CPU.
pub fn tlb_shootdowns(interrupts: &str) -> Option<Vec<u64>> {
    let line = interrupts.lines().find(|l| l.trim_start().starts_with("TLB:"))?;
    let rest = line.trim_start().strip_prefix("TLB:")?;
    let v: Vec<u64> = rest.split_whitespace().map_while(|x| x.parse().ok()).collect();
    (!v.is_empty()).then_some(v)
}

pub fn read_tlb_shootdowns() -> Option<Vec<u64>> {
    tlb_shootdowns(&std::fs::read_to_string("/proc/interrupts").ok()?)
}

/// Aggregate CPU time from the `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    pub fn total(&self) -> u64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
}

pub fn cpu_times(stat: &str) -> Option<CpuTimes> {
    let l = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = l.split_whitespace().skip(1).map_while(|x| x.parse().ok()).collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes { user: g(0), nice: g(1), system: g(2), idle: g(3), iowait: g(4), irq: g(5), softirq: g(6), steal: g(7) })
}

pub fn read_cpu_times() -> Option<CpuTimes> {
    cpu_times(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// `total=` of the `some` line of a PSI file (`/proc/pressure/cpu|io|memory`), in µs.
pub fn psi_some_total_us(text: &str) -> Option<u64> {
    let l = text.lines().find(|l| l.starts_with("some "))?;
    l.split_whitespace().find_map(|f| f.strip_prefix("total=")).and_then(|v| v.parse().ok())
}

pub fn read_psi_some_total_us(resource: &str) -> Option<u64> {
    psi_some_total_us(&std::fs::read_to_string(format!("/proc/pressure/{resource}")).ok()?)
}

/// CPU throttling of a cgroup (`cpu.stat`: v1 `nr_throttled`/`throttled_time` ns, v2
/// `nr_throttled`/`throttled_usec`), normalised to nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Throttling {
    pub nr_periods: u64,
    pub nr_throttled: u64,
    pub throttled_ns: u64,
}

pub fn throttling(cpu_stat: &str) -> Throttling {
    let get = |k: &str| cpu_stat.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
    Throttling {
        nr_periods: get("nr_periods").unwrap_or(0),
        nr_throttled: get("nr_throttled").unwrap_or(0),
        throttled_ns: get("throttled_usec").map(|u| u * 1000).or_else(|| get("throttled_time")).unwrap_or(0),
    }
}

/// The `cpu.stat` file of the CPU cgroup a process is in (v2 unified, or v1 `cpu`).
pub fn cpu_stat_path(pid: i32) -> Option<std::path::PathBuf> {
    let cg = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount_of = |want_v2: bool, controller: &str| -> Option<String> {
        mounts.lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mp = pre.split(' ').nth(4)?;
            let mut p = post.split(' ');
            let fstype = p.next()?;
            let opts = p.nth(1).unwrap_or("");
            let ok = if want_v2 { fstype == "cgroup2" } else { fstype == "cgroup" && opts.split(',').any(|o| o == controller) };
            ok.then(|| mp.to_string())
        })
    };
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next()?, f.next()?, f.next()?);
        if ctrls.split(',').any(|c| c == "cpu") {
            if let Some(mp) = mount_of(false, "cpu") {
                let p = std::path::PathBuf::from(mp).join(path.trim_start_matches('/')).join("cpu.stat");
                if p.exists() {
                    return Some(p);
                }
            }
        }
        if ctrls.is_empty() {
            if let Some(mp) = mount_of(true, "") {
                let p = std::path::PathBuf::from(mp).join(path.trim_start_matches('/')).join("cpu.stat");
                if p.exists() {
                    return Some(p);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_formats() {
        let irq = "           CPU0       CPU1\n  0:   12   0   IO-APIC   2-edge      timer\nTLB:        780        703   TLB shootdowns\n";
        assert_eq!(tlb_shootdowns(irq), Some(vec![780, 703]));
        assert!(read_tlb_shootdowns().is_some(), "this machine has the TLB row");
        let c = cpu_times("cpu  10 1 20 300 4 0 2 7 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!((c.steal, c.total()), (7, 344));
        assert_eq!(psi_some_total_us("some avg10=3.19 avg60=2.42 avg300=0.68 total=2381711\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"), Some(2381711));
        let t = throttling("nr_periods 10\nnr_throttled 3\nthrottled_usec 1500\n");
        assert_eq!(t, Throttling { nr_periods: 10, nr_throttled: 3, throttled_ns: 1_500_000 });
        let t = throttling("nr_periods 10\nnr_throttled 3\nthrottled_time 999\n");
        assert_eq!(t.throttled_ns, 999);
        assert!(cpu_stat_path(std::process::id() as i32).is_some());
    }
}
