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
use prometheus_client::metrics::exemplar::CounterWithExemplar;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use crate::pages::Pages;

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
    /// Where its report is served on this listener (`/recordings/NAME/stalls/N`), empty when
    /// reports are not served.
    pub report: String,
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

/// A stall counter's exemplar: where its report is served (a path on the metrics' listener).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReportExemplar {
    pub report: String,
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
    /// Each carries, as its exemplar, the report of the last stall counted
    /// (`report="/recordings/NAME/stalls/N"`, on the same listener) where reports are served.
    pub stalls: Family<CauseLabels, CounterWithExemplar<ReportExemplar>>,
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
        let stalls = Family::<CauseLabels, CounterWithExemplar<ReportExemplar>>::default();
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
    /// `report`: where its report is served, as the stall counter's exemplar.
    pub fn stall_named(
        &self,
        jvm: &JvmLabels,
        cause: &str,
        duration_ns: u64,
        (culprit, code): (&str, &str),
        instigator: Option<(&str, &str)>,
        report: Option<&str>,
    ) {
        self.stall(jvm, cause, duration_ns, report);
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
            report: report.unwrap_or_default().into(),
        };
        if let Some((old, _)) = worst.insert(jvm.clone(), (l.clone(), duration_ns)) {
            self.worst_stall_seconds.remove(&old);
        }
        self.worst_stall_seconds.get_or_create(&l).set(duration_ns as f64 / 1e9);
    }

    /// One diagnosed stall of `jvm`: its cause counted (with where its report is served, when it
    /// is, as the counter's exemplar), its duration observed.
    pub fn stall(&self, jvm: &JvmLabels, cause: &str, duration_ns: u64, report: Option<&str>) {
        self.causes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(jvm.clone())
            .or_default()
            .insert(cause.to_string());
        self.stalls
            .get_or_create(&CauseLabels { jvm: jvm.clone(), cause: cause.to_string() })
            .inc_by(1, report.map(|r| ReportExemplar { report: r.to_string() }), None);
        self.stall_seconds.get_or_create(jvm).observe(duration_ns as f64 / 1e9);
    }

    /// The OpenMetrics text of every series.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `/metrics` on `addr` (and, given `pages`, each recording's and stall's report),
    /// each connection on a thread of its own, at most [`MAX_CONNECTIONS`] at once; the address
    /// it bound (port 0 picks one) is returned.
    pub fn serve(&self, addr: SocketAddr, pages: Option<Pages>) -> Result<SocketAddr> {
        let listener = TcpListener::bind(addr).with_context(|| {
            format!(
                "--metrics {addr}: cannot listen there (in use, or not an address of this host?)"
            )
        })?;
        let bound = listener.local_addr()?;
        let me = self.clone();
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        std::thread::Builder::new().name("stallscope-metrics".into()).spawn(move || {
            use std::sync::atomic::Ordering;
            for mut conn in listener.incoming().flatten() {
                // A slow or stuck client holds its own thread, never the next scrape; past the
                // limit, a client is told to come back.
                if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                    open.fetch_sub(1, Ordering::AcqRel);
                    // Then its request drained until it closes (briefly): closed over unread
                    // bytes, the connection is reset, and the client may lose the answer.
                    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = reply(&mut conn, "503 Service Unavailable", TEXT, b"busy: try again\n");
                    let _ = conn.shutdown(std::net::Shutdown::Write);
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
                    let mut sink = [0u8; 4096];
                    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
                    continue;
                }
                let (me, pages, held) = (me.clone(), pages.clone(), open.clone());
                let spawned =
                    std::thread::Builder::new().name("stallscope-http".into()).spawn(move || {
                        let _ = me.answer(conn, pages.as_ref());
                        held.fetch_sub(1, Ordering::AcqRel);
                    });
                if spawned.is_err() {
                    open.fetch_sub(1, Ordering::AcqRel);
                }
            }
        })?;
        Ok(bound)
    }

    fn answer(&self, mut conn: std::net::TcpStream, pages: Option<&Pages>) -> std::io::Result<()> {
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
        let served = if pages.is_some() {
            "/metrics, and each recording's and stall's report under /recordings/"
        } else {
            "/metrics"
        };
        match (method, path, pages) {
            ("GET", "/metrics", _) => reply(
                &mut conn,
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                self.encode().as_bytes(),
            ),
            ("GET", "/", _) => {
                reply(&mut conn, "200 OK", TEXT, format!("stallscope watch: {served}\n").as_bytes())
            }
            ("GET", p, Some(pages)) if p.starts_with("/recordings/") => {
                let a = pages.answer(p);
                reply(&mut conn, a.status, a.ctype, &a.body)
            }
            ("GET", _, _) => reply(
                &mut conn,
                "404 Not Found",
                TEXT,
                format!("not found: served are {served}\n").as_bytes(),
            ),
            _ => reply(&mut conn, "405 Method Not Allowed", TEXT, b"only GET\n"),
        }
    }
}

/// Connections answered at once (each on its own thread); more are told to come back.
pub const MAX_CONNECTIONS: usize = 8;
const TEXT: &str = "text/plain; charset=utf-8";

fn reply(
    conn: &mut std::net::TcpStream,
    status: &str,
    ctype: &str,
    body: &[u8],
) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body)?;
    conn.flush()
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
                ("VM Thread", ""),
                Some(("attach-client", "jcmd")),
                None,
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
        m.stall(&pod, "no-safepoint-poll", 1_000_000_000, None);
        m.exited(&old);
        m.watched(&new);
        m.stall(&pod, "no-safepoint-poll", 1_000_000_000, None);
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
        let addr = m.serve("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let ok = get(addr, "/metrics");
        assert!(
            ok.starts_with("HTTP/1.1 200 OK")
                && ok.contains("application/openmetrics-text")
                && ok.contains("# EOF"),
            "{ok}"
        );
        assert!(get(addr, "/nope").starts_with("HTTP/1.1 404"));
        // Without reports served, none is.
        assert!(get(addr, "/recordings/x/stalls/1").starts_with("HTTP/1.1 404"));
    }

    /// What the server answered (a server that turned the client away before reading its
    /// request may have closed first: what was read, then).
    fn get(addr: SocketAddr, path: &str) -> String {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        let _ = write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    }

    /// A page is drawn by the renderer it is given, only for a recording right under the
    /// directory served; clients that hold their connections take their own threads, up to the
    /// limit, past which one is told to come back.
    #[test]
    fn reports_are_served_from_the_recordings_alone_and_slow_clients_hold_only_themselves() {
        let out = std::env::temp_dir().join(format!("stallscope-pages-{}", std::process::id()));
        let rec = out.join("42-Main-20261129-120102");
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::write(rec.join(recording::files::META), "{}").unwrap();
        std::fs::create_dir_all(out.join("not-a-recording")).unwrap();
        std::os::unix::fs::symlink(&rec, out.join("a-link")).unwrap();
        // Draws what it was asked, so that the test sees what reached it.
        let render: crate::pages::Render = Arc::new(|r: &crate::pages::Request| {
            Ok(match r.view {
                crate::pages::View::Stall(9) => None,
                v => Some(
                    format!("{:?} {v:?} {:?}", r.dir.file_name().unwrap(), r.format).into_bytes(),
                ),
            })
        });
        let m = Metrics::new();
        let addr = m
            .serve("127.0.0.1:0".parse().unwrap(), Some(Pages { out: out.clone(), render }))
            .unwrap();
        let a = get(addr, "/recordings/42-Main-20261129-120102/stalls/3");
        assert!(
            a.starts_with("HTTP/1.1 200")
                && a.contains("text/html")
                && a.ends_with("\"42-Main-20261129-120102\" Stall(3) Html"),
            "{a}"
        );
        let a = get(addr, "/recordings/42-Main-20261129-120102/report.json");
        assert!(a.contains("application/json") && a.ends_with("Recording Json"), "{a}");
        for bad in [
            "/recordings/42-Main-20261129-120102/stalls/9",
            "/recordings/not-a-recording/",
            "/recordings/a-link/",
            "/recordings/../42-Main-20261129-120102/",
        ] {
            let a = get(addr, bad);
            assert!(a.starts_with("HTTP/1.1 404") && a.contains("served:"), "{bad}: {a}");
        }
        // Clients that connect and send nothing: each holds a thread of its own, up to the limit
        // (a few more than it: the threads of the requests above may not have ended yet, and
        // those past the limit are turned away).
        let idle: Vec<std::net::TcpStream> =
            (0..MAX_CONNECTIONS + 4).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
        let busy = get(addr, "/metrics");
        assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
        drop(idle);
        // Once they are gone (their threads see the connection closed), /metrics again.
        let mut ok = String::new();
        for _ in 0..100 {
            ok = get(addr, "/metrics");
            if ok.starts_with("HTTP/1.1 200") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        let _ = std::fs::remove_dir_all(&out);
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
            ("counted-loop", "io.x.Loop.run"),
            Some(("java-thread", "safepoint-trigger")),
            Some("/recordings/1-Main-20261129-120102/stalls/1"),
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
