//! The events a flight recording is explained from (`FLIGHT_EVENTS`): safepoints, VM operations,
//! collections, the GC locker, CPU load and throttling, the JVM's own description, per chunk.

use super::*;

/// A thread as JFR names it (`jdk.types.Thread`): its id in the JVM's pid namespace, and its
/// Java name (none for the JVM's own threads) or the OS's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightThread {
    pub os_tid: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_name: Option<String>,
    #[serde(default)]
    pub os_name: String,
}

impl FlightThread {
    /// The Java name, else the OS's.
    pub fn name(&self) -> &str {
        self.java_name.as_deref().filter(|n| !n.is_empty()).unwrap_or(&self.os_name)
    }
}

pub(super) fn thread_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<FlightThread> {
    let t = v.get_field(f)?;
    Some(FlightThread {
        os_tid: long_of(&t, "osThreadId")?,
        java_name: text_of(&t, "javaName"),
        os_name: text_of(&t, "osName").unwrap_or_default(),
    })
}

/// One safepoint event of a flight recording, as written (`jdk.SafepointBegin`,
/// `jdk.SafepointStateSynchronization`, `jdk.SafepointEnd`): the diagnosis puts them together
/// by `safepoint_id` with the operation, since each may be missing under its threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightSafepointEvent {
    /// `begin`, `sync` or `end`.
    pub phase: String,
    pub safepoint_id: i64,
    pub start_epoch_ns: i64,
    pub duration_ns: i64,
    /// `totalThreadCount` (begin) or `initialThreadCount` (sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

/// `jdk.ExecuteVMOperation`: the VM thread ran `op` for `duration_ns`, asked for by `caller`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightVmOperation {
    pub op: String,
    pub start_epoch_ns: i64,
    pub duration_ns: i64,
    /// Whether it ran at a safepoint, and which (none for one that did not).
    pub safepoint: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safepoint_id: Option<i64>,
    /// Whether its caller waited for it.
    #[serde(default)]
    pub blocking: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<FlightThread>,
}

/// `jdk.GarbageCollection`: one collection, its collector, cause and pauses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightGc {
    pub gc_id: i64,
    pub name: String,
    pub cause: String,
    pub start_epoch_ns: i64,
    pub duration_ns: i64,
    pub sum_of_pauses_ns: i64,
    pub longest_pause_ns: i64,
    /// `jdk.GCCPUTime` of the collection (JDK 17.0.x and later): its threads' user and system
    /// CPU time, and its real time, ns (to the clock tick, 10 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<(i64, i64, i64)>,
}

/// `jdk.GCLocker` (JDK 17-21): collections were held back by JNI critical regions for
/// `duration_ns`, from the first thread stalled by it to the collection the last thread out of
/// them ran; that thread is the event's, its stack the one it left the region with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightGcLocker {
    pub start_epoch_ns: i64,
    pub duration_ns: i64,
    /// `lockCount`: threads in critical regions when the collection was first asked for.
    pub lock_count: u32,
    /// `stallCount`: threads stalled, waiting for the collection.
    pub stall_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<FlightThread>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frames: Vec<JavaFrame>,
}

/// `jdk.CPULoad`: the CPUs' use over the period before `epoch_ns`, each a share of all CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlightCpuLoad {
    pub epoch_ns: i64,
    pub jvm_user: f64,
    pub jvm_system: f64,
    pub machine_total: f64,
}

/// `jdk.ContainerCPUThrottling`: the container's CFS counters at `epoch_ns` (cumulative).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightThrottling {
    pub epoch_ns: i64,
    pub elapsed_slices: i64,
    pub throttled_slices: i64,
    pub throttled_ns: i64,
}

/// `jdk.JVMInformation`: which JVM wrote the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlightJvm {
    pub jvm_name: String,
    pub jvm_version: String,
    pub jvm_arguments: String,
    pub java_arguments: String,
    pub pid: i64,
    pub start_epoch_ms: i64,
}

/// What one chunk of a flight recording holds for explaining its stalls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlightChunk {
    pub offset: u64,
    pub start_epoch_ns: i64,
    pub end_epoch_ns: i64,
    pub events: u64,
    /// Events of each type that was written, by name.
    pub counts: std::collections::BTreeMap<String, u64>,
    pub safepoint_events: Vec<FlightSafepointEvent>,
    pub vm_operations: Vec<FlightVmOperation>,
    pub gcs: Vec<FlightGc>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gc_lockers: Vec<FlightGcLocker>,
    pub cpu_load: Vec<FlightCpuLoad>,
    pub throttling: Vec<FlightThrottling>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jvm: Option<FlightJvm>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_threads: Option<u32>,
    /// `jdk.OSInformation`'s `osVersion` (on Linux, its `uname:` line and the distribution's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_version: Option<String>,
    /// async-profiler's `profiler.Window` events (`--ttsp`): each a time to safepoint it
    /// profiled, as (start, duration), ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<(i64, i64)>,
    /// The runs of a JVM merged into these after the first (0: one run), and the last one's pid
    /// and start.
    #[serde(skip)]
    pub runs: u32,
    #[serde(skip)]
    pub last_run: Option<(i64, i64)>,
    /// Stack samples within [`FLIGHT_SAMPLE_MARGIN_NS`] of a VM operation or safepoint at least
    /// the threshold long in this chunk (the rest are not kept: memory stays bounded by what
    /// the stalls need).
    pub samples: Vec<JfrStackSample>,
}

/// Safepoint ids restart with each run of a JVM: those of a later run in one file (files
/// concatenated, a directory of several runs' dumps) are moved up by this much per run.
pub const RUN_ID_STRIDE: i64 = 1 << 40;

impl FlightChunk {
    /// Which run of which JVM wrote the chunk: its pid and start.
    fn run(&self) -> Option<(i64, i64)> {
        self.jvm.as_ref().map(|j| (j.pid, j.start_epoch_ms))
    }

    /// Adds a later chunk's events to these (the first chunk's JVM and CPUs stand). A chunk of
    /// another JVM run has its safepoint ids moved past this one's, so that the two runs'
    /// safepoints never join.
    pub fn merge(&mut self, mut c: FlightChunk) {
        let theirs = c.run();
        if theirs.is_some() && theirs != self.last_run {
            if self.last_run.is_some() {
                self.runs += 1;
            }
            self.last_run = theirs;
        }
        let shift = i64::from(self.runs) * RUN_ID_STRIDE;
        for e in &mut c.safepoint_events {
            e.safepoint_id = e.safepoint_id.saturating_add(shift);
        }
        for o in &mut c.vm_operations {
            o.safepoint_id = o.safepoint_id.map(|id| id.saturating_add(shift));
        }
        if self.events == 0 && self.start_epoch_ns == 0 {
            self.start_epoch_ns = c.start_epoch_ns;
        }
        self.start_epoch_ns = self.start_epoch_ns.min(c.start_epoch_ns);
        self.end_epoch_ns = self.end_epoch_ns.max(c.end_epoch_ns);
        self.events += c.events;
        for (k, n) in c.counts {
            *self.counts.entry(k).or_default() += n;
        }
        self.safepoint_events.extend(c.safepoint_events);
        self.vm_operations.extend(c.vm_operations);
        self.gcs.extend(c.gcs);
        self.gc_lockers.extend(c.gc_lockers);
        self.cpu_load.extend(c.cpu_load);
        self.throttling.extend(c.throttling);
        self.jvm = self.jvm.take().or(c.jvm);
        self.hw_threads = self.hw_threads.or(c.hw_threads);
        self.os_version = self.os_version.take().or(c.os_version);
        self.windows.extend(c.windows);
        self.samples.extend(c.samples);
    }
}

/// A whole flight recording (one file, or the chunk files of a repository) as the diagnosis
/// reads it: its chunks' events together, and what could not be read.
#[derive(Debug, Clone, Default)]
pub struct FlightFile {
    /// What was named (a file, or a directory of chunk files).
    pub name: String,
    pub bytes: u64,
    pub chunks: u64,
    pub data: FlightChunk,
    /// What could not be read, each with its file and byte.
    pub lost: Vec<String>,
}

/// Stack samples this close to a long safepoint are kept.
pub const FLIGHT_SAMPLE_MARGIN_NS: i64 = 1_000_000_000;

/// The events [`read_chunk_flight`] reads.
pub const FLIGHT_EVENTS: [&str; 16] = [
    "jdk.GCCPUTime",
    "jdk.OSInformation",
    "profiler.Window",
    "jdk.SafepointBegin",
    "jdk.SafepointStateSynchronization",
    "jdk.SafepointEnd",
    "jdk.ExecuteVMOperation",
    "jdk.GarbageCollection",
    "jdk.GCLocker",
    "jdk.CPULoad",
    "jdk.ContainerCPUThrottling",
    "jdk.JVMInformation",
    "jdk.CPUInformation",
    "jdk.ExecutionSample",
    "jdk.NativeMethodSample",
    "jdk.SafepointLatency",
];

pub(super) fn stack_of(v: &jfrs::reader::event::Accessor<'_>) -> (Vec<JavaFrame>, bool) {
    let mut frames = Vec::new();
    let mut truncated = false;
    if let Some(st) = v.get_field("stackTrace") {
        truncated =
            st.get_field("truncated").and_then(|t| bool::try_from(t.value).ok()).unwrap_or(false);
        if let Some(fs) = st.get_field("frames").and_then(|f| f.as_iter()) {
            for f in fs {
                if frames.len() == MAX_FRAMES {
                    truncated = true;
                    break;
                }
                if let Some(fr) = frame_of(&f) {
                    frames.push(fr);
                }
            }
        }
    }
    (frames, truncated)
}

pub(super) fn float_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<f64> {
    v.get_field(f).and_then(|x| {
        f32::try_from(x.value).ok().map(f64::from).or_else(|| f64::try_from(x.value).ok())
    })
}

/// Reads one chunk (its bytes, checked by [`chunk_spans`]) for the explanation of its stalls:
/// the safepoint and VM-operation events, the collections, the CPUs' load, the container's
/// throttling, the JVM, and the stack samples near any operation or safepoint at least
/// `threshold_ns` long. Damage is handled as by [`read_chunk`]; may panic or abort on a damaged
/// chunk (see the module doc).
pub fn read_chunk_flight(
    offset: u64,
    bytes: Vec<u8>,
    threshold_ns: i64,
) -> Result<(FlightChunk, Option<JfrError>), JfrError> {
    let mut span = JfrChunk::default();
    let mut out = FlightChunk { offset, ..Default::default() };
    let mut all_samples = Vec::new();
    let mut gc_cpu: Vec<(i64, (i64, i64, i64))> = Vec::new();
    let counts = &mut out.counts;
    let damage = walk_chunk(
        offset,
        bytes,
        &FLIGHT_EVENTS,
        &mut span,
        Some(counts),
        &mut |name, v, clock| {
            let (Some(start), dur) =
                (long_of(&v, "startTime"), long_of(&v, "duration").unwrap_or(0))
            else {
                return;
            };
            let (at, dur_ns) = (clock.to_epoch(start), clock.to_ns(dur));
            let count = |f: &str| long_of(&v, f).and_then(|n| u32::try_from(n).ok());
            match name {
                "jdk.SafepointBegin" | "jdk.SafepointStateSynchronization" | "jdk.SafepointEnd" => {
                    let Some(id) = long_of(&v, "safepointId") else { return };
                    let (phase, threads) = match name {
                        "jdk.SafepointBegin" => ("begin", count("totalThreadCount")),
                        "jdk.SafepointStateSynchronization" => {
                            ("sync", count("initialThreadCount"))
                        }
                        _ => ("end", None),
                    };
                    out.safepoint_events.push(FlightSafepointEvent {
                        phase: phase.into(),
                        safepoint_id: id,
                        start_epoch_ns: at,
                        duration_ns: dur_ns,
                        threads,
                    });
                }
                "jdk.ExecuteVMOperation" => {
                    let op = v
                        .get_field("operation")
                        .and_then(|o| o.get_field("type"))
                        .and_then(|t| <&str>::try_from(t.value).ok())
                        .unwrap_or("unknown")
                        .to_string();
                    let flag = |f: &str| {
                        v.get_field(f).and_then(|x| bool::try_from(x.value).ok()).unwrap_or(false)
                    };
                    let safepoint = flag("safepoint");
                    out.vm_operations.push(FlightVmOperation {
                        op,
                        start_epoch_ns: at,
                        duration_ns: dur_ns,
                        safepoint,
                        safepoint_id: long_of(&v, "safepointId").filter(|_| safepoint),
                        blocking: flag("blocking"),
                        caller: thread_of(&v, "caller"),
                    });
                }
                "jdk.GarbageCollection" => {
                    // `name` is a jdk.types.GCName and `cause` a jdk.types.GCCause: constant-pool
                    // structs whose one field holds the text, named as the field itself.
                    let name_of = |f: &str| {
                        text_of(&v, f)
                            .or_else(|| v.get_field(f).and_then(|x| text_of(&x, f)))
                            .unwrap_or_default()
                    };
                    out.gcs.push(FlightGc {
                        gc_id: long_of(&v, "gcId").unwrap_or(-1),
                        name: name_of("name"),
                        cause: name_of("cause"),
                        start_epoch_ns: at,
                        duration_ns: dur_ns,
                        sum_of_pauses_ns: long_of(&v, "sumOfPauses").map_or(0, |t| clock.to_ns(t)),
                        longest_pause_ns: long_of(&v, "longestPause").map_or(0, |t| clock.to_ns(t)),
                        cpu: None,
                    });
                }
                "jdk.GCLocker" => {
                    let (frames, _) = stack_of(&v);
                    out.gc_lockers.push(FlightGcLocker {
                        start_epoch_ns: at,
                        duration_ns: dur_ns,
                        lock_count: count("lockCount").unwrap_or(0),
                        stall_count: count("stallCount").unwrap_or(0),
                        thread: thread_of(&v, "eventThread"),
                        frames,
                    });
                }
                // Its times are nanoseconds (contentType nanos), not ticks.
                "jdk.GCCPUTime" => gc_cpu.push((
                    long_of(&v, "gcId").unwrap_or(-1),
                    (
                        long_of(&v, "userTime").unwrap_or(0),
                        long_of(&v, "systemTime").unwrap_or(0),
                        long_of(&v, "realTime").unwrap_or(0),
                    ),
                )),
                "jdk.CPULoad" => out.cpu_load.push(FlightCpuLoad {
                    epoch_ns: at,
                    jvm_user: float_of(&v, "jvmUser").unwrap_or(0.0),
                    jvm_system: float_of(&v, "jvmSystem").unwrap_or(0.0),
                    machine_total: float_of(&v, "machineTotal").unwrap_or(0.0),
                }),
                "jdk.ContainerCPUThrottling" => out.throttling.push(FlightThrottling {
                    epoch_ns: at,
                    elapsed_slices: long_of(&v, "cpuElapsedSlices").unwrap_or(0),
                    throttled_slices: long_of(&v, "cpuThrottledSlices").unwrap_or(0),
                    // A Timespan in nanoseconds, not ticks.
                    throttled_ns: long_of(&v, "cpuThrottledTime").unwrap_or(0),
                }),
                "jdk.JVMInformation" => {
                    out.jvm = Some(FlightJvm {
                        jvm_name: text_of(&v, "jvmName").unwrap_or_default(),
                        jvm_version: text_of(&v, "jvmVersion").unwrap_or_default(),
                        jvm_arguments: text_of(&v, "jvmArguments").unwrap_or_default(),
                        java_arguments: text_of(&v, "javaArguments").unwrap_or_default(),
                        pid: long_of(&v, "pid").unwrap_or(0),
                        start_epoch_ms: long_of(&v, "jvmStartTime").unwrap_or(0),
                    })
                }
                "jdk.CPUInformation" => out.hw_threads = count("hwThreads"),
                "jdk.OSInformation" => out.os_version = text_of(&v, "osVersion"),
                "profiler.Window" => out.windows.push((at, dur_ns)),
                _ => {
                    let thread = if name == "jdk.SafepointLatency" {
                        thread_of(&v, "eventThread")
                    } else {
                        thread_of(&v, "sampledThread")
                    };
                    let Some(thread) = thread else { return };
                    let (frames, truncated) = stack_of(&v);
                    all_samples.push(JfrStackSample {
                        event: name.to_string(),
                        epoch_ns: at,
                        duration_ns: (name == "jdk.SafepointLatency").then_some(dur_ns),
                        os_tid: thread.os_tid,
                        java_name: thread.java_name.unwrap_or_default(),
                        frames,
                        truncated,
                    });
                }
            }
        },
    )?;
    out.start_epoch_ns = span.start_epoch_ns;
    out.end_epoch_ns = span.end_epoch_ns;
    out.events = span.events;
    for (id, cpu) in gc_cpu {
        if let Some(g) = out.gcs.iter_mut().find(|g| g.gc_id == id) {
            g.cpu = Some(cpu);
        }
    }
    // The spans worth samples: long operations, and long safepoints (whose operation may have
    // been under its threshold), each widened by the margin.
    // The spans worth samples: each safepoint whole (its events by id, which may each be under
    // the threshold while the safepoint is not), operations outside safepoints, and
    // async-profiler's windows, at least the threshold long, each widened by the margin.
    let mut by_id: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut span_of = |id: i64, a: i64, d: i64| {
        let e = by_id.entry(id).or_insert((a, a));
        e.0 = e.0.min(a);
        e.1 = e.1.max(a.saturating_add(d));
    };
    for e in &out.safepoint_events {
        span_of(e.safepoint_id, e.start_epoch_ns, e.duration_ns);
    }
    for o in &out.vm_operations {
        if let Some(id) = o.safepoint_id {
            span_of(id, o.start_epoch_ns, o.duration_ns);
        }
    }
    let mut long: Vec<(i64, i64)> = by_id
        .into_values()
        .chain(
            out.vm_operations
                .iter()
                .filter(|o| o.safepoint_id.is_none())
                .map(|o| (o.start_epoch_ns, o.start_epoch_ns.saturating_add(o.duration_ns))),
        )
        .chain(out.windows.iter().map(|&(a, d)| (a, a.saturating_add(d))))
        .filter(|(a, b)| b - a >= threshold_ns)
        .collect();
    long.sort_unstable();
    out.samples = all_samples
        .into_iter()
        .filter(|s| {
            long.iter().any(|&(a, b)| {
                s.epoch_ns >= a.saturating_sub(FLIGHT_SAMPLE_MARGIN_NS)
                    && s.epoch_ns <= b.saturating_add(FLIGHT_SAMPLE_MARGIN_NS)
            })
        })
        .collect();
    out.samples.sort_by_key(|s| s.epoch_ns);
    Ok((out, damage))
}
