//! Reading a `/proc` or cgroup file whole, in as few system calls as it allows.
//!
//! `std::fs::read_to_string` asks such a file its size (`statx`: 0), then reads it in small
//! probes that double from 32 bytes: nine reads for `/proc/vmstat`, each one a pass of the
//! kernel's `seq_file` code. A stall's system sample reads a dozen of them every 50 ms. Here one
//! open, one read into a buffer large enough for nearly all of them, one read that finds the
//! end (a short read is not the end: `seq_file` may stop early), and one close.

use std::io::Read;
use std::path::Path;

/// Enough for `/proc/vmstat`, `/proc/interrupts` on a few dozen CPUs, a cgroup's `memory.stat`
/// and a process's `status`; a larger file is read on into a buffer twice the size, and so on.
const FIRST_READ: usize = 16 << 10;

/// The file's whole text (invalid UTF-8 is an error, as with `std::fs::read_to_string`).
pub fn read(path: impl AsRef<Path>) -> std::io::Result<String> {
    let mut buf = Vec::new();
    read_into(path, &mut buf)?;
    String::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The same into `buf` (its allocation kept from one file to the next: a look at every process
/// reads hundreds), as text.
pub fn read_into(path: impl AsRef<Path>, buf: &mut Vec<u8>) -> std::io::Result<&str> {
    let mut f = std::fs::File::open(path)?;
    buf.clear();
    buf.resize(FIRST_READ.max(buf.capacity()), 0);
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(got) => n += got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    std::str::from_utf8(buf).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proc_file_is_read_whole_whatever_its_size() {
        // Small, a few KiB, and a regular file larger than the first read.
        let stat = read("/proc/self/stat").unwrap();
        assert!(stat.starts_with(&format!("{} (", std::process::id())), "{stat}");
        let maps = read("/proc/self/maps").unwrap();
        assert!(maps.lines().count() > 3 && maps.ends_with('\n'), "{maps}");
        let big = std::env::temp_dir().join(format!("procfile-{}", std::process::id()));
        let text = "x".repeat(3 * FIRST_READ + 5);
        std::fs::write(&big, &text).unwrap();
        let got = read(&big);
        std::fs::remove_file(&big).unwrap();
        assert_eq!(got.unwrap(), text);
        assert_eq!(read("/nonexistent/file").unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }
}
