//! The fault injectors against the real kernel. Timings here are correctness checks with wide
//! margins (a 300 ms delay must make a read take at least 300 ms), never benchmarks. Every
//! test removes its mounts, cgroups and processes, also when it fails (guards below).

mod common;

use common::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn write_file(p: &Path, pages: usize) {
    let mut f = std::fs::File::create(p).unwrap();
    for i in 0..pages {
        let mut page = vec![(i % 251) as u8; 4096];
        page[..8].copy_from_slice(&(i as u64).to_le_bytes());
        f.write_all(&page).unwrap();
    }
    f.sync_all().unwrap();
}

fn resident(p: &Path) -> (u64, u64) {
    let o = stallscope().args(["inject", "resident", "--json"]).arg(p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (v["resident_pages"].as_u64().unwrap(), v["total_pages"].as_u64().unwrap())
}

fn timed_page_read(p: &Path, page: u64) -> (Duration, u64) {
    let f = std::fs::File::open(p).unwrap();
    let mut buf = [0u8; 4096];
    let t = Instant::now();
    f.read_exact_at(&mut buf, page * 4096).unwrap();
    (t.elapsed(), u64::from_le_bytes(buf[..8].try_into().unwrap()))
}

#[test]
fn slowfs_delays_reads_and_mmap_faults_of_a_known_page() {
    let d = scratch("slowfs-delay");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_file(&back.join("test.dat"), 512);
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "300ms"]);
    let file = mnt.join("test.dat");
    evict(&file);
    assert_eq!(resident(&file).0, 0, "evicted through the mount");
    let (cold, content) = timed_page_read(&file, 100);
    assert_eq!(content, 100, "the passthrough returns the backing file's bytes");
    assert!(cold >= Duration::from_millis(300), "a cold read waits for the delay: {cold:?}");
    assert!(resident(&file).0 > 0, "the read brought pages into the cache");
    let (warm, _) = timed_page_read(&file, 100);
    assert!(warm < Duration::from_millis(250), "a cached page is not delayed: {warm:?}");

    // A page fault on a mapping of the file is a FUSE read too.
    let f = std::fs::File::open(&file).unwrap();
    let len = 512 * 4096;
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED);
    let t = Instant::now();
    let v = unsafe { std::ptr::read_volatile((addr as *const u8).add(400 * 4096) as *const u64) };
    let fault = t.elapsed();
    unsafe { libc::munmap(addr, len) };
    assert_eq!(v, 400);
    assert!(
        fault >= Duration::from_millis(300),
        "a major fault on the mapping waits for the delay: {fault:?}"
    );
}

#[test]
fn slowfs_readers_wait_in_parallel_not_in_turn() {
    let d = scratch("slowfs-parallel");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    for i in 0..8 {
        write_file(&back.join(format!("f{i}.dat")), 8);
    }
    // One FUSE worker: delayed reads must not occupy it.
    let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "400ms", "--threads", "1"]);
    let t = Instant::now();
    let readers: Vec<_> = (0..8)
        .map(|i| {
            let p = mnt.join(format!("f{i}.dat"));
            std::thread::spawn(move || timed_page_read(&p, 1))
        })
        .collect();
    for r in readers {
        let (took, _) = r.join().unwrap();
        assert!(took >= Duration::from_millis(400));
    }
    // In turn, eight 400 ms reads would take 3.2 s; in parallel about 0.4 s.
    assert!(t.elapsed() < Duration::from_millis(2000), "readers serialised: {:?}", t.elapsed());
}

#[test]
fn slowfs_errors_reach_the_reader_and_settings_change_live() {
    let d = scratch("slowfs-eio");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    write_file(&back.join("a.dat"), 16);
    write_file(&back.join("b.log"), 16);
    let mut fs = Slowfs::start(
        &back,
        &mnt,
        &["--read-delay", "0ms", "--error-rate", "1", "--glob", "*.dat", "--max-delay", "2s"],
    );
    let mut buf = [0u8; 4096];
    let e = std::fs::File::open(mnt.join("a.dat")).unwrap().read_exact_at(&mut buf, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    std::fs::File::open(mnt.join("b.log"))
        .unwrap()
        .read_exact_at(&mut buf, 0)
        .expect("files outside the glob are untouched");

    let set = |args: &[&str]| {
        stallscope().args(["inject", "slowfs-set"]).arg(&mnt).args(args).output().unwrap()
    };
    let o = set(&["--error-rate", "0", "--read-delay", "500ms"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("read_delay=500000000ns"));
    let p = mnt.join("a.dat");
    evict(&p);
    let (took, _) = timed_page_read(&p, 3);
    assert!(
        took >= Duration::from_millis(500),
        "the new delay applies without a remount: {took:?}"
    );
    let o = set(&["--read-delay", "5s"]);
    assert!(!o.status.success(), "above --max-delay is refused");
    assert!(String::from_utf8_lossy(&o.stderr).contains("refused"));

    let status = fs.terminate();
    assert!(status.success(), "{status:?}");
    assert!(!is_mounted(&mnt), "the mount is gone after SIGTERM");
    let mut err = String::new();
    fs.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("unmounted"), "{err}");
}

#[test]
fn slowfs_delays_writes_and_fsyncs_of_matching_files_live() {
    let d = scratch("slowfs-write");
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    let _fs = Slowfs::start(
        &back,
        &mnt,
        &["--read-delay", "0ms", "--write-delay", "200ms", "--glob", "*.log"],
    );
    // Each write(2) of a matching file waits: nothing is cached on the way.
    let mut f = std::fs::File::create(mnt.join("gc.log")).unwrap();
    let t = Instant::now();
    f.write_all(b"[0.001s][info][gc] one line\n").unwrap();
    f.write_all(b"[0.002s][info][gc] another\n").unwrap();
    assert!(t.elapsed() >= Duration::from_millis(400), "two writes wait twice: {:?}", t.elapsed());
    let t = Instant::now();
    f.sync_all().unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200), "an fsync waits too: {:?}", t.elapsed());
    drop(f);
    assert!(
        std::fs::read_to_string(back.join("gc.log")).unwrap().ends_with("another\n"),
        "the data reached the backing file"
    );
    std::fs::File::create(mnt.join("data.bin")).unwrap().write_all(b"x").unwrap();
    let set = |args: &[&str]| {
        stallscope().args(["inject", "slowfs-set"]).arg(&mnt).args(args).output().unwrap()
    };
    let o = set(&["--write-delay", "300ms"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("write_delay=300000000ns"), "{text}");
    assert!(
        text.contains("delayed_writes=2\n"),
        "only the matching file's writes were delayed: {text}"
    );
    let mut f = std::fs::OpenOptions::new().append(true).open(mnt.join("gc.log")).unwrap();
    let t = Instant::now();
    f.write_all(b"x").unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "the new delay applies without a remount: {:?}",
        t.elapsed()
    );
}

#[test]
fn evict_and_resident_agree() {
    let d = scratch("pagecache");
    let p = d.join("data.bin");
    write_file(&p, 256);
    let mut f = std::fs::File::open(&p).unwrap();
    let mut all = Vec::new();
    f.read_to_end(&mut all).unwrap();
    assert_eq!(resident(&p), (256, 256));
    evict(&p);
    assert_eq!(resident(&p), (0, 256));
    f.seek(SeekFrom::Start(10 * 4096)).unwrap();
    let mut page = [0u8; 4096];
    f.read_exact(&mut page).unwrap();
    let (r, _) = resident(&p);
    assert!((1..=64).contains(&r), "one read brings back that page and its readahead: {r}");
}

fn state(pid: u32) -> char {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    s.rsplit_once(')').unwrap().1.trim_start().chars().next().unwrap()
}

#[test]
fn freeze_stops_then_always_continues() {
    let target = Reaper(Command::new("sleep").arg("60").spawn().unwrap());
    let pid = target.0.id();
    let o = stallscope()
        .args(["inject", "freeze", &pid.to_string(), "--for", "300ms"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["stopped_ns"].as_u64().unwrap() >= 300_000_000);
    assert_ne!(state(pid), 'T');

    // Ended early by SIGTERM, and killed outright: the target is continued either way.
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        let mut f = stallscope()
            .args(["inject", "freeze", &pid.to_string(), "--for", "30s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while state(pid) != 'T' {
            assert!(t0.elapsed() < Duration::from_secs(5), "never stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
        unsafe { libc::kill(f.id() as i32, sig) };
        f.wait().unwrap();
        let t0 = Instant::now();
        while state(pid) == 'T' {
            assert!(t0.elapsed() < Duration::from_secs(5), "signal {sig} left the target stopped");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let o = stallscope().args(["inject", "freeze", "999999999", "--for", "1s"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pid 999999999"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn throttle_slows_direct_reads_and_removes_its_cgroup() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    // One throttle test at a time: each checks that no throttle cgroup is left.
    let _x = exclusive();
    let d = scratch("throttle");
    let p = d.join("data.bin");
    write_file(&p, 64);
    let dd = |throttled: bool| {
        let mut c = stallscope();
        if throttled {
            c.args(["inject", "throttle", "--riops", "20", "--"]);
        } else {
            c = Command::new("env");
        }
        let t = Instant::now();
        let o = c
            .args([
                "dd",
                &format!("if={}", p.display()),
                "of=/dev/null",
                "bs=4096",
                "count=40",
                "iflag=direct",
            ])
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (t.elapsed(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (free, _) = dd(false);
    let (slow, err) = dd(true);
    // 40 reads at 20 per second take about 2 s; unthrottled, milliseconds.
    assert!(
        slow >= Duration::from_millis(1000),
        "throttled dd took {slow:?} (free: {free:?})\n{err}"
    );
    assert!(err.contains("limited to 20 IOPS"), "{err}");
    assert!(throttle_cgroups().is_empty(), "cgroups left behind: {:?}", throttle_cgroups());
}

#[test]
fn cpu_hog_spins_for_the_time_asked() {
    let o = stallscope()
        .args(["inject", "cpu-hog", "--threads", "2", "--for", "300ms", "--nice", "5"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["work_units"].as_u64().unwrap() > 0);
    assert!(v["elapsed_ns"].as_u64().unwrap() >= 300_000_000);
}
