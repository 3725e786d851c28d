//! The FUSE passthrough filesystem: every operation goes to the backing directory; reads of
//! matching files (including page-ins of mmapped files, which arrive as FUSE reads) are delayed
//! or fail with EIO, and writes and fsyncs of them are delayed.
//!
//! Invariant: a delayed read or write never holds a lock or a FUSE worker while it sleeps. It is
//! answered from its own thread, so any number of readers wait in parallel (unreliablefs
//! serialises them on one global lock; this does not).

use super::control::{CONTROL_NAME, Settings};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use recording::notice::{Kind, Notices};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const TTL: Duration = Duration::from_secs(1);
const CONTROL_INO: u64 = 2;
/// Backing inode numbers are shifted by this so they never meet ROOT (1) or CONTROL (2).
const INO_SHIFT: u64 = 16;

pub struct SlowFs {
    root: PathBuf,
    settings: Arc<Settings>,
    /// Where the FUSE threads' warnings go.
    notices: Notices,
    /// FUSE inode → backing path (relative to the root). Read-mostly: lookups add entries.
    paths: RwLock<HashMap<u64, PathBuf>>,
    handles: RwLock<HashMap<u64, Arc<File>>>,
    next_fh: AtomicU64,
    rng: AtomicU64,
}

fn errno(e: std::io::Error) -> Errno {
    Errno::from(e)
}

fn system_time(secs: i64, nsec: i64) -> SystemTime {
    if secs >= 0 { UNIX_EPOCH + Duration::new(secs as u64, nsec as u32) } else { UNIX_EPOCH }
}

impl SlowFs {
    pub fn new(root: PathBuf, settings: Arc<Settings>, notices: Notices) -> SlowFs {
        SlowFs {
            root,
            settings,
            notices,
            paths: RwLock::new(HashMap::new()),
            handles: RwLock::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            rng: AtomicU64::new(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64),
        }
    }

    fn rel(&self, ino: INodeNo) -> Option<PathBuf> {
        if ino.0 == INodeNo::ROOT.0 {
            return Some(PathBuf::new());
        }
        self.paths.read().ok()?.get(&ino.0).cloned()
    }

    fn attr(&self, ino: u64, m: &Metadata) -> FileAttr {
        let kind = match m.mode() & libc::S_IFMT {
            libc::S_IFDIR => FileType::Directory,
            libc::S_IFLNK => FileType::Symlink,
            libc::S_IFIFO => FileType::NamedPipe,
            libc::S_IFSOCK => FileType::Socket,
            libc::S_IFCHR => FileType::CharDevice,
            libc::S_IFBLK => FileType::BlockDevice,
            _ => FileType::RegularFile,
        };
        FileAttr {
            ino: INodeNo(ino),
            size: m.size(),
            blocks: m.blocks(),
            atime: system_time(m.atime(), m.atime_nsec()),
            mtime: system_time(m.mtime(), m.mtime_nsec()),
            ctime: system_time(m.ctime(), m.ctime_nsec()),
            crtime: system_time(m.ctime(), m.ctime_nsec()),
            kind,
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            flags: 0,
            blksize: m.blksize() as u32,
        }
    }

    fn control_attr(&self) -> FileAttr {
        let now = SystemTime::now();
        FileAttr {
            ino: INodeNo(CONTROL_INO),
            size: self.settings.render().len() as u64,
            blocks: 1,
            atime: now,
            mtime: now,
            ctime: now,
            crtime: now,
            kind: FileType::RegularFile,
            perm: 0o600,
            nlink: 1,
            uid: unsafe { libc::geteuid() },
            gid: unsafe { libc::getegid() },
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// Stats a backing path and records its inode.
    fn stat(&self, rel: &Path) -> std::io::Result<FileAttr> {
        let m = std::fs::symlink_metadata(self.root.join(rel))?;
        let ino = if rel.as_os_str().is_empty() { INodeNo::ROOT.0 } else { m.ino() + INO_SHIFT };
        if ino != INodeNo::ROOT.0
            && let Ok(mut p) = self.paths.write()
        {
            p.entry(ino).or_insert_with(|| rel.to_path_buf());
        }
        Ok(self.attr(ino, &m))
    }

    fn random(&self) -> u64 {
        // xorshift on a shared word: races only reuse a value, which is harmless here.
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        x
    }

    fn new_handle(&self, f: File) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut h) = self.handles.write() {
            h.insert(fh, Arc::new(f));
        }
        FileHandle(fh)
    }

    fn handle(&self, fh: FileHandle) -> Option<Arc<File>> {
        self.handles.read().ok()?.get(&fh.0).cloned()
    }

    /// How long a write or fsync of `ino` waits: the write delay and jitter, for matching files.
    fn write_delay(&self, ino: INodeNo) -> u64 {
        let st = &self.settings;
        let base = st.write_delay_ns.load(Ordering::Relaxed);
        if base == 0 || !self.rel(ino).is_some_and(|r| st.matches(&r)) {
            return 0;
        }
        let jitter = st.jitter_ns.load(Ordering::Relaxed);
        (base + if jitter > 0 { self.random() % (jitter + 1) } else { 0 }).min(st.max_delay_ns)
    }
}

fn read_at(f: &File, offset: u64, size: u32) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; size as usize];
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

impl Filesystem for SlowFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == INodeNo::ROOT.0 && name == CONTROL_NAME {
            return reply.entry(&Duration::ZERO, &self.control_attr(), Generation(0));
        }
        let Some(dir) = self.rel(parent) else { return reply.error(Errno::ENOENT) };
        match self.stat(&dir.join(name)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if ino.0 == CONTROL_INO {
            return reply.attr(&Duration::ZERO, &self.control_attr());
        }
        let Some(rel) = self.rel(ino) else { return reply.error(Errno::ENOENT) };
        match self.stat(&rel) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if ino.0 == CONTROL_INO {
            // Writers truncate the control file before writing settings; nothing to do.
            return reply.attr(&Duration::ZERO, &self.control_attr());
        }
        let Some(rel) = self.rel(ino) else { return reply.error(Errno::ENOENT) };
        let path = self.root.join(&rel);
        let result = (|| -> std::io::Result<()> {
            if let Some(m) = mode {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m & 0o7777))?;
            }
            if let Some(s) = size {
                OpenOptions::new().write(true).open(&path)?.set_len(s)?;
            }
            Ok(())
        })();
        match result.and_then(|_| self.stat(&rel)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 == CONTROL_INO {
            return reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO);
        }
        let Some(rel) = self.rel(ino) else { return reply.error(Errno::ENOENT) };
        let acc = flags.0 & libc::O_ACCMODE;
        let opened = OpenOptions::new()
            .read(acc == libc::O_RDONLY || acc == libc::O_RDWR)
            .write(acc == libc::O_WRONLY || acc == libc::O_RDWR)
            .custom_flags(flags.0 & (libc::O_APPEND | libc::O_TRUNC))
            .open(self.root.join(&rel));
        match opened {
            // Keep the page cache across opens: an evicted page must come back through a
            // (slow) read, a warmed one must stay warm.
            Ok(f) => reply.opened(self.new_handle(f), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        if ino.0 == CONTROL_INO {
            let text = self.settings.render();
            let start = (offset as usize).min(text.len());
            let end = (start + size as usize).min(text.len());
            return reply.data(&text.as_bytes()[start..end]);
        }
        let Some(file) = self.handle(fh) else { return reply.error(Errno::EBADF) };
        let st = &self.settings;
        st.stats.reads.fetch_add(1, Ordering::Relaxed);
        let affected = self.rel(ino).is_some_and(|r| st.matches(&r));
        if !affected {
            return match read_at(&file, offset, size) {
                Ok(d) => reply.data(&d),
                Err(e) => reply.error(errno(e)),
            };
        }
        let ppm = st.error_ppm.load(Ordering::Relaxed);
        let fail = ppm > 0 && self.random() % 1_000_000 < ppm;
        let jitter = st.jitter_ns.load(Ordering::Relaxed);
        let delay = (st.read_delay_ns.load(Ordering::Relaxed)
            + if jitter > 0 { self.random() % (jitter + 1) } else { 0 })
        .min(st.max_delay_ns);
        if fail {
            st.stats.failed.fetch_add(1, Ordering::Relaxed);
        }
        if delay == 0 {
            return if fail {
                reply.error(Errno::EIO)
            } else {
                match read_at(&file, offset, size) {
                    Ok(d) => reply.data(&d),
                    Err(e) => reply.error(errno(e)),
                }
            };
        }
        st.stats.delayed.fetch_add(1, Ordering::Relaxed);
        st.stats.delayed_ns.fetch_add(delay, Ordering::Relaxed);
        let spawned = std::thread::Builder::new().name("slowfs-delay".into()).spawn(move || {
            std::thread::sleep(Duration::from_nanos(delay));
            if fail {
                reply.error(Errno::EIO);
            } else {
                match read_at(&file, offset, size) {
                    Ok(d) => reply.data(&d),
                    Err(e) => reply.error(errno(e)),
                }
            }
        });
        if let Err(e) = spawned {
            self.notices.tell(
                "slowfs",
                Kind::Warning,
                format!("cannot start a delay thread ({e}); this read fails with EAGAIN"),
            );
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if ino.0 == CONTROL_INO {
            return match std::str::from_utf8(data)
                .map_err(|_| "not UTF-8".to_string())
                .and_then(|t| self.settings.apply(t))
            {
                Ok(()) => {
                    self.notices.tell(
                        "slowfs",
                        Kind::Progress,
                        format!(
                            "settings now {}",
                            self.settings.render().lines().take(4).collect::<Vec<_>>().join(", ")
                        ),
                    );
                    reply.written(data.len() as u32)
                }
                Err(msg) => {
                    self.notices.tell(
                        "slowfs",
                        Kind::Warning,
                        format!("control write refused: {msg}"),
                    );
                    reply.error(Errno::EINVAL)
                }
            };
        }
        let Some(file) = self.handle(fh) else { return reply.error(Errno::EBADF) };
        let st = &self.settings;
        st.stats.writes.fetch_add(1, Ordering::Relaxed);
        let write = move |reply: ReplyWrite, data: &[u8]| match file.write_all_at(data, offset) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(errno(e)),
        };
        let delay = self.write_delay(ino);
        if delay == 0 {
            return write(reply, data);
        }
        st.stats.delayed_writes.fetch_add(1, Ordering::Relaxed);
        let data = data.to_vec();
        let spawned = std::thread::Builder::new().name("slowfs-delay".into()).spawn(move || {
            std::thread::sleep(Duration::from_nanos(delay));
            write(reply, &data);
        });
        if let Err(e) = spawned {
            self.notices.tell(
                "slowfs",
                Kind::Warning,
                format!("cannot start a delay thread ({e}); this write fails with EAGAIN"),
            );
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(file) = self.handle(fh) else { return reply.ok() };
        let sync = move |reply: ReplyEmpty| match if datasync {
            file.sync_data()
        } else {
            file.sync_all()
        } {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        };
        let delay = self.write_delay(ino);
        if delay == 0 {
            return sync(reply);
        }
        let spawned = std::thread::Builder::new().name("slowfs-delay".into()).spawn(move || {
            std::thread::sleep(Duration::from_nanos(delay));
            sync(reply);
        });
        if let Err(e) = spawned {
            self.notices.tell(
                "slowfs",
                Kind::Warning,
                format!("cannot start a delay thread ({e}); this fsync fails with EAGAIN"),
            );
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if let Ok(mut h) = self.handles.write() {
            h.remove(&fh.0);
        }
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(rel) = self.rel(ino) else { return reply.error(Errno::ENOENT) };
        let mut entries: Vec<(u64, FileType, std::ffi::OsString)> = vec![
            (ino.0, FileType::Directory, ".".into()),
            (ino.0, FileType::Directory, "..".into()),
        ];
        if ino.0 == INodeNo::ROOT.0 {
            entries.push((CONTROL_INO, FileType::RegularFile, CONTROL_NAME.into()));
        }
        let dir = match std::fs::read_dir(self.root.join(&rel)) {
            Ok(d) => d,
            Err(e) => return reply.error(errno(e)),
        };
        for e in dir.flatten() {
            let kind = match e.file_type() {
                Ok(t) if t.is_dir() => FileType::Directory,
                Ok(t) if t.is_symlink() => FileType::Symlink,
                _ => FileType::RegularFile,
            };
            let ino = e.metadata().map(|m| m.ino() + INO_SHIFT).unwrap_or(0);
            if let Ok(mut p) = self.paths.write() {
                p.entry(ino).or_insert_with(|| rel.join(e.file_name()));
            }
            entries.push((ino, kind, e.file_name()));
        }
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(ino), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let Some(dir) = self.rel(parent) else { return reply.error(Errno::ENOENT) };
        let rel = dir.join(name);
        let acc = flags & libc::O_ACCMODE;
        let opened = OpenOptions::new()
            .read(acc != libc::O_WRONLY)
            .write(true)
            .create(true)
            .custom_flags(flags & (libc::O_APPEND | libc::O_TRUNC | libc::O_EXCL))
            .mode(mode & !umask & 0o7777)
            .open(self.root.join(&rel));
        match opened.and_then(|f| Ok((f, self.stat(&rel)?))) {
            Ok((f, a)) => reply.created(
                &TTL,
                &a,
                Generation(0),
                self.new_handle(f),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let Some(dir) = self.rel(parent) else { return reply.error(Errno::ENOENT) };
        let rel = dir.join(name);
        let made = std::fs::create_dir(self.root.join(&rel)).and_then(|_| {
            std::fs::set_permissions(
                self.root.join(&rel),
                std::fs::Permissions::from_mode(mode & !umask & 0o7777),
            )
        });
        match made.and_then(|_| self.stat(&rel)) {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(dir) = self.rel(parent) else { return reply.error(Errno::ENOENT) };
        match std::fs::remove_file(self.root.join(dir.join(name))) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let Some(dir) = self.rel(parent) else { return reply.error(Errno::ENOENT) };
        match std::fs::remove_dir(self.root.join(dir.join(name))) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c =
            std::ffi::CString::new(self.root.as_os_str().as_encoded_bytes()).unwrap_or_default();
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a valid C string and an out-parameter of the right type.
        if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
            return reply.error(errno(std::io::Error::last_os_error()));
        }
        reply.statfs(
            s.f_blocks,
            s.f_bfree,
            s.f_bavail,
            s.f_files,
            s.f_ffree,
            s.f_bsize as u32,
            s.f_namemax as u32,
            s.f_frsize as u32,
        );
    }
}
