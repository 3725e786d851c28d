//! The commands that turn a result into output: each takes its parsed arguments, runs the
//! pieces (the recorder, the lab, the log analysis, the doctor), and renders what they return
//! with `output`. The pieces never print results themselves.

pub mod counters;
pub mod jvms;
pub mod lab;
pub mod logs;
pub mod record;
pub mod report;
pub mod watch;
