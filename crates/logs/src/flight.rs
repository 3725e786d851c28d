//! JFR inputs of `stallscope logs`: their safepoint events, read by the JFR reader process
//! ([`crate::sandbox`]) and handed to the log analysis as records.

use crate::sandbox::{Line, Want};
use anyhow::{Context, Result};
use hotspot_log::Sink;
use hotspot_log::jfr;
use std::path::Path;

pub use crate::sandbox::is_jfr;

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

/// Reads the JFR file at `path` (input number `file`) in a reader process, handing its
/// safepoints to `sink` in file order.
pub fn read(path: &Path, file: u32, sink: &mut dyn Sink) -> Result<JfrInput> {
    let mut got = JfrInput {
        bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        ..Default::default()
    };
    let mut last_end: Option<i64> = None;
    let mut next_offset = 0u64;
    let died = crate::sandbox::read(path, &Want::Safepoints, &mut |line| {
        match line {
            Line::Chunk(c) => {
                if got.chunks == 0 {
                    sink.input_start(file, &jfr::wall_stamps(c.start_epoch_ns));
                }
                got.chunks += 1;
                got.events += c.events;
                next_offset = c.offset;
                for s in c.safepoints {
                    got.safepoints += 1;
                    sink.safepoint(&s.into_safepoint(file));
                }
                last_end = Some(c.end_epoch_ns);
            }
            Line::Lost { offset, reason } => got.lost.push(format!("byte {offset}: {reason}")),
            Line::Samples(_) | Line::Flight(_) => {
                anyhow::bail!("the JFR reader gave other events where safepoints were asked for")
            }
        }
        Ok(())
    })
    .context("reading the JFR file")?;
    if let Some(why) = died {
        let after = if got.chunks == 0 {
            "the first chunk".to_string()
        } else {
            format!("the chunk after the one at byte {next_offset}")
        };
        got.lost.push(format!(
            "{after} and the rest could not be read ({why}); {} chunks before it were read",
            got.chunks
        ));
    }
    if let Some(end) = last_end {
        sink.input_end(file, &jfr::wall_stamps(end));
    }
    Ok(got)
}

/// Whether `path` is a flight recording `report` can explain: a JFR file, a gzip of one, or a
/// directory of chunk files (a JFR repository, `*.jfr`) that is no stallscope recording.
pub fn is_flight_input(path: &Path) -> bool {
    if path.is_dir() {
        return !path.join(recording::files::META).exists() && !chunk_files(path).is_empty();
    }
    is_jfr(path) || gzip_of_jfr(path)
}

fn gzip_of_jfr(path: &Path) -> bool {
    // The log inputs' opener, which decompresses gzip when its first bytes say so.
    let mut head = [0u8; 4];
    crate::inputs::open(&crate::inputs::Input::File(path.to_path_buf())).is_ok_and(|mut r| {
        r.gzip && std::io::Read::read_exact(&mut r, &mut head).is_ok() && jfr::is_jfr(&head)
    })
}

/// The `*.jfr` files directly in `dir`, in name order (a JFR repository names its chunk files
/// by their start time, so that is time order).
fn chunk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jfr") && p.is_file())
        .collect();
    v.sort();
    v
}

/// Reads a flight recording (a file, a `.jfr.gz`, or a directory of chunk files) for the
/// explanation of its stalls, each file in a reader process; stack samples are kept near VM
/// operations and safepoints at least `threshold_ns` long. What cannot be read is in `lost`,
/// each with its file and byte; a file with nothing readable at all is an error that says so.
pub fn read_flight(path: &Path, threshold_ns: i64) -> Result<jfr::FlightFile> {
    let mut out = jfr::FlightFile { name: path.display().to_string(), ..Default::default() };
    let files = if path.is_dir() { chunk_files(path) } else { vec![path.to_path_buf()] };
    if files.is_empty() {
        anyhow::bail!("{}: no flight recording (*.jfr) in this directory", path.display());
    }
    for f in &files {
        match read_one(f, threshold_ns, &mut out) {
            Ok(()) => {}
            // In a repository, a chunk file just created (empty) or foreign costs itself.
            Err(e) if path.is_dir() => out.lost.push(format!("{e:#}")),
            Err(e) => return Err(e),
        }
    }
    // In time order, as the diagnosis looks things up (chunks of several files, or of runs put
    // together, need not be).
    out.data.samples.sort_by_key(|s| s.epoch_ns);
    out.data.gcs.sort_by_key(|c| c.start_epoch_ns);
    out.data.cpu_load.sort_by_key(|l| l.epoch_ns);
    if out.chunks == 0 {
        let why = out.lost.first().cloned().unwrap_or_else(|| "it holds no chunk".into());
        anyhow::bail!(
            "{why}\nnothing of it could be read: is it a JFR file (`jfr summary FILE` reads it too)? A recording still being written has no complete chunk yet: `jcmd PID JFR.dump filename=app.jfr` writes one that is"
        );
    }
    Ok(out)
}

fn read_one(path: &Path, threshold_ns: i64, out: &mut jfr::FlightFile) -> Result<()> {
    // A gzip is read from a plain copy (the reader seeks through the chunks).
    let plain;
    let file = if gzip_of_jfr(path) {
        let mut tmp = tempfile::Builder::new()
            .prefix("stallscope-jfr-")
            .suffix(".jfr")
            .tempfile()
            .context("making a file to decompress the recording into")?;
        let mut gz = crate::inputs::open(&crate::inputs::Input::File(path.to_path_buf()))?;
        std::io::copy(&mut gz, tmp.as_file_mut())
            .with_context(|| format!("{}: cannot decompress it", path.display()))?;
        if gz.truncated {
            out.lost.push(format!("{}: the gzip stream is cut short", path.display()));
        }
        plain = tmp.into_temp_path();
        plain.to_path_buf()
    } else if is_jfr(path) {
        path.to_path_buf()
    } else {
        anyhow::bail!(
            "{}: not a flight recording (no JFR chunk starts it, plain or gzipped)",
            path.display()
        );
    };
    out.bytes += std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let name = path.display().to_string();
    let mut chunks = 0u64;
    let mut last_offset = None;
    let died = crate::sandbox::read(&file, &Want::Flight { threshold_ns }, &mut |line| {
        match line {
            Line::Flight(c) => {
                chunks += 1;
                last_offset = Some(c.offset);
                out.data.merge(*c);
            }
            Line::Lost { offset, reason } => {
                out.lost.push(format!("{name}: byte {offset}: {reason}"))
            }
            Line::Chunk(_) | Line::Samples(_) => {
                anyhow::bail!("the JFR reader gave other events than were asked for")
            }
        }
        Ok(())
    })
    .with_context(|| format!("{name}: reading the flight recording"))?;
    if let Some(why) = died {
        let after = match last_offset {
            None => "its first chunk".to_string(),
            Some(o) => format!("the chunk after the one at byte {o}"),
        };
        out.lost.push(format!(
            "{name}: {after} and the rest could not be read ({why}); {chunks} chunks before it were read"
        ));
    }
    out.chunks += chunks;
    Ok(())
}

/// The safepoint records of a GC or safepoint log given beside a flight recording (plain or
/// gzipped), and what reading it found worth saying (lines not understood, a cut-off end).
pub fn read_log_safepoints(path: &Path) -> Result<(Vec<hotspot_log::Safepoint>, Vec<String>)> {
    let input = crate::inputs::Input::File(path.to_path_buf());
    let mut r = crate::inputs::open(&input)?;
    let mut got = Vec::new();
    let mut scanner = hotspot_log::Scanner::new();
    scanner
        .scan(0, &mut r, &mut |s: &hotspot_log::Safepoint| got.push(s.clone()))
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let rep = scanner.finish(&mut |s: &hotspot_log::Safepoint| got.push(s.clone()));
    let mut notes = Vec::new();
    if r.truncated {
        notes.push(format!(
            "{}: the gzip stream is cut short; what came before is read",
            path.display()
        ));
    }
    if let Some(e) = rep.unrecognised_examples.first() {
        notes.push(format!(
            "{}: {} line(s) that look like safepoint records were not understood; the first, line {}: {}",
            path.display(),
            rep.lines_unrecognised,
            e.line,
            e.text
        ));
    }
    if got.is_empty() {
        anyhow::bail!(
            "{}: no safepoint records in it ({} lines): log them with -Xlog:safepoint (JDK 9+) or -XX:+PrintSafepointStatistics / -XX:+PrintGCApplicationStoppedTime (JDK 8); `stallscope logs` says what it found",
            path.display(),
            rep.lines_total
        );
    }
    Ok((got, notes))
}
