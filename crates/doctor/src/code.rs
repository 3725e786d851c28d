//! Which code a culprit thread was running: the one stack, of the JVM's own flight-recorder
//! samples (`frames.jsonl`), that best shows what the thread did in a stall.
//!
//! Invariant: a stack is only ever shown with when it was taken against the stall (inside it,
//! or so long before or after), and none taken further than [`NEAR_NS`] from the stall is used:
//! an old stack of a thread that has moved on would name the wrong code with confidence.
//!
//! What the JVM can give differs (docs/frames.md): JFR samples threads running Java code
//! (`jdk.ExecutionSample`) or in a native method (`jdk.NativeMethodSample`), not threads inside
//! the VM itself (a bulk `Unsafe.copyMemory`, a MappedByteBuffer bulk get); on JDK 17 not while a
//! safepoint is being reached either, so the stack comes from just before or after the stall.
//! JDK 25's `jdk.SafepointLatency` gives the stack where a sampled thread reached its next
//! safepoint poll, and how long that took: the best evidence for a thread late to a safepoint.

use recording::FrameSample;
use recording::disk::JavaFrame;
use serde::{Deserialize, Serialize};

/// The furthest from a stall a stack may have been taken and still be shown for it. JFR takes
/// no stack of a thread that is parked, or (JDK 17) late to a safepoint: a thread held in one
/// loop through two safepoints back to back is last sampled well over a second before the
/// second began (seen: 1.24 s), and that sample is still its code. Always shown with its age.
pub const NEAR_NS: u64 = 5_000_000_000;

/// A culprit's code, as one stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CulpritCode {
    /// The JFR event the stack came from.
    pub event: String,
    /// When the stack was taken, against the stall's start (negative: before it).
    pub offset_ns: i64,
    /// For `jdk.SafepointLatency`: how long the thread took to reach the poll where the stack
    /// was taken.
    pub latency_ns: Option<u64>,
    /// Top first.
    pub frames: Vec<JavaFrame>,
    pub truncated: bool,
    /// The first frame of the application's own code, outside the JDK and outside the
    /// well-known libraries ([`LIBRARIES`]): where a fix would go.
    pub app_frame: Option<usize>,
    /// The first frame in a well-known library above the application's code, and the
    /// library's name: where the user's choice is the library's (another `Directory`, say), not
    /// a change to its code.
    pub library_frame: Option<usize>,
    pub library: Option<String>,
    /// Where the stack came from and when, in words.
    pub source: String,
}

/// A library people run on mapped files and long loops, known by its packages, and what it
/// offers a user whose thread stalls inside it.
pub struct Library {
    pub name: &'static str,
    packages: &'static [&'static str],
    /// For a major fault on a mapping it reads: the library's own choices.
    pub mapped_read: &'static str,
    /// For a huge copy or fill it asked of the VM (`Unsafe.setMemory`, `copyMemory`).
    pub bulk_call: &'static str,
    /// For a store to a page of a file it maps shared, waiting for that page's writeback; None
    /// for a library that writes no file through a mapping.
    pub mapped_write: Option<&'static str>,
}

/// The well-known libraries, by package.
pub const LIBRARIES: &[Library] = &[
    Library {
        name: "Lucene",
        packages: &["org.apache.lucene."],
        mapped_read: "Lucene's MMapDirectory reads the index through a mapping, and a safepoint waits for each page read from disk: keep the index in the page cache (memory for it, or MMapDirectory's preload for the files searched first), put it on faster storage, or open it with NIOFSDirectory, whose reads (FileChannel) a safepoint does not wait for",
        bulk_call: "Lucene copied a large block in one call: smaller segments or merges keep each copy short",
        mapped_write: None,
    },
    Library {
        name: "Chronicle",
        packages: &["net.openhft.chronicle."],
        mapped_read: "Chronicle Queue and Map read and write through memory-mapped files, and a safepoint waits for each page read from disk: keep the queue on fast local storage (tmpfs, NVMe), sized to stay in the page cache, and let Chronicle's pretoucher fault the next cycle in ahead of the writer",
        bulk_call: "Chronicle zeroed or copied a large region in one call: pretouch it off the critical path (Chronicle's pretoucher) or use smaller blocks (blockSize)",
        mapped_write: Some(
            "Chronicle Queue and Map write through memory-mapped files, and a store to a page being written back waits for the disk where pages are held stable (FUSE, NFS, btrfs, disks with integrity checks): keep the queue on tmpfs or fast local storage, not on a network or FUSE file system",
        ),
    },
    Library {
        name: "Netty",
        packages: &["io.netty."],
        mapped_read: "Netty reads this file through a mapping: send it with DefaultFileRegion (sendfile, no mapping in the JVM) or read it with FileChannel, which a safepoint does not wait for",
        bulk_call: "Netty zeroed or copied a large direct buffer in one call: use the pooled allocator (PooledByteBufAllocator) with buffers of modest size, and release buffers rather than allocate and zero new ones",
        mapped_write: None,
    },
];

/// The well-known library a method belongs to, if any.
pub fn library_of(method: &str) -> Option<&'static Library> {
    LIBRARIES.iter().find(|l| l.packages.iter().any(|p| method.starts_with(p)))
}

impl CulpritCode {
    /// The frame a fix names: the first outside the JDK, else the top one (unless it is the
    /// VM's own code or a stub: no code of the application's to change there).
    pub fn fix_frame(&self) -> Option<&JavaFrame> {
        self.app_frame
            .and_then(|i| self.frames.get(i))
            .or_else(|| self.frames.first().filter(|f| java_frame(f)))
    }
}

/// Whether a frame is Java code (not the VM's own, `libjvm.so+0x…`, nor a stub), as stacks
/// read from outside the JVM tell them.
pub fn java_frame(f: &JavaFrame) -> bool {
    f.kind != VM_FRAME && f.kind != STUB_FRAME
}

/// The `kind` of a frame in the VM's own code, and of one in a stub (outside-samples).
pub const VM_FRAME: &str = "VM";
pub const STUB_FRAME: &str = "stub";

/// Whether a method belongs to the JDK itself rather than to the application.
pub fn jdk_method(method: &str) -> bool {
    ["java.", "javax.", "jdk.", "sun.", "com.sun."].iter().any(|p| method.starts_with(p))
}

/// Whether `method` is the native half of a JDK bulk copy or fill (`Unsafe.setMemory0`,
/// `copyMemory0`, `copySwapMemory0`): it runs inside the VM with no safepoint poll until it
/// returns, so a thread a dump caught in one was in it through the stall, and JFR's execution
/// sampler never saw it there. Other native methods (`Thread.sleep`, `Unsafe.park`, a socket
/// read) are safe for a safepoint and say nothing of that kind.
pub fn bulk_vm_call(method: &str) -> bool {
    (method.starts_with("jdk.internal.misc.Unsafe.") || method.starts_with("sun.misc.Unsafe."))
        && matches!(
            method.rsplit('.').next(),
            Some("setMemory0" | "copyMemory0" | "copySwapMemory0")
        )
}

/// `io.x.Ledger.fold` → `Ledger.fold`: the class's simple name and the method, as a person says
/// it.
pub fn short_method(method: &str) -> &str {
    let mut dots = method.rmatch_indices('.');
    match (dots.next(), dots.next()) {
        (Some(_), Some((i, _))) => &method[i + 1..],
        _ => method,
    }
}

/// `Ledger.fold (line 88)`.
pub fn describe_frame(f: &JavaFrame) -> String {
    match f.line {
        Some(l) => format!("{} (line {l})", short_method(&f.method)),
        None => short_method(&f.method).to_string(),
    }
}

fn words(event: &str) -> &str {
    match event {
        "jdk.ExecutionSample" => "JFR execution sample",
        "jdk.NativeMethodSample" => "JFR native-method sample",
        "jdk.SafepointLatency" => "JFR safepoint-latency sample",
        SIGNAL => {
            "the stack where the thread stood when stallscope signalled it (AsyncGetCallTrace)"
        }
        OUTSIDE => {
            "where the thread stood, read from outside the JVM (its registers and stack, named through the JVM's code cache; without inlined methods or lines)"
        }
        other => other,
    }
}

/// The event of a stack the stacks agent took of a thread the recorder signalled (`stacks.jsonl`).
pub const SIGNAL: &str = recording::SIGNAL_SAMPLE;

/// The event of a stack read from outside the JVM (`outside.jsonl`).
pub const OUTSIDE: &str = recording::OUTSIDE_SAMPLE;

/// The event of a stack from the JVM's own thread dump (`dumps.jsonl`).
pub const DUMP: &str = recording::THREAD_DUMP;

/// How far inside a stall a sample must be to count as taken in it: stall edges are known to
/// the meter's tick and JFR's stamps to about a millisecond, and a thread late to a safepoint is
/// not sampled while the safepoint is reached (JDK 17), so a sample at an edge is the thread
/// before or after, often in other code.
const WELL_INSIDE_NS: u64 = 10_000_000;

/// A sample taken this long before a stall (two of JFR's 20 ms sampling periods) is of code the
/// thread may have left: a thread in Java code all along would have been sampled since (at
/// least when it is one of the few a JVM runs).
const STALE_NS: u64 = 40_000_000;

/// The stack that best shows what thread `tid` did in the stall from `start` to `end` (both
/// CLOCK_MONOTONIC), from `frames` (in any order), in this order: a safepoint-latency sample
/// whose wait overlaps the stall (the longest); a sample well inside the stall; the last sample
/// before it (a safepoint-latency sample dated by its poll, within two sampling periods),
/// unless stale while a dump caught the thread in a bulk copy or fill inside the VM
/// ([`bulk_vm_call`]); a thread dump asked for during it; one at its edge; the first after it;
/// none further than [`NEAR_NS`].
///
/// A dump counts if it was asked for anywhere in `stall` (the whole stall, which holds `start`
/// to `end`): it is taken at the thread's first poll after the stall's safepoint whenever it
/// was asked during it, and the recorder asks only once a stall has lasted a while, often after
/// the time to safepoint is over.
pub fn for_thread(
    frames: &[FrameSample],
    tid: i32,
    start: u64,
    end: u64,
    stall: (u64, u64),
) -> Option<CulpritCode> {
    let mine = || frames.iter().filter(move |f| f.tid == tid && !f.frames.is_empty());
    let latency = mine()
        .filter(|f| f.event == "jdk.SafepointLatency")
        .filter(|f| f.t < end && f.t.saturating_add(f.latency_ns.unwrap_or(0)) > start)
        .max_by_key(|f| f.latency_ns.unwrap_or(0));
    let plain = || mine().filter(|f| f.event != "jdk.SafepointLatency" && f.event != DUMP);
    // A dump asked for during the stall shows the thread where it next reached a safepoint
    // poll once the stall's safepoint was over: for a thread JFR could not sample (in a page
    // fault, inside the VM), the method that made the call. Below the samples before and
    // inside: a loop without a poll is found by its dump already past the loop.
    let (stall_start, stall_end) = (stall.0.min(start), stall.1.max(end));
    let dump = mine()
        .filter(|f| f.event == DUMP && f.t >= stall_start && f.t <= stall_end)
        .min_by_key(|f| f.t);
    let well_inside = plain()
        .filter(|f| f.t >= start + WELL_INSIDE_NS && f.t + WELL_INSIDE_NS <= end)
        .min_by_key(|f| f.t);
    // The recorder signals threads only during stalls, so a signal sample well before this one
    // is from an earlier stall, of code the thread has left (seen in CI: a query thread's class
    // loading, 52 ms before the stall it then spent in a fault in Lucene's code).
    let before = plain()
        .filter(|f| f.t < start && start - f.t <= NEAR_NS)
        .filter(|f| f.event != SIGNAL || start - f.t <= STALE_NS)
        .max_by_key(|f| f.t);
    // A safepoint-latency sample's stack is where the thread reached its poll, at `t + latency`.
    // One that reached it just before the stall (the round of a loop before the one that held
    // the safepoint, as when a handshake took the round before) shows the code, and how long it
    // runs without a poll, nearer the stall than any sample JFR took meanwhile. Seen in CI: a
    // safepoint asked for 1 ms after the loop polled, JFR's sampler held off until it was over.
    let polled = |f: &FrameSample| f.t.saturating_add(f.latency_ns.unwrap_or(0));
    // Every request JFR made in one run without a poll is answered at the same poll: of those,
    // the first asked says for how long the thread ran without one.
    let latency_polled_before = || {
        mine()
            .filter(|f| f.event == "jdk.SafepointLatency")
            .filter(|f| polled(f) <= start && start - polled(f) <= STALE_NS)
    };
    let last_poll = latency_polled_before().map(polled).max();
    let latency_before = latency_polled_before()
        .filter(|f| last_poll.is_some_and(|p| polled(f) + 1_000_000 >= p))
        .max_by_key(|f| f.latency_ns);
    let before = match (before, latency_before) {
        (Some(b), Some(l)) if b.t >= polled(l) => Some(b),
        (b, l) => l.or(b),
    };
    let edge = plain().filter(|f| f.t >= start && f.t <= end).min_by_key(|f| f.t);
    // Likewise a signal sample well after the stall is from a later stall, of code the thread
    // went on to (seen in CI: Lucene's main thread, faulting on the index in one stall, was
    // signalled 362 ms later in the thread dump it then asked for).
    // And a signal sent once the stall was over finds the thread wherever it went next (seen in
    // CI: a query thread, out of its fault, signalled 0.6 ms after the stall, in Thread.exit).
    // One sent during the stall is kept: a thread in a fault takes it as the fault ends.
    let sent_after = |f: &FrameSample| {
        f.event == SIGNAL && f.latency_ns.is_some_and(|l| f.t.saturating_sub(l) > end)
    };
    let after = plain()
        .filter(|f| f.t > end && f.t - end <= NEAR_NS)
        .filter(|f| f.event != SIGNAL || f.t - end <= STALE_NS)
        .filter(|f| !sent_after(f))
        .min_by_key(|f| f.t);
    // A dump that caught the thread in a bulk copy or fill inside the VM (`setMemory0`,
    // `copyMemory0`) shows code JFR's execution sampler cannot see, and a sample before the
    // stall older than two sampling periods is of code the thread had left: the dump wins.
    let before = match (before, dump) {
        (Some(b), Some(d)) if start - polled(b) > STALE_NS && bulk_vm_call(&d.frames[0].method) => {
            None
        }
        (b, _) => b,
    };
    let f = latency.or(well_inside).or(before).or(dump).or(edge).or(after)?;
    let offset_ns = f.t as i64 - start as i64;
    // A dump is told against the whole stall it was asked in.
    let (start, end) = if f.event == DUMP { (stall_start, stall_end) } else { (start, end) };
    let when = if f.t < start {
        format!("{} before the stall", recording::units::fmt_ns(start - f.t))
    } else if f.t > end {
        format!("{} after the stall", recording::units::fmt_ns(f.t - end))
    } else {
        format!("{} into the stall", recording::units::fmt_ns(f.t - start))
    };
    let source = match (f.event.as_str(), f.latency_ns) {
        ("jdk.SafepointLatency", Some(l)) if f.t.saturating_add(l) <= start => format!(
            "{}: asked to stop {when}, it reached a safepoint poll {} later, {} before the stall, here",
            words(&f.event),
            recording::units::fmt_ns(l),
            recording::units::fmt_ns(start - f.t.saturating_add(l))
        ),
        ("jdk.SafepointLatency", Some(l)) => format!(
            "{}: asked to stop {when}, it reached a safepoint poll {} later, here",
            words(&f.event),
            recording::units::fmt_ns(l)
        ),
        (SIGNAL, Some(l)) if l >= 1_000_000 => format!(
            "{}, signalled {when}; it took the signal {} later, back from the kernel where it had stopped",
            words(&f.event),
            recording::units::fmt_ns(l)
        ),
        (DUMP, Some(l)) => format!(
            "the JVM's thread dump (Thread.print), asked for {when} and taken at the thread's next safepoint poll once the stall was over ({} later)",
            recording::units::fmt_ns(l)
        ),
        _ => format!("{}, {when}", words(&f.event)),
    };
    let app_frame = f.frames.iter().position(|fr| {
        !jdk_method(&fr.method) && java_frame(fr) && library_of(&fr.method).is_none()
    });
    let library_frame = f.frames[..app_frame.unwrap_or(f.frames.len())]
        .iter()
        .position(|fr| library_of(&fr.method).is_some());
    let library = library_frame.and_then(|i| library_of(&f.frames[i].method));
    Some(CulpritCode {
        event: f.event.clone(),
        offset_ns,
        latency_ns: f.latency_ns,
        app_frame,
        library_frame,
        library: library.map(|l| l.name.to_string()),
        frames: f.frames.clone(),
        truncated: f.truncated,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sample(event: &str, t_ms: u64, tid: i32, methods: &[&str]) -> FrameSample {
        FrameSample {
            t: t_ms * MS,
            tid,
            name: String::new(),
            event: event.into(),
            latency_ns: None,
            agct: None,
            frames: methods
                .iter()
                .map(|m| JavaFrame {
                    method: m.to_string(),
                    line: Some(7),
                    kind: "JIT compiled".into(),
                })
                .collect(),
            truncated: false,
        }
    }

    #[test]
    fn a_signal_sample_from_an_earlier_stall_is_not_this_ones_code() {
        // As in CI: a query thread signalled in class loading 52 ms before the stall it then
        // spent in a page fault; JFR took nothing since. Nothing is better than that stack.
        let old = vec![sample(SIGNAL, 948, 7, &["java.lang.ClassLoader.defineClass1"])];
        assert!(for_thread(&old, 7, 1000 * MS, 1300 * MS, (1000 * MS, 1300 * MS)).is_none());
        // A signal sample just before the stall's start (its edge as the doctor dates it) stays.
        let near = vec![sample(SIGNAL, 990, 7, &["io.x.Ledger.fold"])];
        let c = for_thread(&near, 7, 1000 * MS, 1300 * MS, (1000 * MS, 1300 * MS)).unwrap();
        assert_eq!(c.offset_ns, -10 * MS as i64);
        // And one from a later stall, 362 ms after this one ended (CI: a thread dump the thread
        // asked for after its fault), is not this one's either; one just after it is.
        let later = vec![sample(SIGNAL, 1662, 7, &["sun.management.ThreadImpl.dumpThreads0"])];
        assert!(for_thread(&later, 7, 1000 * MS, 1300 * MS, (1000 * MS, 1300 * MS)).is_none());
        let just = vec![sample(SIGNAL, 1310, 7, &["io.x.Ledger.fold"])];
        assert!(for_thread(&just, 7, 1000 * MS, 1300 * MS, (1000 * MS, 1300 * MS)).is_some());
    }

    #[test]
    fn the_nearest_stack_of_the_thread_is_chosen_and_its_time_said() {
        let fs = vec![
            sample("jdk.ExecutionSample", 900, 7, &["a.Old.run"]),
            sample(
                "jdk.ExecutionSample",
                995,
                7,
                &["java.util.Arrays.fill", "io.x.Ledger.fold", "io.x.Main.main"],
            ),
            sample("jdk.ExecutionSample", 999, 8, &["other.Thread.run"]),
            sample("jdk.ExecutionSample", 2100, 7, &["a.After.run"]),
        ];
        let c = for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).expect("a stack");
        assert_eq!(c.offset_ns, -5 * MS as i64);
        assert_eq!(c.app_frame, Some(1), "the first frame outside the JDK");
        assert_eq!(describe_frame(c.fix_frame().unwrap()), "Ledger.fold (line 7)");
        assert!(c.source.contains("5.00 ms before the stall"), "{}", c.source);
        // Nothing of thread 9: nothing is shown rather than another thread's stack.
        assert_eq!(for_thread(&fs, 9, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)), None);
    }

    /// The stack of a Lucene query thread faulting on a mapped index (as a held-out case saw it):
    /// the fix is named at the user's own frame, and the library it was in.
    const LUCENE: &[&str] = &[
        "org.apache.lucene.store.ByteBufferGuard.getByte",
        "org.apache.lucene.store.ByteBufferIndexInput$SingleBufferImpl.readByte",
        "org.apache.lucene.codecs.lucene90.blocktree.SegmentTermsEnum.seekExact",
        "org.apache.lucene.search.TermQuery$TermWeight.getTermsEnum",
        "org.apache.lucene.search.IndexSearcher.search",
        "io.acme.search.Catalog.find",
        "java.lang.Thread.run",
    ];

    #[test]
    fn inside_a_known_library_the_users_frame_and_the_library_are_named() {
        let fs = vec![sample("jdk.ExecutionSample", 1500, 7, LUCENE)];
        let c = for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap();
        assert_eq!(
            (c.app_frame, c.library_frame, c.library.clone()),
            (Some(5), Some(0), Some("Lucene".to_string()))
        );
        assert_eq!(describe_frame(c.fix_frame().unwrap()), "Catalog.find (line 7)");
        assert_eq!(
            library_of("io.netty.buffer.PooledByteBufAllocator.newDirectBuffer").unwrap().name,
            "Netty"
        );
        assert_eq!(
            library_of("net.openhft.chronicle.queue.impl.single.StoreAppender.writingDocument")
                .unwrap()
                .name,
            "Chronicle"
        );
        assert!(library_of("io.acme.netty.Mine.run").is_none(), "by package, not by name");
        // The application's own code above a library call: the library is not where it stalled.
        let mine = ["io.acme.Loop.spin", "org.apache.lucene.search.IndexSearcher.search"];
        let fs = vec![sample("jdk.ExecutionSample", 1500, 8, &mine)];
        let c = for_thread(&fs, 8, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap();
        assert_eq!((c.app_frame, c.library_frame, c.library), (Some(0), None, None));
    }

    #[test]
    fn a_stack_further_than_five_seconds_from_the_stall_is_not_used() {
        let fs = vec![
            sample("jdk.ExecutionSample", 100, 7, &["a.Old.run"]),
            sample("jdk.ExecutionSample", 11_500, 7, &["a.Late.run"]),
        ];
        assert_eq!(for_thread(&fs, 7, 5200 * MS, 6400 * MS, (5200 * MS, 6400 * MS)), None);
    }

    #[test]
    fn a_safepoint_latency_over_the_stall_wins_over_nearer_samples() {
        let mut lat = sample("jdk.SafepointLatency", 990, 7, &["io.x.Ledger.fold"]);
        // (and over a sample taken well inside the stall)
        lat.latency_ns = Some(1_200 * MS);
        let fs = vec![sample("jdk.ExecutionSample", 999, 7, &["io.x.Near.run"]), lat];
        let c = for_thread(&fs, 7, 1000 * MS, 2200 * MS, (1000 * MS, 2200 * MS)).unwrap();
        assert_eq!(c.frames[0].method, "io.x.Ledger.fold");
        let fs = vec![sample("jdk.ExecutionSample", 1500, 7, &["io.x.Inside.run"]), fs[1].clone()];
        assert_eq!(
            for_thread(&fs, 7, 1000 * MS, 2200 * MS, (1000 * MS, 2200 * MS)).unwrap().frames[0]
                .method,
            "io.x.Ledger.fold"
        );
        assert!(c.source.contains("reached a safepoint poll 1.20 s later"), "{}", c.source);
    }

    #[test]
    fn a_safepoint_latency_that_polled_just_before_the_stall_is_its_nearest_stack() {
        // As in CI on JDK 25: a loop round of 594 ms polled 1 ms before the safepoint that the
        // next round held; JFR's sampler was held off through it, its last execution sample
        // 9 ms before the stall.
        let mut lat = sample("jdk.SafepointLatency", 406, 7, &["io.x.Loop.invoke"]);
        lat.latency_ns = Some(594 * MS);
        // JFR asked again 20 ms later, answered at the same poll.
        let mut again = sample("jdk.SafepointLatency", 426, 7, &["io.x.Loop.invoke"]);
        again.latency_ns = Some(574 * MS);
        let fs =
            vec![sample("jdk.ExecutionSample", 991, 7, &["io.x.Loop.invoke"]), lat.clone(), again];
        let c = for_thread(&fs, 7, 1001 * MS, 1600 * MS, (1001 * MS, 1600 * MS)).unwrap();
        assert_eq!(c.event, "jdk.SafepointLatency");
        assert!(
            c.source.contains("reached a safepoint poll 594 ms later, 1.00 ms before the stall"),
            "{}",
            c.source
        );
        // Polled longer ago than two sampling periods: a plain sample nearer the stall wins,
        // and one that polled long ago is not used at all.
        let c = for_thread(&fs, 7, 1050 * MS, 1600 * MS, (1050 * MS, 1600 * MS)).unwrap();
        assert_eq!(c.event, "jdk.ExecutionSample");
        assert!(for_thread(&[lat], 7, 1050 * MS, 1600 * MS, (1050 * MS, 1600 * MS)).is_none());
    }

    #[test]
    fn a_thread_dump_asked_in_the_stall_names_a_thread_jfr_never_sampled_but_not_over_a_sample_before()
     {
        let mut d = sample(
            DUMP,
            1400,
            7,
            &["jdk.internal.misc.ScopedMemoryAccess.copyMemory", "io.x.MappedRead.read"],
        );
        d.latency_ns = Some(700 * MS);
        let c = for_thread(&[d.clone()], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS))
            .expect("the dump's stack");
        assert_eq!(describe_frame(c.fix_frame().unwrap()), "MappedRead.read (line 7)");
        assert!(
            c.source.contains("thread dump") && c.source.contains("400 ms into the stall"),
            "{}",
            c.source
        );
        // A loop without a poll: its dump is past the loop; the JFR sample before it is the loop.
        let fs = vec![sample("jdk.ExecutionSample", 990, 7, &["io.x.Loop.run"]), d.clone()];
        assert_eq!(
            for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap().frames[0]
                .method,
            "io.x.Loop.run"
        );
        // A sample before that is stale (the thread then printed) while the dump caught it in
        // the VM (a huge setMemory): the dump wins; a fresh one still wins over it.
        let stale =
            sample("jdk.ExecutionSample", 900, 7, &["java.lang.Math.round", "io.x.Main.print"]);
        let mut d2 =
            sample(DUMP, 1400, 7, &["jdk.internal.misc.Unsafe.setMemory0", "io.x.SetMemory.fill"]);
        d2.frames[0].kind = "Native".into();
        assert_eq!(
            for_thread(
                &[stale.clone(), d2.clone()],
                7,
                1000 * MS,
                2000 * MS,
                (1000 * MS, 2000 * MS)
            )
            .unwrap()
            .event,
            DUMP
        );
        let fresh = sample("jdk.ExecutionSample", 970, 7, &["io.x.Loop.run"]);
        assert_eq!(
            for_thread(&[fresh, d2.clone()], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS))
                .unwrap()
                .frames[0]
                .method,
            "io.x.Loop.run"
        );
        // Nor one that caught the thread parked or asleep after its loop.
        let mut asleep = d2.clone();
        asleep.frames[0].method = "java.lang.Thread.sleep".into();
        assert_eq!(
            for_thread(&[stale.clone(), asleep], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS))
                .unwrap()
                .frames[0]
                .method,
            "java.lang.Math.round"
        );
        assert!(
            bulk_vm_call("sun.misc.Unsafe.copyMemory0")
                && !bulk_vm_call("jdk.internal.misc.Unsafe.park")
                && !bulk_vm_call("io.x.Unsafe.setMemory0")
        );
        // A dump in Java code (past a loop without a poll) never outranks the sample before.
        let mut d3 = d2.clone();
        d3.frames[0] = JavaFrame {
            method: "io.x.Loop.after".into(),
            line: Some(9),
            kind: "JIT compiled".into(),
        };
        assert_eq!(
            for_thread(&[stale, d3], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS))
                .unwrap()
                .frames[0]
                .method,
            "java.lang.Math.round"
        );
        // A dump asked for after the time to safepoint, while the stall went on, is the
        // stall's: the thread reaches its next poll only after the stall's safepoint either way.
        let c = for_thread(&[d.clone()], 7, 1000 * MS, 1300 * MS, (990 * MS, 1500 * MS))
            .expect("the dump, asked after the wait");
        assert!(c.source.contains("410 ms into the stall"), "{}", c.source);
        assert_eq!(
            for_thread(&[d.clone()], 7, 1000 * MS, 1300 * MS, (990 * MS, 1350 * MS)),
            None,
            "asked after the stall"
        );
        // A dump asked for outside the stall is about another moment.
        assert_eq!(for_thread(&[d], 7, 2500 * MS, 3000 * MS, (2500 * MS, 3000 * MS)), None);
    }

    #[test]
    fn a_sample_well_inside_wins_then_before_then_the_edge_then_after() {
        let before = sample("jdk.ExecutionSample", 500, 7, &["a.Before.run"]);
        let fs = vec![before.clone(), sample("jdk.ExecutionSample", 1500, 7, &["a.Inside.run"])];
        assert_eq!(
            for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap().frames[0]
                .method,
            "a.Inside.run"
        );
        // At the stall's last millisecond the thread has already moved on: the sample before wins.
        let fs = vec![
            before.clone(),
            sample("jdk.ExecutionSample", 1999, 7, &["a.Edge.run"]),
            sample("jdk.ExecutionSample", 2003, 7, &["a.After.run"]),
        ];
        assert_eq!(
            for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap().frames[0]
                .method,
            "a.Before.run"
        );
        let fs = vec![
            sample("jdk.ExecutionSample", 1999, 7, &["a.Edge.run"]),
            sample("jdk.ExecutionSample", 2003, 7, &["a.After.run"]),
        ];
        assert_eq!(
            for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap().frames[0]
                .method,
            "a.Edge.run"
        );
        // A signal sent after the stall is of wherever the thread went next; one sent during it
        // and taken as the thread came back from the kernel is the stall's.
        let mut late = sample(SIGNAL, 2001, 7, &["java.lang.Thread.exit"]);
        late.latency_ns = Some(60_000);
        assert_eq!(
            for_thread(&[late.clone()], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)),
            None
        );
        late.latency_ns = Some(5 * MS);
        assert!(for_thread(&[late], 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).is_some());
        let fs = vec![sample("jdk.ExecutionSample", 2003, 7, &["a.After.run"])];
        let c = for_thread(&fs, 7, 1000 * MS, 2000 * MS, (1000 * MS, 2000 * MS)).unwrap();
        assert_eq!(c.frames[0].method, "a.After.run");
        assert!(c.source.contains("3.00 ms after the stall"), "{}", c.source);
        assert_eq!(short_method("Top"), "Top");
        assert_eq!(short_method("a.B.c"), "B.c");
    }
}
