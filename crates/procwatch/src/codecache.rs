//! Which Java method a program counter is in, read from outside the JVM: the code cache's heaps,
//! their segment maps, the code blob holding the pc, its method's class and name, through the
//! structures `gHotSpotVMStructs` describes (`vmstructs.rs`), as the Serviceability Agent and
//! async-profiler find them. A pc in the interpreter is named through the method the
//! interpreter frame holds; a compiled frame's caller is found through its frame size, so a
//! stack copied by `perf.rs` walks to its outer frames.
//!
//! Invariant: the JVM is only read, and it keeps running while we read: a blob freed under us
//! gives a wrong-looking answer or an error, never a crash of ours; every walk is bounded.

use crate::vmstructs::{Error, Memory, VmStructs};
use std::cell::RefCell;
use std::collections::HashMap;

/// What a pc is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// A method compiled by the JIT (`nmethod`): `Class.method`; `native` when it is a native
    /// method's wrapper (the method is declared `native`: JNI code runs below it).
    Compiled { method: String, frame_size: u64, native: bool },
    /// The template interpreter running a method (named from its frame when a frame pointer is
    /// known; `native` when that method is declared `native`).
    Interpreted { method: Option<String>, native: bool },
    /// Another code blob: a stub, an adapter (its name as the JVM gives it).
    Stub { name: String, frame_size: u64 },
    /// The VM's own code in libjvm.so, at this offset.
    Vm { offset: u64 },
    /// Outside the code cache and libjvm.so (a native library, or nothing).
    Native,
}

/// How a pc's code is told: Java methods read from the JVM's structures.
pub struct CodeCache {
    vm: VmStructs,
    heaps: Vec<Heap>,
    off: Offsets,
    /// Methods named before, by what identifies them: see [`CodeCache::method_name`].
    names: RefCell<HashMap<MethodKey, String>>,
}

/// A method as its `Method*`, `ConstMethod*`, `ConstantPool*` and name index: read from the
/// method's two own structures, where its name takes six reads more (the pool's entry, its
/// class, two symbols). All four stay together only while the method lives.
type MethodKey = (u64, u64, u64, u16);

/// The most methods kept named: past it the names start again (a walk names a few dozen).
const MAX_NAMES: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Heap {
    low: u64,
    high: u64,
    segmap: u64,
    log2_segment: u32,
}

/// Field offsets, looked up once (names differ across JDKs; each has alternatives).
#[derive(Debug, Clone, Copy)]
struct Offsets {
    heap_block_size: u64,
    header_used: Option<u64>,
    blob_name: u64,
    blob_frame_size: u64,
    nmethod_method: u64,
    method_const: u64,
    const_constants: u64,
    const_name_index: u64,
    cp_holder: u64,
    cp_size: u64,
    klass_name: u64,
    symbol_length: u64,
    symbol_body: u64,
    /// `Method::_access_flags`, where this JVM describes it.
    method_flags: Option<u64>,
}

/// `JVM_ACC_NATIVE`, the class file's flag of a method declared `native`.
const ACC_NATIVE: u16 = 0x0100;

fn first_field(vm: &VmStructs, names: &[(&str, &str)]) -> Result<u64, Error> {
    for (t, f) in names {
        if let Ok(x) = vm.field(t, f) {
            return Ok(if x.is_static { x.address } else { x.offset });
        }
    }
    Err(Error::Table { reason: format!("none of {names:?} in this JVM's structures") })
}

/// The most a blob's code can span, for sanity: a blob bigger than this was read wrong.
const MAX_BLOB: u64 = 64 << 20;

impl CodeCache {
    /// The code cache of JVM `pid`.
    pub fn read(pid: i32) -> Result<CodeCache, Error> {
        let vm = VmStructs::read(pid)?;
        let f = |names: &[(&str, &str)]| first_field(&vm, names);
        let off = Offsets {
            heap_block_size: vm.size("HeapBlock")?,
            header_used: f(&[("HeapBlock::Header", "_used")])
                .ok()
                .and_then(|u| f(&[("HeapBlock", "_header")]).ok().map(|h| h.wrapping_add(u))),
            blob_name: f(&[("CodeBlob", "_name")])?,
            blob_frame_size: f(&[("CodeBlob", "_frame_size")])?,
            nmethod_method: f(&[("nmethod", "_method"), ("CompiledMethod", "_method")])?,
            method_const: f(&[("Method", "_constMethod")])?,
            const_constants: f(&[("ConstMethod", "_constants")])?,
            const_name_index: f(&[("ConstMethod", "_name_index")])?,
            cp_holder: f(&[("ConstantPool", "_pool_holder")])?,
            cp_size: vm.size("ConstantPool")?,
            klass_name: f(&[("Klass", "_name")])?,
            symbol_length: f(&[("Symbol", "_length")])?,
            symbol_body: f(&[("Symbol", "_body")])?,
            method_flags: f(&[("Method", "_access_flags")]).ok(),
        };
        let mut cc = CodeCache { vm, heaps: Vec::new(), off, names: RefCell::default() };
        cc.refresh()?;
        Ok(cc)
    }

    fn mem(&self) -> Memory {
        self.vm.mem
    }

    /// Reads the list of code heaps again (it is set at start-up; cheap to redo).
    pub fn refresh(&mut self) -> Result<(), Error> {
        let vm = &self.vm;
        let f = |names: &[(&str, &str)]| first_field(vm, names);
        let heaps_ptr = self.mem().u64(f(&[("CodeCache", "_heaps")])?)?;
        let len =
            self.mem().u32(heaps_ptr.wrapping_add(f(&[
                ("GrowableArrayBase", "_len"),
                ("GenericGrowableArray", "_len"),
            ])?))? as u64;
        let data = self.mem().u64(heaps_ptr.wrapping_add(f(&[
            ("GrowableArray<int>", "_data"),
            ("GrowableArrayView<int>", "_data"),
        ])?))?;
        let (memory, segmap, log2) = (
            f(&[("CodeHeap", "_memory")])?,
            f(&[("CodeHeap", "_segmap")])?,
            f(&[("CodeHeap", "_log2_segment_size")])?,
        );
        let (vs_low, vs_high) = (f(&[("VirtualSpace", "_low")])?, f(&[("VirtualSpace", "_high")])?);
        let mut heaps = Vec::new();
        for i in 0..len.min(16) {
            let h = self.mem().u64(data.wrapping_add(i * 8))?;
            let low = self.mem().u64(h.wrapping_add(memory).wrapping_add(vs_low))?;
            let high = self.mem().u64(h.wrapping_add(memory).wrapping_add(vs_high))?;
            let segmap = self.mem().u64(h.wrapping_add(segmap).wrapping_add(vs_low))?;
            let log2_segment = self.mem().u32(h.wrapping_add(log2))?;
            if low < high && log2_segment < 20 {
                heaps.push(Heap { low, high, segmap, log2_segment });
            }
        }
        if heaps.is_empty() {
            return Err(Error::Table { reason: "the code cache has no heaps".into() });
        }
        self.heaps = heaps;
        Ok(())
    }

    /// The start of the code blob holding `pc`, if a code heap holds it and the block is in use.
    fn blob_at(&self, pc: u64) -> Result<Option<u64>, Error> {
        let Some(h) = self.heaps.iter().find(|h| pc >= h.low && pc < h.high) else {
            return Ok(None);
        };
        let mut seg = (pc - h.low) >> h.log2_segment;
        // The segment map holds, per segment, how far back the block's first segment is (at most
        // 0xFE a hop; 0xFF: free).
        for _ in 0..100_000 {
            let v = self.mem().u8(h.segmap.wrapping_add(seg))?;
            if v == 0xFF {
                return Ok(None);
            }
            if v == 0 {
                break;
            }
            seg = seg.checked_sub(v as u64).ok_or_else(|| Error::Table {
                reason: "a segment map hop below the heap".into(),
            })?;
        }
        let block = h.low + (seg << h.log2_segment);
        if let Some(used) = self.off.header_used
            && self.mem().u8(block.wrapping_add(used))? == 0
        {
            return Ok(None);
        }
        Ok(Some(block.wrapping_add(self.off.heap_block_size)))
    }

    /// The method named `Class.method` (the class's dotted name) at `Method*` `m`. A method
    /// named before is known again by its pointers and name index (the same thread asking for
    /// the same safepoint from the same frames, stall after stall): its name is not read again.
    pub fn method_name(&self, m: u64) -> Result<String, Error> {
        let o = &self.off;
        let cm = self.mem().u64(m.wrapping_add(o.method_const))?;
        let cp = self.mem().u64(cm.wrapping_add(o.const_constants))?;
        let name_index = self.mem().u16(cm.wrapping_add(o.const_name_index))?;
        let key = (m, cm, cp, name_index);
        if let Some(name) = self.names.borrow().get(&key) {
            return Ok(name.clone());
        }
        let name_sym =
            self.mem().u64(cp.wrapping_add(o.cp_size).wrapping_add(name_index as u64 * 8))?;
        let holder = self.mem().u64(cp.wrapping_add(o.cp_holder))?;
        let class_sym = self.mem().u64(holder.wrapping_add(o.klass_name))?;
        let name =
            format!("{}.{}", self.symbol(class_sym)?.replace('/', "."), self.symbol(name_sym)?);
        let mut names = self.names.borrow_mut();
        if names.len() >= MAX_NAMES {
            names.clear();
        }
        names.insert(key, name.clone());
        Ok(name)
    }

    /// Whether the method at `Method*` `m` is declared `native`; false where it cannot be read.
    pub fn is_native(&self, m: u64) -> bool {
        // The flags are a u2 (JDK 22 on) or the low half of an int (before): the flag is in the
        // low 16 bits either way.
        self.off
            .method_flags
            .and_then(|o| self.mem().u16(m.wrapping_add(o)).ok())
            .is_some_and(|f| f & ACC_NATIVE != 0)
    }

    fn symbol(&self, sym: u64) -> Result<String, Error> {
        if sym == 0 {
            return Err(Error::Table { reason: "a null symbol".into() });
        }
        let len = self.mem().u16(sym.wrapping_add(self.off.symbol_length))? as usize;
        let mut b = vec![0u8; len];
        self.mem().read(sym.wrapping_add(self.off.symbol_body), &mut b)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// What `pc` is in; `fp`, when known, names an interpreted frame's method.
    pub fn code_at(&self, pc: u64, fp: Option<u64>) -> Result<Code, Error> {
        if let Some(blob) = self.blob_at(pc)? {
            let name_ptr = self.mem().u64(blob.wrapping_add(self.off.blob_name))?;
            let name = self.mem().cstr(name_ptr, 128).unwrap_or_default();
            let frame_size = self.mem().u32(blob.wrapping_add(self.off.blob_frame_size))? as u64;
            if frame_size > MAX_BLOB {
                return Err(Error::Table {
                    reason: format!("a blob at {blob:#x} with a frame of {frame_size} words"),
                });
            }
            return Ok(match name.as_str() {
                "nmethod" => {
                    let m = self.mem().u64(blob.wrapping_add(self.off.nmethod_method))?;
                    Code::Compiled {
                        method: self.method_name(m)?,
                        frame_size,
                        native: self.is_native(m),
                    }
                }
                "Interpreter" => {
                    let m = fp.and_then(|fp| self.mem().u64(fp.checked_sub(3 * 8)?).ok());
                    Code::Interpreted {
                        method: m.and_then(|m| self.method_name(m).ok()),
                        native: m.is_some_and(|m| self.is_native(m)),
                    }
                }
                _ => Code::Stub { name, frame_size },
            });
        }
        let (lo, hi) = self.vm.libjvm.text;
        if pc >= lo && pc < hi {
            return Ok(Code::Vm { offset: pc - self.vm.libjvm.bias });
        }
        Ok(Code::Native)
    }

    /// The Java frames of a stack, top first, from its pc, sp and fp and `word` (reads a word of
    /// the stack: from a copy taken with the sample, or from the JVM's memory for a thread
    /// blocked in the kernel). Compiled frames are unwound through their frame size, interpreted
    /// ones through their frame pointer; the walk stops at anything else, after `max` frames, or
    /// where the stack cannot be read.
    pub fn walk(
        &self,
        mut pc: u64,
        mut sp: u64,
        mut fp: u64,
        word: &dyn Fn(u64) -> Option<u64>,
        max: usize,
    ) -> Vec<Code> {
        let mut out = Vec::new();
        for _ in 0..max {
            let Ok(code) = self.code_at(pc, (fp != 0).then_some(fp)) else { break };
            let next = match &code {
                Code::Compiled { frame_size, .. } | Code::Stub { frame_size, .. }
                    if *frame_size > 0 =>
                {
                    // The caller's sp is past this frame; its return address and saved fp sit
                    // just below it (x86_64).
                    let sender_sp = sp.wrapping_add(frame_size * 8);
                    match (word(sender_sp.wrapping_sub(8)), word(sender_sp.wrapping_sub(16))) {
                        (Some(ret), Some(saved_fp)) => Some((ret, sender_sp, saved_fp)),
                        _ => None,
                    }
                }
                Code::Interpreted { .. } if fp != 0 => {
                    match (word(fp.wrapping_add(8)), word(fp), word(fp.wrapping_sub(8))) {
                        // Return address above the saved fp; the caller's sp is saved in the frame.
                        (Some(ret), Some(saved_fp), Some(sender_sp)) => {
                            Some((ret, sender_sp, saved_fp))
                        }
                        _ => None,
                    }
                }
                // The VM's own code keeps frame pointers: up the chain to the Java code that
                // called into it (a native method's wrapper, a runtime stub). A leaf function
                // that set up no frame of its own hides its caller: one frame is skipped.
                Code::Vm { .. } if fp > sp => match (word(fp.wrapping_add(8)), word(fp)) {
                    (Some(ret), Some(saved_fp)) => Some((ret, fp.wrapping_add(16), saved_fp)),
                    _ => None,
                },
                // No frame pointer (a thread blocked in the kernel: /proc gives its pc and sp
                // only): the nearest word up the stack that is a return address into compiled
                // code is where the VM was called from.
                Code::Vm { .. } => self.scan_for_return(sp, word),
                _ => None,
            };
            let stop = matches!(code, Code::Native);
            out.push(code);
            match next {
                Some((p, s, f)) if !stop && p != 0 && s > sp => (pc, sp, fp) = (p, s, f),
                _ => break,
            }
        }
        out
    }
}

/// How far up the stack a return address into Java code is looked for, from the VM's own code.
const SCAN_WORDS: u64 = 1024;

impl CodeCache {
    /// The first word above `sp` that is a return address into Java code (a compiled method or
    /// a stub with a frame, or the interpreter): the caller's pc, its sp (just above that
    /// word), and its frame pointer (the word below it, where the VM function it called saved
    /// it; compiled frames do not need it).
    fn scan_for_return(
        &self,
        sp: u64,
        word: &dyn Fn(u64) -> Option<u64>,
    ) -> Option<(u64, u64, u64)> {
        for i in 1..SCAN_WORDS {
            let at = sp.wrapping_add(i * 8);
            let w = word(at)?;
            if !self.heaps.iter().any(|h| w >= h.low && w < h.high) {
                continue;
            }
            match self.code_at(w, None) {
                Ok(Code::Compiled { frame_size, .. } | Code::Stub { frame_size, .. })
                    if frame_size > 0 =>
                {
                    return Some((w, at.wrapping_add(8), word(at.wrapping_sub(8)).unwrap_or(0)));
                }
                Ok(Code::Interpreted { .. }) => {
                    return Some((w, at.wrapping_add(8), word(at.wrapping_sub(8))?));
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_is_no_jvm_has_no_code_cache() {
        assert!(CodeCache::read(std::process::id() as i32).is_err());
    }
}
