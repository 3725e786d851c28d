//! The lab's scenarios (see `../shared/LAB.md`): each seed's experiment, its variants, the
//! figure its author published, its ground-truth cause, and how to set it up and run it.
//!
//! Invariant: every scenario tears down what it set up (mounts, CPU hogs, stopped processes)
//! through guards, so a failed or interrupted run leaves nothing behind.

use super::model::{Published, Run, ScenarioResult, VariantResult, Verdict};
use super::verdict::{self, Expect};
use crate::diagnose;
use crate::record::{self, boost::BoostLevel, Launch, Settings};
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Quick,
    Full,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::Quick => "quick",
            Profile::Full => "full",
        }
    }
    fn pick<T>(self, quick: T, full: T) -> T {
        match self {
            Profile::Quick => quick,
            Profile::Full => full,
        }
    }
}

pub struct VariantSpec {
    pub id: &'static str,
    pub label: &'static str,
    pub expect: Expect,
    pub culprit: Option<&'static str>,
}

pub struct Scenario {
    pub id: &'static str,
    pub seed: &'static str,
    pub title: &'static str,
    pub cause: &'static str,
    pub published: fn() -> Published,
    pub metric: &'static str,
    pub unit: &'static str,
    pub variants: Vec<VariantSpec>,
    pub needs_fuse: bool,
    pub needs_root: bool,
    /// Why the effect may not show on today's kernel or JDK, for the verdict.
    pub why_not: &'static str,
    /// Roughly how long one run takes, per profile, for the progress bar's first estimate.
    pub run_secs: (u64, u64),
}

fn published(text: &str, machine: &str, baseline: Option<f64>, mitigation: Option<f64>) -> Published {
    Published { text: text.into(), machine: machine.into(), baseline, mitigation }
}

pub fn catalog() -> Vec<Scenario> {
    vec![
        Scenario {
            id: "counted-loop",
            seed: "004 (MeasureJitter / EnableBiasedLocking)",
            title: "a counted int loop holds every thread out of a safepoint",
            cause: "no-safepoint-poll",
            published: || published("the jitter thread blocked 2.5 s once per run; normally 0.4 ms", "the author's laptop, HotSpot of 2013", Some(2500.0), Some(0.4)),
            metric: "jitter thread's worst lateness",
            unit: "ms",
            variants: vec![
                VariantSpec { id: "no-poll", label: "-XX:+UseParallelGC -XX:-UseCountedLoopSafepoints", expect: Expect::Cause("no-safepoint-poll"), culprit: Some("counted-loop") },
                VariantSpec { id: "strip-mining", label: "default G1, loop strip mining", expect: Expect::NoStall, culprit: None },
            ],
            needs_fuse: false,
            needs_root: false,
            why_not: "loop strip mining (JDK 10+) keeps a poll in long counted loops",
            run_secs: (4, 16),
        },
        Scenario {
            id: "mmap-fault",
            seed: "000 (LongTTSP)",
            title: "a MappedByteBuffer read on a slow disk holds the safepoint",
            cause: "major-fault",
            published: || published("a 5 s injected read delay gave 4.04 s stopped, 4.039 s of it reaching the safepoint", "xfs on a ddi-delayed disk, JDK 11 (2022)", Some(4040.0), None),
            metric: "longest safepoint request",
            unit: "ms",
            variants: vec![
                VariantSpec { id: "mmap", label: "MappedByteBuffer.get (the seed)", expect: Expect::Cause("major-fault"), culprit: Some("reader-thread") },
                VariantSpec { id: "pread", label: "FileChannel.read (native, safepoint-safe)", expect: Expect::NoStall, culprit: None },
                VariantSpec { id: "prefault", label: "page cache warmed off the critical path", expect: Expect::NoStall, culprit: None },
            ],
            needs_fuse: true,
            needs_root: false,
            why_not: "",
            run_secs: (3, 8),
        },
        Scenario {
            id: "tlb-shootdown",
            seed: "002 (tlb-shootdown, CIDR 2022)",
            title: "mapping and unmapping many small files floods every CPU with TLB flushes",
            cause: "tlb-shootdown",
            published: || {
                published("50,000 files × 100 reads: mmap 834.9 ms, buffer pool 657.0 ms (21% faster); TLB shootdowns +321,785 vs +779", "12 cores, 64 GB (2025)", Some(834.9), Some(657.0))
            },
            metric: "time to read every file",
            unit: "ms",
            variants: vec![
                VariantSpec { id: "mmap", label: "map, read, unmap each file", expect: Expect::IfStall("tlb-shootdown"), culprit: None },
                VariantSpec { id: "pool", label: "pread into pooled buffers (cleared before reuse)", expect: Expect::NoStall, culprit: None },
            ],
            needs_fuse: false,
            needs_root: false,
            why_not: "with two CPUs there are few others to interrupt, and KVM's paravirtual flush skips idle vCPUs",
            run_secs: (3, 10),
        },
        Scenario {
            id: "mmap-lock",
            seed: "001 (Java RTS futexes)",
            title: "a thread mapping 100 MB delays another thread's futex wake-ups",
            cause: "mmap-lock",
            published: || published("up to 1 s of latency in a real-time thread while another thread mapped 100 MB", "Java RTS on an RT Linux kernel (2008)", Some(1000.0), None),
            metric: "waiter's worst lateness",
            unit: "ms",
            variants: vec![
                VariantSpec { id: "shared-mlock", label: "process-shared futex, mlockall, mmap churn", expect: Expect::IfStall("mmap-lock"), culprit: None },
                VariantSpec { id: "private", label: "private futex (glibc's default), no mlock", expect: Expect::NoStall, culprit: None },
                VariantSpec { id: "reuse", label: "shared futex, mlockall, one reused mapping", expect: Expect::NoStall, culprit: None },
            ],
            needs_fuse: false,
            needs_root: false,
            why_not: "since Linux 6.4 page faults take per-VMA locks, and private futexes never took mmap_lock: the waiter no longer waits on the mapping thread",
            run_secs: (3, 11),
        },
        Scenario {
            id: "cpu-contention",
            seed: "003 (SetPriorityClass)",
            title: "threads starved of a CPU reach the safepoint late",
            cause: "cpu-starvation",
            published: || published("TTSP p50 125 → 100 µs and p90 40 ms → 140 µs when boosted, with two or more busy JVMs", "Windows, G1, several JVMs on one host (2020)", Some(40.0), Some(0.14)),
            metric: "TTSP p90",
            unit: "ms",
            variants: vec![
                VariantSpec { id: "no-boost", label: "beside 4 CPU-bound threads", expect: Expect::IfStall("cpu-starvation"), culprit: None },
                VariantSpec { id: "boost", label: "stallscope run --boost (nice -10 while reaching a safepoint)", expect: Expect::IfStall("cpu-starvation"), culprit: None },
                VariantSpec { id: "static-nice", label: "the JVM at nice -5 throughout", expect: Expect::IfStall("cpu-starvation"), culprit: None },
            ],
            needs_fuse: false,
            needs_root: false,
            why_not: "the run queue was not long enough to delay the threads",
            run_secs: (5, 17),
        },
        Scenario {
            id: "frozen",
            seed: "control",
            title: "a JVM stopped with SIGSTOP for a known time",
            cause: "frozen",
            published: || published("none: a control whose answer is known", "-", None, None),
            metric: "longest stall",
            unit: "ms",
            variants: vec![VariantSpec { id: "freeze", label: "SIGSTOP, then SIGCONT", expect: Expect::Cause("frozen"), culprit: None }],
            needs_fuse: false,
            needs_root: false,
            why_not: "",
            run_secs: (4, 7),
        },
    ]
}

/// What every scenario needs from the lab run.
pub struct Ctx<'a> {
    pub profile: Profile,
    pub reps: usize,
    pub out: PathBuf,
    pub java: PathBuf,
    pub workloads: PathBuf,
    pub agent: PathBuf,
    pub stop: &'a AtomicBool,
    /// Called after each run, for progress.
    pub tick: &'a dyn Fn(&str),
}

/// Kills a helper process (and continues it first, in case it was stopped) when dropped.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        // SAFETY: signals to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn me() -> Result<PathBuf> {
    std::env::current_exe().context("finding stallscope's own executable")
}

fn json_line(stdout: &str) -> Result<Value> {
    let last = stdout.lines().rev().find(|l| l.trim_start().starts_with('{')).context("the workload printed no JSON line")?;
    serde_json::from_str(last).context("the workload's JSON line")
}

fn ms(v: &Value) -> Option<f64> {
    v.as_f64().map(|n| n / 1e6)
}

/// One recorded run of a JVM workload: the workload's JSON and the doctor's report.
fn run_jvm(ctx: &Ctx, dir: &Path, jvm_args: &[&str], workload: &[String], launch: Launch) -> Result<(Value, diagnose::Report)> {
    let s = Settings::new(ctx.agent.clone(), dir)?;
    let mut command: Vec<String> = vec![ctx.java.display().to_string()];
    command.extend(jvm_args.iter().map(|a| a.to_string()));
    command.push("-jar".into());
    command.push(ctx.workloads.display().to_string());
    command.extend(workload.iter().cloned());
    let r = record::record_jvm(&s, &command, &launch, ctx.stop)?;
    if !r.status.success() {
        bail!("the workload failed ({}); see {}", r.status, dir.display());
    }
    Ok((json_line(&r.stdout)?, diagnose::diagnose(&s.dir)?))
}

fn quiet_launch() -> Launch {
    Launch { safepoint_timeout: true, boost: None, capture_stdout: true, chatty: false, nice: None }
}

/// Runs a scenario's variants `reps` times each and judges the result.
pub fn execute(sc: &Scenario, ctx: &Ctx) -> Result<ScenarioResult> {
    let started = Instant::now();
    let dir = ctx.out.join(sc.id);
    std::fs::create_dir_all(&dir)?;
    let mut variants: Vec<VariantResult> =
        sc.variants.iter().enumerate().map(|(i, v)| VariantResult { id: v.id.into(), label: v.label.into(), baseline: i == 0, runs: vec![], stats: None }).collect();
    let mut notes = Vec::new();
    let mut env = Env::setup(sc, ctx, &dir, &mut notes)?;
    'reps: for rep in 0..ctx.reps {
        for (i, spec) in sc.variants.iter().enumerate() {
            if ctx.stop.load(std::sync::atomic::Ordering::Relaxed) {
                break 'reps;
            }
            let rec = dir.join(format!("{}-{}", spec.id, rep + 1));
            let t0 = Instant::now();
            let mut run = Run { rep: rep + 1, metrics: BTreeMap::new(), recording: Some(rec.display().to_string()), grade: None, error: None, elapsed_ms: 0 };
            match env.run(sc, spec, ctx, &rec) {
                Ok((metrics, report, min_stall)) => {
                    run.metrics = metrics;
                    run.grade = report.as_ref().and_then(|r| verdict::grade(r, spec.expect, spec.culprit, min_stall));
                }
                Err(e) => run.error = Some(format!("{e:#}")),
            }
            run.elapsed_ms = t0.elapsed().as_millis() as u64;
            (ctx.tick)(&format!("{} {} #{}", sc.id, spec.id, rep + 1));
            variants[i].runs.push(run);
        }
    }
    drop(env);
    for v in &mut variants {
        let vals: Vec<f64> = v.runs.iter().filter_map(|r| r.metrics.get("metric").copied()).collect();
        v.stats = verdict::stats(&vals);
    }
    let (verdict, effect, reason) = judge(sc, &variants);
    notes.extend(side_notes(sc, &variants));
    Ok(ScenarioResult {
        id: sc.id.into(),
        seed: sc.seed.into(),
        title: sc.title.into(),
        cause: sc.cause.into(),
        published: (sc.published)(),
        metric: sc.metric.into(),
        unit: sc.unit.into(),
        variants,
        effect,
        verdict,
        reason,
        notes,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

fn judge(sc: &Scenario, variants: &[VariantResult]) -> (Verdict, Option<f64>, String) {
    if variants.iter().any(|v| v.runs.iter().any(|r| r.error.is_some())) && variants.iter().all(|v| v.stats.is_none()) {
        return (Verdict::Skipped, None, "every run failed; see the runs' errors".into());
    }
    if sc.id == "frozen" {
        // The control: each stall must match the injected pause.
        let runs = &variants[0].runs;
        let ok = !runs.is_empty() && runs.iter().all(|r| matches!((r.metrics.get("metric"), r.metrics.get("injected")), (Some(m), Some(i)) if *m >= *i * 0.9 && *m <= *i * 1.2 + 50.0));
        return if ok {
            (Verdict::Reproduced, None, "every run's longest stall matched the injected pause".into())
        } else {
            (Verdict::Inconclusive, None, "a run's longest stall did not match the injected pause".into())
        };
    }
    let Some(base) = variants.first().and_then(|v| v.stats) else { return (Verdict::Inconclusive, None, "no baseline measurement".into()) };
    let best = variants.iter().skip(1).filter_map(|v| v.stats).min_by(|a, b| a.median.partial_cmp(&b.median).unwrap_or(std::cmp::Ordering::Equal));
    let Some(best) = best else { return (Verdict::Inconclusive, None, "no mitigation measurement".into()) };
    let (v, effect, why) = verdict::verdict(&base, &best);
    let reason = if v == Verdict::NotReproduced && !sc.why_not.is_empty() { format!("{why}: {}", sc.why_not) } else { why.to_string() };
    (v, effect, reason)
}

/// Medians of each variant's secondary measurements, as text.
fn side_notes(sc: &Scenario, variants: &[VariantResult]) -> Vec<String> {
    let keys: &[(&str, &str)] = match sc.id {
        "tlb-shootdown" => &[("tlb_shootdowns", "TLB shootdowns")],
        "mmap-lock" => &[("mmap_hold_p50_ms", "mmap held mmap_lock (p50, ms)"), ("p99_9_ms", "waiter p99.9 (ms)")],
        "cpu-contention" => &[("ttsp_p50_ms", "TTSP p50 (ms)"), ("ttsp_max_ms", "TTSP max (ms)")],
        "mmap-fault" => &[("stopped_over_delay", "longest stop ÷ injected delay"), ("ttsp_max_ms", "TTSP max in the JVM log (ms)")],
        "counted-loop" => &[("ttsp_max_ms", "TTSP max in the JVM log (ms)")],
        _ => &[],
    };
    keys.iter()
        .map(|(k, label)| {
            let per: Vec<String> = variants
                .iter()
                .map(|v| {
                    let vals: Vec<f64> = v.runs.iter().filter_map(|r| r.metrics.get(*k).copied()).collect();
                    match verdict::stats(&vals) {
                        Some(s) => format!("{} {}", v.id, fmt_num(s.median)),
                        None => format!("{} -", v.id),
                    }
                })
                .collect();
            format!("{label}, median: {}", per.join(", "))
        })
        .collect()
}

pub fn fmt_num(v: f64) -> String {
    if v.is_infinite() {
        "∞".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// What a scenario set up: kept for all its runs, removed when dropped.
struct Env {
    helpers: Vec<Helper>,
    data: Option<PathBuf>,
    delay_ms: u64,
}

impl Env {
    fn setup(sc: &Scenario, ctx: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Env> {
        let mut env = Env { helpers: vec![], data: None, delay_ms: 0 };
        match sc.id {
            "mmap-fault" => {
                crate::inject::slowfs::check_fuse()?;
                let (back, mnt) = (dir.join("slowfs-backing"), dir.join("slowfs-mount"));
                std::fs::create_dir_all(&back)?;
                let file = back.join("test.dat");
                write_file(&file, 32 << 20)?;
                env.delay_ms = ctx.profile.pick(300, 1000);
                let child = Command::new(me()?)
                    .args(["inject", "slowfs"])
                    .arg(&back)
                    .arg(&mnt)
                    .args(["--read-delay", &format!("{}ms", env.delay_ms), "--max-delay", "10s"])
                    .stderr(Stdio::null())
                    .spawn()?;
                env.helpers.push(Helper(child));
                let t0 = Instant::now();
                while !crate::inject::slowfs::is_mounted(&mnt) {
                    if t0.elapsed() > Duration::from_secs(10) {
                        bail!("slowfs did not mount at {}", mnt.display());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                env.data = Some(mnt.join("test.dat"));
                notes.push(format!("slow disk: slowfs with a {} ms read delay (the seed injected 5 s with ddi)", env.delay_ms));
            }
            "tlb-shootdown" => {
                let data = dir.join("data");
                let files = ctx.profile.pick(5_000, 50_000).to_string();
                let o = Command::new(&ctx.java).arg("-jar").arg(&ctx.workloads).args(["tlb-readers", "create", "--dir", data.to_str().unwrap_or("."), "--files", &files]).output()?;
                if !o.status.success() {
                    bail!("creating the data files: {}", String::from_utf8_lossy(&o.stderr));
                }
                env.data = Some(data);
                notes.push(format!("{files} one-page files, 2 reader threads (the seed used 12), 100 verified reads per file"));
            }
            _ => {}
        }
        Ok(env)
    }

    /// Runs one variant once: its metrics, its report (when recorded), and the significant
    /// stall length for grading.
    fn run(&mut self, sc: &Scenario, spec: &VariantSpec, ctx: &Ctx, rec: &Path) -> Result<(BTreeMap<String, f64>, Option<diagnose::Report>, u64)> {
        let mut m = BTreeMap::new();
        let p = ctx.profile;
        match sc.id {
            "counted-loop" => {
                let args: Vec<String> = ["counted-loop", "--duration", p.pick("3s", "15s"), "--rounds", p.pick("300", "600"), "--trigger", "threaddump"].iter().map(|s| s.to_string()).collect();
                let jvm: &[&str] = if spec.id == "no-poll" { &["-XX:+UseParallelGC", "-XX:-UseCountedLoopSafepoints"] } else { &[] };
                let (j, r) = run_jvm(ctx, rec, jvm, &args, quiet_launch())?;
                m.insert("metric".into(), ms(&j["jitter"]["max_ns"]).context("jitter")?);
                m.insert("ttsp_max_ms".into(), r.summary.ttsp_max_ns.unwrap_or(0) as f64 / 1e6);
                Ok((m, Some(r), 50_000_000))
            }
            "mmap-fault" => {
                let file = self.data.clone().context("no data file")?;
                let o = Command::new(me()?).args(["inject", "evict"]).arg(&file).output()?;
                if !o.status.success() {
                    bail!("evicting {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
                }
                let args: Vec<String> = ["mapped-read", "--file", file.to_str().unwrap_or(""), "--mode", spec.id, "--reads", p.pick("2", "3"), "--stride", "4m", "--every", "50ms"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                let (j, r) = run_jvm(ctx, rec, &[], &args, quiet_launch())?;
                let longest = ms(&j["safepoints"]["max_ns"]).context("safepoints")?;
                m.insert("metric".into(), longest);
                m.insert("stopped_over_delay".into(), longest / self.delay_ms as f64);
                m.insert("ttsp_max_ms".into(), r.summary.ttsp_max_ns.unwrap_or(0) as f64 / 1e6);
                Ok((m, Some(r), self.delay_ms * 1_000_000 / 3))
            }
            "tlb-shootdown" => {
                let data = self.data.clone().context("no data")?;
                let files = p.pick("5000", "50000");
                let args: Vec<String> = ["tlb-readers", "read", "--dir", data.to_str().unwrap_or(""), "--files", files, "--threads", "2", "--reads", "100", "--mode", spec.id]
                    .iter()
                    .map(|s| s.to_string())
                    .collect();
                let (j, r) = run_jvm(ctx, rec, &[], &args, quiet_launch())?;
                if j["failed"].as_u64() != Some(0) {
                    bail!("reads failed verification: {j}");
                }
                m.insert("metric".into(), ms(&j["elapsed_ns"]).context("elapsed")?);
                m.insert("tlb_shootdowns".into(), j["tlb_shootdowns_total"].as_f64().unwrap_or(0.0));
                Ok((m, Some(r), 50_000_000))
            }
            "mmap-lock" => {
                let (futex, mlock, churn) = match spec.id {
                    "shared-mlock" => ("shared", true, "churn"),
                    "private" => ("private", false, "churn"),
                    _ => ("shared", true, "reuse"),
                };
                let mut command = vec![me()?.display().to_string(), "workload".into(), "futex-mmap".into(), "--heartbeat".into(), "--futex".into(), futex.into(), "--churn".into(), churn.into()];
                command.extend(["--duration".to_string(), p.pick("1500ms", "10s").to_string()]);
                if mlock {
                    command.push("--mlock".into());
                }
                let s = Settings::new(ctx.agent.clone(), rec)?;
                let r = record::record_native(&s, &command, &quiet_launch(), ctx.stop)?;
                if !r.status.success() {
                    bail!("futex-mmap failed ({})", r.status);
                }
                let j = json_line(&r.stdout)?;
                let v = &j["variants"][0];
                m.insert("metric".into(), ms(&v["max_ns"]).context("max")?);
                m.insert("p99_9_ms".into(), ms(&v["p99_9_ns"]).unwrap_or(0.0));
                m.insert("mmap_hold_p50_ms".into(), ms(&v["mmap_p50_ns"]).unwrap_or(0.0));
                Ok((m, Some(diagnose::diagnose(&s.dir)?), 20_000_000))
            }
            "cpu-contention" => {
                let secs = p.pick(3, 15);
                let hog = Command::new(me()?).args(["inject", "cpu-hog", "--threads", "4", "--for", &format!("{}s", secs + 20)]).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
                let _hog = Helper(hog);
                std::thread::sleep(Duration::from_millis(300));
                std::fs::create_dir_all(rec)?;
                let log = std::fs::canonicalize(rec)?.join("safepoint.log");
                let args: Vec<String> =
                    ["safepoint-storm", "--threads", "2", "--duration", &format!("{secs}s"), "--every", "10ms", "--log", log.to_str().unwrap_or("")].iter().map(|s| s.to_string()).collect();
                let mut launch = quiet_launch();
                match spec.id {
                    "boost" => launch.boost = Some((BoostLevel::Nice(-10), 2_000_000)),
                    "static-nice" => launch.nice = Some(-5),
                    _ => {}
                }
                let (j, r) = run_jvm(ctx, rec, &[], &args, launch)?;
                m.insert("metric".into(), ms(&j["ttsp"]["p90_ns"]).context("ttsp")?);
                m.insert("ttsp_p50_ms".into(), ms(&j["ttsp"]["p50_ns"]).unwrap_or(0.0));
                m.insert("ttsp_max_ms".into(), ms(&j["ttsp"]["max_ns"]).unwrap_or(0.0));
                Ok((m, Some(r), 5_000_000))
            }
            "frozen" => {
                let injected = p.pick(500u64, 2000);
                let s = Settings::new(ctx.agent.clone(), rec)?;
                let dir = s.dir.clone();
                let command: Vec<String> = vec![ctx.java.display().to_string(), "-jar".into(), ctx.workloads.display().to_string(), "idle".into(), "--duration".into(), p.pick("3s", "6s").into()];
                let stop = ctx.stop;
                let out = std::thread::scope(|scope| -> Result<(std::process::ExitStatus, u64)> {
                    let h = scope.spawn(|| record::record_jvm(&s, &command, &quiet_launch(), stop));
                    let pid = wait_for_pid(&dir)?;
                    let hb = procwatch::heartbeat::default_path(pid);
                    let t0 = Instant::now();
                    while !hb.exists() && t0.elapsed() < Duration::from_secs(20) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    std::thread::sleep(Duration::from_millis(800));
                    let stopped = crate::inject::freeze::freeze(pid, Duration::from_millis(injected), stop)?;
                    let r = h.join().map_err(|_| anyhow::anyhow!("the recorder panicked"))??;
                    Ok((r.status, stopped.as_millis() as u64))
                })?;
                if !out.0.success() {
                    bail!("the idle JVM failed ({})", out.0);
                }
                let r = diagnose::diagnose(&dir)?;
                m.insert("metric".into(), r.summary.longest_stall_ns as f64 / 1e6);
                m.insert("injected".into(), out.1 as f64);
                Ok((m, Some(r), 100_000_000))
            }
            other => bail!("unknown scenario {other}"),
        }
    }
}

fn wait_for_pid(dir: &Path) -> Result<i32> {
    let t0 = Instant::now();
    loop {
        if let Ok(meta) = crate::recording::read_meta(dir) {
            return Ok(meta.pid);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("the recorded JVM never started");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn write_file(p: &Path, bytes: usize) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(p)?;
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..bytes >> 20 {
        for c in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        f.write_all(&buf)?;
    }
    f.sync_all()?;
    Ok(())
}
