//! The result of `stallscope logs`, as one plain value. Its serde form *is* the JSON schema
//! documented in `docs/formats/logs-json.md`; renderers only read it.

use super::filter::Filter;
use hotspot_log::{Format, LineExample, LogSummary};
use serde::Serialize;

pub const SCHEMA: &str = "stallscope.logs/1";

#[derive(Debug, Clone, Serialize)]
pub struct InputView {
    pub path: String,
    /// Bytes read (after decompression).
    pub bytes: u64,
    pub lines: u64,
    pub gzip: bool,
    /// A gzip stream that ended early; what was there was analysed.
    pub truncated: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RotatedSet {
    pub base: String,
    pub files: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Lines {
    pub total: u64,
    pub recognised: u64,
    pub unrecognised: u64,
    /// GC and application lines, skipped without being parsed.
    pub other: u64,
    pub truncated_last: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FormatCount {
    pub id: &'static str,
    pub description: &'static str,
    pub lines: u64,
}

impl FormatCount {
    pub fn new(f: Format, lines: u64) -> Self {
        FormatCount { id: f.id(), description: f.describe(), lines }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Filtered {
    #[serde(flatten)]
    pub filter: Filter,
    /// Safepoints read before filtering.
    pub safepoints_read: u64,
    /// Safepoints left out because they lacked the clock a time bound is on.
    pub left_out_no_clock: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LogsView {
    pub schema: &'static str,
    pub inputs: Vec<InputView>,
    pub rotated_sets: Vec<RotatedSet>,
    pub lines: Lines,
    pub formats: Vec<FormatCount>,
    pub filters: Filtered,
    #[serde(flatten)]
    pub summary: LogSummary,
    pub unrecognised_examples: Vec<LineExample>,
    /// Things the reader should know (truncation, records without a clock, …).
    pub notes: Vec<String>,
    #[serde(skip)]
    pub other_examples: Vec<LineExample>,
}

impl LogsView {
    pub fn input_name(&self, file: u32) -> &str {
        self.inputs.get(file as usize).map_or("?", |i| i.path.as_str())
    }
}
