//! Undo that survives SIGKILL. Whatever stallscope changes outside itself (a swap file turned on,
//! a cgroup made, a JVM's threads reniced, a process stopped, a JVM's logging switched on) is
//! registered with a guardian: a small process of its own (`stallscope guard`, hidden) that holds
//! the read end of a pipe from its owner. When the owner undoes a change itself, it tells the
//! guardian to forget it; when the owner dies by any means, SIGKILL included, the pipe closes and
//! the guardian undoes what is left, newest first.
//!
//! A guardian killed together with its owner leaves its pending undos in a [`journal`] on disk;
//! the next stallscope that changes the machine (or `stallscope undo`) undoes them as it starts
//! ([`replay_orphans`]).
//!
//! Invariant: the guardian outlives its owner by the time the undo takes, and no longer; it
//! ignores the terminal's signals (Ctrl-C reaches the owner, which cleans up itself), and every
//! undo step is one that is harmless when already done. An undo replayed from a journal is made
//! only while what it names is the same (a thread or process by its start time), never on a
//! reused pid.
//!
//! Depends on the attach protocol (to switch a JVM's logging off) and procwatch; every crate
//! that changes the machine depends on it.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod journal;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// One change to undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "undo", rename_all = "kebab-case")]
pub enum Undo {
    /// Turn a swap file off, then remove it.
    Swapoff { path: PathBuf },
    /// Kill what is left in a cgroup (it held only what we put there), then remove it.
    RemoveCgroup { dir: PathBuf },
    /// Put a thread back at its nice value and scheduling policy.
    Reschedule { tid: i32, nice: i32, policy: i32, rt_priority: i32 },
    /// Put any thread of `pid` still at the boosted level (`boosted_nice`, or SCHED_FIFO when
    /// `None`) at the process's own nice value and policy: threads the JVM started while
    /// boosted inherited the boost, and no per-thread change names them.
    Unboost { pid: i32, boosted_nice: Option<i32>, nice: i32, policy: i32, rt_priority: i32 },
    /// Continue a process we stopped.
    Continue { pid: i32 },
    /// Detach a mount.
    Unmount { path: PathBuf },
    /// Remove a file (a heartbeat, a trigger file).
    RemoveFile { path: PathBuf },
    /// Remove a directory of ours and what is in it (the agent staged in a container's /tmp,
    /// reached through `/proc/<pid>/root`): only while `pid` is still the process that started at
    /// `starttime` (clock ticks since boot), so a reused pid's root is never touched.
    RemoveDir { path: PathBuf, pid: i32, starttime: u64 },
    /// Switch a tracefs instance of ours off and remove it (tracepoint evidence).
    RemoveTraceInstance { dir: PathBuf },
    /// Send a JVM attach-protocol command (switch its logging off, stop the agent).
    JvmCommand { pid: i32, command: String, args: Vec<String> },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Message {
    Add { id: u64, change: Undo },
    Forget { id: u64 },
}

/// The owner's side: registers changes with its guardian.
pub struct Guard {
    child: Child,
    pipe: Option<ChildStdin>,
    next: u64,
}

/// A registered change; hand it back to [`Guard::forget`] once undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token(u64);

impl Guard {
    /// Starts a guardian (this executable, `guard`).
    pub fn start() -> Result<Guard> {
        let me = procwatch::process::own_exe()
            .context("finding stallscope's own executable for its guardian")?;
        let mut cmd = Command::new(me);
        cmd.arg("guard").stdin(Stdio::piped()).stdout(Stdio::null());
        // SAFETY: getpid has no preconditions.
        if let Some(o) = journal::Proc::of(unsafe { libc::getpid() }) {
            cmd.env(OWNER_ENV, format!("{}:{}", o.pid, o.starttime));
        }
        // Its own process group: Ctrl-C in a terminal reaches the owner, not the guardian.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child =
            cmd.spawn().context("starting the guardian that undoes changes if stallscope dies")?;
        let pipe = child.stdin.take();
        Ok(Guard { child, pipe, next: 1 })
    }

    fn send(&mut self, m: &Message) -> Result<()> {
        let mut line = serde_json::to_vec(m)?;
        line.push(b'\n');
        self.write(&line)
    }

    fn write(&mut self, lines: &[u8]) -> Result<()> {
        let pipe = self.pipe.as_mut().context("the guardian is gone")?;
        pipe.write_all(lines).context("telling the guardian")?;
        pipe.flush()?;
        Ok(())
    }

    /// Registers a change made (or about to be made): undone if this process dies first.
    pub fn add(&mut self, change: Undo) -> Result<Token> {
        let id = self.next;
        self.next += 1;
        self.send(&Message::Add { id, change })?;
        Ok(Token(id))
    }

    /// The owner undid the change itself.
    pub fn forget(&mut self, t: Token) {
        let _ = self.send(&Message::Forget { id: t.0 });
    }

    /// Registers several changes in one write (one system call, one wake-up of the guardian).
    pub fn add_all(&mut self, changes: Vec<Undo>) -> Result<Vec<Token>> {
        let mut lines = Vec::new();
        let mut tokens = Vec::with_capacity(changes.len());
        for change in changes {
            let id = self.next;
            self.next += 1;
            serde_json::to_writer(&mut lines, &Message::Add { id, change })?;
            lines.push(b'\n');
            tokens.push(Token(id));
        }
        self.write(&lines)?;
        Ok(tokens)
    }

    /// [`Guard::forget`] for several, in one write.
    pub fn forget_all(&mut self, tokens: Vec<Token>) {
        if tokens.is_empty() {
            return;
        }
        let mut lines = Vec::new();
        for t in tokens {
            if serde_json::to_writer(&mut lines, &Message::Forget { id: t.0 }).is_err() {
                return;
            }
            lines.push(b'\n');
        }
        let _ = self.write(&lines);
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Closing the pipe ends the guardian: it undoes whatever was not forgotten.
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

/// How [`Guard::start`] tells its guardian who its owner is (`PID:STARTTIME`).
const OWNER_ENV: &str = "STALLSCOPE_GUARD_OWNER";

/// A change pending in a guardian's journal, with what it acts on where that is a process or a
/// thread (by start time, so that a replay never acts on a reused pid).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pending {
    change: Undo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on: Option<journal::Proc>,
}

impl Pending {
    fn of(change: Undo) -> Pending {
        let on = match &change {
            Undo::Reschedule { tid: p, .. }
            | Undo::Unboost { pid: p, .. }
            | Undo::Continue { pid: p }
            | Undo::JvmCommand { pid: p, .. } => journal::Proc::of(*p),
            _ => None,
        };
        Pending { change, on }
    }
}

/// The guardian: reads changes until its owner closes the pipe (or dies), then undoes the ones
/// left, newest first. `stallscope guard`, started by [`Guard::start`]; what it could not do goes
/// to `say`, one line each. What is pending is kept in its [`journal`] too, written once the
/// owner's lines of a moment are read.
pub fn run_guardian(say: &dyn Fn(String)) -> Result<i32> {
    // SAFETY: ignoring the terminal's signals in this process only.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
    let owner = std::env::var(OWNER_ENV).ok().and_then(|v| {
        let (pid, start) = v.split_once(':')?;
        Some(journal::Proc { pid: pid.parse().ok()?, starttime: start.parse().ok()? })
    });
    let mut book = journal::Journal::of_this_guardian(owner);
    let mut pending: Vec<(u64, Pending)> = Vec::new();
    let mut input = std::io::BufReader::new(std::io::stdin().lock());
    let mut changed = false;
    loop {
        let mut line = String::new();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = line.trim_end();
        match serde_json::from_str::<Message>(line) {
            Ok(Message::Add { id, change }) => {
                pending.push((id, Pending::of(change)));
                changed = true;
            }
            Ok(Message::Forget { id }) => {
                pending.retain(|(i, _)| *i != id);
                changed = true;
            }
            Err(e) => say(format!("stallscope guard: ignoring '{line}': {e}")),
        }
        // The owner's lines of a moment (one batch, a boost's threads) make one write.
        if changed && input.buffer().is_empty() {
            if let Some(b) = book.as_mut() {
                b.keep(&pending.iter().map(|(_, p)| p).collect::<Vec<_>>());
            }
            changed = false;
        }
    }
    for (_, p) in pending.into_iter().rev() {
        if let Err(e) = undo(&p.change) {
            say(format!("stallscope guard: could not undo {:?}: {e:#}", p.change));
        }
    }
    if let Some(b) = book.as_mut() {
        b.remove();
    }
    Ok(0)
}

/// Undoes what guardians killed together with their owners left in their journals (each once
/// both are gone), newest first; says each change undone, and returns how many there were.
pub fn replay_orphans(say: &dyn Fn(String)) -> usize {
    let Some(dir) = journal::dir() else { return 0 };
    let mut n = 0;
    for o in journal::orphans::<Pending>(&dir) {
        let by =
            o.owner.map(|p| format!("stallscope pid {}", p.pid)).unwrap_or("a stallscope".into());
        for p in o.pending.iter().rev() {
            // A thread or process that is no more (or a pid reused since) needs nothing.
            if p.on.is_some_and(|on| !on.runs()) {
                continue;
            }
            n += 1;
            match undo(&p.change) {
                Ok(()) => say(format!(
                    "undid what {by} left when it was killed with its guardian: {}",
                    describe(&p.change)
                )),
                Err(e) => say(format!(
                    "could not undo what {by} left when it was killed with its guardian ({}): {e:#}",
                    describe(&p.change)
                )),
            }
        }
        o.done();
    }
    n
}

/// A change in words, for a user told it was undone.
pub fn describe(change: &Undo) -> String {
    match change {
        Undo::Swapoff { path } => format!("swap file {} turned off and removed", path.display()),
        Undo::RemoveCgroup { dir } => {
            format!("cgroup {} removed (and what still ran in it killed)", dir.display())
        }
        Undo::Reschedule { tid, nice, .. } => format!("thread {tid} put back at nice {nice}"),
        Undo::Unboost { pid, nice, .. } => {
            format!("the threads of pid {pid} still raised put back at nice {nice}")
        }
        Undo::Continue { pid } => format!("pid {pid} continued (SIGCONT)"),
        Undo::Unmount { path } => format!("{} unmounted", path.display()),
        Undo::RemoveFile { path } => format!("{} removed", path.display()),
        Undo::RemoveDir { path, .. } => format!("directory {} removed", path.display()),
        Undo::RemoveTraceInstance { dir } => format!("trace instance {} removed", dir.display()),
        Undo::JvmCommand { pid, command, args } => {
            format!("JVM pid {pid} told `{command} {}`", args.join(" "))
        }
    }
}

/// Undoes one change. Each is harmless when already undone.
pub fn undo(change: &Undo) -> Result<()> {
    match change {
        Undo::Swapoff { path } => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
            // SAFETY: a valid C string; EINVAL when it is not on (already off) is fine.
            unsafe { libc::swapoff(c.as_ptr()) };
            let _ = std::fs::remove_file(path);
        }
        Undo::RemoveCgroup { dir } => kill_and_remove(dir)?,
        Undo::Reschedule { tid, nice, policy, rt_priority } => {
            reschedule(*tid, *nice, *policy, *rt_priority)
        }
        Undo::Unboost { pid, boosted_nice, nice, policy, rt_priority } => {
            unboost_born(*pid, *boosted_nice, *nice, *policy, *rt_priority, &[], true)
        }
        Undo::Continue { pid } => {
            // SAFETY: a plain signal.
            unsafe { libc::kill(*pid, libc::SIGCONT) };
        }
        Undo::Unmount { path } => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())?;
            // SAFETY: a valid C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                let _ =
                    Command::new("fusermount3").args(["-u", "-z", "-q", "--"]).arg(path).status();
            }
        }
        Undo::RemoveFile { path } => {
            let _ = std::fs::remove_file(path);
        }
        Undo::RemoveDir { path, pid, starttime } => {
            // Never through a link planted in its place (remove_dir_all does not follow them).
            let same = procwatch::task::process_starttime(*pid) == Some(*starttime);
            if same && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                let _ = std::fs::remove_dir_all(path);
            }
        }
        Undo::RemoveTraceInstance { dir } => {
            // The guardian hears of its owner's death when the pipe closes, and a dying process
            // closes its descriptors in order: a file of the instance still open for a moment
            // makes the removal fail (EBUSY). Seen in CI: an attach killed 6 ms in, while it
            // set the instance up, left it behind. So it is tried again for a while.
            let t0 = std::time::Instant::now();
            loop {
                procwatch::trace::remove_instance(dir);
                if !dir.is_dir() || t0.elapsed() > std::time::Duration::from_secs(3) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        Undo::JvmCommand { pid, command, args } => {
            if Path::new(&format!("/proc/{pid}")).exists() {
                let jvm = hotspot_attach::Jvm::find(*pid)?;
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                jvm.execute(command, &a)?;
            }
        }
    }
    Ok(())
}

/// Puts the threads of `pid` other than `skip` that are still at the boosted level back at
/// (`nice`, `policy`, `rt_priority`). See [`Undo::Unboost`].
///
/// One pass is not enough: a thread born boosted can start another (HotSpot adds compiler and GC
/// threads from its own threads) between the listing of the tasks and its own restore, and the
/// newcomer inherits the boost. So passes repeat until one finds nothing boosted; with `settle`
/// (the guardian, which has time) a last pass 20 ms later must confirm it. (The kill test found
/// such a thread left at nice -10 in CI.) Without it (the live restore, inside the recorder's
/// watch loop, which must not sleep) the passes run back to back.
pub fn unboost_born(
    pid: i32,
    boosted_nice: Option<i32>,
    nice: i32,
    policy: i32,
    rt_priority: i32,
    skip: &[i32],
    settle: bool,
) {
    let mut quiet_passes = 0;
    for _ in 0..50 {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
        let mut restored = 0;
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else {
                continue;
            };
            if skip.contains(&tid) {
                continue;
            }
            let boosted = match boosted_nice {
                Some(n) => nice_of(tid) == Some(n),
                // SAFETY: a plain query of another thread's policy.
                None => (unsafe { libc::sched_getscheduler(tid) }) == libc::SCHED_FIFO,
            };
            if boosted {
                reschedule(tid, nice, policy, rt_priority);
                restored += 1;
            }
        }
        quiet_passes = if restored == 0 { quiet_passes + 1 } else { 0 };
        if quiet_passes == if settle { 2 } else { 1 } {
            return;
        }
        if settle {
            std::thread::sleep(std::time::Duration::from_millis(if restored == 0 {
                20
            } else {
                1
            }));
        }
    }
}

/// Thread `tid`'s nice value, if it can be read.
pub fn nice_of(tid: i32) -> Option<i32> {
    // SAFETY: getpriority reports errors through errno, which we reset first (-1 can be a value).
    unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t);
        (*libc::__errno_location() == 0).then_some(n)
    }
}

/// Puts thread `tid` at (`nice`, `policy`, `rt_priority`); a thread gone meanwhile fails
/// harmlessly.
pub fn reschedule(tid: i32, nice: i32, policy: i32, rt_priority: i32) {
    let param = libc::sched_param { sched_priority: rt_priority };
    // SAFETY: setting another thread's scheduling attributes; errors are returned, not raised.
    unsafe {
        libc::sched_setscheduler(tid, policy, &param);
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
}

/// Kills whatever is left in a cgroup (it held only what stallscope put there) and removes it;
/// nothing when it is gone already.
fn kill_and_remove(dir: &Path) -> Result<()> {
    for _ in 0..100 {
        if !dir.exists() || std::fs::remove_dir(dir).is_ok() {
            return Ok(());
        }
        for pid in std::fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|p| p.trim().parse::<i32>().ok())
        {
            // SAFETY: a plain signal to a process of a cgroup stallscope made.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Err(anyhow::anyhow!("could not remove cgroup {}; remove it with rmdir", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Message::Add {
            id: 3,
            change: Undo::Reschedule { tid: 7, nice: 0, policy: 0, rt_priority: 0 },
        };
        let text = serde_json::to_string(&m).unwrap();
        match serde_json::from_str::<Message>(&text).unwrap() {
            Message::Add { id: 3, change: Undo::Reschedule { tid: 7, .. } } => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_staging_directory_is_removed_only_while_its_process_is_the_same() {
        let me = std::process::id() as i32;
        let starttime = procwatch::task::process_starttime(me).unwrap();
        let dir = std::env::temp_dir().join(format!("stallscope-guard-staged-{me}"));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        // Another process behind the pid (its start time differs): left alone.
        undo(&Undo::RemoveDir { path: dir.clone(), pid: me, starttime: starttime + 1 }).unwrap();
        assert!(dir.exists());
        undo(&Undo::RemoveDir { path: dir.clone(), pid: me, starttime }).unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn undo_is_harmless_when_already_done() {
        let gone =
            std::env::temp_dir().join(format!("stallscope-guard-nothing-{}", std::process::id()));
        undo(&Undo::RemoveFile { path: gone.clone() }).unwrap();
        undo(&Undo::Swapoff { path: gone.clone() }).unwrap();
        undo(&Undo::RemoveCgroup { dir: gone }).unwrap();
    }
}
