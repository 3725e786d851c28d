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

mod flight;
mod samples;

pub use flight::*;
pub use samples::*;

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
