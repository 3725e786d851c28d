//! The JVM's perf counters on a slow disk under writeback: every thread that updates a counter
//! (the VM, GC, compiler and periodic threads, Java threads' monitor counters) takes a write
//! fault on the shared mapping when its page has just been written back, and waits for the
//! write when the writeback is still under way. No seed covers it; issue 28's held-out case
//! (docs/causes/mapped-writeback.md). Baseline: the JVM's `/tmp/hsperfdata_root` bound to a
//! slowfs folder with a write delay (in a mount namespace of its own), the file's writeback
//! started every 150 ms as the flusher does; mitigation: the same with
//! `-XX:+PerfDisableSharedMem`.

use super::common::{Helper, args, mount_slow_writes, ms, quiet_launch, run_jvm};
use crate::model::Published;
use crate::scenario::{Ctx, Measured, Scenario, Spec, VariantSpec};
use crate::verdict::Expect;
use anyhow::{Context, Result};
use doctor::Cause;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub struct PerfWriteback;

#[derive(Debug, Clone, Copy)]
pub enum Variant {
    SlowDisk,
    DisableSharedMem,
}

/// The slow disk, mounted for all the runs.
pub struct Setup {
    _slowfs: Helper,
    mount: PathBuf,
}

/// Starts writeback of every perf-data file in `dir` every `every`, as the kernel's flusher
/// does with a dirty file (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: it starts the writes and
/// does not wait for them), until dropped.
struct Flusher {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Flusher {
    fn start(dir: PathBuf, every: Duration) -> Flusher {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                for f in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                    let digits = f
                        .file_name()
                        .to_str()
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                    if let (true, Ok(file)) = (digits, std::fs::File::open(f.path())) {
                        use std::os::fd::AsRawFd;
                        // SAFETY: a valid descriptor; the call only starts writeback.
                        unsafe {
                            libc::sync_file_range(
                                file.as_raw_fd(),
                                0,
                                0,
                                libc::SYNC_FILE_RANGE_WRITE,
                            )
                        };
                    }
                }
                std::thread::sleep(every);
            }
        });
        Flusher { stop, thread: Some(thread) }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Scenario for PerfWriteback {
    type Variant = Variant;
    type Setup = Setup;
    const SPEC: Spec = Spec {
        id: "perf-writeback",
        seed: "none (issue 28's held-out case)",
        title: "the JVM's perf counters (hsperfdata) on a slow disk under writeback",
        cause: Cause::MappedWriteback,
        published: || {
            Published::new(
                "none; held out on this machine: pauses of 1.2-1.6 s, the VM Thread in D in folio_wait_bit_common for 599 of 805 samples",
                "2 vCPUs, Linux 6.18, JDK 17",
                None,
                None,
            )
        },
        metric: "longest System.gc()",
        unit: "ms",
        needs_fuse: true,
        needs_root: true,
        why_not: "binding a slow folder over one JVM's /tmp/hsperfdata_root takes a mount namespace",
        run_secs: (8, 15),
        side_metrics: &[],
        who: None,
    };
    const VARIANTS: &'static [(Variant, VariantSpec)] = &[
        (
            Variant::SlowDisk,
            VariantSpec {
                id: "slow-disk",
                label: "hsperfdata on a slow disk, its writeback started every 150 ms",
                // The caller of System.gc() always waits; the world stops for long only when
                // a GC thread or the meter is caught in the fault (in a third to all of the runs
                // measured), not when the VM thread is held before it stops anyone.
                expect: Expect::IfStall(Cause::MappedWriteback),
                culprit: None,
            },
        ),
        (
            Variant::DisableSharedMem,
            VariantSpec {
                id: "perf-disable-shared-mem",
                label: "the same with -XX:+PerfDisableSharedMem",
                expect: Expect::NoStall,
                culprit: None,
            },
        ),
    ];

    fn setup(_: &Ctx, dir: &Path, notes: &mut Vec<String>) -> Result<Setup> {
        let (back, mnt) = (dir.join("slowfs-backing"), dir.join("slowfs-mount"));
        let delay_ms = 300;
        let slowfs = mount_slow_writes(&back, &mnt, delay_ms, "[0-9]*")?;
        // HotSpot refuses a perf-data folder others may write to.
        std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .with_context(|| format!("chmod 755 {}", mnt.display()))?;
        notes.push(format!(
            "slow disk: slowfs with a {delay_ms} ms delay on every write of the perf-data file, bound over the JVM's /tmp/hsperfdata_root in its own mount namespace; writeback started every 150 ms (sync_file_range)"
        ));
        Ok(Setup { _slowfs: slowfs, mount: mnt })
    }

    fn run(s: &mut Setup, v: Variant, ctx: &Ctx, rec: &Path) -> Result<Measured> {
        std::fs::create_dir_all(rec)?;
        let mut jvm = vec!["-XX:+UseParallelGC"];
        if matches!(v, Variant::DisableSharedMem) {
            jvm.push("-XX:+PerfDisableSharedMem");
        }
        let workload = args(&[
            "heap-gc",
            "--live",
            "32",
            "--gcs",
            ctx.profile.pick("20", "40"),
            "--every",
            "300ms",
        ]);
        let mut launch = quiet_launch();
        launch.perf_data_dir = Some(s.mount.clone());
        let _flusher = Flusher::start(s.mount.clone(), Duration::from_millis(150));
        let (j, r) = run_jvm(ctx, rec, &jvm, &workload, launch)?;
        let metrics =
            BTreeMap::from([("metric".to_string(), ms(&j["gcs"]["max_ns"]).context("gcs")?)]);
        Ok(Measured { metrics, report: Some(r), min_stall_ns: 100_000_000 })
    }
}
