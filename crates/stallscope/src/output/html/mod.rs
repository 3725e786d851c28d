//! The HTML report: one self-contained file (no network, no CDN) with the page's style, script
//! and data inlined. The script draws everything on canvases from the data; the same script
//! serves a recording and a lab run.
//!
//! The page records its own health in the DOM for tests and for people: `body[data-rendered]`
//! is `ok` once everything is drawn, and any script error, console error or unhandled
//! rejection is appended to `#errors` (and counted in `body[data-errors]`).

pub mod view;

use super::Render;
use anyhow::Context as _;
use lab::model::LabResult;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use view::RecordingView;

const TEMPLATE: &str = include_str!("page.html");
const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

pub const SCHEMA: &str = "stallscope.html/1";

#[derive(Serialize)]
struct Page<'a> {
    schema: &'static str,
    kind: &'static str,
    title: String,
    generated: String,
    version: &'static str,
    recording: Option<&'a RecordingView>,
    lab: Option<&'a LabResult>,
    /// Each cause's colour (a stylesheet variable), from its module (`doctor::causes`).
    cause_colours: BTreeMap<&'static str, &'static str>,
}

fn cause_colours() -> BTreeMap<&'static str, &'static str> {
    doctor::Cause::ALL.iter().map(|c| (c.id(), c.spec().colour)).collect()
}

/// Escapes text for an HTML text node or attribute.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn render(page: &Page) -> anyhow::Result<String> {
    // Inside <script>, "</script" would close the element and "<!--" changes how it is parsed.
    // In JSON, "<" appears only inside strings, where "\u003c" means the same character.
    let json = serde_json::to_string(page)?.replace('<', "\\u003c");
    fill(
        TEMPLATE,
        &[
            ("{{TITLE}}", &escape(&page.title)),
            ("/*{{STYLE}}*/", STYLE),
            ("{{DATA}}", &json),
            ("/*{{SCRIPT}}*/", SCRIPT),
        ],
    )
}

/// Fills each marker of the template once, in one pass, so that filled-in text (a command line,
/// a title) is never searched for later markers.
fn fill(template: &str, parts: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut out =
        String::with_capacity(template.len() + parts.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    for (marker, value) in parts {
        let Some(at) = rest.find(marker) else {
            anyhow::bail!("the page template lacks {marker} (a build defect)")
        };
        out.push_str(&rest[..at]);
        out.push_str(value);
        rest = &rest[at + marker.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

fn now() -> String {
    chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string()
}

fn recording_page(view: &RecordingView) -> anyhow::Result<String> {
    let title = format!("stallscope: pid {} — {}", view.header.pid, view.header.start_wall);
    render(&Page {
        schema: SCHEMA,
        kind: "recording",
        title,
        generated: now(),
        version: env!("CARGO_PKG_VERSION"),
        recording: Some(view),
        lab: None,
        cause_colours: cause_colours(),
    })
}

fn lab_page(lab: &LabResult) -> anyhow::Result<String> {
    let title = format!("stallscope lab — {} profile, {}", lab.profile, lab.started);
    render(&Page {
        schema: SCHEMA,
        kind: "lab",
        title,
        generated: now(),
        version: env!("CARGO_PKG_VERSION"),
        recording: None,
        lab: Some(lab),
        cause_colours: cause_colours(),
    })
}

/// The self-contained page of a recording or a lab run.
pub struct Html<W: io::Write>(pub W);

fn page_error(e: anyhow::Error) -> io::Error {
    io::Error::other(format!("{e:#}"))
}

impl<W: io::Write> Render<RecordingView> for Html<W> {
    fn finish(&mut self, view: &RecordingView) -> io::Result<()> {
        self.0.write_all(recording_page(view).map_err(page_error)?.as_bytes())
    }
}

impl<W: io::Write> Render<LabResult> for Html<W> {
    fn finish(&mut self, lab: &LabResult) -> io::Result<()> {
        self.0.write_all(lab_page(lab).map_err(page_error)?.as_bytes())
    }
}

/// `--html` with no value means `<dir>/<default>`.
pub fn html_path(out: Option<&Path>, dir: &Path, default: &str) -> PathBuf {
    out.map_or_else(|| dir.join(default), Path::to_path_buf)
}

/// Writes `view`'s page to `path` whole (through a temporary file, so a reader never sees half
/// of it) and says where it is.
pub fn write_page<V>(path: &Path, view: &V) -> anyhow::Result<()>
where
    for<'a> Html<&'a mut Vec<u8>>: Render<V>,
{
    let mut page = Vec::new();
    Html(&mut page)
        .finish(view)
        .with_context(|| format!("{}: cannot render the report", path.display()))?;
    let tmp = path.with_extension("html.tmp");
    std::fs::write(&tmp, &page)
        .with_context(|| format!("{}: cannot write the report", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("{}: cannot write the report", path.display()))?;
    eprintln!(
        "stallscope: wrote {} ({} KB); open it in a browser, it needs no network",
        path.display(),
        page.len().div_ceil(1024)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_cannot_close_its_script_element() {
        let view = lab::model::LabResult {
            schema: "x".into(),
            started: "</script><script>alert(1)</script><!-- {{DATA}} /*{{SCRIPT}}*/".into(),
            profile: "quick".into(),
            reps: 1,
            environment: lab::model::Environment {
                kernel: "k".into(),
                cpus: 2,
                java: "j".into(),
                java_version: "17".into(),
                root: true,
                fuse: true,
                stallscope_version: "0".into(),
            },
            scenarios: vec![],
            confusion: Default::default(),
            elapsed_ms: 0,
        };
        let html = lab_page(&view).unwrap();
        assert_eq!(
            html.matches("</script>").count(),
            html.matches("<script").count(),
            "every script element closes once, where it should"
        );
        assert!(html.contains("&lt;/script&gt;"), "the title is escaped");
        assert!(!html.contains("<!--"), "no comment opener from the data");
        assert_eq!(
            html.matches("alert(1)").count(),
            3,
            "the text is kept: in <title>, and in the data as title and as started"
        );
        assert!(
            !html.contains("http://") && !html.contains("https://") && !html.contains("//cdn"),
            "no network references"
        );
    }
}
