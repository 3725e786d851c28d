//! stallscope: find out why a JVM stopped. This file only parses the command line and
//! dispatches; each command lives in `commands/` (or, for the injectors and the native
//! workloads, with what it runs).

mod attach;
mod cli;
mod commands;
mod failure;
mod fleet;
mod guard;
mod inject;
mod jfr;
mod lab;
mod logs;
mod output;
mod record;
mod workload;

use clap::Parser;

fn main() {
    // Behave like other Unix filters when the reader goes away (`stallscope logs … | head`).
    // SAFETY: resetting a signal disposition to its default before any threads start.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let result = match cli::Cli::parse().command {
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
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(failure::exit_code(&e));
        }
    }
}
