//! The recording directory: named, made, owned by us and private before anything is written
//! into it, and handed to the JVM's user where the JVM must write into it.
//!
//! Invariant: a directory stallscope did not make, or one someone else can write, is refused,
//! never written through.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// `parent/base`, or `parent/base-2`, `-3`… when that exists.
pub fn unused_name(parent: &Path, base: &str) -> PathBuf {
    let mut d = parent.join(base);
    let mut i = 2;
    while d.exists() {
        d = parent.join(format!("{base}-{i}"));
        i += 1;
    }
    d
}

/// Refuses a recording directory whose path the JVM's `-Xlog` and agent options would split.
pub fn option_safe(dir: &Path) -> Result<()> {
    let s = dir.to_string_lossy();
    if s.contains([',', ':', '=', '"', ' ']) {
        bail!(
            "{s}: the recording directory's path cannot hold ',', ':', '=', quotes or spaces (the JVM's -Xlog and agent options would split it)"
        );
    }
    Ok(())
}

/// Makes `dir` the recording directory: created here (mode 0755), or an existing empty one that
/// is this user's own and that no one else can write to. The JVM (often root's) writes the
/// recording's files by name in it; in a directory another user can write to, that user could
/// plant `hiccups.hlog -> /etc/…` and have it overwritten. A symbolic link is refused too.
pub fn own_empty_dir(dir: &Path) -> Result<()> {
    own_dir(dir, true)
}

/// The checks of [`own_empty_dir`] on a directory that may already hold recordings (`watch`'s).
pub fn own_dir(dir: &Path, must_be_empty: bool) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| {
            format!("{}: cannot create the recording directory's parent", parent.display())
        })?;
    }
    match std::fs::DirBuilder::new().mode(0o755).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!("{}: cannot create the recording directory", dir.display())
            });
        }
    }
    let m = std::fs::symlink_metadata(dir)
        .with_context(|| format!("{}: cannot read it", dir.display()))?;
    if m.file_type().is_symlink() {
        bail!(
            "{}: is a symbolic link; name the directory itself with --out (a link could be pointed elsewhere while the JVM writes)",
            dir.display()
        );
    }
    if !m.is_dir() {
        bail!("{}: exists and is not a directory; choose another with --out", dir.display());
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if m.uid() != me {
        bail!(
            "{}: belongs to uid {}, not to you (uid {me}); another user's directory could redirect the recording's files. Choose another with --out, or let stallscope create it",
            dir.display(),
            m.uid()
        );
    }
    if m.mode() & 0o022 != 0 {
        bail!(
            "{}: others can write to it (mode {:o}); another user could plant links in it. `chmod go-w` it or choose another with --out",
            dir.display(),
            m.mode() & 0o7777
        );
    }
    if must_be_empty && std::fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{}: the recording directory exists and is not empty; choose another with --out",
            dir.display()
        );
    }
    Ok(())
}

/// Root attaching to another user's JVM: the agent, in that JVM, writes the hiccup log and
/// HotSpot the safepoint log into the directory, as that user. Hand the fresh directory to them;
/// stallscope's own files in it are created O_EXCL|O_NOFOLLOW, so nothing they plant can
/// redirect a write of root's.
pub fn hand_to(dir: &Path, uid: u32) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 && uid != 0 {
        std::os::unix::fs::chown(dir, Some(uid), None).map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot hand the recording directory to uid {uid} (the JVM's user): {e}",
                dir.display()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_gets_the_next_free_number() {
        let d = std::env::temp_dir().join(format!("stallscope-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("rec")).unwrap();
        std::fs::create_dir_all(d.join("rec-2")).unwrap();
        assert_eq!(unused_name(&d, "rec"), d.join("rec-3"));
        assert_eq!(unused_name(&d, "other"), d.join("other"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symbolic_link_or_a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("stallscope-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        own_empty_dir(&d.join("new")).unwrap();
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(own_empty_dir(&open).is_err(), "a directory anyone can write");
        std::os::unix::fs::symlink(d.join("new"), d.join("link")).unwrap();
        assert!(own_empty_dir(&d.join("link")).is_err(), "a symbolic link");
        std::fs::write(d.join("new/file"), b"x").unwrap();
        assert!(own_empty_dir(&d.join("new")).is_err(), "not empty");
        own_dir(&d.join("new"), false).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
