//! The shapes of HotSpot's safepoint output, JDK 8 to 25: one place for their names and for
//! the `printf` format strings HotSpot prints them with.
//!
//! Invariant: this is the single source of the format strings. The parser is hand-written for
//! speed, and the tests render these strings with random values and check that the parser
//! reads the values back, so the two cannot drift apart silently.

use serde::Serialize;

/// A recognised line shape. Version ranges are approximate: update releases backport changes,
/// so the parser goes by shape, never by version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// JDK 8 `-XX:+PrintGCApplicationStoppedTime`, optionally after date/uptime stamps.
    Jdk8StoppedTime,
    /// JDK 8 `-XX:+PrintGCApplicationConcurrentTime`.
    Jdk8ApplicationTime,
    /// JDK 9–12 unified logging `Total time for which application threads were stopped`.
    UlStoppedTime,
    /// JDK 9–12 unified logging `Application time`.
    UlApplicationTime,
    /// JDK 9–12 unified logging `Entering safepoint region` / `Leaving safepoint region`.
    UlSafepointRegion,
    /// JDK 13–16 and early 17.0.x: `Safepoint "…"` without Cleanup (Reaching includes cleanup).
    Jdk13Safepoint,
    /// Later 17.0.x, 20, 21: `Safepoint "…"` with Cleanup.
    Jdk17Safepoint,
    /// 21.0.8+: with Cleanup and Leaving.
    Jdk21Safepoint,
    /// JDK 22+ and 25: with Leaving and Threads, no Cleanup.
    Jdk22Safepoint,
    /// JDK 8 `-XX:+PrintSafepointStatistics` row (times in ms).
    Jdk8Stats,
    /// JDK 11 `-XX:+PrintSafepointStatistics` row (times in ms).
    Jdk11Stats,
    /// JDK 13–21 `-Xlog:safepoint+stats` row (times in ns, with cleanup).
    Jdk13Stats,
    /// JDK 25 `-Xlog:safepoint+stats` row (times in ns, no cleanup).
    Jdk25Stats,
    /// A statistics table header (repeats every 30 rows on JDK 8 and 25).
    StatsHeader,
    /// The statistics summary printed at JVM exit.
    StatsSummary,
    /// A SafepointTimeout block printed to the tty (JDK 8, 11).
    TimeoutTty,
    /// A SafepointTimeout block as unified-logging warnings (JDK 17+).
    TimeoutUl,
    /// Other lines on the `safepoint` tags that carry no record (sync started, cleanup phases).
    SafepointDetail,
    /// JDK Flight Recorder safepoint events (`jdk.SafepointBegin` and its companions), JDK 11-25;
    /// counted per safepoint, not per line ([`crate::jfr`]).
    Jfr,
    /// The JVM's perf counters (hsperfdata), as stallscope's recorder looked at them: a
    /// safepoint's reaching and its time after, never its operation's name.
    PerfCounters,
}

impl Format {
    pub const ALL: [Format; 20] = [
        Format::Jdk8StoppedTime,
        Format::Jdk8ApplicationTime,
        Format::UlStoppedTime,
        Format::UlApplicationTime,
        Format::UlSafepointRegion,
        Format::Jdk13Safepoint,
        Format::Jdk17Safepoint,
        Format::Jdk21Safepoint,
        Format::Jdk22Safepoint,
        Format::Jdk8Stats,
        Format::Jdk11Stats,
        Format::Jdk13Stats,
        Format::Jdk25Stats,
        Format::StatsHeader,
        Format::StatsSummary,
        Format::TimeoutTty,
        Format::TimeoutUl,
        Format::SafepointDetail,
        Format::Jfr,
        Format::PerfCounters,
    ];

    /// A stable identifier for machine output.
    pub fn id(self) -> &'static str {
        match self {
            Format::Jdk8StoppedTime => "jdk8-stopped-time",
            Format::Jdk8ApplicationTime => "jdk8-application-time",
            Format::UlStoppedTime => "ul-stopped-time",
            Format::UlApplicationTime => "ul-application-time",
            Format::UlSafepointRegion => "ul-safepoint-region",
            Format::Jdk13Safepoint => "jdk13-safepoint",
            Format::Jdk17Safepoint => "jdk17-safepoint",
            Format::Jdk21Safepoint => "jdk21-safepoint",
            Format::Jdk22Safepoint => "jdk22-safepoint",
            Format::Jdk8Stats => "jdk8-stats",
            Format::Jdk11Stats => "jdk11-stats",
            Format::Jdk13Stats => "jdk13-stats",
            Format::Jdk25Stats => "jdk25-stats",
            Format::StatsHeader => "stats-header",
            Format::StatsSummary => "stats-summary",
            Format::TimeoutTty => "timeout-tty",
            Format::TimeoutUl => "timeout-ul",
            Format::SafepointDetail => "safepoint-detail",
            Format::Jfr => "jfr",
            Format::PerfCounters => "perf-counters",
        }
    }

    /// What a person reading the summary should call it.
    pub fn describe(self) -> &'static str {
        match self {
            Format::Jdk8StoppedTime => "JDK 8 PrintGCApplicationStoppedTime",
            Format::Jdk8ApplicationTime => "JDK 8 PrintGCApplicationConcurrentTime",
            Format::UlStoppedTime => "JDK 9-12 'Total time for which…'",
            Format::UlApplicationTime => "JDK 9-12 'Application time'",
            Format::UlSafepointRegion => "JDK 9-12 'Entering/Leaving safepoint region'",
            Format::Jdk13Safepoint => "JDK 13-16 Safepoint \"…\"",
            Format::Jdk17Safepoint => "JDK 17-21 Safepoint \"…\" with Cleanup",
            Format::Jdk21Safepoint => "JDK 21.0.8+ Safepoint \"…\" with Cleanup and Leaving",
            Format::Jdk22Safepoint => "JDK 22-25 Safepoint \"…\" with Leaving and Threads",
            Format::Jdk8Stats => "JDK 8 PrintSafepointStatistics",
            Format::Jdk11Stats => "JDK 11 PrintSafepointStatistics",
            Format::Jdk13Stats => "JDK 13-21 safepoint+stats",
            Format::Jdk25Stats => "JDK 25 safepoint+stats",
            Format::StatsHeader => "statistics header",
            Format::StatsSummary => "statistics exit summary",
            Format::TimeoutTty => "SafepointTimeout (tty)",
            Format::TimeoutUl => "SafepointTimeout (unified logging)",
            Format::SafepointDetail => "safepoint detail lines",
            Format::Jfr => "JDK Flight Recorder safepoint events",
            Format::PerfCounters => "the JVM's perf counters (hsperfdata)",
        }
    }

    /// True for shapes that carry a safepoint's timings (a record, not a detail).
    pub fn is_record(self) -> bool {
        matches!(
            self,
            Format::Jdk8StoppedTime
                | Format::UlStoppedTime
                | Format::Jdk13Safepoint
                | Format::Jdk17Safepoint
                | Format::Jdk21Safepoint
                | Format::Jdk22Safepoint
                | Format::Jdk8Stats
                | Format::Jdk11Stats
                | Format::Jdk13Stats
                | Format::Jdk25Stats
                | Format::Jfr
                | Format::PerfCounters
        )
    }

    /// The HotSpot `printf` format string that produces this shape's message, where there is
    /// exactly one. `%3.7f` and friends are C `printf` conversions.
    pub fn hotspot_format(self) -> Option<&'static str> {
        Some(match self {
            Format::Jdk8StoppedTime | Format::UlStoppedTime => {
                "Total time for which application threads were stopped: %3.7f seconds, Stopping threads took: %3.7f seconds"
            }
            Format::Jdk8ApplicationTime | Format::UlApplicationTime => {
                "Application time: %3.7f seconds"
            }
            Format::UlSafepointRegion => "Entering safepoint region: %s",
            Format::Jdk13Safepoint => {
                "Safepoint \"%s\", Time since last: %ld ns, Reaching safepoint: %ld ns, At safepoint: %ld ns, Total: %ld ns"
            }
            Format::Jdk17Safepoint => {
                "Safepoint \"%s\", Time since last: %ld ns, Reaching safepoint: %ld ns, Cleanup: %ld ns, At safepoint: %ld ns, Total: %ld ns"
            }
            Format::Jdk21Safepoint => {
                "Safepoint \"%s\", Time since last: %ld ns, Reaching safepoint: %ld ns, Cleanup: %ld ns, At safepoint: %ld ns, Leaving safepoint: %ld ns, Total: %ld ns"
            }
            Format::Jdk22Safepoint => {
                "Safepoint \"%s\", Time since last: %ld ns, Reaching safepoint: %ld ns, At safepoint: %ld ns, Leaving safepoint: %ld ns, Total: %ld ns, Threads: %d runnable, %d total"
            }
            Format::Jdk8Stats => {
                "%.3f: %-26s       [%8d%11d%15d    ]      [%6ld%6ld%6ld%6ld%6ld    ]  %d   "
            }
            Format::Jdk11Stats => {
                "%8.3f: %-30s  [          %8d %17d %13d ][       %7ld %7ld %7ld %7ld %7ld ] %15d "
            }
            Format::Jdk13Stats => {
                "%-28s [       %8d        %8d ][       %10ld %10ld %10ld %10ld ]%16d"
            }
            Format::Jdk25Stats => "%-28s [       %8d        %8d ][       %10ld %10ld %10ld ]%16d",
            _ => return None,
        })
    }
}

/// The statistics table headers, as HotSpot prints them.
pub const STATS_HEADER_JDK8: &str = "         vmop                    [threads: total initially_running wait_to_block]    [time: spin block sync cleanup vmop] page_trap_count";
pub const STATS_HEADER_JDK11: &str = "          vmop                            [ threads:    total initially_running wait_to_block ][ time:    spin   block    sync cleanup    vmop ] page_trap_count";
pub const STATS_HEADER_JDK13: &str = "VM Operation                 [ threads: total initial_running ][ time:       sync    cleanup       vmop      total ] page_trap_count";
pub const STATS_HEADER_JDK25: &str = "VM Operation                 [ threads: total initial_running ][ time:       sync    vmop      total ] page_trap_count";

/// The SafepointTimeout block, line by line, as `SafepointSynchronize::print_safepoint_timeout`
/// prints it. The thread line is the thread's `print_on` output after `# `.
pub const TIMEOUT_BEGIN: &str = "# SafepointSynchronize::begin: Timeout detected:";
pub const TIMEOUT_SPINNING: &str =
    "# SafepointSynchronize::begin: Timed out while spinning to reach a safepoint.";
pub const TIMEOUT_WAITING: &str =
    "# SafepointSynchronize::begin: Timed out while waiting for threads to stop.";
pub const TIMEOUT_LIST: &str =
    "# SafepointSynchronize::begin: Threads which did not reach the safepoint:";
pub const TIMEOUT_END: &str = "# SafepointSynchronize::begin: (End of list)";
