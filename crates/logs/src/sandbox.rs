//! The JFR reader process: `stallscope jfr-chunks [--samples TIDS] FILE` (hidden), and how to run
//! it.
//!
//! The JFR parser (`jfrs`, through [`hotspot_log::jfr`]) trusts counts inside a chunk: a damaged
//! one can make it panic or ask for an allocation of many gigabytes, which aborts a process. So
//! every JFR file is read in a process of its own, under an address-space limit, which prints one
//! JSON line per chunk as each is done. A damaged chunk costs itself (or its events from the
//! damage on); a reader that dies costs the chunks from the one it died in; what was read before
//! is kept, and each loss is said. `logs` reads safepoints this way, the recorder stack samples.

use anyhow::{Context, Result};
use hotspot_log::jfr::{self, FlightChunk, JfrChunk, JfrSampleChunk};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The reader's address space: far above what a chunk of any real recording needs (JFR's chunks
/// are about 12 MB by default), far below what a damaged count asks for.
/// How the reader process says its parser panicked: the first words of its one stderr line.
pub const PARSER_FAILED: &str = "the JFR parser failed";

const READER_ADDRESS_SPACE: u64 = 4 << 30;

/// The CPU time a reader may spend on a file of `len` bytes: 5 s, and 1 s more per 10 MB (it
/// reads a healthy recording at well over 50 MB a second). A damaged file can loop the JFR
/// parser: `jfrs` 0.2.5 never moves past a metadata or constant-pool record of size 0 (found by
/// the damage test in a CI run, the reader spinning 13 minutes after its parent was gone).
fn reader_cpu_seconds(len: u64) -> u64 {
    5 + len / 10_000_000
}

/// What the reader is asked for.
#[derive(Debug, Clone)]
pub enum Want {
    Safepoints,
    /// Stack samples of these threads (`osThreadId`; all when empty).
    Samples(Vec<i64>),
    /// What explains the stalls of a flight recording alone (`report app.jfr`), with the
    /// stack samples near operations and safepoints at least this long.
    Flight {
        threshold_ns: i64,
    },
}

/// One line of the reader's output.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Line {
    Chunk(JfrChunk),
    Samples(JfrSampleChunk),
    Flight(Box<FlightChunk>),
    /// What could not be read at `offset`, and why.
    Lost {
        offset: u64,
        reason: String,
    },
}

/// Whether the file at `path` is a JFR recording (by its first bytes, whatever its name).
pub fn is_jfr(path: &Path) -> bool {
    let mut head = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok()
        && jfr::is_jfr(&head)
}

/// The recording reader's flight recordings (`recording::Recording::read`), each read in a
/// reader process as [`read`] reads them.
pub struct FlightRecordings;

impl recording::FlightRecordings for FlightRecordings {
    fn is_flight_recording(&self, path: &Path) -> bool {
        is_jfr(path)
    }

    fn safepoints(&self, path: &Path) -> (Vec<(hotspot_log::Safepoint, i64)>, Vec<String>) {
        let (mut got, mut lost) = (Vec::new(), Vec::new());
        let read = read(path, &Want::Safepoints, &mut |line| {
            match line {
                Line::Chunk(c) => got.extend(c.safepoints.into_iter().map(|s| {
                    let end = s.end_epoch_ns;
                    (s.into_safepoint(0), end)
                })),
                Line::Lost { offset, reason } => lost.push(format!("byte {offset}: {reason}")),
                Line::Samples(_) | Line::Flight(_) => {}
            }
            Ok(())
        });
        match read {
            Ok(died) => lost.extend(died.map(|why| format!("the rest could not be read ({why})"))),
            Err(e) => lost.push(format!("{e:#}")),
        }
        (got, lost)
    }
}

/// Reads the JFR file at `path` in a reader process, handing each line to `each` as it comes.
/// Returns, when the reader did not finish, why (its last words, or how it died) and the offset
/// of the last chunk it did read.
pub fn read(
    path: &Path,
    want: &Want,
    each: &mut dyn FnMut(Line) -> Result<()>,
) -> Result<Option<String>> {
    let exe = procwatch::process::own_exe()
        .context("finding stallscope's own binary to read a JFR file")?;
    let mut cmd = Command::new(exe);
    cmd.arg("jfr-chunks");
    match want {
        Want::Safepoints => {}
        Want::Samples(tids) => {
            cmd.arg("--samples").arg(tids.iter().map(i64::to_string).collect::<Vec<_>>().join(","));
        }
        Want::Flight { threshold_ns } => {
            cmd.arg("--flight").arg(threshold_ns.to_string());
        }
    }
    cmd.arg(path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let cpu = reader_cpu_seconds(std::fs::metadata(path).map(|m| m.len()).unwrap_or(0));
    // Its last words are quoted to the user: never a backtrace (an allocation that fails prints
    // one after its message when these are set).
    cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
    // SAFETY: setrlimit only, in the child between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            let lim =
                libc::rlimit { rlim_cur: READER_ADDRESS_SPACE, rlim_max: READER_ADDRESS_SPACE };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            // SIGXCPU (it ends the process) past `cpu` seconds; SIGKILL a few seconds after.
            let lim = libc::rlimit { rlim_cur: cpu, rlim_max: cpu + 5 };
            libc::setrlimit(libc::RLIMIT_CPU, &lim);
            // It never outlives the process that reads its lines (killed, or timed out).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("starting the JFR reader")?;
    let stdout = child.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the JFR reader's output")?;
        match serde_json::from_str::<Line>(&line) {
            Ok(l) => each(l)?,
            Err(e) => anyhow::bail!("the JFR reader said something unexpected ({e}): {line}"),
        }
    }
    let out = child.wait_with_output().context("waiting for the JFR reader")?;
    if out.status.success() {
        return Ok(None);
    }
    // The first line says what happened (the panic hook's line, or "memory allocation of N bytes
    // failed" before an abort).
    let why = String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_string();
    use std::os::unix::process::ExitStatusExt;
    if matches!(out.status.signal(), Some(libc::SIGXCPU | libc::SIGKILL)) && why.is_empty() {
        return Ok(Some(format!(
            "the reader spent {cpu} s of CPU without finishing: damage that loops the JFR parser"
        )));
    }
    Ok(Some(if why.is_empty() { format!("it died ({})", out.status) } else { why }))
}

/// `stallscope jfr-chunks [--samples TIDS] FILE`: the reader process's work. One JSON line per
/// chunk to `out`, as each is read; a `lost` line for each part that cannot be read, and why.
/// The process's main sets a panic hook that says [`PARSER_FAILED`] and the panic's message as
/// one line on stderr, which the parent quotes.
pub fn read_chunks(
    path: &Path,
    samples: Option<&str>,
    flight: Option<i64>,
    out: &mut dyn Write,
) -> Result<i32> {
    let tids: Option<Vec<i64>> = samples
        .map(|s| s.split(',').filter(|t| !t.is_empty()).filter_map(|t| t.parse().ok()).collect());
    let mut f =
        std::fs::File::open(path).with_context(|| format!("{}: cannot read it", path.display()))?;
    let len = f.metadata()?.len();
    let (spans, rest) = jfr::chunk_spans(&mut f, len)?;
    for span in spans {
        let mut bytes = vec![0u8; span.size as usize];
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(span.offset))?;
        std::io::Read::read_exact(&mut f, &mut bytes)?;
        // Each chunk stands alone: a damaged one costs itself (or its events from the damage on).
        let (line, damage) = match (&tids, flight) {
            (_, Some(threshold)) => match jfr::read_chunk_flight(span.offset, bytes, threshold) {
                Ok((c, d)) => (Some(Line::Flight(Box::new(c))), d),
                Err(e) => (None, Some(e)),
            },
            (None, None) => match jfr::read_chunk(span.offset, bytes) {
                Ok((c, d)) => (Some(Line::Chunk(c)), d),
                Err(e) => (None, Some(e)),
            },
            (Some(tids), None) => match jfr::read_chunk_samples(span.offset, bytes, tids) {
                Ok((c, d)) => (Some(Line::Samples(c)), d),
                Err(e) => (None, Some(e)),
            },
        };
        if let Some(l) = line {
            writeln!(out, "{}", serde_json::to_string(&l)?)?;
        }
        if let Some(e) = damage {
            writeln!(out, "{}", serde_json::to_string(&lost(span.offset, e))?)?;
        }
        out.flush()?;
    }
    if let Some(e) = rest {
        writeln!(out, "{}", serde_json::to_string(&lost(len, e))?)?;
    }
    Ok(0)
}

fn lost(offset: u64, e: jfr::JfrError) -> Line {
    match e {
        jfr::JfrError::Bad { offset, reason } => Line::Lost { offset, reason },
        jfr::JfrError::Io(e) => Line::Lost { offset, reason: e.to_string() },
    }
}
