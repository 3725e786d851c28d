//! `run`'s meter resolution when none is given: 1 ms (jHiccup's), or 5 ms where the JVM's
//! safepoints are found and timed without the meter: as root with BPF, the watchdog on, and a
//! `java` whose libjvm.so has HotSpot's safepoint probes. The meter then finds what is not a
//! safepoint (the CPUs taken, a stop, the meter's own thread held), and a 5 ms meter costs an
//! idle JVM about a third of a 1 ms one.

use std::path::{Path, PathBuf};

/// The agent's own resolution.
pub const FINE_NS: u64 = 1_000_000;
/// With the JVM's safepoint probes.
pub const WITH_PROBES_NS: u64 = 5_000_000;

/// The resolution `run` gives the meter of `command` when none is asked for, and why.
/// `watchdog`: the recording would run the BPF watchdog (not --boost, --outside).
pub fn default_for(s: &crate::Settings, command: &[String], watchdog: bool) -> (u64, String) {
    let fine = |why: String| (FINE_NS, why);
    if !watchdog {
        return fine("the BPF watchdog is off (--boost or --outside)".into());
    }
    if !s.bpf {
        return fine("--no-bpf".into());
    }
    if s.shared_offcpu.is_none()
        && let Err(e) = offcpu::available()
    {
        return fine(e);
    }
    let Some(libjvm) = command.first().and_then(|c| libjvm_of_launcher(c)) else {
        return fine(format!(
            "no libjvm.so found beside {} (its safepoint probes are looked for before it starts)",
            command.first().map_or("the command", String::as_str)
        ));
    };
    if !offcpu::has_safepoint_probes(&libjvm) {
        return fine(format!("{} has no safepoint probes", libjvm.display()));
    }
    let at = WITH_PROBES_NS.min(s.threshold_ns).max(FINE_NS);
    (at, format!("the JVM's safepoint probes in {} find and time its safepoints", libjvm.display()))
}

/// The libjvm.so a `java` launcher (a path, or a name on the PATH) loads: the JDK's
/// `lib/server` (9+), or `jre/lib/<arch>/server` and `lib/<arch>/server` (8).
pub fn libjvm_of_launcher(cmd: &str) -> Option<PathBuf> {
    let path = if cmd.contains('/') {
        PathBuf::from(cmd)
    } else {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(cmd))
            .find(|p| p.is_file())?
    };
    if path.file_name()? != "java" {
        return None;
    }
    let home = std::fs::canonicalize(&path).ok()?.parent()?.parent()?.to_path_buf();
    let arch = if cfg!(target_arch = "aarch64") { "aarch64" } else { "amd64" };
    [
        home.join("lib/server/libjvm.so"),
        home.join(format!("jre/lib/{arch}/server/libjvm.so")),
        home.join(format!("lib/{arch}/server/libjvm.so")),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast tier needs no JDK: a JDK's layout, made here. (The `java` on the PATH and its
    /// real probes are checked by `make test`, tests/run_starts.rs.)
    #[test]
    fn a_java_launcher_leads_to_its_libjvm_in_every_layout_and_a_non_java_to_none() {
        let d = std::env::temp_dir().join(format!("stallscope-layout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let arch = if cfg!(target_arch = "aarch64") { "aarch64" } else { "amd64" };
        for (name, lib) in [
            ("jdk11", "lib/server/libjvm.so".to_string()),
            ("jdk8", format!("jre/lib/{arch}/server/libjvm.so")),
            ("jre8", format!("lib/{arch}/server/libjvm.so")),
        ] {
            let home = d.join(name);
            std::fs::create_dir_all(home.join("bin")).unwrap();
            std::fs::create_dir_all(home.join(&lib).parent().unwrap()).unwrap();
            std::fs::write(home.join("bin/java"), "").unwrap();
            std::fs::write(home.join(&lib), "").unwrap();
            let java = home.join("bin/java");
            let found = libjvm_of_launcher(java.to_str().unwrap());
            assert_eq!(found, Some(std::fs::canonicalize(&home).unwrap().join(&lib)), "{name}");
        }
        // No libjvm.so beside it, or not a java at all.
        std::fs::create_dir_all(d.join("bare/bin")).unwrap();
        std::fs::write(d.join("bare/bin/java"), "").unwrap();
        assert_eq!(libjvm_of_launcher(d.join("bare/bin/java").to_str().unwrap()), None);
        assert_eq!(libjvm_of_launcher("sh"), None);
        assert_eq!(libjvm_of_launcher("/nonexistent/java"), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
