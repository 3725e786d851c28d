//! A recording read for the doctor: `doctor::Recording::read`, and, when the recording's
//! safepoint log gave no record (it is missing, empty, or the JVM could not log), the safepoints
//! of a flight recording in it: the recorder's own `frames.jfr` (its settings turn the four
//! safepoint events on) or a `.jfr` the user put there.
//!
//! Invariant: JFR safepoints only ever fill in for a log without records, never mix with a
//! log's; the report says which file they came from. JFR stamps them on the wall clock, placed on
//! the recording's monotonic clock through its meta (to the millisecond, as the stacks are).

use anyhow::Result;
use doctor::Recording;
use doctor::recording::files;
use std::path::{Path, PathBuf};

/// Reads the recording in `dir`, its safepoints from a flight recording when its log has none.
pub fn read(dir: &Path) -> Result<Recording> {
    let mut rec = Recording::read(dir)?;
    // A flight recording names each safepoint's operation; the counters (the doctor's own
    // fallback) do not: JFR's, when there are any, take their place.
    if rec.safepoints.iter().all(|s| s.format == hotspot_log::Format::PerfCounters) {
        fill_from_jfr(&mut rec);
    }
    Ok(rec)
}

/// The flight recordings directly in the recording, `frames.jfr` first, then by name.
fn jfr_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) && crate::jfr::is_jfr(p)
        })
        .collect();
    v.sort_by_key(|p| (p.file_name() != Some(std::ffi::OsStr::new(files::FRAMES_JFR)), p.clone()));
    v
}

fn fill_from_jfr(rec: &mut Recording) {
    for path in jfr_files(&rec.dir) {
        let mut got = Vec::new();
        let mut lost = Vec::new();
        let read = crate::jfr::read(&path, &crate::jfr::Want::Safepoints, &mut |line| {
            match line {
                crate::jfr::Line::Chunk(c) => {
                    for s in c.safepoints {
                        let end = rec.meta.mono_of_epoch_ns(s.end_epoch_ns);
                        let mut sp = s.into_safepoint(0);
                        sp.end.mono_ns = end;
                        if end.is_some() {
                            got.push(sp);
                        }
                    }
                }
                crate::jfr::Line::Lost { offset, reason } => {
                    lost.push(format!("byte {offset}: {reason}"))
                }
                crate::jfr::Line::Samples(_) => {}
            }
            Ok(())
        });
        let name = path.display();
        match read {
            Ok(died) => lost.extend(died.map(|why| format!("the rest could not be read ({why})"))),
            Err(e) => lost.push(format!("{e:#}")),
        }
        for l in &lost {
            rec.damage.push(format!("{name}: {l}"));
        }
        if !got.is_empty() {
            // Not damage, but said where the damage is: among the report's notes.
            rec.damage.push(format!(
                "{} safepoints read from {name}: the safepoint log {}",
                got.len(),
                if rec.has_safepoint_log { "has no records" } else { "is missing" }
            ));
            got.sort_by_key(|s| s.end.mono_ns);
            rec.damage.retain(|d| !d.contains("safepoints from the JVM's perf counters"));
            rec.safepoints = got;
            rec.has_safepoint_log = true;
            return;
        }
    }
}
