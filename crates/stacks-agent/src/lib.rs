//! `libstallscope_stacks.so`: a JVMTI agent that `stallscope run` loads into the JVM
//! (`-agentpath:…=dir=RECORDING`). When the recorder, during a stall, signals a thread that is on
//! a CPU or in a page fault, the agent's handler takes that thread's Java stack with the JVM's
//! `AsyncGetCallTrace`, which walks a thread wherever it stopped, with no safepoint: a loop
//! without a safepoint poll is caught inside the loop, a thread in a VM call (a huge
//! `Unsafe.setMemory`) or a fault is walked from its last Java frame. A thread of the agent's own
//! resolves the methods and their lines and appends the stacks to `RECORDING/stacks.jsonl`, in
//! the recording's `FrameSample` form (docs/frames.md).
//!
//! Invariants:
//! - Nothing runs unless the recorder signals: no timer, no sampling between stalls. The cost is
//!   the jmethodIDs every loaded class gets (AsyncGetCallTrace needs them) and one thread asleep
//!   on a pipe, which the handler writes a byte into (waking once a second to see whether the
//!   JVM is ending).
//! - The handler is async-signal-safe: it writes into a fixed ring of slots and allocates
//!   nothing; when the ring is full the stack is dropped and counted.
//! - The recorder signals nothing before `RECORDING/stacks.ready` names the signal, which the
//!   agent writes only once its handler is installed: a signal the JVM has no handler for would
//!   end it. The signal is the first real-time signal from SIGRTMIN+4 whose disposition is the
//!   default (no one else's).

mod jvmti;
mod ring;
mod writer;

use jvmti::{JavaVm, JvmtiEnv};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

/// The JVM, for the signal handler's `GetEnv`.
static VM: AtomicPtr<JavaVm> = AtomicPtr::new(std::ptr::null_mut());
/// This agent's JVMTI environment.
static JVMTI: AtomicPtr<JvmtiEnv> = AtomicPtr::new(std::ptr::null_mut());

/// What the agent was told: `dir=PATH`.
fn recording_dir(options: *const c_char) -> Option<std::path::PathBuf> {
    if options.is_null() {
        return None;
    }
    let s = unsafe { std::ffi::CStr::from_ptr(options) }.to_str().ok()?;
    s.split(',')
        .find_map(|kv| kv.strip_prefix("dir="))
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
}

fn complain(what: &str) -> c_int {
    eprintln!("stallscope stacks agent: {what}; the JVM runs on without it");
    // Failing Agent_OnLoad would end the JVM: a recorder's helper must never stop the
    // application from starting.
    0
}

/// # Safety
/// Called by the JVM with its `JavaVM` and the options after `=` in `-agentpath`.
#[unsafe(no_mangle)]
pub unsafe extern "system" fn Agent_OnLoad(
    vm: *mut JavaVm,
    options: *const c_char,
    _reserved: *mut c_void,
) -> c_int {
    let Some(dir) = recording_dir(options) else { return complain("no dir=RECORDING option") };
    let Some(env) = (unsafe { JavaVm::jvmti(vm) }) else {
        return complain("no JVMTI 1.2 environment");
    };
    VM.store(vm, Ordering::Release);
    JVMTI.store(env, Ordering::Release);
    let mut caps = jvmti::Capabilities::default();
    caps.words[0] = jvmti::CAN_GET_LINE_NUMBERS | jvmti::CAN_GET_SOURCE_FILE_NAME;
    if unsafe { JvmtiEnv::add_capabilities(env, &caps) } != 0 {
        return complain("the JVM refused the line-number capability");
    }
    let mut cb = [std::ptr::null::<c_void>(); jvmti::CALLBACKS];
    let at = |event: c_int| (event - jvmti::EVENT_VM_INIT) as usize;
    cb[at(jvmti::EVENT_VM_INIT)] = on_vm_init as *const c_void;
    cb[at(jvmti::EVENT_VM_DEATH)] = on_vm_death as *const c_void;
    cb[at(jvmti::EVENT_CLASS_LOAD)] = on_class_load as *const c_void;
    cb[at(jvmti::EVENT_CLASS_PREPARE)] = on_class_prepare as *const c_void;
    if unsafe { JvmtiEnv::set_callbacks(env, &cb) } != 0 {
        return complain("cannot set JVMTI callbacks");
    }
    // AsyncGetCallTrace answers only while some agent has class-load events on.
    for e in [
        jvmti::EVENT_VM_INIT,
        jvmti::EVENT_VM_DEATH,
        jvmti::EVENT_CLASS_LOAD,
        jvmti::EVENT_CLASS_PREPARE,
    ] {
        if unsafe { JvmtiEnv::enable(env, e) } != 0 {
            return complain("cannot enable JVMTI events");
        }
    }
    writer::configure(dir);
    0
}

unsafe extern "system" fn on_vm_init(env: *mut JvmtiEnv, _jni: *mut c_void, _thread: *mut c_void) {
    // Classes loaded before events were posted (the primordial phase) get their jmethodIDs now.
    let (n, classes) = unsafe { JvmtiEnv::loaded_classes(env) };
    for i in 0..n.max(0) as usize {
        unsafe { JvmtiEnv::touch_methods(env, *classes.add(i)) };
    }
    unsafe { JvmtiEnv::deallocate(env, classes.cast()) };
    let vm = VM.load(Ordering::Acquire);
    match ring::install() {
        Ok(sig) => writer::start(vm, sig),
        Err(e) => {
            complain(&e);
        }
    }
}

unsafe extern "system" fn on_vm_death(env: *mut JvmtiEnv, _jni: *mut c_void) {
    writer::finish(env);
}

unsafe extern "system" fn on_class_load(
    _env: *mut JvmtiEnv,
    _jni: *mut c_void,
    _thread: *mut c_void,
    _class: *mut c_void,
) {
}

unsafe extern "system" fn on_class_prepare(
    env: *mut JvmtiEnv,
    _jni: *mut c_void,
    _thread: *mut c_void,
    class: *mut c_void,
) {
    unsafe { JvmtiEnv::touch_methods(env, class) };
}
