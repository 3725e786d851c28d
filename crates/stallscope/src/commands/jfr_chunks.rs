//! `stallscope jfr-chunks` (hidden): the process `logs` and `report` read a JFR file in, which a
//! damaged file cannot take down. The reading is `logs::sandbox`'s; this is its process: the
//! answer on stdout, a parser's panic as one line on stderr for the parent to quote.

use anyhow::Result;
use std::path::Path;

pub fn run(file: &Path, samples: Option<&str>, flight: Option<i64>) -> Result<i32> {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        eprintln!("{}: {msg}", logs::sandbox::PARSER_FAILED);
    }));
    logs::sandbox::read_chunks(file, samples, flight, &mut std::io::stdout().lock())
}
