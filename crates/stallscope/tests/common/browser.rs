//! Headless Chromium for the report tests: Debian's `chromium`, started as root with the flags
//! this machine needs (no sandbox, no GPU, no background networking), a fresh profile each
//! time, and a deadline. A missing browser fails the test: `.ci/run` installs it.
#![allow(dead_code)] // each test binary uses a part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn chromium() -> PathBuf {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!(
        "Chromium is not installed (/usr/bin/chromium): the HTML report is tested in a real browser; apt-get install chromium (.ci/run does)"
    );
}

/// Runs chromium headless on `page` with `extra` flags; returns its stdout. Fails the test on
/// a non-zero exit or after 90 s.
pub fn run(page: &Path, extra: &[&str]) -> String {
    run_url(&format!("file://{}", page.canonicalize().unwrap().display()), extra)
}

/// [`run`] on any URL (a page `watch` serves).
pub fn run_url(url: &str, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let page = url;
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut { out }, &mut s).unwrap();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish with {page} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = reader.join().unwrap();
    assert!(status.success(), "chromium failed on {page}: {status}");
    stdout
}

/// The DOM after the page's script ran.
pub fn dump_dom(page: &Path, extra: &[&str]) -> String {
    let mut args = vec!["--dump-dom", "--window-size=1400,1200"];
    args.extend_from_slice(extra);
    run(page, &args)
}

/// A screenshot of the page at `width`×`height`, decoded: (width, height, RGBA pixels).
pub fn screenshot(
    page: &Path,
    out: &Path,
    width: u32,
    height: u32,
    extra: &[&str],
) -> (u32, u32, Vec<u8>) {
    let shot = format!("--screenshot={}", out.display());
    let size = format!("--window-size={width},{height}");
    let mut args = vec![shot.as_str(), size.as_str()];
    args.extend_from_slice(extra);
    run(page, &args);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(out).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf.chunks(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// The value of `attr` on the first element whose opening tag contains `marker`.
pub fn attr(dom: &str, marker: &str, attr: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attr}=\"");
    let v = tag.find(&key)? + key.len();
    Some(tag[v..v + tag[v..].find('"')?].to_string())
}

pub fn num(dom: &str, marker: &str, a: &str) -> i64 {
    attr(dom, marker, a)
        .unwrap_or_else(|| panic!("no {a} on {marker}"))
        .parse()
        .unwrap_or_else(|_| panic!("{a} on {marker} is not a number"))
}

/// Share of pixels that differ from the top-left pixel, and the number of distinct colours.
pub fn ink(rgba: &[u8]) -> (f64, usize) {
    let bg = &rgba[..4];
    let px = rgba.len() / 4;
    let differ =
        rgba.chunks(4).filter(|p| p.iter().zip(bg).any(|(a, b)| a.abs_diff(*b) > 16)).count();
    let colours: std::collections::HashSet<[u8; 3]> =
        rgba.chunks(4).step_by(7).map(|p| [p[0] & 0xf0, p[1] & 0xf0, p[2] & 0xf0]).collect();
    (differ as f64 / px as f64, colours.len())
}
