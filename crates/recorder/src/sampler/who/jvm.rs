//! `who`'s looks at the JVM itself in a stall: where its safepoint stands, the VM operation
//! and who asked for it, the attach clients, whether it is stopped and by which signal.

use super::*;
use crate::to_disk::ToDisk;
use procwatch::vmops::SafepointState;

impl Looker {
    /// Where the safepoint stands, written when it changed: whether the world is stopped yet.
    pub(super) fn safepoint_state(&mut self, stall: u32, state: Option<SafepointState>) {
        let Some(state) = state else { return };
        let Some(open) = self.open.as_mut() else { return };
        if open.last_sync == Some(state) {
            return;
        }
        open.last_sync = Some(state);
        self.line(&Who::Safepoint { t: mono_ns(), stall, state: state.id().into() });
    }

    /// Whether the GC locker holds a collection back, written when it changed (the first look
    /// of a stall writes it only when it is set).
    pub(super) fn gc_locker(&mut self, stall: u32, held_back: Option<bool>) {
        let Some(held_back) = held_back else { return };
        let Some(open) = self.open.as_mut() else { return };
        let first = open.last_gc_locker.is_none();
        if open.last_gc_locker == Some(held_back) {
            return;
        }
        open.last_gc_locker = Some(held_back);
        // Not set at the stall's first look: nothing to say (a line a stall costs a writer's
        // wake-up, and nearly every stall has none).
        if first && !held_back {
            return;
        }
        self.line(&Who::GcLocker { t: mono_ns(), stall, held_back });
    }

    pub(super) fn vm_operation(&mut self, stall: u32, op: VmOperation) {
        let key = (op.class.clone(), op.caller.as_ref().map(|c| c.tid));
        let Some(open) = self.open.as_mut() else { return };
        let changed = open.last_op.as_ref() != Some(&key);
        if changed {
            // The caller's name, read once an operation (every look while it runs needs it).
            open.last_caller_comm =
                op.caller.as_ref().map(|c| comm(self.pid, c.tid)).unwrap_or_default();
        }
        let caller_comm = open.last_caller_comm.clone();
        let attach = op.caller.as_ref().is_some_and(|c| {
            !c.vm_thread && c.frames.is_empty() && caller_comm == "Attach Listener"
        });
        let quit = op.caller.is_some() && caller_comm == "Signal Dispatch";
        if changed {
            open.last_op = Some(key);
            let caller = op.caller.map(|c| WhoThread {
                comm: caller_comm,
                tid: c.tid,
                class: c.class,
                vm_thread: c.vm_thread,
                frames: c.frames,
                native: c.native,
            });
            let w = Who::VmOperation { t: mono_ns(), stall, op: op.class, caller };
            self.line(&w);
        }
        if attach {
            self.attach_clients(stall);
        }
        if quit && changed {
            // A thread dump asked for by SIGQUIT: its sender, long before the stall perhaps
            // (the dispatcher waits for a safepoint held by another to end).
            self.signals_from(mono_ns().saturating_sub(QUIT_BEFORE_NS), mono_ns());
        }
    }

    /// The processes at the other end of the attach listener, once found in a stall.
    pub(super) fn attach_clients(&mut self, stall: u32) {
        let Some(open) = self.open.as_mut() else { return };
        if open.attach_found || open.attach_tries >= ATTACH_TRIES {
            return;
        }
        open.attach_tries += 1;
        let pid = self.pid;
        match procwatch::attachers::clients(pid) {
            Ok(clients) => {
                for c in clients {
                    let Some(p) = c.process else { continue };
                    if let Some(o) = self.open.as_mut() {
                        o.attach_found = true;
                    }
                    let asked =
                        procwatch::attachers::asked(&p.cmdline, &[pid, procwatch::ns::nspid(pid)]);
                    let w = Who::AttachClient { t: mono_ns(), stall, client: p.to_disk(), asked };
                    self.line(&w);
                }
            }
            Err(e) => self.note(
                stall,
                format!("who is at the other end of the attach listener cannot be looked up: {e}"),
            ),
        }
    }

    /// The process's state, tracer and freezer, written when it is stopped or frozen and that
    /// changed; the senders of signals then, while they may still be there to be named.
    pub(super) fn stop_state(&mut self, stall: u32) {
        let Some((state, tracer)) =
            procwatch::task::state_and_tracer_via(self.pid, Some(&self.kept))
        else {
            return;
        };
        let pid = self.pid;
        let Some(open) = self.open.as_mut() else { return };
        // Kept for the stall once read (a failed read is tried again at the next look).
        if open.cgroups.is_none() {
            open.cgroups = procwatch::procfile::read(format!("/proc/{pid}/cgroup")).ok();
            // Moved to other cgroups: the old groups' files are closed, not kept.
            if open.cgroups.is_some() && open.cgroups != self.kept_for {
                self.kept_for.clone_from(&open.cgroups);
                self.kept = procwatch::procfile::Kept::default();
            }
        }
        let Some(open) = self.open.as_ref() else { return };
        let text = open.cgroups.as_deref().unwrap_or_default();
        let frozen = procwatch::cgroup::frozen_in_via(text, &self.mounts, Some(&self.kept));
        let stopped = matches!(state, 'T' | 't') || tracer > 0;
        if !stopped && frozen.is_none() {
            // Running again after a stop or freeze this stall: when it ended.
            if self.open.as_mut().is_some_and(|o| o.last_stop.take().is_some()) {
                self.line(&Who::Resumed { t: mono_ns(), stall });
            }
            return;
        }
        let key = (state, tracer, frozen.as_ref().map(|f| f.path.clone()));
        let Some(open) = self.open.as_mut() else { return };
        if open.last_stop.as_ref() == Some(&key) {
            return;
        }
        open.last_stop = Some(key);
        open.saw_stop = true;
        let freezer = frozen.map(|f| Freezer {
            version: match f.version {
                procwatch::cgroup::Version::V1 => "v1".into(),
                procwatch::cgroup::Version::V2 => "v2".into(),
            },
            container: procwatch::process::container_of(&f.path),
            cgroup: f.path,
            state: f.state,
        });
        let tracer =
            (tracer > 0).then(|| self.describer.describe(tracer)).flatten().map(ToDisk::to_disk);
        self.line(&Who::Stopped { t: mono_ns(), stall, state, tracer, freezer });
        self.signals(mono_ns());
    }

    /// Signals sent to the process, and cgroup freezes written, from before the stall to `to`,
    /// each written once (root only: the tracepoints).
    pub(super) fn signals(&mut self, to: u64) {
        let Some(open) = self.open.as_ref() else { return };
        self.signals_from(open.t.saturating_sub(SIGNALS_BEFORE_NS), to);
    }

    /// [`Self::signals`] between `from` and `to`.
    pub(super) fn signals_from(&mut self, from: u64, to: u64) {
        let (Some(reader), Some(open)) = (self.signals.as_ref(), self.open.as_ref()) else {
            return;
        };
        let stall = open.stall;
        let Ok(events) = reader.read(from, to) else { return };
        let tids: HashSet<i32> = std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
            .unwrap_or_default();
        let groups = procwatch::cgroup::of(self.pid);
        let own: Vec<String> =
            [groups.unified, groups.cpu].into_iter().flatten().map(|g| g.path).collect();
        for e in events {
            match e {
                procwatch::trace::WhoEvent::Signal {
                    t,
                    sender_tid,
                    sender_comm,
                    sig,
                    target,
                    ..
                } => {
                    if target != self.pid && !tids.contains(&target) {
                        continue;
                    }
                    let Some(o) = self.open.as_mut() else { return };
                    if !o.signals_seen.insert((t, sender_tid, sig)) {
                        continue;
                    }
                    let sender = sender_of(&mut self.describer, sender_tid, &sender_comm);
                    self.line(&Who::Signal { t, stall, sig, target, sender });
                }
                procwatch::trace::WhoEvent::Freeze { t, writer_tid, writer_comm, path, frozen } => {
                    // The target's own cgroup, or one above it.
                    let ours = own.iter().any(|g| {
                        g == &path || g.starts_with(&format!("{}/", path.trim_end_matches('/')))
                    });
                    let Some(o) = self.open.as_mut() else { return };
                    if !ours || !o.signals_seen.insert((t, writer_tid, -1)) {
                        continue;
                    }
                    let writer = sender_of(&mut self.describer, writer_tid, &writer_comm);
                    self.line(&Who::FreezeWritten { t, stall, cgroup: path, frozen, writer });
                }
            }
        }
    }
}
