//! What a hostile local user could do to a root stallscope, what a FIFO could do to a reader, and
//! what a JVM killed with SIGKILL leaves. Each hostile input is refused with one clear line.
//! (stallscope itself killed with SIGKILL: tests/sigkill.rs.) Needs root (to be root, and to make
//! a throwaway user account and act as it with setpriv) and FUSE; CI runs as root with fuse3
//! installed by scripts/setup.sh.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn root() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: it acts as another user (a throwaway account) against root's files"
    );
}

/// Runs `sh -c script` as `user`.
fn as_user(user: &ThrowawayUser, script: &str) -> Output {
    user.setpriv().args(["sh", "-c", script]).output().expect("setpriv (util-linux)")
}

/// Runs stallscope; a child that has not finished within a minute is a hang (killed, and the
/// test fails), not a slow run. Its output is read as it comes, so a long report cannot fill a
/// pipe and look like a hang.
fn bounded(args: &[&str]) -> Output {
    let mut child = stallscope()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    }
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stallscope {args:?} hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() }
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_recording_directory_must_be_ours_and_private() {
    root();
    let d = scratch("out-dir");
    let victim = d.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let run =
        |out: &Path| bounded(&["run", "--out", out.to_str().unwrap(), "--", "java", "-version"]);

    // Another user's empty directory: they could plant hiccups.hlog -> /etc/… in it.
    let them = ThrowawayUser::new();
    let theirs = d.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(them.uid), Some(them.gid)).unwrap();
    let o = run(&theirs);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains(&format!("belongs to uid {}", them.uid)), "{}", err(&o));
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0, "nothing was written in it");

    // Ours, but writable by everyone.
    let open = d.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = run(&open);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("others can write to it"), "{}", err(&o));

    // A symbolic link to a directory, which could be re-pointed while the JVM writes.
    let real = d.join("real");
    std::fs::create_dir(&real).unwrap();
    let link = d.join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = run(&link);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("is a symbolic link"), "{}", err(&o));
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

    // A directory stallscope creates is private to its owner's writes.
    let fresh = d.join("fresh");
    let o = run(&fresh);
    assert!(o.status.success(), "{}", err(&o));
    let m = std::fs::metadata(&fresh).unwrap();
    assert_eq!(m.permissions().mode() & 0o022, 0, "mode {:o}", m.permissions().mode());
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_fifo_is_refused_not_waited_on() {
    root();
    let d = scratch("fifo");
    let fifo = d.join("gc.log");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = bounded(&["logs", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("is not a regular file (a FIFO)")
            && err(&o).contains("stallscope logs - <"),
        "{}",
        err(&o)
    );

    // A recording whose safepoint.log is a FIFO.
    let rec = d.join("rec");
    std::fs::create_dir(&rec).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/recordings/jdk17-idle-quiet");
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "safepoint.log" {
            std::fs::copy(e.path(), rec.join(e.file_name())).unwrap();
        }
    }
    let c = std::ffi::CString::new(rec.join("safepoint.log").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let o = bounded(&["report", rec.to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", err(&o));
    assert!(err(&o).contains("safepoint.log: not a regular file"), "{}", err(&o));
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn root_slowfs_gives_other_users_no_more_than_the_backing_files_do() {
    root();
    let _x = exclusive();
    let d = scratch("slowfs-perms");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (back, mnt) = (d.join("back"), d.join("mnt"));
    std::fs::create_dir_all(&back).unwrap();
    std::fs::write(back.join("roots.dat"), "root's\n").unwrap();
    std::fs::set_permissions(back.join("roots.dat"), std::fs::Permissions::from_mode(0o644))
        .unwrap();
    let m = mnt.display();
    let them = ThrowawayUser::new();
    {
        // By default only root may use the mount at all.
        let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "0ms"]);
        let o = as_user(&them, &format!("cat {m}/roots.dat"));
        assert!(
            !o.status.success(),
            "another user read through root's mount: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let o = as_user(&them, &format!("echo x > {m}/new.dat"));
        assert!(!o.status.success());
        assert!(!back.join("new.dat").exists());
    }
    {
        // Asked to share it, the kernel checks modes as on the backing directory.
        let _fs = Slowfs::start(&back, &mnt, &["--read-delay", "0ms", "--allow-other"]);
        let o = as_user(&them, &format!("cat {m}/roots.dat"));
        assert!(
            o.status.success(),
            "a 0644 file is readable: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        for script in [
            format!("echo x >> {m}/roots.dat"),
            format!("echo x > {m}/new.dat"),
            format!("rm -f {m}/roots.dat"),
            format!("echo read_delay=5s > {m}/.stallscope-slowfs"),
        ] {
            let o = as_user(&them, &script);
            assert!(!o.status.success(), "another user could: {script}");
        }
        assert_eq!(std::fs::read_to_string(back.join("roots.dat")).unwrap(), "root's\n");
        assert!(!back.join("new.dat").exists());
        let o = them
            .setpriv()
            .args([bin(), "inject", "slowfs-set"])
            .arg(&mnt)
            .args(["--read-delay", "5s"])
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "another user retuned root's mount: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    std::fs::remove_dir_all(d).unwrap();
}

/// A JVM killed outright mid-run (kill -9, the OOM killer) leaves a hiccup log that `report`
/// reads: every interval is flushed as it is written (docs/agent.md).
#[test]
fn a_jvm_killed_with_sigkill_leaves_its_hiccup_log_readable() {
    let _x = exclusive();
    let d = scratch("sigkill-hlog");
    let rec = d.join("rec");
    let run = stallscope()
        .args([
            "run",
            "--out",
            rec.to_str().unwrap(),
            "--",
            java17().to_str().unwrap(),
            "-jar",
            workloads_jar().to_str().unwrap(),
            "safepoint-storm",
            "--duration",
            "60s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until a few intervals (1 s each) are written.
    let hlog = rec.join("hiccups.hlog");
    let t0 = Instant::now();
    while std::fs::read_to_string(&hlog)
        .map(|t| t.lines().filter(|l| !l.starts_with('#') && !l.starts_with('"')).count())
        .unwrap_or(0)
        < 3
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "the agent wrote no intervals");
        std::thread::sleep(Duration::from_millis(100));
    }
    let jvm = std::fs::read_to_string(rec.join("meta.json"))
        .ok()
        .and_then(|m| serde_json::from_str::<serde_json::Value>(&m).ok())
        .and_then(|v| v["pid"].as_i64())
        .expect("meta.json names the JVM") as i32;
    unsafe { libc::kill(jvm, libc::SIGKILL) };
    let o = run.wait_with_output().unwrap();
    assert!(!o.status.success(), "the JVM was killed: {}", err(&o));
    // stallscope saw it die: the files its shutdown hook would have removed are gone.
    let hb = format!("/dev/shm/stallscope-{jvm}.heartbeat");
    assert!(!Path::new(&hb).exists(), "{hb} left behind");
    let o = bounded(&["report", "--json", rec.to_str().unwrap()]);
    assert!(o.status.success(), "{}", err(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let h = &r["summary"]["hiccups"];
    assert!(h["intervals"].as_u64().unwrap_or(0) >= 3, "the hiccup log is read whole: {h}");
    std::fs::remove_dir_all(d).unwrap();
}
