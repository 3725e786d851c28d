//! Every wait of threads that share the recorder's entries, with its waker: a test of its own
//! (root and BPF needed: it fails without them, never skips), so that no other test of the suite
//! runs beside it. Beside `tests/offcpu.rs`'s other tests (their JVMs, shells, busy loops and
//! their own programs), the program now and then misses every wake-up on one CPU for about a
//! millisecond: 2 runs in 594 here had 2 or 3 naps, woken by timers that expired in the same
//! interrupt, recorded without their waker (each with its stack, taken as it came back on a
//! CPU). Alone, 0 in 836 runs; beside a process that only loads and unloads the same programs
//! once a second, 0 in 513. `bpf_printk` traces of the failing runs show neither the
//! wake-ups nor the first switch onto the CPU after them; why is not known (2026-12-02).

use offcpu::{OffCpu, Options, Unarmed};
use std::process::{Command, Stdio};

/// A thread's wait is kept at the low bits of its tid in an array; a thread whose index another
/// holds is kept in a hash, and a thread that exits gives its index back. With an array of one
/// entry, every thread of a process but one at a time is in the hash: two batches of four
/// threads, each sleeping 50 ms over and over, are all recorded, each wait with its own thread.
#[test]
fn threads_that_share_an_index_are_each_recorded() {
    // The threads start once the recorder is armed (a line on its standard input): loading the
    // programs can take longer than the first batch's naps on a busy machine.
    let script = "import sys, threading, time\n\
        def nap():\n    for _ in range(6): time.sleep(0.05)\n\
        sys.stdin.readline()\n\
        for batch in range(2):\n\
        \x20   ts = [threading.Thread(target=nap) for _ in range(4)]\n\
        \x20   [t.start() for t in ts]; [t.join() for t in ts]\n";
    let mut py = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("python3 runs here");
    let pid = py.id() as i32;
    let mut go = py.stdin.take().expect("its standard input");
    let opts =
        Options { entry_slots: 1, record_unarmed: Unarmed::Everything, ..Default::default() };
    let oc = OffCpu::start(&[pid], opts).unwrap_or_else(|e| panic!("the recorder loads: {e}"));
    oc.arm(pid, true);
    // A round trip through the reader: the arm is in before the window opens.
    let _ = oc.reader().held(pid);
    let from = offcpu::now_ns();
    std::io::Write::write_all(&mut go, b"go\n").expect("python3 reads its start");
    drop(go);
    let _ = py.wait();
    let waits = oc.waits(&[pid], from, offcpu::now_ns());
    // The naps: long sleeps (a thread preempted for 40 ms on a busy machine is not one).
    let naps: Vec<_> = waits
        .iter()
        .filter(|w| w.tid != pid && w.state == 'S')
        .filter(|w| w.end.is_some_and(|e| e - w.start >= 40_000_000))
        .collect();
    let mut tids: Vec<i32> = naps.iter().map(|w| w.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    assert!(tids.len() == 8, "eight threads' naps: {naps:#?}");
    // A nap whose wake-up the program missed still has its stack (taken as the thread comes
    // back) but no waker. Beside the other tests' binary: 2 runs of 594 had 2 or 3 such naps,
    // on one CPU within a millisecond (timers that expired in one interrupt); alone, none in 836
    // runs (2026-12-02; the cause is not found, see this file's header).
    let unwoken = naps.iter().filter(|w| w.woken.is_none()).count();
    assert!(unwoken <= 1, "{unwoken} naps without their waker: {naps:#?}");
    for t in &tids {
        let mine: Vec<_> = naps.iter().filter(|w| w.tid == *t).collect();
        assert!(mine.len() >= 4, "thread {t}: {mine:#?}");
        assert!(mine.iter().all(|w| w.comm.starts_with("python")), "{mine:#?}");
        assert!(mine.iter().all(|w| !w.stack.is_empty()), "armed, with stacks: {mine:#?}");
        // Its waits one after the other: none overlaps the next (no entry written by two).
        for pair in mine.windows(2) {
            assert!(pair[0].end.unwrap() <= pair[1].start, "{pair:#?}");
        }
    }
}
