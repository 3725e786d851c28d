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
    // What a stallscope killed together with its guardian left, first: a command that changes
    // the machine may be about to make the same changes (a swap file of the same name, a cgroup).
    if matches!(
        command,
        cli::Command::Inject(_)
            | cli::Command::Run(_)
            | cli::Command::Attach(_)
            | cli::Command::Watch(_)
            | cli::Command::Lab(cli::LabCommand::Run(_))
    ) {
        guard::replay_orphans(&|line| eprintln!("stallscope: {line}"));
    }
    match command {
        cli::Command::Logs(a) => commands::logs::run(a),
        cli::Command::Inject(c) => commands::inject::run(c),
        cli::Command::Workload(c) => commands::workload::run(c),
        cli::Command::Guard => guard::run_guardian(&|line| eprintln!("{line}")),
        cli::Command::Undo => {
            if guard::replay_orphans(&|line| println!("{line}")) == 0 {
                println!("nothing left behind by a stallscope killed with its guardian");
            }
            Ok(0)
        }
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

/// At most two malloc arenas, unless MALLOC_ARENA_MAX says otherwise. glibc gives each thread
/// that allocates an arena of its own, up to eight per CPU, and each keeps what it ever held:
/// `watch`, a thread per guarded JVM, grew 63 → 112 MiB in 3 minutes over six JVMs and still
/// grew; with two arenas 54 → 73 MiB, flat after 80 s (issue 58's soak: 90 → 172 MiB in 20
/// minutes). Set in the process, not its environment: the JVMs `run` starts keep theirs.
fn bound_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt takes a parameter and a value; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
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
    bound_malloc_arenas();
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
