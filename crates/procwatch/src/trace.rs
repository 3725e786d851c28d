//! Tracepoint evidence (root or CAP_PERFMON): a private tracefs instance that records the
//! target's user page faults (address and pc) and mmap_lock waits on CLOCK_MONOTONIC, in an
//! overwrite ring buffer that is read only when a stall ends.
//!
//! Invariant: the instance is removed when the `Tracer` is dropped; one whose owner died without
//! dropping it (SIGKILL) is removed by the owner's guardian ([`remove_instance`]) or, failing
//! that, by the next `Tracer::start` ([`sweep_orphans`]). A leaked instance keeps its events on
//! and taxes every page fault on the machine. Only tracepoints are used (kprobes may be
//! missing), and only the target's threads are traced.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};

/// One traced event of a target thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum TraceEvent {
    /// A user page fault began at `address`, at instruction `ip`.
    /// `error_code`: the x86 fault's error code (bit 1 set: a write), where the tracepoint has one.
    PageFault { t: u64, tid: i32, address: u64, ip: u64, error_code: Option<u64> },
    /// The thread started waiting for mmap_lock.
    MmapLockStart { t: u64, tid: i32, write: bool },
    /// … and got it (or gave up).
    MmapLockAcquired { t: u64, tid: i32, write: bool, success: bool },
    /// The thread began waiting for writeback of page `index` of inode `ino` (a write fault
    /// on a shared mapping, or a write to a page being written back), on backing device `bdi`.
    WritebackWait { t: u64, tid: i32, ino: u64, index: u64, bdi: String },
}

impl TraceEvent {
    pub fn t(&self) -> u64 {
        match self {
            TraceEvent::PageFault { t, .. }
            | TraceEvent::MmapLockStart { t, .. }
            | TraceEvent::MmapLockAcquired { t, .. }
            | TraceEvent::WritebackWait { t, .. } => *t,
        }
    }
    pub fn tid(&self) -> i32 {
        match self {
            TraceEvent::PageFault { tid, .. }
            | TraceEvent::MmapLockStart { tid, .. }
            | TraceEvent::MmapLockAcquired { tid, .. }
            | TraceEvent::WritebackWait { tid, .. } => *tid,
        }
    }
}

const EVENTS: [&str; 3] = [
    "exceptions/page_fault_user",
    "mmap_lock/mmap_lock_start_locking",
    "mmap_lock/mmap_lock_acquire_returned",
];

/// Events taken where the kernel has them (older kernels lack this one).
const OPTIONAL: [&str; 1] = ["writeback/folio_wait_writeback"];

/// Who acted on a process, whoever they are (so not filtered by pid): signals generated, and
/// cgroup v2 freezes written. Each fires in the context of the one who acted.
const WHO_EVENTS: [&str; 3] =
    ["signal/signal_generate", "cgroup/cgroup_freeze", "cgroup/cgroup_unfreeze"];

/// The signals whose senders are kept: interrupt, quit (a thread dump, or the attach
/// mechanism's knock), kill, term, and those that stop and continue a process.
const WHO_SIGNALS: [i32; 9] = [2, 3, 9, 15, 18, 19, 20, 21, 22];

/// Every event an instance may have enabled.
fn all_events() -> impl Iterator<Item = &'static str> {
    EVENTS.into_iter().chain(OPTIONAL).chain(WHO_EVENTS)
}

pub struct Tracer {
    dir: PathBuf,
    /// The instance of [`WHO_EVENTS`], where the kernel has them.
    who: Option<PathBuf>,
}

/// One act on a process (a signal generated, a cgroup frozen): who did it, as the kernel saw them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WhoEvent {
    /// `sender` (its thread id and comm) had signal `sig` generated for thread `target`
    /// (`result` 0: delivered or queued).
    Signal { t: u64, sender_tid: i32, sender_comm: String, sig: i32, target: i32, result: i32 },
    /// `writer` froze (or thawed) the cgroup v2 at `path`.
    Freeze { t: u64, writer_tid: i32, writer_comm: String, path: String, frozen: bool },
}

impl WhoEvent {
    pub fn t(&self) -> u64 {
        match self {
            WhoEvent::Signal { t, .. } | WhoEvent::Freeze { t, .. } => *t,
        }
    }
}

fn tracefs() -> Option<PathBuf> {
    for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(p).join("instances").is_dir() {
            return Some(PathBuf::from(p));
        }
    }
    // Mounting it is allowed to whoever may trace at all.
    let _ = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status();
    Path::new("/sys/kernel/tracing/instances")
        .is_dir()
        .then(|| PathBuf::from("/sys/kernel/tracing"))
}

fn write(p: &Path, v: &str) -> io::Result<()> {
    std::fs::write(p, v).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
}

impl Tracer {
    /// Starts tracing the threads of `pid` (and threads it starts later). Errors say what is
    /// missing (no tracefs, no privilege, an event this kernel lacks).
    pub fn start(pid: i32) -> io::Result<Tracer> {
        Tracer::start_announced(pid, &mut |_| Ok(()))
    }

    /// As [`Tracer::start`], telling `announce` the instance's directory before it is made (a
    /// guardian registers its removal then, so no moment of the start leaves it behind).
    pub fn start_announced(
        pid: i32,
        announce: &mut dyn FnMut(&Path) -> io::Result<()>,
    ) -> io::Result<Tracer> {
        let root = tracefs().ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "tracefs is not mounted and cannot be")
        })?;
        for e in EVENTS {
            if !root.join("events").join(e).is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("this kernel has no {e} tracepoint"),
                ));
            }
        }
        sweep_orphans(&root);
        let dir = root.join("instances").join(format!("{PREFIX}{pid}-{}", std::process::id()));
        announce(&dir)?;
        std::fs::create_dir(&dir)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        let t = Tracer { dir, who: None };
        write(&t.dir.join("trace_clock"), "mono")?;
        // Per CPU. Reading the buffer formats every event in it (measured: 0.43 s of kernel time
        // for a full 4 MB), so it is kept to what holds the last moments before a stall.
        write(&t.dir.join("buffer_size_kb"), "1024")?;
        write(&t.dir.join("options/overwrite"), "1")?;
        write(&t.dir.join("options/event-fork"), "1")?;
        let tids: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        write(&t.dir.join("set_event_pid"), &tids.join(" "))?;
        for e in EVENTS {
            write(&t.dir.join("events").join(e).join("enable"), "1")?;
        }
        for e in OPTIONAL {
            let enable = t.dir.join("events").join(e).join("enable");
            // Optional: a kernel that refuses it still traces the rest.
            if enable.exists() {
                let _ = write(&enable, "1");
            }
        }
        write(&t.dir.join("tracing_on"), "1")?;
        let mut t = t;
        t.who = start_who(&root, &t.dir, announce);
        Ok(t)
    }

    /// Reads who acted on processes (signals, freezes), when the kernel has the tracepoints.
    pub fn who_reader(&self) -> Option<WhoReader> {
        self.who.as_ref().map(|d| WhoReader { file: d.join("trace") })
    }

    /// The instance's directory (for a guardian to [`remove_instance`] if the owner dies).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Events of `tids` between `from` and `to` (CLOCK_MONOTONIC ns), from the ring buffer.
    pub fn read(&self, tids: &[i32], from: u64, to: u64) -> io::Result<Vec<TraceEvent>> {
        self.reader().read(tids, from, to)
    }

    /// A handle that reads the ring buffer from another thread (reading it formats every event
    /// in it: tens of milliseconds for a full 4 MB buffer), while this `Tracer` owns the
    /// instance.
    pub fn reader(&self) -> TraceReader {
        TraceReader { file: self.dir.join("trace") }
    }
}

/// Reads a tracer's ring buffer; valid while its `Tracer` lives.
#[derive(Debug, Clone)]
pub struct TraceReader {
    file: PathBuf,
}

impl TraceReader {
    /// Events of `tids` between `from` and `to` (CLOCK_MONOTONIC ns).
    pub fn read(&self, tids: &[i32], from: u64, to: u64) -> io::Result<Vec<TraceEvent>> {
        let text = std::fs::read_to_string(&self.file)?;
        Ok(text
            .lines()
            .filter_map(parse_line)
            .filter(|e| {
                e.t() >= from && e.t() <= to && (tids.is_empty() || tids.contains(&e.tid()))
            })
            .collect())
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        remove_instance(&self.dir);
        if let Some(w) = &self.who {
            remove_instance(w);
        }
    }
}

/// The second instance, beside `main` (`<main>.who`), with [`WHO_EVENTS`]: none when the kernel
/// lacks them or the instance cannot be made (the rest of the evidence stands without it).
fn start_who(
    root: &Path,
    main: &Path,
    announce: &mut dyn FnMut(&Path) -> io::Result<()>,
) -> Option<PathBuf> {
    if !WHO_EVENTS.iter().all(|e| root.join("events").join(e).is_dir()) {
        return None;
    }
    let dir = main.with_file_name(format!("{}.who", main.file_name()?.to_str()?));
    announce(&dir).ok()?;
    std::fs::create_dir(&dir).ok()?;
    let set = || -> io::Result<()> {
        write(&dir.join("trace_clock"), "mono")?;
        // Rare events: a small ring holds minutes of them.
        write(&dir.join("buffer_size_kb"), "64")?;
        write(&dir.join("options/overwrite"), "1")?;
        let sigs: Vec<String> = WHO_SIGNALS.iter().map(|s| format!("sig == {s}")).collect();
        write(&dir.join("events/signal/signal_generate/filter"), &sigs.join(" || "))?;
        for e in WHO_EVENTS {
            write(&dir.join("events").join(e).join("enable"), "1")?;
        }
        write(&dir.join("tracing_on"), "1")
    };
    match set() {
        Ok(()) => Some(dir),
        Err(_) => {
            remove_instance(&dir);
            None
        }
    }
}

/// Reads the who-acted instance's ring buffer; valid while its `Tracer` lives.
#[derive(Debug, Clone)]
pub struct WhoReader {
    file: PathBuf,
}

impl WhoReader {
    /// Acts between `from` and `to` (CLOCK_MONOTONIC ns).
    pub fn read(&self, from: u64, to: u64) -> io::Result<Vec<WhoEvent>> {
        let text = std::fs::read_to_string(&self.file)?;
        Ok(text
            .lines()
            .filter_map(parse_who_line)
            .filter(|e| e.t() >= from && e.t() <= to)
            .collect())
    }
}

/// The task (comm and tid) and the timestamp at the head of a trace line, whose comm may hold
/// spaces (`VM Thread-4243 [000] d..1. 12.000001`).
fn task_and_time(head: &str) -> Option<(String, i32, u64)> {
    let (task, rest) = head.trim_start().rsplit_once(" [")?;
    let (comm, tid) = task.trim_end().rsplit_once('-')?;
    let ts = rest.split_whitespace().last()?;
    let (s, us) = ts.split_once('.')?;
    let t = s.parse::<u64>().ok()? * 1_000_000_000
        + format!("{us:0<9}").get(..9)?.parse::<u64>().ok()?;
    Some((comm.to_string(), tid.parse().ok()?, t))
}

/// Parses one line of the who-acted instance, e.g.
/// `bash-1234 [000] d..1. 100.123456: signal_generate: sig=19 errno=0 code=0 comm=java pid=4242 grp=1 res=0`.
pub fn parse_who_line(l: &str) -> Option<WhoEvent> {
    if l.starts_with('#') {
        return None;
    }
    let (head, rest) = l.split_once(": ")?;
    let (name, fields) = rest.split_once(": ")?;
    let (comm, tid, t) = task_and_time(head)?;
    let field =
        |k: &str| fields.split_whitespace().find_map(|f| f.strip_prefix(k)?.strip_prefix('='));
    Some(match name {
        "signal_generate" => {
            // The target's comm may hold spaces: its pid is the field after it.
            let after = fields.split_once(" comm=")?.1;
            let pid = after.rsplit_once(" pid=")?.1.split_whitespace().next()?;
            WhoEvent::Signal {
                t,
                sender_tid: tid,
                sender_comm: comm,
                sig: field("sig")?.parse().ok()?,
                target: pid.parse().ok()?,
                result: field("res").and_then(|r| r.parse().ok()).unwrap_or(0),
            }
        }
        "cgroup_freeze" | "cgroup_unfreeze" => WhoEvent::Freeze {
            t,
            writer_tid: tid,
            writer_comm: comm,
            path: fields.split_once("path=")?.1.trim_end().to_string(),
            frozen: name == "cgroup_freeze",
        },
        _ => return None,
    })
}

/// Instances are named `stallscope-<target pid>-<owner pid>`.
const PREFIX: &str = "stallscope-";

/// Switches a tracefs instance off and removes it. Harmless when it is already gone, and a
/// no-op for any directory that is not one of our instances.
pub fn remove_instance(dir: &Path) {
    let ours = dir.parent().is_some_and(|p| p.ends_with("instances"))
        && dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(PREFIX));
    if !ours || !dir.is_dir() {
        return;
    }
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    for e in all_events() {
        let _ = std::fs::write(dir.join("events").join(e).join("enable"), "0");
    }
    let _ = std::fs::remove_dir(dir);
}

/// The owner pid in an instance's name, `stallscope-<target>-<owner>` (with `.who` after it
/// for the instance of who acted).
fn owner_of(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (target, owner) = rest.split_once('-')?;
    target.parse::<i32>().ok()?;
    owner.strip_suffix(".who").unwrap_or(owner).parse().ok()
}

/// Removes our instances whose owner process is gone (killed before it or its guardian could
/// remove them); returns how many. An owner's pid reused since is taken as alive, which only
/// delays the sweep.
pub fn sweep_orphans(root: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(root.join("instances")) else { return 0 };
    let mut removed = 0;
    for e in dir.flatten() {
        let Some(owner) = e.file_name().to_str().and_then(owner_of) else { continue };
        if !Path::new(&format!("/proc/{owner}")).exists() {
            remove_instance(&e.path());
            removed += 1;
        }
    }
    removed
}

fn hex(v: &str) -> Option<u64> {
    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

/// Parses one line of the `trace` file, e.g.
/// `java-4242 [001] d..1. 4300.123456: page_fault_user: address=0x7f00 ip=0x7f01 error_code=0x4`.
pub fn parse_line(l: &str) -> Option<TraceEvent> {
    if l.starts_with('#') {
        return None;
    }
    let (head, rest) = l.split_once(": ")?;
    let (name, fields) = rest.split_once(": ")?;
    let mut h = head.split_whitespace();
    let task = h.next()?;
    let tid: i32 = task.rsplit_once('-')?.1.parse().ok()?;
    let ts = h.last()?;
    let (s, us) = ts.split_once('.')?;
    let t =
        s.parse::<u64>().ok()? * 1_000_000_000 + format!("{us:0<9}")[..9].parse::<u64>().ok()?;
    let field =
        |k: &str| fields.split_whitespace().find_map(|f| f.strip_prefix(k)?.strip_prefix('='));
    Some(match name {
        "page_fault_user" => TraceEvent::PageFault {
            t,
            tid,
            address: hex(field("address")?)?,
            ip: hex(field("ip")?)?,
            error_code: field("error_code").and_then(hex),
        },
        "mmap_lock_start_locking" => {
            TraceEvent::MmapLockStart { t, tid, write: field("write")? == "true" }
        }
        "mmap_lock_acquire_returned" => TraceEvent::MmapLockAcquired {
            t,
            tid,
            write: field("write")? == "true",
            success: field("success")? == "true",
        },
        "folio_wait_writeback" => {
            let bdi = fields.strip_prefix("bdi ")?.split_once(": ino=")?.0.to_string();
            TraceEvent::WritebackWait {
                t,
                tid,
                ino: field("ino")?.parse().ok()?,
                index: field("index")?.parse().ok()?,
                bdi,
            }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines() {
        let e = parse_line("           java-4242    [001] d..1.  4300.123456: page_fault_user: address=0x7f0000001000 ip=0x7f0000a00010 error_code=0x4").unwrap();
        assert_eq!(
            e,
            TraceEvent::PageFault {
                t: 4_300_123_456_000,
                tid: 4242,
                address: 0x7f0000001000,
                ip: 0x7f0000a00010,
                error_code: Some(0x4),
            }
        );
        let e = parse_line(" reader-thread-77 [000] ..... 12.000001: mmap_lock_acquire_returned: mm=00000000abcd memcg_id=1 write=false success=true").unwrap();
        assert_eq!(
            e,
            TraceEvent::MmapLockAcquired {
                t: 12_000_001_000,
                tid: 77,
                write: false,
                success: true
            }
        );
        let e = parse_line("            java-965     [001] d..1.  4301.500000: folio_wait_writeback: bdi 0:52: ino=131 index=2").unwrap();
        assert_eq!(
            e,
            TraceEvent::WritebackWait {
                t: 4_301_500_000_000,
                tid: 965,
                ino: 131,
                index: 2,
                bdi: "0:52".into()
            }
        );
        assert!(parse_line("# tracer: nop").is_none());
        assert!(parse_line("garbage").is_none());
    }

    #[test]
    fn who_lines() {
        let e = parse_who_line("            bash-1234    [000] d..1.   100.123456: signal_generate: sig=19 errno=0 code=0 comm=VM Thread pid=4242 grp=1 res=0").unwrap();
        assert_eq!(
            e,
            WhoEvent::Signal {
                t: 100_123_456_000,
                sender_tid: 1234,
                sender_comm: "bash".into(),
                sig: 19,
                target: 4242,
                result: 0
            }
        );
        let e = parse_who_line(
            "   VM Thread-77 [001] ..... 5.000001: cgroup_freeze: root=0 id=12 level=2 path=/a b/c",
        )
        .unwrap();
        assert_eq!(
            e,
            WhoEvent::Freeze {
                t: 5_000_001_000,
                writer_tid: 77,
                writer_comm: "VM Thread".into(),
                path: "/a b/c".into(),
                frozen: true
            }
        );
        assert!(parse_who_line("x-1 [000] ..... 5.1: cgroup_unfreeze: path=/p").is_some());
        assert!(parse_who_line("garbage").is_none());
        assert!(parse_who_line("x-1 [000] ..... 5.1: signal_generate: sig=19").is_none());
    }

    #[test]
    #[ignore = "needs root (tracefs): make test runs it, make check does not"]
    fn traces_our_own_faults_when_root() {
        assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (tracefs)");
        let t = Tracer::start(std::process::id() as i32).expect("root can trace");
        let from = crate::clock::mono_ns();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        let to = crate::clock::mono_ns();
        let ev = t.read(&[], from, to).unwrap();
        assert!(
            ev.iter().any(|e| matches!(e, TraceEvent::PageFault { .. })),
            "touching 64 MB faults"
        );
        let dir = t.dir.clone();
        drop(t);
        assert!(!dir.exists(), "the instance is removed");
    }

    #[test]
    fn owners_from_instance_names() {
        assert_eq!(owner_of("stallscope-4242-77"), Some(77));
        assert_eq!(owner_of("stallscope-4242-77.who"), Some(77));
        assert_eq!(owner_of("stallscope-4242-77.x"), None);
        assert_eq!(owner_of("stallscope-4242"), None);
        assert_eq!(owner_of("stallscope-x-77"), None);
        assert_eq!(owner_of("other-1-2"), None);
    }

    /// An instance whose owner died (a child that exited stands in for one SIGKILLed) is
    /// removed by the next start, events off first; a live owner's is left alone.
    #[test]
    #[ignore = "needs root (tracefs): make test runs it, make check does not"]
    fn orphaned_instances_are_swept_when_root() {
        assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (tracefs)");
        let root = tracefs().expect("root has tracefs");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let orphan = root.join("instances").join(format!("{PREFIX}1-{dead}"));
        std::fs::create_dir(&orphan).unwrap();
        std::fs::write(orphan.join("events").join(EVENTS[0]).join("enable"), "1").unwrap();
        // A target of its own: the other test traces this process, under the same name.
        let mut target = std::process::Command::new("sleep").arg("10").spawn().unwrap();
        let live = Tracer::start(target.id() as i32).expect("root can trace");
        assert!(!orphan.exists(), "the dead owner's instance is swept");
        assert!(live.dir().exists());
        assert_eq!(sweep_orphans(&root), 0, "our own, live, is kept");
        assert!(live.dir().exists());
        drop(live);
        let _ = target.kill();
        let _ = target.wait();
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn any_line_is_an_event_or_none_never_a_panic(l in ".{0,200}") {
                let _ = parse_who_line(&l);
                let _ = parse_line(&l);
            }
        }
    }
}
