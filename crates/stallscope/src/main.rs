//! stallscope: find out why a JVM stopped. This file only parses the command line, runs the
//! command (`stallscope::run`, the library in lib.rs) and turns its error into a message and
//! an exit code.

use clap::Parser;
use stallscope::{cli, failure};

fn main() {
    // Behave like other Unix filters when the reader goes away (`stallscope logs … | head`).
    // SAFETY: resetting a signal disposition to its default before any threads start.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match stallscope::run(cli::Cli::parse().command) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(failure::exit_code(&e));
        }
    }
}
