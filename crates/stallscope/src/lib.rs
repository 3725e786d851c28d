//! stallscope as a library: the recorder, the lab, `watch`, the log analysis and the outputs
//! behind the `stallscope` binary, for the binary's thin `main.rs` and for tests that drive
//! the pieces directly. The recording format is the `recording` crate's and the diagnosis the
//! `doctor` crate's.
//!
//! [`run`] runs one parsed command line and returns the process's exit code.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

pub mod attach;
pub mod cli;
pub mod commands;
pub mod failure;
pub mod fleet;
pub mod guard;
pub mod inject;
pub mod jfr;
pub mod lab;
pub mod logs;
pub mod output;
pub mod record;
pub mod workload;

/// Runs one command, as `stallscope` does with its command line: the exit code on success (for
/// `run`, the JVM's own), or the error [`failure::exit_code`] maps to one.
pub fn run(command: cli::Command) -> anyhow::Result<i32> {
    match command {
        cli::Command::Logs(a) => commands::logs::run(a),
        cli::Command::Inject(c) => inject::run(c),
        cli::Command::Workload(c) => workload::run(c),
        cli::Command::Guard => guard::run_guardian(),
        cli::Command::JfrChunks { file, samples } => jfr::reader_main(&file, samples.as_deref()),
        cli::Command::Run(a) => commands::record::run(a),
        cli::Command::Attach(a) => commands::record::attach(a),
        cli::Command::Report(a) => commands::report::run(a),
        cli::Command::Jvms(a) => commands::jvms::run(a),
        cli::Command::Counters(a) => commands::counters::run(a),
        cli::Command::Watch(a) => commands::watch::run(a),
        cli::Command::Lab(cli::LabCommand::List(a)) => commands::lab::list(a),
        cli::Command::Lab(cli::LabCommand::Run(a)) => commands::lab::run(a),
        cli::Command::Lab(cli::LabCommand::Compare(a)) => commands::lab::compare(a),
    }
}

/// This executable, to start its own helpers (the guardian, slowfs, the JFR reader) as child
/// processes: `/proc/self/exe`, which a child's exec resolves to the very file running, even
/// after it was replaced or removed (a package upgrade, a rebuild) while a long `watch` or
/// `lab run` was going; `current_exe()`'s path would then name nothing, or a newer binary.
/// Measured: a lab whose binary was rebuilt mid-run could start no guardian for the rest of it.
pub fn own_exe() -> anyhow::Result<std::path::PathBuf> {
    let proc = std::path::PathBuf::from("/proc/self/exe");
    if proc.exists() {
        return Ok(proc);
    }
    use anyhow::Context;
    std::env::current_exe().context("finding stallscope's own executable")
}
