//! Writes a synthetic recording directory for the report benchmark (bench/report_html.sh):
//! HOURS of a JVM with SAFEPOINTS safepoints spread over it, STALLS stalls with thread samples,
//! the agent's and the control meter's interval logs (1 s intervals) and once-a-second system
//! samples, in the formats of docs/formats/recording.md. Deterministic (a fixed-seed PRNG).
//! It is a stand-in named as such: the shapes are real, the numbers are made up.
//!
//!   cargo run --release --example synth_recording -- OUT_DIR [HOURS] [SAFEPOINTS] [STALLS]

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use recording::disk::CpuTimes;
use recording::disk::JavaThread;
use recording::disk::{Syscall, TaskSample};
use recording::{Event, JvmTotals, Meta, Sample, StallContext, SystemSample, Writer};
use std::io::{BufWriter, Write};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const MONO0: u64 = 5_000_000_000_000;
const EPOCH0_MS: i64 = 1_795_300_000_000;

fn hlog(
    path: &std::path::Path,
    seconds: u64,
    rng: &mut Rng,
    stalls: &[(u64, u64)],
    base_ns: u64,
) -> std::io::Result<()> {
    use base64::Engine;
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let secs = EPOCH0_MS as f64 / 1000.0;
    writeln!(out, "#[Logged with synth_recording (a synthetic stand-in)]")?;
    writeln!(out, "#[Histogram log format version 1.3]")?;
    writeln!(out, "#[StartTime: {secs:.3} (seconds since epoch), synthetic]")?;
    writeln!(out, "#[BaseTime: {secs:.3} (seconds since epoch)]")?;
    writeln!(
        out,
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
    )?;
    let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    let mut ser = V2DeflateSerializer::new();
    let mut buf = Vec::new();
    let mut si = 0;
    for s in 0..seconds {
        h.reset();
        for _ in 0..1000 {
            h.record(base_ns + rng.below(base_ns)).unwrap();
        }
        while si < stalls.len() && stalls[si].0 / 1_000_000_000 <= s {
            if stalls[si].0 / 1_000_000_000 == s {
                h.record_correct(stalls[si].1, 1_000_000).unwrap();
            }
            si += 1;
        }
        buf.clear();
        ser.serialize(&h, &mut buf).unwrap();
        writeln!(
            out,
            "{s}.000,1.000,{:.3},{}",
            h.max() as f64 / 1e6,
            base64::engine::general_purpose::STANDARD.encode(&buf)
        )?;
    }
    out.flush()
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1).map(std::path::PathBuf::from) else {
        eprintln!("usage: synth_recording OUT_DIR [HOURS=24] [SAFEPOINTS=100000] [STALLS=300]");
        std::process::exit(2);
    };
    let hours: u64 = args.get(2).map_or(24, |v| v.parse().expect("HOURS"));
    let n_sp: u64 = args.get(3).map_or(100_000, |v| v.parse().expect("SAFEPOINTS"));
    let n_stalls: u64 = args.get(4).map_or(300, |v| v.parse().expect("STALLS"));
    // The header and the JSON Lines files go through the recorder's own writer and types, so
    // this stand-in cannot drift from the format the doctor reads.
    let meta = Meta {
        format: Some(recording::FORMAT),
        stallscope_version: env!("CARGO_PKG_VERSION").into(),
        mode: "run".into(),
        command: ["java", "-jar", "synthetic.jar"].map(String::from).to_vec(),
        pid: 4242,
        java_version: Some("17.0.15".into()),
        kernel: "synthetic".into(),
        cpus: 2,
        bpf: false,
        not_a_jvm: false,
        privileges_note: Some(
            "a synthetic recording (bench/report_html.sh): no privileged evidence".into(),
        ),
        start_mono_ns: MONO0,
        start_epoch_ms: EPOCH0_MS,
        clock_ticks: 100,
        threshold_ns: 5_000_000,
        sample_interval_ns: 2_000_000,
        safepoint_timeout_ms: Some(5),
        ..Meta::default()
    };
    let mut w = Writer::open(&dir, &meta).map_err(std::io::Error::other)?;
    let seconds = hours * 3600;
    let span_ns = seconds * 1_000_000_000;
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let threshold = meta.threshold_ns;

    // Stalls: evenly spread, 5 ms to 2 s, each inside a long safepoint.
    let mut stalls: Vec<(u64, u64)> = (0..n_stalls)
        .map(|i| ((i + 1) * span_ns / (n_stalls + 1), threshold + rng.below(2_000_000_000)))
        .collect();
    stalls.sort();

    // Safepoints: the stalls' own, then short ones spread over the rest.
    let ops = [
        "G1CollectForAllocation",
        "Cleanup",
        "ThreadDump",
        "RevokeBias",
        "G1Concurrent",
        "HandshakeAllThreads",
    ];
    let mut sps: Vec<(u64, u64, u64, &str)> =
        stalls.iter().map(|(t, d)| (*t, *d, 200_000, "ThreadDump")).collect();
    while (sps.len() as u64) < n_sp {
        let t = rng.below(span_ns);
        sps.push((
            t,
            2_000 + rng.below(200_000),
            50_000 + rng.below(5_000_000),
            ops[rng.below(ops.len() as u64) as usize],
        ));
    }
    sps.sort_by_key(|s| s.0);
    let mut log = BufWriter::new(std::fs::File::create(dir.join("safepoint.log"))?);
    let mut last_end = 0u64;
    for (t, ttsp, at, op) in &sps {
        let total = ttsp + at;
        let end = MONO0 + t + total;
        let up = (t + total) as f64 / 1e9;
        writeln!(
            log,
            "[{up:.3}s][{end}ns][info   ][safepoint        ] Safepoint \"{op}\", Time since last: {} ns, Reaching safepoint: {ttsp} ns, Cleanup: 1000 ns, At safepoint: {at} ns, Total: {total} ns",
            t.saturating_sub(last_end)
        )?;
        last_end = t + total;
    }
    log.flush()?;

    // Events and samples: 24 threads, the culprit running, the rest parked.
    w.events
        .line(&Event::MeterRunning {
            t: MONO0 + 1_000_000,
            resolution_ns: 1_000_000,
            meter_tid: 4300,
            safepoint_probes: false,
            probes_refused: None,
        })
        .map_err(std::io::Error::other)?;
    let thread = |tid: i32, state: char, exec: u64, wchan: &str| TaskSample {
        tid,
        comm: if tid == 4301 { "worker-1".to_string() } else { format!("pool-{tid}") },
        state,
        utime_ticks: exec / 10_000_000,
        exec_ns: exec,
        timeslices: 1,
        wchan: wchan.into(),
        syscall: if state == 'R' { Syscall::Running } else { Syscall::Unknown },
        ..TaskSample::default()
    };
    for (i, (t, d)) in stalls.iter().enumerate() {
        let n = i as u32 + 1;
        let start = MONO0 + t;
        w.events
            .line(&Event::StallBegin {
                t: start + threshold,
                stall: n,
                last_tick_ns: start - 1_000_000,
                expected_ns: start,
                by: Default::default(),
            })
            .map_err(std::io::Error::other)?;
        w.context
            .line(&StallContext {
                t: start + threshold,
                stall: n,
                java_threads: vec![JavaThread {
                    tid: 4301,
                    java_id: 31,
                    matched: "self".into(),
                    daemon: false,
                    name: "worker-1 (synthetic)".into(),
                }],
                maps: Vec::new(),
                mapped_files: Vec::new(),
                in_memory_files: Vec::new(),
                writeback_files: Vec::new(),
                maps_t: None,
            })
            .map_err(std::io::Error::other)?;
        let mut k = 0u64;
        let mut s = threshold;
        while s < *d {
            let threads: Vec<TaskSample> = if k == 0 {
                (4300..4324)
                    .map(|tid| {
                        if tid == 4301 {
                            thread(tid, 'R', s, "")
                        } else {
                            thread(tid, 'S', 1000, "futex_do_wait")
                        }
                    })
                    .collect()
            } else {
                vec![thread(4301, 'R', s, "")]
            };
            w.samples
                .line(&Sample {
                    t: start + s,
                    stall: n,
                    full: k == 0,
                    baseline: false,
                    threads,
                    gone: Vec::new(),
                })
                .map_err(std::io::Error::other)?;
            k += 1;
            // 500 Hz for a second, then 50 Hz: keeps long stalls' samples proportionate.
            s += if s < 1_000_000_000 { 2_000_000 } else { 20_000_000 };
        }
        w.events
            .line(&Event::StallEnd {
                t: start + d + 100_000,
                stall: n,
                resumed_ns: start + d,
                control_max_late_ns: 80_000,
                control_queued_ns: None,
                resumed: true,
                dropped_samples: 0,
                exiting: false,
                thread_reads: None,
            })
            .map_err(std::io::Error::other)?;
    }
    w.events
        .line(&Event::TargetExit { t: MONO0 + span_ns, code: Some(0), signal: None })
        .map_err(std::io::Error::other)?;

    // Once-a-second system samples.
    let (mut tlb, mut steal, mut psi, mut rd) = (0u64, 0u64, 0u64, 0u64);
    for s in 0..seconds {
        tlb += rng.below(200);
        steal += rng.below(3);
        psi += rng.below(100_000);
        rd += rng.below(5_000_000);
        w.system
            .line(&SystemSample {
                t: MONO0 + s * 1_000_000_000,
                stall: 0,
                baseline: true,
                tlb: Some(vec![tlb / 2, tlb - tlb / 2]),
                cpu: Some(CpuTimes {
                    user: s * 100,
                    system: s * 10,
                    idle: s * 90,
                    steal,
                    ..CpuTimes::default()
                }),
                psi_cpu_us: Some(psi),
                psi_io_us: Some(0),
                psi_memory_us: Some(0),
                jvm: Some(JvmTotals {
                    threads: 24,
                    exec_ns: s * 100_000_000,
                    run_delay_ns: rd,
                    majflt: 0,
                }),
                ..SystemSample::default()
            })
            .map_err(std::io::Error::other)?;
    }
    drop(w);

    hlog(&dir.join("hiccups.hlog"), seconds, &mut rng, &stalls, 50_000)?;
    hlog(&dir.join("control.hlog"), seconds, &mut rng, &[], 80_000)?;
    // What the doctor reads, read back: a stand-in that no longer parses fails here, not in the
    // benchmark.
    recording::Recording::read(&dir, None).map_err(std::io::Error::other)?;
    eprintln!(
        "synth_recording: {} h, {} safepoints, {} stalls in {}",
        hours,
        sps.len(),
        stalls.len(),
        dir.display()
    );
    Ok(())
}
