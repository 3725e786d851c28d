//! The BPF programs' own thread: loading and attaching them (the tracefs layout they need
//! checked first), then draining the ring of waits and answering the readers' commands.

use crate::*;

/// The tracepoints' record layout the program reads (offsets as `tracefs` prints them).
pub(crate) const LAYOUT: [(&str, &[&str]); 1] = [(
    "sched/sched_switch",
    &[
        "char prev_comm[16];\toffset:8;",
        "prev_pid;\toffset:24;\tsize:4;",
        "long prev_state;\toffset:32;\tsize:8;",
        "char next_comm[16];\toffset:40;",
        "next_pid;\toffset:56;\tsize:4;",
    ],
)];

pub(crate) fn tracefs() -> Option<std::path::PathBuf> {
    let found = || {
        ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.join("events/sched").is_dir())
    };
    found().or_else(|| {
        // Not mounted (a boot without systemd's mount of it): mounted here, as procwatch's
        // tracer does, by whoever may load BPF programs at all.
        let _ = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        found()
    })
}

/// Checks that this kernel's scheduler tracepoints lay their records out as the program reads
/// them.
pub(crate) fn check_layout() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: no BPF off-CPU evidence (kernel stacks, wakers); rerun with sudo, or grant CAP_BPF, CAP_PERFMON and CAP_SYSLOG".into());
    }
    // on_waking is a BTF tracepoint that reads the woken task's pid by CO-RE.
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err("this kernel has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF): no BPF off-CPU evidence".into());
    }
    let Some(fs) = tracefs() else {
        return Err("no tracefs with the sched events at /sys/kernel/tracing (mount -t tracefs nodev /sys/kernel/tracing)".into());
    };
    for (event, fields) in LAYOUT {
        let p = fs.join("events").join(event).join("format");
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if let Some(f) = fields.iter().find(|f| !text.contains(*f)) {
            return Err(format!(
                "{}: the record's layout differs from what stallscope's BPF program reads (no `{}`); off-CPU evidence is off on this kernel",
                p.display(),
                f.replace('\t', " ")
            ));
        }
    }
    Ok(())
}

/// The watchdog's alarm ring (a duplicate of its fd), or why there is none.
pub(crate) type Alarms = Result<OwnedFd, String>;
use std::os::fd::OwnedFd;

/// The size of the program's array of entries: [`Options::entry_slots`] as a power of two, at
/// most 2^20.
pub(crate) fn entry_slots(opts: &Options) -> u32 {
    opts.entry_slots.clamp(1, 1 << 20).next_power_of_two()
}

pub(crate) fn load(
    storage: &mut std::mem::MaybeUninit<libbpf_rs::OpenObject>,
    opts: Options,
    classic: bool,
) -> Result<skel::OffcpuSkel<'_>, String> {
    use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
    said::keep();
    said::forget();
    let mut open = skel::OffcpuSkelBuilder::default()
        .open(storage)
        .map_err(|e| format!("could not open the BPF program: {e}"))?;
    if let Some(ro) = open.maps.rodata_data.as_deref_mut() {
        ro.min_ns = opts.min_ns;
        ro.stack_ns = opts.stack_ns;
        ro.waker_stack_ns = opts.waker_stack_ns;
        ro.toff_mask = entry_slots(&opts) - 1;
        ro.record_unarmed = match opts.record_unarmed {
            Unarmed::Nothing => 0,
            Unarmed::Involuntary => 1,
            Unarmed::Everything => 2,
        };
    }
    open.maps
        .toff
        .set_max_entries(entry_slots(&opts))
        .map_err(|e| format!("could not size the BPF program's entries: {e}"))?;
    // The maps read here, as this build's parsers lay them out: a C struct changed without its
    // reader would otherwise read as nothing, silently.
    let m = &open.maps;
    for (name, size, want) in [
        ("toff", m.toff.value_size(), raw::ENTRY_SIZE),
        ("off", m.off.value_size(), raw::ENTRY_SIZE),
        ("tslots", m.tslots.value_size(), 8),
    ] {
        if size as usize != want {
            return Err(format!(
                "the BPF program's `{name}` values are {size} bytes, this build reads {want}: \
                 a mismatched build; rebuild stallscope"
            ));
        }
    }
    // The BTF tracepoint, or the classic one where the kernel refused it.
    open.progs.on_switch_btf.set_autoload(!classic);
    open.progs.on_switch.set_autoload(classic);
    let mut sk = open.load().map_err(|e| {
        format!(
            "the kernel refused the BPF program ({e}); it needs root, or CAP_BPF and CAP_PERFMON{}",
            said::words(20)
        )
    })?;
    sk.attach().map_err(|e| {
        format!("could not attach to the scheduler tracepoints: {e}{}", said::words(5))
    })?;
    Ok(sk)
}

/// What the reader thread hands back once the program is loaded: the alarm ring (or why none),
/// the safepoint map, the CPU time tally's maps, the threads' entries (`toff`).
pub(crate) type Ready = (Alarms, Option<OwnedFd>, Option<tally::Maps>, Option<OwnedFd>);

/// The reader thread: loads, attaches, then drains the ring buffer into the window every
/// [`DRAIN`] and answers commands, until the sender is dropped.
pub(crate) fn run(
    first: Vec<i32>,
    opts: Options,
    rx: mpsc::Receiver<Cmd>,
    ready: mpsc::Sender<Result<Ready, String>>,
    lost: Arc<std::sync::atomic::AtomicU64>,
    registered: entries::Registered,
) {
    use libbpf_rs::MapCore;
    let mut storage = std::mem::MaybeUninit::uninit();
    let mut again = std::mem::MaybeUninit::uninit();
    let (loaded, refused) = match load(&mut storage, opts, opts.classic_switch) {
        Err(e) if !opts.classic_switch => (load(&mut again, opts, true), Some(e)),
        Ok(sk) if opts.classic_switch => (Ok(sk), Some("the classic one asked for".into())),
        other => (other, None),
    };
    let sk = match loaded {
        Ok(sk) => sk,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let btf = refused.is_none();
    let toff_mask = entry_slots(&opts) - 1;
    let alarms: Alarms = if let Some(e) = refused {
        Err(format!("no BPF watchdog on this kernel (its BTF sched_switch was refused: {e})"))
    } else if !opts.watchdog {
        Err("no BPF watchdog asked for".into())
    } else {
        use std::os::fd::AsFd;
        sk.maps.alarms.as_fd().try_clone_to_owned().map_err(|e| format!("the BPF alarm ring: {e}"))
    };
    // Each target's level (0: not a target; 1: recorded; 2: recorded and armed) and its slot
    // in `sp` (None: its safepoints not watched), as the program's `targets` holds them.
    // The program finds them in `tslots` and, where their index is shared, `targets`.
    let mut targets: HashMap<i32, (u8, Option<usize>)> = HashMap::new();
    let slots = std::cell::RefCell::new(slots::Slots::default());
    let put = |targets: &mut HashMap<i32, (u8, Option<usize>)>, tgid: i32| {
        if targets.get(&tgid).is_some_and(|t| t.0 == 0) {
            targets.remove(&tgid);
        }
        let values: HashMap<u32, u32> = targets
            .iter()
            .map(|(&t, &(level, slot))| {
                (t as u32, level as u32 | (slot.map_or(0, |s| s as u32 + 1) << 8))
            })
            .collect();
        let w = slots.borrow_mut().set(tgid as u32, &values);
        let any = libbpf_rs::MapFlags::ANY;
        for (t, v) in &w.spilled {
            let _ = sk.maps.targets.update(&t.to_ne_bytes(), &v.to_ne_bytes(), any);
        }
        let entry = [w.entry[0].to_ne_bytes(), w.entry[1].to_ne_bytes()].concat();
        let _ = sk.maps.tslots.update(&w.slot.to_ne_bytes(), &entry, any);
        for t in &w.unspilled {
            let _ = sk.maps.targets.delete(&t.to_ne_bytes());
        }
    };
    let set = |targets: &mut HashMap<i32, (u8, Option<usize>)>, tgid: i32, level: u8| {
        targets.entry(tgid).or_insert((0, None)).0 = level;
        put(targets, tgid);
        // From now on the program makes an entry at each of its threads' first event: only
        // the BTF switch program, which knows the next thread's process (Entries::still).
        registered.set(tgid, level > 0 && btf);
    };
    for t in &first {
        set(&mut targets, *t, 1);
    }
    let window: Arc<Mutex<VecDeque<RawWait>>> = Arc::default();
    let w2 = window.clone();
    let mut b = libbpf_rs::RingBufferBuilder::new();
    let added = b.add(&sk.maps.events, move |d: &[u8]| {
        if let Some(r) = parse_event(d)
            && let Ok(mut w) = w2.lock()
        {
            w.push_back(r);
        }
        0
    });
    let ring = match added.map(|_| ()).and_then(|()| b.build()) {
        Ok(r) => r,
        Err(e) => {
            let _ = ready.send(Err(format!("could not read the BPF ring buffer: {e}")));
            return;
        }
    };
    let sp = {
        use std::os::fd::AsFd;
        sk.maps.sp.as_fd().try_clone_to_owned().ok()
    };
    // This thread's own mapping of it, to reset it before the probes are attached.
    let sp_map = sp.as_ref().and_then(SpMap::open);
    // The CPU time tally: the BTF program's alone.
    let tally = btf.then(|| {
        Some(tally::Maps {
            on: libbpf_rs::MapHandle::try_from(&sk.maps.tally_on).ok()?,
            cputime: libbpf_rs::MapHandle::try_from(&sk.maps.cputime).ok()?,
            oncpu: libbpf_rs::MapHandle::try_from(&sk.maps.oncpu).ok()?,
        })
    });
    let toff = {
        use std::os::fd::AsFd;
        sk.maps.toff.as_fd().try_clone_to_owned().ok()
    };
    let _ = ready.send(Ok((alarms, sp, tally.flatten(), toff)));
    // The machine's counters, loaded once per process (after the readers were let go: a
    // sample before then reads the file).
    if let Some(row) = opts.tlb_row {
        let _ = crate::Counters::shared(row);
    }
    // The safepoint probes' links, while attached: slot 0's (one process), and those attached
    // in every process, once per libjvm.so (its device and inode).
    let mut probes: Vec<libbpf_rs::Link> = Vec::new();
    let mut everywhere: HashMap<(u64, u64), Vec<libbpf_rs::Link>> = HashMap::new();
    // The last generation handed out (slots watched, one after the other).
    let mut gens = 0u64;
    let attach = |prog: &libbpf_rs::ProgramMut, pid: i32, libjvm: &std::path::Path, name: &str| {
        said::forget();
        prog.attach_usdt(pid, libjvm, "hs_private", name).map_err(|e| {
            format!(
                "could not attach the JVM's safepoint probe hs_private:{name} in {} (pid {pid}): {e}{}",
                libjvm.display(),
                said::words(3)
            )
        })
    };
    // Once per libjvm.so file (its device and inode): the end probe first, as a begin seen
    // without its end would hold a safepoint open until the next one.
    let attach_everywhere = |everywhere: &mut HashMap<(u64, u64), Vec<libbpf_rs::Link>>,
                             meta: &std::fs::Metadata,
                             libjvm: &std::path::Path|
     -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        if let std::collections::hash_map::Entry::Vacant(v) =
            everywhere.entry((meta.dev(), meta.ino()))
        {
            let e = attach(&sk.progs.on_sp_end, -1, libjvm, "safepoint__end")?;
            let b = attach(&sk.progs.on_sp_begin, -1, libjvm, "safepoint__begin")?;
            v.insert(vec![e, b]);
        }
        Ok(())
    };
    let drain = |window: &Mutex<VecDeque<RawWait>>| {
        let _ = ring.consume();
        let now = now_ns();
        if let Ok(mut w) = window.lock() {
            while w.len() > opts.keep_max
                || w.front().is_some_and(|f| f.end.unwrap_or(now) + opts.keep_ns < now)
            {
                w.pop_front();
            }
            if shrunk(&mut w) {
                drop(w);
                give_back_freed_memory();
            }
        }
        let zero = 0u32.to_ne_bytes();
        if let Ok(Some(v)) = sk.maps.lost.lookup_percpu(&zero, libbpf_rs::MapFlags::ANY) {
            let n: u64 = v
                .iter()
                .filter_map(|b| b.get(..8).and_then(|b| b.try_into().ok()))
                .map(u64::from_ne_bytes)
                .sum();
            lost.store(n, std::sync::atomic::Ordering::Relaxed);
        }
    };
    loop {
        match rx.recv_timeout(DRAIN) {
            Ok(Cmd::Stop) => break,
            Ok(Cmd::Add(t)) => set(&mut targets, t, 1),
            Ok(Cmd::Arm(t, armed)) => set(&mut targets, t, if armed { 2 } else { 1 }),
            Ok(Cmd::Remove(t)) => {
                // Out of the program's targets first, so its probes write there no more.
                let slot = targets.get(&t).and_then(|t| t.1);
                set(&mut targets, t, 0);
                if let (Some(slot), Some(m)) = (slot, sp_map.as_ref()) {
                    m.clear(slot);
                }
                forget_waits(&sk.maps.toff, &sk.maps.off, &sk.maps.stacks, toff_mask, t);
            }
            Ok(Cmd::Unslot(t, held, generation)) => {
                let current = sp_map.as_ref().is_some_and(|m| {
                    m.word(held, SP_GEN).load(std::sync::atomic::Ordering::Acquire) == generation
                });
                if current
                    && let Some((_, slot)) = targets.get_mut(&t)
                    && *slot == Some(held)
                {
                    *slot = None;
                    put(&mut targets, t);
                    if let Some(m) = sp_map.as_ref() {
                        m.clear(held);
                    }
                }
            }
            Ok(Cmd::SafepointsOf { pid, libjvm, after_ns, reply }) => {
                let r = (|| {
                    let m =
                        sp_map.as_ref().ok_or("the BPF program's safepoint map is not mapped")?;
                    let level = targets.get(&pid).map_or(0, |t| t.0);
                    if level == 0 {
                        return Err(format!("pid {pid} is not recorded"));
                    }
                    let meta = std::fs::metadata(&libjvm)
                        .map_err(|e| format!("{}: {e}", libjvm.display()))?;
                    // A fresh slot, also for a JVM watched again (its old handle, until dropped,
                    // reads nothing: its slot is cleared).
                    let used: Vec<usize> = targets.values().filter_map(|t| t.1).collect();
                    let slot = (1..SP_SLOTS).find(|s| !used.contains(s)).ok_or_else(|| {
                        format!("{} JVMs' safepoints are watched already", SP_SLOTS - 1)
                    })?;
                    attach_everywhere(&mut everywhere, &meta, &libjvm)?;
                    m.clear(slot);
                    gens += 1;
                    m.word(slot, SP_GEN).store(gens, std::sync::atomic::Ordering::Release);
                    m.word(slot, SP_AFTER).store(after_ns, std::sync::atomic::Ordering::Release);
                    let old = targets.get_mut(&pid).and_then(|t| t.1.replace(slot));
                    put(&mut targets, pid);
                    // Its old slot (a JVM watched again), now that the new one is in.
                    if let Some(old) = old {
                        m.clear(old);
                    }
                    Ok((slot, gens))
                })();
                let _ = reply.send(r);
            }
            Ok(Cmd::Prepare(libjvm)) => {
                if let Ok(meta) = std::fs::metadata(&libjvm) {
                    let _ = attach_everywhere(&mut everywhere, &meta, &libjvm);
                }
            }
            Ok(Cmd::Watch(tid, after_ns, tick_addr)) => {
                let mut v = [0u8; 24];
                v[..4].copy_from_slice(&tid.to_ne_bytes());
                v[8..16].copy_from_slice(&after_ns.to_ne_bytes());
                v[16..].copy_from_slice(&tick_addr.to_ne_bytes());
                let _ = sk.maps.watch.update(&0u32.to_ne_bytes(), &v, libbpf_rs::MapFlags::ANY);
            }
            Ok(Cmd::Safepoints { pid, libjvm, reply }) => {
                probes.clear();
                // Forget any other JVM's, then the end probe first: a begin seen without its
                // end would hold a safepoint open until the next one.
                if let Some(m) = sp_map.as_ref() {
                    m.clear(0);
                }
                let had: Vec<i32> =
                    targets.iter().filter(|(_, t)| t.1 == Some(0)).map(|(p, _)| *p).collect();
                for p in had {
                    if let Some(t) = targets.get_mut(&p) {
                        t.1 = None;
                    }
                    put(&mut targets, p);
                }
                let e = targets.entry(pid).or_insert((1, None));
                e.1 = Some(0);
                put(&mut targets, pid);
                let r = attach(&sk.progs.on_sp_end, pid, &libjvm, "safepoint__end").and_then(|e| {
                    attach(&sk.progs.on_sp_begin, pid, &libjvm, "safepoint__begin")
                        .map(|b| probes = vec![e, b])
                });
                let _ = reply.send(r);
            }
            Ok(Cmd::Held { tgid, reply }) => {
                let out = off_now(&sk.maps.toff, &sk.maps.off, toff_mask, tgid)
                    .filter(|r| involuntary(state_letter(r.state)))
                    .map(|r| Held {
                        tid: r.tid,
                        comm: r.comm,
                        start: r.start,
                        state: state_letter(r.state),
                    })
                    .collect();
                let _ = reply.send(out);
            }
            Ok(Cmd::Read { tgids, from, to, reply }) => {
                drain(&window);
                let mut out: Vec<RawWait> = window
                    .lock()
                    .map(|w| {
                        w.iter()
                            .filter(|r| tgids.contains(&r.tgid))
                            .filter(|r| r.start <= to && r.end.unwrap_or(u64::MAX) >= from)
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                // Those still off a CPU now.
                for &tgid in &tgids {
                    for mut r in off_now(&sk.maps.toff, &sk.maps.off, toff_mask, tgid)
                        .filter(|r| r.start <= to)
                    {
                        r.end = None;
                        out.push(r);
                    }
                }
                let _ = reply.send(out);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => drain(&window),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
}

/// The threads of `tgid` off a CPU now, as the program's entries hold them (an entry whose
/// start is 0 is of a thread that runs: entries are kept from wait to wait): looked up by the
/// process's threads listed in /proc (in `toff` at the tid's index, else in `off`), not by
/// walking the maps, which hold every target's threads (`watch`: hundreds, two system calls
/// each).
pub(crate) fn off_now<'a>(
    toff: &'a impl libbpf_rs::MapCore,
    off: &'a impl libbpf_rs::MapCore,
    toff_mask: u32,
    tgid: i32,
) -> impl Iterator<Item = RawWait> + 'a {
    let any = libbpf_rs::MapFlags::ANY;
    threads_of(tgid).into_iter().filter_map(move |tid| {
        let index = (tid & toff_mask).to_ne_bytes();
        let held = toff.lookup(&index, any).ok().flatten().and_then(|v| parse_entry(&v));
        let r = match held {
            Some(r) if r.tid as u32 == tid => r,
            _ => parse_entry(&off.lookup(&tid.to_ne_bytes(), any).ok()??)?,
        };
        // start 0: the thread runs (its entry is kept from its last wait).
        Some(r).filter(|r| {
            r.start != 0 && r.tgid == tgid && !matches!(state_letter(r.state), 'X' | 'Z')
        })
    })
}

/// The threads of `tgid`, no longer a target, have no wait under way in the program's entries:
/// the program sees them no more, so a wait noted before would otherwise end, if the process
/// were added again, as one wait over the whole time between. Their indexes in `toff` stay
/// held until they exit unseen (a thread that is not a target's is not seen exiting): others
/// on those indexes are kept in the hash. The entry is rewritten with its own tid, so no thread
/// can take the index meanwhile. The stacks a wait woken just before took are let go too: the
/// program, seeing the thread no more, would not free them at its switch back in.
pub(crate) fn forget_waits(
    toff: &impl libbpf_rs::MapCore,
    off: &impl libbpf_rs::MapCore,
    stacks: &impl libbpf_rs::MapCore,
    toff_mask: u32,
    tgid: i32,
) {
    let any = libbpf_rs::MapFlags::ANY;
    for tid in threads_of(tgid) {
        let index = (tid & toff_mask).to_ne_bytes();
        if let Ok(Some(mut v)) = toff.lookup(&index, any)
            && parse_entry(&v).is_some_and(|r| r.tid as u32 == tid && r.start != 0)
        {
            v[..8].fill(0);
            let _ = toff.update(&index, &v, any);
        }
        let _ = off.delete(&tid.to_ne_bytes());
        let _ = stacks.delete(&tid.to_ne_bytes());
    }
}

/// The threads of `tgid` now, from /proc (none if it is gone).
pub(crate) fn threads_of(tgid: i32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{tgid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// CLOCK_MONOTONIC now, in ns (what `bpf_ktime_get_ns` stamps).
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Below this many waits' room the window is never shrunk (a few hundred kB).
const SHRINK_FLOOR: usize = 4096;

/// Gives back the room a long stall's waits took once the window holds a quarter of it: a 15 s
/// stall of one JVM grew it to 32,768 waits (7 MB, with their stacks 19 MB), and a deque keeps
/// its room when emptied, so `watch` stayed that much larger for good. True when it shrank.
fn shrunk(w: &mut VecDeque<RawWait>) -> bool {
    if w.capacity() <= SHRINK_FLOOR || w.len() * 4 > w.capacity() {
        return false;
    }
    w.shrink_to((w.len() * 2).max(SHRINK_FLOOR));
    true
}

/// Returns what the allocator holds free to the system (glibc keeps it in its arenas: the
/// stacks of the waits dropped with the room above, small blocks among others).
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes a padding and only releases free memory of the allocator's own.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(start: u64) -> RawWait {
        RawWait {
            start,
            end: Some(start + 1),
            woken: None,
            state: 1,
            tid: 1,
            tgid: 1,
            cpu: 0,
            comm: String::new(),
            frames: vec![],
            waker: None,
            instead: None,
            instead_ns: None,
        }
    }

    #[test]
    fn the_window_gives_back_a_long_stalls_room_once_it_drained() {
        let mut w: VecDeque<RawWait> = (0..32_768).map(wait).collect();
        assert!(!shrunk(&mut w), "full: kept");
        w.drain(..32_000);
        assert!(shrunk(&mut w));
        assert!(w.capacity() < 8_192, "room for {} waits left", w.capacity());
        assert_eq!(w.len(), 768);
        assert_eq!(w.front().map(|r| r.start), Some(32_000), "the newest waits stay, in order");
        assert!(!shrunk(&mut w), "once");
        let mut small: VecDeque<RawWait> = (0..1_000).map(wait).collect();
        small.clear();
        assert!(!shrunk(&mut small), "a window this small is left as it is");
    }
}
