//! What a piece of stallscope noticed on the way — a step worth telling, or a warning — as a
//! value handed to whoever runs it. Libraries never print: the recorder, the fleet and the lab
//! tell a [`Notices`] sink, and the binary decides where that goes (stderr, one line each).

use serde::Serialize;
use std::sync::{Arc, Mutex};

/// Whether a notice reports progress or something that went less well than asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A step worth telling: what is watched, where the recording goes.
    Progress,
    /// Something done less well than asked, and what was done instead.
    Warning,
}

/// One thing noticed: who noticed it (`stallscope`, `slowfs`, `cpu-hog`), and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    pub source: &'static str,
    pub kind: Kind,
    pub text: String,
}

impl std::fmt::Display for Notice {
    /// `source: text`, the one line the binary prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.source, self.text)
    }
}

type Sink = dyn Fn(Notice) + Send + Sync;

/// Where notices go: cheap to clone, callable from any thread.
#[derive(Clone)]
pub struct Notices(Arc<Sink>);

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Notices")
    }
}

impl Notices {
    /// Notices handed to `sink`, one call each, in the order they are noticed per thread.
    pub fn new(sink: impl Fn(Notice) + Send + Sync + 'static) -> Notices {
        Notices(Arc::new(sink))
    }

    /// Notices nobody wants (a caller that has its own way of reporting).
    pub fn ignore() -> Notices {
        Notices::new(|_| {})
    }

    /// Notices kept in a list the caller reads afterwards (tests, the lab's per-run notes).
    pub fn collect() -> (Notices, Arc<Mutex<Vec<Notice>>>) {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let k = Arc::clone(&kept);
        (
            Notices::new(move |n| {
                if let Ok(mut v) = k.lock() {
                    v.push(n);
                }
            }),
            kept,
        )
    }

    /// Tells one notice.
    pub fn tell(&self, source: &'static str, kind: Kind, text: impl Into<String>) {
        (self.0)(Notice { source, kind, text: text.into() });
    }

    /// Progress, from `stallscope`.
    pub fn progress(&self, text: impl Into<String>) {
        self.tell("stallscope", Kind::Progress, text);
    }

    /// A warning, from `stallscope`.
    pub fn warn(&self, text: impl Into<String>) {
        self.tell("stallscope", Kind::Warning, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collected_notices_keep_their_order_source_and_kind() {
        let (n, kept) = Notices::collect();
        n.progress("watching pid 7");
        n.clone().tell("slowfs", Kind::Warning, "control write refused");
        let kept = kept.lock().unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].to_string(), "stallscope: watching pid 7");
        assert_eq!(kept[1].kind, Kind::Warning);
        assert_eq!(kept[1].to_string(), "slowfs: control write refused");
    }
}
