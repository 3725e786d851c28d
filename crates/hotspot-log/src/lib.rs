//! Parse HotSpot safepoint and pause logs — every format from JDK 8 to JDK 25 — in one
//! streaming pass, and summarise them.
//!
//! ```no_run
//! use hotspot_log::{Scanner, Summary, SummaryOptions};
//! let mut summary = Summary::new(SummaryOptions::default());
//! let mut scanner = Scanner::new();
//! let file = std::fs::File::open("gc.log").unwrap();
//! scanner.scan(0, file, &mut |s: &hotspot_log::Safepoint| summary.add(s)).unwrap();
//! let report = scanner.finish(&mut |s: &hotspot_log::Safepoint| summary.add(s));
//! let result = summary.finish();
//! println!("{} safepoints, {} ns stopped, {} lines not recognised",
//!          result.safepoints, result.total_stopped_ns, report.lines_unrecognised);
//! ```
//!
//! The crate reads bytes and yields plain records ([`Safepoint`]); which files to open, how to
//! decompress them and how to print results are the caller's business. It never panics on
//! input, and its memory stays bounded whatever the input size.
//!
//! Layers, each usable alone: [`decorators`] (unified-logging prefixes), [`line`](mod@line) (one line to
//! one event), [`assemble`] (events to records), [`scan`] (streams to records), [`summary`]
//! (records to statistics). The shapes themselves are named once, in [`formats`].
//!
//! Depends on no crate of the workspace.

pub mod assemble;
mod bytes;
pub mod decorators;
mod fastpath;
pub mod formats;
pub mod jfr;
pub mod line;
pub mod prefilter;
pub mod record;
pub mod render;
pub mod scan;
pub mod stamps;
pub mod summary;
pub mod threaddump;

pub use formats::Format;
pub use record::{Culprit, Safepoint, Source};
pub use scan::{InputReport, LineExample, ScanError, ScanReport, Scanner, Sink};
pub use stamps::{Stamps, WallTime, format_wall, parse_iso_time};
pub use summary::{Clock, LogSummary, Summary, SummaryOptions};
