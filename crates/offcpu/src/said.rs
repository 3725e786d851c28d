//! What libbpf itself says (its warnings; a refused program's verifier log): kept here, not
//! printed. By default libbpf writes to stderr, where its lines (`libbpf: elf: failed to open
//! /proc/…/libjvm.so: -ENOENT`, as a JVM exits while its probes are attached) reach the user raw,
//! ahead of stallscope's own message about the same failure. The last of them are handed to the
//! error that follows instead.

use libbpf_rs::PrintLevel;
use std::collections::VecDeque;
use std::sync::{Mutex, Once};

/// Lines kept (a verifier log runs to thousands; its end says why).
const KEPT: usize = 200;

static SAID: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
static ONCE: Once = Once::new();

/// Routes libbpf's warnings here, once a process.
pub(crate) fn keep() {
    ONCE.call_once(|| {
        libbpf_rs::set_print(Some((PrintLevel::Warn, kept)));
    });
}

fn kept(_: PrintLevel, msg: String) {
    let Ok(mut s) = SAID.lock() else { return };
    for line in msg.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if s.len() == KEPT {
            s.pop_front();
        }
        s.push_back(line.to_string());
    }
}

/// Forgets what libbpf said so far: what follows is about the next call alone.
pub(crate) fn forget() {
    if let Ok(mut s) = SAID.lock() {
        s.clear();
    }
}

/// `; libbpf said: …` with the last `n` lines libbpf said since the last call (all are
/// forgotten), or nothing when it said none.
pub(crate) fn words(n: usize) -> String {
    let Ok(mut s) = SAID.lock() else { return String::new() };
    let lines: Vec<String> = s.drain(..).collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(n);
    format!("; libbpf said: {}", lines[from..].join(" / "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lines_are_kept_and_said_once() {
        kept(PrintLevel::Warn, "libbpf: elf: failed to open x: -ENOENT\n".into());
        kept(PrintLevel::Warn, "a\nb\n\n".into());
        assert_eq!(words(2), "; libbpf said: a / b");
        assert_eq!(words(2), "");
        for i in 0..KEPT + 5 {
            kept(PrintLevel::Warn, format!("{i}"));
        }
        assert_eq!(words(1), format!("; libbpf said: {}", KEPT + 4));
        kept(PrintLevel::Warn, "stale".into());
        forget();
        assert_eq!(words(3), "");
    }
}
