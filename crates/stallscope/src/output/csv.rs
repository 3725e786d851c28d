//! CSV output: one row per safepoint, streamed as the log is read.

use super::Render;
use hotspot_log::{Safepoint, format_wall};
use logs::view::LogsView;
use std::io::{self, Write};

pub const HEADER: &str = "file,line,format,operation,start_uptime_ns,end_uptime_ns,end_wall,end_timenanos,ttsp_ns,cleanup_ns,at_safepoint_ns,leaving_ns,total_ns,since_last_ns,threads_total,threads_running,page_traps,timeout_culprits";

pub struct Csv<W: Write> {
    out: W,
    inputs: Vec<String>,
    header_done: bool,
}

impl<W: Write> Csv<W> {
    pub fn new(out: W, inputs: Vec<String>) -> Self {
        Csv { out, inputs, header_done: false }
    }
}

/// Quotes a field when it needs it (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl<W: Write> Render<LogsView, Safepoint> for Csv<W> {
    fn item(&mut self, s: &Safepoint) -> io::Result<()> {
        if !self.header_done {
            writeln!(self.out, "{HEADER}")?;
            self.header_done = true;
        }
        let file = self.inputs.get(s.source.file as usize).map_or("", |f| f.as_str());
        let culprits: Vec<&str> = s.culprits.iter().map(|c| c.name.as_str()).collect();
        writeln!(
            self.out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            field(file),
            s.source.line,
            s.format.id(),
            field(&s.op),
            opt(s.start().uptime_ns.filter(|_| s.end.uptime_ns.is_some())),
            opt(s.end.uptime_ns),
            s.end.wall.map(format_wall).unwrap_or_default(),
            opt(s.end.mono_ns),
            opt(s.ttsp_ns),
            opt(s.cleanup_ns),
            opt(s.at_safepoint_ns),
            opt(s.leaving_ns),
            s.total_ns,
            opt(s.since_last_ns),
            opt(s.threads_total),
            opt(s.threads_running),
            opt(s.page_traps),
            field(&culprits.join(";")),
        )
    }

    fn finish(&mut self, _view: &LogsView) -> io::Result<()> {
        if !self.header_done {
            writeln!(self.out, "{HEADER}")?;
        }
        self.out.flush()
    }
}
