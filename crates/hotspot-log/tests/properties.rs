//! Property tests over the parser: every shape HotSpot prints, with random values and random
//! decorators, reads back exactly; and no input whatever makes it panic or lose count of lines.

use hotspot_log::formats::Format;
use hotspot_log::line::{Event, Outcome, classify};
use hotspot_log::render::{Arg, printf};
use hotspot_log::{Safepoint, Scanner};
use proptest::prelude::*;

fn op_name() -> impl Strategy<Value = String> {
    "[A-Z][A-Za-z0-9]{0,29}"
}

/// A random UL decorator prefix and the clocks it carries, or a JDK 8 prefix, or nothing.
#[derive(Debug, Clone)]
struct Prefix {
    text: String,
    uptime_ns: Option<u64>,
    mono_ns: Option<u64>,
}

fn ul_prefix() -> impl Strategy<Value = Prefix> {
    (
        proptest::option::of(0u64..10_000_000), // uptime in ms
        proptest::option::of(1_000_000_000u64..10_000_000_000_000), // timenanos
        any::<bool>(),
        0usize..3,
        proptest::sample::select(vec!["safepoint", "safepoint,stats", "safepoint,cleanup"]),
        0usize..8,
        any::<bool>(),
    )
        .prop_map(|(up, mono, level, lpad, tags, tpad, pid)| {
            let mut text = String::new();
            if let Some(ms) = up {
                text.push_str(&format!("[{}.{:03}s]", ms / 1000, ms % 1000));
            }
            if let Some(n) = mono {
                text.push_str(&format!("[{n}ns]"));
            }
            if pid {
                text.push_str("[4242][4243]");
            }
            if level {
                text.push_str(&format!("[info{}]", " ".repeat(lpad)));
            }
            text.push_str(&format!("[{tags}{}] ", " ".repeat(tpad)));
            Prefix { text, uptime_ns: up.map(|ms| ms * 1_000_000), mono_ns: mono }
        })
}

fn ns() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..10_000, 0u64..10_000_000_000, 0u64..1u64 << 40]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn safepoint_lines_read_back_exactly(
        op in op_name(), p in ul_prefix(),
        since in ns(), reach in ns(), cleanup in ns(), at in ns(), leave in ns(), total in ns(),
        runnable in 0i64..5000, threads in 0i64..5000, shape in 0usize..4,
    ) {
        let (format, args): (Format, Vec<Arg>) = match shape {
            0 => (Format::Jdk13Safepoint, vec![Arg::Str(&op), Arg::Int(since as i64), Arg::Int(reach as i64), Arg::Int(at as i64), Arg::Int(total as i64)]),
            1 => (Format::Jdk17Safepoint, vec![Arg::Str(&op), Arg::Int(since as i64), Arg::Int(reach as i64), Arg::Int(cleanup as i64), Arg::Int(at as i64), Arg::Int(total as i64)]),
            2 => (Format::Jdk21Safepoint, vec![Arg::Str(&op), Arg::Int(since as i64), Arg::Int(reach as i64), Arg::Int(cleanup as i64), Arg::Int(at as i64), Arg::Int(leave as i64), Arg::Int(total as i64)]),
            _ => (Format::Jdk22Safepoint, vec![Arg::Str(&op), Arg::Int(since as i64), Arg::Int(reach as i64), Arg::Int(at as i64), Arg::Int(leave as i64), Arg::Int(total as i64), Arg::Int(runnable), Arg::Int(threads)]),
        };
        let line = format!("{}{}", p.text, printf(format.hotspot_format().unwrap(), &args).unwrap());
        let Outcome::Known(c) = classify(line.as_bytes()) else { panic!("not recognised: {line}") };
        prop_assert_eq!(c.format, format);
        prop_assert_eq!(c.stamps.uptime_ns, p.uptime_ns);
        prop_assert_eq!(c.stamps.mono_ns, p.mono_ns);
        let Event::Safepoint { op: got, times } = c.event else { panic!("{line}") };
        prop_assert_eq!(got, op.as_bytes());
        prop_assert_eq!((times.since_last_ns, times.reaching_ns, times.at_safepoint_ns, times.total_ns), (Some(since), reach, at, total));
        if shape == 1 || shape == 2 { prop_assert_eq!(times.cleanup_ns, Some(cleanup)); }
        if shape >= 2 { prop_assert_eq!(times.leaving_ns, Some(leave)); }
        if shape == 3 { prop_assert_eq!((times.threads_runnable, times.threads_total), (Some(runnable as u32), Some(threads as u32))); }
    }

    #[test]
    fn stopped_time_reads_back_to_the_100ns(
        total_100ns in 0u64..100_000_000_000, ttsp_100ns in 0u64..100_000_000_000,
        stamps in 0usize..3, up_ms in 0u64..100_000_000, ul in any::<bool>(),
    ) {
        // %3.7f has 100 ns resolution, so values are multiples of 100 ns.
        let (total, ttsp) = (total_100ns * 100, ttsp_100ns * 100);
        let msg = printf(Format::Jdk8StoppedTime.hotspot_format().unwrap(),
            &[Arg::Float(total as f64 / 1e9), Arg::Float(ttsp as f64 / 1e9)]).unwrap();
        let up = format!("{}.{:03}", up_ms / 1000, up_ms % 1000);
        let line = match (ul, stamps) {
            (true, _) => format!("[{up}s][info][safepoint] {msg}"),
            (false, 0) => msg.clone(),
            (false, 1) => format!("{up}: {msg}"),
            (false, _) => format!("2016-03-01T10:00:00.123+0000: {up}: {msg}"),
        };
        let Outcome::Known(c) = classify(line.as_bytes()) else { panic!("not recognised: {line}") };
        prop_assert_eq!(c.format, if ul { Format::UlStoppedTime } else { Format::Jdk8StoppedTime });
        prop_assert_eq!(c.event, Event::Stopped { total_ns: total, ttsp_ns: Some(ttsp) });
        if ul || stamps > 0 { prop_assert_eq!(c.stamps.uptime_ns, Some(up_ms * 1_000_000)); }
    }

    #[test]
    fn statistics_rows_read_back(
        op in op_name(), start_ms in 0u64..10_000_000, ints in proptest::collection::vec(0i64..100_000, 9),
        shape in 0usize..4, decorated in any::<bool>(),
    ) {
        let f = [Format::Jdk8Stats, Format::Jdk11Stats, Format::Jdk13Stats, Format::Jdk25Stats][shape];
        let start = Arg::Float(start_ms as f64 / 1000.0);
        let i = |k: usize| Arg::Int(ints[k]);
        let args: Vec<Arg> = match f {
            Format::Jdk8Stats | Format::Jdk11Stats => vec![start, Arg::Str(&op), i(0), i(1), i(2), i(3), i(4), i(5), i(6), i(7), i(8)],
            Format::Jdk13Stats => vec![Arg::Str(&op), i(0), i(1), i(3), i(4), i(5), i(6), i(8)],
            _ => vec![Arg::Str(&op), i(0), i(1), i(3), i(5), i(6), i(8)],
        };
        let msg = printf(f.hotspot_format().unwrap(), &args).unwrap();
        let line = if decorated || shape >= 2 { format!("[1.000s][debug][safepoint,stats] {msg}") } else { msg };
        let Outcome::Known(c) = classify(line.as_bytes()) else { panic!("not recognised: {line}") };
        prop_assert_eq!(c.format, f);
        let Event::StatsRow(r) = c.event else { panic!("{line}") };
        prop_assert_eq!(r.op, op.as_bytes());
        prop_assert_eq!(r.threads_total, ints[0] as u32);
        prop_assert_eq!(r.page_traps, Some(ints[8] as u32));
        match f {
            Format::Jdk8Stats | Format::Jdk11Stats => {
                prop_assert_eq!(r.start_uptime_ns, Some(start_ms * 1_000_000));
                prop_assert_eq!((r.sync_ns, r.vmop_ns), (ints[5] as u64 * 1_000_000, ints[7] as u64 * 1_000_000));
            }
            Format::Jdk13Stats => prop_assert_eq!((r.sync_ns, r.cleanup_ns, r.vmop_ns, r.total_ns), (ints[3] as u64, Some(ints[4] as u64), ints[5] as u64, ints[6] as u64)),
            _ => prop_assert_eq!((r.sync_ns, r.vmop_ns, r.total_ns), (ints[3] as u64, ints[5] as u64, ints[6] as u64)),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_lines_add_up(data in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let _ = classify(&data);
        let mut scanner = Scanner::new().keep_examples(2);
        let mut n = 0u64;
        let ok = scanner.scan(0, &data[..], &mut |_s: &Safepoint| n += 1).is_ok();
        let rep = scanner.finish(&mut |_s: &Safepoint| n += 1);
        if ok {
            prop_assert_eq!(rep.lines_total, rep.lines_recognised + rep.lines_unrecognised + rep.lines_other + rep.truncated_last_lines);
            let expected_lines = data.split(|&b| b == b'\n').count() as u64 - u64::from(data.last() == Some(&b'\n') || data.is_empty());
            prop_assert_eq!(rep.lines_total, expected_lines);
        }
        prop_assert_eq!(n, rep.safepoints);
    }

    #[test]
    fn mutated_real_lines_never_panic(
        which in 0usize..REAL.len(), cut in 0usize..400, flip in 0usize..400, byte in any::<u8>(),
    ) {
        let mut line = REAL[which].as_bytes().to_vec();
        if flip < line.len() { line[flip] = byte; }
        line.truncate(cut.max(1));
        let _ = classify(&line);
        let mut text = REAL.join("\n").into_bytes();
        text.push(b'\n');
        text.extend_from_slice(&line);
        let mut scanner = Scanner::new();
        let _ = scanner.scan(0, &text[..], &mut |_s: &Safepoint| {});
        let rep = scanner.finish(&mut |_s: &Safepoint| {});
        prop_assert_eq!(rep.lines_total, rep.lines_recognised + rep.lines_unrecognised + rep.lines_other + rep.truncated_last_lines);
    }
}

const REAL: [&str; 8] = [
    "[1.379s][131758746765ns][info   ][safepoint        ] Safepoint \"Cleanup\", Time since last: 1000203690 ns, Reaching safepoint: 364760625 ns, Cleanup: 112898 ns, At safepoint: 31637 ns, Total: 364905160 ns",
    "[1.118s][141477179041ns][info ][safepoint,stats] ParallelGCCollect            [             11               1 ][         69894759    7328575   77223334 ]               1",
    "[2.598s][132977343405ns][warning][safepoint        ] # \"spinner\" #12 daemon prio=5 os_prio=0 cpu=2528.70ms elapsed=2.55s tid=0x00007fcabc0e99c0 nid=0xa01 runnable  [0x0000000000000000]",
    "2016-03-01T10:00:00.123+0000: 12.345: Total time for which application threads were stopped: 0.0001794 seconds, Stopping threads took: 0.0000587 seconds",
    "4.144: EnableBiasedLocking          [      10          1              1    ]      [  2678     0  2678     0     0    ]  0   ",
    "[0.5s][info][safepoint] Entering safepoint region: RevokeBias",
    "# SafepointSynchronize::begin: Threads which did not reach the safepoint:",
    "[1.118s][info ][safepoint      ] Safepoint \"ParallelGCCollect\", Time since last: 1024975978 ns, Reaching safepoint: 69894759 ns, At safepoint: 7309436 ns, Leaving safepoint: 19139 ns, Total: 77223334 ns, Threads: 1 runnable, 11 total",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Numbers at the edge of u64 anywhere a line has a number: no overflow, no panic, through
    /// the scanner and the summary.
    #[test]
    fn extreme_numbers_never_overflow(vals in proptest::collection::vec(prop_oneof![Just(u64::MAX), Just(u64::MAX / 2), any::<u64>(), 0u64..10], 12), ms in prop_oneof![Just(99_999_999_999u64), any::<u32>().prop_map(u64::from)]) {
        let v = |i: usize| vals[i];
        let text = format!(
            "[{ms}ms][{}ns][info][safepoint] Safepoint \"A\", Time since last: {} ns, Reaching safepoint: {} ns, Cleanup: {} ns, At safepoint: {} ns, Total: {} ns\n\
             [{}ms][info][safepoint] Safepoint \"A\", Time since last: {} ns, Reaching safepoint: {} ns, At safepoint: {} ns, Total: {} ns\n\
             9999-12-31T23:59:59.999+1400: {}.999: Total time for which application threads were stopped: {}.9999999 seconds, Stopping threads took: {}.0 seconds\n\
             {}.999: EnableBiasedLocking          [      10          1              1    ]      [{:6}{:6}{:6}{:6}{:6}    ]  0   \n\
             [1.0s][info][safepoint,stats] ParallelGCCollect            [             11               1 ][ {} {} {} ]               1\n",
            v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7), v(8), v(9), v(10), v(11), v(0), v(1), v(2), v(3) % 1_000_000, v(4) % 1_000_000, v(5) % 1_000_000, v(6) % 1_000_000, v(7) % 1_000_000, v(8), v(9), v(10)
        );
        let mut summary = hotspot_log::Summary::new(hotspot_log::SummaryOptions::default());
        let mut scanner = Scanner::new();
        scanner.scan(0, text.as_bytes(), &mut |s: &Safepoint| summary.add(s)).unwrap();
        let _ = scanner.finish(&mut |s: &Safepoint| summary.add(s));
        let _ = summary.finish();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Thread dumps as `jcmd Thread.print` writes them, old (hex nid) and new (decimal nid,
    /// `#N [tid]`), read back exactly; and any text at all parses without a panic.
    #[test]
    fn thread_dumps_read_back_exactly(
        threads in proptest::collection::vec(("[A-Za-z][A-Za-z0-9 _#-]{0,20}", 1i32..4_000_000, proptest::collection::vec(("[a-z]{1,6}\\.[A-Z][a-z]{0,6}\\.[a-z]{1,8}", proptest::option::of(1u32..99_999)), 0..6)), 1..6),
        new_format in any::<bool>(),
        junk in "\\PC{0,200}",
    ) {
        let mut text = String::from("Full thread dump OpenJDK 64-Bit Server VM:\n\n");
        for (name, nid, frames) in &threads {
            if new_format {
                text += &format!("\"{name}\" #12 [{nid}] prio=5 os_prio=0 cpu=1.00ms elapsed=2.00s tid=0x00007f00 nid={nid} runnable  [0x0]\n");
            } else {
                text += &format!("\"{name}\" #12 daemon prio=5 os_prio=0 cpu=1.00ms elapsed=2.00s tid=0x00007f00 nid=0x{nid:x} runnable  [0x0]\n");
            }
            text += "   java.lang.Thread.State: RUNNABLE\n";
            for (m, line) in frames {
                match line {
                    Some(l) => text += &format!("\tat {m}(Some.java:{l})\n\t- locked <0x0000000089abcdef> (a java.lang.Object)\n"),
                    None => text += &format!("\tat {m}(java.base@17.0.15/Native Method)\n"),
                }
            }
            text += "\n";
        }
        let got = hotspot_log::threaddump::parse(&text);
        prop_assert_eq!(got.len(), threads.len());
        for (g, (name, nid, frames)) in got.iter().zip(&threads) {
            prop_assert_eq!(&g.name, name);
            prop_assert_eq!(g.nid, *nid);
            let methods: Vec<(&str, Option<u32>)> = g.frames.iter().map(|f| (f.method.as_str(), f.line)).collect();
            let want: Vec<(&str, Option<u32>)> = frames.iter().map(|(m, l)| (m.as_str(), *l)).collect();
            prop_assert_eq!(methods, want);
        }
        let _ = hotspot_log::threaddump::parse(&junk);
        let _ = hotspot_log::threaddump::parse(&format!("{text}{junk}"));
    }
}

/// Everything a scan gives, as text: its result, its records and the final accounting, with
/// the slice path's `done` calls checked on the way (never backwards, never past the end).
fn scanned(data: &[u8], slice: bool) -> String {
    scanned_on(data, slice, 1, 0)
}

/// [`scanned`], the slice read on `threads` threads in windows of `window` bytes.
fn scanned_on(data: &[u8], slice: bool, threads: usize, window: usize) -> String {
    let mut got = Vec::new();
    let mut scanner = Scanner::new().keep_examples(3);
    if threads > 1 {
        scanner = scanner.threads(threads, window);
    }
    let result = if slice {
        let last = std::sync::Mutex::new(0usize);
        let done = |n: usize| {
            let mut last = last.lock().unwrap();
            assert!(
                n >= *last && n <= data.len(),
                "done({n}) after done({}) of {}",
                *last,
                data.len()
            );
            *last = n;
        };
        scanner.scan_slice(0, data, &mut |s: &Safepoint| got.push(format!("{s:?}")), &done)
    } else {
        scanner.scan(0, data, &mut |s: &Safepoint| got.push(format!("{s:?}")))
    };
    let report = scanner.finish(&mut |s: &Safepoint| got.push(format!("{s:?}")));
    format!("{result:?}\n{report:?}\n{}", got.join("\n"))
}

proptest! {
    /// A mapped file reads exactly as the same bytes read through `Read`.
    #[test]
    fn a_slice_scans_as_a_stream(lines in proptest::collection::vec(prop_oneof![
        (0usize..REAL.len()).prop_map(|i| REAL[i].as_bytes().to_vec()),
        proptest::collection::vec(any::<u8>(), 0..80),
    ], 0..40), newline_at_end in any::<bool>()) {
        let mut data = lines.join(&b'\n');
        if newline_at_end { data.push(b'\n'); }
        prop_assert_eq!(scanned(&data, true), scanned(&data, false));
    }

    /// Read on several threads, in windows of a few bytes to a few lines, a slice reads as the
    /// stream: windows that begin inside a statistics table or a timeout's thread list are
    /// read again, and line numbers, examples and records come out in order.
    #[test]
    fn a_slice_read_on_threads_scans_as_a_stream(lines in proptest::collection::vec(prop_oneof![
        4 => (0usize..REAL.len()).prop_map(|i| REAL[i].as_bytes().to_vec()),
        2 => (0usize..TABLE.len()).prop_map(|i| TABLE[i].as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..80),
    ], 0..60), newline_at_end in any::<bool>(), threads in 2usize..5, window in 1usize..700) {
        let mut data = lines.join(&b'\n');
        if newline_at_end { data.push(b'\n'); }
        prop_assert_eq!(scanned_on(&data, true, threads, window), scanned(&data, false));
    }
}

/// Lines from inside JDK 8 and 11 statistics tables and timeout blocks, which carry no needle
/// and are read only in context.
const TABLE: [&str; 6] = [
    "         vmop                    [threads: total initially_running wait_to_block]    [time: spin block sync cleanup vmop] page_trap_count",
    "4.144: EnableBiasedLocking          [      10          1              1    ]      [  2678     0  2678     0     0    ]  0   ",
    "12.010: no vm operation             [      11          0              0    ]      [     0     0     0     0   325    ]  0   ",
    "# SafepointSynchronize::begin: Timeout detected:",
    "# \"spinner\" #12 daemon prio=5 os_prio=0 tid=0x00007fcabc0e99c0 nid=0xa01 runnable [0x0000000000000000]",
    "# SafepointSynchronize::begin: (End of list)",
];

/// Across window boundaries (4 MiB) and past a line too long to buffer (64 MiB), the slice and
/// the stream still agree, line numbers included.
#[test]
fn a_large_slice_scans_as_a_stream() {
    let mut data = Vec::new();
    while data.len() < 9 << 20 {
        for l in REAL {
            data.extend_from_slice(l.as_bytes());
            data.push(b'\n');
        }
    }
    data.extend(std::iter::repeat_n(b'x', (64 << 20) + 5));
    data.push(b'\n');
    for l in REAL {
        data.extend_from_slice(l.as_bytes());
        data.push(b'\n');
    }
    let (slice, stream) = (scanned(&data, true), scanned(&data, false));
    let on_threads = scanned_on(&data, true, 2, 1 << 20);
    assert!(on_threads == stream, "read on two threads, the slice differs from the stream");
    assert!(
        slice == stream,
        "slice and stream differ:\n{}\n---\n{}",
        &slice[..slice.len().min(2000)],
        &stream[..stream.len().min(2000)]
    );
}

/// The input's last stamps do not depend on how threads cut it: here the last 100 lines carry
/// no stamp, so one thread's single 4 MiB window has none among its last 64 lines, while a
/// 1 MiB window before the last would.
#[test]
fn the_last_stamps_are_the_same_on_threads() {
    let mut data = Vec::new();
    while data.len() < 3 << 20 {
        data.extend_from_slice(REAL[0].as_bytes());
        data.push(b'\n');
    }
    for _ in 0..100 {
        data.extend_from_slice(b"application output\n");
    }
    let stream = scanned(&data, false);
    assert!(stream.contains("last: None"), "{}", &stream[..stream.len().min(600)]);
    assert_eq!(scanned_on(&data, true, 2, 1 << 20), stream);
}

/// JDK 8's lines, and GC lines between its pauses that hold a needle or do not (the scanner
/// passes over a line that holds none without searching past it, and reads the next pause line
/// in place).
const JDK8_POOL: [&str; 11] = [
    "2023-11-14T22:13:20.013+0000: 0.013: Total time for which application threads were stopped: 0.7268193 seconds, Stopping threads took: 0.7239284 seconds",
    "2023-11-14T22:14:01.999+0000: 41.999: Total time for which application threads were stopped: 0.0000213 seconds, Stopping threads took: 0.0000040 seconds\r",
    "2023-11-14T22:14:02.000+0000: 42.000: Total time for which application threads were stopped: 0.00002134 seconds, Stopping threads took: 0.0000040 seconds",
    "2023-11-14T22:13:20.133+0000: 0.133: [GC (Allocation Failure) [PSYoungGen: 69202K->11533K(76288K)] 69202K->13840K(251392K), 0.0021588 secs] [Times: user=0.03 sys=0.01, real=0.01 secs] ",
    "2023-11-14T22:13:20.140+0000: 0.140: [GC (Allocation Failure) 2023-11-14T22:13:20.141+0000: 0.141: Total time for which application threads were stopped: 0.0001000 seconds, Stopping threads took: 0.0000100 seconds",
    "2023-11-14T22:13:20.150+0000: 0.150: [Full GC (Ergonomics) Application time: 0.0100000 seconds",
    "2023-11-14T22:13:20.160+0000: 0.160: Application time: 0.0392110 seconds",
    "[GC concurrent-root-region-scan-start] SafepointSynchronize junk",
    "java.lang.OutOfMemoryError: Java heap space",
    "",
    "im im im af _c Total time for which",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
    /// A JDK 8 log counts each line as that line read alone: a line that holds a needle as
    /// `classify` reads it, any other as other output.
    #[test]
    fn a_jdk8_log_counts_its_lines_as_each_reads_alone(picks in proptest::collection::vec(0usize..JDK8_POOL.len(), 0..120)) {
        let lines: Vec<&str> = picks.iter().map(|&i| JDK8_POOL[i]).collect();
        let data = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
        let mut scanner = Scanner::new();
        scanner.scan(0, data.as_bytes(), &mut |_: &Safepoint| {}).unwrap();
        let report = scanner.finish(&mut |_: &Safepoint| {});
        let (mut recognised, mut other, mut unrecognised) = (0u64, 0u64, 0u64);
        let mut by_format = std::collections::BTreeMap::new();
        for l in &lines {
            let needle = hotspot_log::prefilter::NEEDLES.iter().any(|n| l.contains(n));
            match classify(l.as_bytes()) {
                Outcome::Known(c) if needle => {
                    recognised += 1;
                    *by_format.entry(c.format).or_insert(0u64) += 1;
                }
                Outcome::Unrecognised if needle => unrecognised += 1,
                _ => other += 1,
            }
        }
        prop_assert_eq!(report.lines_recognised, recognised);
        prop_assert_eq!(report.lines_unrecognised, unrecognised);
        prop_assert_eq!(report.lines_other, other);
        prop_assert_eq!(report.by_format, by_format);
        // And on threads, in windows of a few lines, with the examples and line numbers.
        prop_assert_eq!(scanned_on(data.as_bytes(), true, 3, 300), scanned(data.as_bytes(), false));
    }
}
