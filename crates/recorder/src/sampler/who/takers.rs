//! `who`'s looks at everyone else in a stall: who took the CPUs and did the storage I/O while
//! the JVM's threads waited, from every process's `/proc` (or the BPF tally) at the stall's
//! start and end.

use super::*;
use crate::to_disk::ToDisk;

impl Looker {
    /// Every process (and the target's threads' storage use) looked at, at the first look after
    /// somebody waited for a CPU (or memory) and again at the first after somebody waited for
    /// storage (or memory), where the stall's first look did not: who took them is counted
    /// from then.
    pub(super) fn look_at_takers(&mut self) {
        let pid = self.pid;
        let Some(open) = self.open.as_mut() else { return };
        let Some(at_begin) = open.pressure else { return };
        let counted = open.counted.is_some();
        let missing = Wants { cpu: open.cpu.is_none() && !counted, io: open.io.is_none() };
        if !missing.any() {
            return;
        }
        let Some(now) = Pressure::now_of(!counted) else { return };
        let storage = open.storage;
        // Storage first seen waited for now: if the machine was short of it as the stall began,
        // counted from now.
        let waited = at_begin.waited_by(now, storage);
        let busy = at_begin.busy(storage);
        let due =
            Wants { cpu: missing.cpu && waited.cpu, io: missing.io && (waited.io || busy.io) };
        if !due.any() {
            return;
        }
        let b = look_at_all(mono_ns(), due.io);
        if due.io {
            open.io = Some((b.clone(), procwatch::cpuuse::thread_io(pid)));
        }
        // Every look reads the CPU time: one missing is taken with it.
        if open.cpu.is_none() && !counted {
            open.cpu = Some(b);
        }
    }

    /// Who took the CPUs and storage between the stall's first looks at every process and `to`.
    pub(super) fn use_to(&mut self, to: u64) {
        self.cpu_counted(to);
        let Some(open) = self.open.as_ref() else { return };
        if open.cpu.is_none() || open.io.is_none() {
            // Nobody waited at any look: nobody took the CPUs or storage from the target. Said
            // when somebody did wait, but only after the last look.
            let stall = open.stall;
            let counted = open.counted.is_some();
            let missed = open.pressure.zip(Pressure::now_of(!counted)).is_some_and(|(b, now)| {
                let w = b.waited_by(now, open.storage);
                (w.cpu && open.cpu.is_none() && !counted) || (w.io && open.io.is_none())
            });
            if missed {
                self.note(stall, "who took the CPUs or storage is looked at from the first look after some task waited for a CPU, storage or memory (unless the machine was contended as the stall began); a stall ended before that look, and its takers are not known".into());
            }
        }
        let Some(open) = self.open.as_ref() else { return };
        // Counted from a look taken after the end was sent (the end waited in the channel
        // behind that look): no window to count in.
        let cpu_from = open.cpu.as_ref().map(|b| b.from).filter(|f| *f < to);
        let io_from = open.io.as_ref().map(|(b, _)| b.from).filter(|f| *f < to);
        if cpu_from.is_none() && io_from.is_none() {
            return;
        }
        let with_io = io_from.is_some();
        let after = look_at_all(to, with_io);
        if cpu_from.is_some() {
            self.cpu_use(&after.procs, to);
        }
        if io_from.is_some() {
            self.io_use(&after.procs, to);
        }
        self.last_look = Some((after, with_io));
    }

    /// Counting every process's CPU time from now, with the BPF recorder; said once when it
    /// cannot.
    pub(super) fn count_cpu(
        &mut self,
        stall: u32,
    ) -> Option<(offcpu::Counting, offcpu::TallyLook)> {
        match self.tally.as_ref()?.count() {
            Ok(c) => {
                let first = c.look();
                Some((c, first))
            }
            Err(e) => {
                self.note(stall, format!("{e}; who took the CPUs is read from /proc instead"));
                None
            }
        }
    }

    /// Who took the CPUs since the stall's first look, as the BPF recorder counted them: a
    /// process that ended in between (the program saw its main thread exit) counts at its
    /// parent, as its children's time.
    pub(super) fn cpu_counted(&mut self, to: u64) {
        let Some((counting, first)) = self.open.as_ref().and_then(|o| o.counted.as_ref()) else {
            return;
        };
        // Counted from a look taken after the stall ended (its begin waited behind other work):
        // no window of the stall to count in.
        if first.at >= to {
            return;
        }
        let now = counting.look();
        let mut by_pid: std::collections::HashMap<i32, Use> = Default::default();
        for p in offcpu::tally_taken(first, &now) {
            let (pid, child) =
                if p.ended && p.ptgid > 1 { (p.ptgid, true) } else { (p.tgid, false) };
            let u = by_pid.entry(pid).or_insert_with(|| Use { pid, ..Default::default() });
            if child {
                u.children_ns += p.ns;
            } else {
                u.own_ns += p.ns;
                u.comm = p.comm;
            }
        }
        let mut uses: Vec<Use> = by_pid.into_values().collect();
        uses.sort_by_key(|u| (std::cmp::Reverse(u.own_ns + u.children_ns), u.pid));
        self.cpu_line(first.at, now.at, uses, "bpf");
    }

    /// Who took the CPUs between the stall's first look at every process and `to`, when every
    /// process was read again (`after`).
    pub(super) fn cpu_use(&mut self, after: &[procwatch::cpuuse::ProcCpu], to: u64) {
        let Some(open) = self.open.as_ref() else { return };
        let Some(before) = open.cpu.as_ref() else { return };
        let from = before.from;
        let tick = 1_000_000_000 / procwatch::task::clock_ticks().max(1);
        let uses = procwatch::cpuuse::taken(&before.procs, after)
            .into_iter()
            .map(|t| Use {
                pid: t.pid,
                comm: t.comm,
                own_ns: t.ticks * tick,
                children_ns: t.child_ticks * tick,
            })
            .collect();
        self.cpu_line(from, to, uses, "proc");
    }

    /// The `cpu-use` line for what each process ran between `from` and `to` (`uses`, the most
    /// first), counted so (`bpf`, `proc`).
    pub(super) fn cpu_line(&mut self, from: u64, to: u64, uses: Vec<Use>, counted: &str) {
        let Some(stall) = self.open.as_ref().map(|o| o.stall) else { return };
        let me = std::process::id() as i32;
        let described_ns = to.saturating_sub(from) * self.cpus as u64 * DESCRIBED_PERCENT / 100;
        let (mut target_ns, mut others_ns, mut takers) = (0, 0, Vec::new());
        for u in uses {
            let ns = u.own_ns + u.children_ns;
            if u.pid == self.pid {
                target_ns += ns;
                continue;
            }
            if u.pid == me {
                continue;
            }
            others_ns += ns;
            if takers.len() < MAX_TAKERS {
                let p = (ns >= described_ns).then(|| self.describer.describe(u.pid)).flatten();
                takers.push(CpuTaker {
                    pid: u.pid,
                    comm: p.as_ref().map_or(u.comm, |p| p.comm.clone()),
                    cpu_ns: u.own_ns,
                    children_ns: u.children_ns,
                    named: p.map(crate::to_disk::named).unwrap_or_default(),
                });
            }
        }
        let w = Who::CpuUse {
            stall,
            from,
            to,
            cpus: self.cpus,
            target_ns,
            others_ns,
            takers,
            counted: counted.into(),
        };
        self.line(&w);
    }

    /// Who read or wrote storage between the stall's first look and `to`: the target's own
    /// threads, and other processes (`after` is every process's snapshot at `to`).
    pub(super) fn io_use(&mut self, after: &[procwatch::cpuuse::ProcCpu], to: u64) {
        let Some(open) = self.open.as_ref() else { return };
        let me = std::process::id() as i32;
        let mut takers: Vec<IoTaker> = Vec::new();
        let Some((before, threads)) = open.io.as_ref() else { return };
        for (tid, comm, r, w) in procwatch::cpuuse::thread_io(self.pid) {
            let Some((_, _, r0, w0)) = threads.iter().find(|x| x.0 == tid) else { continue };
            let (read_bytes, write_bytes) = (r.saturating_sub(*r0), w.saturating_sub(*w0));
            if read_bytes + write_bytes >= MIN_IO_BYTES {
                takers.push(io_taker(self.pid, Some(tid), comm, read_bytes, write_bytes));
            }
        }
        for t in procwatch::cpuuse::taken(&before.procs, after) {
            let Some((read_bytes, write_bytes)) = t.io else { continue };
            if t.pid == self.pid || t.pid == me || read_bytes + write_bytes < MIN_IO_BYTES {
                continue;
            }
            takers.push(io_taker(t.pid, None, t.comm, read_bytes, write_bytes));
        }
        if takers.is_empty() {
            return;
        }
        takers.sort_by_key(|t| std::cmp::Reverse(t.read_bytes + t.write_bytes));
        takers.truncate(MAX_IO);
        for t in takers.iter_mut().filter(|t| t.tid.is_none()) {
            if let Some(p) = self.describer.describe(t.pid) {
                t.comm = p.comm.clone();
                t.named = crate::to_disk::named(p);
            }
        }
        let w = Who::IoUse { stall: open.stall, from: before.from, to, takers };
        self.line(&w);
    }
}

/// Every process's CPU time now, and its storage I/O `with_io`; `t` says when.
pub(super) fn look_at_all(t: u64, with_io: bool) -> Baseline {
    Baseline { from: t, procs: std::rc::Rc::new(procwatch::cpuuse::snapshot(with_io)) }
}

/// A thread or process that read and wrote so much, not yet described.
pub(super) fn io_taker(
    pid: i32,
    tid: Option<i32>,
    comm: String,
    read_bytes: u64,
    write_bytes: u64,
) -> IoTaker {
    IoTaker { pid, tid, comm, read_bytes, write_bytes, named: recording::Named::default() }
}

/// A thread's `comm` in process `pid` (empty when gone).
pub(super) fn comm(pid: i32, tid: i32) -> String {
    procwatch::procfile::read(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|c| c.trim_end().to_string())
        .unwrap_or_default()
}

/// The process of the thread that acted, named while it is there: its thread still has the
/// name the trace gave it, before and after it is described (not a later process with its id,
/// nor the program it has since exec'd: a shell's `kill -3 $P; sleep 1` is `sleep` a moment
/// later); else only what the trace said.
pub(super) fn sender_of(d: &mut procwatch::process::Describer, tid: i32, comm: &str) -> WhoProcess {
    let named = || {
        procwatch::procfile::read(format!("/proc/{tid}/comm")).is_ok_and(|c| c.trim_end() == comm)
    };
    let traced = WhoProcess { pid: tid, comm: comm.to_string(), ..Default::default() };
    if !named() {
        return traced;
    }
    let tgid: Option<i32> = procwatch::procfile::read(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Tgid:"))?.trim().parse().ok());
    let Some(tgid) = tgid else { return traced };
    match d.describe(tgid) {
        Some(p) if named() && (tgid != tid || p.comm == comm || comm == "exe") => p.to_disk(),
        _ => WhoProcess { pid: tgid, ..traced },
    }
}
