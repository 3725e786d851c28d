//! The native pathology workloads the lab runs (`stallscope workload …`, hidden). The JVM ones
//! are in `java/workloads`.

pub mod futex_mmap;
