//! Writes a large log for the benchmarks, rendered through HotSpot's format strings.
//!
//!   gen_bench_log jdk17 SIZE_MB OUT   JDK 17 `-Xlog:gc*,safepoint` shape: each safepoint line
//!                                     among a G1 pause's worth of gc lines (13 lines a pause,
//!                                     as in the real fixture)
//!   gen_bench_log jdk8 SIZE_MB OUT    a JDK 8 ParallelGC log with -XX:+PrintGCDetails, date and
//!                                     uptime stamps, and PrintGCApplicationStoppedTime
//!
//! OUT `-` writes to stdout. Deterministic for a given size.

use hotspot_log::formats::Format;
use hotspot_log::render::{Arg, printf};
use std::io::{BufWriter, Write};

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: gen_bench_log jdk17|jdk8 SIZE_MB OUT");
        std::process::exit(2);
    }
    let limit = args[2].parse::<u64>().expect("SIZE_MB") << 20;
    let sink: Box<dyn Write> = if args[3] == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(&args[3])?)
    };
    let mut out = BufWriter::with_capacity(1 << 20, sink);
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut written = 0u64;
    let mut up_ms: u64 = 10;
    let mut n: u64 = 0;
    let mut line = String::with_capacity(512);
    let jdk17 = args[1] == "jdk17";
    let wall0: i64 = 1_700_000_000_000;
    if !jdk17 {
        let head = "Java HotSpot(TM) 64-Bit Server VM (25.372-b07) for linux-amd64 JRE (1.8.0_372-b07), built on Apr 10 2023 by \"java_re\" with gcc 7.3.0\n\
                    Memory: 4k page, physical 24617000k(20000000k free), swap 0k(0k free)\n\
                    CommandLine flags: -XX:+PrintGCApplicationStoppedTime -XX:+PrintGCDateStamps -XX:+PrintGCDetails -XX:+PrintGCTimeStamps -XX:+UseParallelGC\n";
        out.write_all(head.as_bytes())?;
        written += head.len() as u64;
    }
    while written < limit {
        line.clear();
        up_ms += 1 + rng.below(50);
        let up = format!("{}.{:03}", up_ms / 1000, up_ms % 1000);
        let reach = 2_000 + rng.below(if n.is_multiple_of(500) { 900_000_000 } else { 90_000 });
        let at = 100_000 + rng.below(20_000_000);
        if jdk17 {
            let s = format!("[{up}s][info][gc");
            for l in [
                format!("{s}            ] GC({n}) Pause Young (Normal) (G1 Evacuation Pause)\n"),
                format!("{s},task       ] GC({n}) Using 2 workers of 2 for evacuation\n"),
                format!(
                    "{s},phases     ] GC({n})   Pre Evacuate Collection Set: 0.{}ms\n",
                    rng.below(99)
                ),
                format!("{s},phases     ] GC({n})   Merge Heap Roots: 0.{}ms\n", rng.below(99)),
                format!(
                    "{s},phases     ] GC({n})   Evacuate Collection Set: {}.{}ms\n",
                    rng.below(20),
                    rng.below(99)
                ),
                format!(
                    "{s},phases     ] GC({n})   Post Evacuate Collection Set: 0.{}ms\n",
                    rng.below(99)
                ),
                format!("{s},phases     ] GC({n})   Other: 0.{}ms\n", rng.below(99)),
                format!(
                    "{s},heap       ] GC({n}) Eden regions: {}->0({})\n",
                    20 + rng.below(100),
                    120
                ),
                format!(
                    "{s},heap       ] GC({n}) Survivor regions: {}->{}(16)\n",
                    rng.below(4),
                    rng.below(4)
                ),
                format!(
                    "{s},metaspace  ] GC({n}) Metaspace: 6655K(6848K)->6655K(6848K) NonClass: 6046K(6144K)->6046K(6144K) Class: 609K(704K)->609K(704K)\n"
                ),
                format!(
                    "{s}            ] GC({n}) Pause Young (Normal) (G1 Evacuation Pause) {}M->{}M(256M) {}.{:03}ms\n",
                    24 + rng.below(100),
                    2 + rng.below(10),
                    at / 1_000_000,
                    at / 1000 % 1000
                ),
                format!("{s},cpu        ] GC({n}) User=0.01s Sys=0.00s Real=0.00s\n"),
            ] {
                line.push_str(&l);
            }
            let msg = printf(
                Format::Jdk17Safepoint.hotspot_format().unwrap(),
                &[
                    Arg::Str("G1CollectForAllocation"),
                    Arg::Int(rng.below(60_000_000) as i64),
                    Arg::Int(reach as i64),
                    Arg::Int(rng.below(30_000) as i64),
                    Arg::Int(at as i64),
                    Arg::Int((reach + at + 10_000) as i64),
                ],
            )
            .unwrap();
            line.push_str(&format!("[{up}s][info][safepoint   ] {msg}\n"));
        } else {
            let wall = hotspot_log::format_wall(hotspot_log::WallTime {
                epoch_ms: wall0 + up_ms as i64,
                offset_min: 0,
            });
            let stamp = format!("{}T{}+0000: {up}: ", &wall[..10], &wall[11..]);
            if n.is_multiple_of(3) {
                let young = 60_000 + rng.below(10_000);
                line.push_str(&format!(
                    "{stamp}[GC (Allocation Failure) [PSYoungGen: {young}K->{}K(76288K)] {young}K->{}K(251392K), 0.{:07} secs] [Times: user=0.03 sys=0.01, real=0.01 secs] \n",
                    young / 6,
                    young / 5,
                    at / 100
                ));
            }
            let total = (reach + at) / 100 * 100;
            let ttsp = reach / 100 * 100;
            let msg = printf(
                Format::Jdk8StoppedTime.hotspot_format().unwrap(),
                &[Arg::Float(total as f64 / 1e9), Arg::Float(ttsp as f64 / 1e9)],
            )
            .unwrap();
            line.push_str(&format!("{stamp}{msg}\n"));
        }
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
        n += 1;
    }
    out.flush()
}
