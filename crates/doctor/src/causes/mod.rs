//! The stall causes stallscope tells apart (see `docs/causes/`). Each is one module here, whose
//! [`Spec`] says its name, title and fix, its documentation page, its colour in the HTML report,
//! and where its instigator is looked for; the registry below is the one list of them. A cause
//! added to the registry without its module does not compile; a spec with no id, title or fix
//! (they default to empty) or an id that is not the cause's name, or a cause without its page in
//! `docs/causes/`, fails a test.

mod instigator_kind;

pub use gc_locker::held_back_ns as gc_locker_held_back_ns;
pub use instigator_kind::InstigatorKind;

use crate::signals::MemorySignals;
use serde::{Deserialize, Serialize};

/// The registry: one line per cause, `Variant => module`. It declares the modules, the enum,
/// [`Cause::ALL`] (in this order: the order findings are listed in when tied) and the lookup of
/// each cause's [`Spec`].
macro_rules! registry {
    ($($variant:ident => $module:ident,)*) => {
        $(mod $module;)*

        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Cause {
            $($variant,)*
        }

        impl Cause {
            pub const ALL: [Cause; [$(Cause::$variant,)*].len()] = [$(Cause::$variant,)*];

            /// What the cause's module says of it.
            pub fn spec(self) -> &'static Spec {
                match self {
                    $(Cause::$variant => &$module::SPEC,)*
                }
            }
        }
    };
}

registry! {
    NoSafepointPoll => no_safepoint_poll,
    MajorFault => major_fault,
    SwapIn => swap_in,
    MmapLock => mmap_lock,
    CpuStarvation => cpu_starvation,
    CgroupThrottling => cgroup_throttling,
    Frozen => frozen,
    MachinePause => machine_pause,
    LongVmOperation => long_vm_operation,
    VmThreadIo => vm_thread_io,
    MappedWriteback => mapped_writeback,
    MemoryReclaim => memory_reclaim,
    DirectCompaction => direct_compaction,
    MemcgHigh => memcg_high,
    TlbShootdown => tlb_shootdown,
    BlockedIo => blocked_io,
    GcLocker => gc_locker,
    Unknown => unknown,
}

/// Where a finding's instigator (who set the stall off) is looked for, by its cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Who asked for the safepoint's operation (a Java thread, a tool, the JVM itself).
    Requester,
    /// Who stopped or froze the process; nobody else answers for a stop.
    Stopper,
    /// The processes that took the CPUs, else the operation's requester.
    CpuNeighbours,
    /// The thread that mapped, unmapped or protected memory, else the requester.
    MemoryMapper,
    /// Who wrote, read or flushed the storage waited for, else the requester.
    Writer(Writer),
    /// Nobody can be named (the whole machine stopped).
    Nobody,
}

/// How a cause's writer is looked for and told (`Search::Writer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Writer {
    /// What the writer's I/O did to the stall, in words (`filling the page cache the kernel
    /// then had to reclaim memory from`).
    pub why: &'static str,
    /// A thread that flushed (msync, fsync) started the writeback waited for: named first.
    pub flusher_first: bool,
    /// A thread of the JVM that wrote is told to keep its data out of the JVM's memory cgroup
    /// (its page cache was charged there).
    pub cgroup_fix: bool,
}

/// One cause, as its module describes it.
#[derive(Debug)]
pub struct Spec {
    /// Its id (`swap-in`), the name of its page in `docs/causes/`.
    pub id: &'static str,
    pub title: &'static str,
    /// What fixes it in a JVM.
    pub fix: &'static str,
    /// What fixes it in a process that is not a JVM, where that differs from `fix`.
    pub fix_for_process: Option<&'static str>,
    /// The HTML report's stylesheet colour for it (a CSS variable's name, without `--`).
    pub colour: &'static str,
    /// Where its instigator is looked for.
    pub instigator: Search,
    /// The kinds of instigator whose fix is the finding's (a long operation somebody asked for,
    /// the CPUs taken by others); any other instigator's fix is shown beside the cause's.
    pub answered_by: &'static [InstigatorKind],
    /// Any instigator's fix is the finding's (whoever stopped the process).
    pub answered_by_any: bool,
    /// Where no instigator is found, the finding says why (the instigator is the answer the
    /// user came for).
    pub says_why_no_instigator: bool,
    /// Where the culprit's code is known, how its fix begins at that line (`the loop in`); none:
    /// the cause has no fix at the level of the code.
    pub code_lead: Option<&'static str>,
    /// Kernel functions (each a prefix) that name this cause wherever they are in a waiting
    /// thread's kernel stack, or as its `wchan`: a wait under one is this cause's, before the
    /// general readings (a page's lock, a lock's slow path) that such a wait also passes through.
    /// The `/proc` samples ([`crate::wait`]) and the kernel's waits ([`crate::kernel`]) both read
    /// them through [`of_kernel_frames`].
    pub kernel_frames: &'static [&'static str],
    /// How a wait under one of `kernel_frames` is named in the kernel's account of a stall
    /// (`compaction`), and in a thread's samples (`compacting memory`).
    pub kernel_words: &'static str,
    pub wait_words: &'static str,
    /// Whether a thread that ran in the kernel through the stall, no stack read, is this cause's
    /// by what memory management counted over the stall (the `/proc` path's reading); asked
    /// before the general readings of kernel time (reclaim, first touches).
    pub kernel_cpu: Option<fn(&MemorySignals) -> bool>,
}

impl Spec {
    /// What a cause's module leaves unsaid.
    pub const DEFAULT: Spec = Spec {
        id: "",
        title: "",
        fix: "",
        fix_for_process: None,
        colour: "muted",
        instigator: Search::Requester,
        answered_by: &[],
        answered_by_any: false,
        says_why_no_instigator: false,
        code_lead: None,
        kernel_frames: &[],
        kernel_words: "",
        wait_words: "",
        kernel_cpu: None,
    };

    /// Whether an instigator of `kind` answers a finding of this cause: its fix is the finding's.
    pub fn answered_by(&self, kind: InstigatorKind) -> bool {
        self.answered_by_any || self.answered_by.contains(&kind)
    }
}

/// The cause one of `frames` (a kernel stack, innermost first, or a lone `wchan`) names by its
/// module's `kernel_frames`, and the innermost such frame.
pub fn of_kernel_frames<'a>(frames: impl IntoIterator<Item = &'a str>) -> Option<(Cause, &'a str)> {
    // Every wait's stack is read through here: the few prefixes any cause names, gathered once.
    static NAMED: std::sync::OnceLock<Vec<(&'static str, Cause)>> = std::sync::OnceLock::new();
    let named = NAMED.get_or_init(|| {
        Cause::ALL
            .into_iter()
            .flat_map(|c| c.spec().kernel_frames.iter().map(move |k| (*k, c)))
            .collect()
    });
    if named.is_empty() {
        return None;
    }
    frames
        .into_iter()
        .find_map(|f| named.iter().find(|(k, _)| f.starts_with(k)).map(|(_, c)| (*c, f)))
}

/// The cause whose module reads a thread's time in the kernel, no stack read, from what memory
/// management counted over the stall.
pub fn of_kernel_cpu(memory: &MemorySignals) -> Option<Cause> {
    Cause::ALL.into_iter().find(|c| c.spec().kernel_cpu.is_some_and(|reads| reads(memory)))
}

impl Cause {
    pub fn id(self) -> &'static str {
        self.spec().id
    }

    pub fn title(self) -> &'static str {
        self.spec().title
    }

    pub fn fix(self) -> &'static str {
        self.spec().fix
    }

    /// The fix for a process that is not a JVM (no safepoints, no JVM options): where it differs
    /// from [`Cause::fix`].
    pub fn fix_for_process(self) -> &'static str {
        self.spec().fix_for_process.unwrap_or(self.spec().fix)
    }

    /// Parses a cause's id (`swap-in`).
    pub fn from_id(id: &str) -> Option<Cause> {
        Cause::ALL.into_iter().find(|c| c.id() == id)
    }

    pub fn doc(self) -> String {
        format!("docs/causes/{}.md", self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_has_its_page_and_a_fix() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for c in Cause::ALL {
            let page = root.join(c.doc());
            let text = std::fs::read_to_string(&page)
                .unwrap_or_else(|_| panic!("{} is missing", page.display()));
            assert!(
                text.to_lowercase().contains(&c.title().to_lowercase()),
                "{} does not name '{}'",
                page.display(),
                c.title()
            );
            assert!(!c.fix().is_empty());
        }
    }

    #[test]
    fn each_modules_id_is_the_causes_serialised_name() {
        for c in Cause::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), serde_json::json!(c.id()));
            assert!(!c.title().is_empty(), "{c:?}");
            assert_eq!(Cause::from_id(c.id()), Some(c));
        }
    }
}
