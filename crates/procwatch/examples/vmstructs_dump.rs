//! Lists what `gHotSpotVMStructs` says of a live JVM: `vmstructs_dump PID [TYPE-PREFIX | ~SUBSTRING]`.
fn main() {
    let mut a = std::env::args().skip(1);
    let pid: i32 =
        a.next().and_then(|p| p.parse().ok()).expect("usage: vmstructs_dump PID [TYPE-PREFIX]");
    let prefix = a.next().unwrap_or_default();
    match procwatch::vmstructs::VmStructs::read(pid) {
        Ok(v) => {
            let grep = prefix.strip_prefix('~');
            let mut f: Vec<_> = v
                .fields
                .iter()
                .filter(|((t, n), _)| {
                    grep.map_or(t.starts_with(&prefix), |g| t.contains(g) || n.contains(g))
                })
                .collect();
            for (k, c) in
                v.int_constants.iter().filter(|(k, _)| grep.is_some_and(|g| k.contains(g)))
            {
                println!("const {k} = {c}");
            }
            f.sort_by(|a, b| a.0.cmp(b.0));
            for ((t, n), x) in f {
                println!(
                    "{t}::{n} {} static={} offset={} address={:#x}",
                    x.type_string, x.is_static, x.offset, x.address
                );
            }
            println!(
                "{} fields, {} types, {} constants",
                v.fields.len(),
                v.sizes.len(),
                v.int_constants.len()
            );
        }
        Err(e) => {
            eprintln!("Error: {e}");
            std::process::exit(1);
        }
    }
}
