//! Linux observation for stallscope, from `/proc` and friends: which pages of a file are in the
//! page cache, and (as the project grows) per-thread samples, memory maps, interrupts, the
//! stallscope agent's heartbeat, and tracepoints.
//!
//! Each module reads one kind of kernel state into plain data and keeps no policy: what to
//! sample, when, and what it means belong to the caller.

pub mod pagecache;
