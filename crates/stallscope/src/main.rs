//! stallscope: find out why a JVM stopped. The binary is the command line and nothing else:
//! it parses the arguments (cli.rs, every option), runs the command (commands/, each one a
//! call into the crate that does the job: the `recorder`, the `fleet`, the `lab`, the `logs`
//! analysis, the `doctor`), prints the result (output/, the only code that prints) and turns an
//! error into a message and an exit code (failure.rs).
//!
//! Depends on every crate of the workspace but the stacks agent; nothing depends on it.

// Its docs are built with --document-private-items (make lint): module docs may name the
// private constants their invariants are about.
#![allow(rustdoc::private_intra_doc_links)]

use clap::Parser;

mod cli;
mod commands;
mod failure;
mod output;

/// Runs one command, as `stallscope` does with its command line: the exit code on success (for
/// `run`, the JVM's own), or the error [`failure::exit_code`] maps to one.
fn run(command: cli::Command) -> anyhow::Result<i32> {
    match command {
        cli::Command::Logs(a) => commands::logs::run(a),
        cli::Command::Inject(c) => commands::inject::run(c),
        cli::Command::Workload(c) => commands::workload::run(c),
        cli::Command::Guard => guard::run_guardian(&|line| eprintln!("{line}")),
        cli::Command::JfrChunks { file, samples, flight } => {
            commands::jfr_chunks::run(&file, samples.as_deref(), flight)
        }
        cli::Command::Run(a) => commands::run::run(a),
        cli::Command::Attach(a) => commands::attach::attach(a),
        cli::Command::Report(a) => commands::report::run(a),
        cli::Command::Jvms(a) => commands::jvms::run(a),
        cli::Command::Counters(a) => commands::counters::run(a),
        cli::Command::Watch(a) => commands::watch::run(a),
        cli::Command::Lab(cli::LabCommand::List(a)) => commands::lab::list(a),
        cli::Command::Lab(cli::LabCommand::Run(a)) => commands::lab::run(a),
        cli::Command::Lab(cli::LabCommand::Compare(a)) => commands::lab::compare(a),
    }
}

fn main() {
    // Behave like other Unix filters when the reader goes away (`stallscope logs … | head`).
    // SAFETY: resetting a signal disposition to its default before any threads start.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Four files held open per sampled thread: a 1,024 soft limit is 256 threads (issue 58).
    procwatch::limits::raise_open_files();
    let r = run(cli::Cli::parse().command);
    // An attach still waiting for a JVM that never answered (held at a safepoint, stopped)
    // leaves no trigger file behind (issue 58).
    hotspot_attach::remove_triggers();
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(failure::exit_code(&e));
        }
    }
}
