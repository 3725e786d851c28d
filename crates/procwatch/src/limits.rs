//! The open-files limit. Sampling a process's threads keeps a few of each thread's `/proc` files
//! open ([`crate::task`]): four per thread, so a JVM of 2,000 threads holds 8,000 descriptors,
//! and `watch` holds them for every JVM it guards. A shell or a systemd service starts with a
//! soft limit of 1,024 (the hard limit is far higher: systemd gives 524,288), and a thread whose
//! files could not be opened would not be sampled at all. So stallscope raises its own soft limit
//! to the hard one as it starts, as the Go runtime does for every program, and gives the
//! programs it starts (`run`'s JVM) the limit it was given itself.

use std::sync::OnceLock;

static GIVEN: OnceLock<libc::rlimit> = OnceLock::new();

/// The soft limit before and after, when it was raised; None when it already was the hard
/// limit or could not be read or set (it stays as it was).
pub fn raise_open_files() -> Option<(u64, u64)> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    let _ = GIVEN.set(l);
    if l.rlim_cur >= l.rlim_max {
        return None;
    }
    let raised = libc::rlimit { rlim_cur: l.rlim_max, rlim_max: l.rlim_max };
    // SAFETY: setrlimit reads the struct it is given.
    (unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0)
        .then_some((l.rlim_cur, l.rlim_max))
}

/// The limit this process was started with, once [`raise_open_files`] ran: what a program it
/// starts should be given back, so that it does not start with stallscope's own.
pub fn given_open_files() -> Option<libc::rlimit> {
    GIVEN.get().copied()
}

/// Makes `cmd` start with the limit this process was given (see [`given_open_files`]): a
/// program stallscope starts for the user (`run`'s, `inject throttle`'s) runs as it would alone.
pub fn give_back(cmd: &mut std::process::Command) {
    if let Some(given) = given_open_files() {
        // SAFETY: between fork and exec, one async-signal-safe call on the child itself.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || {
                libc::setrlimit(libc::RLIMIT_NOFILE, &given);
                Ok(())
            });
        }
    }
}

/// This process's soft and hard limits now.
pub fn open_files() -> Option<(u64, u64)> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0)
        .then_some((l.rlim_cur, l.rlim_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one_and_the_given_one_kept() {
        let (soft, hard) = open_files().expect("getrlimit");
        // Lowered first, so that there is something to raise (this test's process only).
        let low = libc::rlimit { rlim_cur: soft.min(hard).min(512), rlim_max: hard };
        // SAFETY: setrlimit reads the struct it is given.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &low) }, 0);
        let r = raise_open_files();
        if hard > low.rlim_cur {
            assert_eq!(r, Some((low.rlim_cur, hard)));
        }
        assert_eq!(open_files(), Some((hard, hard)));
        let given = given_open_files().expect("kept");
        assert_eq!((given.rlim_cur, given.rlim_max), (low.rlim_cur, hard));
        assert_eq!(raise_open_files(), None, "already at the hard limit");
    }
}
