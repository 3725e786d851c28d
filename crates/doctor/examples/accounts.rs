//! Prints each stall's segments and the time accounts of the threads in them: what the doctor's
//! classification works from. `cargo run -p doctor --example accounts -- DIR [STALL]`.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: accounts DIR [STALL]");
        std::process::exit(2);
    };
    let only: Option<u32> = args.get(2).and_then(|s| s.parse().ok());
    let rec = match recording::Recording::read(dir, None) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let tick = 1_000_000_000 / rec.meta.clock_ticks.max(1);
    for stall in doctor::diagnose(&rec).stalls {
        if only.is_some_and(|o| o != stall.stall) {
            continue;
        }
        println!("stall {} {} ms", stall.stall, stall.duration_ns / 1_000_000);
        let samples: Vec<&recording::Sample> =
            rec.samples.iter().filter(|s| s.stall == stall.stall).collect();
        for (kind, a, b) in doctor::segments(
            stall.start_mono_ns,
            stall.start_mono_ns + stall.duration_ns,
            &stall.safepoints,
        ) {
            println!("  {kind:?} {:.1} ms", (b - a) as f64 / 1e6);
            let ev = doctor::evidence::rebuild(&samples, rec.meta.clock_ticks, a, b);
            for t in &ev.threads {
                let acc = t.account(tick);
                let parked = acc.wait_ns(doctor::wait::Wait::Parked);
                if std::env::var_os("ALL").is_none()
                    && acc.span_ns > 0
                    && parked * 10 >= acc.span_ns * 9
                {
                    continue;
                }
                let parts: Vec<String> = doctor::classify::breakdown(&acc)
                    .iter()
                    .map(|(act, ns)| format!("{act:?} {:.1}", *ns as f64 / 1e6))
                    .collect();
                if std::env::var_os("SEEN").is_some() {
                    println!(
                        "      seen {:?} samples {} span_ns {}",
                        t.seen_ns, t.samples, t.span_ns
                    );
                }
                println!(
                    "    {:>6} {:<16} span {:.1} ms: {} [wchan {}; majflt +{}; ticks u{} s{}]",
                    t.tid,
                    t.comm,
                    acc.span_ns as f64 / 1e6,
                    parts.join(", "),
                    t.wchan,
                    t.majflt_since_baseline,
                    t.utime_ticks,
                    t.stime_ticks
                );
            }
        }
    }
}
