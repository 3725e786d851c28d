//! The JVM's own stack samples, for naming a culprit's code: the recorder has the JVM keep a
//! flight recording (JFR) of its threads' stacks while it is recorded, and at the end reads the
//! stacks taken near each stall into `frames.jsonl` (`recording::FrameSample`), on the
//! recording's clock and with the host's thread ids.
//!
//! Invariant: asking for stacks never stops the JVM from starting or the recording from
//! finishing: when JFR cannot start or its file cannot be read, `frames.jsonl` says why in a
//! note, and the doctor names culprits without code.
//!
//! Cost (docs/frames.md): JFR's execution sampler at [`PERIOD`], the same period as JFR's own
//! `default` settings, which the JDK documents as meant to be left on in production.

use anyhow::{Context, Result};
use recording::Notices;
use recording::{Appender, Event, FrameSample, FramesLine, FramesNote, Meta, files};
use std::collections::HashMap;
use std::path::Path;

/// How often JFR samples the stacks of threads running Java code (and of threads in native
/// methods).
pub const PERIOD: &str = "20 ms";

/// The name of the recording in the JVM (`JFR.stop name=…` ends it).
pub const NAME: &str = "stallscope";

/// Stacks further than this from a stall are not kept (the doctor uses none further than a
/// second; a safepoint can begin before the stall the meter saw).
const KEEP_AROUND_NS: u64 = 2_000_000_000;

/// Away from a stall's edges one stack per thread per this long is kept: the doctor wants the
/// stack nearest an edge, or the first well inside; a storm of stalls, whose windows cover the
/// whole recording, would otherwise keep every sample of every thread.
const THIN_NS: u64 = 100_000_000;
/// Every stack this close to a stall's start or end is kept.
const EDGE_NS: u64 = 50_000_000;

/// Which stacks `frames.jsonl` keeps: every one near a stall's edge and every safepoint-latency
/// one; elsewhere in a stall's window one per thread per [`THIN_NS`].
struct Thinning {
    edges: Vec<u64>,
    last: HashMap<i32, u64>,
}

impl Thinning {
    fn keep(&mut self, t: u64, tid: i32, latency: bool) -> bool {
        let near_edge = self.edges.iter().any(|e| t.abs_diff(*e) <= EDGE_NS);
        let spaced = self.last.get(&tid).is_none_or(|l| t.saturating_sub(*l) >= THIN_NS);
        if latency || near_edge || spaced {
            if !latency {
                self.last.insert(tid, t);
            }
            return true;
        }
        false
    }
}

/// The settings the JVM records with: stacks, and the four safepoint events at threshold 0 (a
/// few events per safepoint; `report` reads them when the safepoint log has no records).
/// `jdk.SafepointLatency` (JDK 25) records how long a sampled thread took to reach its next
/// safepoint poll; older JDKs ignore the name.
pub fn settings() -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- stallscope: the stacks of the recorded JVM's threads, for naming a stalled thread's code
     (docs/frames.md). -->
<configuration version="2.0" label="stallscope frames" description="Thread stacks sampled every {PERIOD}, for stallscope's doctor">
  <event name="jdk.ExecutionSample"><setting name="enabled">true</setting><setting name="period">{PERIOD}</setting></event>
  <event name="jdk.NativeMethodSample"><setting name="enabled">true</setting><setting name="period">{PERIOD}</setting></event>
  <event name="jdk.SafepointLatency"><setting name="enabled">true</setting><setting name="threshold">1 ms</setting><setting name="stackTrace">true</setting></event>
  <event name="jdk.SafepointBegin"><setting name="enabled">true</setting><setting name="threshold">0 ms</setting></event>
  <event name="jdk.SafepointStateSynchronization"><setting name="enabled">true</setting><setting name="threshold">0 ms</setting></event>
  <event name="jdk.SafepointEnd"><setting name="enabled">true</setting><setting name="threshold">0 ms</setting></event>
  <event name="jdk.ExecuteVMOperation"><setting name="enabled">true</setting><setting name="threshold">0 ms</setting></event>
</configuration>
"#
    )
}

/// Writes the settings into the recording directory `dir`; returns their path. Created new and
/// never through a link: `attach` has handed the directory to the JVM's user by now, who could
/// have planted `frames.jfc -> /etc/…` for root to overwrite.
pub fn write_settings(dir: &Path) -> Result<std::path::PathBuf> {
    let p = dir.join(files::FRAMES_JFC);
    let mut f = recording::create_new(&p)?;
    std::io::Write::write_all(&mut f, settings().as_bytes())
        .with_context(|| format!("{}: cannot write the JFR settings", p.display()))?;
    Ok(p)
}

/// The JFR options that start the recording, with `dir` the recording directory as the JVM
/// names it: `name=…,settings=…,filename=…,dumponexit=true`.
fn options(dir: &Path, sep: char) -> String {
    let settings = dir.join(files::FRAMES_JFC);
    let file = dir.join(files::FRAMES_JFR);
    [
        format!("name={NAME}"),
        format!("settings={}", settings.display()),
        format!("filename={}", file.display()),
        "dumponexit=true".to_string(),
    ]
    .join(&sep.to_string())
}

/// The launch option for `run`.
pub fn launch_option(dir: &Path) -> String {
    format!("-XX:StartFlightRecording={}", options(dir, ','))
}

/// The `jcmd` line for `attach`.
pub fn jcmd_start(dir: &Path) -> String {
    format!("JFR.start {}", options(dir, ' '))
}

/// The `jcmd` line that ends the recording (and writes its file).
pub fn jcmd_stop() -> String {
    format!("JFR.stop name={NAME}")
}

/// Writes a note into `frames.jsonl`, for the report to say why there are no stacks.
pub fn note(dir: &Path, text: &str) -> Result<()> {
    Appender::open(&dir.join(files::FRAMES))?
        .line(&FramesLine::Note(FramesNote { note: text.to_string() }))?;
    Ok(())
}

/// When each stall began (was due) and ended, from the recorder's events.
fn stall_edges(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StallBegin { expected_ns, .. } => Some(*expected_ns),
            Event::StallEnd { resumed_ns, .. } => Some(*resumed_ns),
            _ => None,
        })
        .collect()
}

/// When each stall was, from the recorder's events: (from, to) on CLOCK_MONOTONIC, widened by
/// [`KEEP_AROUND_NS`].
fn stall_windows(events: &[Event]) -> Vec<(u64, u64)> {
    let mut open: HashMap<u32, u64> = HashMap::new();
    let mut out = Vec::new();
    for e in events {
        match e {
            Event::StallBegin { stall, expected_ns, .. } => {
                open.insert(*stall, *expected_ns);
            }
            Event::StallEnd { stall, resumed_ns, .. } => {
                if let Some(from) = open.remove(stall) {
                    out.push((
                        from.saturating_sub(KEEP_AROUND_NS),
                        resumed_ns.saturating_add(KEEP_AROUND_NS),
                    ));
                }
            }
            _ => {}
        }
    }
    // A stall the recording ended in.
    out.extend(open.values().map(|from| (from.saturating_sub(KEEP_AROUND_NS), u64::MAX)));
    out
}

/// Reads `frames.jfr` of the recording in `dir` into `frames.jsonl`: the stacks taken near a
/// stall. `host_tid` turns a thread id as the JVM knows it into the host's (they differ in a
/// container). Returns how many stacks were kept.
pub fn extract(dir: &Path, host_tid: &dyn Fn(i64) -> i32) -> Result<usize> {
    let jfr = dir.join(files::FRAMES_JFR);
    if !jfr.exists() {
        note(
            dir,
            "the JVM wrote no flight recording (frames.jfr): it was killed, or ended before JFR could write it; culprits are named without their code",
        )?;
        return Ok(0);
    }
    let meta: Meta = recording::read_meta(dir)?;
    let events: Vec<Event> = recording::read_lines(&dir.join(files::EVENTS))?;
    let windows = stall_windows(&events);
    let mut out = Appender::open(&dir.join(files::FRAMES))?;
    if windows.is_empty() {
        return Ok(0);
    }
    // The JVM wrote the file, in a directory that may be its user's (`attach` as root): it is
    // opened here without following a link and without blocking on a FIFO, checked to be a
    // regular file, and the reader is handed this very file (`/proc/self/fd/N` in the child,
    // which inherits it), so nothing planted in its place is read.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&jfr)
    };
    let file = match file {
        Ok(f) if f.metadata().is_ok_and(|m| m.is_file()) => f,
        _ => {
            out.line(&FramesLine::Note(FramesNote {
                note: format!(
                    "{}: not a regular file the JVM wrote; its stacks are not read",
                    jfr.display()
                ),
            }))?;
            return Ok(0);
        }
    };
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: clearing close-on-exec on a descriptor we own, so the reader inherits it.
    unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    let handed = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
    let mut kept = 0;
    let mut lost = Vec::new();
    let mut thinning = Thinning { edges: stall_edges(&events), last: HashMap::new() };
    let died =
        logs::sandbox::read(&handed, &logs::sandbox::Want::Samples(Vec::new()), &mut |line| {
            match line {
                logs::sandbox::Line::Samples(c) => {
                    for s in c.samples {
                        // JFR stamps events on the JVM's tick clock, anchored to the wall clock per
                        // chunk; the recording's meta anchors that to CLOCK_MONOTONIC.
                        let Some(t) = meta.mono_of_epoch_ns(s.epoch_ns) else { continue };
                        if !windows.iter().any(|(from, to)| t >= *from && t <= *to) {
                            continue;
                        }
                        let tid = host_tid(s.os_tid);
                        if tid == 0 || !thinning.keep(t, tid, s.duration_ns.is_some()) {
                            continue;
                        }
                        let latency_ns = s.duration_ns.and_then(|d| u64::try_from(d).ok());
                        out.line(&FramesLine::Sample(FrameSample {
                            t,
                            tid,
                            name: s.java_name,
                            event: s.event,
                            latency_ns,
                            frames: crate::to_disk::all(s.frames),
                            truncated: s.truncated,
                            agct: None,
                        }))?;
                        kept += 1;
                    }
                }
                logs::sandbox::Line::Lost { offset, reason } => {
                    lost.push(format!("byte {offset}: {reason}"))
                }
                logs::sandbox::Line::Chunk(_) | logs::sandbox::Line::Flight(_) => {
                    anyhow::bail!("the JFR reader gave other events where stacks were asked for")
                }
            }
            Ok(())
        })?;
    drop(file);
    if let Some(why) = died {
        lost.push(format!("the reader stopped: {why}"));
    }
    if !lost.is_empty() {
        out.line(&FramesLine::Note(FramesNote { note: format!("{}: part of the flight recording could not be read ({}); stacks from it are missing", jfr.display(), lost.join("; ")) }))?;
    }
    Ok(kept)
}

/// [`extract`], with what goes wrong said as a note in `frames.jsonl` and to `notices`, never an
/// error: the recording is complete without stacks.
pub fn extract_or_note(dir: &Path, host_tid: &dyn Fn(i64) -> i32, notices: &Notices) {
    if let Err(e) = extract(dir, host_tid) {
        let text = format!("the JVM's stack samples could not be read: {e:#}");
        notices.warn(text.clone());
        let _ = note(dir, &text);
    }
}

/// Whether the JDK at `home` has a flight recorder started by `-XX:StartFlightRecording` or
/// `JFR.start` with a settings file (11 and later by its `JAVA_VERSION`; 1.8 has it only from
/// update 262, where stallscope does not use it).
pub(crate) fn has_jfr(home: Option<&Path>) -> bool {
    feature(home).is_some_and(|m| (11..100).contains(&m))
}

/// The JDK's feature release at `home` (8 for 1.8), from its `release` file.
fn feature(home: Option<&Path>) -> Option<u32> {
    home.and_then(java_version).map(|v| procwatch::jvmcounters::feature_release(&v))
}

/// The option that keeps JFR's start-up lines off the application's stdout, where the JVM at
/// `java` (in `home`) accepts it: the `jfr+startup` log tag came with JDK 17 (JDK-8244190), and a
/// JVM given a tag it does not know refuses to start ("Invalid tag 'startup' in log selection").
/// A JDK older than 17, or one whose version is not written down, is asked (`-version` with the
/// option, bounded in time); None unless it said yes. stallscope never adds an option the JVM in
/// hand does not take: without it, JFR's two start-up lines go to stdout.
pub(crate) fn quiet_startup_option(java: &Path, home: Option<&Path>) -> Option<&'static str> {
    const OPTION: &str = "-Xlog:jfr+startup=off";
    if feature(home).is_some_and(|f| f >= 17) {
        return Some(OPTION);
    }
    accepts(java, OPTION, std::time::Duration::from_secs(20)).then_some(OPTION)
}

/// Whether the JVM at `java` starts with `option` (`java OPTION -version`), within `within`.
fn accepts(java: &Path, option: &str, within: std::time::Duration) -> bool {
    use std::process::{Command, Stdio};
    let Ok(mut child) = Command::new(java)
        .args([option, "-version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let t0 = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if t0.elapsed() < within => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// What `frames.jsonl` says when [`has_jfr`] does not hold.
pub(crate) const NO_JFR: &str =
    "no stacks: the JVM has no flight recorder stallscope can start (JDK 11 or later has)";

/// The JDK's version at `home`, from its `release` file.
pub(crate) fn java_version(home: &Path) -> Option<String> {
    let r = std::fs::read_to_string(home.join("release")).ok()?;
    r.lines().find_map(|l| l.strip_prefix("JAVA_VERSION=")).map(|v| v.trim_matches('"').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jfr_is_silenced_only_where_the_jvm_takes_the_option() {
        let d = std::env::temp_dir().join(format!("stallscope-quiet-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let home = |v: &str| {
            std::fs::write(d.join("release"), format!("JAVA_VERSION=\"{v}\"\n")).unwrap();
            d.as_path()
        };
        let none = Path::new("/nonexistent/bin/java");
        // 17 on, by its release file: no need to ask.
        assert!(quiet_startup_option(none, Some(home("17.0.15"))).is_some());
        assert!(quiet_startup_option(none, Some(home("25"))).is_some());
        // Older, or not written down: asked, and only a JVM that starts with it gets it.
        assert_eq!(quiet_startup_option(none, Some(home("11.0.13"))), None);
        assert_eq!(quiet_startup_option(Path::new("/bin/false"), None), None);
        assert!(quiet_startup_option(Path::new("/bin/true"), Some(home("11.0.13"))).is_some());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_options_name_the_recording_directory_as_the_jvm_sees_it() {
        let d = Path::new("/tmp/stallscope-x");
        assert_eq!(
            launch_option(d),
            "-XX:StartFlightRecording=name=stallscope,settings=/tmp/stallscope-x/frames.jfc,filename=/tmp/stallscope-x/frames.jfr,dumponexit=true"
        );
        assert_eq!(
            jcmd_start(d),
            "JFR.start name=stallscope settings=/tmp/stallscope-x/frames.jfc filename=/tmp/stallscope-x/frames.jfr dumponexit=true"
        );
        assert!(settings().contains("<setting name=\"period\">20 ms</setting>"));
    }

    #[test]
    fn stacks_are_thinned_away_from_stall_edges_only() {
        const MS: u64 = 1_000_000;
        let mut th = Thinning { edges: vec![1000 * MS, 3000 * MS], last: HashMap::new() };
        // Every 20 ms from 1.5 s to 2.5 s: one per 100 ms is kept, per thread.
        let kept: Vec<u64> =
            (0..50).map(|i| 1500 + i * 20).filter(|t| th.keep(t * MS, 7, false)).collect();
        assert_eq!(kept, vec![1500, 1600, 1700, 1800, 1900, 2000, 2100, 2200, 2300, 2400]);
        assert!(th.keep(1520 * MS, 8, false), "another thread has its own spacing");
        // Near an edge, all; a safepoint-latency stack always.
        assert!((0..5).all(|i| th.keep((2960 + i * 20) * MS, 7, false)));
        assert!(th.keep(2430 * MS, 7, true));
    }

    #[test]
    fn windows_cover_each_stall_and_one_the_recording_ended_in() {
        let ev = vec![
            Event::StallBegin {
                t: 0,
                stall: 1,
                last_tick_ns: 0,
                expected_ns: 5_000_000_000,
                by: Default::default(),
            },
            Event::StallEnd {
                t: 0,
                stall: 1,
                resumed_ns: 6_000_000_000,
                control_max_late_ns: 0,
                control_queued_ns: None,
                resumed: true,
                dropped_samples: 0,
                exiting: false,
                thread_reads: None,
            },
            Event::StallBegin {
                t: 0,
                stall: 2,
                last_tick_ns: 0,
                expected_ns: 9_000_000_000,
                by: Default::default(),
            },
        ];
        assert_eq!(
            stall_windows(&ev),
            vec![(3_000_000_000, 8_000_000_000), (7_000_000_000, u64::MAX)]
        );
    }
}
