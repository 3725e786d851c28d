//! Log inputs as the user names them: files, `-` for stdin, gzip (by content, whatever the
//! name), and rotated sets (`gc.log`, `gc.log.0`, `gc.log.1`, … and JDK 8's `gc.log.2.current`)
//! put in time order.
//!
//! Invariant: every input is read once, in order, and each error names the file it is about.

use anyhow::{Context, Result};
use hotspot_log::Stamps;
use hotspot_log::line::line_stamps;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One input to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    Stdin,
    File(PathBuf),
}

impl Input {
    pub fn display(&self) -> String {
        match self {
            Input::Stdin => "<stdin>".to_string(),
            Input::File(p) => p.display().to_string(),
        }
    }
}

/// The inputs to read, in order, and the rotated sets that were expanded (for the summary).
#[derive(Debug, Default)]
pub struct Plan {
    pub inputs: Vec<Input>,
    /// `(base name, number of files)` for each set found beside a named file.
    pub rotated: Vec<(String, usize)>,
}

/// Expands the user's arguments into the files to read.
pub fn plan(args: &[String], expand_rotated: bool) -> Result<Plan> {
    let mut plan = Plan::default();
    for a in args {
        if a == "-" {
            plan.inputs.push(Input::Stdin);
            continue;
        }
        let p = PathBuf::from(a);
        let meta = std::fs::metadata(&p).with_context(|| format!("{a}: cannot read it"))?;
        if meta.is_dir() {
            anyhow::bail!(
                "{a}: is a directory; name the log files in it (for a recording directory use `stallscope report {a}`)"
            );
        }
        if !meta.is_file() {
            // A FIFO or socket would block the open (or the read) forever, waiting for a writer.
            anyhow::bail!(
                "{a}: is not a regular file ({}); to read a pipe, feed it to stdin: `stallscope logs - < {a}`",
                file_kind(&meta)
            );
        }
        let set = if expand_rotated { rotated_set(&p)? } else { vec![p.clone()] };
        if set.len() > 1 {
            plan.rotated.push((base_of(&p).display().to_string(), set.len()));
        }
        for f in order_by_time(set) {
            let input = Input::File(f);
            if !plan.inputs.contains(&input) {
                plan.inputs.push(input);
            }
        }
    }
    Ok(plan)
}

/// What a non-regular file is, in words.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a plain file"
    }
}

/// `gc.log.3` and `gc.log.2.current` belong to the set named `gc.log`.
fn base_of(p: &Path) -> PathBuf {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let trimmed = name.strip_suffix(".gz").unwrap_or(&name);
    let trimmed = trimmed.strip_suffix(".current").unwrap_or(trimmed);
    match trimmed.rsplit_once('.') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            p.with_file_name(base)
        }
        _ => p.to_path_buf(),
    }
}

/// The named file and every rotation sibling of it in the same directory.
fn rotated_set(p: &Path) -> Result<Vec<PathBuf>> {
    let base = base_of(p);
    let dir = match base.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base_name = base.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut set = Vec::new();
    if base.is_file() {
        set.push(base.clone());
    }
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(_) => return Ok(vec![p.to_path_buf()]),
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&base_name).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        let rest = rest.strip_suffix(".gz").unwrap_or(rest);
        let rest = rest.strip_suffix(".current").unwrap_or(rest);
        if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && e.path().is_file() {
            set.push(base.with_file_name(&name));
        }
    }
    if !set.iter().any(|f| f == p) {
        set.push(p.to_path_buf());
    }
    Ok(set)
}

struct Candidate {
    path: PathBuf,
    first: Stamps,
    last: Stamps,
    mtime: Option<SystemTime>,
}

/// Sorts a rotated set oldest first. Wall-clock or monotonic stamps decide when every file has
/// them. With uptime only, uptime decides when the files' ranges chain without overlapping
/// (one JVM run); otherwise the set spans restarts and modification times decide, since
/// rotation writes files strictly in turn.
fn order_by_time(set: Vec<PathBuf>) -> Vec<PathBuf> {
    if set.len() < 2 {
        return set;
    }
    let mut info: Vec<Candidate> = set
        .into_iter()
        .map(|path| {
            let first = first_stamps(&path).unwrap_or_default();
            let last = last_stamps(&path).unwrap_or_default();
            let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            Candidate { path, first, last, mtime }
        })
        .collect();
    let all = |info: &[Candidate], f: &dyn Fn(&Stamps) -> bool| info.iter().all(|c| f(&c.first));
    if all(&info, &|s| s.wall.is_some()) {
        info.sort_by_key(|c| c.first.wall.map(|w| w.epoch_ms));
    } else if all(&info, &|s| s.mono_ns.is_some()) {
        info.sort_by_key(|c| c.first.mono_ns);
    } else {
        let mut by_uptime: Vec<&Candidate> = info.iter().collect();
        by_uptime.sort_by_key(|c| c.first.uptime_ns);
        let chains =
            by_uptime.iter().all(|c| c.first.uptime_ns.is_some() && c.last.uptime_ns.is_some())
                && by_uptime.windows(2).all(|w| w[0].last.uptime_ns <= w[1].first.uptime_ns);
        if chains {
            info.sort_by_key(|c| c.first.uptime_ns);
        } else {
            info.sort_by_key(|c| c.mtime);
        }
    }
    info.into_iter().map(|c| c.path).collect()
}

/// The stamps of the last stamped line in a file's final 64 KiB (plain files only).
fn last_stamps(p: &Path) -> Option<Stamps> {
    use std::io::{Seek, SeekFrom};
    let mut f = File::open(p).ok()?;
    let mut head = [0u8; 2];
    if f.read(&mut head).ok()? == 2 && head == [0x1f, 0x8b] {
        return None;
    }
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    tail.rsplit(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .take(64)
        .map(line_stamps)
        .find(|s| !s.is_empty())
}

fn first_stamps(p: &Path) -> Option<Stamps> {
    let r = open_path(p).ok()?;
    let mut br = BufReader::new(r.take(1 << 20));
    let mut line = Vec::new();
    for _ in 0..64 {
        line.clear();
        if br.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let s = line_stamps(line.strip_suffix(b"\n").unwrap_or(&line));
        if !s.is_empty() {
            return Some(s);
        }
    }
    None
}

/// A reader that ends quietly where a gzip stream was cut short, and remembers that it did.
pub struct Tolerant<R> {
    inner: R,
    pub truncated: bool,
    pub gzip: bool,
}

impl<R: Read> Read for Tolerant<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Err(e) if self.gzip && e.kind() == io::ErrorKind::UnexpectedEof => {
                self.truncated = true;
                Ok(0)
            }
            r => r,
        }
    }
}

/// Maps an input to read in place: a regular, non-empty file that is not gzip. `None` for
/// anything to read as a stream ([`open`]).
pub fn map(input: &Input) -> Result<Option<super::mapped::Mapped>> {
    let Input::File(p) = input else { return Ok(None) };
    let f = File::open(p).with_context(|| format!("{}: cannot open it", p.display()))?;
    let m = super::mapped::Mapped::of(&f)
        .with_context(|| format!("{}: cannot open it", p.display()))?;
    Ok(m.filter(|m| !m.is_gzip()))
}

/// Opens an input, decompressing gzip when its first bytes say so.
pub fn open(input: &Input) -> Result<Tolerant<Box<dyn Read>>> {
    match input {
        Input::Stdin => sniff(Box::new(io::stdin().lock())).context("<stdin>"),
        Input::File(p) => open_path(p).with_context(|| format!("{}: cannot open it", p.display())),
    }
}

fn open_path(p: &Path) -> io::Result<Tolerant<Box<dyn Read>>> {
    sniff(Box::new(File::open(p)?))
}

fn sniff(r: Box<dyn Read>) -> io::Result<Tolerant<Box<dyn Read>>> {
    let mut br = BufReader::with_capacity(1 << 16, r);
    let head = br.fill_buf()?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let inner: Box<dyn Read> =
        if gzip { Box::new(flate2::bufread::MultiGzDecoder::new(br)) } else { Box::new(br) };
    Ok(Tolerant { inner, truncated: false, gzip })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_names() {
        assert_eq!(base_of(Path::new("/x/gc.log.3")), PathBuf::from("/x/gc.log"));
        assert_eq!(base_of(Path::new("/x/gc.log.2.current")), PathBuf::from("/x/gc.log"));
        assert_eq!(base_of(Path::new("/x/gc.log")), PathBuf::from("/x/gc.log"));
        assert_eq!(base_of(Path::new("/x/app.2024.log")), PathBuf::from("/x/app.2024.log"));
    }
}
