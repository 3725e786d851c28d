//! The words the classification's evidence lines share: how a role's threads are named ("it",
//! "the operation's threads"), counts with their plurals, and sizes.
//!
//! Invariant: words only; nothing here decides a cause, a share or a confidence.

use recording::units::fmt_count;

/// What a thread is to the segment it is analysed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Late to a safepoint.
    Late,
    /// Running a safepoint's operation (the VM thread, a GC worker).
    Operation,
    /// The agent's meter, outside a safepoint: its lateness is the hiccup.
    Meter,
}

/// How evidence lines name the threads of a role.
pub(super) struct Subject {
    pub who: &'static str,
    pub was: &'static str,
    pub its: &'static str,
    pub it: &'static str,
}

impl Role {
    pub(super) fn subject(self) -> Subject {
        match self {
            Role::Late => Subject { who: "it", was: "was", its: "its", it: "it" },
            Role::Operation => {
                Subject { who: "the operation's threads", was: "were", its: "their", it: "they" }
            }
            Role::Meter => {
                Subject { who: "the agent's meter thread", was: "was", its: "its", it: "it" }
            }
        }
    }
}

/// `n` things, `1 page`, `1,024 pages`.
pub(super) fn plural(n: u64, one: &str) -> String {
    format!("{} {one}{}", fmt_count(n), if n == 1 { "" } else { "s" })
}

/// Bytes as people read them: 1.23 GB, 456 MB, 12.3 kB.
pub(super) fn fmt_bytes(b: u64) -> String {
    let v = b as f64;
    if v >= 1e9 {
        format!("{:.2} GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.0} MB", v / 1e6)
    } else {
        format!("{:.0} kB", v / 1e3)
    }
}
