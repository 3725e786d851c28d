//! What `attach` changes in a running JVM, as values. Each setup step registers its undo with
//! the guardian, makes its change, and keeps it as a [`Change`] beside the guardian's token;
//! [`Attachment::detach`] (or dropping it) undoes them in reverse order and leaves the JVM as it
//! was found.
//!
//! Invariant: a change is made only once the guardian holds its undo; a change the JVM refused
//! is forgotten by the guardian at once; a change made is undone here while the JVM runs and is
//! forgotten by the guardian only then (or once the JVM is gone). A JVM that stops answering
//! keeps its tokens: the guardian undoes what is left when stallscope exits.

use super::{Settings, frames, jfr_repository, staging};
use anyhow::{Context, Result};
use guard::{Guard, Token, Undo};
use hotspot_attach::Jvm;
use recording::files;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One change made to the JVM.
enum Change {
    /// The agent's jar staged in the JVM's own /tmp (a JVM in another mount namespace), where the
    /// JVM also writes its logs until they are copied out.
    Staged(staging::Staging),
    /// The agent loaded from `jar`, as the JVM names it; stopped by loading it again with `stop`.
    Agent { jar: PathBuf },
    /// Safepoint logging on, into `output` (`file=…`, as the JVM names it).
    Logging { output: String },
    /// `JFR.start` asked on a thread of its own: its answer says whether a recording started.
    Flight(JoinHandle<Result<String>>),
}

/// The changes made to one JVM, in the order they were made.
pub struct Attachment {
    s: Settings,
    jvm: Jvm,
    guard: Guard,
    made: Vec<(Change, Token)>,
}

impl Attachment {
    /// An attachment to `jvm` with nothing changed yet, and its guardian.
    pub fn new(s: &Settings, jvm: &Jvm) -> Result<Attachment> {
        Ok(Attachment { s: s.clone(), jvm: jvm.clone(), guard: Guard::start()?, made: Vec::new() })
    }

    /// Registers `undo` with the guardian, then makes the change; a change that fails is
    /// forgotten by the guardian and not kept.
    fn make(&mut self, undo: Undo, change: impl FnOnce(&mut Self) -> Result<Change>) -> Result<()> {
        let token = self.guard.add(undo)?;
        match change(self) {
            Ok(c) => {
                self.made.push((c, token));
                Ok(())
            }
            Err(e) => {
                self.guard.forget(token);
                Err(e)
            }
        }
    }

    /// Where the JVM writes the recording's logs and reads the agent's jar, as it names them:
    /// the recording directory and the jar themselves, or for a JVM in a container (which sees
    /// neither) copies staged in its own /tmp, the logs copied out at detach.
    pub fn stage(&mut self) -> Result<(PathBuf, PathBuf)> {
        let pid = self.jvm.pid;
        let jar = std::fs::canonicalize(&self.s.jar)
            .with_context(|| format!("{}: the agent jar is not there", self.s.jar.display()))?;
        if !procwatch::ns::other_mount_ns(pid) {
            return Ok((self.s.dir.clone(), jar));
        }
        // Its removal registered before it exists: a kill in between leaves nothing.
        let name = staging::fresh_name();
        let starttime = procwatch::task::process_starttime(pid)
            .with_context(|| format!("JVM pid {pid}: gone"))?;
        let token = self.guard.add(Undo::RemoveDir {
            path: staging::reached(pid, &name),
            pid,
            starttime,
        })?;
        // A staging half made is left to the guardian (its token kept): it removes the
        // directory once stallscope is done.
        let mut st = staging::Staging::make(pid, &name)?;
        st.fill(self.jvm.uid, self.jvm.gid, &jar)?;
        let named = (st.inside.clone(), st.jar());
        self.made.push((Change::Staged(st), token));
        Ok(named)
    }

    /// Loads the agent from `jar` (as the JVM names it), logging its hiccups into `jvm_dir`.
    pub fn load_agent(&mut self, jar: &Path, jvm_dir: &Path) -> Result<()> {
        let pid = self.jvm.pid;
        let undo = Undo::JvmCommand {
            pid,
            command: "load".into(),
            args: vec!["instrument".into(), "false".into(), format!("{}=stop", jar.display())],
        };
        // A note left by an earlier attach that died before reading it would be taken for this
        // one's.
        let _ = procwatch::heartbeat::take_failure_note(pid);
        let resolution =
            self.s.resolution_ns.map(|r| format!(",resolution={}us", r / 1000)).unwrap_or_default();
        let options =
            format!("log={}/{},interval=1s{resolution}", jvm_dir.display(), files::HICCUPS);
        self.make(undo, |a| {
            // Refused (no attach socket, the agent failed to start): nothing to undo.
            a.jvm.load_agent(jar, &options)?;
            // The agent starts inside the load command: when it could not, its note is there
            // now, with the reason the JVM's stderr got (a recording directory the JVM cannot
            // write).
            if let Some(why) = procwatch::heartbeat::take_failure_note(pid) {
                return Err(anyhow::anyhow!("the stallscope agent did not start inside it: {why}; give --out a directory the JVM's user (uid {}) can reach and write",
                        a.jvm.uid));
            }
            Ok(Change::Agent { jar: jar.to_path_buf() })
        })
    }

    /// Switches the JVM's safepoint logging on, into `jvm_dir`.
    pub fn log_safepoints(&mut self, jvm_dir: &Path) -> Result<()> {
        let output = format!("file={}/{}", jvm_dir.display(), files::SAFEPOINT_LOG);
        let undo = Undo::JvmCommand {
            pid: self.jvm.pid,
            command: "jcmd".into(),
            args: vec![format!("VM.log output={output} what=all=off")],
        };
        self.make(undo, |a| {
            a.jvm.jcmd(&format!("VM.log output={output} output_options=filecount=0 what=safepoint*=debug decorators=uptime,timenanos,level,tags"))?;
            Ok(Change::Logging { output })
        })
    }

    /// Asks the JVM for a flight recording of its threads' stacks into `jvm_dir`, ended (and
    /// written) at detach; a JDK without a flight recorder is noted in the recording instead.
    /// Not asked of a staged JVM: JFR keeps a repository in the JVM's own /tmp until it exits,
    /// which would be left behind in its container.
    pub fn record_stacks(&mut self, jvm_dir: &Path) -> Result<()> {
        if self.made.iter().any(|(c, _)| matches!(c, Change::Staged(_))) {
            let _ = frames::note(
                &self.s.dir,
                "no stacks: not yet for a JVM in a container (JFR would leave its repository in the container's /tmp)",
            );
            return Ok(());
        }
        if !frames::has_jfr(self.jvm.java_home.as_deref()) {
            self.s.notices.warn(format!("JVM pid {}: {}", self.jvm.pid, frames::NO_JFR));
            frames::note(&self.s.dir, frames::NO_JFR)?;
            return Ok(());
        }
        frames::write_settings(&self.s.dir)?;
        let undo = Undo::JvmCommand {
            pid: self.jvm.pid,
            command: "jcmd".into(),
            args: vec![frames::jcmd_stop()],
        };
        let (jvm, line) = (self.jvm.clone(), frames::jcmd_start(jvm_dir));
        self.make(undo, |_| Ok(Change::Flight(std::thread::spawn(move || jvm.jcmd(&line)))))
    }

    /// Whether a flight recording was asked for (thread dumps then join it for long stalls).
    pub fn stacks_asked(&self) -> bool {
        self.made.iter().any(|(c, _)| matches!(c, Change::Flight(_)))
    }

    /// Leaves the JVM as it was found: every change undone, the newest first.
    pub fn detach(self) {
        drop(self);
    }

    fn undo(&mut self) {
        let pid = self.jvm.pid;
        let running = || Path::new(&format!("/proc/{pid}")).exists();
        // The JVM's thread ids as the host numbers them, while it is still there to ask.
        let (host_tids, in_container) =
            (procwatch::ns::host_tids(pid), procwatch::ns::other_pid_ns(pid));
        let mut flight = false;
        while let Some((change, token)) = self.made.pop() {
            match change {
                Change::Flight(started) => {
                    let said = match started.join() {
                        Ok(Ok(out)) if out.contains("Started recording") => None,
                        Ok(Ok(out)) => Some(out.trim().to_string()),
                        Ok(Err(e)) => {
                            // Unanswered (a JVM held by a loop): the JVM may still start the
                            // recording once it is free, and keep it until it exits. The stop
                            // queued behind it ends it then.
                            if running() {
                                self.stop_unanswered();
                            }
                            Some(format!("{e:#}"))
                        }
                        Err(_) => Some("the attach thread failed".to_string()),
                    };
                    match said {
                        None => {
                            flight = true;
                            if running() {
                                match self.jvm.jcmd(&frames::jcmd_stop()) {
                                    // Its repository, which a JVM killed later would leave.
                                    Ok(_) => {
                                        if let Err(e) = jfr_repository::remove_after_stop(&self.jvm)
                                        {
                                            self.s.notices.warn(format!(
                                                "detaching: the flight recorder's repository was left: {e:#}"
                                            ));
                                        }
                                    }
                                    Err(e) => self.s.notices.warn(format!("detaching: {e:#}")),
                                }
                            }
                        }
                        Some(said) => {
                            let text = format!("no stacks: JFR.start failed: {said}");
                            self.s.notices.warn(format!("JVM pid {pid}: {text}"));
                            let _ = frames::note(&self.s.dir, &text);
                        }
                    }
                    self.guard.forget(token);
                }
                Change::Logging { output } => {
                    if running()
                        && let Err(e) =
                            self.jvm.jcmd(&format!("VM.log output={output} what=all=off"))
                    {
                        self.s.notices.warn(format!("detaching: {e:#}"));
                    }
                    self.guard.forget(token);
                }
                Change::Agent { jar } => {
                    if running()
                        && let Err(e) = self.jvm.load_agent(&jar, "stop")
                    {
                        self.s.notices.warn(format!("detaching: {e:#}"));
                    }
                    self.guard.forget(token);
                }
                Change::Staged(st) => {
                    // The stopped agent finishes its hiccup log, then removes its heartbeat:
                    // wait for that.
                    let hb = procwatch::heartbeat::default_path(pid);
                    let t0 = Instant::now();
                    while hb.exists() && t0.elapsed() < Duration::from_secs(2) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let (removed, problem) =
                        st.finish(&self.s.dir, &[files::SAFEPOINT_LOG, files::HICCUPS]);
                    if removed {
                        self.guard.forget(token);
                    }
                    if let Some(p) = problem {
                        self.s.notices.warn(p);
                    }
                }
            }
        }
        if flight {
            // In a container, a thread the JVM numbers is only known on the host while the JVM
            // runs; after it exited, its stacks cannot be placed and are left out.
            frames::extract_or_note(
                &self.s.dir,
                &|t| {
                    if in_container && host_tids.is_empty() {
                        0
                    } else {
                        procwatch::ns::host_tid(&host_tids, t as i32)
                    }
                },
                &self.s.notices,
            );
        }
    }
}

impl Attachment {
    /// Asks the JVM to stop stallscope's recording without waiting more than a moment for its
    /// answer: the JVM that did not answer the start may not answer this either until it is
    /// free, and then runs the two in turn (the request is in its socket by then).
    fn stop_unanswered(&self) {
        let (jvm, (tx, rx)) = (self.jvm.clone(), std::sync::mpsc::channel());
        std::thread::spawn(move || {
            let _ = tx.send(jvm.jcmd(&frames::jcmd_stop()));
        });
        let _ = rx.recv_timeout(Duration::from_secs(2));
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.undo();
    }
}
