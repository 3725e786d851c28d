//! `watch --metrics ADDR`: the watched JVMs, their stalls by cause, stall durations, TTSP and
//! hiccups, and the recorder's own health, as OpenMetrics (the `prometheus-client` crate) on
//! `http://ADDR/metrics`. Names and labels are documented in docs/watch.md.
//!
//! Invariant: no listener unless asked; the server answers one request at a time, reads at most
//! a few kilobytes of a request, and gives up on a client that stalls, so a scraper (or anyone
//! else on the port) cannot hold up the watching.

use anyhow::{Context, Result};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// What names a watched JVM in every series: the labels Kubernetes users group by (`namespace`,
/// `pod`, `container`, and the pod's `workload`), its main class, and its `pid` only outside a
/// pod, where nothing else tells two JVMs apart. In a pod the pid is left empty (so absent in
/// Prometheus): a container restarted goes on in the same series instead of a new one per pid.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JvmLabels {
    pub namespace: String,
    pub pod: String,
    /// The container's name in its pod; outside Kubernetes, its id (12 characters) when a
    /// runtime's cgroup names one, else the cgroup path of a JVM in another pid or mount
    /// namespace; empty for a JVM of the host.
    pub container: String,
    /// The pod's workload: its name less its controller's suffixes (procwatch::pods).
    pub workload: String,
    /// Its main class or jar (as `jps -l` names it).
    pub main: String,
    pub pid: String,
}

/// `watched_jvm`: one series per process, so it names the process in full.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JvmInfoLabels {
    #[prometheus(flatten)]
    pub jvm: JvmLabels,
    /// Its pid on the node (always given here), its container's full id, its cgroup path.
    pub process: String,
    pub container_id: String,
    pub cgroup: String,
    pub jdk: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    #[prometheus(flatten)]
    pub jvm: JvmLabels,
    /// The stall's main cause (docs/causes), `unknown` when the doctor could not tell.
    pub cause: String,
}

/// The longest stall of a JVM so far, named: what a dashboard's table of the worst stalls shows.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorstLabels {
    #[prometheus(flatten)]
    pub jvm: JvmLabels,
    pub cause: String,
    /// The culprit thread's name, empty when none was named.
    pub culprit: String,
    /// Its code (`Class.method`), empty when none was taken.
    pub code: String,
    /// Who set it off: the instigator's kind and name (docs/formats/report-json.md), empty when
    /// none was named.
    pub instigator_kind: String,
    pub instigator: String,
}

/// Stalls by who set them off: bounded labels (the instigator's kind and its name: a command, a
/// thread's name, a cgroup; never a pid).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstigatorLabels {
    #[prometheus(flatten)]
    pub jvm: JvmLabels,
    pub kind: String,
    pub instigator: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    /// Why a JVM was not watched: `refused` (attach failed), `recorded` (another stallscope
    /// records it), `unreadable` (another user's, without privilege).
    pub reason: String,
}

type Hist = Family<JvmLabels, Histogram, fn() -> Histogram>;
/// The (kind, name) pairs of the instigators a JVM has counters for.
type KindsAndNames = std::collections::BTreeSet<(String, String)>;
type SecondsTotal = Family<JvmLabels, Counter<f64, std::sync::atomic::AtomicU64>>;

fn seconds_buckets() -> Histogram {
    // 100 µs to about 52 s, doubling: TTSP and hiccups are sub-millisecond, stalls seconds.
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// Every series `watch` exports.
#[derive(Clone)]
pub struct Metrics {
    pub jvms: Family<JvmInfoLabels, Gauge>,
    pub stalls: Family<CauseLabels, Counter>,
    pub stall_seconds: Hist,
    pub ttsp_seconds: Hist,
    pub safepoint_seconds: Hist,
    pub hiccup_seconds: Hist,
    pub dropped_samples: Family<JvmLabels, Counter>,
    pub control_lateness_seconds: Histogram,
    pub skipped: Family<SkipLabels, Counter>,
    pub retained_bytes: Gauge,
    pub retention_removed: Counter,
    /// The JVM's own perf counters: safepoints begun, time to reach them, time stopped in them.
    pub jvm_safepoints: Family<JvmLabels, Counter>,
    pub jvm_safepoint_sync_seconds: SecondsTotal,
    pub jvm_safepoint_stopped_seconds: SecondsTotal,
    /// Each JVM's longest stall so far (one series per JVM).
    pub worst_stall_seconds: Family<WorstLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    worst: Arc<std::sync::Mutex<std::collections::HashMap<JvmLabels, (WorstLabels, u64)>>>,
    /// The causes each JVM's labels have a stall counter for: what `forget` removes.
    causes: Arc<
        std::sync::Mutex<std::collections::HashMap<JvmLabels, std::collections::BTreeSet<String>>>,
    >,
    /// Stalls by who set them off.
    pub instigated: Family<InstigatorLabels, Counter>,
    /// The instigators each JVM's labels have a counter for: what `forget` removes.
    instigators: Arc<std::sync::Mutex<std::collections::HashMap<JvmLabels, KindsAndNames>>>,
    /// How many JVMs watched now carry each set of labels.
    live: Arc<std::sync::Mutex<std::collections::HashMap<JvmLabels, usize>>>,
    registry: Arc<Registry>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut r = Registry::with_prefix("stallscope");
        let jvms = Family::<JvmInfoLabels, Gauge>::default();
        let stalls = Family::<CauseLabels, Counter>::default();
        let stall_seconds: Hist = Family::new_with_constructor(seconds_buckets);
        let ttsp_seconds: Hist = Family::new_with_constructor(seconds_buckets);
        let safepoint_seconds: Hist = Family::new_with_constructor(seconds_buckets);
        let hiccup_seconds: Hist = Family::new_with_constructor(seconds_buckets);
        let dropped_samples = Family::<JvmLabels, Counter>::default();
        let control_lateness_seconds = seconds_buckets();
        let skipped = Family::<SkipLabels, Counter>::default();
        let retained_bytes = Gauge::default();
        let retention_removed = Counter::default();
        let jvm_safepoints = Family::<JvmLabels, Counter>::default();
        let jvm_safepoint_sync_seconds = SecondsTotal::default();
        let jvm_safepoint_stopped_seconds = SecondsTotal::default();
        let worst_stall_seconds =
            Family::<WorstLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        r.register("watched_jvm", "A JVM stallscope watch guards (1 while watched)", jvms.clone());
        r.register("stalls", "Stalls diagnosed, by main cause", stalls.clone());
        let instigated = Family::<InstigatorLabels, Counter>::default();
        r.register(
            "instigated_stalls",
            "Stalls diagnosed, by who set them off (the main finding's instigator)",
            instigated.clone(),
        );
        r.register_with_unit(
            "stall_duration",
            "How long each diagnosed stall lasted",
            Unit::Seconds,
            stall_seconds.clone(),
        );
        r.register_with_unit("ttsp", "Time to safepoint of every safepoint (from the JVM's perf counters; from its safepoint log once attached)", Unit::Seconds, ttsp_seconds.clone());
        r.register_with_unit("safepoint_total", "Total time of every safepoint (from the JVM's perf counters; from its safepoint log once attached)", Unit::Seconds, safepoint_seconds.clone());
        r.register_with_unit(
            "hiccup",
            "The agent's hiccup meter: how late each of its 1 ms wake-ups came",
            Unit::Seconds,
            hiccup_seconds.clone(),
        );
        r.register(
            "dropped_samples",
            "Thread samples the recorder dropped (its disk did not keep up)",
            dropped_samples.clone(),
        );
        r.register_with_unit(
            "control_lateness",
            "The recorder's own control meter: how late its watch loop woke",
            Unit::Seconds,
            control_lateness_seconds.clone(),
        );
        r.register("skipped_jvms", "JVMs watch did not guard, by reason", skipped.clone());
        r.register_with_unit(
            "retained",
            "Disk used by the recordings watch keeps",
            Unit::Bytes,
            retained_bytes.clone(),
        );
        r.register(
            "retention_removed_recordings",
            "Recordings removed to keep within --retain and --retain-age",
            retention_removed.clone(),
        );
        r.register(
            "jvm_safepoints",
            "Safepoints the JVM began since watched (its sun.rt.safepoints)",
            jvm_safepoints.clone(),
        );
        r.register_with_unit(
            "jvm_safepoint_sync",
            "Time the JVM spent reaching safepoints since watched (its sun.rt.safepointSyncTime)",
            Unit::Seconds,
            jvm_safepoint_sync_seconds.clone(),
        );
        r.register_with_unit("jvm_safepoint_stopped", "Time the JVM's application threads were stopped at safepoints since watched, reaching them included", Unit::Seconds, jvm_safepoint_stopped_seconds.clone());
        r.register_with_unit(
            "worst_stall",
            "Each JVM's longest stall so far, with its cause, culprit thread and code",
            Unit::Seconds,
            worst_stall_seconds.clone(),
        );
        Metrics {
            jvms,
            stalls,
            stall_seconds,
            ttsp_seconds,
            safepoint_seconds,
            hiccup_seconds,
            dropped_samples,
            control_lateness_seconds,
            skipped,
            retained_bytes,
            retention_removed,
            jvm_safepoints,
            jvm_safepoint_sync_seconds,
            jvm_safepoint_stopped_seconds,
            worst_stall_seconds,
            worst: Arc::default(),
            causes: Arc::default(),
            instigated,
            instigators: Arc::default(),
            live: Arc::default(),
            registry: Arc::new(r),
        }
    }

    /// A JVM is watched from now: `watched_jvm` 1. Its other series are shared with any JVM of
    /// the same labels (a container's JVM restarted) until both are forgotten.
    pub fn watched(&self, info: &JvmInfoLabels) {
        *self
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(info.jvm.clone())
            .or_default() += 1;
        self.jvms.get_or_create(info).set(1);
    }

    /// A JVM is no longer watched (it exited, or watch detached): `watched_jvm` goes to 0; its
    /// series stay until [`Metrics::forget`].
    pub fn exited(&self, info: &JvmInfoLabels) {
        self.jvms.get_or_create(info).set(0);
    }

    /// Forgets every series of a JVM that is no longer watched: its `watched_jvm`, and the
    /// series it shares when no JVM watched still has its labels.
    pub fn forget(&self, info: &JvmInfoLabels) {
        self.jvms.remove(info);
        let jvm = &info.jvm;
        // Held through the removals: a JVM watched meanwhile with the same labels (a container
        // restarted) waits, then creates its series afresh instead of losing them.
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let n = live.entry(jvm.clone()).or_default();
        *n = n.saturating_sub(1);
        if *n > 0 {
            return;
        }
        live.remove(jvm);
        for h in
            [&self.stall_seconds, &self.ttsp_seconds, &self.safepoint_seconds, &self.hiccup_seconds]
        {
            h.remove(jvm);
        }
        self.dropped_samples.remove(jvm);
        self.jvm_safepoints.remove(jvm);
        self.jvm_safepoint_sync_seconds.remove(jvm);
        self.jvm_safepoint_stopped_seconds.remove(jvm);
        if let Some((l, _)) = self.worst.lock().unwrap_or_else(|p| p.into_inner()).remove(jvm) {
            self.worst_stall_seconds.remove(&l);
        }
        let causes =
            self.causes.lock().unwrap_or_else(|p| p.into_inner()).remove(jvm).unwrap_or_default();
        for cause in causes {
            self.stalls.remove(&CauseLabels { jvm: jvm.clone(), cause });
        }
        let who = self
            .instigators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(jvm)
            .unwrap_or_default();
        for (kind, instigator) in who {
            self.instigated.remove(&InstigatorLabels { jvm: jvm.clone(), kind, instigator });
        }
    }

    /// What `watch`'s loop is told of a JVM watched from outside: its counters' totals go to the
    /// `jvm_safepoint*` series (as they grow from the first look), and every safepoint that ended
    /// to the TTSP and safepoint histograms. `includes_sync`: the JVM's safepoint time holds its
    /// sync time (JDK 8-12).
    pub fn counters_observer(
        &self,
        jvm: &JvmLabels,
        includes_sync: bool,
    ) -> crate::beats::Observer {
        let (count, sync, stopped) = (
            self.jvm_safepoints.get_or_create_owned(jvm),
            self.jvm_safepoint_sync_seconds.get_or_create_owned(jvm),
            self.jvm_safepoint_stopped_seconds.get_or_create_owned(jvm),
        );
        let (ttsp, total) = (
            self.ttsp_seconds.get_or_create_owned(jvm),
            self.safepoint_seconds.get_or_create_owned(jvm),
        );
        let mut prev: Option<(u64, u64, u64)> = None;
        Box::new(move |seen| {
            let l = seen.look;
            let now = (
                l.safepoints,
                l.sync_ns,
                if includes_sync {
                    l.safepoint_ns
                } else {
                    l.safepoint_ns.saturating_add(l.sync_ns)
                },
            );
            if let Some(p) = prev {
                count.inc_by(now.0.saturating_sub(p.0));
                sync.inc_by(now.1.saturating_sub(p.1) as f64 / 1e9);
                stopped.inc_by(now.2.saturating_sub(p.2) as f64 / 1e9);
            }
            prev = Some(now);
            for sp in seen.ended {
                ttsp.observe(sp.ttsp_ns as f64 / 1e9);
                total.observe(sp.total_ns() as f64 / 1e9);
            }
        })
    }

    /// One diagnosed stall of `jvm`: its cause counted, its duration observed, who set it off
    /// counted (`instigator`: kind and name), and, when it is the JVM's longest so far, it named
    /// in `worst_stall_seconds` (its culprit, code and instigator).
    pub fn stall_named(
        &self,
        jvm: &JvmLabels,
        cause: &str,
        duration_ns: u64,
        culprit: &str,
        code: &str,
        instigator: Option<(&str, &str)>,
    ) {
        self.stall(jvm, cause, duration_ns);
        if let Some((kind, name)) = instigator {
            self.instigators
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(jvm.clone())
                .or_default()
                .insert((kind.to_string(), name.to_string()));
            self.instigated
                .get_or_create(&InstigatorLabels {
                    jvm: jvm.clone(),
                    kind: kind.to_string(),
                    instigator: name.to_string(),
                })
                .inc();
        }
        let mut worst = self.worst.lock().unwrap_or_else(|p| p.into_inner());
        if worst.get(jvm).is_some_and(|(_, d)| *d >= duration_ns) {
            return;
        }
        let l = WorstLabels {
            jvm: jvm.clone(),
            cause: cause.into(),
            culprit: culprit.into(),
            code: code.into(),
            instigator_kind: instigator.map(|i| i.0).unwrap_or_default().into(),
            instigator: instigator.map(|i| i.1).unwrap_or_default().into(),
        };
        if let Some((old, _)) = worst.insert(jvm.clone(), (l.clone(), duration_ns)) {
            self.worst_stall_seconds.remove(&old);
        }
        self.worst_stall_seconds.get_or_create(&l).set(duration_ns as f64 / 1e9);
    }

    /// One diagnosed stall of `jvm`: its cause counted, its duration observed.
    pub fn stall(&self, jvm: &JvmLabels, cause: &str, duration_ns: u64) {
        self.causes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(jvm.clone())
            .or_default()
            .insert(cause.to_string());
        self.stalls
            .get_or_create(&CauseLabels { jvm: jvm.clone(), cause: cause.to_string() })
            .inc();
        self.stall_seconds.get_or_create(jvm).observe(duration_ns as f64 / 1e9);
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `/metrics` on `addr` from a thread of its own; the address it bound (port 0 picks
    /// one) is returned.
    pub fn serve(&self, addr: SocketAddr) -> Result<SocketAddr> {
        let listener = TcpListener::bind(addr).with_context(|| {
            format!(
                "--metrics {addr}: cannot listen there (in use, or not an address of this host?)"
            )
        })?;
        let bound = listener.local_addr()?;
        let me = self.clone();
        std::thread::Builder::new().name("stallscope-metrics".into()).spawn(move || {
            for conn in listener.incoming().flatten() {
                let _ = me.answer(conn);
            }
        })?;
        Ok(bound)
    }

    fn answer(&self, mut conn: std::net::TcpStream) -> std::io::Result<()> {
        conn.set_read_timeout(Some(Duration::from_secs(5)))?;
        conn.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut req = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
            let n = conn.read(&mut buf)?;
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&req);
        let first = head.lines().next().unwrap_or("");
        let mut parts = first.split_whitespace();
        let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = path.split('?').next().unwrap_or("");
        let (status, ctype, body) = match (method, path) {
            ("GET", "/metrics") => (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.encode(),
            ),
            ("GET", "/") => (
                "200 OK",
                "text/plain; charset=utf-8",
                "stallscope watch: metrics at /metrics\n".to_string(),
            ),
            ("GET", _) => (
                "404 Not Found",
                "text/plain; charset=utf-8",
                "not found: try /metrics\n".to_string(),
            ),
            _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "only GET\n".to_string()),
        };
        write!(
            conn,
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )?;
        conn.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pid: &str) -> JvmLabels {
        JvmLabels { main: "Main".into(), pid: pid.into(), ..JvmLabels::default() }
    }

    fn info(jvm: &JvmLabels, process: &str) -> JvmInfoLabels {
        JvmInfoLabels {
            jvm: jvm.clone(),
            process: process.into(),
            container_id: String::new(),
            cgroup: String::new(),
            jdk: "17".into(),
        }
    }

    #[test]
    fn a_forgotten_jvm_leaves_no_series_and_others_keep_theirs() {
        let m = Metrics::new();
        for pid in ["1", "2"] {
            let l = labels(pid);
            m.watched(&info(&l, pid));
            m.stall_named(
                &l,
                "long-vm-operation",
                500_000_000,
                "VM Thread",
                "",
                Some(("attach-client", "jcmd")),
            );
        }
        let text = m.encode();
        assert!(text.contains("stallscope_instigated_stalls_total{namespace=\"\",pod=\"\",container=\"\",workload=\"\",main=\"Main\",pid=\"1\",kind=\"attach-client\",instigator=\"jcmd\"} 1"), "{text}");
        m.forget(&info(&labels("1"), "1"));
        let text = m.encode();
        assert!(!text.contains("pid=\"1\""), "{text}");
        assert!(text.contains("stallscope_stalls_total{namespace=\"\",pod=\"\",container=\"\",workload=\"\",main=\"Main\",pid=\"2\",cause=\"long-vm-operation\"} 1"), "{text}");
        assert!(text.contains("stallscope_stall_duration_seconds_bucket{"), "{text}");
        assert!(text.ends_with("# EOF\n"), "OpenMetrics text ends with EOF");
    }

    /// A pod's container restarted: the new JVM (another pid) goes on in the pod's series, and
    /// forgetting the old one after its grace removes only its own `watched_jvm`.
    #[test]
    fn a_restarted_containers_jvm_keeps_the_pods_series_until_both_are_forgotten() {
        let m = Metrics::new();
        let pod = JvmLabels {
            namespace: "shop".into(),
            pod: "orders-7d4b9c6f5-x2k8q".into(),
            container: "orders-api".into(),
            workload: "orders".into(),
            main: "Main".into(),
            pid: String::new(),
        };
        let (old, new) = (info(&pod, "100"), info(&pod, "200"));
        m.watched(&old);
        m.stall(&pod, "no-safepoint-poll", 1_000_000_000);
        m.exited(&old);
        m.watched(&new);
        m.stall(&pod, "no-safepoint-poll", 1_000_000_000);
        m.forget(&old);
        let text = m.encode();
        assert!(text.contains("stallscope_stalls_total{namespace=\"shop\",pod=\"orders-7d4b9c6f5-x2k8q\",container=\"orders-api\",workload=\"orders\",main=\"Main\",pid=\"\",cause=\"no-safepoint-poll\"} 2"), "{text}");
        assert!(!text.contains("process=\"100\""), "{text}");
        assert!(text.contains("process=\"200\""), "{text}");
        m.forget(&new);
        let text = m.encode();
        assert!(!text.contains("orders"), "{text}");
    }

    #[test]
    fn the_server_answers_metrics_and_refuses_the_rest() {
        let m = Metrics::new();
        let addr = m.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        let get = |path: &str| {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let ok = get("/metrics");
        assert!(
            ok.starts_with("HTTP/1.1 200 OK")
                && ok.contains("application/openmetrics-text")
                && ok.contains("# EOF"),
            "{ok}"
        );
        assert!(get("/nope").starts_with("HTTP/1.1 404"));
    }

    /// Every `stallscope_*` name the Grafana dashboard and the alerting rules in deploy/ use is a
    /// series watch exports, under that name.
    #[test]
    fn the_dashboard_and_the_alerts_use_only_series_watch_exports() {
        let m = Metrics::new();
        let l = labels("1");
        m.watched(&info(&l, "1"));
        m.stall_named(
            &l,
            "no-safepoint-poll",
            1_000_000_000,
            "counted-loop",
            "io.x.Loop.run",
            Some(("java-thread", "safepoint-trigger")),
        );
        for h in [&m.ttsp_seconds, &m.safepoint_seconds, &m.hiccup_seconds] {
            h.get_or_create(&l).observe(0.001);
        }
        m.dropped_samples.get_or_create(&l).inc();
        m.skipped.get_or_create(&SkipLabels { reason: "refused".into() }).inc();
        let mut o = m.counters_observer(&l, false);
        let look = procwatch::jvmcounters::CounterLook { safepoints: 1, ..Default::default() };
        o(crate::beats::Seen { look: &look, ended: &[] });
        o(crate::beats::Seen {
            look: &procwatch::jvmcounters::CounterLook {
                safepoints: 2,
                sync_ns: 5,
                safepoint_ns: 7,
                ..Default::default()
            },
            ended: &[],
        });
        let text = m.encode();
        let exported: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in ["deploy/grafana-dashboard.json", "deploy/stallscope-alerts.yml"] {
            let used = std::fs::read_to_string(root.join(file)).unwrap();
            let names: std::collections::BTreeSet<&str> = used
                .match_indices("stallscope_")
                .map(|(i, _)| {
                    let rest = &used[i..];
                    &rest[..rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len())]
                })
                .filter(|n| n.len() > "stallscope_".len())
                .collect();
            assert!(!names.is_empty(), "{file} names no series");
            for n in names {
                let family = ["_total", "_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|s| n.strip_suffix(s))
                    .unwrap_or(n);
                assert!(
                    exported.contains(&n) || exported.contains(&family),
                    "{file} uses {n}, which watch does not export: {exported:?}"
                );
            }
        }
    }
}
