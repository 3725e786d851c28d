//! The few pieces of the JNI invocation and JVMTI interfaces the agent calls, declared from the
//! JVMTI specification (function and event numbers as `jvmti.h` numbers them, the same in JDK 17
//! and 25) rather than generated: a function table is an array of pointers, function N at
//! index N-1.

use std::ffi::{c_char, c_int, c_void};

pub type JInt = i32;
pub type JMethodId = *mut c_void;
pub type JClass = *mut c_void;

pub const JNI_OK: JInt = 0;
pub const JNI_VERSION_1_6: JInt = 0x0001_0006;
pub const JVMTI_VERSION_1_2: JInt = 0x3001_0200;
pub const JVMTI_ENABLE: c_int = 1;
pub const EVENT_VM_INIT: c_int = 50;
pub const EVENT_VM_DEATH: c_int = 51;
pub const EVENT_CLASS_LOAD: c_int = 55;
pub const EVENT_CLASS_PREPARE: c_int = 56;

/// `JavaVM`: a pointer to the invocation interface's table.
#[repr(C)]
pub struct JavaVm {
    pub functions: *const *const c_void,
}

/// `jvmtiEnv`: a pointer to the JVMTI function table.
#[repr(C)]
pub struct JvmtiEnv {
    pub functions: *const *const c_void,
}

/// `JavaVMAttachArgs`.
#[repr(C)]
pub struct AttachArgs {
    pub version: JInt,
    pub name: *const c_char,
    pub group: *mut c_void,
}

/// `jvmtiLineNumberEntry`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LineEntry {
    pub start_location: i64,
    pub line_number: JInt,
}

/// `jvmtiCapabilities`: 128 bits, in declaration order from the lowest bit.
#[repr(C)]
#[derive(Default)]
pub struct Capabilities {
    pub words: [u32; 4],
}
pub const CAN_GET_SOURCE_FILE_NAME: u32 = 1 << 11;
pub const CAN_GET_LINE_NUMBERS: u32 = 1 << 12;

/// `jvmtiEventCallbacks`, events 50 (VMInit) to 86: callback for event E at index E-50.
pub const CALLBACKS: usize = 37;

/// `ASGCT_CallFrame`: `lineno` is the bytecode index (-3 for a native method).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CallFrame {
    pub lineno: JInt,
    pub method: JMethodId,
}

/// `ASGCT_CallTrace`: `num_frames` below 0 says why there is no stack.
#[repr(C)]
pub struct CallTrace {
    pub env: *mut c_void,
    pub num_frames: JInt,
    pub frames: *mut CallFrame,
}

pub type AsyncGetCallTrace = unsafe extern "C" fn(*mut CallTrace, JInt, *mut c_void);

// Invocation interface (`JNIInvokeInterface_`).
const VM_DETACH: usize = 5;
const VM_GET_ENV: usize = 6;
const VM_ATTACH_DAEMON: usize = 7;

// JVMTI functions, number minus one.
const SET_EVENT_NOTIFICATION_MODE: usize = 1;
const DEALLOCATE: usize = 46;
const GET_CLASS_SIGNATURE: usize = 47;
const GET_CLASS_METHODS: usize = 51;
const GET_METHOD_NAME: usize = 63;
const GET_METHOD_DECLARING_CLASS: usize = 64;
const GET_LINE_NUMBER_TABLE: usize = 69;
const GET_LOADED_CLASSES: usize = 77;
const SET_EVENT_CALLBACKS: usize = 121;
const ADD_CAPABILITIES: usize = 141;

/// # Safety
/// `table` is a live JNI or JVMTI function table and `F` the type of its function at `i`.
unsafe fn slot<F: Copy>(table: *const *const c_void, i: usize) -> F {
    unsafe { std::mem::transmute_copy(&*table.add(i)) }
}

impl JavaVm {
    /// The calling thread's JNIEnv (`GetEnv`), or null when it is not a Java thread.
    /// # Safety
    /// `vm` is the JVM's live `JavaVM`.
    pub unsafe fn jni(vm: *mut JavaVm) -> *mut c_void {
        let f: unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, JInt) -> JInt =
            unsafe { slot((*vm).functions, VM_GET_ENV) };
        let mut env = std::ptr::null_mut();
        if unsafe { f(vm, &mut env, JNI_VERSION_1_6) } == JNI_OK {
            env
        } else {
            std::ptr::null_mut()
        }
    }

    /// # Safety
    /// `vm` is the JVM's live `JavaVM`.
    pub unsafe fn jvmti(vm: *mut JavaVm) -> Option<*mut JvmtiEnv> {
        let f: unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, JInt) -> JInt =
            unsafe { slot((*vm).functions, VM_GET_ENV) };
        let mut env = std::ptr::null_mut();
        (unsafe { f(vm, &mut env, JVMTI_VERSION_1_2) } == JNI_OK && !env.is_null())
            .then_some(env.cast())
    }

    /// Attaches the calling thread as a daemon Java thread named `name`.
    /// # Safety
    /// `vm` is the JVM's live `JavaVM`; `name` is NUL-terminated.
    pub unsafe fn attach_daemon(vm: *mut JavaVm, name: &[u8]) -> bool {
        let f: unsafe extern "system" fn(*mut JavaVm, *mut *mut c_void, *mut c_void) -> JInt =
            unsafe { slot((*vm).functions, VM_ATTACH_DAEMON) };
        let mut args = AttachArgs {
            version: JNI_VERSION_1_6,
            name: name.as_ptr().cast(),
            group: std::ptr::null_mut(),
        };
        let mut env = std::ptr::null_mut();
        unsafe { f(vm, &mut env, (&mut args as *mut AttachArgs).cast()) == JNI_OK }
    }

    /// # Safety
    /// `vm` is the JVM's live `JavaVM`, the calling thread attached.
    pub unsafe fn detach(vm: *mut JavaVm) {
        let f: unsafe extern "system" fn(*mut JavaVm) -> JInt =
            unsafe { slot((*vm).functions, VM_DETACH) };
        unsafe { f(vm) };
    }
}

/// Safe-looking wrappers: each returns the JVMTI error code (0 is success).
/// # Safety (all)
/// `env` is a live JVMTI environment and the pointers are what the specification asks.
impl JvmtiEnv {
    pub unsafe fn add_capabilities(env: *mut JvmtiEnv, c: &Capabilities) -> c_int {
        let f: unsafe extern "system" fn(*mut JvmtiEnv, *const Capabilities) -> c_int =
            unsafe { slot((*env).functions, ADD_CAPABILITIES) };
        unsafe { f(env, c) }
    }
    pub unsafe fn set_callbacks(env: *mut JvmtiEnv, cb: &[*const c_void; CALLBACKS]) -> c_int {
        let f: unsafe extern "system" fn(*mut JvmtiEnv, *const c_void, JInt) -> c_int =
            unsafe { slot((*env).functions, SET_EVENT_CALLBACKS) };
        unsafe { f(env, cb.as_ptr().cast(), std::mem::size_of_val(cb) as JInt) }
    }
    pub unsafe fn enable(env: *mut JvmtiEnv, event: c_int) -> c_int {
        let f: unsafe extern "C" fn(*mut JvmtiEnv, c_int, c_int, *mut c_void, ...) -> c_int =
            unsafe { slot((*env).functions, SET_EVENT_NOTIFICATION_MODE) };
        unsafe { f(env, JVMTI_ENABLE, event, std::ptr::null_mut()) }
    }
    pub unsafe fn deallocate(env: *mut JvmtiEnv, p: *mut c_void) {
        if !p.is_null() {
            let f: unsafe extern "system" fn(*mut JvmtiEnv, *mut c_void) -> c_int =
                unsafe { slot((*env).functions, DEALLOCATE) };
            unsafe { f(env, p) };
        }
    }
    /// Makes the JVM give every method of `class` its jmethodID, which AsyncGetCallTrace needs.
    pub unsafe fn touch_methods(env: *mut JvmtiEnv, class: JClass) {
        let f: unsafe extern "system" fn(
            *mut JvmtiEnv,
            JClass,
            *mut JInt,
            *mut *mut JMethodId,
        ) -> c_int = unsafe { slot((*env).functions, GET_CLASS_METHODS) };
        let (mut n, mut m) = (0, std::ptr::null_mut());
        if unsafe { f(env, class, &mut n, &mut m) } == 0 {
            unsafe { Self::deallocate(env, m.cast()) };
        }
    }
    /// Every loaded class (for an agent loaded late); the caller deallocates.
    pub unsafe fn loaded_classes(env: *mut JvmtiEnv) -> (JInt, *mut JClass) {
        let f: unsafe extern "system" fn(*mut JvmtiEnv, *mut JInt, *mut *mut JClass) -> c_int =
            unsafe { slot((*env).functions, GET_LOADED_CLASSES) };
        let (mut n, mut c) = (0, std::ptr::null_mut());
        if unsafe { f(env, &mut n, &mut c) } == 0 { (n, c) } else { (0, std::ptr::null_mut()) }
    }
    /// A JVMTI-allocated C string, copied and freed.
    unsafe fn take(env: *mut JvmtiEnv, p: *mut c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        let s = unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned();
        unsafe { Self::deallocate(env, p.cast()) };
        Some(s)
    }
    pub unsafe fn method_name(env: *mut JvmtiEnv, m: JMethodId) -> Option<String> {
        let f: unsafe extern "system" fn(
            *mut JvmtiEnv,
            JMethodId,
            *mut *mut c_char,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> c_int = unsafe { slot((*env).functions, GET_METHOD_NAME) };
        let mut name = std::ptr::null_mut();
        if unsafe { f(env, m, &mut name, std::ptr::null_mut(), std::ptr::null_mut()) } != 0 {
            return None;
        }
        unsafe { Self::take(env, name) }
    }
    pub unsafe fn class_signature(env: *mut JvmtiEnv, m: JMethodId) -> Option<String> {
        let f: unsafe extern "system" fn(*mut JvmtiEnv, JMethodId, *mut JClass) -> c_int =
            unsafe { slot((*env).functions, GET_METHOD_DECLARING_CLASS) };
        let mut class = std::ptr::null_mut();
        if unsafe { f(env, m, &mut class) } != 0 {
            return None;
        }
        let g: unsafe extern "system" fn(
            *mut JvmtiEnv,
            JClass,
            *mut *mut c_char,
            *mut *mut c_char,
        ) -> c_int = unsafe { slot((*env).functions, GET_CLASS_SIGNATURE) };
        let mut sig = std::ptr::null_mut();
        if unsafe { g(env, class, &mut sig, std::ptr::null_mut()) } != 0 {
            return None;
        }
        unsafe { Self::take(env, sig) }
    }
    /// The method's line number table; empty when it has none (native, or compiled without).
    pub unsafe fn lines(env: *mut JvmtiEnv, m: JMethodId) -> Vec<LineEntry> {
        let f: unsafe extern "system" fn(
            *mut JvmtiEnv,
            JMethodId,
            *mut JInt,
            *mut *mut LineEntry,
        ) -> c_int = unsafe { slot((*env).functions, GET_LINE_NUMBER_TABLE) };
        let (mut n, mut t) = (0, std::ptr::null_mut());
        if unsafe { f(env, m, &mut n, &mut t) } != 0 || t.is_null() {
            return Vec::new();
        }
        let v = unsafe { std::slice::from_raw_parts(t, n.max(0) as usize) }.to_vec();
        unsafe { Self::deallocate(env, t.cast()) };
        v
    }
}
