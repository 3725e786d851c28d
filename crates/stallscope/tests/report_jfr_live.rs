//! `stallscope report app.jfr` on fresh flight recordings of this machine's JDKs, made with
//! their own `default` settings and nothing of stallscope in the JVM (the stored ones are graded
//! in report_jfr.rs, in the fast tier).

mod common;
use common::*;
use doctor::{Cause, InstigatorKind};

/// A fresh recording of this machine's JDK 17 and 25 (their `default` settings), with nothing
/// of stallscope in the JVM: a System.gc() on a live heap is named, with its caller.
#[test]
fn a_fresh_recording_of_jdk17_and_25_is_explained() {
    let _x = exclusive();
    let d = scratch("report-jfr-fresh");
    for (jdk, java) in [("17", java17()), ("25", java25())] {
        let file = d.join(format!("jdk{jdk}.jfr"));
        let flag = format!("-XX:StartFlightRecording=filename={},settings=default", file.display());
        let o = workload(
            std::process::Command::new(&java),
            &["-XX:+UseParallelGC", "-Xmx1g", &flag],
            &["heap-gc", "--live", "256", "--gcs", "2", "--every", "200ms"],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let o = stallscope().args(["report", "--json"]).arg(&file).output().unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r: doctor::Report = serde_json::from_slice(&o.stdout).unwrap();
        let s = stalls_with(&r, Cause::LongVmOperation);
        assert!(!s.is_empty(), "JDK {jdk}: {:?}", r.stalls);
        let who = s[0].findings[0].instigator.as_ref().unwrap();
        assert_eq!(
            (who.kind, who.name.as_str()),
            (InstigatorKind::JavaThread, "main"),
            "JDK {jdk}"
        );
        assert!(r.meta.java_version.as_deref().unwrap_or("").starts_with(jdk), "{:?}", r.meta);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A JNI critical region held for hundreds of ms (the `gc-locker` workload) under JDK 17's and
/// 21's JFR with stallscope's stalls.jfc: the collection held back is laid at the thread that left
/// the region, from jdk.GCLocker, with how long collections were kept out.
#[test]
fn a_collection_the_gc_locker_held_back_names_the_thread_in_the_region() {
    let _x = exclusive();
    let d = scratch("report-jfr-gc-locker");
    let settings = root().join("docs/formats/stalls.jfc");
    for (jdk, java) in [("17", java17()), ("21", java21())] {
        let file = d.join(format!("jdk{jdk}.jfr"));
        let flag = format!(
            "-XX:StartFlightRecording=filename={},settings={}",
            file.display(),
            settings.display()
        );
        let o = workload(
            std::process::Command::new(&java),
            &["-XX:+UseParallelGC", "-Xmn16m", "-Xmx256m", &flag],
            &["gc-locker", "--for", "3s"],
        )
        .output()
        .unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let o = stallscope().args(["report", "--json"]).arg(&file).output().unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r: doctor::Report = serde_json::from_slice(&o.stdout).unwrap();
        let held: Vec<&doctor::Instigator> = r
            .stalls
            .iter()
            .flat_map(|s| &s.findings)
            .filter_map(|f| f.instigator.as_ref())
            .filter(|i| i.did.contains("(jdk.GCLocker)"))
            .collect();
        assert!(!held.is_empty(), "JDK {jdk}: {:?}", r.stalls);
        for i in held {
            assert_eq!(i.name, "deflater", "JDK {jdk}: {}", i.did);
            assert!(
                i.did.contains("the native method java.util.zip.Deflater.deflateBytesBytes")
                    && i.did.contains("collections were held back for")
                    // The workload's allocator, and at times another of the JVM's threads
                    // (JDK 21 counted 2 in one run in several): JFR's own count.
                    && (i.did.contains("1 thread waited to allocate")
                        || i.did.contains(" threads waited to allocate"))
                    && i.fix.starts_with("the GC locker: "),
                "JDK {jdk}: {} / {}",
                i.did,
                i.fix
            );
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}
