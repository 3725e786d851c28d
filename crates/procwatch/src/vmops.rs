//! The VM operation a HotSpot JVM's VM thread is running, and the thread that asked for it, read
//! from outside: `VMThread::_cur_vm_operation` (a static member, found in `libjvm.so`'s full
//! symbol table), the operation's class (its vtable, named by the same table), its
//! `_calling_thread`, that thread's OS id (`Thread::_osthread`, `OSThread::_thread_id`, from
//! `gHotSpotVMStructs`) and, for a Java thread, its Java stack from its last Java frame
//! (`JavaThread::_anchor`), named through the code cache. So "a thread dump asked for by the
//! thread `metrics-exporter` in `ThreadImpl.dumpThreads0`, called from …" is known without JFR,
//! without the attach protocol, and from a JVM that is stuck at the safepoint.
//!
//! Invariant: the JVM is only read, never stopped or signalled. The operation lives on its
//! caller's stack and may end while we read: every value read is checked (the caller's OS id must
//! be a thread of the process, its stack pointer inside its stack), so a read that raced gives
//! `None`, never a wrong caller.

use crate::codecache::{Code, CodeCache};
use crate::vmstructs::{Error, Memory, SymbolTable, VmStructs, symbols};

/// `VM_Operation`: its vtable, then `Thread* _calling_thread` (JDK 8 to 25).
const CALLING_THREAD: u64 = 8;
/// Java frames walked from a caller's last Java frame.
const MAX_FRAMES: usize = 24;
/// A thread's stack is at most this large (a bad read beyond it is not a stack).
const MAX_STACK: u64 = 1 << 30;

/// The operation the VM thread runs, as read at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmOperation {
    /// Its class (`VM_HeapDumper`).
    pub class: String,
    /// The thread that asked for it, when it could be told.
    pub caller: Option<Caller>,
}

impl VmOperation {
    /// The operation's name as the JVM's logs give it: the class without `VM_` (`HeapDumper`).
    pub fn name(&self) -> &str {
        self.class.strip_prefix("VM_").unwrap_or(&self.class)
    }
}

/// `SafepointSynchronize::_state` (the same three values from JDK 8 to 25).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafepointState {
    NotSynchronized,
    /// A safepoint is being reached: threads are still running to their polls.
    Synchronizing,
    /// Every thread is stopped: the operation runs.
    Synchronized,
}

impl SafepointState {
    pub fn id(self) -> &'static str {
        match self {
            SafepointState::NotSynchronized => "not-synchronized",
            SafepointState::Synchronizing => "synchronizing",
            SafepointState::Synchronized => "synchronized",
        }
    }
}

/// What one look at the JVM's statics read ([`VmOps::look`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The address of the operation the VM thread runs (0: none).
    pub op: u64,
    /// Where the safepoint stands, where this `libjvm.so` says.
    pub sync: Option<SafepointState>,
    /// Whether the GC locker holds a collection back, where this `libjvm.so` says.
    pub gc_held_back: Option<bool>,
}

/// `SafepointSynchronize::_state`'s value, read.
fn sync_state_of(v: u32) -> Option<SafepointState> {
    Some(match v {
        0 => SafepointState::NotSynchronized,
        1 => SafepointState::Synchronizing,
        2 => SafepointState::Synchronized,
        _ => return None,
    })
}

/// The thread that asked for a VM operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// Its OS thread id, as this host numbers it (a JVM in a container numbers it otherwise).
    pub tid: i32,
    /// Its class in the VM (`JavaThread`, `VMThread`, `G1ConcurrentMarkThread`…).
    pub class: String,
    /// It is the VM thread itself (an operation of the VM's own: cleanup, a periodic GC).
    pub vm_thread: bool,
    /// Its Java frames, top first (`Class.method`, or `(interpreted)` where the method could not
    /// be read); empty for a thread running no Java code (the VM's own threads, the attach
    /// listener).
    pub frames: Vec<String>,
    /// Its top Java frame is a method declared `native`: the thread was in JNI code when it
    /// asked (leaving a JNI critical region runs the collection the GC locker held back).
    pub native: bool,
}

/// What is read once per JVM to find its current VM operation.
pub struct VmOps {
    vm: VmStructs,
    pid: i32,
    cur_op: u64,
    vm_thread_ptr: Option<u64>,
    /// `SafepointSynchronize::_state`, where the symbol table has it.
    sync_state: Option<u64>,
    /// The GC locker's flag for a collection held back until the JNI critical regions are left
    /// (a byte), where the symbol table has it: see [`GC_LOCKER_FLAGS`].
    gc_locker: Option<u64>,
    /// Vtables by their address range in the process, sorted: (start, end, class).
    vtables: Vec<(u64, u64, String)>,
    osthread: u64,
    thread_id: u64,
    anchor: Option<Anchor>,
    stack: Option<(u64, u64)>,
    code: Option<CodeCache>,
    /// The last operation read, by its address, vtable and caller's address: read again while
    /// those stay, it is not walked again (its caller's frames cost dozens of reads).
    last: Option<((u64, u64, u64), VmOperation)>,
}

/// The GC locker's flag that a collection waits for the threads in JNI critical regions
/// (`GetPrimitiveArrayCritical`, `GetStringCritical`) to leave them, by JDK: `GCLocker::_needs_gc`
/// (JDK 8 to 21: set by a thread that found the locker active; the allocators that need memory
/// wait until the last thread out runs the collection), `GCLocker::_is_gc_request_pending` (JDK
/// 22 on: set by the thread asking for a collection, which holds `Heap_lock` and spins until
/// every thread is out; cleared once the collection ran). A `bool` in both.
pub const GC_LOCKER_FLAGS: [&str; 2] =
    ["_ZN8GCLocker22_is_gc_request_pendingE", "_ZN8GCLocker9_needs_gcE"];

/// Where a Java thread's last Java frame is kept.
#[derive(Debug, Clone, Copy)]
struct Anchor {
    at: u64,
    sp: u64,
    pc: u64,
    fp: Option<u64>,
}

/// The class a vtable symbol (`_ZTV13VM_HeapDumper`, `_ZTVN2ns5ClassE`) is for.
pub fn vtable_class(symbol: &str) -> Option<String> {
    let mut s = symbol.strip_prefix("_ZTV")?;
    let nested = s.starts_with('N');
    if nested {
        s = &s[1..];
    }
    let mut parts = Vec::new();
    loop {
        let digits = s.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        let len: usize = s[..digits].parse().ok()?;
        let name = s.get(digits..digits + len)?;
        parts.push(name);
        s = &s[digits + len..];
        if !nested {
            break;
        }
    }
    if parts.is_empty() || (nested && !s.starts_with('E')) || (!nested && !s.is_empty()) {
        return None;
    }
    Some(parts.join("::"))
}

impl VmOps {
    /// Reads what is needed for JVM `pid`: its structures, and from `libjvm.so`'s full symbol
    /// table the VM thread's statics and the vtables. Fails on a stripped `libjvm.so`.
    pub fn open(pid: i32) -> Result<VmOps, Error> {
        let vm = VmStructs::read(pid)?;
        let bias = vm.libjvm.bias;
        let syms = symbols(&vm.libjvm.reached, SymbolTable::Full, &|n| {
            n == "_ZN8VMThread17_cur_vm_operationE"
                || n == "_ZN8VMThread10_vm_threadE"
                || n == "_ZN20SafepointSynchronize6_stateE"
                || GC_LOCKER_FLAGS.contains(&n)
                || (n.starts_with("_ZTV") && (n.contains("VM_") || n.contains("Thread")))
        })?;
        let cur_op = syms
            .iter()
            .find(|s| s.name == "_ZN8VMThread17_cur_vm_operationE")
            .map(|s| s.value.wrapping_add(bias))
            .ok_or_else(|| Error::Table {
                reason: "VMThread::_cur_vm_operation is not in libjvm.so's symbol table".into(),
            })?;
        let vm_thread_ptr = syms
            .iter()
            .find(|s| s.name == "_ZN8VMThread10_vm_threadE")
            .map(|s| s.value.wrapping_add(bias));
        let sync_state = syms
            .iter()
            .find(|s| s.name == "_ZN20SafepointSynchronize6_stateE")
            .map(|s| s.value.wrapping_add(bias));
        let gc_locker = GC_LOCKER_FLAGS.iter().find_map(|flag| {
            syms.iter().find(|s| s.name == *flag).map(|s| s.value.wrapping_add(bias))
        });
        let mut vtables: Vec<(u64, u64, String)> = syms
            .iter()
            .filter(|s| s.size > 0)
            .filter_map(|s| {
                let start = s.value.wrapping_add(bias);
                Some((start, start + s.size, vtable_class(&s.name)?))
            })
            .collect();
        vtables.sort();
        let f = |t: &str, n: &str| vm.offset(t, n);
        // A field of `Thread` is listed under `Thread` or under `JavaThread` (JDK 17), at the
        // same offset in every kind of thread.
        let thread_field = |n: &str| f("Thread", n).or_else(|_| f("JavaThread", n));
        let osthread = thread_field("_osthread")?;
        let thread_id = f("OSThread", "_thread_id")?;
        let anchor = (|| -> Result<Anchor, Error> {
            Ok(Anchor {
                at: f("JavaThread", "_anchor")?,
                sp: f("JavaFrameAnchor", "_last_Java_sp")?,
                pc: f("JavaFrameAnchor", "_last_Java_pc")?,
                fp: f("JavaFrameAnchor", "_last_Java_fp").ok(),
            })
        })()
        .ok();
        let stack = thread_field("_stack_base").ok().zip(thread_field("_stack_size").ok());
        Ok(VmOps {
            pid,
            cur_op,
            vm_thread_ptr,
            sync_state,
            gc_locker,
            vtables,
            osthread,
            thread_id,
            anchor,
            stack,
            code: CodeCache::read(pid).ok(),
            vm,
            last: None,
        })
    }

    fn mem(&self) -> Memory {
        self.vm.mem
    }

    /// The class whose vtable holds `addr` (an object's first word points into its vtable).
    fn class_at_vtable(&self, addr: u64) -> Option<&str> {
        let i = self.vtables.partition_point(|v| v.0 <= addr);
        let v = self.vtables.get(i.checked_sub(1)?)?;
        (addr < v.1).then_some(v.2.as_str())
    }

    /// Where the JVM's safepoint stands now (`SafepointSynchronize::_state`): `None` when this
    /// `libjvm.so` does not say, or the read failed.
    pub fn safepoint_state(&self) -> Option<SafepointState> {
        sync_state_of(self.mem().u32(self.sync_state?).ok()?)
    }

    /// The statics a look at the JVM reads, together in one system call: the VM thread's
    /// operation (its address), where the safepoint stands, and the GC locker's flag. `None`
    /// where the operation's address cannot be read (the process is gone).
    pub fn look(&self) -> Option<Look> {
        let (mut op, mut sync, mut gc) = ([0u8; 8], [0u8; 4], [0u8; 1]);
        let mut reads: Vec<(u64, &mut [u8])> = vec![(self.cur_op, &mut op)];
        if let Some(a) = self.sync_state {
            reads.push((a, &mut sync));
        }
        if let Some(a) = self.gc_locker {
            reads.push((a, &mut gc));
        }
        if !self.mem().read_each(&mut reads) {
            // One of them unreadable: each on its own, the others still told.
            return Some(Look {
                op: self.mem().u64(self.cur_op).ok()?,
                sync: self.safepoint_state(),
                gc_held_back: self.gc_held_back(),
            });
        }
        Some(Look {
            op: u64::from_le_bytes(op),
            sync: self.sync_state.and_then(|_| sync_state_of(u32::from_le_bytes(sync))),
            gc_held_back: self.gc_locker.map(|_| gc[0] != 0),
        })
    }

    /// Whether the GC locker holds a collection back now ([`GC_LOCKER_FLAGS`]): `None` when
    /// this `libjvm.so` does not say, or the read failed.
    pub fn gc_held_back(&self) -> Option<bool> {
        Some(self.mem().u8(self.gc_locker?).ok()? != 0)
    }

    /// The operation the VM thread runs now; `Ok(None)` when it runs none. The same operation
    /// object (its address, vtable and caller unchanged since the last call) is not read again:
    /// call [`Self::forget`] where a new operation at the same address must be read afresh.
    pub fn current(&mut self) -> Result<Option<VmOperation>, Error> {
        let op = self.mem().u64(self.cur_op)?;
        self.current_at(op)
    }

    /// [`Self::current`] from the operation's address as a [`Look`] read it.
    pub fn current_at(&mut self, op: u64) -> Result<Option<VmOperation>, Error> {
        if op == 0 {
            return Ok(None);
        }
        // Its vtable and its caller, side by side at its start: one read.
        let mut head = [0u8; 16];
        self.mem().read(op, &mut head)?;
        let word = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        let (vtable, caller_ptr) = (word(0), word(CALLING_THREAD as usize));
        let key = (op, vtable, caller_ptr);
        let known = self.last.as_ref().filter(|(k, _)| *k == key).map(|(_, o)| o.clone());
        let read = match known {
            Some(o) => o,
            None => {
                let Some(class) = self.class_at_vtable(vtable).map(str::to_string) else {
                    // Not an object with a known vtable: the operation ended while we read.
                    return Ok(None);
                };
                // The caller waits for its operation: its stack and the code it ran hold still,
                // and are read a page at a time (the re-read below is not).
                let caller = (caller_ptr != 0)
                    .then(|| Memory::snapshot(|| self.caller(caller_ptr)))
                    .flatten();
                VmOperation { class, caller }
            }
        };
        // Read again: an operation that ended under us is not reported with a stale caller.
        if self.mem().u64(self.cur_op)? != op {
            self.last = None;
            return Ok(None);
        }
        // A caller that could not be told (its thread not listed yet) is looked for again.
        self.last = (caller_ptr == 0 || read.caller.is_some()).then(|| (key, read.clone()));
        Ok(Some(read))
    }

    /// Forgets the last operation read: the next [`Self::current`] reads it whole.
    pub fn forget(&mut self) {
        self.last = None;
    }

    fn caller(&mut self, thread: u64) -> Option<Caller> {
        let class = self.class_at_vtable(self.mem().u64(thread).ok()?)?.to_string();
        let osthread = self.mem().u64(thread.wrapping_add(self.osthread)).ok()?;
        let inner = self.mem().u32(osthread.wrapping_add(self.thread_id)).ok()? as i32;
        // The thread must be one of the process's (in its own namespace): else the read raced.
        let tid =
            if inner > 0 { crate::ns::host_tid(&crate::ns::host_tids(self.pid), inner) } else { 0 };
        if tid <= 0 || !std::path::Path::new(&format!("/proc/{}/task/{tid}", self.pid)).exists() {
            return None;
        }
        let vm_thread =
            self.vm_thread_ptr.and_then(|p| self.mem().u64(p).ok()).is_some_and(|vt| vt == thread);
        let (frames, native) =
            if vm_thread { (Vec::new(), false) } else { self.java_frames(thread) };
        Some(Caller { tid, class, vm_thread, frames, native })
    }

    /// A Java thread's frames from its last Java frame, top first, and whether the top one is a
    /// native method; empty when it has none (not a Java thread, or running no Java code).
    fn java_frames(&mut self, thread: u64) -> (Vec<String>, bool) {
        let none = (vec![], false);
        let (Some(a), Some(code)) = (self.anchor, self.code.as_mut()) else { return none };
        let mem = self.vm.mem;
        let base = thread.wrapping_add(a.at);
        let Ok(sp) = mem.u64(base.wrapping_add(a.sp)) else { return none };
        if sp == 0 {
            return none;
        }
        // The frame anchor is read as its own thread left it: its stack pointer must lie in
        // its stack (a non-Java thread has something else at that offset).
        if let Some((b, s)) = self.stack {
            let base = mem.u64(thread.wrapping_add(b)).unwrap_or(0);
            let size = mem.u64(thread.wrapping_add(s)).unwrap_or(0);
            if size == 0 || size > MAX_STACK || sp > base || sp < base.saturating_sub(size) {
                return none;
            }
        }
        let fp = a.fp.and_then(|f| mem.u64(base.wrapping_add(f)).ok()).unwrap_or(0);
        let mut pc = mem.u64(base.wrapping_add(a.pc)).unwrap_or(0);
        if pc == 0 {
            // HotSpot's own rule on x86_64: without a saved pc, the return address is below sp.
            pc = mem.u64(sp.wrapping_sub(8)).unwrap_or(0);
        }
        if pc == 0 {
            return none;
        }
        let _ = code.refresh();
        let word = |a: u64| mem.u64(a).ok();
        let mut native = None;
        let frames = code
            .walk(pc, sp, fp, &word, MAX_FRAMES)
            .into_iter()
            .filter_map(|c| {
                let (method, is_native) = match c {
                    Code::Compiled { method, native, .. } => (method, native),
                    Code::Interpreted { method, native } => {
                        (method.unwrap_or_else(|| "(interpreted)".into()), native)
                    }
                    _ => return None,
                };
                native.get_or_insert(is_native);
                Some(method)
            })
            .collect();
        (frames, native.unwrap_or(false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vtable_symbols_name_their_class() {
        assert_eq!(vtable_class("_ZTV13VM_HeapDumper").as_deref(), Some("VM_HeapDumper"));
        assert_eq!(vtable_class("_ZTV10JavaThread").as_deref(), Some("JavaThread"));
        assert_eq!(vtable_class("_ZTVN2ns9VM_ThingyE").as_deref(), Some("ns::VM_Thingy"));
        assert_eq!(vtable_class("_ZTV13VM_Heap"), None, "a length past the end");
        assert_eq!(vtable_class("_ZTVN2nsE"), Some("ns".into()));
        assert_eq!(vtable_class("_ZTV"), None);
        assert_eq!(vtable_class("_ZN8VMThread10_vm_threadE"), None);
        assert_eq!(vtable_class("_ZTV99x"), None);
    }

    #[test]
    fn operation_names_are_the_logs_names() {
        let op = VmOperation { class: "VM_HeapDumper".into(), caller: None };
        assert_eq!(op.name(), "HeapDumper");
    }

    #[test]
    fn a_process_that_is_no_jvm_has_no_vm_operations() {
        assert!(VmOps::open(std::process::id() as i32).is_err());
    }
}
