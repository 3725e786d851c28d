//! A recording read through its own types and written back: every line of every file must come
//! back as the same JSON. The format's test runs it on every stored recording, and the live tests
//! on the recordings they make, so a type that drops, renames or adds a field on the way shows
//! as the file and line where it did.
//!
//! Invariant: reads only; a last line cut off by a killed recorder is skipped, as the reader
//! skips it.

use crate::disk::CounterLook;
use crate::files;
use crate::schema::{
    Event, FrameSample, FramesLine, Meta, Sample, StallContext, StallKernelWaits, StallTrace,
    SystemSample,
};
use crate::who::Who;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::Path;

/// The first line of a recording that does not read back as it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub file: String,
    pub line: usize,
    /// What went wrong: the line no longer reads as its type, or it writes back differently.
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: {}; the recording format changed (raise recording::FORMAT and say what \
             changed in docs/formats/recording.md)",
            self.file, self.line, self.what
        )
    }
}

/// Reads every line of every file of the recording in `dir` into its record type and writes it
/// back; returns how many records came back the same, or the first that did not.
pub fn round_trip(dir: &Path) -> Result<usize, Mismatch> {
    let mut n = header(dir)?;
    n += lines::<Event>(dir, files::EVENTS)?;
    n += lines::<Sample>(dir, files::SAMPLES)?;
    n += lines::<SystemSample>(dir, files::SYSTEM)?;
    n += lines::<StallContext>(dir, files::CONTEXT)?;
    n += lines::<StallTrace>(dir, files::TRACE)?;
    n += lines::<StallKernelWaits>(dir, files::KWAITS)?;
    n += lines::<FramesLine>(dir, files::FRAMES)?;
    n += lines::<FrameSample>(dir, files::DUMPS)?;
    n += lines::<FrameSample>(dir, files::STACKS)?;
    n += lines::<FramesLine>(dir, files::OUTSIDE)?;
    n += lines::<CounterLook>(dir, files::COUNTERS)?;
    n += lines::<Who>(dir, files::WHO)?;
    Ok(n)
}

fn same<T: DeserializeOwned + Serialize>(
    raw: Value,
    file: &Path,
    line: usize,
) -> Result<(), Mismatch> {
    let at = |what: String| Mismatch { file: file.display().to_string(), line, what };
    let typed: T = serde_json::from_value(raw.clone())
        .map_err(|e| at(format!("no longer reads as its record type ({e})")))?;
    let back = serde_json::to_value(&typed).map_err(|e| at(format!("cannot be written ({e})")))?;
    if back != raw {
        return Err(at(format!("reads back differently\n  on disk: {raw}\n  written: {back}")));
    }
    Ok(())
}

/// The header is one JSON document (pretty-printed), not lines.
fn header(dir: &Path) -> Result<usize, Mismatch> {
    let path = dir.join(files::META);
    let at = |what: String| Mismatch { file: path.display().to_string(), line: 1, what };
    let text = std::fs::read_to_string(&path).map_err(|e| at(format!("cannot read it ({e})")))?;
    let raw: Value = serde_json::from_str(&text).map_err(|e| at(format!("not JSON ({e})")))?;
    same::<Meta>(raw, &path, 1)?;
    Ok(1)
}

fn lines<T: DeserializeOwned + Serialize>(dir: &Path, file: &str) -> Result<usize, Mismatch> {
    let path = dir.join(file);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(0) };
    let count = text.lines().count();
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let raw: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            // A last line cut off by a killed recorder: the reader skips it too.
            Err(_) if i + 1 == count => continue,
            Err(e) => {
                return Err(Mismatch {
                    file: path.display().to_string(),
                    line: i + 1,
                    what: format!("not JSON ({e})"),
                });
            }
        };
        same::<T>(raw, &path, i + 1)?;
        n += 1;
    }
    Ok(n)
}
