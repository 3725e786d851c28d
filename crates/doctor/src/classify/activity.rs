//! What a thread did with its time in a stall, in the terms causes are read from: on a CPU (in
//! user or kernel mode), on a run queue, stopped, or waiting in the kernel, by what for.
//!
//! Invariant: a thread's breakdown leaves out none of its accounted time, and says nothing yet
//! about causes.

use crate::evidence::Account;
use crate::wait::Wait;

/// What a thread did with a stretch of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Activity {
    /// On a CPU in user mode.
    User,
    /// On a CPU in kernel mode.
    Kernel,
    /// On a CPU, user or kernel not known (too short a window for the tick counters).
    Cpu,
    /// Runnable, waiting for a CPU.
    RunQueue,
    /// Seen runnable; whether it ran or waited, its counters do not say.
    Runnable,
    Stopped,
    Waiting(Wait),
}

/// A thread's account as (activity, ns), largest first, leaving out nothing.
pub fn breakdown(a: &Account) -> Vec<(Activity, u64)> {
    let mut v = vec![
        (Activity::User, a.user_ns),
        (Activity::Kernel, a.kernel_ns),
        (Activity::Cpu, a.cpu_ns),
        (Activity::RunQueue, a.run_queue_ns),
        (Activity::Runnable, a.runnable_ns),
        (Activity::Stopped, a.stopped_ns),
    ];
    v.extend(a.waits.iter().map(|(w, ns)| (Activity::Waiting(*w), *ns)));
    v.retain(|x| x.1 > 0);
    v.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    v
}

/// Activities that keep a thread from reaching a safepoint: running (without a poll, or
/// waiting for a CPU to reach it), stopped, or blocked outside a system call.
pub(super) fn unsafe_activity(a: Activity) -> bool {
    !matches!(a, Activity::Waiting(Wait::Parked | Wait::FileWrite | Wait::FileRead | Wait::Other))
}
