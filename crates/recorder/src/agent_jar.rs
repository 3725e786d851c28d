//! Finding `stallscope-agent.jar` without configuration: `--agent`, `$STALLSCOPE_AGENT`, next
//! to the executable, `../lib/` (the `make dist` layout), then the build tree.
//!
//! Invariant: when nothing is found, the error lists every place that was looked in.

use anyhow::Result;
use std::path::{Path, PathBuf};

pub const JAR: &str = "stallscope-agent.jar";

/// The places to look, in order, each with why it is there.
pub fn candidates(flag: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    let mut v = Vec::new();
    if let Some(p) = flag {
        v.push((p.to_path_buf(), "--agent"));
    }
    if let Some(p) = std::env::var_os("STALLSCOPE_AGENT") {
        v.push((PathBuf::from(p), "$STALLSCOPE_AGENT"));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.canonicalize().ok())
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        v.push((dir.join(JAR), "next to the executable"));
        v.push((dir.join("../lib").join(JAR), "../lib beside the executable"));
        // target/{debug,release}/stallscope → the workspace root is two levels up.
        for up in [dir.join("../.."), dir.join("../../..")] {
            v.push((up.join("java/agent/target").join(JAR), "the build tree"));
        }
    }
    v
}

pub fn find(flag: Option<&Path>) -> Result<PathBuf> {
    let c = candidates(flag);
    // An explicit path that is wrong is an error of its own, not a reason to look elsewhere.
    if let Some((p, why)) = c.first().filter(|(_, w)| *w == "--agent" || *w == "$STALLSCOPE_AGENT")
    {
        return if p.is_file() {
            Ok(p.canonicalize()?)
        } else {
            Err(anyhow::anyhow!("{}: no agent jar there (from {why})", p.display()))
        };
    }
    for (p, _) in &c {
        if p.is_file() {
            return Ok(p.canonicalize()?);
        }
    }
    let looked: Vec<String> = c.iter().map(|(p, why)| format!("{} ({why})", p.display())).collect();
    Err(anyhow::anyhow!(
        "{JAR} not found; looked in: {}. Build it with `make build`, or pass --agent PATH",
        looked.join(", ")
    ))
}
