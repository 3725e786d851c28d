//! Writes the synthetic fixtures for JDKs that cannot run on this machine (8, 11, 13–16,
//! 21.0.8+), from HotSpot's format strings in `hotspot_log::formats`. Deterministic: the same
//! seed writes the same bytes.
//!
//!   cargo run -p hotspot-log --example synth_fixtures -- tests/fixtures/logs

use hotspot_log::formats::{self, Format};
use hotspot_log::render::{Arg, printf};
use std::fmt::Write as _;
use std::path::Path;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Mostly short, sometimes long: the shape of real safepoint times.
    fn pause_ns(&mut self) -> u64 {
        match self.below(20) {
            0 => 100_000_000 + self.below(3_000_000_000),
            1..=3 => 1_000_000 + self.below(50_000_000),
            _ => 5_000 + self.below(900_000),
        }
    }
}

const OPS8: [&str; 5] =
    ["ParallelGCFailedAllocation", "RevokeBias", "ThreadDump", "no vm operation", "BulkRevokeBias"];
const OPS13: [&str; 4] = ["G1CollectForAllocation", "Cleanup", "ThreadDump", "HandshakeAllThreads"];

fn date(epoch_ms: i64) -> String {
    let w = hotspot_log::WallTime { epoch_ms, offset_min: 60 };
    let s = hotspot_log::format_wall(w);
    format!("{}T{}+0100", &s[..10], &s[11..])
}

fn secs(ns: u64) -> Arg<'static> {
    Arg::Float(ns as f64 / 1e9)
}

/// %3.7f prints 100 ns resolution; keep values exact at it.
fn r100(ns: u64) -> u64 {
    ns / 100 * 100
}

fn f(format: Format, args: &[Arg<'_>]) -> String {
    printf(format.hotspot_format().expect("a record shape"), args).expect("format and args agree")
}

fn timeout_block_tty(out: &mut String, name: &str, id: u64, nid: u64) {
    for l in [formats::TIMEOUT_BEGIN, formats::TIMEOUT_SPINNING, formats::TIMEOUT_LIST] {
        writeln!(out, "{l}").unwrap();
    }
    writeln!(out, "# \"{name}\" #{id} prio=5 os_prio=0 tid=0x00007f3a5c{id:06x} nid={nid:#x} runnable  [0x0000000000000000]").unwrap();
    writeln!(out, "   java.lang.Thread.State: RUNNABLE").unwrap();
    writeln!(out).unwrap();
    writeln!(out, "{}", formats::TIMEOUT_END).unwrap();
}

fn jdk8_gc_details(rng: &mut Rng) -> String {
    let young = 60_000 + rng.below(10_000);
    format!(
        "[GC (Allocation Failure) [PSYoungGen: {young}K->{}K(76288K)] {young}K->{}K(251392K), 0.{:07} secs] [Times: user=0.03 sys=0.01, real=0.01 secs] ",
        young / 6,
        young / 5,
        rng.below(9_000_000)
    )
}

/// JDK 8 GC log with -XX:+PrintGCDetails -XX:+PrintGCDateStamps -XX:+PrintGCTimeStamps
/// -XX:+PrintGCApplicationStoppedTime -XX:+PrintGCApplicationConcurrentTime; one pause printed
/// after GC output on the same line, and a last line cut off mid-record.
fn jdk8_gc_log(rng: &mut Rng) -> String {
    let mut out = String::new();
    writeln!(out, "Java HotSpot(TM) 64-Bit Server VM (25.372-b07) for linux-amd64 JRE (1.8.0_372-b07), built on Apr 10 2023 by \"java_re\" with gcc 7.3.0").unwrap();
    writeln!(out, "CommandLine flags: -XX:+PrintGCApplicationConcurrentTime -XX:+PrintGCApplicationStoppedTime -XX:+PrintGCDateStamps -XX:+PrintGCDetails -XX:+PrintGCTimeStamps -XX:+UseParallelGC").unwrap();
    let mut up: u64 = 300_000_000;
    let wall0: i64 = 1_456_822_800_000;
    for i in 0..400 {
        let app = r100(rng.below(400_000_000));
        up += app;
        let stamp = |up: u64| {
            format!(
                "{}: {}.{:03}: ",
                date(wall0 + (up / 1_000_000) as i64),
                up / 1_000_000_000,
                up / 1_000_000 % 1000
            )
        };
        writeln!(
            out,
            "{}{}",
            stamp(up),
            printf(Format::Jdk8ApplicationTime.hotspot_format().unwrap(), &[secs(app)]).unwrap()
        )
        .unwrap();
        let total = r100(rng.pause_ns());
        let ttsp = r100(total / (1 + rng.below(20)));
        let gc = rng.below(3) == 0;
        if gc {
            writeln!(out, "{}{}", stamp(up), jdk8_gc_details(rng)).unwrap();
        }
        up += total;
        let stopped = f(Format::Jdk8StoppedTime, &[secs(total), secs(ttsp)]);
        if i == 17 {
            // JDK 8 sometimes prints the pause after other output on the same line.
            writeln!(out, "[Times: user=0.00 sys=0.00, real=0.00 secs] {}{stopped}", stamp(up))
                .unwrap();
        } else {
            writeln!(out, "{}{stopped}", stamp(up)).unwrap();
        }
    }
    write!(
        out,
        "{}: {}.{:03}: Total time for which application threads were stopped: 0.00",
        date(wall0 + (up / 1_000_000) as i64 + 5),
        up / 1_000_000_000 + 1,
        5
    )
    .unwrap();
    out
}

/// Bare JDK 8/7 pause lines: no stamps; some without "Stopping threads took" (JDK 7, early 8).
fn jdk8_bare(rng: &mut Rng) -> String {
    let mut out = String::new();
    for i in 0..300 {
        let total = r100(rng.pause_ns());
        let ttsp = r100(total / (1 + rng.below(10)));
        if i % 7 == 3 {
            writeln!(
                out,
                "Total time for which application threads were stopped: {:.7} seconds",
                total as f64 / 1e9
            )
            .unwrap();
        } else {
            writeln!(out, "{}", f(Format::Jdk8StoppedTime, &[secs(total), secs(ttsp)])).unwrap();
        }
        if i % 10 == 0 {
            writeln!(out, "application output line {i}").unwrap();
        }
    }
    out
}

/// JDK 8 tty with -XX:+PrintSafepointStatistics -XX:PrintSafepointStatisticsCount=1
/// -XX:+PrintGCApplicationStoppedTime -XX:+PrintGCTimeStamps -XX:+SafepointTimeout: a header
/// and a row before each pause line, timeout blocks, and the exit summary.
fn jdk8_stats_count1(rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut up: u64 = 200_000_000;
    let mut counts = std::collections::BTreeMap::new();
    let (mut max_sync, mut max_vmop) = (0, 0);
    for i in 0..120 {
        up += rng.below(300_000_000);
        let op = OPS8[rng.below(OPS8.len() as u64) as usize];
        *counts.entry(op).or_insert(0) += 1;
        let long = i % 25 == 24;
        let sync_ms = if long { 300 + rng.below(3000) } else { rng.below(3) };
        let cleanup_ms = rng.below(2);
        let vmop_ms = rng.below(40);
        max_sync = max_sync.max(sync_ms);
        max_vmop = max_vmop.max(vmop_ms);
        if long {
            timeout_block_tty(&mut out, &format!("worker-{}", i % 3), 20 + i % 3, 0x1a00 + i % 3);
        }
        writeln!(out, "{}", formats::STATS_HEADER_JDK8).unwrap();
        let start = Arg::Float(up as f64 / 1e9);
        let row = printf(
            Format::Jdk8Stats.hotspot_format().unwrap(),
            &[
                start,
                Arg::Str(op),
                Arg::Int(14),
                Arg::Int(1 + long as i64),
                Arg::Int(long as i64),
                Arg::Int(sync_ms as i64),
                Arg::Int(0),
                Arg::Int(sync_ms as i64),
                Arg::Int(cleanup_ms as i64),
                Arg::Int(vmop_ms as i64),
                Arg::Int(0),
            ],
        )
        .unwrap();
        writeln!(out, "{row}").unwrap();
        let ttsp = r100(sync_ms * 1_000_000 + rng.below(999_000));
        let total = r100(ttsp + (cleanup_ms + vmop_ms) * 1_000_000 + rng.below(999_000));
        up += total;
        writeln!(
            out,
            "{}.{:03}: {}",
            up / 1_000_000_000,
            up / 1_000_000 % 1000,
            f(Format::Jdk8StoppedTime, &[secs(total), secs(ttsp)])
        )
        .unwrap();
    }
    writeln!(out, "Polling page always armed").unwrap();
    for (op, n) in counts {
        writeln!(out, "{op:<26}{n:10}").unwrap();
    }
    writeln!(out, "    0 VM operations coalesced during safepoint").unwrap();
    writeln!(out, "Maximum sync time {max_sync:6} ms").unwrap();
    writeln!(out, "Maximum vm operation time (except for Exit VM operation) {max_vmop:6} ms")
        .unwrap();
    out
}

/// JDK 8 with the default PrintSafepointStatisticsCount batching (here 60): the rows come in
/// batches after their pause lines, the header every 30 rows; GC lines in between.
fn jdk8_stats_batched(rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut up: u64 = 500_000_000;
    let mut batch = Vec::new();
    for i in 0..180 {
        up += 2_000_000 + rng.below(200_000_000);
        let start = up;
        let op = OPS8[rng.below(OPS8.len() as u64) as usize];
        let sync_ms = if i % 40 == 39 { 500 + rng.below(1500) } else { rng.below(2) };
        let vmop_ms = rng.below(30);
        let ttsp = r100(sync_ms * 1_000_000 + rng.below(900_000));
        let total = r100(ttsp + vmop_ms * 1_000_000 + rng.below(900_000));
        up += total;
        if rng.below(4) == 0 {
            writeln!(
                out,
                "{}.{:03}: {}",
                start / 1_000_000_000,
                start / 1_000_000 % 1000,
                jdk8_gc_details(rng)
            )
            .unwrap();
        }
        writeln!(
            out,
            "{}.{:03}: {}",
            up / 1_000_000_000,
            up / 1_000_000 % 1000,
            f(Format::Jdk8StoppedTime, &[secs(total), secs(ttsp)])
        )
        .unwrap();
        batch.push(
            printf(
                Format::Jdk8Stats.hotspot_format().unwrap(),
                &[
                    Arg::Float(start as f64 / 1e9),
                    Arg::Str(op),
                    Arg::Int(12),
                    Arg::Int(0),
                    Arg::Int(0),
                    Arg::Int(sync_ms as i64),
                    Arg::Int(0),
                    Arg::Int(sync_ms as i64),
                    Arg::Int(0),
                    Arg::Int(vmop_ms as i64),
                    Arg::Int(0),
                ],
            )
            .unwrap(),
        );
        if batch.len() == 60 {
            for (k, row) in batch.drain(..).enumerate() {
                if k % 30 == 0 {
                    writeln!(out, "{}", formats::STATS_HEADER_JDK8).unwrap();
                }
                writeln!(out, "{row}").unwrap();
            }
        }
    }
    out
}

/// JDK 11: unified logging `-Xlog:safepoint` (Application time, Entering/Leaving region, Total
/// time) with the tty PrintSafepointStatistics rows and a tty SafepointTimeout block among them.
fn jdk11(rng: &mut Rng) -> String {
    let mut out = String::new();
    let mut up: u64 = 150_000_000;
    let ul = |up: u64| {
        format!("[{}.{:03}s][info][safepoint] ", up / 1_000_000_000, up / 1_000_000 % 1000)
    };
    for i in 0..150 {
        let app = r100(rng.below(250_000_000));
        up += app;
        writeln!(
            out,
            "{}{}",
            ul(up),
            printf(Format::UlApplicationTime.hotspot_format().unwrap(), &[secs(app)]).unwrap()
        )
        .unwrap();
        let op = OPS8[rng.below(4) as usize];
        let long = i % 50 == 49;
        if long {
            timeout_block_tty(&mut out, "io-reader", 31, 0x2f11);
        }
        let sync_ms = if long { 800 + rng.below(2000) } else { rng.below(2) };
        let vmop_ms = rng.below(20);
        let ttsp = r100(sync_ms * 1_000_000 + rng.below(900_000));
        let total = r100(ttsp + vmop_ms * 1_000_000 + rng.below(900_000));
        writeln!(
            out,
            "{}{}",
            ul(up + ttsp),
            printf(Format::UlSafepointRegion.hotspot_format().unwrap(), &[Arg::Str(op)]).unwrap()
        )
        .unwrap();
        if i % 30 == 0 {
            writeln!(out, "{}", formats::STATS_HEADER_JDK11).unwrap();
        }
        let row = printf(
            Format::Jdk11Stats.hotspot_format().unwrap(),
            &[
                Arg::Float(up as f64 / 1e9),
                Arg::Str(op),
                Arg::Int(17),
                Arg::Int(long as i64),
                Arg::Int(long as i64),
                Arg::Int(sync_ms as i64),
                Arg::Int(0),
                Arg::Int(sync_ms as i64),
                Arg::Int(0),
                Arg::Int(vmop_ms as i64),
                Arg::Int(0),
            ],
        )
        .unwrap();
        writeln!(out, "{row}").unwrap();
        up += total;
        writeln!(out, "{}Leaving safepoint region", ul(up)).unwrap();
        writeln!(out, "{}{}", ul(up), f(Format::UlStoppedTime, &[secs(total), secs(ttsp)]))
            .unwrap();
    }
    out
}

/// `Safepoint "…"` in the JDK 13–16 (no Cleanup) or 21.0.8+ (Cleanup and Leaving) shape, in a
/// GC log with the default decorators.
fn jdk13_or_21(rng: &mut Rng, format: Format) -> String {
    let mut out = String::new();
    let mut up: u64 = 20_000_000;
    for i in 0..250 {
        let since = rng.below(120_000_000);
        up += since;
        let op = OPS13[rng.below(OPS13.len() as u64) as usize];
        let reach = if i % 60 == 59 {
            200_000_000 + rng.below(1_000_000_000)
        } else {
            2_000 + rng.below(80_000)
        };
        let cleanup = rng.below(40_000);
        let at = rng.pause_ns() / 4;
        let leave = rng.below(30_000);
        let total = reach + at + if format == Format::Jdk21Safepoint { cleanup + leave } else { 0 };
        up += total;
        let stamp = format!("[{}.{:03}s]", up / 1_000_000_000, up / 1_000_000 % 1000);
        if op == "G1CollectForAllocation" {
            writeln!(out, "{stamp}[info][gc] GC({i}) Pause Young (Normal) (G1 Evacuation Pause) 24M->3M(256M) {:.3}ms", at as f64 / 1e6).unwrap();
        }
        let n = |v: u64| Arg::Int(v as i64);
        let msg = match format {
            Format::Jdk13Safepoint => {
                f(format, &[Arg::Str(op), n(since), n(reach), n(at), n(total)])
            }
            _ => f(
                format,
                &[Arg::Str(op), n(since), n(reach), n(cleanup), n(at), n(leave), n(total)],
            ),
        };
        writeln!(out, "{stamp}[info][safepoint] {msg}").unwrap();
    }
    out
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "tests/fixtures/logs".into());
    let dir = Path::new(&dir);
    let mut rng = Rng(0x5eed_5a1e_57a1_15c0);
    let files = [
        (
            "synthetic-jdk8-parallel-gcdetails-stoppedtime-concurrenttime-datestamps.log",
            jdk8_gc_log(&mut rng),
        ),
        ("synthetic-jdk8-stoppedtime-bare.log", jdk8_bare(&mut rng)),
        ("synthetic-jdk8-tty-stats_count1-stoppedtime-timeout.log", jdk8_stats_count1(&mut rng)),
        (
            "synthetic-jdk8-stats_count60-batched-stoppedtime-gcdetails.log",
            jdk8_stats_batched(&mut rng),
        ),
        ("synthetic-jdk11-ul_safepoint-regions-tty_stats-timeout.log", jdk11(&mut rng)),
        (
            "synthetic-jdk13-gc+safepoint-no_cleanup.log",
            jdk13_or_21(&mut rng, Format::Jdk13Safepoint),
        ),
        (
            "synthetic-jdk21.0.8-gc+safepoint-cleanup_leaving.log",
            jdk13_or_21(&mut rng, Format::Jdk21Safepoint),
        ),
    ];
    for (name, text) in files {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        println!("wrote {}", p.display());
    }
}
