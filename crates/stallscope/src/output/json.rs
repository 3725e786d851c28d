//! JSON output of any result: its serde form, pretty-printed, which *is* the documented schema
//! (`docs/formats/logs-json.md`, `report-json.md`, and lab.json).

use super::Render;
use hotspot_log::Safepoint;
use logs::view::LogsView;
use serde::Serialize;
use std::io::{self, Write};

pub struct Json<W: Write>(pub W);

impl<W: Write> Json<W> {
    fn write<V: Serialize + ?Sized>(&mut self, view: &V) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.0, view)?;
        writeln!(self.0)?;
        self.0.flush()
    }
}

impl<W: Write, V: Serialize + ?Sized> Render<V> for Json<W> {
    fn finish(&mut self, view: &V) -> io::Result<()> {
        self.write(view)
    }
}

/// The log analysis streams its records; JSON waits for the whole view.
impl<W: Write> Render<LogsView, Safepoint> for Json<W> {
    fn finish(&mut self, view: &LogsView) -> io::Result<()> {
        self.write(view)
    }
}
