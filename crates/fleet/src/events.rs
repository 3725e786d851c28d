//! `watch --events FILE|-`: one JSON line per diagnosed stall, for whatever log pipeline a team
//! already runs (schema `stallscope.watch-event/1`, docs/formats/watch-events.md).
//!
//! Invariant: one write per line, so a reader never sees half an event; a pipeline that goes
//! away (EPIPE, a full disk) costs the events, never the watching.

use doctor::report::StallReport;
use doctor::{Cause, Confidence, InstigatorKind};
use recording::Notices;
use serde::{Deserialize, Serialize};
use std::io::Write;

pub const SCHEMA: &str = "stallscope.watch-event/1";

/// The JVM an event is about.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventJvm {
    pub pid: i32,
    /// Its pid inside its own namespace (a container's).
    pub nspid: i32,
    pub main: String,
    /// Its cgroup path when in a container, else empty.
    pub container: String,
    /// The pod it runs in, when its cgroup names one (names from the runtime's bundle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<procwatch::pods::Pod>,
    pub jdk: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventSafepoint {
    pub op: String,
    pub ttsp_ns: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventCulprit {
    pub tid: i32,
    pub name: String,
    pub description: String,
    /// Its Java method where the JVM sampled it (`Class.method (File.java:88)`), when known.
    pub code: Option<String>,
}

/// Who set the stall off (the main finding's instigator).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventInstigator {
    /// `java-thread`, `jvm`, `attach-client`, `remote-jmx`, `signal`, `tracer`, `freezer`,
    /// `cpu-neighbours`, `memory-mapper` or `writer` (docs/formats/report-json.md).
    pub kind: InstigatorKind,
    pub name: String,
    /// Who and what they did, in one line.
    pub did: String,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub command: Option<String>,
    pub user: Option<String>,
    pub container: Option<String>,
}

/// One diagnosed stall.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StallEvent {
    pub schema: String,
    /// When it began, local wall time with its offset (RFC 3339).
    pub time: String,
    pub host: String,
    pub jvm: EventJvm,
    /// Its number in the recording.
    pub stall: u32,
    pub duration_ns: u64,
    pub safepoint: Option<EventSafepoint>,
    /// The main cause's id (docs/causes/ID.md), `unknown` when none was found.
    pub cause: Cause,
    pub title: String,
    pub confidence: Confidence,
    /// The part of the stall the cause explains (0–1).
    pub share: f64,
    pub culprit: Option<EventCulprit>,
    pub instigator: Option<EventInstigator>,
    pub fix: String,
    /// The recording holding the evidence (`stallscope report` reads it).
    pub recording: String,
    /// The stall's report as `watch --metrics` serves it (`http://HOST:PORT/recordings/NAME/stalls/N`);
    /// absent without `--metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

fn host() -> String {
    procwatch::procfile::read("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

impl StallEvent {
    /// The event of stall `s` of the recording `rec`.
    pub fn of(jvm: &EventJvm, rec: &recording::Recording, s: &StallReport) -> StallEvent {
        let f = s.findings.first();
        let start_ms = rec.meta.epoch_ms_of_mono(s.start_mono_ns);
        let time = chrono::DateTime::from_timestamp_millis(start_ms)
            .map(|d| {
                d.with_timezone(&chrono::Local)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
            })
            .unwrap_or_default();
        StallEvent {
            schema: SCHEMA.into(),
            time,
            host: host(),
            jvm: jvm.clone(),
            stall: s.stall,
            duration_ns: s.duration_ns,
            safepoint: s.safepoint.as_ref().map(|p| EventSafepoint {
                op: p.op.clone(),
                ttsp_ns: p.ttsp_ns,
                total_ns: p.total_ns,
            }),
            cause: f.map_or(Cause::Unknown, |f| f.cause),
            title: f.map_or_else(|| "no cause found".to_string(), |f| f.title.clone()),
            confidence: f.map_or(Confidence::Low, |f| f.confidence),
            share: f.map_or(0.0, |f| f.share),
            culprit: f.and_then(|f| f.culprits.first()).map(|c| EventCulprit {
                tid: c.tid,
                name: c.name.clone(),
                description: c.description.clone(),
                code: c.code.as_ref().and_then(|k| k.fix_frame()).map(doctor::code::describe_frame),
            }),
            instigator: f.and_then(|f| f.instigator.as_ref()).map(|i| EventInstigator {
                kind: i.kind,
                name: i.name.clone(),
                did: i.did.clone(),
                pid: i.pid,
                tid: i.tid,
                command: i.command.clone(),
                user: i.user.clone(),
                container: i.container.clone(),
            }),
            fix: f.map(|f| f.fix.clone()).unwrap_or_default(),
            recording: rec.dir.display().to_string(),
            url: None,
        }
    }
}

/// Where events go: a file (appended), stdout, or nowhere.
pub struct Events {
    out: Option<Box<dyn Write + Send>>,
    what: String,
    /// Told when the events can no longer be written.
    notices: Notices,
    /// `http://HOST:PORT` where the stalls' reports are served (`--metrics`), for their URLs.
    base: Option<String>,
}

impl Events {
    pub fn none() -> Events {
        Events { out: None, what: String::new(), notices: Notices::ignore(), base: None }
    }

    /// The same, with each stall's report served under `base` (`http://HOST:PORT`).
    pub fn serving(self, base: Option<String>) -> Events {
        Events { base, ..self }
    }

    /// The URL of stall `stall`'s report, of the recording in `dir`, where reports are served.
    pub fn url_of(&self, dir: &std::path::Path, stall: u32) -> Option<String> {
        let base = self.base.as_ref()?;
        crate::pages::stall_path(dir, stall).map(|p| format!("{base}{p}"))
    }

    /// `-` is stdout; a path is appended to (created 0640 when missing).
    pub fn open(target: &str, notices: Notices) -> anyhow::Result<Events> {
        use anyhow::Context;
        use std::os::unix::fs::OpenOptionsExt;
        if target == "-" {
            return Ok(Events {
                out: Some(Box::new(std::io::stdout())),
                what: "stdout".into(),
                notices,
                base: None,
            });
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .custom_flags(libc::O_NOFOLLOW)
            .open(target)
            .with_context(|| format!("--events {target}: cannot append to it"))?;
        Ok(Events { out: Some(Box::new(f)), what: target.to_string(), notices, base: None })
    }

    pub fn write(&mut self, e: &StallEvent) {
        let Some(out) = &mut self.out else { return };
        let mut line = serde_json::to_vec(e).unwrap_or_default();
        line.push(b'\n');
        if let Err(err) = out.write_all(&line).and_then(|_| out.flush()) {
            self.notices.warn(format!("--events {}: {err}; no more events are written", self.what));
            self.out = None;
        }
    }

    pub fn flush(&mut self) {
        if let Some(o) = &mut self.out {
            let _ = o.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
        if let Some(o) = v.as_object() {
            for (k, x) in o {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                out.push(p.clone());
                paths(x, &p, out);
            }
        }
    }

    #[test]
    fn every_field_of_an_event_is_documented_and_the_document_lists_no_other() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/formats/watch-events.md"),
        )
        .unwrap();
        let e = StallEvent {
            schema: SCHEMA.into(),
            time: String::new(),
            host: String::new(),
            jvm: EventJvm {
                pid: 1,
                nspid: 1,
                main: String::new(),
                container: String::new(),
                pod: Some(procwatch::pods::Pod::default()),
                jdk: None,
            },
            stall: 1,
            duration_ns: 0,
            safepoint: Some(EventSafepoint { op: String::new(), ttsp_ns: 0, total_ns: 0 }),
            cause: Cause::Unknown,
            title: String::new(),
            confidence: Confidence::Low,
            share: 0.0,
            culprit: Some(EventCulprit {
                tid: 1,
                name: String::new(),
                description: String::new(),
                code: None,
            }),
            instigator: Some(EventInstigator {
                kind: InstigatorKind::Jvm,
                name: String::new(),
                did: String::new(),
                pid: None,
                tid: None,
                command: None,
                user: None,
                container: None,
            }),
            fix: String::new(),
            recording: String::new(),
            url: Some(String::new()),
        };
        let mut fields = Vec::new();
        paths(&serde_json::to_value(&e).unwrap(), "", &mut fields);
        for f in &fields {
            assert!(
                doc.contains(&format!("| `{f}` |")),
                "{f} is not in docs/formats/watch-events.md"
            );
        }
        let listed = doc.lines().filter(|l| l.starts_with("| `")).count();
        assert_eq!(listed, fields.len(), "the document lists fields an event does not have");
    }
}
