//! The machine's counters counted by BPF where their file is dear to read: TLB shootdowns
//! received per CPU, which `/proc/interrupts` gives only by formatting every interrupt's row for
//! every CPU (about 60 µs a read here, against 20 for `/proc/vmstat`; the recorder reads it at a
//! stall's first and last look). Loaded once per process by the first user that may load BPF
//! programs, and attached until it exits.
//!
//! Invariant: a reading is the file's row, CPU for CPU: the program's counts plus each CPU's
//! count in the file when it was attached. Where the program cannot be loaded, the file is read.

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::sync::OnceLock;

mod skel {
    #![allow(clippy::all, clippy::pedantic, missing_docs, non_camel_case_types, dead_code)]
    include!(concat!(env!("OUT_DIR"), "/counters.skel.rs"));
}

/// The counting program, attached.
pub struct Counters {
    tlb: MapHandle,
    /// The online CPUs' numbers, in the file's column order.
    cpus: Vec<usize>,
    /// Each online CPU's count in the file when the program began counting.
    base: Vec<u64>,
    /// Keeps the program attached (the loaded object itself is let go).
    _link: libbpf_rs::Link,
}

static SHARED: OnceLock<Option<Counters>> = OnceLock::new();

/// A reader of the `TLB` row of `/proc/interrupts`, per online CPU (this crate reads no `/proc`
/// file's format itself: procwatch does).
pub type TlbRow = fn() -> Option<Vec<u64>>;

impl Counters {
    /// This process's counters, loaded at the first call (None: BPF refused, or the kernel has
    /// no `flush_tlb_func` or no TLB row; the file is read then). `row` reads the file's TLB row
    /// (`procwatch::system::read_tlb_shootdowns`), to align the counts to it.
    pub fn shared(row: TlbRow) -> Option<&'static Counters> {
        SHARED.get_or_init(|| Counters::load(row).ok()).as_ref()
    }

    /// The counters if a caller loaded them already: never loads (for readers that must not
    /// load BPF programs themselves).
    pub fn loaded() -> Option<&'static Counters> {
        SHARED.get().and_then(Option::as_ref)
    }

    /// Loads and attaches the program, and aligns its counts to the file's (`row`).
    pub fn load(row: TlbRow) -> Result<Counters, String> {
        use libbpf_rs::skel::{OpenSkel, SkelBuilder};
        let flush = flush_tlb_func()?;
        let cpus = online_cpus()?;
        let mut storage = std::mem::MaybeUninit::uninit();
        let mut open = skel::CountersSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| format!("could not open the BPF counters: {e}"))?;
        if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
            ro.flush_fn = flush;
        }
        let sk = open.load().map_err(|e| format!("the kernel refused the BPF counters: {e}"))?;
        let tlb =
            MapHandle::try_from(&sk.maps.tlb).map_err(|e| format!("the BPF counters' map: {e}"))?;
        let link = sk
            .progs
            .on_csd
            .attach()
            .map_err(|e| format!("could not attach to csd_function_entry: {e}"))?;
        let mut c = Counters { tlb, cpus, base: Vec::new(), _link: link };
        c.base = c.aligned(row)?;
        Ok(c)
    }

    /// Each online CPU's count in the file less the program's, read between two equal readings
    /// of the program's (no shootdown in between), at most a few tries.
    fn aligned(&self, row: TlbRow) -> Result<Vec<u64>, String> {
        for _ in 0..20 {
            let before = self.counted()?;
            let file = row().ok_or("no TLB row in /proc/interrupts")?;
            let after = self.counted()?;
            if before == after && file.len() == before.len() {
                return Ok(file.iter().zip(&before).map(|(f, b)| f.saturating_sub(*b)).collect());
            }
        }
        Err("the TLB row kept moving while the BPF counters were aligned to it".into())
    }

    /// The program's counts, per online CPU.
    fn counted(&self) -> Result<Vec<u64>, String> {
        let per = self
            .tlb
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| format!("the BPF counters' map: {e}"))?
            .ok_or("the BPF counters' map has no entry")?;
        let count = |c: &usize| {
            per.get(*c)
                .and_then(|v| v.get(..8))
                .map(|b| u64::from_ne_bytes(b.try_into().expect("eight bytes")))
                .unwrap_or(0)
        };
        Ok(self.cpus.iter().map(count).collect())
    }

    /// TLB shootdowns received, per online CPU: the `TLB` row of `/proc/interrupts`.
    pub fn tlb_shootdowns(&self) -> Option<Vec<u64>> {
        let n = self.counted().ok()?;
        Some(n.iter().zip(&self.base).map(|(n, b)| n + b).collect())
    }
}

/// `flush_tlb_func`'s address, from `/proc/kallsyms` (root's view).
fn flush_tlb_func() -> Result<u64, String> {
    let text =
        std::fs::read_to_string("/proc/kallsyms").map_err(|e| format!("/proc/kallsyms: {e}"))?;
    text.lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            let addr = it.next()?;
            let _kind = it.next()?;
            (it.next()? == "flush_tlb_func" && it.next().is_none())
                .then(|| u64::from_str_radix(addr, 16).ok())
                .flatten()
        })
        .filter(|a| *a != 0)
        .ok_or_else(|| "/proc/kallsyms has no address for flush_tlb_func".into())
}

fn online_cpus() -> Result<Vec<usize>, String> {
    let p = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
    cpu_list(&text).ok_or_else(|| format!("{p}: not a CPU list: {:?}", text.trim()))
}

/// A kernel CPU list (`0-3,8,10-11`), in order; None if it is not one.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().ok()?, b.parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        // A bound no machine has (the kernel's NR_CPUS is at most 8192).
        if b < a || b >= 1 << 16 || cpus.last().is_some_and(|l| *l >= a) {
            return None;
        }
        cpus.extend(a..=b);
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("0-1\n"), Some(vec![0, 1]));
        assert_eq!(cpu_list("0"), Some(vec![0]));
        assert_eq!(cpu_list("0-2,4,6-7"), Some(vec![0, 1, 2, 4, 6, 7]));
        for bad in ["", "a", "3-1", "0,0", "1,0", "0-", "-1", "0-99999"] {
            assert_eq!(cpu_list(bad), None, "{bad:?}");
        }
    }

    proptest! {
        /// Any set of CPUs written as ranges reads back as that set; any text reads without a
        /// panic.
        #[test]
        fn a_written_list_reads_back(set in proptest::collection::btree_set(0usize..300, 1..40)) {
            let v: Vec<usize> = set.into_iter().collect();
            let mut parts = Vec::new();
            let mut i = 0;
            while i < v.len() {
                let mut j = i;
                while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
                    j += 1;
                }
                parts.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
                i = j + 1;
            }
            prop_assert_eq!(cpu_list(&parts.join(",")), Some(v));
        }

        #[test]
        fn any_text_reads_without_a_panic(s in "\\PC{0,40}") {
            let _ = cpu_list(&s);
        }
    }
}
