//! The layout the project keeps (DESIGN.md): import arrows run one way. Within each crate no
//! two modules import each other, and the top-level modules form no circle; across crates the
//! binary uses the doctor, which uses the recording, which uses hotspot-log and procwatch, and
//! never the other way.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file: `src/lab/scenarios/frozen.rs` → `lab::scenarios::frozen`,
/// `src/lab/mod.rs` → `lab`, `src/main.rs` → the crate root (empty).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> =
        rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main" | "lib")) {
        parts.pop();
    }
    parts
}

/// The modules a file refers to through `crate::` and `super::` paths (comments left out),
/// each resolved to the longest prefix that is a module of the crate.
fn references(text: &str, me: &[String], modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let code: String =
        text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut resolve = |base: Vec<String>, rest: &str| {
        let mut path = base;
        let mut best = path.clone();
        for seg in rest.split("::").filter(|s| !s.is_empty()) {
            path.push(seg.to_string());
            if modules.contains(&path) {
                best = path.clone();
            } else {
                break;
            }
        }
        out.insert(best);
    };
    for (i, _) in code.match_indices("crate::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest: String = code[i + 7..].chars().take_while(|c| ident(*c)).collect();
        resolve(Vec::new(), &rest);
    }
    for (i, _) in code.match_indices("super::") {
        if i > 0 && code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            continue;
        }
        // `super` is the parent module (for `lab/mod.rs`, module `lab`, that is the crate root).
        let mut base = me.to_vec();
        base.pop();
        let rest: String = code[i + 7..].chars().take_while(|c| ident(*c)).collect();
        resolve(base, &rest);
    }
    // A module's own items are no import.
    out.remove(me);
    out
}

/// Every module of a crate and what it imports.
fn graph(src: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    files
        .iter()
        .map(|f| {
            let me = module_of(src, f);
            let text = std::fs::read_to_string(f).unwrap();
            let refs = references(&text, &me, &modules);
            (me, refs)
        })
        .collect()
}

fn name(m: &[String]) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

fn check_crate(src: &Path) {
    let g = graph(src);
    // No pair of modules imports each other, at any depth.
    let mut pairs = Vec::new();
    for (a, refs) in &g {
        for b in refs {
            if a < b && g.get(b).is_some_and(|r| r.contains(a)) {
                pairs.push(format!("{} <-> {}", name(a), name(b)));
            }
        }
    }
    assert!(pairs.is_empty(), "{}: modules that import each other: {pairs:?}", src.display());
    // The top-level modules form no circle at all.
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, refs) in &g {
        let Some(ta) = a.first() else { continue };
        for b in refs {
            if let Some(tb) = b.first().filter(|tb| *tb != ta) {
                top.entry(ta.clone()).or_default().insert(tb.clone());
            }
        }
    }
    fn visit(
        n: &str,
        top: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            return Some(path[i..].to_vec());
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in top.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, top, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for n in top.keys() {
        if let Some(circle) = visit(n, &top, &mut Vec::new(), &mut done) {
            panic!("{}: top-level modules in a circle: {}", src.display(), circle.join(" -> "));
        }
    }
}

#[test]
fn no_module_pair_imports_each_other_and_top_level_modules_form_no_circle() {
    for krate in ["stallscope", "doctor", "recording", "procwatch", "hotspot-log", "stacks-agent"] {
        check_crate(&common::root().join("crates").join(krate).join("src"));
    }
}

#[test]
fn the_check_finds_a_circle_when_there_is_one() {
    let d = common::scratch("layout-circle");
    let src = d.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("main.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a/mod.rs"), "pub mod x;\nuse crate::b::thing;\n").unwrap();
    std::fs::write(
        src.join("a/x.rs"),
        "// use crate::b; in a comment is no import\nuse super::y;\n",
    )
    .unwrap();
    std::fs::write(src.join("b.rs"), "use crate::a::x::Item;\n").unwrap();
    let g = graph(&src);
    assert!(g[&vec!["a".to_string()]].contains(&vec!["b".to_string()]));
    assert!(g[&vec!["b".to_string()]].contains(&vec!["a".to_string(), "x".to_string()]));
    assert!(
        !g[&vec!["a".to_string(), "x".to_string()]].contains(&vec!["b".to_string()]),
        "comments are no imports"
    );
    let caught = std::panic::catch_unwind(|| check_crate(&src));
    assert!(caught.is_err(), "a -> b -> a::x is a circle of top-level modules");
}

#[test]
fn crates_depend_downward_only() {
    let manifest = |c: &str| {
        std::fs::read_to_string(common::root().join("crates").join(c).join("Cargo.toml")).unwrap()
    };
    let deps = |c: &str| -> Vec<String> {
        let m = manifest(c);
        let deps = m
            .split("[dependencies]")
            .nth(1)
            .unwrap_or("")
            .split("\n[")
            .next()
            .unwrap_or("")
            .to_string();
        ["stallscope", "doctor", "recording", "procwatch", "hotspot-log", "stallscope-stacks"]
            .iter()
            .filter(|d| {
                deps.lines()
                    .any(|l| l.starts_with(&format!("{d} ")) || l.starts_with(&format!("{d}.")))
            })
            .map(|d| d.to_string())
            .collect()
    };
    assert_eq!(deps("stallscope"), ["doctor", "recording", "procwatch", "hotspot-log"]);
    assert_eq!(deps("doctor"), ["recording", "procwatch", "hotspot-log"]);
    assert_eq!(deps("recording"), ["procwatch", "hotspot-log"]);
    assert!(deps("procwatch").is_empty() && deps("hotspot-log").is_empty());
    // The stacks agent runs inside the JVM: libc only, nothing of the sidecar's.
    assert!(deps("stacks-agent").is_empty());
}
