//! JFR inputs of `stallscope logs`, read in a process of their own.
//!
//! The JFR reader (`jfrs`, through [`hotspot_log::jfr`]) trusts counts inside a chunk: a damaged
//! one can make it panic or ask for an allocation of many gigabytes, which aborts a process. So
//! `logs` runs it as `stallscope jfr-chunks FILE` (hidden), under an address-space limit, and reads
//! one JSON line per chunk as each is done. A damaged chunk costs itself (or its events from the
//! damage on); a reader that dies costs the chunks from the one it died in; what was read before
//! is kept, and each loss is said.

use anyhow::{Context, Result};
use hotspot_log::jfr::{self, JfrChunk};
use hotspot_log::Sink;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The reader's address space: far above what a chunk of any real recording needs (JFR's chunks
/// are about 12 MB by default), far below what a damaged count asks for.
const READER_ADDRESS_SPACE: u64 = 4 << 30;

/// One line of the reader's output.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Line {
    Chunk(JfrChunk),
    /// What could not be read at `offset`, and why.
    Lost { offset: u64, reason: String },
}

/// What a JFR input gave besides its safepoints.
#[derive(Debug, Default)]
pub struct JfrInput {
    pub bytes: u64,
    pub chunks: u64,
    pub events: u64,
    pub safepoints: u64,
    /// What could not be read, in words (the file's name is added by the caller).
    pub lost: Vec<String>,
}

/// Whether the file at `path` is a JFR recording (by its first bytes, whatever its name).
pub fn is_jfr(path: &Path) -> bool {
    let mut head = [0u8; 4];
    std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head)).is_ok() && jfr::is_jfr(&head)
}

/// Reads the JFR file at `path` (input number `file`) in a reader process, handing its
/// safepoints to `sink` in file order.
pub fn read(path: &Path, file: u32, sink: &mut dyn Sink) -> Result<JfrInput> {
    let exe = std::env::current_exe().context("finding stallscope's own binary to read a JFR file")?;
    let mut cmd = Command::new(exe);
    cmd.arg("jfr-chunks").arg(path).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit only, in the child between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: READER_ADDRESS_SPACE, rlim_max: READER_ADDRESS_SPACE };
            libc::setrlimit(libc::RLIMIT_AS, &lim);
            Ok(())
        });
    }
    let mut child = cmd.spawn().context("starting the JFR reader")?;
    let stdout = child.stdout.take().expect("piped");
    let mut got = JfrInput { bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0), ..Default::default() };
    let mut last_end: Option<i64> = None;
    let mut next_offset = 0u64;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading the JFR reader's output")?;
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Chunk(c)) => {
                if got.chunks == 0 {
                    sink.input_start(file, &jfr::wall_stamps(c.start_epoch_ns));
                }
                got.chunks += 1;
                got.events += c.events;
                next_offset = c.offset;
                for s in c.safepoints {
                    got.safepoints += 1;
                    sink.safepoint(s.into_safepoint(file));
                }
                last_end = Some(c.end_epoch_ns);
            }
            Ok(Line::Lost { offset, reason }) => got.lost.push(format!("byte {offset}: {reason}")),
            Err(e) => anyhow::bail!("the JFR reader said something unexpected ({e}): {line}"),
        }
    }
    let out = child.wait_with_output().context("waiting for the JFR reader")?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim().to_string();
        let why = if why.is_empty() { format!("it died ({})", out.status) } else { why };
        let after = if got.chunks == 0 { "the first chunk".to_string() } else { format!("the chunk after the one at byte {next_offset}") };
        got.lost.push(format!("{after} and the rest could not be read ({why}); {} chunks before it were read", got.chunks));
    }
    if let Some(end) = last_end {
        sink.input_end(file, &jfr::wall_stamps(end));
    }
    Ok(got)
}

/// `stallscope jfr-chunks FILE`: the reader process. One JSON line per chunk, as each is read;
/// a `lost` line for each part that cannot be read, and why.
pub fn reader_main(path: &Path) -> Result<i32> {
    // A panic in the parser is one line on stderr for the parent to quote, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.payload().downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| info.payload().downcast_ref::<String>().cloned()).unwrap_or_default();
        eprintln!("the JFR parser failed: {msg}");
    }));
    let mut f = std::fs::File::open(path).with_context(|| format!("{}: cannot read it", path.display()))?;
    let len = f.metadata()?.len();
    let (spans, rest) = jfr::chunk_spans(&mut f, len)?;
    let mut out = std::io::stdout().lock();
    for span in spans {
        let mut bytes = vec![0u8; span.size as usize];
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(span.offset))?;
        std::io::Read::read_exact(&mut f, &mut bytes)?;
        // Each chunk stands alone: a damaged one costs itself (or its events from the damage on).
        let (chunk, damage) = match jfr::read_chunk(span.offset, bytes) {
            Ok((c, d)) => (Some(c), d),
            Err(e) => (None, Some(e)),
        };
        if let Some(c) = chunk {
            writeln!(out, "{}", serde_json::to_string(&Line::Chunk(c))?)?;
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
