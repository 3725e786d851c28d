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
            Line::Samples(_) => {
                anyhow::bail!("the JFR reader gave stack samples where safepoints were asked for")
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
