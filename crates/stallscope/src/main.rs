//! stallscope: find out why a JVM stopped.

mod attach;
mod cli;
mod diagnose;
mod failure;
mod hlog;
mod inject;
mod inputs;
mod lab;
mod logs;
mod output;
mod record;
mod recording;
mod units;
mod workload;

use clap::Parser;

fn main() {
    // Behave like other Unix filters when the reader goes away (`stallscope logs … | head`).
    // SAFETY: resetting a signal disposition to its default before any threads start.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Logs(a) => logs::run(a),
        cli::Command::Inject(c) => inject::run(c),
        cli::Command::Workload(c) => workload::run(c),
        cli::Command::Run(a) => record::run(a),
        cli::Command::Attach(a) => record::attach(a),
        cli::Command::Report(a) => record::report(&a.dir, a.json, a.html.as_ref().map(|h| h.as_deref())),
        cli::Command::Lab(cli::LabCommand::List(a)) => lab::list(a),
        cli::Command::Lab(cli::LabCommand::Run(a)) => lab::run(a),
        cli::Command::Lab(cli::LabCommand::Compare(a)) => lab::compare(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(failure::exit_code(&e));
        }
    }
}
