//! The scenarios, one file each (see `../shared/LAB.md` for the table they implement), and what
//! they share.

pub mod common;
pub mod counted_loop;
pub mod cpu_contention;
pub mod frozen;
pub mod mmap_fault;
pub mod mmap_lock;
pub mod tlb_shootdown;
