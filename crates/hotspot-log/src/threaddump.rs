//! HotSpot thread dumps (`jcmd PID Thread.print`, `jstack`, SIGQUIT) parsed into each Java
//! thread's stack: its name, its os thread id (`nid`, hex before JDK 19, decimal after) and its
//! frames, top first. Lock lines (`- locked <…>`) and everything that is not a thread block
//! (the header, JNI counts, SMR info, VM threads without Java frames) are passed over.

use crate::jfr::JavaFrame;

/// One Java thread of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpedThread {
    pub name: String,
    /// The thread's id as its JVM's pid namespace numbers it.
    pub nid: i32,
    /// Top first; empty for a thread with no Java frames.
    pub frames: Vec<JavaFrame>,
}

/// `nid=0x1c3f` (JDK 8 to 18) or `nid=7231` (JDK 19 and later).
fn nid(header: &str) -> Option<i32> {
    let v = header.split_whitespace().find_map(|w| w.strip_prefix("nid="))?;
    match v.strip_prefix("0x") {
        Some(h) => i32::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// `java.nio.Bits.copy(java.base@17.0.15/Bits.java:288)` → the method and its line.
fn frame(at: &str) -> Option<JavaFrame> {
    let (method, rest) = at.split_once('(')?;
    let inside = rest.strip_suffix(')').unwrap_or(rest);
    let line = inside.rsplit_once(':').and_then(|(_, l)| l.parse().ok());
    let kind = if inside.ends_with("Native Method") { "Native" } else { "" };
    Some(JavaFrame { method: method.trim().to_string(), line, kind: kind.to_string() })
}

/// Every thread block of `text` that names its `nid`.
pub fn parse(text: &str) -> Vec<DumpedThread> {
    let mut out: Vec<DumpedThread> = Vec::new();
    let mut cur: Option<DumpedThread> = None;
    for l in text.lines() {
        if let Some(quoted) = l.strip_prefix('"') {
            if let Some(t) = cur.take() {
                out.push(t);
            }
            // The name is quoted and may hold quotes itself: it ends at the last `" ` before
            // the attributes (`#N`, `daemon`, `prio=`).
            let name_end = quoted.find("\" #").or_else(|| quoted.rfind("\" "));
            cur = match (name_end, nid(l)) {
                (Some(e), Some(n)) => {
                    Some(DumpedThread { name: quoted[..e].to_string(), nid: n, frames: Vec::new() })
                }
                _ => None,
            };
        } else if let Some(at) = l.trim_start().strip_prefix("at ") {
            if let (Some(t), Some(f)) = (cur.as_mut(), frame(at)) {
                t.frames.push(f);
            }
        } else if l.trim().is_empty()
            && let Some(t) = cur.take()
        {
            out.push(t);
        }
    }
    out.extend(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const JDK17: &str = "2026-11-24 03:55:01
Full thread dump OpenJDK 64-Bit Server VM (17.0.15+6-Debian-1deb12u1 mixed mode, sharing):

Threads class SMR info:
_java_thread_list=0x00007f3c, length=11, elements={
0x00007f3c
}

\"main\" #1 prio=5 os_prio=0 cpu=120.50ms elapsed=5.21s tid=0x00007f3c2c014000 nid=0x1c3f waiting on condition  [0x00007f3c33ffe000]
   java.lang.Thread.State: TIMED_WAITING (sleeping)
\tat java.lang.Thread.sleep(java.base@17.0.15/Native Method)
\tat io.stallscope.workloads.Idle.run(Idle.java:41)
\t- locked <0x000000008a1b2c30> (a java.lang.Object)
\tat io.stallscope.workloads.Main.main(Main.java:30)

\"reader \\\"one\\\"\" #14 daemon prio=5 os_prio=0 cpu=0.12ms elapsed=5.00s tid=0x00007f3c2c1f2800 nid=0x1c52 runnable  [0x00007f3c0a9fe000]
   java.lang.Thread.State: RUNNABLE
\tat jdk.internal.misc.ScopedMemoryAccess.copyMemory(java.base@17.0.15/ScopedMemoryAccess.java:127)
\tat java.nio.DirectByteBuffer.get(java.base@17.0.15/DirectByteBuffer.java:288)
\tat io.stallscope.workloads.MappedRead.read(MappedRead.java:88)

\"VM Thread\" os_prio=0 cpu=2.01ms elapsed=5.22s tid=0x00007f3c2c0c1000 nid=0x1c44 runnable  

JNI global refs: 15, weak refs: 0
";

    #[test]
    fn a_jdk_17_dump_gives_each_java_threads_stack_and_nid() {
        let ts = parse(JDK17);
        assert_eq!(ts.len(), 3, "{ts:#?}");
        assert_eq!(ts[0].name, "main");
        assert_eq!(ts[0].nid, 0x1c3f);
        assert_eq!(ts[0].frames.len(), 3, "the lock line is no frame");
        assert_eq!(
            ts[0].frames[0],
            JavaFrame {
                method: "java.lang.Thread.sleep".into(),
                line: None,
                kind: "Native".into()
            }
        );
        assert_eq!(
            ts[0].frames[1],
            JavaFrame {
                method: "io.stallscope.workloads.Idle.run".into(),
                line: Some(41),
                kind: String::new()
            }
        );
        assert_eq!(ts[1].name, "reader \\\"one\\\"");
        assert_eq!(ts[1].frames[2].method, "io.stallscope.workloads.MappedRead.read");
        assert_eq!(ts[2].name, "VM Thread");
        assert!(ts[2].frames.is_empty());
    }

    #[test]
    fn a_jdk_25_dump_names_threads_by_decimal_nid() {
        let text = "\"set-memory\" #23 [7231] prio=5 os_prio=0 cpu=812.44ms elapsed=3.10s tid=0x00007f0e94123450 nid=7231 runnable  [0x00007f0e70afe000]\n   java.lang.Thread.State: RUNNABLE\n\tat io.stallscope.workloads.SetMemory.fill(SetMemory.java:52)\n\tat java.lang.Thread.runWith(java.base@25.0.3/Thread.java:1487)\n";
        let ts = parse(text);
        assert_eq!(ts.len(), 1);
        assert_eq!((ts[0].name.as_str(), ts[0].nid), ("set-memory", 7231));
        assert_eq!(ts[0].frames[0].line, Some(52));
    }

    #[test]
    fn any_text_parses_without_panicking() {
        for s in [
            "",
            "\"",
            "\"x\" nid=",
            "\"x\" #1 nid=0xZZ\n\tat (",
            "\tat a.b(c:99999999999)\n",
            "\"\" nid=1\n\tat ((:)\n",
        ] {
            let _ = parse(s);
        }
    }
}
