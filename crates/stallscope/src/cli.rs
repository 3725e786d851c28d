//! The command line: every subcommand, option and help text, and nothing else.

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "stallscope",
    version,
    about = "Find out why a JVM stopped: which thread held the world, what the kernel was doing to it, and what fixes it.",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Analyse HotSpot safepoint logs, any format from JDK 8 to 25, in one pass.
    Logs(LogsArgs),
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Inputs can be plain or gzip-compressed; `-` reads stdin. Naming one file of a rotated set
(gc.log, gc.log.0, gc.log.1, …) reads the whole set in time order.

Exit codes: 0 ok, 1 failure, 2 usage, 3 empty input, 4 binary input, 5 no safepoint records.

Examples:
  stallscope logs gc.log
  stallscope logs --since 10m --until 20m --op G1CollectFull gc.log
  stallscope logs --json gc.log.gz | jq .total_stopped_ns
  java -Xlog:safepoint:stdout … | stallscope logs -")]
pub struct LogsArgs {
    /// Log files to read (`-` for stdin).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,

    /// Print the analysis as JSON (schema: docs/formats/logs-json.md).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,

    /// Print one CSV row per safepoint instead of the analysis.
    #[arg(long)]
    pub csv: bool,

    /// Only safepoints that began at or after this: an uptime (`90s`, `10m`) or a wall-clock
    /// time (`2024-01-31T10:00:00`, in the log's own time zone unless an offset is given).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,

    /// Only safepoints that began before this (same forms as --since).
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,

    /// Only this VM operation (repeatable; case-insensitive), e.g. `G1CollectFull`.
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,

    /// Only safepoints whose time to safepoint is at least this, e.g. `10ms`.
    #[arg(long, value_name = "DURATION")]
    pub min_ttsp: Option<String>,

    /// How many of the longest TTSPs to list.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,

    /// Length of the worst-window analysis.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub window: String,

    /// Read only the files named, not their rotation siblings.
    #[arg(long)]
    pub no_rotation: bool,

    /// Show the first lines that were not recognised, with file and line number.
    #[arg(short, long)]
    pub verbose: bool,
}
