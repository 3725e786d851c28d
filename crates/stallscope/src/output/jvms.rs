//! The JVMs on the host (`stallscope jvms`) as text: one line each, as `jcmd -l` and `jps -l`
//! print them, with what stallscope needs to know to attach: whose, which JDK, in which
//! container.

use super::Render;
use procwatch::jvms::{JvmProcess, Unreadable};
use serde::Serialize;
use std::io::{self, Write};

/// What `stallscope jvms` found: the JSON form is this, with `schema` `stallscope.jvms/1`.
#[derive(Debug, Serialize)]
pub struct JvmList {
    pub schema: &'static str,
    pub jvms: Vec<JvmProcess>,
    /// Processes that could not be read (another user's, without privilege), with why.
    pub unreadable: Vec<Unreadable>,
}

pub struct JvmsText<W: Write>(pub W);

impl<W: Write> Render<JvmList> for JvmsText<W> {
    fn finish(&mut self, l: &JvmList) -> io::Result<()> {
        writeln!(
            self.0,
            "{:>8} {:>7} {:>6}  {:<10} {:<40} container",
            "pid", "in-ns", "uid", "jdk", "main"
        )?;
        for j in &l.jvms {
            let ns = if j.nspid == j.pid { "-".to_string() } else { j.nspid.to_string() };
            let container = if j.contained { j.cgroup.as_str() } else { "-" };
            let main = if j.main.is_empty() { "(none on its command line)" } else { &j.main };
            writeln!(
                self.0,
                "{:>8} {:>7} {:>6}  {:<10} {:<40} {container}",
                j.pid,
                ns,
                j.uid,
                j.java_version.as_deref().unwrap_or("?"),
                main
            )?;
        }
        if !l.unreadable.is_empty() {
            let some: Vec<String> = l
                .unreadable
                .iter()
                .take(3)
                .map(|u| format!("pid {}: {}", u.pid, u.reason))
                .collect();
            let more = if l.unreadable.len() > 3 {
                format!("; and {} more", l.unreadable.len() - 3)
            } else {
                String::new()
            };
            // SAFETY: geteuid has no preconditions.
            let hint =
                if unsafe { libc::geteuid() } == 0 { "" } else { "; another user's need root" };
            writeln!(
                self.0,
                "{} processes could not be read, so any JVM among them is not listed ({}{more}){hint}",
                l.unreadable.len(),
                some.join("; ")
            )?;
        }
        self.0.flush()
    }
}
