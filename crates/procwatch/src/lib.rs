//! Linux observation for stallscope, from `/proc` and friends: the JVMs on the host (in
//! containers too), per-thread samples, memory maps,
//! machine-wide signals (TLB shootdowns, steal, pressure, swap and reclaim), a process's cgroups
//! (throttling, memory limits, pressure), page-cache residency, the stallscope agent's heartbeat
//! (in containers too, through their namespaces), (with privilege) tracepoint evidence, and the
//! monotonic clock they are all stamped with.
//!
//! Each module reads one kind of kernel state into plain data and keeps no policy: what to
//! sample, when, and what it means belong to the caller.
//!
//! Depends on no crate of the workspace.

pub mod attachers;
pub mod cgroup;
pub mod clock;
pub mod codecache;
pub mod cpuuse;
pub mod heartbeat;
pub mod jvm_threads;
pub mod jvmcounters;
pub mod jvms;
pub mod limits;
pub mod maps;
pub mod ns;
pub mod pagecache;
pub mod perf;
pub mod perfdata;
pub mod pods;
pub mod process;
pub mod procfile;
pub mod redact;
pub mod syscalls;
pub mod system;
pub mod task;
pub mod trace;
pub mod vmops;
pub mod vmstructs;
