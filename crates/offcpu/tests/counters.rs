//! The machine's counters counted by BPF, against the files they stand in for, on this kernel
//! (root and BPF: it fails without them).

use offcpu::Counters;
use procwatch::system::read_tlb_shootdowns;

/// The per-CPU counts `bpf` lie between the file's `before` and `after`, CPU for CPU.
fn between(before: &[u64], bpf: &[u64], after: &[u64]) -> bool {
    before.len() == bpf.len()
        && bpf.len() == after.len()
        && (0..bpf.len()).all(|c| before[c] <= bpf[c] && bpf[c] <= after[c])
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and sched_setaffinity get valid
    // pointers to it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set), 0, "pinned");
    }
}

#[test]
fn the_tlb_shootdowns_counted_in_place_are_the_files() {
    let c = Counters::load(read_tlb_shootdowns)
        .unwrap_or_else(|e| panic!("the BPF counters load (root, BPF): {e}"));
    let before = read_tlb_shootdowns().expect("this machine has the TLB row");
    let bpf = c.tlb_shootdowns().expect("the counters read");
    let after = read_tlb_shootdowns().unwrap();
    assert!(between(&before, &bpf, &after), "{before:?} ≤ {bpf:?} ≤ {after:?}");
    assert!(before.len() >= 2, "this test needs two CPUs: {before:?}");

    // Shootdowns on CPU 1: a thread of this process spins there while CPU 0 unmaps pages the
    // process touched, so each unmap asks CPU 1 to flush its TLB.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let spinner = std::thread::spawn(move || {
        pin(1);
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    pin(0);
    std::thread::sleep(std::time::Duration::from_millis(50));
    for _ in 0..2000 {
        // SAFETY: an anonymous private mapping of one page, written once and unmapped.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            *(p as *mut u8) = 1;
            libc::munmap(p, 4096);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner.join().unwrap();

    let before2 = read_tlb_shootdowns().unwrap();
    let bpf2 = c.tlb_shootdowns().unwrap();
    let after2 = read_tlb_shootdowns().unwrap();
    assert!(between(&before2, &bpf2, &after2), "{before2:?} ≤ {bpf2:?} ≤ {after2:?}");
    let moved = bpf2[1] - bpf[1];
    assert!(moved >= 100, "CPU 1 received {moved} shootdowns: {bpf:?} → {bpf2:?}");
}
