//! `stallscope inject …`: each of the lab's fault injectors alone, as a command: its options
//! from cli.rs, its progress on stderr, its result as one JSON line (or the text asked for) on
//! stdout.

use crate::cli::{
    CpuHogArgs, EvictArgs, FreezeArgs, InjectCommand, ResidentArgs, SlowfsArgs, SlowfsSetArgs,
    ThrottleArgs,
};
use anyhow::{Context, Result};
use lab::inject::temp_cgroup::{TempCgroup, block_device};
use lab::inject::{cpuhog, freeze, slowfs};
use procwatch::pagecache;
use recording::units::fmt_ns;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub fn run(cmd: InjectCommand) -> Result<i32> {
    match cmd {
        InjectCommand::Slowfs(a) => slowfs_run(a),
        InjectCommand::SlowfsSet(a) => slowfs_set(a),
        InjectCommand::Evict(a) => evict(a),
        InjectCommand::Resident(a) => resident(a),
        InjectCommand::Throttle(a) => throttle(a),
        InjectCommand::CpuHog(a) => cpu_hog(a),
        InjectCommand::Freeze(a) => freeze_for(a),
    }
}

/// Mounts, says how it is set and how to change it, serves until `--for` or a signal, and says
/// what it served.
fn slowfs_run(a: SlowfsArgs) -> Result<i32> {
    let o = slowfs::Options {
        backing: a.backing,
        mount: a.mount,
        read_delay_ns: a.read_delay.ns(),
        write_delay_ns: a.write_delay.ns(),
        jitter_ns: a.jitter.ns(),
        glob: a.glob,
        error_rate: a.error_rate,
        max_delay_ns: a.max_delay.ns(),
        threads: a.threads,
        allow_other: a.allow_other,
    };
    let run_for = a.run_for.map(|d| d.ns());
    // A signal from here on unmounts (the mount is made after the handlers are in place).
    let stop = super::stop_flag()?;
    let fs = slowfs::Slowfs::mount(&o, &crate::output::notices())?;
    let s = fs.settings();
    eprintln!(
        "slowfs: {} mirrors {}; reads of '{}' delayed {}, writes {} (jitter {}), error rate {}, max delay {}",
        fs.mount_point().display(),
        fs.backing().display(),
        o.glob,
        fmt_ns(s.read_delay_ns.load(Ordering::Relaxed)),
        fmt_ns(s.write_delay_ns.load(Ordering::Relaxed)),
        fmt_ns(s.jitter_ns.load(Ordering::Relaxed)),
        o.error_rate,
        fmt_ns(o.max_delay_ns)
    );
    eprintln!(
        "slowfs: change settings live with `stallscope inject slowfs-set {} --read-delay 5s`; {}",
        fs.mount_point().display(),
        match run_for {
            Some(d) => format!("unmounts after {}", fmt_ns(d)),
            None => "Ctrl-C unmounts".to_string(),
        }
    );
    fs.serve(run_for.map(Duration::from_nanos), &stop);
    let mount = fs.mount_point().to_path_buf();
    let served = fs.unmount()?;
    eprintln!(
        "slowfs: unmounted {} after {}; {} reads, {} delayed ({} in all), {} failed with EIO",
        mount.display(),
        fmt_ns(served.elapsed.as_nanos() as u64),
        served.reads,
        served.delayed,
        fmt_ns(served.delayed_ns),
        served.failed
    );
    Ok(0)
}

fn slowfs_set(a: SlowfsSetArgs) -> Result<i32> {
    let changes = slowfs::Changes {
        read_delay_ns: a.read_delay.map(|d| d.ns()),
        write_delay_ns: a.write_delay.map(|d| d.ns()),
        jitter_ns: a.jitter.map(|d| d.ns()),
        error_rate: a.error_rate,
        glob: a.glob,
    };
    print!("{}", slowfs::set(&a.mount, &changes)?);
    Ok(0)
}

fn evict(a: EvictArgs) -> Result<i32> {
    for f in &a.files {
        pagecache::evict(f).with_context(|| format!("{}: cannot evict it", f.display()))?;
        let r = pagecache::residency(f)
            .with_context(|| format!("{}: cannot read its residency", f.display()))?;
        println!(
            "{}: evicted; {}/{} pages resident now",
            f.display(),
            r.resident_pages,
            r.total_pages
        );
    }
    Ok(0)
}

fn resident(a: ResidentArgs) -> Result<i32> {
    for f in &a.files {
        let r = pagecache::residency(f)
            .with_context(|| format!("{}: cannot read its residency", f.display()))?;
        if a.json {
            println!(
                "{}",
                serde_json::json!({"file": f, "resident_pages": r.resident_pages, "total_pages": r.total_pages, "page_size": r.page_size, "percent": r.percent()})
            );
        } else {
            println!(
                "{}: {}/{} pages resident ({:.1}%)",
                f.display(),
                r.resident_pages,
                r.total_pages,
                r.percent()
            );
        }
    }
    Ok(0)
}

/// Runs the command in a cgroup whose reads from the device are throttled; its exit code is
/// ours.
fn throttle(a: ThrottleArgs) -> Result<i32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow::anyhow!("throttle needs root to create a cgroup; run it with sudo"));
    }
    let (program, args) = a.command.split_first().context("no command given after --")?;
    let cwd = std::env::current_dir()?;
    let dev = block_device(a.device.as_deref(), &cwd)?;
    // A guardian removes the cgroup, and ends the command in it, if throttle is killed outright.
    let guard = std::sync::Arc::new(std::sync::Mutex::new(guard::Guard::start()?));
    let cg = TempCgroup::io_throttled(dev, a.riops)?.guarded(guard)?;
    eprintln!(
        "throttle: reads from {}:{} limited to {} IOPS in cgroup {} ({:?})",
        dev.0,
        dev.1,
        a.riops,
        cg.path.display(),
        cg.version
    );
    let procs = std::ffi::CString::new(cg.procs_file().as_os_str().as_encoded_bytes())?;
    let stop = super::stop_flag()?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    procwatch::limits::give_back(&mut cmd);
    // SAFETY: between fork and exec only async-signal-safe calls, and no allocation.
    unsafe {
        cmd.pre_exec(move || recorder::join_cgroup(&procs));
    }
    let mut child = cmd.spawn().with_context(|| format!("starting {program}"))?;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(Ordering::Relaxed) {
            // SAFETY: plain kill of our child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(cg);
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

fn cpu_hog(a: CpuHogArgs) -> Result<i32> {
    let dur = a.run_for.ns();
    let stop = super::stop_flag()?;
    eprintln!(
        "cpu-hog: {} threads{} for {}",
        a.threads,
        a.nice.map(|n| format!(" at nice {n}")).unwrap_or_default(),
        fmt_ns(dur)
    );
    let started = Instant::now();
    let work = cpuhog::spin(
        a.threads,
        a.nice,
        Duration::from_nanos(dur),
        &stop,
        &crate::output::notices(),
    )?;
    println!(
        "{}",
        serde_json::json!({"injector": "cpu-hog", "threads": a.threads, "nice": a.nice, "elapsed_ns": started.elapsed().as_nanos() as u64, "work_units": work})
    );
    Ok(0)
}

fn freeze_for(a: FreezeArgs) -> Result<i32> {
    let dur = a.run_for.ns();
    let stop = super::stop_flag()?;
    let stopped = freeze::freeze(a.pid, Duration::from_nanos(dur), &stop)?;
    println!(
        "{}",
        serde_json::json!({"injector": "freeze", "pid": a.pid, "requested_ns": dur, "stopped_ns": stopped.as_nanos() as u64, "state_after": freeze::process_state(a.pid).map(String::from)})
    );
    eprintln!("freeze: pid {} stopped for {}", a.pid, fmt_ns(stopped.as_nanos() as u64));
    Ok(0)
}
