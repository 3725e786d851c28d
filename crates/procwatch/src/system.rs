//! Machine-wide signals around a stall: TLB shootdown interrupts per CPU, CPU time split
//! (steal above all) from `/proc/stat`, pressure stall information, and the memory manager's
//! counters (swap, reclaim, dirty pages). A cgroup's own signals are in `cgroup`.
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
    tlb_shootdowns(&crate::procfile::read("/proc/interrupts").ok()?)
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
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
}

pub fn cpu_times(stat: &str) -> Option<CpuTimes> {
    let l = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = l.split_whitespace().skip(1).map_while(|x| x.parse().ok()).collect();
    let g = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        user: g(0),
        nice: g(1),
        system: g(2),
        idle: g(3),
        iowait: g(4),
        irq: g(5),
        softirq: g(6),
        steal: g(7),
    })
}

pub fn read_cpu_times() -> Option<CpuTimes> {
    cpu_times(&crate::procfile::read("/proc/stat").ok()?)
}

/// `total=` of the `some` line of a PSI file (`/proc/pressure/cpu|io|memory`), in µs.
pub fn psi_some_total_us(text: &str) -> Option<u64> {
    let l = text.lines().find(|l| l.starts_with("some "))?;
    l.split_whitespace().find_map(|f| f.strip_prefix("total=")).and_then(|v| v.parse().ok())
}

/// `avg10=` of the `some` line of a PSI file: the share of the last 10 s, in percent, in which
/// some task waited.
pub fn psi_some_avg10(text: &str) -> Option<f64> {
    let l = text.lines().find(|l| l.starts_with("some "))?;
    l.split_whitespace().find_map(|f| f.strip_prefix("avg10=")).and_then(|v| v.parse().ok())
}

/// Memory-management counters from `/proc/vmstat` that say what the kernel did to make room:
/// swapping, direct reclaim and compaction (machine-wide; a memory cgroup's own reclaim shows in
/// its own stats instead), and how much is dirty or under writeback now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStat {
    pub pswpin: u64,
    pub pswpout: u64,
    pub pgmajfault: u64,
    /// Direct reclaim entries, summed over zones (`allocstall_*`).
    pub allocstall: u64,
    pub pgscan_direct: u64,
    pub compact_stall: u64,
    pub refault_anon: u64,
    pub refault_file: u64,
    /// Pages dirty and under writeback now (gauges, not counters).
    pub nr_dirty: u64,
    pub nr_writeback: u64,
}

pub fn vmstat(text: &str) -> VmStat {
    let mut v = VmStat::default();
    for l in text.lines() {
        let Some((k, n)) = l.split_once(' ') else { continue };
        let Ok(n) = n.trim().parse::<u64>() else { continue };
        match k {
            "pswpin" => v.pswpin = n,
            "pswpout" => v.pswpout = n,
            "pgmajfault" => v.pgmajfault = n,
            "pgscan_direct" => v.pgscan_direct = n,
            "compact_stall" => v.compact_stall = n,
            "workingset_refault_anon" => v.refault_anon = n,
            "workingset_refault_file" => v.refault_file = n,
            "nr_dirty" => v.nr_dirty = n,
            "nr_writeback" => v.nr_writeback = n,
            k if k.starts_with("allocstall_") => v.allocstall += n,
            _ => {}
        }
    }
    v
}

pub fn read_vmstat() -> Option<VmStat> {
    Some(vmstat(&crate::procfile::read("/proc/vmstat").ok()?))
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
        assert_eq!(
            psi_some_total_us(
                "some avg10=3.19 avg60=2.42 avg300=0.68 total=2381711\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
            ),
            Some(2381711)
        );
        assert_eq!(
            psi_some_avg10("some avg10=3.19 avg60=2.42 avg300=0.68 total=2381711\n"),
            Some(3.19)
        );
        assert_eq!(psi_some_avg10("full avg10=3.19 total=1\n"), None);
        let v = vmstat("pswpin 5\nallocstall_dma 1\nallocstall_normal 2\nnr_dirty 7\nbogus x\n");
        assert_eq!((v.pswpin, v.allocstall, v.nr_dirty), (5, 3, 7));
        assert!(read_vmstat().is_some());
    }
}
