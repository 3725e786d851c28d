//! The JVM's perf counters: the shared file `/tmp/hsperfdata_<user>/<pid>` that every HotSpot JVM
//! with `-XX:+UsePerfData` (the default) keeps, and that `jstat` reads without attaching. The
//! JVM updates it whatever state it is in, so it says what a JVM that cannot answer is doing:
//! a safepoint begun and not ended (`sun.rt.safepoints` against `sun.rt.safepointTime`), a GC
//! in progress (`sun.gc.collector.N.*`, `sun.gc.cause`). The format is HotSpot's
//! `PerfDataPrologue` and `PerfDataEntry` (`perfMemory.hpp`), documented in
//! `docs/formats/perfdata.md`.
//!
//! Invariant: the file is only ever read. [`parse`] checks every offset against the bytes it is
//! given, so a file cut short, still being created, or not a perf-data file at all is an
//! [`Error`] naming it, never a panic or an out-of-bounds read. [`PerfData`] maps the file
//! read-only once, and a look at a counter is then one aligned 8-byte load, no system call.

use std::collections::HashMap;
use std::fmt;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The prologue's magic, as its first four bytes (the JVM writes it big-endian on every host).
pub const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
/// `PerfDataPrologue`: magic, byte order, major, minor, accessible, used, overflow, mod time
/// stamp, entry offset, entry count.
pub const PROLOGUE_SIZE: usize = 32;
/// `PerfDataEntry` without its name and data.
pub const ENTRY_HEADER_SIZE: usize = 20;
/// Entries no JVM makes more of (a JDK 25 JVM makes about 280): beyond it the file is damaged.
const MAX_ENTRIES: u32 = 1 << 16;

/// The byte order of a perf-data file's numbers (the prologue's `byte_order`: 0 big, 1 little).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Big,
    Little,
}

impl ByteOrder {
    fn i32(self, b: [u8; 4]) -> i32 {
        match self {
            ByteOrder::Big => i32::from_be_bytes(b),
            ByteOrder::Little => i32::from_le_bytes(b),
        }
    }

    fn i64(self, b: [u8; 8]) -> i64 {
        match self {
            ByteOrder::Big => i64::from_be_bytes(b),
            ByteOrder::Little => i64::from_le_bytes(b),
        }
    }
}

/// What is wrong with a perf-data file, with its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// It could not be opened or mapped.
    Io { path: PathBuf, reason: String },
    /// Its first bytes are not the perf-data magic.
    NotPerfData { path: PathBuf, found: Vec<u8> },
    /// Shorter than its prologue says it uses: cut short, or being created.
    Truncated { path: PathBuf, need: usize, have: usize },
    /// The JVM has not finished creating it (its `accessible` flag is not set yet).
    NotReady { path: PathBuf },
    /// A version of the format this reader does not know.
    Version { path: PathBuf, major: u8, minor: u8 },
    /// An entry whose header, name or data lies outside the file, or is malformed.
    BadEntry { path: PathBuf, index: u32, offset: usize, reason: String },
    /// No perf-data file was found for a process, and why.
    NotFound { pid: i32, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, reason } => write!(f, "{}: {reason}", path.display()),
            Error::NotPerfData { path, found } => write!(
                f,
                "{}: not a JVM perf-data file (it starts {found:02x?}, not ca fe c0 c0)",
                path.display()
            ),
            Error::Truncated { path, need, have } => write!(
                f,
                "{}: cut short: {have} bytes, the JVM's counters need {need} (still being created, or truncated)",
                path.display()
            ),
            Error::NotReady { path } => write!(
                f,
                "{}: the JVM has not finished creating its counters yet; try again in a moment",
                path.display()
            ),
            Error::Version { path, major, minor } => write!(
                f,
                "{}: perf-data version {major}.{minor}, which this stallscope does not read (it reads 2.0)",
                path.display()
            ),
            Error::BadEntry { path, index, offset, reason } => {
                write!(f, "{}: counter entry {index} at byte {offset}: {reason}", path.display())
            }
            Error::NotFound { pid, reason } => write!(f, "pid {pid}: no perf counters: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// The prologue of a perf-data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prologue {
    pub byte_order: ByteOrder,
    pub major: u8,
    pub minor: u8,
    /// Set by the JVM once the file is fully created.
    pub accessible: bool,
    /// Bytes in use (the entries end there).
    pub used: u32,
    pub overflow: u32,
    /// When the set of entries last changed (a new counter was added), in the JVM's ticks.
    pub mod_time_stamp: i64,
    pub entry_offset: u32,
    pub num_entries: u32,
}

/// What a counter holds (`PerfDataEntry::data_type`, a JVM basic-type letter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `J`: a 64-bit integer.
    Long,
    /// `B`: bytes; with `Units::String`, a NUL-terminated string.
    Bytes,
    /// Any other letter: listed, never interpreted (HotSpot makes none).
    Other(u8),
}

/// The unit of a counter (`PerfData::Units`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    None,
    Bytes,
    /// Ticks of the high-resolution counter: `sun.os.hrt.frequency` per second.
    Ticks,
    Events,
    String,
    Hertz,
    Other(u8),
}

impl Units {
    fn of(v: u8) -> Units {
        match v {
            1 => Units::None,
            2 => Units::Bytes,
            3 => Units::Ticks,
            4 => Units::Events,
            5 => Units::String,
            6 => Units::Hertz,
            o => Units::Other(o),
        }
    }
}

/// How a counter changes (`PerfData::Variability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variability {
    Constant,
    Monotonic,
    Variable,
    Other(u8),
}

impl Variability {
    fn of(v: u8) -> Variability {
        match v {
            1 => Variability::Constant,
            2 => Variability::Monotonic,
            3 => Variability::Variable,
            o => Variability::Other(o),
        }
    }
}

/// One counter: its name, what it holds, and where its value is in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    pub units: Units,
    pub variability: Variability,
    /// Whether the JVM supports it (`F_Supported`); `jstat` hides the others unless asked.
    pub supported: bool,
    /// The value's first byte, from the start of the file.
    pub data_offset: usize,
    /// Elements of a vector (0: a scalar).
    pub vector_length: usize,
}

/// A counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Long(i64),
    /// A string counter, up to its first NUL.
    Text(String),
    /// Any other vector, raw.
    Bytes(Vec<u8>),
}

impl fmt::Display for Value {
    /// As `jstat -snap` prints it: a number, or a string in double quotes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Long(v) => write!(f, "{v}"),
            Value::Text(s) => write!(f, "\"{s}\""),
            Value::Bytes(b) => write!(f, "{b:02x?}"),
        }
    }
}

fn take<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Reads the prologue of `bytes` (a whole perf-data file, or at least its first 32 bytes).
pub fn parse_prologue(path: &Path, bytes: &[u8]) -> Result<Prologue, Error> {
    if bytes.len() < PROLOGUE_SIZE {
        if bytes.len() >= 4 && bytes[..4] != MAGIC {
            return Err(Error::NotPerfData { path: path.into(), found: bytes[..4].to_vec() });
        }
        return Err(Error::Truncated { path: path.into(), need: PROLOGUE_SIZE, have: bytes.len() });
    }
    if bytes[..4] != MAGIC {
        return Err(Error::NotPerfData { path: path.into(), found: bytes[..4].to_vec() });
    }
    let byte_order = match bytes[4] {
        0 => ByteOrder::Big,
        1 => ByteOrder::Little,
        o => {
            return Err(Error::BadEntry {
                path: path.into(),
                index: 0,
                offset: 4,
                reason: format!("byte order {o} (0 or 1 expected)"),
            });
        }
    };
    let (major, minor) = (bytes[5], bytes[6]);
    if major != 2 {
        return Err(Error::Version { path: path.into(), major, minor });
    }
    let i32_at = |at: usize| byte_order.i32(take::<4>(bytes, at).unwrap_or_default());
    let nonneg = |at: usize, what: &str| -> Result<u32, Error> {
        u32::try_from(i32_at(at)).map_err(|_| Error::BadEntry {
            path: path.into(),
            index: 0,
            offset: at,
            reason: format!("negative {what} {}", i32_at(at)),
        })
    };
    Ok(Prologue {
        byte_order,
        major,
        minor,
        accessible: bytes[7] != 0,
        used: nonneg(8, "used size")?,
        overflow: nonneg(12, "overflow")?,
        mod_time_stamp: byte_order.i64(take::<8>(bytes, 16).unwrap_or_default()),
        entry_offset: nonneg(24, "entry offset")?,
        num_entries: nonneg(28, "entry count")?,
    })
}

/// Reads the entries of `bytes` after the first `skip` (already read) up to the prologue's
/// count, each checked against the bytes; returns them with the offset after the last.
fn parse_entries(
    path: &Path,
    bytes: &[u8],
    p: &Prologue,
    skip: u32,
    mut offset: usize,
) -> Result<(Vec<Entry>, usize), Error> {
    if p.num_entries > MAX_ENTRIES {
        return Err(Error::BadEntry {
            path: path.into(),
            index: 0,
            offset: 28,
            reason: format!("{} entries claimed (damaged?)", p.num_entries),
        });
    }
    let limit = (p.used as usize).min(bytes.len());
    let mut out = Vec::with_capacity((p.num_entries - skip.min(p.num_entries)) as usize);
    for index in skip..p.num_entries {
        let bad = |reason: String| Error::BadEntry { path: path.into(), index, offset, reason };
        let head_end = offset
            .checked_add(ENTRY_HEADER_SIZE)
            .filter(|e| *e <= limit)
            .ok_or_else(|| bad(format!("its header runs past the {limit} bytes in use")))?;
        let h = &bytes[offset..head_end];
        let i32_at = |at: usize| p.byte_order.i32(h[at..at + 4].try_into().unwrap_or_default());
        let (len, name_off, vlen, doff) = (i32_at(0), i32_at(4), i32_at(8), i32_at(16));
        let len = usize::try_from(len)
            .ok()
            .filter(|l| *l >= ENTRY_HEADER_SIZE)
            .ok_or_else(|| bad(format!("length {len}")))?;
        let end = offset
            .checked_add(len)
            .filter(|e| *e <= limit)
            .ok_or_else(|| bad(format!("length {len} runs past the {limit} bytes in use")))?;
        let name_at = usize::try_from(name_off)
            .ok()
            .filter(|o| *o >= ENTRY_HEADER_SIZE && *o < len)
            .ok_or_else(|| bad(format!("name offset {name_off} outside its {len} bytes")))?;
        let name_bytes = &bytes[offset + name_at..end];
        let nul = name_bytes
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(|| bad("its name has no end".into()))?;
        let name = std::str::from_utf8(&name_bytes[..nul])
            .map_err(|_| bad("its name is not text".into()))?
            .to_string();
        if name.is_empty() {
            return Err(bad("an empty name".into()));
        }
        let kind = match h[12] {
            b'J' => Kind::Long,
            b'B' => Kind::Bytes,
            o => Kind::Other(o),
        };
        let vector_length =
            usize::try_from(vlen).map_err(|_| bad(format!("vector length {vlen}")))?;
        let size = match (kind, vector_length) {
            (Kind::Long, 0) => 8,
            (Kind::Long, n) => {
                n.checked_mul(8).ok_or_else(|| bad(format!("vector length {vlen}")))?
            }
            (_, 0) => 1,
            (_, n) => n,
        };
        let data_at = usize::try_from(doff)
            .ok()
            .filter(|o| *o >= ENTRY_HEADER_SIZE && o.checked_add(size).is_some_and(|e| e <= len))
            .ok_or_else(|| {
                bad(format!("data offset {doff} ({size} bytes) outside its {len} bytes"))
            })?;
        if kind == Kind::Long && !(offset + data_at).is_multiple_of(8) {
            return Err(bad(format!("a 64-bit value at unaligned byte {}", offset + data_at)));
        }
        out.push(Entry {
            name,
            kind,
            units: Units::of(h[14]),
            variability: Variability::of(h[15]),
            supported: h[13] & 1 != 0,
            data_offset: offset + data_at,
            vector_length,
        });
        offset = end;
    }
    Ok((out, offset))
}

/// The value of `e` in `bytes` (a copy of the file, or the mapping).
pub fn value_in(bytes: &[u8], order: ByteOrder, e: &Entry) -> Value {
    match (e.kind, e.vector_length) {
        (Kind::Long, 0) => Value::Long(take::<8>(bytes, e.data_offset).map_or(0, |b| order.i64(b))),
        (_, n) => {
            let raw = bytes
                .get(
                    e.data_offset
                        ..e.data_offset + n.max(1) * if e.kind == Kind::Long { 8 } else { 1 },
                )
                .unwrap_or_default();
            if e.units == Units::String
                || e.kind == Kind::Bytes && e.units == Units::None && raw.contains(&0)
            {
                let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
                Value::Text(String::from_utf8_lossy(&raw[..end]).into_owned())
            } else {
                Value::Bytes(raw.to_vec())
            }
        }
    }
}

/// A whole perf-data file read at once: its prologue and entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub prologue: Prologue,
    pub entries: Vec<Entry>,
}

/// Parses a perf-data file's bytes (`path` names it in errors). A file whose JVM has not yet
/// set `accessible` is [`Error::NotReady`].
pub fn parse(path: &Path, bytes: &[u8]) -> Result<Parsed, Error> {
    parse_with_end(path, bytes).map(|(p, _)| p)
}

/// [`parse`], and the offset after its last entry.
fn parse_with_end(path: &Path, bytes: &[u8]) -> Result<(Parsed, usize), Error> {
    let prologue = parse_prologue(path, bytes)?;
    if !prologue.accessible {
        return Err(Error::NotReady { path: path.into() });
    }
    if (prologue.used as usize) > bytes.len() {
        return Err(Error::Truncated {
            path: path.into(),
            need: prologue.used as usize,
            have: bytes.len(),
        });
    }
    if (prologue.entry_offset as usize) < PROLOGUE_SIZE || prologue.entry_offset > prologue.used {
        return Err(Error::BadEntry {
            path: path.into(),
            index: 0,
            offset: 24,
            reason: format!(
                "entries said to start at byte {}, outside {PROLOGUE_SIZE}..{}",
                prologue.entry_offset, prologue.used
            ),
        });
    }
    let (entries, end) = parse_entries(path, bytes, &prologue, 0, prologue.entry_offset as usize)?;
    Ok((Parsed { prologue, entries }, end))
}

/// The perf-data file of a live JVM, mapped read-only: its counters, looked up by name once and
/// read as often as wanted.
pub struct PerfData {
    base: *const u8,
    len: usize,
    /// The file, kept open: whether the JVM has removed it (it does so as it exits).
    file: std::fs::File,
    pub path: PathBuf,
    pub prologue: Prologue,
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    /// Where the entry after the last one read begins.
    next_entry: usize,
}

// The mapping is read-only and only read with aligned loads.
unsafe impl Send for PerfData {}
unsafe impl Sync for PerfData {}

impl Drop for PerfData {
    fn drop(&mut self) {
        // SAFETY: the mapping made in open, of this length, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// A counter's handle: its place in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter(usize);

impl PerfData {
    /// Maps the perf-data file at `path` read-only and reads its entries. A file under
    /// `/proc/<pid>/root/` is opened inside that root (see `ns::open_reached`).
    pub fn open(path: &Path) -> Result<PerfData, Error> {
        let io = |e: std::io::Error| Error::Io { path: path.into(), reason: e.to_string() };
        let f = crate::ns::open_reached(path, libc::O_RDONLY | libc::O_NONBLOCK).map_err(io)?;
        let m = f.metadata().map_err(io)?;
        if !m.is_file() {
            return Err(Error::Io { path: path.into(), reason: "not a regular file".into() });
        }
        let len = m.len() as usize;
        if len < PROLOGUE_SIZE {
            let mut head = Vec::new();
            let _ = std::io::Read::read_to_end(
                &mut std::io::Read::take(&f, PROLOGUE_SIZE as u64),
                &mut head,
            );
            parse_prologue(path, &head)?;
            return Err(Error::Truncated { path: path.into(), need: PROLOGUE_SIZE, have: len });
        }
        // SAFETY: a read-only shared mapping of an open regular file of this length, unmapped in
        // Drop. The JVM never shrinks its file; reads stay below its length at open.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io(std::io::Error::last_os_error()));
        }
        // The observer must not wait on the file's pages (a slow /tmp): keep them in memory. A
        // refusal (RLIMIT_MEMLOCK) leaves them as they are.
        // SAFETY: the mapping just made.
        unsafe { libc::mlock(p, len) };
        // SAFETY: the mapping just made, `len` bytes; unmapped on every path below.
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        let parsed = match parse_with_end(path, bytes) {
            Ok(v) => v,
            Err(e) => {
                // SAFETY: the mapping just made, not used after this.
                unsafe { libc::munmap(p, len) };
                return Err(e);
            }
        };
        let (parsed, next_entry) = parsed;
        let by_name = parsed.entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(PerfData {
            base: p as *const u8,
            len,
            file: f,
            path: path.into(),
            prologue: parsed.prologue,
            entries: parsed.entries,
            by_name,
            next_entry,
        })
    }

    /// Whether the file has been removed: a JVM removes its own as it exits (measured 1-12 ms
    /// before the process is gone, inside its last safepoint), so this tells an exit from a stall.
    pub fn removed(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        self.file.metadata().is_ok_and(|m| m.nlink() == 0)
    }

    /// The mapping as bytes (a moving picture: the JVM writes it meanwhile).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping of `len` bytes, alive as long as self.
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }

    /// Reads entries the JVM added since the last look (it adds counters as subsystems start).
    /// Returns how many were added.
    pub fn refresh(&mut self) -> Result<usize, Error> {
        let p = parse_prologue(&self.path, self.bytes())?;
        if p.num_entries as usize <= self.entries.len() {
            return Ok(0);
        }
        let (added, end) = parse_entries(
            &self.path,
            self.bytes(),
            &p,
            self.entries.len() as u32,
            self.next_entry,
        )?;
        let n = added.len();
        for e in added {
            self.by_name.insert(e.name.clone(), self.entries.len());
            self.entries.push(e);
        }
        self.prologue = p;
        self.next_entry = end;
        Ok(n)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The counter named `name`, if the JVM has it.
    pub fn counter(&self, name: &str) -> Option<Counter> {
        self.by_name.get(name).map(|i| Counter(*i))
    }

    pub fn entry(&self, c: Counter) -> &Entry {
        &self.entries[c.0]
    }

    /// A 64-bit counter's value now: one aligned load (the JVM stores it whole). 0 for a
    /// counter that is not a scalar long.
    pub fn long(&self, c: Counter) -> i64 {
        let e = &self.entries[c.0];
        if e.kind != Kind::Long || e.vector_length != 0 {
            return 0;
        }
        // SAFETY: checked at parse to lie 8-aligned within the mapping.
        let raw = unsafe { std::ptr::read_volatile(self.base.add(e.data_offset) as *const u64) };
        match self.prologue.byte_order {
            ByteOrder::Little => u64::from_le(raw) as i64,
            ByteOrder::Big => u64::from_be(raw) as i64,
        }
    }

    /// A counter's value now, whatever it holds.
    pub fn value(&self, c: Counter) -> Value {
        let e = &self.entries[c.0];
        if e.kind == Kind::Long && e.vector_length == 0 {
            return Value::Long(self.long(c));
        }
        value_in(self.bytes(), self.prologue.byte_order, e)
    }

    /// The value of the counter named `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.counter(name).map(|c| self.value(c))
    }

    /// A 64-bit counter's value by name.
    pub fn get_long(&self, name: &str) -> Option<i64> {
        self.counter(name).filter(|c| self.entry(*c).kind == Kind::Long).map(|c| self.long(c))
    }

    /// A string counter's value by name.
    pub fn get_text(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The prologue as counters, named as `jstat -snap` names them (`sun.perfdata.*`).
    pub fn prologue_counters(&self) -> Vec<(String, Value)> {
        let p = &self.prologue;
        [
            ("sun.perfdata.majorVersion", p.major as i64),
            ("sun.perfdata.minorVersion", p.minor as i64),
            ("sun.perfdata.overflow", p.overflow as i64),
            ("sun.perfdata.size", self.len as i64),
            ("sun.perfdata.timestamp", p.mod_time_stamp),
            ("sun.perfdata.used", p.used as i64),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), Value::Long(v)))
        .collect()
    }

    /// Every counter and its value, in the file's order (what `jstat -snap` lists).
    pub fn snapshot(&self) -> Vec<(String, Value)> {
        (0..self.entries.len())
            .map(|i| (self.entries[i].name.clone(), self.value(Counter(i))))
            .collect()
    }
}

/// Where `pid`'s perf-data file is: `hsperfdata_<user>/<pid>` in the JVM's own `/tmp` (HotSpot
/// always uses `/tmp` on Linux, whatever `java.io.tmpdir` says), reached through
/// `/proc/<pid>/root` for a JVM in a container, named by its pid there. Several users' folders
/// may hold a file of that pid: the one owned by the JVM's user is it.
pub fn locate(pid: i32) -> Result<PathBuf, Error> {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(format!("/proc/{pid}"))
        .map_err(|e| Error::NotFound { pid, reason: format!("the process is not there ({e})") })?
        .uid();
    let nspid = crate::ns::nspid(pid);
    let tmp = crate::ns::reach(&crate::ns::root(pid), Path::new("/tmp"));
    let dirs = std::fs::read_dir(&tmp).map_err(|e| Error::NotFound {
        pid,
        reason: format!("cannot list {} ({e})", tmp.display()),
    })?;
    let mut denied = None;
    for d in dirs.flatten() {
        if !d.file_name().to_string_lossy().starts_with("hsperfdata_") {
            continue;
        }
        let f = d.path().join(nspid.to_string());
        match std::fs::symlink_metadata(&f) {
            Ok(m) if m.is_file() && m.uid() == owner => return Ok(f),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => denied = Some(d.path()),
            Err(_) => {}
        }
    }
    let flags = crate::jvms::cmdline(pid)
        .into_iter()
        .filter(|a| a == "-XX:-UsePerfData" || a == "-XX:+PerfDisableSharedMem")
        .collect::<Vec<_>>();
    let reason = match (flags.first(), denied) {
        (Some(flag), _) => format!("it was started with {flag}"),
        (None, Some(d)) => format!(
            "{} cannot be read by this user (the JVM's user, uid {owner}, or root can)",
            d.display()
        ),
        (None, None) => format!(
            "no {}/hsperfdata_*/{nspid} (started with -XX:-UsePerfData or -XX:+PerfDisableSharedMem, or its /tmp is not this one)",
            tmp.display()
        ),
    };
    Err(Error::NotFound { pid, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A perf-data file as HotSpot lays it out: the prologue, then each entry's header, its
    /// name (NUL-ended, padded to 8) and its value (8-aligned).
    pub fn build(order: ByteOrder, entries: &[(&str, Value, u8, u8)]) -> Vec<u8> {
        let i32b = |v: i32| match order {
            ByteOrder::Big => v.to_be_bytes(),
            ByteOrder::Little => v.to_le_bytes(),
        };
        let i64b = |v: i64| match order {
            ByteOrder::Big => v.to_be_bytes(),
            ByteOrder::Little => v.to_le_bytes(),
        };
        let mut body = Vec::new();
        for (name, value, units, variability) in entries {
            let name_off = ENTRY_HEADER_SIZE;
            let name_len = (name.len() + 1).div_ceil(8) * 8;
            let data_off = (name_off + name_len).div_ceil(8) * 8 + 4;
            let data_off = data_off.div_ceil(8) * 8;
            let (kind, vlen, data): (u8, i32, Vec<u8>) = match value {
                Value::Long(v) => (b'J', 0, i64b(*v).to_vec()),
                Value::Text(s) => {
                    let mut d = s.as_bytes().to_vec();
                    d.resize(s.len() + 8, 0);
                    (b'B', d.len() as i32, d)
                }
                Value::Bytes(b) => (b'B', b.len() as i32, b.clone()),
            };
            let len = (data_off + data.len()).div_ceil(8) * 8;
            let start = PROLOGUE_SIZE + body.len();
            assert_eq!(start % 8, 0);
            let mut e = vec![0u8; len];
            e[0..4].copy_from_slice(&i32b(len as i32));
            e[4..8].copy_from_slice(&i32b(name_off as i32));
            e[8..12].copy_from_slice(&i32b(vlen));
            e[12] = kind;
            e[13] = 1;
            e[14] = *units;
            e[15] = *variability;
            e[16..20].copy_from_slice(&i32b(data_off as i32));
            e[name_off..name_off + name.len()].copy_from_slice(name.as_bytes());
            e[data_off..data_off + data.len()].copy_from_slice(&data);
            body.extend(e);
        }
        let mut f = Vec::with_capacity(PROLOGUE_SIZE + body.len());
        f.extend(MAGIC);
        f.push(if order == ByteOrder::Little { 1 } else { 0 });
        f.extend([2, 0, 1]);
        f.extend(i32b((PROLOGUE_SIZE + body.len()) as i32));
        f.extend(i32b(0));
        f.extend(i64b(12345));
        f.extend(i32b(PROLOGUE_SIZE as i32));
        f.extend(i32b(entries.len() as i32));
        f.extend(body);
        f
    }

    fn sample(order: ByteOrder) -> Vec<u8> {
        build(
            order,
            &[
                ("sun.rt.safepoints", Value::Long(7), 4, 2),
                ("sun.os.hrt.frequency", Value::Long(1_000_000_000), 6, 1),
                ("java.property.java.vm.version", Value::Text("17.0.15+6".into()), 5, 1),
                ("sun.rt.safepointSyncTime", Value::Long(-3), 3, 2),
            ],
        )
    }

    #[test]
    fn a_file_in_either_byte_order_gives_its_counters() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let b = sample(order);
            let p = parse(Path::new("f"), &b).unwrap();
            assert_eq!(p.prologue.byte_order, order);
            let v: Vec<(String, Value)> =
                p.entries.iter().map(|e| (e.name.clone(), value_in(&b, order, e))).collect();
            assert_eq!(v[0], ("sun.rt.safepoints".into(), Value::Long(7)));
            assert_eq!(
                v[2],
                ("java.property.java.vm.version".into(), Value::Text("17.0.15+6".into()))
            );
            assert_eq!(v[3].1, Value::Long(-3));
            assert_eq!(
                (p.entries[1].units, p.entries[1].variability),
                (Units::Hertz, Variability::Constant)
            );
        }
    }

    #[test]
    fn every_cut_of_a_file_is_an_error_naming_it_never_a_panic() {
        let b = sample(ByteOrder::Little);
        for n in 0..b.len() {
            let e = parse(Path::new("/tmp/hsperfdata_x/42"), &b[..n]).unwrap_err();
            assert!(e.to_string().starts_with("/tmp/hsperfdata_x/42: "), "{e}");
            assert!(matches!(e, Error::Truncated { .. }), "{n}: {e}");
        }
    }

    #[test]
    fn foreign_and_unfinished_files_say_what_they_are() {
        let e = parse(
            Path::new("x"),
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a JVM perf-data file"), "{e}");
        let mut b = sample(ByteOrder::Little);
        b[7] = 0;
        assert!(matches!(parse(Path::new("x"), &b), Err(Error::NotReady { .. })));
        let mut b = sample(ByteOrder::Little);
        b[5] = 1;
        assert!(parse(Path::new("x"), &b).unwrap_err().to_string().contains("version 1.0"));
    }

    #[test]
    fn an_entry_pointing_outside_the_file_is_refused() {
        let mut b = sample(ByteOrder::Little);
        let first = PROLOGUE_SIZE;
        // The first entry's data offset, far past its end.
        b[first + 16..first + 20].copy_from_slice(&4000i32.to_le_bytes());
        let e = parse(Path::new("x"), &b).unwrap_err();
        assert!(matches!(e, Error::BadEntry { index: 0, .. }), "{e}");
        let mut b = sample(ByteOrder::Little);
        b[first..first + 4].copy_from_slice(&(-8i32).to_le_bytes());
        assert!(parse(Path::new("x"), &b).unwrap_err().to_string().contains("length -8"));
    }

    #[test]
    fn a_mapped_file_is_read_live_and_grows_with_new_counters() {
        let dir = std::env::temp_dir().join(format!("procwatch-perfdata-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("1");
        let mut b = sample(ByteOrder::Little);
        b.resize(4096, 0);
        std::fs::write(&path, &b).unwrap();
        let mut pd = PerfData::open(&path).unwrap();
        let c = pd.counter("sun.rt.safepoints").unwrap();
        assert_eq!(pd.long(c), 7);
        assert_eq!(pd.get_text("java.property.java.vm.version").as_deref(), Some("17.0.15+6"));
        // The JVM bumps a counter: the mapping sees it without a reopen.
        let at = pd.entry(c).data_offset;
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(at as u64)).unwrap();
        std::io::Write::write_all(&mut f, &8i64.to_le_bytes()).unwrap();
        assert_eq!(pd.long(c), 8);
        // A counter added later (the entries of a bigger file, the same prefix).
        let mut grown = build(
            ByteOrder::Little,
            &[
                ("sun.rt.safepoints", Value::Long(8), 4, 2),
                ("sun.os.hrt.frequency", Value::Long(1_000_000_000), 6, 1),
                ("java.property.java.vm.version", Value::Text("17.0.15+6".into()), 5, 1),
                ("sun.rt.safepointSyncTime", Value::Long(-3), 3, 2),
                ("sun.gc.cause", Value::Text("System.gc()".into()), 5, 3),
            ],
        );
        grown.resize(4096, 0);
        std::fs::write(&path, &grown).unwrap();
        assert_eq!(pd.refresh().unwrap(), 1);
        assert_eq!(pd.get_text("sun.gc.cause").as_deref(), Some("System.gc()"));
        assert_eq!(pd.snapshot().len(), 5);
        drop(pd);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_process_without_counters_says_why() {
        let e = locate(i32::MAX).unwrap_err();
        assert!(e.to_string().contains("not there"), "{e}");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn value() -> impl Strategy<Value = Value> {
            prop_oneof![any::<i64>().prop_map(Value::Long), "[ -~]{0,40}".prop_map(Value::Text)]
        }

        proptest! {
            #[test]
            fn what_is_built_is_read_back(entries in proptest::collection::vec(("[a-z][a-zA-Z0-9._]{0,60}", value()), 0..40), little in any::<bool>()) {
                let order = if little { ByteOrder::Little } else { ByteOrder::Big };
                let spec: Vec<(&str, Value, u8, u8)> = entries.iter().map(|(n, v)| (n.as_str(), v.clone(), if matches!(v, Value::Text(_)) { 5 } else { 4 }, 2)).collect();
                let b = build(order, &spec);
                let p = parse(Path::new("f"), &b).unwrap();
                prop_assert_eq!(p.entries.len(), entries.len());
                for (e, (n, v)) in p.entries.iter().zip(&entries) {
                    prop_assert_eq!(&e.name, n);
                    prop_assert_eq!(&value_in(&b, order, e), v);
                }
            }

            #[test]
            fn any_damage_is_an_error_or_a_reading_never_a_panic(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..16), cut in any::<prop::sample::Index>()) {
                let mut b = sample(ByteOrder::Little);
                for (at, v) in flips {
                    let i = at.index(b.len());
                    b[i] = v;
                }
                let n = cut.index(b.len() + 1);
                if let Ok(p) = parse(Path::new("f"), &b[..n]) {
                    for e in &p.entries {
                        let _ = value_in(&b[..n], p.prologue.byte_order, e);
                        prop_assert!(e.data_offset < n);
                    }
                }
            }

            #[test]
            fn random_bytes_are_never_taken_for_counters(b in proptest::collection::vec(any::<u8>(), 0..512)) {
                let _ = parse(Path::new("f"), &b);
            }
        }
    }
}
