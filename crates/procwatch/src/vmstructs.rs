//! A HotSpot JVM's own description of its internals, read from outside: the `gHotSpotVMStructs`
//! and `gHotSpotVMTypes` tables every HotSpot exports from `libjvm.so` for its Serviceability
//! Agent (`vmStructs.cpp`), read out of the live process with `process_vm_readv`. With them a
//! field of a VM structure (the safepoint state, the code cache's heaps, a method's name) is
//! found at the same place the JVM itself uses, on every JDK from 8 to 25, without the JVM
//! running a single instruction for us: it may be stopped, stuck at a safepoint, or refusing
//! attach.
//!
//! Invariant: the target is only read, never written, stopped or signalled. Every read is
//! bounded and checked: a JVM that changes under the reader (a method unloaded, the code cache
//! swept) gives an error or a short answer, never a crash of ours.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Why the JVM's structures could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// No `libjvm.so` is mapped in the process (not a HotSpot JVM, or gone).
    NoLibjvm { pid: i32 },
    /// `libjvm.so` could not be read, or is not an ELF file with the symbols.
    Library { path: PathBuf, reason: String },
    /// The process's memory could not be read (another user's without privilege, gone).
    Memory { pid: i32, address: u64, reason: String },
    /// The tables do not hold what they should.
    Table { reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoLibjvm { pid } => {
                write!(f, "pid {pid}: no libjvm.so is mapped (not a HotSpot JVM, or it has exited)")
            }
            Error::Library { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::Memory { pid, address, reason } => {
                write!(f, "pid {pid}: cannot read its memory at {address:#x}: {reason}")
            }
            Error::Table { reason } => write!(f, "the JVM's structure tables: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// Another process's memory, read without stopping it.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub pid: i32,
}

/// A page of another process's memory, as [`Memory::snapshot`] reads them.
const PAGE: u64 = 4096;
/// Pages one snapshot keeps at most (1 MiB); reads past them go to the process.
const SNAPSHOT_PAGES: usize = 256;
/// Reads at most this long are served from a snapshot's pages; longer ones are one system call
/// anyway.
const SNAPSHOT_READ: usize = 256;

/// Each page read whole while a snapshot lasts on this thread (None: not readable whole).
type Pages = HashMap<(i32, u64), Option<Box<[u8]>>>;

thread_local! {
    static SNAPSHOT: std::cell::RefCell<Option<Pages>> = const { std::cell::RefCell::new(None) };
}

impl Memory {
    /// Runs `f` with this thread's short reads of any process's memory served from whole pages,
    /// each page read once (a walk of a stack and of the code cache reads hundreds of words,
    /// one system call each, from a few pages). What `f` reads is each page as it was when first
    /// read: for what holds still while `f` runs (a thread blocked in the VM, the code cache at
    /// a safepoint). Nested, the outer snapshot serves.
    pub fn snapshot<T>(f: impl FnOnce() -> T) -> T {
        struct End(bool);
        impl Drop for End {
            fn drop(&mut self) {
                if self.0 {
                    SNAPSHOT.with(|s| *s.borrow_mut() = None);
                }
            }
        }
        let outer = SNAPSHOT.with(|s| {
            let mut s = s.borrow_mut();
            s.is_none().then(|| *s = Some(HashMap::new())).is_some()
        });
        let _end = End(outer);
        f()
    }

    /// `buf` from the snapshot's pages, reading those it lacks; None without a snapshot, for a
    /// long read, or where a page cannot be read whole (the caller then reads the process).
    fn read_snapshot(&self, address: u64, buf: &mut [u8]) -> Option<()> {
        if buf.len() > SNAPSHOT_READ {
            return None;
        }
        let end = address.checked_add(buf.len() as u64)?;
        SNAPSHOT.with(|s| {
            let mut s = s.borrow_mut();
            let pages = s.as_mut()?;
            let mut at = address;
            while at < end {
                let page = at & !(PAGE - 1);
                if !pages.contains_key(&(self.pid, page)) {
                    if pages.len() >= SNAPSHOT_PAGES {
                        return None;
                    }
                    let mut whole = vec![0u8; PAGE as usize];
                    let read = self.read_process(page, &mut whole).ok();
                    let data = (read == Some(whole.len())).then(|| whole.into_boxed_slice());
                    pages.insert((self.pid, page), data);
                }
                let data = pages.get(&(self.pid, page))?.as_ref()?;
                let from = (at - page) as usize;
                let n = ((end - at) as usize).min(PAGE as usize - from);
                let to = (at - address) as usize;
                buf[to..to + n].copy_from_slice(&data[from..from + n]);
                at += n as u64;
            }
            Some(())
        })
    }

    /// Reads up to `buf.len()` bytes at `address`, as many as are mapped from there on.
    pub fn read_some(&self, address: u64, buf: &mut [u8]) -> Result<usize, Error> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.read_snapshot(address, buf).is_some() {
            return Ok(buf.len());
        }
        self.read_process(address, buf)
    }

    /// One `process_vm_readv` of `buf.len()` bytes at `address`.
    fn read_process(&self, address: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let local =
            libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let remote = libc::iovec { iov_base: address as *mut libc::c_void, iov_len: buf.len() };
        // SAFETY: one local buffer we own, of its length; the remote range is only read by the
        // kernel, which checks it.
        let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::Memory { pid: self.pid, address, reason: e.to_string() });
        }
        Ok(n as usize)
    }

    /// Reads each `(address, buf)` whole, all in one `process_vm_readv` (a look at a few of the
    /// JVM's statics, each in a page of its own); false unless every one was read whole.
    pub fn read_each(&self, reads: &mut [(u64, &mut [u8])]) -> bool {
        let mut local = Vec::with_capacity(reads.len());
        let mut remote = Vec::with_capacity(reads.len());
        let mut want = 0;
        for (address, buf) in reads.iter_mut() {
            want += buf.len();
            local.push(libc::iovec {
                iov_base: buf.as_mut_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            });
            remote
                .push(libc::iovec { iov_base: *address as *mut libc::c_void, iov_len: buf.len() });
        }
        // SAFETY: local buffers we own, each of its length, alive through the call; the remote
        // ranges are only read by the kernel, which checks them (a transfer stops at the first
        // that faults: then fewer bytes than asked).
        let n = unsafe {
            libc::process_vm_readv(
                self.pid,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        n >= 0 && n as usize == want
    }

    /// Reads `buf.len()` bytes at `address`; a short read is an error.
    pub fn read(&self, address: u64, buf: &mut [u8]) -> Result<(), Error> {
        let n = self.read_some(address, buf)?;
        if n < buf.len() {
            return Err(Error::Memory {
                pid: self.pid,
                address,
                reason: format!("only {n} of {} bytes are mapped", buf.len()),
            });
        }
        Ok(())
    }

    pub fn u64(&self, address: u64) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        self.read(address, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    pub fn u32(&self, address: u64) -> Result<u32, Error> {
        let mut b = [0u8; 4];
        self.read(address, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn u16(&self, address: u64) -> Result<u16, Error> {
        let mut b = [0u8; 2];
        self.read(address, &mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    pub fn u8(&self, address: u64) -> Result<u8, Error> {
        let mut b = [0u8; 1];
        self.read(address, &mut b)?;
        Ok(b[0])
    }

    /// A NUL-terminated string of at most `max` bytes at `address`, read a page-bounded piece at
    /// a time (a string near the end of a mapping must not fail for the bytes after it).
    pub fn cstr(&self, address: u64, max: usize) -> Result<String, Error> {
        if address == 0 {
            return Err(Error::Memory { pid: self.pid, address, reason: "a null pointer".into() });
        }
        let mut out = Vec::new();
        let mut at = address;
        while out.len() < max {
            let to_page = (PAGE - at % PAGE) as usize;
            let mut buf = vec![0u8; to_page.min(max - out.len()).min(256)];
            self.read(at, &mut buf)?;
            if let Some(nul) = buf.iter().position(|b| *b == 0) {
                out.extend_from_slice(&buf[..nul]);
                return Ok(String::from_utf8_lossy(&out).into_owned());
            }
            at += buf.len() as u64;
            out.extend(buf);
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

/// `libjvm.so` as it is mapped in a process: its file and where it was loaded.
#[derive(Debug, Clone)]
pub struct Libjvm {
    /// The file as the process names it, and where it is reached from here.
    pub path: PathBuf,
    pub reached: PathBuf,
    /// Added to an address in the file's symbol table to give the address in the process.
    pub bias: u64,
    /// The executable range in the process (where the VM's own code runs).
    pub text: (u64, u64),
}

/// Finds `libjvm.so` in `pid`'s maps.
pub fn libjvm(pid: i32) -> Result<Libjvm, Error> {
    let maps = crate::maps::read(pid).map_err(|_| Error::NoLibjvm { pid })?;
    let ours: Vec<&crate::maps::Mapping> =
        maps.iter().filter(|m| m.path.ends_with("/libjvm.so")).collect();
    let first = ours.iter().min_by_key(|m| m.start).ok_or(Error::NoLibjvm { pid })?;
    let text = ours.iter().find(|m| m.perms.contains('x')).map_or((0, 0), |m| (m.start, m.end));
    let reached = crate::ns::reach(&crate::ns::root(pid), Path::new(&first.path));
    let lowest_vaddr = elf_lowest_load(&reached)?;
    // The first mapping (file offset 0) is the lowest loadable segment.
    let bias = first.start.wrapping_sub(first.offset).wrapping_sub(lowest_vaddr & !0xfff);
    Ok(Libjvm { path: PathBuf::from(&first.path), reached, bias, text })
}

fn lib_err(path: &Path, reason: impl Into<String>) -> Error {
    Error::Library { path: path.to_path_buf(), reason: reason.into() }
}

fn read_at(f: &File, path: &Path, off: u64, len: usize) -> Result<Vec<u8>, Error> {
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    if off.checked_add(len as u64).is_none_or(|end| end > size) {
        return Err(lib_err(
            path,
            format!("a {len}-byte table at byte {off}, past its end (damaged?)"),
        ));
    }
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, off)
        .map_err(|e| lib_err(path, format!("cannot read {len} bytes at {off}: {e}")))?;
    Ok(b)
}

fn le64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or_default()))
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).map_or(0, |s| u32::from_le_bytes(s.try_into().unwrap_or_default()))
}

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2).map_or(0, |s| u16::from_le_bytes(s.try_into().unwrap_or_default()))
}

fn elf_header(f: &File, path: &Path) -> Result<Vec<u8>, Error> {
    let h = read_at(f, path, 0, 64)?;
    if &h[..4] != b"\x7fELF" || h[4] != 2 || h[5] != 1 {
        return Err(lib_err(path, "not a 64-bit little-endian ELF file"));
    }
    Ok(h)
}

/// The lowest virtual address of a loadable segment.
fn elf_lowest_load(path: &Path) -> Result<u64, Error> {
    let f =
        crate::ns::open_reached(path, libc::O_RDONLY).map_err(|e| lib_err(path, e.to_string()))?;
    let h = elf_header(&f, path)?;
    let (phoff, phentsize, phnum) = (le64(&h, 32), le16(&h, 54) as usize, le16(&h, 56) as usize);
    let ph = read_at(&f, path, phoff, phentsize * phnum)?;
    (0..phnum)
        .filter(|i| le32(&ph, i * phentsize) == 1)
        .map(|i| le64(&ph, i * phentsize + 16))
        .min()
        .ok_or_else(|| lib_err(path, "no loadable segment"))
}

/// The dynamic symbols of an ELF file whose names satisfy `want`: name → value (an address in
/// the file's own numbering).
pub fn dynamic_symbols(
    path: &Path,
    want: &dyn Fn(&str) -> bool,
) -> Result<HashMap<String, u64>, Error> {
    Ok(symbols(path, SymbolTable::Dynamic, want)?.into_iter().map(|s| (s.name, s.value)).collect())
}

/// Which of an ELF file's symbol tables to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolTable {
    /// `.dynsym`: what the library exports (always there).
    Dynamic,
    /// `.symtab`: every symbol, static members and vtables too (gone from a stripped file).
    Full,
}

/// One symbol: its name, value (an address in the file's own numbering) and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
}

/// The symbols of an ELF file whose names satisfy `want`, from the table asked for.
pub fn symbols(
    path: &Path,
    table: SymbolTable,
    want: &dyn Fn(&str) -> bool,
) -> Result<Vec<Symbol>, Error> {
    let f =
        crate::ns::open_reached(path, libc::O_RDONLY).map_err(|e| lib_err(path, e.to_string()))?;
    let h = elf_header(&f, path)?;
    let (shoff, shentsize, shnum) = (le64(&h, 40), le16(&h, 58) as usize, le16(&h, 60) as usize);
    let sh = read_at(&f, path, shoff, shentsize * shnum)?;
    let section = |i: usize| {
        (
            le32(&sh, i * shentsize + 4),
            le64(&sh, i * shentsize + 24),
            le64(&sh, i * shentsize + 32),
            le32(&sh, i * shentsize + 40),
        )
    };
    let (kind, what) = match table {
        SymbolTable::Dynamic => (11, "no dynamic symbol table"),
        SymbolTable::Full => (2, "no full symbol table (the library is stripped)"),
    };
    let found = (0..shnum).find(|i| section(*i).0 == kind).ok_or_else(|| lib_err(path, what))?;
    let (_, sym_off, sym_size, link) = section(found);
    if link as usize >= shnum {
        return Err(lib_err(path, "a symbol table linked to no string table"));
    }
    let (_, str_off, str_size, _) = section(link as usize);
    let syms = read_at(&f, path, sym_off, sym_size as usize)?;
    let strs = read_at(&f, path, str_off, str_size as usize)?;
    let mut out = Vec::new();
    for s in syms.chunks_exact(24) {
        let name_at = le32(s, 0) as usize;
        let Some(rest) = strs.get(name_at..) else { continue };
        let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
        let Ok(name) = std::str::from_utf8(&rest[..end]) else { continue };
        let value = le64(s, 8);
        if value != 0 && want(name) {
            out.push(Symbol { name: name.to_string(), value, size: le64(s, 16) });
        }
    }
    Ok(out)
}

/// One field of a VM structure, as `gHotSpotVMStructs` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub type_string: String,
    /// A static field's address; an instance field's offset in its structure.
    pub is_static: bool,
    pub offset: u64,
    pub address: u64,
}

/// The tables of one JVM: fields by (type, field), type sizes, integer constants.
#[derive(Debug, Clone)]
pub struct VmStructs {
    pub mem: Memory,
    pub libjvm: Libjvm,
    pub fields: HashMap<(String, String), Field>,
    pub sizes: HashMap<String, u64>,
    pub int_constants: HashMap<String, i64>,
}

const SYMBOLS: [&str; 20] = [
    "gHotSpotVMStructs",
    "gHotSpotVMStructEntryTypeNameOffset",
    "gHotSpotVMStructEntryFieldNameOffset",
    "gHotSpotVMStructEntryTypeStringOffset",
    "gHotSpotVMStructEntryIsStaticOffset",
    "gHotSpotVMStructEntryOffsetOffset",
    "gHotSpotVMStructEntryAddressOffset",
    "gHotSpotVMStructEntryArrayStride",
    "gHotSpotVMTypes",
    "gHotSpotVMTypeEntryTypeNameOffset",
    "gHotSpotVMTypeEntrySizeOffset",
    "gHotSpotVMTypeEntryArrayStride",
    "gHotSpotVMIntConstants",
    "gHotSpotVMIntConstantEntryNameOffset",
    "gHotSpotVMIntConstantEntryValueOffset",
    "gHotSpotVMIntConstantEntryArrayStride",
    "gHotSpotVMLongConstants",
    "gHotSpotVMLongConstantEntryNameOffset",
    "gHotSpotVMLongConstantEntryValueOffset",
    "gHotSpotVMLongConstantEntryArrayStride",
];

/// Tables hold a few thousand entries; beyond this the walk has gone astray.
const MAX_TABLE: usize = 20_000;

impl VmStructs {
    /// Reads the tables of the JVM `pid`.
    pub fn read(pid: i32) -> Result<VmStructs, Error> {
        let lib = libjvm(pid)?;
        let syms = dynamic_symbols(&lib.reached, &|n| n.starts_with("gHotSpotVM"))?;
        let mem = Memory { pid };
        // Each symbol is a variable in libjvm holding the value (a pointer or an offset).
        let var = |name: &str| -> Result<u64, Error> {
            let at = syms.get(name).ok_or_else(|| {
                lib_err(&lib.path, format!("{name} is not exported (not a HotSpot libjvm.so?)"))
            })?;
            mem.u64(lib.bias.wrapping_add(*at))
        };
        for s in SYMBOLS {
            if !syms.contains_key(s) {
                return Err(lib_err(
                    &lib.path,
                    format!("{s} is not exported (not a HotSpot libjvm.so?)"),
                ));
            }
        }
        let mut fields = HashMap::new();
        {
            let (base, stride) =
                (var("gHotSpotVMStructs")?, var("gHotSpotVMStructEntryArrayStride")?);
            let (tn, fnm, ts, st, off, addr) = (
                var("gHotSpotVMStructEntryTypeNameOffset")?,
                var("gHotSpotVMStructEntryFieldNameOffset")?,
                var("gHotSpotVMStructEntryTypeStringOffset")?,
                var("gHotSpotVMStructEntryIsStaticOffset")?,
                var("gHotSpotVMStructEntryOffsetOffset")?,
                var("gHotSpotVMStructEntryAddressOffset")?,
            );
            check_stride(stride)?;
            let mut e = vec![0u8; stride as usize];
            for i in 0..MAX_TABLE {
                mem.read(base.wrapping_add((i as u64).wrapping_mul(stride)), &mut e)?;
                let type_name = le64(&e, tn as usize);
                if type_name == 0 {
                    break;
                }
                let field_name = le64(&e, fnm as usize);
                if field_name == 0 {
                    continue;
                }
                let ts_ptr = le64(&e, ts as usize);
                let f = Field {
                    type_string: if ts_ptr == 0 { String::new() } else { mem.cstr(ts_ptr, 256)? },
                    is_static: le32(&e, st as usize) != 0,
                    offset: le64(&e, off as usize),
                    address: le64(&e, addr as usize),
                };
                fields.insert((mem.cstr(type_name, 256)?, mem.cstr(field_name, 256)?), f);
            }
        }
        let mut sizes = HashMap::new();
        {
            let (base, stride) = (var("gHotSpotVMTypes")?, var("gHotSpotVMTypeEntryArrayStride")?);
            let (tn, sz) =
                (var("gHotSpotVMTypeEntryTypeNameOffset")?, var("gHotSpotVMTypeEntrySizeOffset")?);
            check_stride(stride)?;
            let mut e = vec![0u8; stride as usize];
            for i in 0..MAX_TABLE {
                mem.read(base.wrapping_add((i as u64).wrapping_mul(stride)), &mut e)?;
                let type_name = le64(&e, tn as usize);
                if type_name == 0 {
                    break;
                }
                sizes.insert(mem.cstr(type_name, 256)?, le64(&e, sz as usize));
            }
        }
        let mut int_constants = HashMap::new();
        for (table, name_off, value_off, stride, wide) in [
            (
                "gHotSpotVMIntConstants",
                "gHotSpotVMIntConstantEntryNameOffset",
                "gHotSpotVMIntConstantEntryValueOffset",
                "gHotSpotVMIntConstantEntryArrayStride",
                false,
            ),
            (
                "gHotSpotVMLongConstants",
                "gHotSpotVMLongConstantEntryNameOffset",
                "gHotSpotVMLongConstantEntryValueOffset",
                "gHotSpotVMLongConstantEntryArrayStride",
                true,
            ),
        ] {
            let (base, stride, no, vo) =
                (var(table)?, var(stride)?, var(name_off)?, var(value_off)?);
            check_stride(stride)?;
            let mut e = vec![0u8; stride as usize];
            for i in 0..MAX_TABLE {
                mem.read(base.wrapping_add((i as u64).wrapping_mul(stride)), &mut e)?;
                let name = le64(&e, no as usize);
                if name == 0 {
                    break;
                }
                let v = if wide {
                    le64(&e, vo as usize) as i64
                } else {
                    le32(&e, vo as usize) as i32 as i64
                };
                int_constants.insert(mem.cstr(name, 256)?, v);
            }
        }
        if fields.is_empty() {
            return Err(Error::Table { reason: "gHotSpotVMStructs is empty".into() });
        }
        Ok(VmStructs { mem, libjvm: lib, fields, sizes, int_constants })
    }

    /// The field `field` of `ty`.
    pub fn field(&self, ty: &str, field: &str) -> Result<&Field, Error> {
        self.fields.get(&(ty.to_string(), field.to_string())).ok_or_else(|| Error::Table {
            reason: format!("no field {ty}::{field} (this JDK lays it out otherwise)"),
        })
    }

    /// The offset of instance field `field` in `ty`.
    pub fn offset(&self, ty: &str, field: &str) -> Result<u64, Error> {
        self.field(ty, field).map(|f| f.offset)
    }

    /// The address of static field `field` of `ty`.
    pub fn address(&self, ty: &str, field: &str) -> Result<u64, Error> {
        self.field(ty, field).map(|f| f.address)
    }

    pub fn size(&self, ty: &str) -> Result<u64, Error> {
        self.sizes.get(ty).copied().ok_or_else(|| Error::Table { reason: format!("no type {ty}") })
    }
}

fn check_stride(stride: u64) -> Result<(), Error> {
    if !(8..=256).contains(&stride) {
        return Err(Error::Table { reason: format!("an entry stride of {stride} bytes") });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reads_each_page_once_and_holds_it_still() {
        let mem = Memory { pid: std::process::id() as i32 };
        // Two pages' worth, so that a read can span them.
        let mut words: Vec<u64> = (0..1024).collect();
        let at = |i: usize, w: &[u64]| w.as_ptr() as u64 + 8 * i as u64;
        let straddling = {
            let page_end = (at(0, &words) | (PAGE - 1)) + 1;
            page_end - 4
        };
        let before = (mem.u64(at(3, &words)).unwrap(), mem.u64(straddling).unwrap());
        Memory::snapshot(|| {
            assert_eq!(mem.u64(at(3, &words)).unwrap(), 3);
            assert_eq!(mem.u64(straddling).unwrap(), before.1, "across two pages");
            words[3] = 99;
            std::hint::black_box(&words);
            assert_eq!(mem.u64(at(3, &words)).unwrap(), 3, "the page as first read");
            // Nested: the outer snapshot still serves.
            Memory::snapshot(|| assert_eq!(mem.u64(at(3, &words)).unwrap(), 3));
            // What is not mapped fails as it does outside.
            assert!(mem.u64(8).is_err());
            let mut long = vec![0u8; 1024];
            assert_eq!(mem.read_some(at(0, &words), &mut long).unwrap(), 1024, "a long read");
        });
        assert_eq!(mem.u64(at(3, &words)).unwrap(), 99, "after it, the process as it is");
        assert_eq!(before.0, 3);
    }

    #[test]
    fn scattered_reads_are_read_together_or_not_at_all() {
        let me = Memory { pid: std::process::id() as i32 };
        let a: u64 = 0x0123_4567_89ab_cdef;
        let b = Box::new([7u8; 3]);
        let (mut x, mut y) = ([0u8; 8], [0u8; 3]);
        let mut reads: Vec<(u64, &mut [u8])> =
            vec![(&a as *const u64 as u64, &mut x), (b.as_ptr() as u64, &mut y)];
        assert!(me.read_each(&mut reads));
        assert_eq!((u64::from_le_bytes(x), y), (a, [7, 7, 7]));
        // One unmapped: not whole.
        let mut z = [0u8; 4];
        let mut reads: Vec<(u64, &mut [u8])> = vec![(&a as *const u64 as u64, &mut x), (8, &mut z)];
        assert!(!me.read_each(&mut reads));
    }

    #[test]
    fn our_own_memory_reads_back_and_an_unmapped_address_is_an_error() {
        let me = Memory { pid: std::process::id() as i32 };
        let value: u64 = 0x1122_3344_5566_7788;
        assert_eq!(me.u64(&value as *const u64 as u64).unwrap(), value);
        let text = b"stallscope\0rest";
        assert_eq!(me.cstr(text.as_ptr() as u64, 64).unwrap(), "stallscope");
        let e = me.u64(8).unwrap_err();
        assert!(e.to_string().contains("cannot read its memory at 0x8"), "{e}");
    }

    #[test]
    fn a_process_without_libjvm_says_so() {
        let e = VmStructs::read(std::process::id() as i32).unwrap_err();
        assert!(matches!(e, Error::NoLibjvm { .. }), "{e}");
    }

    #[test]
    fn the_symbols_of_an_elf_file_are_found_by_name() {
        // libc's dynamic symbols, as the loader of this test process found it.
        let maps = crate::maps::read(std::process::id() as i32).unwrap();
        let libc = maps.iter().find(|m| m.path.contains("libc.so")).expect("libc is mapped");
        let syms = dynamic_symbols(Path::new(&libc.path), &|n| n == "malloc").unwrap();
        assert!(syms.contains_key("malloc"));
        let e = dynamic_symbols(Path::new("/proc/self/status"), &|_| true).unwrap_err();
        assert!(
            matches!(e, Error::Library { .. }) && e.to_string().starts_with("/proc/self/status: "),
            "{e}"
        );
        let text = std::env::temp_dir().join(format!("procwatch-not-elf-{}", std::process::id()));
        std::fs::write(&text, vec![b'x'; 100]).unwrap();
        assert!(
            dynamic_symbols(&text, &|_| true).unwrap_err().to_string().contains("not a 64-bit")
        );
        std::fs::remove_file(&text).unwrap();
    }

    mod properties {
        use super::super::dynamic_symbols;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
            /// A damaged ELF file (any bytes changed, cut anywhere) is an error or a list, never
            /// a panic or a runaway allocation.
            #[test]
            fn a_damaged_library_is_an_error_not_a_crash(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..32), cut in any::<prop::sample::Index>(), header in any::<bool>()) {
                let mut b = std::fs::read("/usr/bin/true").unwrap();
                let n = b.len();
                for (at, v) in flips {
                    // Half the time into the ELF header and the section table, where it matters.
                    let i = if header { at.index(64) } else { at.index(n) };
                    b[i] = v;
                }
                b.truncate(cut.index(n + 1).max(1));
                let path = std::env::temp_dir().join(format!("procwatch-elf-{}", std::process::id()));
                std::fs::write(&path, &b).unwrap();
                let _ = dynamic_symbols(&path, &|_| true);
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
}
