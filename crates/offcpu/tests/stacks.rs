//! The off-CPU recorder's `stacks` map on this machine's kernel (root needed: run by `make test`
//! as root; without root or BPF this fails, never skips). A test binary of its own: it holds
//! CPU 0 with a real-time spinner for a moment, which no other test should have beside it.

mod common;

use offcpu::{OffCpu, Options};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn start(tgids: &[i32]) -> OffCpu {
    OffCpu::start(tgids, Options::default()).unwrap_or_else(|e| {
        panic!("the BPF off-CPU recorder must load here (root, BPF, tracefs): {e}")
    })
}

/// A shell spinning on CPU 0 at `SCHED_FIFO` 1 for at most 3 s, whatever becomes of the test: its
/// `timeout` runs at the usual policy on any CPU (at `SCHED_FIFO` on CPU 0 it would never run
/// behind the spinner), and the kernel ends the spinner after 2 s of real-time CPU without a
/// blocking call (`RLIMIT_RTTIME`: `SIGXCPU`, then `SIGKILL` at 3 s). Meanwhile the kernel's
/// real-time throttling leaves CPU 0's other tasks 5%, and the other CPU is untouched. Killed with
/// its process group when dropped.
struct Hog(std::process::Child);

impl Hog {
    fn on_cpu0() -> Hog {
        use std::os::unix::process::CommandExt;
        let child = Command::new("timeout")
            .args(["-s", "KILL", "3", "prlimit", "--rttime=2000000:3000000"])
            .args(["chrt", "-f", "1", "taskset", "-c", "0", "sh", "-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        Hog(child)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// How many times thread `tid` has been put on a CPU (`schedstat`'s third field).
fn runs(tid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).unwrap_or_default();
    s.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The ids of the BPF maps named `name` that this process holds (from its descriptors' fdinfo).
fn held_maps(name: &str) -> Vec<u32> {
    let mut ids = common::bpf_ids(std::process::id(), "map");
    ids.sort_unstable();
    ids.dedup();
    ids.retain(|id| {
        let show = Command::new("bpftool")
            .args(["map", "show", "id", &id.to_string()])
            .output()
            .expect("bpftool (Debian's bpftool; scripts/setup.sh installs it)");
        String::from_utf8_lossy(&show.stdout).contains(&format!(" name {name} "))
    });
    ids
}

/// Whether any of the maps `ids` has an entry for the u32 `key`.
fn maps_have(ids: &[u32], key: u32) -> bool {
    let bytes: Vec<String> = key.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
    ids.iter().any(|id| {
        Command::new("bpftool")
            .args(["map", "lookup", "id", &id.to_string(), "key", "hex"])
            .args(&bytes)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Thread `tid`'s state letter (`stat`'s third field).
fn state_of(tid: i32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{tid}/stat")).unwrap_or_default();
    s.rsplit_once(") ").and_then(|(_, r)| r.chars().next()).unwrap_or('?')
}

/// A wait's kernel stacks are taken as it is woken while its process is armed, and held in the
/// LRU `stacks` map until the thread is back on a CPU. Disarmed in between (a stall over before
/// its woken threads got a CPU, common beside CPU hogs), the wait is not kept, and its stacks
/// must be let go all the same: the hour's soak ended with 54 such entries, each held until its
/// thread exited. So too when its process is taken out of the targets in between (`watch`
/// ending a JVM's guarding): the program sees its thread no more. Here the woken thread, on CPU
/// 0, waits behind a real-time spinner there (the fair server defers it for most of a second)
/// while the test disarms or removes its process. Tried and refused: a throttled cgroup (since
/// Linux 6.18 a throttled task runs until it returns to user space, so it came back at once),
/// and `SCHED_IDLE` behind a spinner at nice 0 (on a CPU in 1-8 ms).
#[test]
fn a_wait_woken_armed_but_not_kept_leaves_no_stacks_behind() {
    let mut reader = Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while read x; do :; done"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = reader.id() as i32;
    let mut pipe = reader.stdin.take().unwrap();
    let oc = start(&[pid]);
    let line = |pipe: &mut std::process::ChildStdin| {
        use std::io::Write;
        pipe.write_all(b"x\n").unwrap();
        pipe.flush().unwrap();
    };
    let ran_since = |before: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while runs(pid) == before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        runs(pid) != before
    };
    let asleep = || {
        let deadline = Instant::now() + Duration::from_secs(5);
        while state_of(pid) != 'S' && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // A read under the program: from its next wait on, it has an entry.
    let read_once = |pipe: &mut std::process::ChildStdin| {
        let r = runs(pid);
        line(pipe);
        assert!(ran_since(r), "the reader ran");
        asleep();
    };
    read_once(&mut pipe);
    // The recorder's `stacks` map.
    let stacks = held_maps("stacks");
    assert!(!stacks.is_empty(), "the recorder's `stacks` map");
    for removed in [false, true] {
        let mut held = 0;
        for _ in 0..5 {
            oc.arm(pid, true);
            let _ = oc.reader().held(pid);
            asleep();
            let hog = Hog::on_cpu0();
            // Asleep long enough for its stacks to be taken as it is woken, the spinner on CPU 0.
            std::thread::sleep(Duration::from_millis(50));
            let before = runs(pid);
            line(&mut pipe);
            let taken = maps_have(&stacks, pid as u32);
            if removed {
                oc.reader().remove(pid);
            } else {
                oc.arm(pid, false);
            }
            // A round trip through the reader: disarmed or removed from here.
            let _ = oc.reader().held(pid);
            let off_cpu_throughout = runs(pid) == before;
            drop(hog);
            assert!(ran_since(before), "the reader ran once the spinner was gone");
            asleep();
            let left = maps_have(&stacks, pid as u32);
            if removed {
                // A target again, with a wait under the program for the next round.
                oc.reader().add(pid);
                let _ = oc.reader().held(pid);
                read_once(&mut pipe);
            }
            if !(taken && off_cpu_throughout) {
                // It got CPU 0 before the test looked: try again.
                continue;
            }
            held += 1;
            let how = if removed { "removed" } else { "disarmed" };
            assert!(!left, "the stacks of a wait woken, then {how}, are let go");
        }
        println!("removed {removed}: the reader waited behind the spinner {held} times in 5");
        assert!(held > 0, "the woken reader waited behind the spinner at least once in 5");
    }
    drop(pipe);
    let _ = reader.kill();
    let _ = reader.wait();
}
