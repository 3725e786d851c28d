//! The flight recorder's repository that `attach` leaves behind otherwise (issue 58).
//!
//! JFR makes its repository, `yyyy_MM_dd_HH_mm_ss_PID` in the JVM's temporary directory (or under
//! its `repositorypath`), when a recording first starts, and removes it only at a normal exit:
//! once `attach` has started and stopped its recording, a JVM killed later (SIGKILL, the OOM
//! killer, a crash) leaves the empty directory in /tmp for good. So at detach, once stallscope's
//! recording is stopped, the repository is removed, where that takes nothing from anyone:
//!
//! - only while the JVM has no recording left (`JFR.check`), and only empty (`rmdir`: a recording
//!   started meanwhile keeps its chunks, and a path swapped for a link is not followed);
//! - never where its user asked it kept (`preserve-repository=true`, JDK 21 on);
//! - only a directory named as JFR names its repositories.
//!
//! JFR makes the directory again when a chunk is next needed (checked on JDK 11, 17, 21 and 25:
//! `Repository.newChunk` looks for it first), so a recording started later works as before.
//! `JFR.configure` is asked only after a recording of ours ran: on a JVM whose recorder never
//! started, asking it starts the recorder (on JDK 25 it makes a repository).

use anyhow::Result;
use hotspot_attach::Jvm;
use std::path::PathBuf;

/// What `JFR.check` and `JFR.configure` say of the repository, read from their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    /// No recording is left in the JVM.
    pub none_left: bool,
    /// The repository's path as the JVM names it (absent: `N/A`, or not said).
    pub path: Option<String>,
    /// Its user asked it kept at exit.
    pub preserved: bool,
}

/// Reads `JFR.check`'s answer (`check`) and `JFR.configure`'s (`configure`).
pub fn read(check: &str, configure: &str) -> Said {
    let value = |key: &str| {
        configure.lines().find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
    };
    Said {
        none_left: check.lines().any(|l| l.trim() == "No available recordings."),
        path: value("Repository path:").filter(|p| p.starts_with('/') && p != "N/A"),
        preserved: value("Preserve repository:").is_some_and(|v| v == "true"),
    }
}

/// Whether `name` is one JFR gives a repository: seven groups of digits joined by `_`, a
/// four-digit year first and the JVM's pid last.
pub fn shaped(name: &str) -> bool {
    let parts: Vec<&str> = name.split('_').collect();
    parts.len() == 7
        && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && parts[0].len() == 4
        && parts[1..6].iter().all(|p| p.len() == 2)
}

/// The repository of JVM `pid` as said in `said`, seen from here (through `/proc/PID/root`, so
/// that a JVM in another mount namespace's /tmp is reached too), when it may go.
pub fn removable(pid: i32, said: &Said) -> Option<PathBuf> {
    if !said.none_left || said.preserved {
        return None;
    }
    let path = said.path.as_deref()?;
    let name = path.rsplit('/').next()?;
    if !shaped(name) || path.split('/').any(|c| c == "..") {
        return None;
    }
    Some(PathBuf::from(format!("/proc/{pid}/root{path}")))
}

/// Removes the repository of `jvm` once stallscope's recording there is stopped (see the
/// module's notes). Ok(Some(path)): removed; Ok(None): left, as it should be (a recording left,
/// not empty, asked kept, or gone already).
pub fn remove_after_stop(jvm: &Jvm) -> Result<Option<PathBuf>> {
    let check = jvm.jcmd("JFR.check")?;
    if !read(&check, "").none_left {
        return Ok(None);
    }
    let configure = jvm.jcmd("JFR.configure")?;
    let Some(dir) = removable(jvm.pid, &read(&check, &configure)) else {
        return Ok(None);
    };
    match std::fs::remove_dir(&dir) {
        Ok(()) => Ok(Some(dir)),
        // Not empty (a recording began meanwhile), gone, or not a directory: left as it is.
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK_NONE: &str =
        "4242:\nNo available recordings.\n\nUse jcmd 4242 JFR.start to start a recording.\n";
    const CHECK_ONE: &str = "4242:\nRecording 1: name=mine (running)\n";
    const CONFIGURE_25: &str = "4242:\nCurrent configuration:\n\nPreserve repository: false\nRepository path: /tmp/2026_11_29_11_31_52_4242\n\nDump path: /tmp\n\nStack depth: 64\n";
    const CONFIGURE_11: &str = "4242:\nCurrent configuration:\n\nRepository path: /tmp/2026_11_29_11_31_23_4242\nStack depth: 64\n";

    #[test]
    fn the_repository_goes_only_once_no_recording_is_left_and_it_is_not_kept() {
        let s = read(CHECK_NONE, CONFIGURE_25);
        assert_eq!(
            s,
            Said {
                none_left: true,
                path: Some("/tmp/2026_11_29_11_31_52_4242".into()),
                preserved: false
            }
        );
        assert_eq!(
            removable(4242, &s),
            Some(PathBuf::from("/proc/4242/root/tmp/2026_11_29_11_31_52_4242"))
        );
        assert!(removable(1, &read(CHECK_NONE, CONFIGURE_11)).is_some(), "JDK 11's words");
        assert_eq!(removable(4242, &read(CHECK_ONE, CONFIGURE_25)), None, "a recording left");
        let kept = CONFIGURE_25.replace("Preserve repository: false", "Preserve repository: true");
        assert_eq!(removable(4242, &read(CHECK_NONE, &kept)), None, "its user keeps it");
        let none = "Current configuration:\n\nRepository path: N/A\n";
        assert_eq!(removable(4242, &read(CHECK_NONE, none)), None, "no repository yet");
        for p in [
            "/tmp",
            "/var/jfr/mine",
            "/tmp/../etc/2026_11_29_11_31_52_4242",
            "tmp/2026_11_29_11_31_52_1",
        ] {
            let c = format!("Repository path: {p}\n");
            assert_eq!(removable(4242, &read(CHECK_NONE, &c)), None, "{p}");
        }
        assert!(shaped("2026_11_29_11_31_52_4242"));
        assert!(!shaped("2026_11_29_11_31_52") && !shaped("26_11_29_11_31_52_1"));
        assert!(!shaped("2026_11_29_11_31_5x_1") && !shaped("2026_11_29_11_31__1"));
    }

    proptest::proptest! {
        #[test]
        fn any_answer_reads_without_panic_and_names_only_a_shaped_absolute_path(
            check in proptest::prop_oneof![".{0,200}", proptest::strategy::Just(CHECK_NONE.to_string())],
            lines in proptest::collection::vec(proptest::prop_oneof![
                ".{0,40}",
                "Repository path: /tmp/20[0-9]{2}_1[0-2]_[0-3][0-9]_[0-2][0-9]_[0-5][0-9]_[0-5][0-9]_[0-9]{1,6}",
                "Repository path: [/a-z0-9_.]{0,40}",
                "Preserve repository: (true|false|)",
            ], 0..8),
            pid in 1i32..1 << 22,
        ) {
            let said = read(&check, &lines.join("\n"));
            if let Some(p) = removable(pid, &said) {
                let s = p.to_string_lossy().into_owned();
                let prefix = format!("/proc/{pid}/root/");
                proptest::prop_assert!(s.starts_with(&prefix));
                proptest::prop_assert!(shaped(s.rsplit('/').next().unwrap()));
                proptest::prop_assert!(!s.contains("/../"));
            }
        }
    }
}
