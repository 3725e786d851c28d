//! What one reading of the TLB shootdowns costs: the `TLB` row of `/proc/interrupts` (what the
//! recorder read at a stall's first and last look until 2026-12-02) against the BPF counters
//! that stand in for it, with `/proc/vmstat` (read at the same looks) as a second reference, in
//! the same run. Rounds alternate the three; printed: µs per read, median and spread over rounds.
//!
//!   cargo run --release -p offcpu --example tlb_reads [ROUNDS] [READS]   (as root)

use offcpu::Counters;
use std::time::Instant;

fn per_read_us(reads: u32, mut f: impl FnMut() -> bool) -> f64 {
    let t = Instant::now();
    for _ in 0..reads {
        assert!(f(), "a reading failed");
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(reads)
}

fn median_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u32>());
    let rounds = args.next().and_then(Result::ok).unwrap_or(7).max(1);
    let reads = args.next().and_then(Result::ok).unwrap_or(2000).max(1);
    let c = match Counters::load(procwatch::system::read_tlb_shootdowns) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tlb_reads: the BPF counters did not load ({e}); run as root");
            std::process::exit(1);
        }
    };
    let (mut file, mut bpf, mut vmstat) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        file.push(per_read_us(reads, || procwatch::system::read_tlb_shootdowns().is_some()));
        bpf.push(per_read_us(reads, || c.tlb_shootdowns().is_some()));
        vmstat.push(per_read_us(reads, || procwatch::system::read_vmstat().is_some()));
    }
    let (f, fmin, fmax) = median_spread(file);
    let (b, bmin, bmax) = median_spread(bpf);
    let (v, vmin, vmax) = median_spread(vmstat);
    println!(
        "  one reading of the TLB shootdowns, µs (median, min-max over {rounds} rounds of {reads}):"
    );
    println!("    /proc/interrupts' TLB row  {f:8.2}  ({fmin:.2}-{fmax:.2})   the reference");
    println!(
        "    the BPF counters            {b:8.2}  ({bmin:.2}-{bmax:.2})   {:.3}x the file",
        b / f
    );
    println!(
        "    /proc/vmstat (also read)    {v:8.2}  ({vmin:.2}-{vmax:.2})   {:.3}x the file",
        v / f
    );
}
