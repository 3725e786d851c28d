//! Builds the BPF programs with clang (Debian's `clang`; `scripts/setup.sh` installs it) and
//! generates their skeletons. They need no kernel headers beyond linux/bpf.h and no BTF at build
//! time: the off-CPU recorder reads the scheduler tracepoints' records by their stable layout,
//! which the loader checks against tracefs before it attaches.
use libbpf_cargo::SkeletonBuilder;
use std::path::PathBuf;

fn main() {
    // Debian keeps <asm/types.h> (which <linux/bpf.h> includes) under the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    // bpf_tracing.h's name for the architecture.
    let target = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => other,
    };
    let target = format!("-D__TARGET_ARCH_{target}");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The off-CPU recorder, and the machine's counters (loaded on their own: either may be
    // refused without the other).
    for name in ["offcpu", "counters"] {
        let src = format!("src/bpf/{name}.bpf.c");
        if let Err(e) = SkeletonBuilder::new()
            .source(&src)
            // The generated skeleton is not formatted: rustfmt is cosmetic there, and a
            // toolchain without it (the minimum Rust's, installed with rustup's minimal
            // profile) would fail the build. A path that does not exist is how libbpf-cargo is
            // told to skip it.
            .rustfmt("/nonexistent/stallscope-skips-rustfmt")
            // v3: the program takes an index of its entries' array with a compare-and-swap
            // (kernels 5.12 on; an older kernel refuses the program, and `/proc` is used).
            .clang_args([multiarch.as_str(), target.as_str(), "-O2", "-g", "-mcpu=v3"])
            .build_and_generate(out_dir.join(format!("{name}.skel.rs")))
        {
            eprintln!(
                "offcpu: could not build {src} ({e:#}).\n\
                 It needs clang, libelf-dev, zlib1g-dev and linux-libc-dev: run scripts/setup.sh as root \
                 (or apt-get install clang libelf-dev zlib1g-dev linux-libc-dev)."
            );
            std::process::exit(1);
        }
        println!("cargo:rerun-if-changed={src}");
    }
}
