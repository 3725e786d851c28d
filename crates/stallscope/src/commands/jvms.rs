//! `stallscope jvms`: the JVMs on this host, as `jcmd -l` lists them, in containers too, with
//! `--match` choosing by main class, jar or command line (the selection `watch` will use).

use crate::cli::JvmsArgs;
use crate::output::Render;
use crate::output::json::Json;
use crate::output::jvms::{JvmList, JvmsText};
use anyhow::Result;
use fleet::discover::Selection;

pub fn run(a: JvmsArgs) -> Result<i32> {
    let selection = match a.matches.as_deref() {
        Some(p) => Selection::matching(p).map_err(anyhow::Error::msg)?,
        None => Selection::All,
    };
    let (mut jvms, unreadable) = procwatch::jvms::list();
    jvms.retain(|j| selection.selects(j));
    let list = JvmList { schema: "stallscope.jvms/1", jvms, unreadable };
    let out = std::io::stdout().lock();
    if a.json {
        Json(out).finish(&list)?;
    } else {
        JvmsText(out).finish(&list)?;
    }
    Ok(0)
}
