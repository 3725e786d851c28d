//! The doctor on a real library: Apache Lucene 9.12 searching an index through MMapDirectory
//! on a slow disk, as a search service does. A query thread's read of the mapped index is a
//! major fault the JVM waits for at its next safepoint; the fix must be given where the user has
//! a choice: their own frame, and what Lucene offers (another Directory, preloading, storage),
//! not a change to Lucene's code.

mod common;

use common::*;
use doctor::{Cause, StallReport};
use std::process::Command;

#[test]
fn a_lucene_search_on_a_slow_disk_is_a_major_fault_fixed_by_lucenes_choices_on_both_jdks() {
    let _x = exclusive();
    let d = scratch("lucene");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(back.join("index")).unwrap();
    // Written on the fast disk underneath, searched through the slow one.
    let o = Command::new(java17())
        .arg("-jar")
        .arg(lucene_jar())
        .args(["index", back.join("index").to_str().unwrap(), "--docs", "200000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "300ms"]);
    let index = mnt.join("index");
    for (jdk, java) in [("17", java17()), ("25", java25())] {
        for f in std::fs::read_dir(&index).unwrap() {
            evict(&f.unwrap().path());
        }
        let dir = d.join(format!("rec-{jdk}"));
        let o = stallscope()
            .args(["run", "--out", dir.to_str().unwrap(), "--"])
            .arg(&java)
            .arg("-jar")
            .arg(lucene_jar())
            .args(["search", index.to_str().unwrap(), "--threads", "2", "--queries", "6"])
            .output()
            .unwrap();
        assert!(o.status.success(), "JDK {jdk}: {}", String::from_utf8_lossy(&o.stderr));
        let r = report(&dir);
        let hits: Vec<&StallReport> = stalls_with(&r, Cause::MajorFault);
        assert!(!hits.is_empty(), "JDK {jdk}: {:?}", causes(&r));
        // The stalls whose culprit's code was taken: the fix names the user's frame and Lucene.
        let named: Vec<&StallReport> = hits
            .iter()
            .copied()
            .filter(|s| s.findings[0].culprits.first().is_some_and(|c| c.code.is_some()))
            .collect();
        assert!(!named.is_empty(), "JDK {jdk}: no culprit's code in {hits:?}");
        for s in &named {
            let f = &s.findings[0];
            let c = &f.culprits[0];
            // The query threads read the index, and so does the main thread, opening it.
            let name = c.name.as_str();
            assert!(name.starts_with("search-") || name == "main", "JDK {jdk}: {c:?}");
            assert_eq!(
                c.code.as_ref().and_then(|code| code.library.as_deref()),
                Some("Lucene"),
                "JDK {jdk}: {c:?}"
            );
            let fix = &f.fix;
            assert!(fix.starts_with("the read in Lucene's "), "JDK {jdk}: {fix}");
            assert!(fix.contains("called from LuceneSearch."), "JDK {jdk}: {fix}");
            assert!(fix.contains("NIOFSDirectory"), "JDK {jdk}: {fix}");
        }
        assert!(
            named.iter().any(|s| s.findings[0]
                .culprits
                .first()
                .is_some_and(|c| c.name.starts_with("search-"))),
            "JDK {jdk}: no query thread named"
        );
    }
    drop(_fs);
    let _ = std::fs::remove_dir_all(&d);
}
