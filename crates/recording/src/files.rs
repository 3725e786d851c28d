//! The files of a recording directory, by name: the one place they are spelled.

pub const META: &str = "meta.json";
/// The JVM's own account: `-Xlog:safepoint*=debug` with the `timenanos` decorator.
pub const SAFEPOINT_LOG: &str = "safepoint.log";
/// The agent's hiccup meter, an HdrHistogram interval log.
pub const HICCUPS: &str = "hiccups.hlog";
pub const EVENTS: &str = "events.jsonl";
pub const SAMPLES: &str = "samples.jsonl";
pub const SYSTEM: &str = "system.jsonl";
/// Java thread names and memory maps, captured when a stall began.
pub const CONTEXT: &str = "context.jsonl";
/// Tracepoint events of the target's threads around each stall (root only).
pub const TRACE: &str = "trace.jsonl";
/// The recorder's control meter, an HdrHistogram interval log like the agent's.
pub const CONTROL: &str = "control.hlog";
/// The JVM's own flight recording of its threads' stacks (JFR execution samples), with the
/// settings it was made with; it opens in JDK Mission Control.
pub const FRAMES_JFR: &str = "frames.jfr";
pub const FRAMES_JFC: &str = "frames.jfc";
/// The stacks of `frames.jfr` around each stall, on the recording's clock: what the doctor
/// reads to name a culprit's code.
pub const FRAMES: &str = "frames.jsonl";
/// Stacks from the JVM's own thread dumps, asked for during long stalls (the lines of
/// `frames.jsonl`, event `thread-dump`).
pub const DUMPS: &str = "dumps.jsonl";
/// Stacks the stacks agent (crates/stacks-agent) took of the threads the recorder signalled
/// during stalls (the lines of `frames.jsonl`, event `signal-sample`), and the file in which
/// the agent says which signal its handler is on.
pub const STACKS: &str = "stacks.jsonl";
pub const STACKS_READY: &str = "stacks.ready";
/// The JVM's perf counters (hsperfdata) as the recorder looked at them: each look that
/// differed from the one before (`procwatch::jvmcounters::CounterLook`).
pub const COUNTERS: &str = "counters.jsonl";
/// Stacks read from outside the JVM during stalls (the lines of `frames.jsonl`, event
/// `outside-sample`; or a note saying why some could not be had).
pub const OUTSIDE: &str = "outside.jsonl";
/// Who set each stall off, as the recorder saw it: the VM operation's caller, attach clients,
/// stops, signals, freezes, and the processes that took the CPUs (`who::Who`).
pub const WHO: &str = "who.jsonl";
/// Each stall's waits off a CPU with their kernel stacks and wakers (root: the BPF recorder,
/// `offcpu`).
pub const KWAITS: &str = "kwaits.jsonl";
/// Every file a recording may hold.
pub const ALL: [&str; 19] = [
    META,
    SAFEPOINT_LOG,
    HICCUPS,
    EVENTS,
    SAMPLES,
    SYSTEM,
    CONTEXT,
    TRACE,
    KWAITS,
    CONTROL,
    FRAMES_JFR,
    FRAMES_JFC,
    FRAMES,
    DUMPS,
    STACKS,
    STACKS_READY,
    COUNTERS,
    OUTSIDE,
    WHO,
];
