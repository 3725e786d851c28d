//! The BPF off-CPU recorder on this machine's kernel (root needed: run by `make test` as root;
//! without root or BPF these fail, never skip).

mod common;

use offcpu::{OffCpu, Options, Unarmed};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn start(tgids: &[i32]) -> OffCpu {
    start_recording(tgids, Options::default().record_unarmed)
}

/// The recorder, recording `unarmed` of a process not armed.
fn start_recording(tgids: &[i32], unarmed: Unarmed) -> OffCpu {
    let opts = Options { record_unarmed: unarmed, ..Default::default() };
    OffCpu::start(tgids, opts).unwrap_or_else(|e| {
        panic!("the BPF off-CPU recorder must load here (root, BPF, tracefs): {e}")
    })
}

/// A shell that waits for a 50 ms `sleep` child over and over.
fn sleeping_shell() -> std::process::Child {
    Command::new("sh")
        .args(["-c", "while :; do sleep 0.05; done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_shell_waiting_for_its_children_is_seen_with_its_stack_and_the_child_that_woke_it() {
    shell_waits_seen(Options::default());
}

/// The same through the classic sched_switch tracepoint (what a kernel before 5.18 loads), which
/// has no watchdog.
#[test]
fn through_the_classic_tracepoint_the_same_waits_are_seen_without_a_watchdog() {
    let opts = Options { classic_switch: true, watchdog: true, ..Default::default() };
    let oc = OffCpu::start(&[1], opts).unwrap_or_else(|e| panic!("the classic program loads: {e}"));
    let err = oc.reader().alarm().expect_err("no watchdog in the classic program");
    assert!(err.contains("no BPF watchdog"), "{err}");
    drop(oc);
    shell_waits_seen(opts);
}

fn shell_waits_seen(opts: Options) {
    let mut sh = sleeping_shell();
    let pid = sh.id() as i32;
    let oc = OffCpu::start(&[pid], opts)
        .unwrap_or_else(|e| panic!("the BPF off-CPU recorder must load here: {e}"));
    // As while a stall of it is under way: its waits' stacks are taken.
    oc.arm(pid, true);
    // A round trip through the reader: the arm is in before the window opens.
    let _ = oc.reader().held(pid);
    let from = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(600));
    let to = offcpu::now_ns();
    let waits = oc.waits(&[pid], from, to);
    let _ = sh.kill();
    let _ = sh.wait();
    // Only the shell's own thread: the children are other processes.
    assert!(waits.iter().all(|w| w.tgid == pid), "{waits:#?}");
    // Each loop also waits (in D, a millisecond or so) for its vfork child to exec.
    let done: Vec<_> = waits
        .iter()
        .filter(|w| w.end.is_some() && w.stack.iter().any(|f| f == "do_wait"))
        .collect();
    assert!(done.len() >= 5, "about ten 50 ms waits for a child in 600 ms: {waits:#?}");
    for w in &done {
        let end = w.end.unwrap();
        assert!(end > w.start && end - w.start >= 1_000_000, "{w:?}");
        assert_eq!(w.state, 'S', "{w:?}");
        let waker = w.waker.as_ref().expect("a child's exit woke it");
        assert_eq!(waker.comm, "sleep", "{w:?}");
        assert_ne!(waker.tgid, pid);
        assert!(
            waker.stack.iter().any(|f| f.contains("exit")),
            "woken from the child's exit: {:?}",
            waker.stack
        );
        assert!(w.woken.unwrap() >= w.start && w.woken.unwrap() <= end);
    }
    // Nothing was lost at this rate.
    assert_eq!(oc.lost(), 0);
}

#[test]
fn a_thread_off_a_cpu_now_is_returned_as_going_on() {
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id() as i32;
    // Let it start and fall asleep before the program is there.
    std::thread::sleep(Duration::from_millis(100));
    let oc = start(&[pid]);
    // It is seen only once it has been switched out under the program: a sleeping thread is
    // not. So wake it: SIGSTOP, then SIGCONT, and it sleeps on.
    unsafe {
        libc::kill(pid, libc::SIGSTOP);
        libc::kill(pid, libc::SIGCONT);
    }
    std::thread::sleep(Duration::from_millis(200));
    let waits = oc.waits(&[pid], 0, u64::MAX);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        waits.iter().any(|w| w.end.is_none() && w.tid == pid && w.state == 'S'),
        "the sleep going on: {waits:#?}"
    );
}

/// The time the hypervisor took from every CPU of the machine so far (`/proc/stat`, in ticks).
fn machine_steal_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu = stat.lines().next().unwrap();
    let steal: u64 = cpu.split_whitespace().nth(8).unwrap().parse().unwrap();
    steal * tick_ns()
}

/// One clock tick (`/proc/stat`'s unit).
fn tick_ns() -> u64 {
    // SAFETY: sysconf reads a constant.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64
}

/// A shell that counts to `n` (its own loop, no children) and ends; reaped with its CPU time.
fn spin_and_reap(n: u32) -> (i32, u64) {
    let mut child = Command::new("sh")
        .args(["-c", &format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done")])
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "reaped");
    // Reaped above (with its rusage): std's handle finds it gone.
    assert!(child.wait().is_err());
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (pid, ns(ru.ru_utime) + ns(ru.ru_stime))
}

#[test]
fn while_counting_every_process_s_cpu_time_is_tallied_as_the_kernel_accounts_it() {
    let oc = start(&[]);
    let tally = oc.reader().cpu_tally().expect("this kernel's BTF sched_switch counts CPU time");
    let counting = tally.count().unwrap();
    let before = counting.look();
    let steal_before = machine_steal_ns();
    let (pid, cpu_ns) = spin_and_reap(200_000);
    let steal = machine_steal_ns() - steal_before;
    let after = counting.look();
    let taken = offcpu::tally_taken(&before, &after);
    let p = taken.iter().find(|p| p.tgid == pid).unwrap_or_else(|| panic!("{pid}: {taken:#?}"));
    // The kernel's own account of it (rusage: utime + stime sum to the time it ran, to the µs)
    // against the switches': the same time, but for what each rounds, and for the time the
    // hypervisor took from its CPU while it ran. The switches count that (they time the CPU's
    // holder by the clock); the kernel's account leaves it out (PARAVIRT_TIME_ACCOUNTING, on
    // here). Measured in a fresh-clone rehearsal: tallied 340.9 ms, rusage 320.2 ms. The
    // machine's steal over the run bounds it, in ticks (one more for the two reads' rounding).
    let slack = 1_000_000 + cpu_ns / 50;
    println!("tallied {} ns, rusage {cpu_ns} ns, the machine's steal {steal} ns", p.ns);
    assert!(
        p.ns + slack >= cpu_ns && p.ns <= cpu_ns + slack + steal + tick_ns(),
        "tallied {} ns, rusage {cpu_ns} ns, the machine's steal meanwhile {steal} ns",
        p.ns
    );
    assert_eq!(p.ptgid, std::process::id() as i32, "{p:?}");
    assert!(p.ended, "it exited while counted: {p:?}");
    assert!(!taken.iter().any(|q| q.tgid == std::process::id() as i32 && q.ended), "we did not");
    assert!(cpu_ns > 20_000_000, "it ran: {cpu_ns} ns");
    // Counting off, the next one is not tallied: counting again is a new epoch, without it.
    drop(counting);
    // Off, the map keeps no entry: a day's stalls do not fill it with every process that ran.
    assert_eq!(tally.held(), 0, "entries kept once counting is off");
    let (off_pid, _) = spin_and_reap(50_000);
    let counting = tally.count().unwrap();
    let look = counting.look();
    assert!(!look.procs.contains_key(&off_pid), "ran while off: {:?}", look.procs.get(&off_pid));
    assert!(look.epoch > before.epoch);
    assert!(offcpu::tally_taken(&before, &look).is_empty(), "another epoch's looks");
}

/// Not a test by itself: the child the SIGKILL test starts (it holds the program, then waits).
#[test]
fn holder() {
    if std::env::var_os("OFFCPU_HOLDER").is_none() {
        return;
    }
    // With the watchdog, its timer armed on a thread that then stops sleeping: a pending BPF
    // timer must not keep anything alive either.
    let oc = OffCpu::start(
        &[1, std::process::id() as i32],
        Options { watchdog: true, ..Default::default() },
    )
    .unwrap();
    let ticking = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let tick = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (tid, _end) = meter(ticking.clone(), tick.clone(), Held::Blocks);
    oc.reader().watch_meter(tid, 60_000_000_000, tick.as_ptr() as u64);
    std::thread::sleep(Duration::from_millis(50));
    ticking.store(false, std::sync::atomic::Ordering::Relaxed);
    println!("ready {}", std::process::id());
    std::thread::sleep(Duration::from_secs(20));
}

/// The ids of the BPF programs `pid` holds open (from its descriptors' fdinfo).
fn programs_of(pid: u32) -> Vec<u32> {
    common::bpf_ids(pid, "prog")
}

/// Whether the kernel still has program `id` (loaded by anyone).
fn program_exists(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bpftool (Debian's bpftool; scripts/setup.sh installs it)")
        .success()
}

#[test]
fn a_recorder_killed_outright_leaves_no_program_behind() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "holder", "--nocapture", "--test-threads", "1"])
        .env("OFFCPU_HOLDER", "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    while !line.contains("ready") {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("the holder ended before loading the program");
        }
    }
    let pid = child.id();
    let held = programs_of(pid);
    if held.len() != offcpu::PROGRAM_NAMES.len() || !held.iter().all(|&id| program_exists(id)) {
        let _ = child.kill();
        panic!("its {} programs are loaded and held by it: {held:?}", offcpu::PROGRAM_NAMES.len());
    }
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let _ = child.wait();
    // The kernel frees a program once its last reference goes (RCU: soon, not at once).
    let t0 = Instant::now();
    while held.iter().any(|&id| program_exists(id)) && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<_> = held.iter().filter(|&&id| program_exists(id)).collect();
    assert!(left.is_empty(), "programs left behind by a killed recorder: {left:?}");
}

#[test]
fn unarmed_the_waits_are_recorded_without_stacks() {
    let mut sh = sleeping_shell();
    let pid = sh.id() as i32;
    let oc = start_recording(&[pid], Unarmed::Everything);
    let from = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(400));
    let waits = oc.waits(&[pid], from, offcpu::now_ns());
    let _ = sh.kill();
    let _ = sh.wait();
    assert!(waits.iter().all(|w| w.stack.is_empty()), "no stack walked between stalls: {waits:#?}");
    // Every recorded wait names its waker; the 50 ms ones (not the vfork's millisecond) are the
    // shell's waits for its child, woken by the child's exit.
    let done: Vec<_> = waits.iter().filter(|w| w.end.is_some() && w.waker.is_some()).collect();
    assert!(done.iter().all(|w| !w.waker.as_ref().unwrap().comm.is_empty()), "{done:#?}");
    let child: Vec<_> = done.iter().filter(|w| w.end.unwrap() - w.start >= 20_000_000).collect();
    assert!(child.len() >= 3, "{waits:#?}");
    assert!(child.iter().all(|w| w.waker.as_ref().unwrap().comm == "sleep"), "{child:#?}");
}

/// A target is found in the program's array by the low 16 bits of its tgid; targets that share
/// them spill into a hash. A shell added after two others on its index (numbers no process may
/// have here: above the kernel's pid_max of 4,194,304 at most) is found there, armed or not,
/// and again once it holds the index itself; removed, it is recorded no more.
#[test]
fn a_target_sharing_its_index_with_others_is_recorded_all_the_same() {
    let mut sh = sleeping_shell();
    let pid = sh.id() as i32;
    let (a, b) = (pid + (5 << 22), pid + (6 << 22));
    assert_eq!(a & 0xffff, pid & 0xffff);
    let oc = start_recording(&[a, b, pid], Unarmed::Everything);
    let shell_waits = |ms| {
        let from = offcpu::now_ns();
        std::thread::sleep(Duration::from_millis(ms));
        oc.waits(&[pid], from, offcpu::now_ns())
    };
    let spilled = shell_waits(300);
    oc.arm(pid, true);
    // A round trip through the reader: the arm is in before the window opens.
    let _ = oc.reader().held(pid);
    let armed = shell_waits(300);
    let reader = oc.reader();
    reader.remove(a);
    reader.remove(b);
    let holding = shell_waits(300);
    reader.remove(pid);
    std::thread::sleep(Duration::from_millis(100));
    let gone = shell_waits(300);
    let _ = sh.kill();
    let _ = sh.wait();
    let ended = |w: &[offcpu::Wait]| w.iter().filter(|w| w.end.is_some()).count();
    assert!(ended(&spilled) >= 3, "in the hash, unarmed: {spilled:#?}");
    assert!(spilled.iter().all(|w| w.stack.is_empty()), "{spilled:#?}");
    let long = armed.iter().filter(|w| w.end.is_some_and(|e| e - w.start >= 20_000_000));
    assert!(long.clone().count() >= 3, "in the hash, armed: {armed:#?}");
    assert!(long.clone().all(|w| !w.stack.is_empty()), "armed, with stacks: {armed:#?}");
    assert!(ended(&holding) >= 3, "holding its index: {holding:#?}");
    assert!(ended(&gone) == 0, "removed: {gone:#?}");
}

/// A process removed from the targets and added again (`watch` ends a JVM's guarding while it
/// lives, then guards it again): none of its waits spans the time it was not recorded. The
/// program saw none of its switches then, so a wait noted before the removal would end after
/// the return as one long wait over the whole gap.
#[test]
fn a_process_removed_and_added_again_has_no_wait_across_the_gap() {
    let mut sh = sleeping_shell();
    let pid = sh.id() as i32;
    let oc = start_recording(&[pid], Unarmed::Everything);
    let r = oc.reader();
    std::thread::sleep(Duration::from_millis(200));
    r.remove(pid);
    // Round trips through the reader: each command is in before the clock is read.
    let _ = r.held(pid);
    let removed = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(300));
    r.add(pid);
    let _ = r.held(pid);
    let added = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(300));
    let waits = oc.waits(&[pid], added, offcpu::now_ns());
    let _ = sh.kill();
    let _ = sh.wait();
    let ended: Vec<_> = waits.iter().filter(|w| w.end.is_some()).collect();
    assert!(ended.len() >= 3, "recorded again once added: {waits:#?}");
    assert!(waits.iter().all(|w| w.start >= removed), "a wait across the gap: {waits:#?}");
}

/// `watch`'s setting: an unarmed process's waits are not recorded at all (between stalls the
/// ring buffer carries nothing), an armed one's are, and a wait going on is seen either way.
#[test]
fn recording_only_the_armed_leaves_an_unarmed_process_s_waits_out() {
    let mut sh = sleeping_shell();
    let pid = sh.id() as i32;
    let oc = start_recording(&[pid], Unarmed::Nothing);
    let from = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(300));
    let unarmed = oc.waits(&[pid], from, offcpu::now_ns());
    oc.arm(pid, true);
    let armed_at = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(300));
    let all = oc.waits(&[pid], from, offcpu::now_ns());
    let _ = sh.kill();
    let _ = sh.wait();
    assert!(unarmed.iter().all(|w| w.end.is_none()), "only waits going on: {unarmed:#?}");
    let ended: Vec<_> = all.iter().filter(|w| w.end.is_some()).collect();
    assert!(ended.len() >= 3, "armed, the waits are recorded: {all:#?}");
    assert!(ended.iter().all(|w| w.end.unwrap() >= armed_at), "none from before: {ended:#?}");
}

/// `run`'s setting (the default): unarmed, a sleep the process chose (the shell's wait for its
/// child) is not recorded, a wait it did not choose (a busy loop preempted by another on its
/// CPU) is.
#[test]
fn unarmed_only_the_waits_a_thread_did_not_choose_are_recorded() {
    let busy = |n: &str| {
        Command::new("taskset")
            .args(["-c", "0", "bash", "-c", &format!("exec -a {n} bash -c 'while :; do :; done'")])
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (busy("loop-a"), busy("loop-b"));
    let mut sh = sleeping_shell();
    let (pa, ps) = (a.id() as i32, sh.id() as i32);
    let oc = start(&[pa, ps]);
    let from = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(500));
    let waits = oc.waits(&[pa, ps], from, offcpu::now_ns());
    for c in [&mut a, &mut b, &mut sh] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let ended: Vec<_> = waits.iter().filter(|w| w.end.is_some()).collect();
    assert!(ended.iter().all(|w| w.state != 'S'), "no chosen sleep: {ended:#?}");
    let preempted: Vec<_> = ended.iter().filter(|w| w.tgid == pa && w.state == 'R').collect();
    assert!(preempted.len() >= 5, "the preempted loop's waits are kept: {waits:#?}");
}

/// A thread preempted by a timer's wake-up waits while another task holds its CPU: that task is
/// who ran instead, for most of the wait, not the timer thread that held the CPU for µs. Two busy
/// loops and a thread of this test that wakes every millisecond for 20 µs at nice -15 share CPU 0.
#[test]
fn a_preempted_thread_s_cpu_went_to_who_held_it_longest_not_to_a_timer_s_wakeup() {
    let busy = || {
        Command::new("taskset")
            .args(["-c", "0", "bash", "-c", "while :; do :; done"])
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (busy(), busy());
    let (pa, pb) = (a.id() as i32, b.id() as i32);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticking = stop.clone();
    let ticker = std::thread::spawn(move || {
        // SAFETY: plain syscalls on this thread alone (affinity, niceness, its id).
        let tid = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            let tid = libc::gettid();
            libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -15);
            tid
        };
        while !ticking.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(20) {}
        }
        tid
    });
    let oc = start(&[pa]);
    let from = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(800));
    let waits = oc.waits(&[pa], from, offcpu::now_ns());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ticker = ticker.join().unwrap();
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let preempted: Vec<_> =
        waits.iter().filter(|w| w.end.is_some() && w.tid == pa && w.state == 'R').collect();
    assert!(preempted.len() >= 20, "the loop waits for its CPU again and again: {waits:#?}");
    let by =
        |tid: i32| preempted.iter().filter(move |w| w.instead.as_ref().map(|i| i.0) == Some(tid));
    eprintln!(
        "preempted waits {}: the other loop named {}, the ticker {}",
        preempted.len(),
        by(pb).count(),
        by(ticker).count()
    );
    // Each of its waits of a millisecond or more: the other loop held the CPU for most of it.
    assert!(
        by(pb).count() * 10 >= preempted.len() * 9 && by(ticker).count() * 10 <= preempted.len(),
        "named the other loop ({pb}) {} times, the ticker ({ticker}) {}, of {}: {preempted:#?}",
        by(pb).count(),
        by(ticker).count(),
        preempted.len()
    );
    for w in by(pb) {
        let (held, wait) = (w.instead_ns.unwrap_or(0), w.end.unwrap() - w.start);
        assert!(held > 0 && held <= wait + 1_000, "held {held} ns of a {wait} ns wait: {w:#?}");
    }
}

/// What a stand-in meter does once it stops ticking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// Blocks in an interruptible wait that does not end (a safepoint's barrier).
    Blocks,
    /// Never sleeps again (kept off its sleep).
    Spins,
    /// Still sleeps every 2 ms, but no longer stamps its tick (woken and blocked, again and
    /// again, without reaching the code that ticks).
    SleepsWithoutTicking,
}

/// A stand-in meter: a thread of this test that sleeps 2 ms at a time and stamps `tick` with
/// CLOCK_MONOTONIC after each sleep while `ticking` holds, then is held as `held` says.
fn meter(
    ticking: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tick: std::sync::Arc<std::sync::atomic::AtomicU64>,
    held: Held,
) -> (u32, std::sync::mpsc::Sender<()>) {
    use std::sync::atomic::Ordering;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        while ticking.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(2));
            tick.store(offcpu::now_ns(), Ordering::Release);
        }
        match held {
            Held::Spins => {
                while end_rx.try_recv().is_err() {
                    std::hint::spin_loop();
                }
            }
            Held::Blocks => {
                let _ = end_rx.recv();
            }
            Held::SleepsWithoutTicking => {
                while end_rx.recv_timeout(Duration::from_millis(2)).is_err() {}
            }
        }
    });
    (tid_rx.recv().unwrap(), end_tx)
}

/// Waits on `alarm` until `secs` from now, through early wake-ups.
fn woke_within(alarm: &offcpu::Alarm, secs: u64) -> offcpu::Woke {
    let until = offcpu::now_ns() + secs * 1_000_000_000;
    loop {
        match alarm.wait_until(until) {
            offcpu::Woke::Early => continue,
            w => return w,
        }
    }
}

#[test]
fn the_watchdog_fires_once_the_meter_stops_ticking_and_not_while_it_ticks() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let opts = Options { watchdog: true, ..Default::default() };
    // The meter is a thread of a target (this test's process), as the agent's is of the JVM.
    let me = std::process::id() as i32;
    let oc =
        OffCpu::start(&[me], opts).unwrap_or_else(|e| panic!("the BPF recorder must load: {e}"));
    let alarm =
        oc.reader().alarm().unwrap_or_else(|e| panic!("this kernel runs the watchdog: {e}"));
    // With the tick's address (its last tick read from its memory), and without (from its
    // last sleep): a meter that keeps sleeping without ticking is seen only with it.
    for (held, with_tick) in [
        (Held::Blocks, true),
        (Held::Spins, true),
        (Held::SleepsWithoutTicking, true),
        (Held::Blocks, false),
        (Held::Spins, false),
    ] {
        let ticking = Arc::new(AtomicBool::new(true));
        let tick = Arc::new(AtomicU64::new(0));
        let (tid, end) = meter(ticking.clone(), tick.clone(), held);
        let addr = if with_tick { tick.as_ptr() as u64 } else { 0 };
        // Half a second without a tick: far beyond any delay of a 2 ms sleeper here.
        oc.reader().watch_meter(tid, 500_000_000, addr);
        std::thread::sleep(Duration::from_millis(100));
        let _ = alarm.take();
        let case = format!("{held:?}, tick address known: {with_tick}");
        assert_eq!(
            woke_within(&alarm, 1),
            offcpu::Woke::Deadline,
            "no alarm while it ticks ({case})"
        );
        ticking.store(false, Ordering::Relaxed);
        assert_eq!(woke_within(&alarm, 10), offcpu::Woke::Alarm, "an alarm once it stops ({case})");
        oc.reader().watch_meter(0, 0, 0);
        let _ = end.send(());
    }
    // Without the tick's address a meter that still sleeps restarts the timer each time.
    let ticking = Arc::new(AtomicBool::new(false));
    let (tid, end) = meter(ticking, Arc::new(AtomicU64::new(0)), Held::SleepsWithoutTicking);
    oc.reader().watch_meter(tid, 500_000_000, 0);
    std::thread::sleep(Duration::from_millis(100));
    let _ = alarm.take();
    assert_eq!(woke_within(&alarm, 1), offcpu::Woke::Deadline, "a sleeping thread is not held");
    oc.reader().watch_meter(0, 0, 0);
    let _ = end.send(());
}

/// A JDK 17 JVM (`java` on the PATH) whose main thread asks for a full GC of a heap of two
/// million objects every 200 ms, beside a thread named `sp-ticker` that sleeps 2 ms at a time.
/// Returned once the heap is filled.
/// A JVM that collects its whole heap (tens of ms) every `period_ms` plus the collection.
fn collecting_jvm(dir: &std::path::Path, period_ms: u32) -> std::process::Child {
    let src = dir.join("Collect.java");
    std::fs::write(
        &src,
        r#"public class Collect {
    public static void main(String[] a) throws Exception {
        Thread t = new Thread(() -> {
            while (true) {
                try { Thread.sleep(2); } catch (InterruptedException e) { return; }
            }
        }, "sp-ticker");
        t.setDaemon(true);
        t.start();
        Object[] keep = new Object[2_000_000];
        for (int i = 0; i < keep.length; i++) keep[i] = new int[4];
        System.out.println("ready");
        System.out.flush();
        long period = Long.parseLong(a[0]);
        while (keep.length > 0) { Thread.sleep(period); System.gc(); }
    }
}
"#,
    )
    .unwrap();
    let mut child = Command::new("java")
        .args(["-Xmx512m", "-XX:+UseSerialGC"])
        .arg(&src)
        .arg(period_ms.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("java (JDK 17) must be on the PATH");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the JVM did not start");
    child
}

fn tid_named(pid: u32, name: &str) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten().find_map(|e| {
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        (comm.trim_end() == name).then(|| e.file_name().to_str()?.parse().ok())?
    })
}

#[test]
fn the_jvm_s_own_safepoint_probes_time_each_safepoint_and_alarm_a_long_one() {
    let dir = std::env::temp_dir().join(format!("offcpu-sp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut jvm = collecting_jvm(&dir, 200);
    let pid = jvm.id() as i32;
    let outcome = std::panic::catch_unwind(|| {
        let libjvm = offcpu::libjvm_of(pid).expect("a running JVM maps libjvm.so");
        assert!(offcpu::has_safepoint_probes(&libjvm), "{} has the probes", libjvm.display());
        assert!(!offcpu::has_safepoint_probes(std::path::Path::new("/bin/sh")));
        let opts = Options { watchdog: true, ..Default::default() };
        let oc = OffCpu::start(&[pid], opts).unwrap_or_else(|e| panic!("must load: {e}"));
        let r = oc.reader();
        assert_eq!(r.safepoints(), None, "nothing before the probes are attached");
        let alarm = r.alarm().unwrap_or_else(|e| panic!("this kernel runs the watchdog: {e}"));
        // The ticker as the meter, with an alarm only after 10 s without a sleep; safepoints
        // alarmed after 2 ms.
        let ticker = tid_named(pid as u32, "sp-ticker").expect("the ticker thread");
        r.watch_meter(ticker, 10_000_000_000, 0);
        let t0 = offcpu::now_ns();
        r.watch_safepoints(pid, &libjvm, 2_000_000).unwrap_or_else(|e| panic!("{e}"));
        let _ = alarm.take();
        assert_eq!(woke_within(&alarm, 5), offcpu::Woke::Alarm, "a full GC lasts over 2 ms");
        let woke = offcpu::now_ns();
        // The alarm's safepoint: begun after the probes went in, at least 2 ms before it.
        let s = r.safepoints().expect("the probes are attached");
        let (began, _) = s.last().expect("one begun");
        assert!(s.count >= 1 && began >= t0, "{s:?} since {t0}");
        assert!(woke >= began + 2_000_000, "alarmed {} ns after it began", woke - began);
        // Over a second more, every safepoint ends after it began and the count moves on.
        std::thread::sleep(Duration::from_millis(1000));
        let later = r.safepoints().unwrap();
        assert!(later.count >= s.count + 2, "{later:?} after {s:?}");
        // The recent ones, newest first: each ended after it began, before the next began.
        let n = later.count.min(later.recent.len() as u64) as usize;
        for w in later.recent[..n].windows(2) {
            let ((b1, _), (b0, e0)) = (w[0], w[1]);
            let e0 = e0.expect("an older one ended");
            assert!(b0 < e0 && e0 <= b1, "{later:?}");
            assert_eq!(later.end_of(b0), Some(e0));
        }
        assert_eq!(later.open_since.is_some(), later.recent[0].1.is_none(), "{later:?}");
        r.watch_meter(0, 0, 0);
    });
    let _ = jvm.kill();
    let _ = jvm.wait();
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn each_jvm_watched_beside_others_has_its_own_safepoints_and_its_own_alarm() {
    let dir = std::env::temp_dir().join(format!("offcpu-slots-{}", std::process::id()));
    let (da, db) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    // Two rhythms, so each ring shows whose safepoints it holds.
    let mut jvms = [collecting_jvm(&da, 200), collecting_jvm(&db, 450)];
    let (a, b) = (jvms[0].id() as i32, jvms[1].id() as i32);
    let outcome = std::panic::catch_unwind(|| {
        // As `watch` runs it: no process recorded at first, no unarmed waits, the watchdog on.
        let opts = Options {
            watchdog: true,
            record_unarmed: offcpu::Unarmed::Nothing,
            ..Default::default()
        };
        let oc = OffCpu::start(&[], opts).unwrap_or_else(|e| panic!("must load: {e}"));
        let r = oc.reader();
        let alarm = r.alarm().unwrap_or_else(|e| panic!("this kernel runs the watchdog: {e}"));
        let lib = |p: i32| offcpu::libjvm_of(p).expect("a running JVM maps libjvm.so");
        assert!(r.watch_safepoints_of(a, &lib(a), 2_000_000).is_err(), "not recorded yet");
        r.add(a);
        r.add(b);
        // B first, alarmed only after 10 s: its full GCs (tens of ms) ring no alarm.
        let sb =
            r.watch_safepoints_of(b, &lib(b), 10_000_000_000).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(100));
        let _ = alarm.take();
        assert_eq!(
            woke_within(&alarm, 1),
            offcpu::Woke::Deadline,
            "B's safepoints are short of 10 s"
        );
        let t0 = offcpu::now_ns();
        let sa = r.watch_safepoints_of(a, &lib(a), 2_000_000).unwrap_or_else(|e| panic!("{e}"));
        assert!(sa.since() >= t0);
        // Every alarm is a safepoint of A's that lasted 2 ms (the timer is set for nearly all
        // of them, the short ones too, and must not fire for those that ended first).
        let mut long = 0;
        while long < 3 {
            assert_eq!(woke_within(&alarm, 5), offcpu::Woke::Alarm, "A's full GCs last over 2 ms");
            let woke = offcpu::now_ns();
            let s = sa.read().expect("A's safepoints are watched");
            let (began, end) = s.last().expect("one of A's begun");
            assert!(
                began >= t0 && woke >= began + 2_000_000,
                "{s:?}, since {t0}, alarmed at {woke}"
            );
            assert!(end.is_none_or(|e| e >= began + 2_000_000), "alarmed for a short one: {s:?}");
            long += 1;
        }
        std::thread::sleep(Duration::from_millis(1000));
        let (ra, rb) = (sa.read().unwrap(), sb.read().unwrap());
        assert!(ra.count >= 3 && rb.count >= 3, "A {ra:?}, B {rb:?}");
        // Each JVM's own: each ring keeps its JVM's rhythm, A's collections about every 250 ms,
        // B's about every 500 ms (not a begin apart: two JVMs' timers expire together, so their
        // safepoints may begin in the same µs, once even in the same ns).
        let median_gap = |s: &offcpu::Safepoints| {
            let n = s.count.min(s.recent.len() as u64) as usize;
            let mut gaps: Vec<u64> = s.recent[..n].windows(2).map(|w| w[0].0 - w[1].0).collect();
            gaps.sort_unstable();
            gaps[gaps.len() / 2]
        };
        let (ga, gb) = (median_gap(&ra), median_gap(&rb));
        // About 250 and 500 ms apart; each ring's own, whatever a loaded machine adds to both.
        assert!(ga > 150_000_000 && gb * 10 > ga * 14, "gaps {ga} and {gb}: A {ra:?}, B {rb:?}");
        // `run`'s slot is untouched; a slot let go reads no more.
        assert_eq!(r.safepoints(), None);
        drop(sa);
        let again = r.watch_safepoints_of(a, &lib(a), 3_000_000).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(Duration::from_millis(50));
        let fresh = again.read().expect("watched again");
        assert!(fresh.count < ra.count, "a slot taken again starts afresh: {fresh:?} after {ra:?}");
        // A JVM watched again (a rolled recording): its old handle reads nothing, and dropping
        // it late does not unwatch the new one.
        let sb2 = r.watch_safepoints_of(b, &lib(b), 3_000_000).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sb.read(), None, "the old handle of a JVM watched again");
        drop(sb);
        std::thread::sleep(Duration::from_millis(700));
        let b2 = sb2.read().expect("still watched after the old handle went");
        assert!(b2.count >= 1, "{b2:?}");
    });
    for j in jvms.iter_mut() {
        let _ = j.kill();
        let _ = j.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = outcome {
        std::panic::resume_unwind(e);
    }
}

/// `Entries::still`: a thread off a CPU since before a moment, and not woken since, is still
/// from then on; from an earlier moment, once woken, or once it has run again, it is not; a
/// thread of another process, or a process that is not a target, never is.
#[test]
fn a_thread_off_a_cpu_unwoken_since_a_moment_is_still_and_not_once_it_ran() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(100));
    let oc = start(&[pid]);
    let entries = oc.reader().entries().expect("the kernel maps the entries array");
    // Switched out under the program (a sleeping thread is seen from its next wait): SIGSTOP,
    // which it handles on a CPU before it stops.
    let before = offcpu::now_ns();
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(100));
    let stopped = offcpu::now_ns();
    assert!(entries.still(pid, pid, stopped, true), "stopped since before then, nobody woke it");
    assert!(!entries.still(pid, pid, before, true), "it ran after `before` (to stop)");
    assert!(!entries.still(pid + 1, pid, stopped, true), "another process's thread");
    assert!(!entries.still(1, 1, offcpu::now_ns(), true), "not a target");
    // Continued: woken, it runs, and sleeps on in a new wait.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(Duration::from_millis(100));
    assert!(!entries.still(pid, pid, stopped, true), "it ran since");
    assert!(entries.still(pid, pid, offcpu::now_ns(), true), "asleep again since");
    // A busy thread is not still since any moment it ran after. (At a given instant it may be
    // preempted, waiting for a CPU since a moment before: then it is still from that moment,
    // rightly, its files unchanged since.)
    let mut spin = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
    let spid = spin.id() as i32;
    oc.reader().add(spid);
    // A round trip through the reader: it is a target from here.
    let _ = oc.reader().held(spid);
    let added = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(300));
    let still = entries.still(spid, spid, added, false);
    // Once the recorder is dropped (the program detached), its entries say nothing of now.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(100));
    let stopped_again = entries.still(pid, pid, offcpu::now_ns(), true);
    drop(oc);
    let after_drop = entries.still(pid, pid, offcpu::now_ns(), true);
    for c in [&mut child, &mut spin] {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(!still, "a spinning shell ran in the 300 ms since it was added");
    assert!(stopped_again, "stopped again: still");
    assert!(!after_drop, "the recorder dropped: nothing is still");
}

/// `Entries::still` of a thread asleep since before its process became a target (no entry yet):
/// still from a read after that which found it asleep, until its first event (woken); never from
/// a read that found it running. `Entries::on_cpu_since`: a spinning thread is on a CPU since a
/// moment, a stopped one is not.
#[test]
fn a_thread_asleep_since_before_it_was_a_target_is_still_until_woken_and_a_spinner_is_on_a_cpu() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(100));
    let oc = start(&[pid]);
    let entries = oc.reader().entries().expect("the kernel maps the entries array");
    let read = offcpu::now_ns();
    std::thread::sleep(Duration::from_millis(50));
    let untouched = entries.still(pid, pid, read, true);
    let read_running = entries.still(pid, pid, read, false);
    // Woken (to take the signal): its first event.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(100));
    let after_wake = entries.still(pid, pid, read, true);
    let stopped_on_cpu = entries.on_cpu_since(pid, pid, offcpu::now_ns());
    let mut spin = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
    let spid = spin.id() as i32;
    oc.reader().add(spid);
    let _ = oc.reader().held(spid);
    std::thread::sleep(Duration::from_millis(100));
    // On a 2-CPU machine it may be preempted at a given instant: asked until it is seen on one.
    let mut on = None;
    for _ in 0..200 {
        let now = offcpu::now_ns();
        on = entries.on_cpu_since(spid, spid, now).map(|o| (o, now));
        if on.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let other_process = on.and_then(|(_, now)| entries.on_cpu_since(spid + 1, spid, now));
    drop(oc);
    let after_drop = entries.on_cpu_since(spid, spid, offcpu::now_ns());
    for c in [&mut child, &mut spin] {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(untouched, "asleep since before it was a target, no event since the read");
    assert!(!read_running, "a read that found it running says nothing without an entry");
    assert!(!after_wake, "woken since the read");
    assert_eq!(stopped_on_cpu, None, "a stopped process is on no CPU");
    let (since, asked) = on.expect("a spinning shell is seen on a CPU in 1 s");
    assert!(since > 0 && since < asked, "on since {since}, asked at {asked}");
    assert_eq!(other_process, None, "another process's thread");
    assert_eq!(after_drop, None, "the recorder dropped: nothing is on a CPU");
}
