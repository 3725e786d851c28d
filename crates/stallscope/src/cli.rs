//! The command line: every subcommand, option and help text, and nothing else. Options are
//! parsed into their types here (durations, enums, boost levels), so a command never sees a
//! string it must parse again. The libraries know no clap: where an option is one of a
//! library's enums, its mirror here (`…Arg`) converts to it.

use clap::{Args, Parser, Subcommand};
use lab::catalog::ScenarioId;
use recorder::boost::BoostLevel;
use recording::units::Duration;
use std::path::PathBuf;

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
    /// Make a pathology happen on demand: a slow disk, an evicted file, throttled I/O, CPU
    /// contention, a frozen process. Every injector undoes itself.
    #[command(subcommand)]
    Inject(InjectCommand),
    /// Launch a JVM with the agent and safepoint logging, watch it, and explain every stall. Any
    /// other program is run as given, its stalls its threads held by the kernel (root, BPF).
    Run(RunArgs),
    /// Watch a running JVM: explain a stall under way now from its perf counters and /proc,
    /// then record it (once the JVM answers, the attach protocol loads the agent and switches
    /// safepoint logging on; one that never answers is recorded from outside). A process that
    /// is not a JVM is watched through the kernel's events (root, BPF).
    Attach(AttachArgs),
    /// Print the diagnosis of a finished recording, exactly as the live run printed it; or
    /// write it as an HTML page (a lab directory too). Also explains a JDK flight recording
    /// (app.jfr) made without stallscope.
    Report(ReportArgs),
    /// List the JVMs on this host (in containers too), as `jcmd -l` does: pid, pid in its own
    /// namespace, user, JDK, main class or jar, container (its cgroup).
    Jvms(JvmsArgs),
    /// Print a JVM's perf counters (its hsperfdata), as `jstat -snap` does, without attaching.
    Counters(CountersArgs),
    /// Guard every JVM of this host (or those chosen), always on: watch each from outside as it
    /// starts (its perf counters and /proc; --attach puts the agent in), diagnose each stall as
    /// it ends, keep the evidence within a bound, and export metrics (OpenMetrics) and events
    /// (JSON lines).
    Watch(WatchArgs),
    /// Rerun each seed's experiment, baseline beside mitigation, and grade the doctor.
    #[command(subcommand)]
    Lab(LabCommand),
    /// Native workloads of the lab (see `stallscope lab`); each runs alone, prints a summary
    /// and one JSON line.
    #[command(subcommand, hide = true)]
    Workload(WorkloadCommand),
    /// Undo what a stallscope killed together with its guardian left on this machine (a swap
    /// file, a cgroup, a mount, raised threads, a JVM's logging), from the guardian's journal.
    /// Any stallscope that changes the machine does this first as it starts.
    Undo,
    /// The guardian that undoes stallscope's changes if it dies (started by stallscope itself).
    #[command(hide = true)]
    Guard,
    /// Reads a JFR file's chunks into safepoints, one JSON line per chunk (run by `logs` in a
    /// process of its own, which a damaged file cannot take down).
    #[command(hide = true)]
    JfrChunks {
        /// Stack samples of these threads (comma-separated os thread ids; empty: all) instead of
        /// safepoints.
        #[arg(long)]
        samples: Option<String>,
        /// What explains the stalls (`report app.jfr`), with the stack samples near operations
        /// and safepoints at least this many nanoseconds long.
        #[arg(long, conflicts_with = "samples")]
        flight: Option<i64>,
        file: std::path::PathBuf,
    },
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Inputs can be plain or gzip-compressed; `-` reads stdin. Naming one file of a rotated set
(gc.log, gc.log.0, gc.log.1, …) reads the whole set in time order. A JDK Flight Recorder file
(.jfr) is read for its safepoint events (docs/formats/jfr.md).

Exit codes: 0 ok, 1 failure, 2 usage, 3 empty input, 4 binary input, 5 no safepoint records.

Examples:
  stallscope logs gc.log
  stallscope logs --since 10m --until 20m --op G1CollectFull gc.log
  stallscope logs --json gc.log.gz | jq .total_stopped_ns
  java -Xlog:safepoint:stdout … | stallscope logs -
  stallscope logs app.jfr")]
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
    pub min_ttsp: Option<Duration>,

    /// How many of the longest TTSPs to list.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,

    /// Length of the worst-window analysis.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub window: Duration,

    /// Read only the files named, not their rotation siblings.
    #[arg(long)]
    pub no_rotation: bool,

    /// Threads that read a log file at once, 1 to 16 (default: the machine's cores, up to
    /// 4). The result is the same on any number; `--threads 1` leaves the other cores alone.
    #[arg(short = 'j', long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=16))]
    pub threads: Option<u16>,

    /// Show the first lines that were not recognised, with file and line number.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RecordOptions {
    /// The recording directory (default: ./stallscope-YYYYMMDD-HHMMSS).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A heartbeat late by this much is a stall.
    #[arg(long, default_value = "5ms", value_name = "DURATION")]
    pub threshold: Duration,
    /// How often every thread is sampled during a stall (2ms = 500 Hz).
    #[arg(long, default_value = "2ms", value_name = "DURATION")]
    pub sample_interval: Duration,
    /// The agent jar (default: found beside the binary or in the build tree).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Print the diagnosis as JSON (schema: docs/formats/report-json.md).
    #[arg(long)]
    pub json: bool,
    /// Do not take the culprits' Java stacks (docs/frames.md): culprits are then named without
    /// their code.
    #[arg(long)]
    pub no_frames: bool,
    /// Do not load the BPF off-CPU recorder (root only: each wait's kernel stack and waker);
    /// the /proc samples alone, as without root.
    #[arg(long)]
    pub no_bpf: bool,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
The JVM gets the stallscope agent (hiccup meter and heartbeat), -Xlog:safepoint*=debug with
the timenanos decorator, -XX:+SafepointTimeout at the stall threshold, and the stacks agent
(libstallscope_stacks.so), which takes the stack of each thread the recorder signals during a
stall and so names each culprit's code (unless --no-frames). Its stdout, stderr and exit code
pass through; Ctrl-C reaches it, then the recording is finished and diagnosed.

Example:
  stallscope run -- java -XX:+UseParallelGC -jar app.jar")]
pub struct RunArgs {
    #[command(flatten)]
    pub record: RecordOptions,
    /// The agent's meter resolution: its thread wakes this often to time the JVM's hiccups and
    /// tick its heartbeat. Default: 5ms as root with BPF when the JVM's libjvm.so has HotSpot's
    /// safepoint probes (every JDK 8-25 build looked at): the JVM's safepoints are then found
    /// and timed by its own probes, to the µs, whatever the meter saw; else 1ms (jHiccup's).
    /// Idle, 1ms costs about 1.5 times what jHiccup does on a small machine, 5ms about half
    /// (docs/overhead.md). At any resolution the hiccup log is corrected for coordinated
    /// omission, as jHiccup's is, but a pause shorter than the resolution may fall inside the
    /// meter's sleep and not be seen there, and one just past the threshold may read as up to
    /// one resolution shorter (a safepoint the recorder sees under way past the threshold is
    /// still a stall, by its probes); a stall that is not a safepoint is placed to within a
    /// resolution. --threshold must be at least this.
    #[arg(long, value_name = "DURATION")]
    pub resolution: Option<Duration>,
    /// Do not add -XX:+SafepointTimeout (it names the threads late to a safepoint).
    #[arg(long)]
    pub no_safepoint_timeout: bool,
    /// Take the stacks with a flight recording (frames.jfr, JDK 11+: opens in JDK Mission
    /// Control, holds the safepoint events; its start costs the JVM 0.5-0.9 s of CPU) and
    /// thread dumps, instead of the stacks agent.
    #[arg(long)]
    pub jfr: bool,
    /// While the JVM reaches and holds a safepoint, raise its threads (`nice:-10`, `fifo:1`),
    /// then restore them exactly: seed 003's priority boost, from outside. Needs CAP_SYS_NICE.
    #[arg(long, num_args = 0..=1, default_missing_value = "nice:-10", value_name = "LEVEL")]
    pub boost: Option<BoostLevel>,
    /// When to boost: `safepoint` (as the JVM's perf counters show one begin, looked at every
    /// --boost-poll) or `heartbeat` (once the agent's heartbeat is --boost-after stale).
    #[arg(long, value_enum, default_value = "safepoint", requires = "boost", value_name = "WHEN")]
    pub boost_on: BoostOnArg,
    /// With --boost-on safepoint: how often the counters are looked at. Each look wakes a
    /// real-time thread: shorter boosts sooner and costs more CPU (the report says how much).
    #[arg(long, default_value = "200us", value_name = "DURATION")]
    pub boost_poll: Duration,
    /// With --boost-on heartbeat: how stale the heartbeat must be before boosting.
    #[arg(long, default_value = "2ms", value_name = "DURATION")]
    pub boost_after: Duration,
    /// Put nothing into the JVM (no agent, no safepoint log, no flags): watch it through its
    /// perf counters (a safepoint begun and not ended) and /proc, as attach does a JVM that will
    /// not answer. Sees no hiccup outside a safepoint, and names no code.
    #[arg(long, conflicts_with_all = ["boost", "jfr", "no_safepoint_timeout"])]
    pub outside: bool,
    /// The java command line, after `--`.
    #[arg(last = true, required = true, value_name = "JAVA")]
    pub command: Vec<String>,
}

/// When `run --boost` raises the JVM's threads.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoostOnArg {
    Safepoint,
    Heartbeat,
}

#[derive(Args, Debug, Clone)]
pub struct AttachArgs {
    pub pid: i32,
    /// Detach after this long (default: at Ctrl-C or when the JVM exits).
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: Option<Duration>,
    #[command(flatten)]
    pub record: RecordOptions,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Read from the shared file every HotSpot JVM keeps with -XX:+UsePerfData (the default),
/tmp/hsperfdata_<user>/<pid>, reached through /proc/<pid>/root for a JVM in a container. A JVM
that is stopped or stuck in a safepoint answers too; nothing is sent to it.

Examples:
  stallscope counters 4242
  stallscope counters 4242 sun.rt.safepoint sun.gc.cause
  stallscope counters 4242 --json")]
pub struct CountersArgs {
    pub pid: i32,
    /// Only counters whose names start with one of these.
    #[arg(value_name = "PREFIX")]
    pub prefixes: Vec<String>,
    /// As one JSON object, name to value (stallscope.counters/1).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
A JVM is a process that maps libjvm.so; JVMs of other users are listed when run as root.

Examples:
  stallscope jvms
  stallscope jvms --match 'com\\.acme\\.|orders\\.jar' --json")]
pub struct JvmsArgs {
    /// Only JVMs whose main class, jar or command line matches this regular expression.
    #[arg(long = "match", value_name = "REGEX")]
    pub matches: Option<String>,
    /// As JSON (`schema` stallscope.jvms/1: the fields of each JVM, and the processes that
    /// could not be read).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Each JVM is watched from outside by one loop for the whole host (its perf counters and
/proc; nothing is put into it); --attach gives every JVM, or those that stall often, the agent
and safepoint logging as `attach` does. Recordings go under --out (one directory per JVM and
segment, which `stallscope report` reads). SIGTERM or Ctrl-C ends the watch (an attached JVM:
logging off, meter stopped); a JVM that exits is closed; one started later is watched. Metrics
and events are documented in docs/watch.md.

Examples:
  stallscope watch --all --metrics 127.0.0.1:9464
  stallscope watch --match 'orders\\.jar' --events /var/log/stallscope/events.jsonl
  stallscope watch 4242 4343 --out /var/lib/stallscope")]
pub struct WatchArgs {
    /// The JVMs to guard (default with none named: --all).
    #[arg(value_name = "PID", conflicts_with_all = ["all", "matches"])]
    pub pids: Vec<i32>,
    /// Every JVM this user may attach to (every JVM, as root).
    #[arg(long)]
    pub all: bool,
    /// Only JVMs whose main class, jar or command line matches this regular expression.
    #[arg(
        long = "match",
        value_name = "REGEX",
        conflicts_with = "all",
        allow_hyphen_values = true
    )]
    pub matches: Option<String>,
    /// Where the recordings go (default: $STATE_DIRECTORY under systemd, else ./stallscope-watch).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Serve OpenMetrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (off by default), and each
    /// stall's report beside them: /recordings/NAME/stalls/N (HTML; .json for JSON), which
    /// events and the metrics' exemplars link to.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// With --metrics, serve only /metrics, not the recordings' reports.
    #[arg(long, requires = "metrics")]
    pub no_reports: bool,
    /// Append one JSON line per diagnosed stall to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE|-")]
    pub events: Option<String>,
    /// Keep at most this much evidence on disk, e.g. 500M, 2G.
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    pub retain: String,
    /// Remove evidence older than this, e.g. 12h, 7d.
    #[arg(long, default_value = "7d", value_name = "DURATION")]
    pub retain_age: Duration,
    /// A safepoint open (or a heartbeat late) this long is a stall.
    #[arg(long, default_value = "5ms", value_name = "DURATION")]
    pub threshold: Duration,
    /// How often every thread of a stalled JVM is sampled: for a stall's first 2 s (as root
    /// with BPF, its first 10 ms: the kernel's events then give every wait exactly), then
    /// every 10 ms, and less often as it lasts.
    #[arg(long, default_value = "2ms", value_name = "DURATION")]
    pub sample_interval: Duration,
    /// Put the agent and safepoint logging into every JVM (`--attach`, or `--attach all`), or
    /// into those that stall more than N times within WINDOW (`--attach 3/10m`). By default
    /// nothing is put into any JVM: each is watched from outside, through its perf counters and
    /// /proc, from one loop for the whole host.
    #[arg(long, num_args = 0..=1, default_missing_value = "all", value_name = "all|N/WINDOW")]
    pub attach: Option<String>,
    /// How long an exited JVM's series stay in the metrics (a few scrape intervals), so that a
    /// JVM that stalls and exits between two scrapes still shows its stalls.
    #[arg(long, default_value = "1m", value_name = "DURATION")]
    pub keep_exited: Duration,
    /// Do not load the BPF off-CPU recorder (as root, one program for the host records each
    /// wait of the guarded JVMs' threads, its kernel stack and who woke it).
    #[arg(long)]
    pub no_bpf: bool,
    /// With --attach, the agents' meter resolution: each JVM's meter wakes this often (1ms,
    /// jHiccup's, costs each JVM a wake-up per millisecond; 5ms a fifth of that).
    #[arg(long, default_value = "1ms", value_name = "DURATION")]
    pub resolution: Duration,
    /// The agent jar (default: found beside the binary or in the build tree).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Stop after this long (default: at SIGTERM or Ctrl-C).
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: Option<Duration>,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A recording directory made by `run` or `attach`, a lab directory made by `lab run`, or a
    /// flight recording (`app.jfr`, `app.jfr.gz`, or a directory of JFR chunk files).
    pub dir: PathBuf,
    /// For a flight recording: a safepoint this long is a stall.
    #[arg(long, default_value = "20ms", value_name = "DURATION")]
    pub threshold: Duration,
    /// For a flight recording: the JVM's GC or safepoint log of the same run (plain or gzipped),
    /// for its time to safepoint and the threads SafepointTimeout named.
    #[arg(long, value_name = "FILE")]
    pub gc_log: Option<PathBuf>,
    /// The diagnosis as JSON.
    #[arg(long, conflicts_with = "html")]
    pub json: bool,
    /// Write a self-contained HTML report (default: DIR/report.html): timeline, percentiles,
    /// per-stall thread states, per-operation table; for a lab directory, box plots and verdicts.
    #[arg(long, value_name = "OUT.html", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
}

#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// The scenarios, each with its seed, variants and ground-truth cause.
    List(LabListArgs),
    /// Run scenarios (all by default), every variant repeated, each run recorded and diagnosed.
    Run(LabRunArgs),
    /// Compare two lab results (two kernels, two JDKs).
    Compare(LabCompareArgs),
}

#[derive(Args, Debug, Clone)]
pub struct LabListArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
The quick profile finishes each scenario in seconds (for tests and CI); the full profile keeps
the seeds' proportions, scaled to the machine. Results go to DIR/lab.json and DIR/summary.txt,
with one recording per run beside them (stallscope report DIR/<scenario>/<variant>-<n>).

Examples:
  stallscope lab run counted-loop --profile quick
  stallscope lab run --profile full --java /usr/lib/jvm/temurin-25-jdk-amd64/bin/java --out lab-jdk25")]
pub struct LabRunArgs {
    /// Scenarios to run (default: all).
    #[arg(value_name = "SCENARIO", value_parser = ScenarioId::parse)]
    pub scenarios: Vec<ScenarioId>,
    /// `quick` (seconds per run) or `full` (the seeds' proportions).
    #[arg(long, value_enum, default_value_t = ProfileArg::Quick)]
    pub profile: ProfileArg,
    /// Repetitions of each variant (default: 2 quick, 5 full).
    #[arg(long)]
    pub reps: Option<usize>,
    /// Run only these variants (repeatable, e.g. `--variant no-poll`); a scenario with none of
    /// them runs all of its own.
    #[arg(long = "variant", value_name = "VARIANT")]
    pub variants: Vec<String>,
    /// Where the results and recordings go (default: ./stallscope-lab-YYYYMMDD-HHMMSS).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The java to run the JVM workloads with (default: java on PATH).
    #[arg(long, value_name = "PATH")]
    pub java: Option<PathBuf>,
    /// Print lab.json instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Record each JVM from outside only, as `run --outside` does: nothing put into it, its
    /// perf counters and /proc read (grades the doctor on what it sees of a JVM that will not
    /// answer).
    #[arg(long)]
    pub outside: bool,
    /// Record without the BPF off-CPU recorder (the /proc samples alone): run it with and
    /// without to compare the doctor's answers.
    #[arg(long)]
    pub no_bpf: bool,
    /// Also write a self-contained HTML report of the lab run (default: OUT/lab.html).
    #[arg(long, value_name = "OUT.html", num_args = 0..=1)]
    pub html: Option<Option<PathBuf>>,
}

#[derive(Args, Debug, Clone)]
pub struct LabCompareArgs {
    /// A lab result directory (or its lab.json).
    pub a: PathBuf,
    pub b: PathBuf,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    fn parse(args: &[&str]) -> Result<Command, String> {
        let argv = std::iter::once("stallscope").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.command).map_err(|e| e.to_string())
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_its_options_and_the_java_command_after_the_dashes() {
        let c = parse(&["run", "--threshold", "10ms", "--jfr", "--", "java", "-jar", "app.jar"]);
        let Ok(Command::Run(a)) = c else { panic!("{c:?}") };
        assert_eq!(a.record.threshold.ns(), 10_000_000);
        assert_eq!(a.record.sample_interval.ns(), 2_000_000, "the default");
        assert!(a.jfr && !a.outside && !a.record.no_frames);
        assert_eq!(a.command, ["java", "-jar", "app.jar"]);
        assert!(parse(&["run", "--threshold", "10ms"]).is_err(), "no java command");
    }

    #[test]
    fn run_outside_refuses_what_needs_the_jvms_cooperation() {
        assert!(matches!(parse(&["run", "--outside", "--", "java"]), Ok(Command::Run(_))));
        for with in ["--jfr", "--boost", "--no-safepoint-timeout"] {
            let e = parse(&["run", "--outside", with, "--", "java"]).unwrap_err();
            assert!(e.contains("cannot be used with"), "{with}: {e}");
        }
    }

    #[test]
    fn a_duration_without_a_unit_is_refused_with_the_reason() {
        let e = parse(&["attach", "42", "--for", "5"]).unwrap_err();
        assert!(e.contains("has no unit"), "{e}");
        let Ok(Command::Attach(a)) = parse(&["attach", "42", "--for", "1.5s"]) else { panic!() };
        assert_eq!((a.pid, a.run_for.map(|d| d.ns())), (42, Some(1_500_000_000)));
    }
}

/// `stallscope inject …`: the fault injectors (the lab's `inject` module), each alone.
#[derive(Subcommand, Debug)]
pub enum InjectCommand {
    /// Mount a FUSE passthrough of BACKING at MOUNT whose reads (and mmap page-ins) are slow.
    Slowfs(SlowfsArgs),
    /// Change a mounted slowfs's settings without remounting; prints the settings.
    SlowfsSet(SlowfsSetArgs),
    /// Drop files from the page cache (posix_fadvise DONTNEED, like vmtouch -e).
    Evict(EvictArgs),
    /// Report how much of each file is in the page cache (mincore).
    Resident(ResidentArgs),
    /// Run a command in a cgroup whose reads from a block device are throttled (root).
    Throttle(ThrottleArgs),
    /// Generate competing CPU load.
    CpuHog(CpuHogArgs),
    /// Stop a process with SIGSTOP, then continue it with SIGCONT, guaranteed.
    Freeze(FreezeArgs),
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
While mounted, `MOUNT/.stallscope-slowfs` shows the settings and counters; writing
`read_delay=5s` (or write_delay=, jitter=, error_rate=, glob=) to it changes them, as
`stallscope inject slowfs-set MOUNT --read-delay 5s` does.

Example, the seed's experiment with a 300 ms disk:
  stallscope inject slowfs /data /mnt/slow --read-delay 300ms &
  stallscope inject evict /mnt/slow/test.dat
  java LongTTSP /mnt/slow/test.dat")]
pub struct SlowfsArgs {
    /// The directory whose files the mount shows.
    pub backing: PathBuf,
    /// Where to mount (created if missing, and then removed afterwards).
    pub mount: PathBuf,
    /// Delay of each read that reaches the file system (page-cache hits are not delayed).
    #[arg(long, default_value = "300ms")]
    pub read_delay: recording::units::Duration,
    /// Delay of each write and fsync (writes are not cached: every write(2) waits, as on a slow
    /// network file system; a JVM's GC log written here slows whatever writes it).
    #[arg(long, default_value = "0ms")]
    pub write_delay: recording::units::Duration,
    /// A random extra delay, uniform between 0 and this.
    #[arg(long, default_value = "0ms")]
    pub jitter: recording::units::Duration,
    /// Only files whose path in the mount matches this glob are slow (e.g. `*.dat`).
    #[arg(long, default_value = "**")]
    pub glob: String,
    /// Fraction of matching reads that fail with EIO, between 0 and 1.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// Upper bound on any delay, now or set later.
    #[arg(long, default_value = "10s")]
    pub max_delay: recording::units::Duration,
    /// Unmount after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: Option<recording::units::Duration>,
    /// FUSE worker threads (delayed reads do not occupy them).
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Let other users use the mount too (FUSE `allow_other`; needs root or `user_allow_other`
    /// in /etc/fuse.conf). Off by default: only the user who mounted it can use it, and the
    /// kernel checks every file's mode for them either way (`default_permissions`).
    #[arg(long)]
    pub allow_other: bool,
}

#[derive(Args, Debug, Clone)]
pub struct SlowfsSetArgs {
    /// The slowfs mount point.
    pub mount: PathBuf,
    #[arg(long)]
    pub read_delay: Option<recording::units::Duration>,
    #[arg(long)]
    pub write_delay: Option<recording::units::Duration>,
    #[arg(long)]
    pub jitter: Option<recording::units::Duration>,
    #[arg(long)]
    pub error_rate: Option<f64>,
    #[arg(long)]
    pub glob: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct EvictArgs {
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct ResidentArgs {
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One JSON object per file.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ThrottleArgs {
    /// Read operations per second allowed from the device.
    #[arg(long)]
    pub riops: u64,
    /// The block device (`/dev/vda`, `254:0`); default: the disk holding the working directory.
    #[arg(long)]
    pub device: Option<String>,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct CpuHogArgs {
    /// Spinning threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// How long.
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: recording::units::Duration,
    /// Nice value for the spinning threads (negative needs root).
    #[arg(long, allow_hyphen_values = true)]
    pub nice: Option<i32>,
}

#[derive(Args, Debug, Clone)]
pub struct FreezeArgs {
    pub pid: i32,
    /// How long to keep it stopped.
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: recording::units::Duration,
}

/// `stallscope workload …` (hidden): the lab's native workloads, each alone.
#[derive(Subcommand, Debug)]
pub enum WorkloadCommand {
    /// Seed 001: timed condition-variable waits beside a thread that maps and unmaps large
    /// regions; private vs shared futexes, mlockall, churn vs a reused mapping.
    FutexMmap(FutexMmapArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ChurnArg {
    /// mmap, touch every page, munmap, again: mmap_lock taken for write each cycle.
    #[value(name = "churn")]
    MapUnmap,
    /// One mapping, made before the waiter starts, touched and MADV_DONTNEEDed again and
    /// again: faults, no mmap/munmap (under mlockall DONTNEED is refused: writes only).
    Reuse,
    /// No second thread: the baseline.
    None,
}

/// Which futex the waiter sleeps on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FutexArg {
    /// glibc's default: never takes mmap_lock.
    Private,
    /// pthread_*attr_setpshared: its wake-up looks the address up under mmap_lock.
    Shared,
}

/// What the waiter does after each wake-up, inside the time measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WakePathArg {
    /// Nothing more: the futex wait alone.
    Wait,
    /// Touch a page of a mapping never faulted before (mmap_lock for read, on the fallback
    /// from per-VMA locks). Without --mlock only: mlockall populates every mapping first.
    Fault,
    /// Read /proc/self/smaps_rollup (mmap_lock for read), as a monitoring agent does.
    Smaps,
    /// Read /proc/self/maps (per-VMA locks since Linux 6.17, mmap_lock for read before).
    Maps,
    /// mprotect one page of its own (mmap_lock for write), as a JIT or a guard page does.
    Mprotect,
    /// mmap and munmap 64 KiB (mmap_lock for write, twice), as a large malloc and free do.
    Mmap,
}

#[derive(Args, Debug, Clone)]
pub struct FutexMmapArgs {
    /// The futex the waiter sleeps on.
    #[arg(long, value_enum, default_value_t = FutexArg::Private)]
    pub futex: FutexArg,
    /// mlockall(MCL_CURRENT|MCL_FUTURE) during the run.
    #[arg(long)]
    pub mlock: bool,
    /// What the second thread does: mmap/touch/munmap, one mapping MADV_DONTNEEDed, or nothing.
    #[arg(long, value_enum, default_value_t = ChurnArg::MapUnmap)]
    pub churn: ChurnArg,
    /// Size of each mapping.
    #[arg(long, default_value_t = 100)]
    pub region_mb: usize,
    /// How often the latency-critical thread wakes.
    #[arg(long, default_value = "1ms")]
    pub period: recording::units::Duration,
    /// How long each variant runs.
    #[arg(long, default_value = "5s")]
    pub duration: recording::units::Duration,
    /// Run the latency-critical thread SCHED_FIFO where permitted.
    #[arg(long)]
    pub fifo: bool,
    /// Run the standard set of variants one after another.
    #[arg(long)]
    pub matrix: bool,
    /// Publish a stallscope heartbeat from the waiting thread, so the recorder can watch it.
    #[arg(long)]
    pub heartbeat: bool,
    /// What the waiter does after each wake-up, inside the time measured.
    #[arg(long, value_enum, default_value_t = WakePathArg::Wait)]
    pub path: WakePathArg,
}

impl FutexMmapArgs {
    /// The variant these options ask for (without `--matrix`).
    pub fn variant(&self) -> lab::workload::futex_mmap::Variant {
        use lab::workload::futex_mmap::{Churn, WakePath};
        lab::workload::futex_mmap::Variant {
            shared: self.futex == FutexArg::Shared,
            mlock: self.mlock,
            churn: match self.churn {
                ChurnArg::MapUnmap => Churn::MapUnmap,
                ChurnArg::Reuse => Churn::Reuse,
                ChurnArg::None => Churn::None,
            },
            fifo: self.fifo,
            path: match self.path {
                WakePathArg::Wait => WakePath::Wait,
                WakePathArg::Fault => WakePath::Fault,
                WakePathArg::Smaps => WakePath::Smaps,
                WakePathArg::Maps => WakePath::Maps,
                WakePathArg::Mprotect => WakePath::Mprotect,
                WakePathArg::Mmap => WakePath::Mmap,
            },
        }
    }
}

/// How long a lab scenario runs (the lab's `Profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileArg {
    // No doc comments on the values: the option's own help says what each is.
    Quick,
    Full,
}

impl ProfileArg {
    pub fn profile(self) -> lab::scenario::Profile {
        match self {
            ProfileArg::Quick => lab::scenario::Profile::Quick,
            ProfileArg::Full => lab::scenario::Profile::Full,
        }
    }
}
