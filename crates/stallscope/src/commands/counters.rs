//! `stallscope counters PID`: a JVM's perf counters, as `jstat -snap` prints them, read from its
//! shared file without attaching (procwatch::perfdata).

use crate::cli::CountersArgs;
use crate::failure::{EXIT_FAILURE, EXIT_OK, Failure};
use anyhow::Result;
use procwatch::perfdata::{PerfData, Value};
use std::io::Write;

pub fn run(a: CountersArgs) -> Result<i32> {
    let path = procwatch::perfdata::locate(a.pid)
        .map_err(|e| Failure::error(EXIT_FAILURE, e.to_string()))?;
    let pd = PerfData::open(&path).map_err(|e| Failure::error(EXIT_FAILURE, e.to_string()))?;
    let wanted = |name: &str| {
        a.prefixes.is_empty() || a.prefixes.iter().any(|p| name.starts_with(p.as_str()))
    };
    let all: Vec<(String, Value)> = pd
        .snapshot()
        .into_iter()
        .chain(pd.prologue_counters())
        .filter(|(n, _)| wanted(n))
        .collect();
    let mut out = std::io::stdout().lock();
    if a.json {
        let mut counters = serde_json::Map::new();
        for (name, v) in all {
            let v = match v {
                Value::Long(l) => serde_json::Value::from(l),
                Value::Text(t) => serde_json::Value::from(t),
                Value::Bytes(b) => serde_json::Value::from(b),
            };
            counters.insert(name, v);
        }
        let doc = serde_json::json!({ "schema": "stallscope.counters/1", "pid": a.pid, "file": path.display().to_string(), "counters": counters });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        for (name, v) in all {
            writeln!(out, "{name}={v}")?;
        }
    }
    Ok(EXIT_OK)
}
