//! JSON output: the view, serialised as documented in `docs/formats/logs-json.md`.

use super::LogsOutput;
use crate::logs::view::LogsView;
use std::io::{self, Write};

pub struct Json<W: Write>(pub W);

impl<W: Write> LogsOutput for Json<W> {
    fn finish(&mut self, view: &LogsView) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut self.0, view)?;
        writeln!(self.0)?;
        self.0.flush()
    }
}
