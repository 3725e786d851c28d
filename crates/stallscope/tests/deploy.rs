//! What ships for running `watch` as a service: the systemd unit passes `systemd-analyze
//! verify` (with its paths pointed at this build), and every option the unit and the
//! Kubernetes DaemonSet example give `watch` is one it takes.

mod common;

use common::*;
use std::process::Command;

/// The options (`--name`) in a command line or argument list.
fn options(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '=' || c == '"')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.to_string())
        .collect()
}

fn watch_help() -> String {
    let o = stallscope().args(["watch", "--help"]).output().unwrap();
    assert!(o.status.success());
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_systemd_unit_verifies_and_gives_watch_only_options_it_takes() {
    let unit = std::fs::read_to_string(root().join("deploy/stallscope-watch.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line");
    let help = watch_help();
    for o in options(exec) {
        assert!(
            help.contains(&format!("{o} ")) || help.contains(&format!("{o}\n")),
            "the unit gives watch {o}, which it does not take"
        );
    }
    let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let analyze = analyze.expect("systemd-analyze is needed to check the unit (apt-get install systemd; make test's setup installs it)");
    // The unit names where `make dist` installs; pointed at this build to be verified here.
    let d = scratch("deploy-unit");
    let here = unit
        .replace("/usr/local/bin/stallscope", bin())
        .replace("/usr/local/lib/stallscope/stallscope-agent.jar", agent_jar().to_str().unwrap());
    let path = d.join("stallscope-watch.service");
    std::fs::write(&path, here).unwrap();
    let o = Command::new(analyze).arg("verify").arg(&path).output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // Only what it says of this unit counts (a container's own units may draw remarks).
    let mine: Vec<&str> = said.lines().filter(|l| l.contains("stallscope-watch.service")).collect();
    assert!(o.status.success() && mine.is_empty(), "systemd-analyze verify: {said}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_daemonset_example_gives_watch_only_options_it_takes_and_the_access_it_needs() {
    let ds =
        std::fs::read_to_string(root().join("docs/kubernetes/stallscope-daemonset.yaml")).unwrap();
    let help = watch_help();
    let args: String =
        ds.lines().filter(|l| l.trim_start().starts_with("- --")).collect::<Vec<_>>().join("\n");
    assert!(!args.is_empty());
    for o in options(&args) {
        assert!(
            help.contains(&format!("{o} ")) || help.contains(&format!("{o}\n")),
            "the DaemonSet gives watch {o}, which it does not take"
        );
    }
    for needed in ["hostPID: true", "- SYS_PTRACE", "- DAC_READ_SEARCH", "- KILL", "- watch"] {
        assert!(ds.contains(needed), "the DaemonSet lacks {needed}");
    }
}

/// `deploy/kubecheck` on the given manifests: its exit status and what it printed.
fn kubecheck(files: &[std::path::PathBuf]) -> (bool, String) {
    let dir = root().join("deploy/kubecheck");
    let o = Command::new("go")
        .arg("run")
        .arg(".")
        .args(files)
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("go: {e}: the manifests are checked with Go against k8s.io/api (Go comes with the machine; see README)")
        });
    // Go's own word that it could not build or run the checker ("go: ..."), but not its
    // "go: downloading" lines: on a fresh machine whose `make test` ran before any `go vet` (the
    // lint gate's), the modules are fetched here first.
    let said =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let go_failed =
        said.lines().any(|l| l.starts_with("go: ") && !l.starts_with("go: downloading "));
    assert!(o.status.code() != Some(2) && !go_failed, "kubecheck did not run: {said}");
    (o.status.success(), said)
}

/// The DaemonSet and the PodMonitor decode strictly into the upstream Kubernetes and Prometheus
/// Operator types (k8s.io/api, prometheus-operator's monitoring/v1: an unknown field is an
/// error) and hold the least-privilege policy; a manifest that breaks either is refused.
#[test]
fn the_kubernetes_manifests_are_valid_api_objects_with_least_privilege() {
    let docs = root().join("docs/kubernetes");
    let (ds, pm) =
        (docs.join("stallscope-daemonset.yaml"), docs.join("stallscope-podmonitor.yaml"));
    let (ok, said) = kubecheck(&[ds.clone(), pm.clone()]);
    assert!(ok, "kubecheck: {said}");
    assert!(said.contains("valid: 1 DaemonSet, 1 PodMonitor"), "{said}");
    let d = scratch("kubecheck");
    let text = std::fs::read_to_string(&ds).unwrap();
    for (change, from, to, finding) in [
        (
            "a misspelt field",
            "hostPID: true",
            "hostPid: true",
            "unknown field \"spec.template.spec.hostPid\"",
        ),
        ("privileged", "privileged: false", "privileged: true", "privileged: true grants"),
        ("a capability more", "- SYSLOG ", "- SYS_ADMIN ", "capability SYS_ADMIN"),
        (
            "a CPU limit",
            "limits: {memory: 768Mi}",
            "limits: {memory: 768Mi, cpu: 200m}",
            "no CPU limit",
        ),
        (
            "the runtime's socket",
            "path: /sys/kernel/tracing, type: Directory",
            "path: /run/containerd/containerd.sock, type: Socket",
            "runtime socket",
        ),
        (
            "the host's /run, read-only",
            "path: /sys/kernel/tracing, type: Directory",
            "path: /run, type: Directory",
            "host path /run:",
        ),
    ] {
        assert!(text.contains(from), "{change}: the DaemonSet has no {from:?}");
        let bad = d.join("daemonset.yaml");
        std::fs::write(&bad, text.replacen(from, to, 1)).unwrap();
        let (ok, said) = kubecheck(&[bad, pm.clone()]);
        assert!(!ok && said.contains(finding), "{change}: kubecheck said {said}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The alerting rules are valid Prometheus rules (`promtool check rules`); the Grafana dashboard
/// is JSON a Grafana imports: panels with Prometheus queries (that they name only series watch
/// exports is checked in fleet::metrics's tests, against the exporter itself).
#[test]
fn the_alerting_rules_pass_promtool_and_the_dashboard_is_grafana_json() {
    let promtool = ["/usr/bin/promtool", "/bin/promtool"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let promtool = promtool.expect("promtool is needed to check the alerting rules (it comes with Debian's prometheus; make test's setup installs it)");
    let rules = root().join("deploy/stallscope-alerts.yml");
    let o = Command::new(promtool).args(["check", "rules"]).arg(&rules).output().unwrap();
    let said =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success() && said.contains("SUCCESS"), "promtool check rules: {said}");
    let d: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("deploy/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    assert!(d["title"].as_str().is_some_and(|t| !t.is_empty()) && d["uid"].is_string());
    let panels = d["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    for p in panels {
        let targets =
            p["targets"].as_array().unwrap_or_else(|| panic!("a panel without queries: {p}"));
        assert!(
            targets.iter().all(|t| t["expr"].as_str().is_some_and(|e| e.contains("stallscope_"))),
            "{p}"
        );
    }
    let kinds: Vec<&str> = panels.iter().filter_map(|p| p["type"].as_str()).collect();
    for want in ["heatmap", "table", "timeseries"] {
        assert!(kinds.contains(&want), "no {want} panel: {kinds:?}");
    }
}
