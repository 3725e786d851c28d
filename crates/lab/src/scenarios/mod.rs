//! The scenarios, one file each (see `../shared/LAB.md` for the table they implement), and what
//! they share.

pub mod common;
pub mod counted_loop;
pub mod cpu_contention;
pub mod cpu_quota;
pub mod frozen;
pub mod long_gc;
pub mod mapped_write;
pub mod memory_pressure;
pub mod mmap_fault;
pub mod mmap_lock;
pub mod perf_writeback;
pub mod slow_log;
pub mod swap;
pub mod tlb_shootdown;
