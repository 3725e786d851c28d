//! `stallscope jvms`: the JVMs on this host, as `jcmd -l` lists them, in containers too, with
//! `--match` choosing by main class, jar or command line (the selection `watch` will use).

use crate::cli::JvmsArgs;
use crate::output::jvms::{JvmList, JvmsText};
use crate::output::json::Json;
use crate::output::Render;
use anyhow::Result;

pub fn run(a: JvmsArgs) -> Result<i32> {
    let matcher = match a.matches.as_deref() {
        Some(p) => Some(regex::Regex::new(p).map_err(|e| anyhow::anyhow!("--match '{p}': not a regular expression ({}); e.g. --match 'com\\.acme\\.Main|orders\\.jar'", e.to_string().lines().last().unwrap_or("").trim_start_matches("error: ")))?),
        None => None,
    };
    let (mut jvms, unreadable) = procwatch::jvms::list();
    if let Some(m) = &matcher {
        jvms.retain(|j| m.is_match(&j.main) || m.is_match(&j.cmdline.join(" ")));
    }
    let list = JvmList { schema: "stallscope.jvms/1", jvms, unreadable };
    let out = std::io::stdout().lock();
    if a.json {
        Json(out).finish(&list)?;
    } else {
        JvmsText(out).finish(&list)?;
    }
    Ok(0)
}
