//! `stallscope report app.jfr`: the stalls of a flight recording made with JFR alone, graded on
//! the lab's scenarios recorded per JDK and settings (tests/fixtures/jfr, made by
//! scripts/jfr-fixtures.sh), on fresh recordings of this machine's JDK 17 and 25, and on damaged,
//! gzipped and chunked files.

mod common;
use common::*;
use doctor::{Cause, Confidence, InstigatorKind, Report};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Stalls from this long are graded: every stall the report makes at its default threshold.
const GRADED_NS: u64 = 20_000_000;

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/jfr")
}

struct Fixture {
    file: String,
    scenario: String,
    jdk: String,
    settings: String,
    truth: Cause,
    /// The JVM's safepoint log of the same run, when it wrote one.
    gc_log: Option<String>,
}

fn table() -> Vec<Fixture> {
    let t = std::fs::read_to_string(fixtures().join("table.tsv")).unwrap();
    t.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            Fixture {
                file: c[0].into(),
                scenario: c[1].into(),
                jdk: c[2].into(),
                settings: c[3].into(),
                truth: Cause::from_id(c[4]).unwrap_or_else(|| panic!("table.tsv: cause {}", c[4])),
                gc_log: c.get(5).filter(|l| **l != "-").map(|l| l.to_string()),
            }
        })
        .collect()
}

fn report_of(file: &Path, extra: &[&str]) -> Result<Report, String> {
    let o = stallscope().arg("report").arg("--json").args(extra).arg(file).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{}: {err}",
        file.display()
    );
    if !o.status.success() {
        return Err(err);
    }
    serde_json::from_slice(&o.stdout).map_err(|e| format!("{}: not a report ({e})", file.display()))
}

/// How one stall's answer compares with the scenario's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grade {
    Right,
    /// `unknown`, with its reason.
    Unknown,
    /// Another cause at low or medium confidence (a GC the kernel slowed is a long operation
    /// from the file's side: medium at most).
    WrongUnsure,
    /// Another cause at high confidence: never allowed.
    ConfidentWrong,
}

fn grade(r: &Report, truth: Cause) -> Vec<(Grade, String)> {
    r.stalls
        .iter()
        .filter(|s| s.duration_ns >= GRADED_NS)
        .map(|s| {
            let main = &s.findings[0];
            let words = format!(
                "{} {} {:.0}%{}",
                main.cause.id(),
                main.confidence.word(),
                main.share * 100.0,
                main.instigator
                    .as_ref()
                    .map(|i| format!(", by {} \"{}\"", i.kind.id(), i.name))
                    .unwrap_or_default()
            );
            let confidently_wrong = s.findings.iter().any(|f| {
                f.cause != truth && f.cause != Cause::Unknown && f.confidence == Confidence::High
            });
            let g = if confidently_wrong {
                Grade::ConfidentWrong
            } else if main.cause == truth {
                Grade::Right
            } else if main.cause == Cause::Unknown {
                assert!(!main.evidence.is_empty(), "unknown without a reason: {s:?}");
                Grade::Unknown
            } else {
                Grade::WrongUnsure
            };
            (g, words)
        })
        .collect()
}

/// The table of the issue: every fixture, stallscope's answer, graded; no cause named with
/// confidence that is not the scenario's; the right cause wherever the file holds the evidence.
#[test]
fn every_fixture_is_right_or_unknown_and_never_confidently_wrong() {
    let t = table();
    assert!(t.len() >= 20, "tests/fixtures/jfr/table.tsv lists {} recordings", t.len());
    let mut failures = vec![];
    println!(
        "| scenario | JDK | settings | stalls | stallscope's answer (longest stall) | grade | time |"
    );
    println!("|---|---|---|---|---|---|---|");
    for f in &t {
        let path = fixtures().join(&f.file);
        let log = f.gc_log.as_ref().map(|l| fixtures().join(l).display().to_string());
        let extra: Vec<&str> = match &log {
            Some(l) => vec!["--gc-log", l.as_str()],
            None => vec![],
        };
        let t0 = Instant::now();
        let r = report_of(&path, &extra).unwrap_or_else(|e| panic!("{}: {e}", f.file));
        let took = t0.elapsed();
        let grades = grade(&r, f.truth);
        let longest = r
            .stalls
            .iter()
            .filter(|s| s.duration_ns >= GRADED_NS)
            .max_by_key(|s| s.duration_ns)
            .map(|s| s.stall);
        let shown = grades
            .iter()
            .zip(r.stalls.iter().filter(|s| s.duration_ns >= GRADED_NS))
            .find(|(_, s)| Some(s.stall) == longest)
            .map(|((g, w), s)| format!("{w} ({} ms) | {g:?}", s.duration_ns / 1_000_000))
            .unwrap_or_else(|| "no stall over 20 ms | -".into());
        println!(
            "| {} | {} | {}{} | {} | {shown} | {} ms |",
            f.scenario,
            f.jdk,
            f.settings,
            if f.gc_log.is_some() { " + safepoint log" } else { "" },
            grades.len(),
            took.as_millis()
        );
        if grades.iter().any(|(g, _)| *g == Grade::ConfidentWrong) {
            failures.push(format!("{}: confidently wrong: {grades:?}", f.file));
        }
        // Where the file holds the evidence, the right answer.
        let holds = match f.scenario.as_str() {
            "system-gc" | "jcmd-heap-dump" => true,
            // JDK 11's default settings have no jdk.GCCPUTime: its collections stay medium.
            // JDK 25's jdk.SafepointLatency, or async-profiler's samples inside its TTSP windows.
            "counted-loop" => {
                (f.settings == "stalls" && f.jdk == "25") || f.settings == "async-profiler-ttsp"
            }
            "counted-loop-log" => true,
            _ => false,
        };
        if holds && !grades.iter().any(|(g, _)| *g == Grade::Right) {
            failures.push(format!(
                "{}: the file holds the evidence, and no stall is right: {grades:?}",
                f.file
            ));
        }
        // Who asked, where the file says.
        let want = match f.scenario.as_str() {
            "system-gc" => Some((InstigatorKind::JavaThread, "main")),
            "jcmd-heap-dump" => Some((InstigatorKind::AttachClient, "Attach Listener")),
            _ => None,
        };
        if let Some((kind, name)) = want {
            let named = r.stalls.iter().any(|s| {
                s.findings.iter().any(|x| {
                    x.cause == f.truth
                        && x.instigator.as_ref().is_some_and(|i| i.kind == kind && i.name == name)
                })
            });
            if !named {
                failures.push(format!("{}: no {kind:?} \"{name}\" named", f.file));
            }
        }
        assert!(
            r.notes.iter().any(|n| n.contains("flight recording alone")),
            "{}: {:?}",
            f.file,
            r.notes
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The explicit GC's caller and its words: the collection's cause says `System.gc()`.
#[test]
fn a_system_gc_is_named_with_its_caller_and_fix() {
    let f = fixtures().join("system-gc-jdk17-default.jfr.gz");
    let r = report_of(&f, &[]).unwrap();
    let s = stalls_with(&r, Cause::LongVmOperation);
    // Collections for allocation too (the live heap being built); the explicit one is the full.
    let full = s
        .iter()
        .find(|s| s.safepoint.as_ref().is_some_and(|v| v.op == "ParallelGCSystemGC"))
        .unwrap_or_else(|| panic!("no System.gc() among {:?}", causes(&r)));
    let x = &full.findings[0];
    // Medium: a collection the kernel slowed (swap-in, reclaim) would look the same.
    assert_eq!(x.confidence, Confidence::Medium, "{x:?}");
    let who = x.instigator.as_ref().unwrap();
    assert!(who.did.contains("System.gc()"), "{who:?}");
    assert!(x.fix.contains("System.gc()"), "{}", x.fix);
    assert!(x.evidence.iter().any(|e| e.contains("jdk.GarbageCollection")), "{:?}", x.evidence);
}

/// The late thread, by JDK 25's jdk.SafepointLatency (stallscope's stalls.jfc): the loop's
/// thread and its code; not more than medium, since the file has no kernel view.
#[test]
fn safepoint_latency_names_the_loop_and_its_code() {
    let f = fixtures().join("counted-loop-jdk25-stalls.jfr.gz");
    let r = report_of(&f, &[]).unwrap();
    let s = stalls_with(&r, Cause::NoSafepointPoll);
    assert!(!s.is_empty(), "{:?}", causes(&r));
    for s in s {
        let x = &s.findings[0];
        assert_eq!(x.confidence, Confidence::Medium);
        // JFR names a thread as it first saw it: the loop runs on the main thread, which renames
        // itself "counted-loop" once JFR has seen it.
        assert!(["main", "counted-loop"].contains(&x.culprits[0].name.as_str()), "{x:?}");
        let code = x.culprits[0].code.as_ref().expect("its code");
        assert!(
            code.frames.iter().any(|f| f.method.starts_with("io.stallscope.workloads.CountedLoop")),
            "{code:?}"
        );
    }
}

/// async-profiler's `--ttsp` recording (no JDK Flight Recorder): its windows are the times to
/// safepoint, and the thread it sampled on a CPU through one is the loop.
#[test]
fn async_profilers_ttsp_windows_name_the_running_thread() {
    for jdk in ["17", "25"] {
        let f = fixtures().join(format!("counted-loop-jdk{jdk}-async-profiler-ttsp.jfr.gz"));
        let r = report_of(&f, &[]).unwrap();
        let s = stalls_with(&r, Cause::NoSafepointPoll);
        assert!(!s.is_empty(), "JDK {jdk}: {:?}", causes(&r));
        let x = &s[0].findings[0];
        assert!(x.evidence.iter().any(|e| e.contains("profiler.Window")), "{:?}", x.evidence);
        let code = x.culprits[0].code.as_ref().expect("its code");
        assert!(
            code.frames[0].method.starts_with("io.stallscope.workloads.CountedLoop"),
            "{code:?}"
        );
        // The mapped read's reader waits off the CPU in its faults: nobody is named.
        let f = fixtures().join(format!("mapped-read-jdk{jdk}-async-profiler-ttsp.jfr.gz"));
        let r = report_of(&f, &[]).unwrap();
        assert!(
            r.stalls.iter().all(|s| s.findings[0].cause != Cause::NoSafepointPoll),
            "JDK {jdk}: {:?}",
            causes(&r)
        );
    }
}

/// The lab's slow-log: each collection 5-7 s long, its threads mostly off the CPU (writing the GC
/// log to a slow disk). The file cannot say why they waited: unknown, not a long operation.
#[test]
fn a_collection_that_waited_is_not_called_a_long_operation() {
    for jdk in ["17", "25"] {
        let f = fixtures().join(format!("slow-log-jdk{jdk}-default.jfr.gz"));
        let r = report_of(&f, &[]).unwrap();
        let long: Vec<_> = r.stalls.iter().filter(|s| s.duration_ns >= 1_000_000_000).collect();
        assert!(!long.is_empty(), "JDK {jdk}: {:?}", causes(&r));
        for s in long {
            let x = &s.findings[0];
            assert_eq!(x.cause, Cause::Unknown, "JDK {jdk}: {x:?}");
            assert!(x.evidence.iter().any(|e| e.contains("jdk.GCCPUTime")), "{:?}", x.evidence);
        }
    }
}

/// A long time to safepoint the file cannot explain: `unknown`, with what would tell.
#[test]
fn a_time_to_safepoint_without_samples_is_unknown_with_the_reason() {
    let f = fixtures().join("counted-loop-jdk17-default.jfr.gz");
    let r = report_of(&f, &[]).unwrap();
    let long: Vec<_> = r.stalls.iter().filter(|s| s.duration_ns >= GRADED_NS).collect();
    assert!(!long.is_empty(), "{:?}", r.stalls);
    for s in long {
        let x = &s.findings[0];
        assert_eq!(x.cause, Cause::Unknown, "{x:?}");
        assert!(x.evidence.iter().any(|e| e.contains("jdk.SafepointLatency")), "{:?}", x.evidence);
    }
}

/// The same file gzipped, plain, and as a directory of chunk files: the same stalls.
#[test]
fn gzip_plain_and_a_chunk_directory_give_the_same_stalls() {
    let d = scratch("report-jfr-forms");
    let gz = fixtures().join("system-gc-jdk25-default.jfr.gz");
    let plain = d.join("app.jfr");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
        &mut bytes,
    )
    .unwrap();
    std::fs::write(&plain, &bytes).unwrap();
    let repo = d.join("repository");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("2026_11_27_05_00_00.jfr"), &bytes).unwrap();
    let shape = |r: &Report| -> Vec<(u64, Cause)> {
        r.stalls.iter().map(|s| (s.duration_ns, s.findings[0].cause)).collect()
    };
    let a = report_of(&gz, &[]).unwrap();
    assert!(!a.stalls.is_empty());
    assert_eq!(shape(&a), shape(&report_of(&plain, &[]).unwrap()));
    assert_eq!(shape(&a), shape(&report_of(&repo, &[]).unwrap()));
    // Text and HTML too.
    let o = stallscope().args(["report", plain.to_str().unwrap()]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("long VM operation"), "{text}");
    let html = d.join("app.html");
    let o = stallscope()
        .args(["report", "--html", html.to_str().unwrap(), plain.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("long VM operation"), "the page names the cause");
    // Its timeline and table of operations are the file's every safepoint, as the report
    // counts them.
    let report: serde_json::Value = serde_json::from_slice(
        &stallscope().args(["report", "--json", plain.to_str().unwrap()]).output().unwrap().stdout,
    )
    .unwrap();
    let data = page.split("id=\"stallscope-data\"").nth(1).unwrap();
    let data = &data[data.find('>').unwrap() + 1..data.find("</script>").unwrap()];
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    let drawn = data["recording"]["safepoints"]["total_ns"].as_array().unwrap().len();
    assert!(drawn > 0, "no safepoint drawn");
    assert_eq!(drawn as u64, report["summary"]["safepoints"].as_u64().unwrap());
    assert!(!data["recording"]["ops"].as_array().unwrap().is_empty(), "no operation in the table");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Damage anywhere: never a panic; a report of what could be read, or one clear error naming
/// the file; never more stalls than the whole file had. `STALLSCOPE_JFR_SEED` replays a seed.
#[test]
fn damaged_flight_recordings_give_clear_answers() {
    let d = scratch("report-jfr-damage");
    let gz = fixtures().join("jcmd-heap-dump-jdk17-default.jfr.gz");
    let mut whole = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
        &mut whole,
    )
    .unwrap();
    let had = report_of(&gz, &[]).unwrap().stalls.len();
    let (seed, mut rng) = jfr_damage_seed();
    let damaged = d.join("damaged.jfr");
    for case in 0..24 {
        let (b, what) = damage_jfr(&mut rng, &whole, case);
        std::fs::write(&damaged, &b).unwrap();
        let ctx = format!("seed {seed}, case {case}: {what}");
        match report_of(&damaged, &[]) {
            Ok(r) => assert!(r.stalls.len() <= had, "{ctx}: {} stalls of {had}", r.stalls.len()),
            Err(e) => {
                assert!(e.contains("damaged.jfr"), "{ctx}: the error names the file: {e}");
                assert!(e.lines().count() <= 3, "{ctx}: a short error: {e}");
            }
        }
    }
    // A file cut inside its first chunk: nothing to read, and what to try.
    std::fs::write(&damaged, &whole[..whole.len() / 2]).unwrap();
    let e = report_of(&damaged, &[]).unwrap_err();
    assert!(e.contains("byte 0") && e.contains("JFR.dump"), "{e}");
    // Not a recording at all.
    let text = d.join("app.log");
    std::fs::write(&text, "[0.1s][info][safepoint] nothing\n").unwrap();
    let e = report_of(&text, &[]).unwrap_err();
    assert!(e.contains("app.log") && e.contains("flight recording"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
