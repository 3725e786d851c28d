//! How a stall's watcher starts: its sources opened and its first look taken, and the wait for
//! the agent's meter before it looks at anything else.

use super::*;

impl<'a> Watcher<'a> {
    pub(super) fn new(w: &'a mut Writer, what: Target<'a>) -> Result<Watcher<'a>> {
        let Target { pid, mut pulse, tracer, offcpu, opts, deadline, driven, code, hooks } = what;
        if let Some(slot) = driven.as_ref().and_then(|d| d.probes.clone()) {
            pulse.use_slot(slot);
        }
        let mut sampler = TaskSampler::new(pid)?;
        // With the kernel's events, a thread is read again only once it ran or was woken since
        // its last read: a frozen JVM, or one whose threads are parked through a stall, is not
        // polled (offcpu::Entries). Between a stall's first and last looks, a thread on a CPU
        // without a break since its last read is not read either (see stall.rs). Ids must
        // number threads as the kernel does.
        if let Some(entries) = offcpu.as_ref().and_then(offcpu::Reader::entries)
            && procwatch::ns::host_numbering()
        {
            let on = std::sync::Arc::clone(&entries);
            sampler.set_still(Box::new(move |pid, tid, since, asleep| {
                entries.still(pid, tid, since, asleep)
            }));
            sampler.set_on_cpu(Box::new(move |pid, tid, since| on.on_cpu_since(pid, tid, since)));
        }
        // A sidecar starved of CPU sees nothing of the starvation it is there to explain: when
        // allowed (root, CAP_SYS_NICE), this thread runs at nice -10. It sleeps between looks, so
        // it takes no more CPU than before, only gets it sooner.
        // SAFETY: setpriority on this thread's own tid; failure (EPERM) leaves it as it was.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10) };
        let control = Control::open(
            Some(&w.dir.join(files::CONTROL)),
            w.start_epoch_ms,
            w.start_mono_ns,
            1_000_000_000,
        )?;
        let sources = Sources::new(pid);
        let system = system_sample(mono_ns(), 0, true, &sources);
        let traces = tracer
            .map(|t| TraceWriter::start(t.reader(), &w.dir.join(files::TRACE), w.live.as_ref()))
            .transpose()?;
        // Not for `watch` (its one loop wakes every watcher) nor with --boost (which looks often).
        let watchdog =
            offcpu.as_ref().filter(|_| driven.is_none() && opts.boost.is_none()).and_then(|o| {
                let alarm = o.alarm().ok()?;
                Some(Watchdog { alarm, reader: o.clone(), armed: false, look_until: 0 })
            });
        // Not for `watch` (its one BPF recorder serves every JVM).
        let probe_reader = offcpu.clone().filter(|_| driven.is_none());
        let tally = offcpu.as_ref().and_then(offcpu::Reader::cpu_tally);
        let kwaits = offcpu
            .map(|o| KwaitsWriter::start(o, pid, &w.dir.join(files::KWAITS), w.live.as_ref()))
            .transpose()?;
        let contexts = ContextReader::start(pid)?;
        let who = Some(WhoWriter::start(
            pid,
            &w.dir.join(files::WHO),
            tracer.and_then(|t| t.who_reader()),
            tally,
            w.live.as_ref(),
        )?);
        let mut wt = Watcher {
            w,
            pid,
            pulse,
            traces,
            kwaits,
            contexts,
            who,
            opts,
            sampler,
            control,
            threads_file: None,
            sources,
            // A guardian only when boosting: it restores the threads if stallscope is killed.
            boost: if opts.boost.is_some() {
                crate::boost::Boost::guarded()?
            } else {
                crate::boost::Boost::default()
            },
            stall: 0,
            reads_from: procwatch::task::Reads::default(),
            idle: Idle { threads: Vec::new(), system, last: Instant::now() - 2 * IDLE_SAMPLE },
            last_alive_check: Instant::now(),
            held_after_ns: opts.threshold_ns.max(HELD_INTERVALS * opts.sample_interval_ns),
            driven,
            code,
            hooks,
            started: Instant::now(),
            handed: None,
            watchdog,
            probe_reader,
            deadline,
            roll_asked: None,
        };
        if wt.pulse.hb.is_some() {
            wt.meter_running()?;
        }
        Ok(wt)
    }

    /// The agent's meter drives the loop from now: say so, and read its thread table.
    pub(super) fn meter_running(&mut self) -> Result<()> {
        let Some((tid, resolution_ns)) = self.pulse.meter() else { return Ok(()) };
        // The agent names threads as the JVM's own pid namespace numbers them (a container's).
        let meter_tid =
            procwatch::ns::host_tid(&procwatch::ns::host_tids(self.pid), tid as i32) as u32;
        self.threads_file = self.pulse.hb.as_ref().map(|h| heartbeat::threads_path(&h.path));
        // The JVM's own safepoint probes, where the watchdog runs: its safepoints are found and
        // timed without the meter (which may then tick less often).
        // Wherever this recording has its own BPF recorder (not `watch`'s shared one, which
        // many JVMs share): with the watchdog they also wake the loop; without it the loop
        // looks once per threshold and finds them all the same.
        let probes = self.probe_reader.take().map(|r| {
            let lib = offcpu::libjvm_of(self.pid)
                .ok_or_else(|| format!("no libjvm.so in /proc/{}/maps", self.pid))?;
            r.watch_safepoints(self.pid, &lib, self.opts.threshold_ns)?;
            Ok::<_, String>(r)
        });
        let (safepoint_probes, probes_refused) = match probes {
            Some(Ok(r)) => {
                self.pulse.use_probes(r);
                (true, None)
            }
            Some(Err(why)) => (false, Some(why)),
            None => (false, None),
        };
        self.w.events.line(&Event::MeterRunning {
            t: mono_ns(),
            resolution_ns,
            meter_tid,
            safepoint_probes,
            probes_refused,
        })?;
        // A meter whose thread is not found here is not watched: the loop looks once per
        // threshold, as without the watchdog.
        if let Some(d) = self.watchdog.as_mut()
            && meter_tid > 0
        {
            let tick =
                self.pulse.hb.as_ref().and_then(|h| heartbeat::mapped_last_tick(self.pid, &h.path));
            d.reader.watch_meter(
                meter_tid,
                resolution_ns + self.opts.threshold_ns,
                tick.unwrap_or(0),
            );
            d.armed = true;
            // The alarm is set each time the meter goes to sleep from now: a meter already held
            // (a stall under way as watching began) sleeps no more, and would be noticed only
            // at the loop's next wake-up, up to 250 ms late (the lab saw 251 ms once). Looked
            // at as without the watchdog until a meter that went stale before arming would show.
            d.look_until = mono_ns() + resolution_ns + self.opts.threshold_ns;
        }
        Ok(())
    }
}
