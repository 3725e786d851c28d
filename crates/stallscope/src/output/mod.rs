//! Output formats, one file each behind one trait (as hyperfine's `export`).
//!
//! Invariant: renderers only read the plain view types; they never compute analysis.

pub mod csv;
pub mod doctor;
pub mod html;
pub mod json;
pub mod lab;
pub mod terminal;

use crate::logs::view::LogsView;
use hotspot_log::Safepoint;
use std::io;

/// How `stallscope logs` reports. Streaming formats write per safepoint; the others at the end.
pub trait LogsOutput {
    /// Called for each safepoint that passes the filters, in log order.
    fn safepoint(&mut self, _s: &Safepoint) -> io::Result<()> {
        Ok(())
    }
    /// Called once, after the last safepoint.
    fn finish(&mut self, view: &LogsView) -> io::Result<()>;
}
