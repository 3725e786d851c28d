//! Every process's CPU time while a stall is under way, counted by the BPF program at each
//! switch (to the ns), so that who took the CPUs from a stalled process is said without reading
//! every process's `/proc/PID/stat` twice a stall (milliseconds of CPU on a busy host, in 10 ms
//! ticks). Counting is on only while somebody holds a [`Counting`]: between stalls the program
//! pays one array lookup per switch.
//!
//! Invariants:
//! - Counts of one epoch only: the epoch changes each time counting starts again, and an entry
//!   of another epoch is not read, so two looks in one epoch give what each process ran between
//!   them.
//! - Bounded: the program's map holds 8192 processes (LRU: with more in one epoch, the least
//!   recently run are dropped); a look reads it in one
//!   system call per [`BATCH`] entries, plus one for the CPUs' tasks now running.

use crate::raw::Cursor;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Entries read per system call.
const BATCH: u32 = 1024;

/// The program's maps for counting, and who counts now.
pub(crate) struct Maps {
    pub(crate) on: MapHandle,
    pub(crate) cputime: MapHandle,
    pub(crate) oncpu: MapHandle,
}

/// Counts every process's CPU time while a [`Counting`] is held (cloned handles share it).
#[derive(Clone)]
pub struct CpuTally {
    inner: Arc<Inner>,
}

struct Inner {
    maps: Maps,
    /// How many hold a [`Counting`], and the epoch counted in (0 before the first).
    state: Mutex<(u32, u64)>,
}

/// Counting on while held; dropped, off once nobody else holds one.
pub struct Counting {
    tally: CpuTally,
    epoch: u64,
}

/// One process's CPU time in an epoch so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcTime {
    pub tgid: i32,
    /// Its parent's when it was first counted.
    pub ptgid: i32,
    /// Its main thread's name then.
    pub comm: String,
    pub ns: u64,
    /// It ended (its main thread exited) while counted.
    pub ended: bool,
}

/// Every process's CPU time counted so far, at `at` (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Look {
    pub at: u64,
    pub epoch: u64,
    pub procs: HashMap<i32, ProcTime>,
}

impl std::fmt::Debug for CpuTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("offcpu::CpuTally")
    }
}

impl CpuTally {
    pub(crate) fn new(maps: Maps) -> CpuTally {
        CpuTally { inner: Arc::new(Inner { maps, state: Mutex::new((0, 0)) }) }
    }

    /// Counting on (a new epoch if it was off), until the handle is dropped; why not, when the
    /// program's map could not be written.
    pub fn count(&self) -> Result<Counting, String> {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.0 == 0 {
            let epoch = st.1 + 1;
            let mut v = [0u8; 16];
            v[..8].copy_from_slice(&epoch.to_ne_bytes());
            v[8..].copy_from_slice(&crate::now_ns().to_ne_bytes());
            self.inner.maps.on.update(&0u32.to_ne_bytes(), &v, MapFlags::ANY).map_err(|e| {
                format!("could not start counting CPU time in the BPF program: {e}")
            })?;
            st.1 = epoch;
        }
        st.0 += 1;
        Ok(Counting { tally: self.clone(), epoch: st.1 })
    }

    fn stop(&self) {
        let mut st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 = st.0.saturating_sub(1);
        if st.0 == 0 {
            let _ = self.inner.maps.on.update(&0u32.to_ne_bytes(), &[0u8; 16], MapFlags::ANY);
            // Every entry is of an epoch now over: gone, or the map fills with every process
            // that ever ran during a stall (8,192, the LRU's bound, in a day's soak), and each
            // look reads them all (issue 58).
            let keys: Vec<Vec<u8>> = self.inner.maps.cputime.keys().collect();
            for k in keys {
                let _ = self.inner.maps.cputime.delete(&k);
            }
        }
    }

    /// How many processes' entries the program's map holds now (none once no counting is on).
    pub fn held(&self) -> usize {
        self.inner.maps.cputime.keys().count()
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        self.tally.stop();
    }
}

impl Counting {
    /// Every process's CPU time in this epoch so far, with what the CPUs run now added.
    pub fn look(&self) -> Look {
        let maps = &self.tally.inner.maps;
        let at = crate::now_ns();
        let mut procs = HashMap::new();
        if let Ok(batches) = maps.cputime.lookup_batch(BATCH, MapFlags::ANY, MapFlags::ANY) {
            for (k, v) in batches {
                if let Some(p) = parse_entry(&k, &v).filter(|(e, _)| *e == self.epoch) {
                    procs.insert(p.1.tgid, p.1);
                }
            }
        }
        if let Ok(Some(cpus)) = maps.oncpu.lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY) {
            for c in cpus {
                let Some((since, epoch, tgid)) = parse_run(&c) else { continue };
                if epoch != self.epoch || tgid == 0 || since >= at {
                    continue;
                }
                procs
                    .entry(tgid)
                    .or_insert_with(|| ProcTime {
                        tgid,
                        ptgid: 0,
                        comm: String::new(),
                        ns: 0,
                        ended: false,
                    })
                    .ns += at - since;
            }
        }
        Look { at, epoch: self.epoch, procs }
    }
}

/// A `cputime` entry: its epoch and the process's time.
fn parse_entry(key: &[u8], v: &[u8]) -> Option<(u64, ProcTime)> {
    // `struct proc_time`: epoch, ns, ptgid, ended, comm[16].
    if key.len() < 4 || v.len() < 40 {
        return None;
    }
    let tgid = Cursor::new(key).u32() as i32;
    let mut c = Cursor::new(v);
    let (epoch, ns, ptgid, ended) = (c.u64(), c.u64(), c.u32() as i32, c.u32() != 0);
    Some((epoch, ProcTime { tgid, ptgid, comm: c.comm(), ns, ended }))
}

/// An `oncpu` entry (`struct cpu_run`): since when its task has run, in which epoch, and its
/// process.
fn parse_run(v: &[u8]) -> Option<(u64, u64, i32)> {
    if v.len() < 20 {
        return None;
    }
    let mut c = Cursor::new(v);
    Some((c.u64(), c.u64(), c.u32() as i32))
}

/// What each process ran between two looks of one epoch, the most first; processes that ran
/// nothing left out. Empty when the looks are of different epochs.
pub fn taken(before: &Look, after: &Look) -> Vec<ProcTime> {
    if before.epoch != after.epoch {
        return vec![];
    }
    let mut out: Vec<ProcTime> = after
        .procs
        .values()
        .filter_map(|p| {
            let ns = p.ns.saturating_sub(before.procs.get(&p.tgid).map_or(0, |b| b.ns));
            (ns > 0).then(|| ProcTime { ns, ..p.clone() })
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tgid.cmp(&b.tgid)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(epoch: u64, ns: u64, ptgid: i32, comm: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 40];
        v[..8].copy_from_slice(&epoch.to_ne_bytes());
        v[8..16].copy_from_slice(&ns.to_ne_bytes());
        v[16..20].copy_from_slice(&ptgid.to_ne_bytes());
        v[20] = u8::from(comm == b"ended");
        v[24..24 + comm.len()].copy_from_slice(comm);
        v
    }

    #[test]
    fn an_entry_reads_as_the_program_lays_it_out() {
        let (e, p) = parse_entry(&77i32.to_ne_bytes(), &entry(3, 5_000, 1, b"stress-ng")).unwrap();
        assert_eq!(e, 3);
        let want =
            ProcTime { tgid: 77, ptgid: 1, comm: "stress-ng".into(), ns: 5_000, ended: false };
        assert_eq!(p, want);
        let (_, p) = parse_entry(&1i32.to_ne_bytes(), &entry(1, 1, 0, b"ended")).unwrap();
        assert!(p.ended);
        // A name of all 16 bytes has no NUL.
        let (_, p) = parse_entry(&1i32.to_ne_bytes(), &entry(1, 1, 0, &[b'x'; 16])).unwrap();
        assert_eq!(p.comm.len(), 16);
        assert_eq!(parse_entry(&[1, 2], &entry(1, 1, 0, b"")), None);
        assert_eq!(parse_entry(&1i32.to_ne_bytes(), &[0; 39]), None);
    }

    fn look(epoch: u64, procs: &[(i32, u64)]) -> Look {
        let procs = procs
            .iter()
            .map(|&(tgid, ns)| {
                (tgid, ProcTime { tgid, ptgid: 1, comm: "p".into(), ns, ended: false })
            })
            .collect();
        Look { at: 0, epoch, procs }
    }

    #[test]
    fn taken_counts_from_the_first_look_and_new_processes_whole() {
        let t = taken(&look(2, &[(10, 100), (11, 50)]), &look(2, &[(10, 400), (11, 50), (12, 70)]));
        let got: Vec<(i32, u64)> = t.iter().map(|p| (p.tgid, p.ns)).collect();
        assert_eq!(got, vec![(10, 300), (12, 70)]);
        // Another epoch's counts say nothing about this one's.
        assert!(taken(&look(1, &[(10, 1)]), &look(2, &[(10, 9)])).is_empty());
    }

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused_without_a_panic(
            k in proptest::collection::vec(any::<u8>(), 0..8),
            v in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let _ = parse_entry(&k, &v);
            let _ = parse_run(&v);
        }

        #[test]
        fn what_is_taken_sums_to_what_grew(
            before in proptest::collection::vec((1i32..50, 0u64..1_000_000), 0..20),
            grow in proptest::collection::vec((1i32..60, 0u64..1_000_000), 0..20),
        ) {
            let b = look(1, &before);
            let mut a = b.clone();
            for (tgid, ns) in grow {
                a.procs.entry(tgid)
                    .or_insert(ProcTime { tgid, ptgid: 1, comm: "p".into(), ns: 0, ended: false })
                    .ns += ns;
            }
            let sum_a: u64 = a.procs.values().map(|p| p.ns).sum();
            let sum_b: u64 = b.procs.values().map(|p| p.ns).sum();
            let t = taken(&b, &a);
            prop_assert_eq!(t.iter().map(|p| p.ns).sum::<u64>(), sum_a - sum_b);
            prop_assert!(t.windows(2).all(|w| w[0].ns >= w[1].ns));
        }
    }
}
