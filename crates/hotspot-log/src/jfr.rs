//! Safepoints from JDK Flight Recorder files (`.jfr`), JDK 11 to 25, read with the `jfrs` crate.
//!
//! HotSpot posts four events per safepoint, each carrying its `safepointId`:
//! - `jdk.SafepointBegin`: from the start of the synchronization to the end of `begin()` (time
//!   to safepoint, plus cleanup before JDK 22), with the thread count;
//! - `jdk.SafepointStateSynchronization`: the time to safepoint itself, with the count of threads
//!   still running when it began;
//! - `jdk.ExecuteVMOperation`: the operation and its duration (`safepoint` true);
//! - `jdk.SafepointEnd`: the leaving.
//!
//! A record is made for each `jdk.SafepointBegin`: total from its start to the end of
//! `jdk.SafepointEnd` (without one, to the end of the operation), time to safepoint from the
//! synchronization event, the operation's name, leaving from the end event, and "at safepoint" as
//! what lies between the end of `begin()` and the start of `end()`. Times are the chunk's ticks
//! turned into nanoseconds with its `ticksPerSecond`, stamped on the wall clock (JFR has no JVM
//! uptime on its events). JFR's `default` settings record only `jdk.SafepointBegin` and
//! `jdk.ExecuteVMOperation`, above 10 ms; none of the JDK's own settings records all four at
//! threshold 0; `docs/formats/jfr.md` gives settings that turn them on.
//!
//! Chunk headers are checked here before `jfrs` sees a chunk (magic, version, a size that fits
//! the file), and each chunk is parsed on its own, so a damaged or still-growing last chunk costs
//! only itself. `jfrs` can panic, or ask for an allocation the size of a damaged count, on bad
//! input: callers that must survive any file run [`read_chunk`] and [`read_chunk_samples`] in a
//! process of their own (`stallscope logs` and the recorder do).
//!
//! Besides safepoints, [`read_chunk_samples`] reads the stacks JFR sampled: `jdk.ExecutionSample`
//! (a thread running Java code), `jdk.NativeMethodSample` (a thread in a native method) and, on
//! JDK 25, `jdk.SafepointLatency` (how long a sampled thread took to reach its next safepoint
//! poll, with its stack there). The doctor uses them to name a culprit thread's code.

use crate::formats::Format;
use crate::record::{Safepoint, Source};
use crate::stamps::{Stamps, WallTime};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};

/// The first bytes of every chunk.
pub const MAGIC: [u8; 4] = *b"FLR\0";
/// magic, major and minor version, chunk size: what is checked before a chunk is parsed.
const HEADER_PREFIX: usize = 16;
/// The whole fixed chunk header (to the features field).
const HEADER_SIZE: u64 = 68;

/// Whether `head` (a file's first bytes) is a JFR file.
pub fn is_jfr(head: &[u8]) -> bool {
    head.starts_with(&MAGIC)
}

/// One safepoint as read from a JFR file: plain numbers, carried between processes as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JfrSafepoint {
    pub op: String,
    pub total_ns: u64,
    pub ttsp_ns: Option<u64>,
    pub at_safepoint_ns: Option<u64>,
    pub leaving_ns: Option<u64>,
    pub threads_total: Option<u32>,
    pub threads_running: Option<u32>,
    /// Wall-clock end, ns since the epoch.
    pub end_epoch_ns: i64,
}

impl JfrSafepoint {
    pub fn into_safepoint(self, file: u32) -> Safepoint {
        Safepoint {
            op: self.op.into(),
            ttsp_ns: self.ttsp_ns,
            cleanup_ns: None,
            at_safepoint_ns: self.at_safepoint_ns,
            leaving_ns: self.leaving_ns,
            total_ns: self.total_ns,
            since_last_ns: None,
            threads_total: self.threads_total,
            threads_running: self.threads_running,
            page_traps: None,
            end: wall_stamps(self.end_epoch_ns),
            format: Format::Jfr,
            source: Source { file, line: 0 },
            culprits: Vec::new(),
        }
    }
}

/// Stamps for a wall-clock instant in ns since the epoch (UTC).
pub fn wall_stamps(epoch_ns: i64) -> Stamps {
    Stamps {
        wall: Some(WallTime { epoch_ms: epoch_ns.div_euclid(1_000_000), offset_min: 0 }),
        ..Default::default()
    }
}

/// What one chunk gave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JfrChunk {
    /// Offset of the chunk in the file.
    pub offset: u64,
    /// Its span on the wall clock, ns since the epoch.
    pub start_epoch_ns: i64,
    pub end_epoch_ns: i64,
    /// Events in it, and those of them that were safepoint events.
    pub events: u64,
    pub safepoint_events: u64,
    pub safepoints: Vec<JfrSafepoint>,
}

/// Why (part of) a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JfrError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("byte {offset}: {reason}")]
    Bad { offset: u64, reason: String },
}

/// A chunk's place in the file, from a header that was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkSpan {
    pub offset: u64,
    pub size: u64,
}

/// Walks the chunk headers of a file `len` bytes long without trusting them. Returns the
/// chunks that fit, and why the rest (if any) could not be read: a size beyond the end of the
/// file is a chunk still being written, or a file cut short.
pub fn chunk_spans<R: Read + Seek>(
    r: &mut R,
    len: u64,
) -> Result<(Vec<ChunkSpan>, Option<JfrError>), io::Error> {
    let mut spans = Vec::new();
    let mut offset = 0u64;
    while offset < len {
        let mut head = [0u8; HEADER_PREFIX];
        r.seek(SeekFrom::Start(offset))?;
        if len - offset < HEADER_PREFIX as u64 || r.read_exact(&mut head).is_err() {
            return Ok((
                spans,
                Some(JfrError::Bad {
                    offset,
                    reason: format!(
                        "{} bytes after the last chunk, too few for a chunk header (cut short?)",
                        len - offset
                    ),
                }),
            ));
        }
        if head[..4] != MAGIC {
            return Ok((
                spans,
                Some(JfrError::Bad {
                    offset,
                    reason: "no chunk starts here (the magic FLR\\0 is missing)".into(),
                }),
            ));
        }
        let major = i16::from_be_bytes([head[4], head[5]]);
        if !(1..=2).contains(&major) {
            return Ok((
                spans,
                Some(JfrError::Bad {
                    offset,
                    reason: format!("chunk format version {major}, not 1 or 2"),
                }),
            ));
        }
        let size = i64::from_be_bytes(head[8..16].try_into().expect("8 bytes"));
        if size < HEADER_SIZE as i64 {
            // JFR writes the size last: 0 here is a chunk still being written.
            let why = if size == 0 {
                "a chunk still being written (its size is not set yet)".to_string()
            } else {
                format!("a chunk size of {size} bytes, shorter than its header")
            };
            return Ok((spans, Some(JfrError::Bad { offset, reason: why })));
        }
        let size = size as u64;
        if size > len - offset {
            return Ok((
                spans,
                Some(JfrError::Bad {
                    offset,
                    reason: format!(
                        "a chunk of {size} bytes where {} are left (still being written, or the file is cut short)",
                        len - offset
                    ),
                }),
            ));
        }
        spans.push(ChunkSpan { offset, size });
        offset += size;
    }
    Ok((spans, None))
}

/// One chunk's clock: its ticks in nanoseconds, and on the wall clock.
#[derive(Debug, Clone, Copy)]
struct ChunkClock {
    tps: i128,
    start_ticks: i128,
    start_ns: i128,
}

impl ChunkClock {
    fn of(h: &jfrs::reader::ChunkHeader) -> ChunkClock {
        ChunkClock {
            tps: h.ticks_per_second.max(1) as i128,
            start_ticks: h.start_ticks as i128,
            start_ns: h.start_time_nanos as i128,
        }
    }

    fn to_ns(self, ticks: i64) -> i64 {
        (ticks as i128 * 1_000_000_000 / self.tps) as i64
    }

    fn to_epoch(self, ticks: i64) -> i64 {
        (self.start_ns + (ticks as i128 - self.start_ticks) * 1_000_000_000 / self.tps) as i64
    }
}

/// Walks the events of one chunk (its bytes, checked by [`chunk_spans`]), handing `each` the
/// events whose type is in `wanted`, and counting all of them and the chunk's span into `out`.
/// Returns the damage that ended the walk early, if any; a chunk whose metadata or constant
/// pools cannot be parsed is an error.
fn walk_chunk(
    offset: u64,
    bytes: Vec<u8>,
    wanted: &[&str],
    out: &mut JfrChunk,
    mut counts: Option<&mut std::collections::BTreeMap<String, u64>>,
    each: &mut dyn FnMut(&str, jfrs::reader::event::Accessor<'_>, ChunkClock),
) -> Result<Option<JfrError>, JfrError> {
    let bad = |e: jfrs::reader::Error| JfrError::Bad {
        offset,
        reason: format!("this chunk cannot be parsed ({e})"),
    };
    let mut reader = jfrs::reader::JfrReader::new(io::Cursor::new(bytes));
    out.offset = offset;
    let mut damage = None;
    if let Some(chunk) = reader.chunks().next() {
        // One chunk per buffer: whatever follows it is not another chunk of this file.
        let (mut cr, chunk) = chunk.map_err(bad)?;
        let clock = ChunkClock::of(&chunk.header);
        out.start_epoch_ns = chunk.header.start_time_nanos;
        out.end_epoch_ns =
            chunk.header.start_time_nanos.saturating_add(chunk.header.duration_nanos);
        for event in cr.events(&chunk) {
            let event = match event {
                Ok(e) => e,
                Err(e) => {
                    damage = Some(JfrError::Bad {
                        offset,
                        reason: format!(
                            "this chunk's event {} cannot be parsed ({e}); its events before it are read",
                            out.events + 1
                        ),
                    });
                    break;
                }
            };
            out.events += 1;
            let name = event.class.name();
            if let Some(c) = counts.as_deref_mut() {
                match c.get_mut(name) {
                    Some(n) => *n += 1,
                    None => {
                        c.insert(name.to_string(), 1);
                    }
                }
            }
            if wanted.contains(&name) {
                each(name, event.value(), clock);
            }
        }
    }
    Ok(damage)
}

fn long_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<i64> {
    v.get_field(f).and_then(|x| {
        i64::try_from(x.value).ok().or_else(|| i32::try_from(x.value).ok().map(i64::from))
    })
}

/// A string field, written inline or through the constant pool (a `jdk.types.Symbol` holds
/// its text in `string`).
fn text_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<String> {
    let x = v.get_field(f)?;
    if let Ok(s) = <&str>::try_from(x.value) {
        return Some(s.to_string());
    }
    x.get_field("string").and_then(|s| <&str>::try_from(s.value).ok()).map(str::to_string)
}

/// The JFR events that carry a thread's stack at an instant.
pub const SAMPLE_EVENTS: [&str; 3] =
    ["jdk.ExecutionSample", "jdk.NativeMethodSample", "jdk.SafepointLatency"];

/// At most this many frames are kept per stack, from the top.
pub const MAX_FRAMES: usize = 16;

/// One Java frame: `method` is `package.Class.method`, as a stack trace prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JavaFrame {
    pub method: String,
    /// The source line, when the class has line numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// `Interpreted`, `JIT compiled`, `Inlined` or `Native`, as JFR says.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// A thread's stack as JFR sampled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JfrStackSample {
    /// The JFR event it came from (one of [`SAMPLE_EVENTS`]).
    pub event: String,
    /// When, ns since the epoch.
    pub epoch_ns: i64,
    /// For `jdk.SafepointLatency`: how long the thread took to reach its poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<i64>,
    /// The thread's id in the JVM's pid namespace (`osThreadId`), and its Java name when the
    /// thread was first seen by JFR.
    pub os_tid: i64,
    #[serde(default)]
    pub java_name: String,
    /// Top first, at most [`MAX_FRAMES`]; `truncated` when the stack had more.
    pub frames: Vec<JavaFrame>,
    #[serde(default)]
    pub truncated: bool,
}

/// The stack samples of one chunk (at `offset` in its file), in time order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JfrSampleChunk {
    pub offset: u64,
    pub samples: Vec<JfrStackSample>,
}

fn frame_of(f: &jfrs::reader::event::Accessor<'_>) -> Option<JavaFrame> {
    let m = f.get_field("method")?;
    let class = m.get_field("type").and_then(|t| text_of(&t, "name")).unwrap_or_else(|| "?".into());
    let name = text_of(&m, "name").unwrap_or_else(|| "?".into());
    let line = long_of(f, "lineNumber").filter(|l| *l > 0).and_then(|l| u32::try_from(l).ok());
    let kind = f.get_field("type").and_then(|t| text_of(&t, "description")).unwrap_or_default();
    // Class names are in the JVM's internal form (`java/lang/String`).
    Some(JavaFrame { method: format!("{}.{name}", class.replace('/', ".")), line, kind })
}

/// Reads one chunk's stack samples ([`SAMPLE_EVENTS`]) whose thread is in `tids` (all, when
/// `tids` is empty). Damage is handled as by [`read_chunk`]. May panic or abort on a damaged
/// chunk (see the module doc).
pub fn read_chunk_samples(
    offset: u64,
    bytes: Vec<u8>,
    tids: &[i64],
) -> Result<(JfrSampleChunk, Option<JfrError>), JfrError> {
    let mut counts = JfrChunk::default();
    let mut samples = Vec::new();
    let damage =
        walk_chunk(offset, bytes, &SAMPLE_EVENTS, &mut counts, None, &mut |name, v, clock| {
            let thread = if name == "jdk.SafepointLatency" {
                v.get_field("eventThread")
            } else {
                v.get_field("sampledThread")
            };
            let Some(thread) = thread else { return };
            let Some(os_tid) = long_of(&thread, "osThreadId") else { return };
            if !tids.is_empty() && !tids.contains(&os_tid) {
                return;
            }
            let Some(start) = long_of(&v, "startTime") else { return };
            let (frames, truncated) = stack_of(&v);
            samples.push(JfrStackSample {
                event: name.to_string(),
                epoch_ns: clock.to_epoch(start),
                duration_ns: (name == "jdk.SafepointLatency")
                    .then(|| long_of(&v, "duration").map(|d| clock.to_ns(d)))
                    .flatten(),
                os_tid,
                java_name: text_of(&thread, "javaName").unwrap_or_default(),
                frames,
                truncated,
            });
        })?;
    samples.sort_by_key(|s| s.epoch_ns);
    Ok((JfrSampleChunk { offset, samples }, damage))
}

#[derive(Default)]
struct Partial {
    begin: Option<(i64, i64, Option<u32>)>,
    sync: Option<(i64, Option<u32>)>,
    op: Option<(String, i64, i64)>,
    end: Option<(i64, i64)>,
}

/// Reads one chunk (its bytes, checked by [`chunk_spans`]) into its safepoints. A chunk whose
/// metadata or constant pools cannot be parsed is an error; events that cannot be parsed end the
/// reading of the chunk, and the safepoints before them are kept, with the reason beside them.
/// May panic or abort on a damaged chunk (see the module doc).
pub fn read_chunk(offset: u64, bytes: Vec<u8>) -> Result<(JfrChunk, Option<JfrError>), JfrError> {
    const SAFEPOINT_EVENTS: [&str; 4] = [
        "jdk.SafepointBegin",
        "jdk.SafepointStateSynchronization",
        "jdk.ExecuteVMOperation",
        "jdk.SafepointEnd",
    ];
    let mut out = JfrChunk { offset, ..Default::default() };
    let mut by_id: HashMap<i64, Partial> = HashMap::new();
    let mut order: Vec<i64> = Vec::new();
    let mut safepoint_events = 0;
    let damage =
        walk_chunk(offset, bytes, &SAFEPOINT_EVENTS, &mut out, None, &mut |name, v, clock| {
            let count = |f: &str| {
                v.get_field(f)
                    .and_then(|x| i32::try_from(x.value).ok())
                    .and_then(|n| u32::try_from(n).ok())
            };
            let (Some(id), Some(start), Some(dur)) =
                (long_of(&v, "safepointId"), long_of(&v, "startTime"), long_of(&v, "duration"))
            else {
                return;
            };
            if name == "jdk.ExecuteVMOperation"
                && !v
                    .get_field("safepoint")
                    .and_then(|x| bool::try_from(x.value).ok())
                    .unwrap_or(false)
            {
                return;
            }
            safepoint_events += 1;
            let p = by_id.entry(id).or_insert_with(|| {
                order.push(id);
                Partial::default()
            });
            let (to_epoch, to_ns) = (|t| clock.to_epoch(t), |t| clock.to_ns(t));
            match name {
                "jdk.SafepointBegin" => {
                    p.begin = Some((to_epoch(start), to_ns(dur), count("totalThreadCount")))
                }
                "jdk.SafepointStateSynchronization" => {
                    p.sync = Some((to_ns(dur), count("initialThreadCount")))
                }
                "jdk.ExecuteVMOperation" => {
                    let op = v
                        .get_field("operation")
                        .and_then(|o| o.get_field("type"))
                        .and_then(|t| <&str>::try_from(t.value).ok())
                        .unwrap_or("unknown");
                    p.op = Some((op.to_string(), to_epoch(start), to_ns(dur)));
                }
                _ => p.end = Some((to_epoch(start), to_ns(dur))),
            }
        })?;
    out.safepoint_events = safepoint_events;
    for id in order {
        let p = by_id.remove(&id).expect("every id in order is in the map");
        // A safepoint is the one jdk.SafepointBegin says it is; the other events only add to it.
        let Some((begin_at, begin_ns, threads_total)) = p.begin else { continue };
        let begin_end = begin_at.saturating_add(begin_ns);
        let end_at = match (p.end, &p.op) {
            (Some((at, ns)), _) => at.saturating_add(ns),
            (None, Some((_, at, ns))) => at.saturating_add(*ns),
            (None, None) => begin_end,
        };
        out.safepoints.push(JfrSafepoint {
            op: p.op.as_ref().map_or_else(|| "unknown".to_string(), |o| o.0.clone()),
            total_ns: end_at.saturating_sub(begin_at).max(0) as u64,
            ttsp_ns: p.sync.map(|(ns, _)| ns.max(0) as u64),
            at_safepoint_ns: p.end.map(|(at, _)| at.saturating_sub(begin_end).max(0) as u64),
            leaving_ns: p.end.map(|(_, ns)| ns.max(0) as u64),
            threads_total,
            threads_running: p.sync.and_then(|(_, n)| n),
            end_epoch_ns: end_at,
        });
    }
    out.safepoints.sort_by_key(|s| s.end_epoch_ns);
    Ok((out, damage))
}

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

fn thread_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<FlightThread> {
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

fn stack_of(v: &jfrs::reader::event::Accessor<'_>) -> (Vec<JavaFrame>, bool) {
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

fn float_of(v: &jfrs::reader::event::Accessor<'_>, f: &str) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(size: i64, major: i16) -> Vec<u8> {
        let mut h = MAGIC.to_vec();
        h.extend(major.to_be_bytes());
        h.extend(0i16.to_be_bytes());
        h.extend(size.to_be_bytes());
        h.resize(HEADER_SIZE as usize, 0);
        h
    }

    #[test]
    fn chunks_that_fit_are_kept_and_the_first_that_does_not_is_said() {
        let mut file = header(100, 2);
        file.resize(100, 0);
        file.extend(header(80, 1));
        file.resize(180, 0);
        file.extend(header(500, 2));
        let len = file.len() as u64;
        let (spans, rest) = chunk_spans(&mut io::Cursor::new(file), len).unwrap();
        assert_eq!(
            spans,
            vec![ChunkSpan { offset: 0, size: 100 }, ChunkSpan { offset: 100, size: 80 }]
        );
        let Some(JfrError::Bad { offset, reason }) = rest else { panic!("the cut chunk is said") };
        assert_eq!(offset, 180);
        assert!(reason.contains("cut short"), "{reason}");
        let (spans, rest) = chunk_spans(&mut io::Cursor::new(header(0, 2)), HEADER_SIZE).unwrap();
        assert!(spans.is_empty());
        assert!(rest.unwrap().to_string().contains("still being written"));
        let (_, rest) = chunk_spans(&mut io::Cursor::new(header(68, 3)), HEADER_SIZE).unwrap();
        assert!(rest.unwrap().to_string().contains("version 3"));
    }

    #[test]
    fn chunks_of_two_runs_of_a_jvm_keep_their_safepoints_apart() {
        let chunk = |pid, id| FlightChunk {
            jvm: Some(FlightJvm { pid, start_epoch_ms: pid * 1000, ..Default::default() }),
            safepoint_events: vec![FlightSafepointEvent {
                phase: "begin".into(),
                safepoint_id: id,
                start_epoch_ns: 0,
                duration_ns: 1,
                threads: None,
            }],
            ..Default::default()
        };
        let mut all = FlightChunk::default();
        all.merge(chunk(1, 7));
        all.merge(chunk(1, 8));
        all.merge(chunk(2, 7));
        let ids: Vec<i64> = all.safepoint_events.iter().map(|e| e.safepoint_id).collect();
        assert_eq!(ids, vec![7, 8, RUN_ID_STRIDE + 7]);
        assert_eq!(all.runs, 1);
    }

    proptest! {
        /// Any bytes: never a panic, and every chunk kept lies inside the file, one after another.
        #[test]
        fn chunk_spans_of_any_bytes_fit_the_file(bytes in proptest::collection::vec(any::<u8>(), 0..400), magic in any::<bool>()) {
            let mut b = bytes;
            if magic && b.len() >= 16 {
                b[..4].copy_from_slice(&MAGIC);
                b[4..6].copy_from_slice(&2i16.to_be_bytes());
            }
            let len = b.len() as u64;
            let (spans, _) = chunk_spans(&mut io::Cursor::new(b), len).unwrap();
            let mut at = 0;
            for s in spans {
                prop_assert_eq!(s.offset, at);
                prop_assert!(s.size >= HEADER_SIZE && s.offset + s.size <= len);
                at += s.size;
            }
        }
    }
}
