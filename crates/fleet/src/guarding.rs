//! Guarding one JVM: its labels and recording directory, its recorder's thread (started, kept
//! through a full disk, ended), and its safepoint probes.

use crate::*;

/// One JVM being guarded: what the main loop and its guarding thread share, and that thread.
pub(crate) struct Guarded {
    pub(crate) info: JvmInfoLabels,
    pub(crate) flags: Guarding,
    pub(crate) thread: std::thread::JoinHandle<()>,
}

/// A JVM's name in labels and directory names: its main class, or its jar's file name.
pub(crate) fn short_main(j: &JvmProcess) -> String {
    let m = if j.main.ends_with(".jar") {
        Path::new(&j.main).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default()
    } else {
        j.main.clone()
    };
    if m.is_empty() { "unknown".into() } else { m }
}

/// The labels of a JVM's series, and its pod when it runs in one (read once, when it is found).
pub(crate) fn labels_of(j: &JvmProcess) -> (JvmLabels, Option<procwatch::pods::Pod>) {
    let pod = procwatch::pods::of_pid(j.pid);
    let main = short_main(j);
    let labels = match &pod {
        // A pod's JVM: named by its pod; its pid would only multiply the series per restart.
        Some(p) if !p.uid.is_empty() || !p.name.is_empty() => JvmLabels {
            namespace: p.namespace.clone(),
            pod: if p.name.is_empty() { p.uid.clone() } else { p.name.clone() },
            container: p.container_label(),
            workload: p.workload(),
            main,
            pid: String::new(),
        },
        _ => JvmLabels {
            container: match &pod {
                Some(p) => p.container_label(),
                None if j.contained => j.cgroup.clone(),
                None => String::new(),
            },
            main,
            pid: j.pid.to_string(),
            ..JvmLabels::default()
        },
    };
    (labels, pod)
}

/// A JVM's `watched_jvm` labels.
pub(crate) fn info_of(
    j: &JvmProcess,
    labels: &JvmLabels,
    pod: Option<&procwatch::pods::Pod>,
) -> JvmInfoLabels {
    JvmInfoLabels {
        jvm: labels.clone(),
        process: j.pid.to_string(),
        container_id: pod.map(|p| p.container_id.clone()).unwrap_or_default(),
        cgroup: j.cgroup.clone(),
        jdk: j.java_version.clone().unwrap_or_default(),
    }
}

/// `DIR/<pid>-<main>-<date>-<time>`, with only characters the JVM's options can carry.
pub(crate) fn recording_dir(out: &Path, j: &JvmProcess) -> PathBuf {
    let main: String = short_main(j)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .take(48)
        .collect();
    recorder::unused_name(
        out,
        &format!("{}-{main}-{}", j.pid, chrono::Local::now().format("%Y%m%d-%H%M%S")),
    )
}

/// The directory the recordings go in: as a recording directory is (recorder::own_dir), but it
/// may hold recordings already.
pub(crate) fn own_out_dir(out: &Path) -> Result<PathBuf> {
    recorder::option_safe(out)?;
    recorder::own_dir(out, false)?;
    Ok(std::fs::canonicalize(out)?)
}

/// Whether another stallscope (`run`, `attach`, another `watch`) already records this JVM: its
/// agent's heartbeat is there and running.
pub(crate) fn recorded_elsewhere(pid: i32) -> Option<PathBuf> {
    let path = procwatch::heartbeat::default_path(pid);
    let hb = procwatch::heartbeat::Heartbeat::open(&path).ok()?;
    (hb.read().state == procwatch::heartbeat::MeterState::Running
        && hb.of_pid(pid).liveness() == procwatch::heartbeat::Liveness::Alive)
        .then_some(path)
}

/// What a JVM's guarding thread shares with the main loop.
#[derive(Clone, Default)]
pub(crate) struct Guarding {
    /// Set to detach (watch ends, or the recording is rolled).
    pub(crate) stop: Arc<AtomicBool>,
    /// Set with `stop` to attach again into a fresh recording.
    pub(crate) roll: Arc<AtomicBool>,
    /// The recording being written.
    pub(crate) current: Arc<Mutex<Option<PathBuf>>>,
    /// When its recent stalls ended (for `--attach N/WINDOW`), and whether it was escalated.
    pub(crate) stalls: Arc<Mutex<std::collections::VecDeque<Instant>>>,
    pub(crate) escalate: Arc<AtomicBool>,
    /// Escalating it failed (it refuses the attach protocol): it stays watched from outside.
    pub(crate) refused: Arc<AtomicBool>,
}

/// Guards one JVM until it exits or `stop` is set without `roll`: one recording after another,
/// from outside until it is escalated (or from the start, with `--attach`).
pub(crate) fn guard_jvm(
    sh: Arc<Shared>,
    j: JvmProcess,
    labels: JvmLabels,
    pod: Option<procwatch::pods::Pod>,
    g: Guarding,
) {
    let Guarding { stop, roll, current, stalls, escalate, refused } = g;
    let pid = j.pid;
    let skip = |reason: &str, why: String| {
        sh.notices.warn(format!("JVM pid {pid} ({}): not watched: {why}", labels.main));
        sh.metrics.skipped.get_or_create(&SkipLabels { reason: reason.into() }).inc();
    };
    if sh.attach == Attach::All {
        escalate.store(true, Ordering::SeqCst);
    }
    if escalate.load(Ordering::SeqCst)
        && let Some(hb) = recorded_elsewhere(pid)
    {
        return skip(
            "recorded",
            format!("another stallscope records it (its heartbeat {} is running)", hb.display()),
        );
    }
    let jvm = match Jvm::find(pid) {
        Ok(jvm) => jvm,
        Err(e) => return skip("refused", format!("{e:#}")),
    };
    let info = EventJvm {
        pid,
        nspid: j.nspid,
        main: labels.main.clone(),
        container: if j.contained || pod.is_some() { j.cgroup.clone() } else { String::new() },
        pod,
        jdk: j.java_version.clone(),
    };
    // Its threads are recorded by the one BPF program from now until it is no longer guarded.
    struct Filtered<'a>(Option<&'a offcpu::Reader>, i32);
    impl Drop for Filtered<'_> {
        fn drop(&mut self) {
            if let Some(r) = self.0 {
                r.remove(self.1);
            }
        }
    }
    if let Some(r) = &sh.offcpu {
        r.add(pid);
        // Attached while its recording opens and its counters are made (a young JVM's first
        // GC may come 50 ms after its perf-data file; see `safepoint_probes`).
        if sh.probes
            && let Some(lib) = offcpu::libjvm_of(pid)
        {
            r.prepare_safepoints(&lib);
        }
    }
    let _filtered = Filtered(sh.offcpu.as_ref(), pid);
    // Its safepoint probes' slot, made with its first recording from outside and kept for the
    // next ones: a safepoint begun as a recording is rolled is still seen begin by the next
    // (a slot of its own would see none of it, and a stall then under way would be missed).
    let probes = std::sync::OnceLock::new();
    let mut first = true;
    // Since when its recordings could not be written for want of room (said once a spell), and
    // said over as the next recording starts.
    let no_space_since = Mutex::new(None::<Instant>);
    let recording_again = || {
        if let Some(t) = no_space_since.lock().unwrap_or_else(|p| p.into_inner()).take() {
            sh.notices.warn(format!(
                "JVM pid {pid}: recorded again, after {} without room on the disk",
                recording::units::fmt_ns(t.elapsed().as_nanos() as u64)
            ));
        }
    };
    // An escalation refused (the directory not handed over, the attach refused, the agent not
    // started): watched from outside again, and not escalated again.
    let outside_again = |e: &anyhow::Error| {
        sh.notices.warn(format!("JVM pid {pid}: not attached ({e:#}); watched from outside"));
        escalate.store(false, Ordering::SeqCst);
        refused.store(true, Ordering::SeqCst);
    };
    loop {
        let dir = recording_dir(&sh.out, &j);
        let attached = escalate.load(Ordering::SeqCst);
        // Handed to the JVM's user only where the JVM writes into it (the agent, its logs):
        // watched from outside, nothing but stallscope writes there, and a directory handed
        // over would need DAC_OVERRIDE for stallscope's own files (the DaemonSet run without
        // CHOWN or DAC_OVERRIDE skipped every JVM not root's).
        let made = recorder::own_empty_dir(&dir)
            .and_then(|_| if attached { recorder::hand_to(&dir, jvm.uid) } else { Ok(()) });
        if let Err(e) = made {
            if out_of_space(&e, &sh.out) {
                let _ = std::fs::remove_dir(&dir);
                if wait_for_space(&sh, pid, j.starttime, &e, &stop, &roll, &no_space_since) {
                    continue;
                }
                return;
            }
            let _ = std::fs::remove_dir(&dir);
            // Escalating: the directory could not be handed over (no CAP_CHOWN, say).
            if attached && !first && sh.attach != Attach::All {
                outside_again(&e);
                continue;
            }
            return skip("refused", format!("{e:#}"));
        }
        // From outside, the culprits' code is read by the kernel's sampling, at no cost to the
        // JVM between stalls.
        let s = Settings {
            jar: sh.jar.clone(),
            dir: dir.clone(),
            threshold_ns: sh.threshold_ns,
            sample_interval_ns: sh.sample_interval_ns,
            stacks: if attached { Stacks::Off } else { Stacks::Agent },
            resolution_ns: sh.resolution_ns,
            outside: !attached,
            bpf: sh.offcpu.is_some(),
            // One program for the host, not one per JVM (each would hook every context switch).
            shared_offcpu: sh.offcpu.clone(),
            notices: sh.notices.clone(),
            // Every line also kept in memory: each stall is diagnosed from there, not from the
            // files it was written to.
            live: Some(recording::Live::default()),
        };
        let notes = sh.notes.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let _ = notes.send(Note::Opened {
            dir: dir.clone(),
            jvm: info.clone(),
            labels: labels.clone(),
            live: s.live.clone().unwrap_or_default(),
        });
        *current.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.clone());
        let ended_to = Mutex::new(notes.clone());
        let ended = || -> Box<dyn FnMut(u32, recording::Barrier) + Send> {
            let (tx, d, recent) = (
                ended_to.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                dir.clone(),
                Arc::clone(&stalls),
            );
            Box::new(move |stall, barrier| {
                recent.lock().unwrap_or_else(|p| p.into_inner()).push_back(Instant::now());
                let _ = tx.send(Note::Ended { dir: d.clone(), stall, barrier });
            })
        };
        let r = if attached {
            let drive = |p: i32, hb: &procwatch::heartbeat::Heartbeat| {
                recording_again();
                recorder::sampler::Driven {
                    roll: Some(Arc::clone(&roll)),
                    ..sh.beats.join(p, hb, IDLE_SAMPLE, ended())
                }
            };
            recorder::attach::record_attached(&s, &jvm, None, &stop, Some(&drive), None)
        } else {
            let observer = |jc: &Option<procwatch::jvmcounters::JvmCounters>| {
                sh.metrics.counters_observer(
                    &labels,
                    jc.as_ref().is_some_and(|c| c.info.safepoint_time_includes_sync),
                )
            };
            let drive = |p: i32, jc: Option<procwatch::jvmcounters::JvmCounters>| {
                recording_again();
                let o = observer(&jc);
                let slot = probes.get_or_init(|| safepoint_probes(&sh, p).map(Arc::new)).clone();
                recorder::sampler::Driven {
                    roll: Some(Arc::clone(&roll)),
                    ..sh.beats.join_outside(p, jc, slot, o, IDLE_SAMPLE, ended())
                }
            };
            recorder::attach::record_outside(&s, pid, &stop, &drive)
        };
        *current.lock().unwrap_or_else(|p| p.into_inner()) = None;
        // Its disk full (a roll's new recording, or the first): nothing of it is kept when its
        // meta.json was not written whole (created empty, cut, or not at all), and the JVM stays
        // guarded: it is recorded again once there is room (issue 58: a full disk ended the
        // guarding of every JVM rolled then, for good, and `watch PID` exited).
        let no_space = r.as_ref().err().is_some_and(|e| out_of_space(e, &sh.out));
        let whole = std::fs::read(dir.join(recording::files::META))
            .is_ok_and(|b| serde_json::from_slice::<serde::de::IgnoredAny>(&b).is_ok());
        if no_space && !whole {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = notes.send(Note::Closed { dir: dir.clone() });
        let alive = procwatch::task::process_starttime(pid) == Some(j.starttime);
        if let (Err(e), true) = (&r, no_space && alive) {
            // A roll or escalation asked meanwhile is for the next recording.
            if roll.swap(false, Ordering::SeqCst) {
                stop.store(false, Ordering::SeqCst);
            }
            if wait_for_space(&sh, pid, j.starttime, e, &stop, &roll, &no_space_since) {
                continue;
            }
            return;
        }
        let mut again = roll.swap(false, Ordering::SeqCst);
        if let Err(e) = r {
            if first {
                let _ = std::fs::remove_dir_all(&dir);
                return skip("refused", format!("{e:#}"));
            }
            if !attached || sh.attach == Attach::All {
                sh.notices.warn(format!("JVM pid {pid}: watching ended: {e:#}"));
                return;
            }
            // Escalating failed (the JVM refuses the attach protocol, or the agent did not
            // start).
            let _ = std::fs::remove_dir_all(&dir);
            outside_again(&e);
            again = true;
        }
        first = false;
        if !(again && alive) {
            return;
        }
        // Rolled: a fresh recording, the finished one left to retention. `stop` is cleared
        // before `ending` is read, and watch sets `ending` before `stop`: either this sees the
        // end, or the end's `stop` comes after this clearing and ends the next recording.
        stop.store(false, Ordering::SeqCst);
        if sh.ending.load(Ordering::SeqCst) {
            return;
        }
    }
}

/// Whether an error is `out`'s disk being full (or a quota reached there): a spell that ends,
/// unlike a refusal. Not a full disk elsewhere (the JVM's own /tmp, which an attach writes to):
/// the error names a path under `out`, or `out`'s disk is short of its reserve.
pub(crate) fn out_of_space(e: &anyhow::Error, out: &Path) -> bool {
    let full = |n: Option<i32>| matches!(n, Some(libc::ENOSPC) | Some(libc::EDQUOT));
    let text = format!("{e:#}");
    let space = e
        .chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| full(io.raw_os_error())))
        || [libc::ENOSPC, libc::EDQUOT].iter().any(|n| text.contains(&format!("(os error {n})")));
    space
        && (text.contains(&*out.to_string_lossy()) || {
            let (free, reserve) = retain::free_space(out);
            free < reserve
        })
}

/// How often a JVM whose recording could not be written for want of room is tried again.
pub(crate) const NO_SPACE_RETRY: Duration = Duration::from_secs(2);

/// Waits to record the JVM again after its disk was full (said once a spell); false when it
/// should not be: watch ends, the JVM was let go or exited.
pub(crate) fn wait_for_space(
    sh: &Shared,
    pid: i32,
    starttime: u64,
    e: &anyhow::Error,
    stop: &AtomicBool,
    roll: &AtomicBool,
    since: &Mutex<Option<Instant>>,
) -> bool {
    {
        let mut since = since.lock().unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            *since = Some(Instant::now());
            sh.notices.warn(format!(
                "JVM pid {pid}: its recording cannot be written ({e:#}); still guarded, \
                 recorded again once there is room (tried every {} s)",
                NO_SPACE_RETRY.as_secs()
            ));
        }
    }
    let t0 = Instant::now();
    while t0.elapsed() < NO_SPACE_RETRY {
        if sh.ending.load(Ordering::SeqCst) {
            return false;
        }
        // A roll asked meanwhile is moot (nothing is being recorded); a stop without one lets
        // the JVM go.
        if stop.load(Ordering::SeqCst) {
            if !roll.swap(false, Ordering::SeqCst) {
                return false;
            }
            stop.store(false, Ordering::SeqCst);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    procwatch::task::process_starttime(pid) == Some(starttime) && !sh.ending.load(Ordering::SeqCst)
}

/// The JVM `pid`'s safepoint probes, watched in a slot of their own by the one BPF recorder;
/// None (its counters are polled) without BPF, or when they cannot be attached (said once).
pub(crate) fn safepoint_probes(sh: &Shared, pid: i32) -> Option<offcpu::SafepointSlot> {
    let r = sh.offcpu.as_ref().filter(|_| sh.probes)?;
    let Some(lib) = offcpu::libjvm_of(pid) else {
        sh.notices.warn(format!(
            "JVM pid {pid}: no libjvm.so found in its maps; its counters are polled for its safepoints"
        ));
        return None;
    };
    r.watch_safepoints_of(pid, &lib, sh.threshold_ns)
        .map_err(|e| {
            sh.notices
                .warn(format!("JVM pid {pid}: its counters are polled for its safepoints ({e})"))
        })
        .ok()
}
