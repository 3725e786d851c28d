//! The commands that turn a result into output: each takes its parsed arguments, runs the
//! pieces (the recorder, the lab, the log analysis, the doctor), and renders what they return
//! with `output`. The pieces never print results themselves.

pub mod attach;
pub mod counters;
pub mod inject;
pub mod jfr_chunks;
pub mod jvms;
pub mod lab;
pub mod logs;
pub mod report;
pub mod run;
pub mod watch;
pub mod workload;

/// Registers SIGINT, SIGTERM and SIGHUP to set the returned flag instead of killing us, so the
/// command can undo what it did: the signal handling of `run`, `attach`, `watch`, `lab` and the
/// injectors, handed to the libraries as a flag.
pub fn stop_flag() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(sig, std::sync::Arc::clone(&stop))?;
    }
    Ok(stop)
}
