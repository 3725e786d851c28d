//! Each stall's explanation served on `watch --metrics`'s listener (issue 57): from an alert to
//! the stall's report in one click, with nothing copied off the node by hand.
//!
//! URLs (stable: a recording's directory name under `--out`, and the stall's number in it):
//! - `/recordings/NAME/`: the HTML report of one JVM's recording;
//! - `/recordings/NAME/report.json`: the same as `stallscope report --json`;
//! - `/recordings/NAME/stalls/N`: the HTML report of stall N alone;
//! - `/recordings/NAME/stalls/N.json`: its JSON.
//!
//! Invariants:
//! - Read-only, and nothing outside the recordings: a name is one path component of the
//!   characters `watch` names recordings with (no `/`, no `..`, no leading dot), and must be a
//!   directory right under `--out` (not a link) holding a recording; anything else is a 404 that
//!   says what is served, never a listing.
//! - The page is made by the caller's renderer (the binary's: the same doctor and HTML view as
//!   `stallscope report`) on the connection's own thread, at idle priority, so that a report being
//!   drawn never holds the guarding or a scrape of `/metrics`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which view of a recording is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The whole recording.
    Recording,
    /// One stall of it, by its number.
    Stall(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Json,
}

/// A page to make: of the recording in `dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub dir: PathBuf,
    pub view: View,
    pub format: Format,
}

/// What a page is made with. `Ok(None)`: there is no such stall in the recording.
pub type Render = Arc<dyn Fn(&Request) -> anyhow::Result<Option<Vec<u8>>> + Send + Sync>;

/// The recordings served, under `out`, and how their pages are made.
#[derive(Clone)]
pub struct Pages {
    pub out: PathBuf,
    pub render: Render,
}

/// The answer to one request: its status line, content type and body.
pub struct Answer {
    pub status: &'static str,
    pub ctype: &'static str,
    pub body: Vec<u8>,
}

const TEXT: &str = "text/plain; charset=utf-8";
/// The longest recording name served (`watch` makes them under 80 characters).
const MAX_NAME: usize = 128;

/// Whether `name` may be a recording's directory name as `watch` makes them.
pub fn served_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
}

/// The recording name, view and format a path asks for; None for any other path.
pub fn route(path: &str) -> Option<(&str, View, Format)> {
    let rest = path.strip_prefix("/recordings/")?;
    let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if !served_name(name) {
        return None;
    }
    let (view, format) = match tail {
        "" => (View::Recording, Format::Html),
        "report.json" => (View::Recording, Format::Json),
        t => {
            let n = t.strip_prefix("stalls/")?;
            let (n, format) = match n.strip_suffix(".json") {
                Some(n) => (n, Format::Json),
                None => (n, Format::Html),
            };
            // Digits only: no sign, no space, no leading zero but for 0 itself.
            if n.is_empty()
                || !n.bytes().all(|b| b.is_ascii_digit())
                || (n.len() > 1 && n.starts_with('0'))
            {
                return None;
            }
            (View::Stall(n.parse().ok()?), format)
        }
    };
    Some((name, view, format))
}

/// The path of stall `stall` of the recording in `dir` (its last component is the name).
pub fn stall_path(dir: &Path, stall: u32) -> Option<String> {
    let name = dir.file_name()?.to_str().filter(|n| served_name(n))?;
    Some(format!("/recordings/{name}/stalls/{stall}"))
}

/// `http://HOST:PORT` of the listener bound at `bound`: its address, or where it listens on
/// every address, the node's host name.
pub fn base_url(bound: std::net::SocketAddr) -> String {
    let host = if bound.ip().is_unspecified() {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into())
    } else if bound.is_ipv6() {
        format!("[{}]", bound.ip())
    } else {
        bound.ip().to_string()
    };
    format!("http://{host}:{}", bound.port())
}

fn not_found(why: &str) -> Answer {
    Answer {
        status: "404 Not Found",
        ctype: TEXT,
        body: format!(
            "not found: {why}\nserved: /metrics, /recordings/NAME/ (a recording's report), /recordings/NAME/report.json, /recordings/NAME/stalls/N and /recordings/NAME/stalls/N.json (one stall's)\n"
        )
        .into_bytes(),
    }
}

impl Pages {
    /// The answer to a GET of `path` (one under `/recordings/`).
    pub fn answer(&self, path: &str) -> Answer {
        let Some((name, view, format)) = route(path) else {
            return not_found("no such page");
        };
        let dir = self.out.join(name);
        // Right under --out, a directory and not a link to one, holding a recording.
        let real_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
        if !real_dir || !dir.join(recording::files::META).is_file() {
            return not_found(&format!("no recording {name} here"));
        }
        let req = Request { dir, view, format };
        // Drawn at the helpers' priority: level with a JVM's threads, below the guarding's
        // loops, and never below them (see `helper_priority`: a page drawn at SCHED_IDLE could
        // hold them on a lock it took).
        recording::writer::helper_priority();
        match (self.render)(&req) {
            Ok(Some(body)) => Answer {
                status: "200 OK",
                ctype: match format {
                    Format::Html => "text/html; charset=utf-8",
                    Format::Json => "application/json",
                },
                body,
            },
            Ok(None) => not_found(&format!("the recording {name} has no such stall")),
            Err(e) => Answer {
                status: "500 Internal Server Error",
                ctype: TEXT,
                body: format!("the recording {name} could not be read: {e:#}\n").into_bytes(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_urls_and_nothing_else() {
        let n = "4242-Main-20261129-120102";
        assert_eq!(route(&format!("/recordings/{n}/")), Some((n, View::Recording, Format::Html)));
        assert_eq!(route(&format!("/recordings/{n}")), Some((n, View::Recording, Format::Html)));
        assert_eq!(
            route(&format!("/recordings/{n}/report.json")),
            Some((n, View::Recording, Format::Json))
        );
        assert_eq!(
            route(&format!("/recordings/{n}/stalls/17")),
            Some((n, View::Stall(17), Format::Html))
        );
        assert_eq!(
            route(&format!("/recordings/{n}/stalls/0.json")),
            Some((n, View::Stall(0), Format::Json))
        );
        for bad in [
            "/recordings/",
            "/recordings/../etc/passwd",
            "/recordings/..",
            "/recordings/.hidden/",
            "/recordings/a%2f..%2fb/",
            "/recordings/a/../b/",
            "/recordings/a/stalls/",
            "/recordings/a/stalls/-1",
            "/recordings/a/stalls/+1",
            "/recordings/a/stalls/01",
            "/recordings/a/stalls/4294967296",
            "/recordings/a/stalls/1/x",
            "/recordings/a/meta.json",
            "/recordings/a b/",
            "/etc/passwd",
        ] {
            assert_eq!(route(bad), None, "{bad}");
        }
        assert_eq!(route(&format!("/recordings/{}/", "a".repeat(MAX_NAME + 1))), None);
        assert_eq!(
            stall_path(Path::new("/var/lib/stallscope/4242-Main-20261129-120102"), 3).as_deref(),
            Some("/recordings/4242-Main-20261129-120102/stalls/3")
        );
        assert_eq!(stall_path(Path::new("/x/a b"), 3), None);
    }

    proptest::proptest! {
        #[test]
        fn any_path_routes_only_to_one_plain_component(p in "/recordings/[a-z0-9./%+_-]{0,40}(/stalls/[0-9a-z.]{0,12})?") {
            if let Some((name, _, _)) = route(&p) {
                proptest::prop_assert!(served_name(name));
                proptest::prop_assert!(!name.contains('/') && !name.starts_with('.'));
            }
        }
    }
}
