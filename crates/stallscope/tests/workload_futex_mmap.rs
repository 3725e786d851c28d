//! The futex-mmap workload in its quick profile. On kernels with per-VMA locks (6.4+) the
//! waiter's latency may not move, so the test asserts the mechanism, which does not depend on
//! the kernel: with mlockall every mmap populates and locks its region while holding mmap_lock
//! for write, so the churning thread's mmap calls take far longer (the lab reports whether the
//! waiter feels it).

mod common;
use common::stallscope;

fn run(args: &[&str]) -> serde_json::Value {
    let o = stallscope()
        .args(["workload", "futex-mmap", "--duration", "700ms", "--region-mb", "64"])
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("variant") && out.contains("p99.9"), "a human summary first:\n{out}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

#[test]
fn mlock_holds_the_mmap_write_lock_far_longer() {
    let plain = &run(&["--futex", "shared", "--churn", "churn"])["variants"][0];
    let locked = &run(&["--futex", "shared", "--churn", "churn", "--mlock"])["variants"][0];
    for v in [plain, locked] {
        assert!(v["wakeups"].as_u64().unwrap() > 300, "{v}");
        assert!(v["churn_cycles"].as_u64().unwrap() > 0, "{v}");
        assert!(v["p99_ns"].as_u64().unwrap() >= v["p50_ns"].as_u64().unwrap());
    }
    assert!(locked["notes"].as_array().unwrap().is_empty(), "mlockall needs root here: {locked}");
    let (a, b) = (plain["mmap_p50_ns"].as_u64().unwrap(), locked["mmap_p50_ns"].as_u64().unwrap());
    assert!(b >= 5 * a, "mmap under mlockall {b} ns vs {a} ns without");
}

#[test]
fn bad_variant_names_are_refused() {
    let o = stallscope().args(["workload", "futex-mmap", "--churn", "sometimes"]).output().unwrap();
    // A wrong value is a usage error (exit 2), and the message lists the right ones.
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("[possible values: churn, reuse, none]"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
