//! Execution samples of a flight recording (`jdk.ExecutionSample`, `jdk.NativeMethodSample`,
//! `jdk.SafepointLatency`): each thread's Java frames at an instant.

use super::*;

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

pub(super) fn frame_of(f: &jfrs::reader::event::Accessor<'_>) -> Option<JavaFrame> {
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
