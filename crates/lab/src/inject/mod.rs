//! The fault injectors: make each pathology happen on demand, and always undo it. The lab's
//! scenarios use them, and `stallscope inject …` runs each alone.
//!
//! Invariant: every injector restores what it changed (mounts, cgroups, stopped processes,
//! swap) on success, on error, on Ctrl-C and on SIGTERM (its caller's stop flag), and through
//! a guardian if stallscope is killed outright.

pub mod cpuhog;
pub mod freeze;
pub mod slowfs;
pub mod swap;
pub mod temp_cgroup;
