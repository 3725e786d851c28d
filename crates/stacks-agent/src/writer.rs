//! The agent's thread: every few milliseconds it resolves the stacks the handler took (jmethodID
//! to `package.Class.method`, bytecode index to source line) and appends them to
//! `stacks.jsonl`, one `FrameSample` per line.
//!
//! Invariant: JVMTI is called only from this thread (attached to the JVM as a daemon) and from
//! the JVM's own callbacks, never from the handler. A method the JVM no longer knows (its class
//! unloaded) is written as `(unloaded)`, not dropped, so the stack's depth stays true.

use crate::jvmti::{JavaVm, JvmtiEnv, LineEntry};
use crate::ring::{self, Raw};
use std::collections::HashMap;
use std::ffi::c_int;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Once woken by a stack, the thread waits this long for more before it writes them all.
const GATHER: Duration = Duration::from_millis(10);
/// Asleep, the thread still looks this often whether the JVM is ending.
const IDLE_WAIT_MS: c_int = 1000;
/// The stacks' file and the file whose line says the handler is in place (its signal).
pub const STACKS: &str = "stacks.jsonl";
pub const READY: &str = "stacks.ready";

struct Method {
    name: String,
    lines: Vec<LineEntry>,
}

struct State {
    dir: PathBuf,
    out: Option<std::io::BufWriter<File>>,
    methods: HashMap<usize, Option<Method>>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
static DONE: AtomicBool = AtomicBool::new(false);

pub fn configure(dir: PathBuf) {
    *STATE.lock().unwrap_or_else(|e| e.into_inner()) =
        Some(State { dir, out: None, methods: HashMap::new() });
}

fn create(p: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
}

/// Opens the stacks file, says the handler's signal in the ready file and starts the thread.
pub fn start(vm: *mut JavaVm, sig: i32) {
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(st) = g.as_mut() else { return };
    match create(&st.dir.join(STACKS)) {
        Ok(f) => st.out = Some(std::io::BufWriter::new(f)),
        Err(e) => {
            eprintln!("stallscope stacks agent: {}: {e}; no stacks", st.dir.join(STACKS).display());
            return;
        }
    }
    let ready = st.dir.join(READY);
    drop(g);
    let Some(wake) = ring::wake_pipe() else {
        eprintln!("stallscope stacks agent: no pipe for its thread; no stacks");
        return;
    };
    let vm = vm as usize;
    let spawned = std::thread::Builder::new().name("stallscope-stacks".into()).spawn(move || {
        let vm = vm as *mut JavaVm;
        // SAFETY: the JVM is live (VMInit has happened); the name is NUL-terminated.
        if !unsafe { JavaVm::attach_daemon(vm, b"stallscope-stacks\0") } {
            eprintln!("stallscope stacks agent: cannot attach its thread to the JVM; no stacks");
            return;
        }
        while !DONE.load(Ordering::Acquire) {
            let mut p = libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd on the pipe's read end, which this thread alone reads.
            if unsafe { libc::poll(&mut p, 1, IDLE_WAIT_MS) } <= 0 {
                continue;
            }
            std::thread::sleep(GATHER);
            let mut buf = [0u8; 256];
            // SAFETY: a non-blocking read into `buf`, until the pipe is empty.
            while unsafe { libc::read(wake, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
            let env = crate::JVMTI.load(Ordering::Acquire);
            flush(env);
        }
        // SAFETY: this thread attached above.
        unsafe { JavaVm::detach(vm) };
    });
    if spawned.is_err() {
        eprintln!("stallscope stacks agent: cannot start its thread; no stacks");
        return;
    }
    // Only now may the recorder signal: the handler and the thread that empties its ring are up.
    if let Err(e) = create(&ready).and_then(|mut f| f.write_all(format!("{sig}\n").as_bytes())) {
        eprintln!(
            "stallscope stacks agent: {}: {e}; the recorder will not ask for stacks",
            ready.display()
        );
    }
}

/// The JVM is ending: what the handler took last is written, and the thread stops. The exit is
/// never held up for long by the thread's own write (at most [`EXIT_WAIT`]).
pub fn finish(env: *mut JvmtiEnv) {
    let t0 = std::time::Instant::now();
    loop {
        match STATE.try_lock() {
            Ok(mut g) => {
                write(&mut g, env);
                break;
            }
            Err(std::sync::TryLockError::Poisoned(e)) => {
                write(&mut e.into_inner(), env);
                break;
            }
            Err(std::sync::TryLockError::WouldBlock) if t0.elapsed() < EXIT_WAIT => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(std::sync::TryLockError::WouldBlock) => break,
        }
    }
    DONE.store(true, Ordering::Release);
}

/// How long the JVM's exit waits for the thread to finish a write under way.
const EXIT_WAIT: Duration = Duration::from_millis(200);

fn flush(env: *mut JvmtiEnv) {
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    write(&mut g, env);
}

fn write(g: &mut Option<State>, env: *mut JvmtiEnv) {
    let Some(st) = g.as_mut() else { return };
    if DONE.load(Ordering::Acquire) {
        return;
    }
    let raws = ring::drain();
    if raws.is_empty() {
        return;
    }
    let State { out, methods, .. } = st;
    let Some(out) = out.as_mut() else { return };
    for r in &raws {
        let n = r.n.max(0) as usize;
        let frames: Vec<(String, Option<u32>, bool)> = r.frames[..n.min(ring::DEPTH)]
            .iter()
            .map(|f| {
                let m = methods.entry(f.method as usize).or_insert_with(|| resolve(env, f.method));
                match m {
                    Some(m) => (m.name.clone(), line_of(&m.lines, f.lineno), f.lineno == -3),
                    None => ("(unloaded)".to_string(), None, f.lineno == -3),
                }
            })
            .collect();
        let _ = out.write_all(json_line(r, &frames).as_bytes());
    }
    let _ = out.flush();
}

fn resolve(env: *mut JvmtiEnv, m: crate::jvmti::JMethodId) -> Option<Method> {
    if env.is_null() || m.is_null() {
        return None;
    }
    // SAFETY: a live JVMTI environment, called from an attached thread; a stale jmethodID gets
    // an error, not a crash (HotSpot never frees them).
    let name = unsafe { JvmtiEnv::method_name(env, m) }?;
    let class = unsafe { JvmtiEnv::class_signature(env, m) }?;
    Some(Method {
        name: format!("{}.{name}", class_name(&class)),
        lines: unsafe { JvmtiEnv::lines(env, m) },
    })
}

/// `Lio/x/Ledger;` → `io.x.Ledger`.
pub fn class_name(signature: &str) -> String {
    let s = signature.strip_prefix('L').and_then(|s| s.strip_suffix(';')).unwrap_or(signature);
    s.replace('/', ".")
}

/// The source line of bytecode index `bci`: the entry starting last at or before it.
pub fn line_of(lines: &[LineEntry], bci: i32) -> Option<u32> {
    if bci < 0 {
        return None;
    }
    lines
        .iter()
        .filter(|l| l.start_location <= bci as i64)
        .max_by_key(|l| l.start_location)
        .and_then(|l| u32::try_from(l.line_number).ok())
}

fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

/// One `stacks.jsonl` line: `{"t":…,"tid":…,"name":"","event":"signal-sample","frames":[…],
/// "truncated":…}`, and `"agct":N` with AsyncGetCallTrace's reason when it gave no stack.
/// `t` is when the recorder signalled (what the stack shows: a thread that was in
/// uninterruptible sleep takes the signal only when it wakes, where it slept), and `latency_ns`
/// how much later the handler ran; a signal that did not say when it was sent gives the
/// handler's time.
pub fn json_line(r: &Raw, frames: &[(String, Option<u32>, bool)]) -> String {
    let (t, latency) = if r.asked > 0 && r.asked <= r.t {
        (r.asked, format!(",\"latency_ns\":{}", r.t - r.asked))
    } else {
        (r.t, String::new())
    };
    let mut s = format!(
        "{{\"t\":{t},\"tid\":{},\"name\":\"\",\"event\":\"signal-sample\"{latency},\"frames\":[",
        r.tid
    );
    for (i, (m, line, native)) in frames.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"method\":\"");
        escape(m, &mut s);
        s.push('"');
        if let Some(l) = line {
            s.push_str(&format!(",\"line\":{l}"));
        }
        if *native {
            s.push_str(",\"kind\":\"Native\"");
        }
        s.push('}');
    }
    s.push_str(&format!("],\"truncated\":{}", r.n as usize >= ring::DEPTH && r.n > 0));
    if r.n < 0 {
        s.push_str(&format!(",\"agct\":{}", r.n));
    }
    s.push_str("}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jvmti::CallFrame;

    #[test]
    fn class_names() {
        assert_eq!(class_name("Lio/x/Ledger;"), "io.x.Ledger");
        assert_eq!(
            class_name("Lio/x/Main$$Lambda+0x0000000800c03000;"),
            "io.x.Main$$Lambda+0x0000000800c03000"
        );
        assert_eq!(class_name("odd"), "odd");
    }

    #[test]
    fn lines_from_bytecode_index() {
        let t = [
            LineEntry { start_location: 0, line_number: 10 },
            LineEntry { start_location: 7, line_number: 12 },
            LineEntry { start_location: 3, line_number: 11 },
        ];
        assert_eq!(line_of(&t, 0), Some(10));
        assert_eq!(line_of(&t, 5), Some(11));
        assert_eq!(line_of(&t, 7), Some(12));
        assert_eq!(line_of(&t, 99), Some(12));
        assert_eq!(line_of(&t, -3), None);
        assert_eq!(line_of(&[], 4), None);
    }

    /// The agent writes its lines by hand (no serde in a library loaded into the JVM): the
    /// recording's reader must read them as the same [`recording::FrameSample`].
    #[test]
    fn the_recording_reads_what_the_agent_writes() {
        assert_eq!(STACKS, recording::files::STACKS);
        assert_eq!(READY, recording::files::STACKS_READY);
        let raw = Raw {
            t: 900,
            asked: 400,
            tid: 7,
            n: ring::DEPTH as i32,
            frames: [CallFrame { lineno: 0, method: std::ptr::null_mut() }; ring::DEPTH],
        };
        let line = json_line(
            &raw,
            &[("io.x.\"Q\".run\n".into(), Some(4), false), ("x.Y.z".into(), None, true)],
        );
        let s: recording::FrameSample = serde_json::from_str(&line).unwrap();
        assert_eq!((s.t, s.tid, s.latency_ns, s.truncated), (400, 7, Some(500), true));
        assert_eq!(s.event, "signal-sample");
        assert_eq!(s.name, "");
        assert_eq!(s.frames.len(), 2);
        assert_eq!(s.frames[0].method, "io.x.\"Q\".run\n");
        assert_eq!(s.frames[0].line, Some(4));
        assert_eq!(s.frames[1].kind, "Native");
        // What the reader reads the file with: a line of stacks.jsonl.
        let back: Vec<recording::FrameSample> = {
            let d = std::env::temp_dir().join(format!("stacks-contract-{}", std::process::id()));
            std::fs::write(&d, line.repeat(2)).unwrap();
            let v = recording::read_lines(&d).unwrap();
            std::fs::remove_file(&d).unwrap();
            v
        };
        assert_eq!(back, vec![s.clone(), s]);
    }

    #[test]
    fn lines_are_json() {
        let raw = Raw {
            t: 5,
            asked: 0,
            tid: 7,
            n: 2,
            frames: [CallFrame { lineno: 0, method: std::ptr::null_mut() }; ring::DEPTH],
        };
        let l = json_line(
            &raw,
            &[("a.\"B\\\".c\n".into(), Some(4), false), ("x.Y.z".into(), None, true)],
        );
        assert_eq!(
            l,
            "{\"t\":5,\"tid\":7,\"name\":\"\",\"event\":\"signal-sample\",\"frames\":[{\"method\":\"a.\\\"B\\\\\\\".c\\u000a\",\"line\":4},{\"method\":\"x.Y.z\",\"kind\":\"Native\"}],\"truncated\":false}\n"
        );
        let none = Raw { n: -10, ..raw };
        assert!(
            json_line(&none, &[]).ends_with("\"frames\":[],\"truncated\":false,\"agct\":-10}\n")
        );
        let asked = Raw { t: 900, asked: 400, ..raw };
        assert!(json_line(&asked, &[]).starts_with("{\"t\":400,\"tid\":7,\"name\":\"\",\"event\":\"signal-sample\",\"latency_ns\":500,\"frames\":[]"));
        let odd = Raw { t: 300, asked: 400, ..raw };
        assert!(
            json_line(&odd, &[]).starts_with("{\"t\":300,"),
            "a send time after the handler's is not trusted"
        );
    }
}
