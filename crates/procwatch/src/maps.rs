//! `/proc/<pid>/maps`: which mapping (module, file, or anonymous region) an address is in.
//!
//! Invariant: a snapshot; lookups are binary searches over it, so a culprit's pc is resolved
//! without reading `/proc` again.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub perms: String,
    pub offset: u64,
    /// `major:minor` of the backing device.
    pub dev: String,
    pub inode: u64,
    /// The file, `[heap]`, `[stack]`, `[vdso]`…, or empty for anonymous memory.
    pub path: String,
}

impl Mapping {
    pub fn is_file(&self) -> bool {
        is_file(self.inode, &self.path)
    }

    /// A file mapped shared and writable (`rw-s`): its writes go to the file, and a write can
    /// wait for the page's writeback.
    pub fn is_shared_writable_file(&self) -> bool {
        is_shared_writable_file(&self.perms, self.inode, &self.path)
    }
}

/// Whether a mapping with this inode and path is a file's (not anonymous memory, the heap, the
/// stack or the vDSO). Also for the recording's copy of a mapping.
pub fn is_file(inode: u64, path: &str) -> bool {
    inode != 0 && path.starts_with('/')
}

/// Whether a mapping is of a file mapped shared and writable (`rw-s`).
pub fn is_shared_writable_file(perms: &str, inode: u64, path: &str) -> bool {
    let p = perms.as_bytes();
    is_file(inode, path) && p.len() >= 4 && p[1] == b'w' && p[3] == b's'
}

/// The entry holding `addr` among entries sorted by their start, each `range` (start, end).
pub fn find_by<T>(entries: &[T], addr: u64, range: impl Fn(&T) -> (u64, u64)) -> Option<&T> {
    let i = entries.partition_point(|m| range(m).0 <= addr);
    entries.get(i.checked_sub(1)?).filter(|m| addr < range(m).1)
}

/// Parses the text of a maps file. Malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut v: Vec<Mapping> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(6, ' ');
            let range = f.next()?;
            let perms = f.next()?.to_string();
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let dev = f.next()?.to_string();
            let inode = f.next()?.parse().ok()?;
            let path = f.next().unwrap_or("").trim_start().to_string();
            let (a, b) = range.split_once('-')?;
            Some(Mapping {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                perms,
                offset,
                dev,
                inode,
                path,
            })
        })
        .collect();
    v.sort_by_key(|m| m.start);
    v
}

pub fn read(pid: i32) -> std::io::Result<Vec<Mapping>> {
    Ok(parse(&std::fs::read_to_string(format!("/proc/{pid}/maps"))?))
}

/// The mapping holding `addr`.
pub fn lookup(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    find_by(maps, addr, |m| (m.start, m.end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_writable_files_are_rw_s_with_a_file() {
        let m = parse(
            "1000-2000 rw-s 00000000 00:27 7 /tmp/hsperfdata_root/42\n2000-3000 r--s 00000000 fe:00 8 /usr/lib/jvm/lib/modules\n3000-4000 rw-p 00000000 fe:00 9 /data/x\n4000-5000 rw-s 00000000 00:01 0 /SYSV00000000 (deleted)\n",
        );
        let w: Vec<bool> = m.iter().map(Mapping::is_shared_writable_file).collect();
        assert_eq!(w, [true, false, false, false]);
    }

    #[test]
    fn finds_the_mapping_of_an_address() {
        let text = "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/java\n\
                    7f0000000000-7f0000100000 r--s 00001000 fe:00 1234        /data/test dat.bin\n\
                    7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n\
                    garbage line\n";
        let m = parse(text);
        assert_eq!(m.len(), 3);
        assert_eq!(lookup(&m, 0x7f0000000800).unwrap().path, "/data/test dat.bin");
        assert!(lookup(&m, 0x7f0000000800).unwrap().is_file());
        assert!(!lookup(&m, 0x7f0000200010).unwrap().is_file());
        assert!(lookup(&m, 0x7f0000150000).is_none());
        assert!(lookup(&m, 0x10).is_none());
        assert!(!read(std::process::id() as i32).unwrap().is_empty());
    }
}
