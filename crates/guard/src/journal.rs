//! The guardian's journal: its pending undos kept on disk as well as in memory, so that a
//! guardian killed together with its owner (a session's end, `kill -9` of a whole group, the OOM
//! killer) leaves them to the next stallscope, which undoes them. One file per guardian, in
//! `/run/stallscope/undo` as root (a tmpfs, emptied at boot, when the changes themselves are
//! gone) or `$XDG_RUNTIME_DIR/stallscope/undo`; rewritten whole (a new file renamed over it) as
//! changes come and go, and removed once nothing is pending.
//!
//! Invariant: a journal is replayed only once neither its guardian nor its owner runs (each
//! known by pid and start time, a zombie counting as gone), and by one replayer only: it is
//! claimed by a rename before it is read.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A process, by pid and start time (clock ticks since boot): the pid alone may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    pub pid: i32,
    pub starttime: u64,
}

impl Proc {
    /// Process (or thread) `pid` as it is now; None when it is not there.
    pub fn of(pid: i32) -> Option<Proc> {
        procwatch::task::process_starttime(pid).map(|starttime| Proc { pid, starttime })
    }

    /// Whether it still runs: the same start time, and not a zombie.
    pub fn runs(&self) -> bool {
        procwatch::procfile::read(format!("/proc/{}/stat", self.pid))
            .ok()
            .and_then(|s| procwatch::task::parse_stat(s.trim_end()))
            .is_some_and(|s| s.starttime == self.starttime && !matches!(s.state, 'Z' | 'X'))
    }
}

/// A journal file, as read.
#[derive(Deserialize)]
struct File<T> {
    owner: Option<Proc>,
    guardian: Proc,
    pending: Vec<T>,
}

/// A journal file, as written (the same fields).
#[derive(Serialize)]
struct FileOut<'a, T> {
    owner: Option<Proc>,
    guardian: Proc,
    pending: &'a [T],
}

/// Where the journals are kept; None when there is no such place (not root, and no
/// `XDG_RUNTIME_DIR`): the guardian then keeps its undos in memory only, as it always did.
pub fn dir() -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let base = if unsafe { libc::geteuid() } == 0 {
        PathBuf::from("/run")
    } else {
        PathBuf::from(std::env::var_os("XDG_RUNTIME_DIR")?)
    };
    Some(base.join("stallscope").join("undo"))
}

/// One guardian's journal.
pub struct Journal {
    path: PathBuf,
    owner: Option<Proc>,
    guardian: Proc,
    /// Whether a file is there now (nothing pending: none).
    written: bool,
}

impl Journal {
    /// The journal of this process, the guardian of `owner`; None without a place for it.
    pub fn of_this_guardian(owner: Option<Proc>) -> Option<Journal> {
        let dir = dir()?;
        // SAFETY: getpid has no preconditions.
        let guardian = Proc::of(unsafe { libc::getpid() })?;
        Some(Journal {
            path: dir.join(format!("{}.json", guardian.pid)),
            owner,
            guardian,
            written: false,
        })
    }

    /// Keeps `pending` (oldest first): written over what was there, or removed when empty.
    /// Failing to write only loses the journal's help; the guardian still undoes.
    pub fn keep<T: Serialize>(&mut self, pending: &[T]) {
        if pending.is_empty() {
            self.remove();
            return;
        }
        let f = FileOut { owner: self.owner, guardian: self.guardian, pending };
        let Ok(text) = serde_json::to_vec(&f) else { return };
        let Some(dir) = self.path.parent() else { return };
        if !dir.is_dir() {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
        }
        let tmp = self.path.with_extension("new");
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, &self.path).is_ok() {
            self.written = true;
        }
    }

    /// Nothing pending any more.
    pub fn remove(&mut self) {
        if self.written {
            let _ = std::fs::remove_file(&self.path);
            self.written = false;
        }
    }
}

/// A journal left by a guardian and owner that both died, claimed for replay: its pending
/// changes, oldest first, and its owner.
pub struct Orphan<T> {
    claimed: PathBuf,
    pub owner: Option<Proc>,
    pub pending: Vec<T>,
}

impl<T> Orphan<T> {
    /// Its changes undone (or found undoable no more): the journal goes.
    pub fn done(self) {
        let _ = std::fs::remove_file(&self.claimed);
    }
}

/// The journals in `dir` whose guardian and owner are both gone, each claimed by this process;
/// a journal that cannot be read is removed (it can be undone by nobody).
pub fn orphans<T: DeserializeOwned>(dir: &Path) -> Vec<Orphan<T>> {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // Claimed by a replayer that died before it was done: claimed again.
        let claimed_by = name.split_once(".json.claimed-").and_then(|(_, p)| p.parse::<i32>().ok());
        if !name.ends_with(".json") && claimed_by.is_none_or(|p| Proc::of(p).is_some()) {
            continue;
        }
        let Ok(text) = std::fs::read(&path) else { continue };
        let Ok(f) = serde_json::from_slice::<File<T>>(&text) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        if f.guardian.runs() || f.owner.is_some_and(|o| o.runs()) {
            continue;
        }
        let base = name.split(".claimed-").next().unwrap_or(&name).to_string();
        let claimed = dir.join(format!("{base}.claimed-{me}"));
        if std::fs::rename(&path, &claimed).is_ok() {
            out.push(Orphan { claimed, owner: f.owner, pending: f.pending });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("stallscope-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn journal(dir: &Path, guardian: Proc, owner: Option<Proc>) -> Journal {
        Journal {
            path: dir.join(format!("{}.json", guardian.pid)),
            owner,
            guardian,
            written: false,
        }
    }

    #[test]
    fn only_a_journal_whose_guardian_and_owner_are_both_gone_is_claimed_and_once() {
        let d = scratch("orphans");
        let me = Proc::of(std::process::id() as i32).unwrap();
        assert!(me.runs());
        // A pid that ran once, with another start time: gone.
        let gone = Proc { pid: me.pid, starttime: me.starttime + 1 };
        assert!(!gone.runs());
        let gone2 = Proc { pid: 1, starttime: u64::MAX };
        let mut live_guardian = journal(&d, me, Some(gone));
        live_guardian.keep(&["a"]);
        let mut live_owner = journal(&d, Proc { pid: 2_000_001, ..gone2 }, Some(me));
        live_owner.keep(&["b"]);
        let mut orphan = journal(&d, Proc { pid: 2_000_002, ..gone2 }, Some(gone));
        orphan.keep(&["c", "d"]);
        let mut no_owner = journal(&d, Proc { pid: 2_000_003, ..gone2 }, None);
        no_owner.keep(&["e"]);
        std::fs::write(d.join("2000004.json"), b"{not json").unwrap();
        let mut got: Vec<Vec<String>> = orphans::<String>(&d)
            .into_iter()
            .map(|o| {
                let p = o.pending.clone();
                o.done();
                p
            })
            .collect();
        got.sort();
        assert_eq!(got, vec![vec!["c".to_string(), "d".into()], vec!["e".into()]]);
        // Claimed and done: not handed out again; the unreadable one removed; the live kept.
        assert!(orphans::<String>(&d).is_empty());
        let mut left: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut live = vec!["2000001.json".to_string(), format!("{}.json", me.pid)];
        live.sort();
        assert_eq!(left, live);
        // Nothing pending: the file goes.
        live_guardian.keep::<&str>(&[]);
        assert!(!d.join(format!("{}.json", me.pid)).exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_claim_left_by_a_replayer_that_died_is_claimed_again() {
        let d = scratch("reclaim");
        let gone = Proc { pid: 2_000_005, starttime: 1 };
        let mut j = journal(&d, gone, Some(gone));
        j.keep(&["x"]);
        // Claimed by a process that is no more.
        std::fs::rename(d.join("2000005.json"), d.join("2000005.json.claimed-2000006")).unwrap();
        let o = orphans::<String>(&d);
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].pending, vec!["x".to_string()]);
        o.into_iter().for_each(Orphan::done);
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
