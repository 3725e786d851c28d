//! The JVM's own threads and stallscope's in it, by name: which run or look busy through a
//! safepoint without holding it up. Names as the kernel gives them (`comm`, at most 15 bytes).
//! Read by the doctor (never culprits on what the samples saw) and by the recorder (never asked
//! for their stacks).

/// stallscope's own threads in the target (the agent's meter, log and thread-table threads):
/// never culprits on what the samples saw, only when the JVM's SafepointTimeout named them.
pub fn stallscope_own(name: &str) -> bool {
    name.starts_with("stallscope-")
}

/// JVM-internal threads that run (or look busy) during safepoints without holding them up.
pub fn jvm_internal(comm: &str) -> bool {
    [
        "VM Thread",
        "GC Thread",
        "G1 ",
        "VM Periodic",
        "C1 CompilerThre",
        "C2 CompilerThre",
        "Signal Dispatch",
        "Service Thread",
        "Monitor Deflati",
        "Common-Cleaner",
        "Notification Th",
        "Sweeper",
        "ZWorker",
        "ZDriver",
        "Shenandoah",
        "stallscope-",
    ]
    .iter()
    .any(|p| comm.starts_with(p))
}

/// The JVM threads that run a safepoint's operation: the VM Thread and the GC workers.
pub fn vm_operation_thread(comm: &str) -> bool {
    comm == "VM Thread"
        || ["GC Thread", "G1 ", "ZWorker", "Shenandoah"].iter().any(|p| comm.starts_with(p))
}
