//! The layout the project keeps (DESIGN.md): import arrows run one way. Within each crate no
//! two modules import each other, and the top-level modules form no circle; across crates each
//! may use only the crates below it (`ALLOWED`): the binary uses the jobs (the fleet, the lab,
//! the recorder, the log analysis), which use the diagnosis, the recording and the readers, and
//! never the other way. The recorder knows neither the lab nor the fleet.

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
/// each resolved to the longest prefix that is a module of the crate. The layout is that of the
/// code that ships: a file's module of tests (`#[cfg(test)]` then `mod tests {`, to its closing
/// brace) is left out, so a cause's tests may use the classifier's test helpers; what follows it
/// counts.
fn references(text: &str, me: &[String], modules: &BTreeSet<Vec<String>>) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    let lines: Vec<&str> = text.lines().collect();
    let tests = test_module(&lines);
    let code: String = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| !tests.contains(i) && !l.trim_start().starts_with("//"))
        .map(|(_, l)| *l)
        .collect::<Vec<_>>()
        .join("\n");
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

/// The lines of a file's module of tests: from `#[cfg(test)]` above `mod tests {` to the line
/// that closes its braces (counted outside comments); empty when it has none.
fn test_module(lines: &[&str]) -> std::ops::Range<usize> {
    let Some(start) = lines
        .windows(2)
        .position(|w| w[0].starts_with("#[cfg(test)]") && w[1].contains("mod tests {"))
    else {
        return 0..0;
    };
    let mut depth = 0i64;
    for (i, l) in lines.iter().enumerate().skip(start + 1) {
        let code = l.split("//").next().unwrap_or("");
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if depth <= 0 {
            return start..i + 1;
        }
    }
    start..lines.len()
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
    for krate in CRATES {
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

/// Every crate of the workspace, by directory.
const CRATES: [&str; 13] = [
    "stallscope",
    "fleet",
    "lab",
    "recorder",
    "logs",
    "guard",
    "hotspot-attach",
    "doctor",
    "recording",
    "procwatch",
    "offcpu",
    "hotspot-log",
    "stacks-agent",
];

/// The crates of the workspace each may depend on (by package name): the arrows that may exist.
const ALLOWED: [(&str, &[&str]); 13] = [
    (
        "stallscope",
        &[
            "fleet",
            "lab",
            "recorder",
            "logs",
            "guard",
            "hotspot-attach",
            "doctor",
            "recording",
            "procwatch",
            "offcpu",
            "hotspot-log",
        ],
    ),
    (
        "fleet",
        &[
            "recorder",
            "logs",
            "hotspot-attach",
            "doctor",
            "recording",
            "procwatch",
            "offcpu",
            "hotspot-log",
        ],
    ),
    ("lab", &["recorder", "logs", "guard", "doctor", "recording", "procwatch", "hotspot-log"]),
    // The recorder records: what a stall means is the doctor's, which it never asks.
    (
        "recorder",
        &["logs", "guard", "hotspot-attach", "recording", "procwatch", "offcpu", "hotspot-log"],
    ),
    ("logs", &["recording", "procwatch", "hotspot-log"]),
    ("guard", &["hotspot-attach", "procwatch"]),
    ("hotspot-attach", &["procwatch"]),
    ("doctor", &["recording", "procwatch", "hotspot-log"]),
    ("recording", &["procwatch", "hotspot-log"]),
    ("procwatch", &[]),
    // The BPF reader stands alone: only the recorder (and the jobs above it) load it, so the
    // doctor, the recording and the log tools build without clang or libbpf's C.
    ("offcpu", &[]),
    ("hotspot-log", &[]),
    // The stacks agent runs inside the JVM: libc only, nothing of the sidecar's.
    ("stacks-agent", &[]),
];

/// The workspace crates (package names) a crate's `[dependencies]` name.
fn workspace_deps(dir: &str) -> Vec<String> {
    let m = std::fs::read_to_string(common::root().join("crates").join(dir).join("Cargo.toml"))
        .unwrap();
    let deps = m
        .split("[dependencies]")
        .nth(1)
        .unwrap_or("")
        .split("\n[")
        .next()
        .unwrap_or("")
        .to_string();
    let names = [
        "stallscope",
        "fleet",
        "lab",
        "recorder",
        "logs",
        "guard",
        "hotspot-attach",
        "doctor",
        "recording",
        "procwatch",
        "offcpu",
        "hotspot-log",
        "stallscope-stacks",
    ];
    names
        .iter()
        .filter(|d| {
            deps.lines().any(|l| l.starts_with(&format!("{d} ")) || l.starts_with(&format!("{d}.")))
        })
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn crates_depend_downward_only() {
    for (krate, allowed) in ALLOWED {
        let deps = workspace_deps(krate);
        let extra: Vec<&String> = deps.iter().filter(|d| !allowed.contains(&d.as_str())).collect();
        assert!(extra.is_empty(), "{krate} depends on {extra:?}, which it may not");
    }
    // Every crate of the workspace is in the table, and the workspace has no other.
    let members = std::fs::read_to_string(common::root().join("Cargo.toml")).unwrap();
    for krate in CRATES {
        assert!(members.contains(&format!("\"crates/{krate}\"")), "{krate} is not a member");
    }
    let list = members.split("members = [").nth(1).and_then(|m| m.split(']').next()).unwrap();
    assert_eq!(list.matches("\"crates/").count(), CRATES.len(), "a crate is missing here");
    // The recorder knows neither the lab nor the fleet; the diagnosis knows no job.
    assert!(!workspace_deps("recorder").iter().any(|d| d == "lab" || d == "fleet"));
    assert!(
        workspace_deps("doctor")
            .iter()
            .all(|d| ["recording", "procwatch", "hotspot-log"].contains(&d.as_str()))
    );
}

/// Lines of `src` (tests and comments left out) that print: `println!`, `eprintln!`, `print!`,
/// `eprint!`, `dbg!`.
fn prints(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // A file's unit tests (`#[cfg(test)] mod tests`, at its end by the house style) may print.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, l) in code.lines().enumerate() {
            let t = l.trim_start();
            if t.starts_with("//") {
                continue;
            }
            if ["println!(", "eprintln!(", "print!(", "eprint!(", "dbg!("].iter().any(|m| {
                t.match_indices(m).any(|(at, _)| {
                    at == 0 || !t[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            }) {
                found.push(format!("{}:{}: {}", f.display(), i + 1, t));
            }
        }
    }
    found
}

#[test]
fn only_the_binary_prints_and_parses_options() {
    // The libraries tell a `recording::Notices` sink or return values; the binary prints. The
    // stacks agent is no library of ours but a JVMTI agent inside the JVM: its stderr is the
    // JVM's, the one place its user can read that it could not start.
    for krate in CRATES.iter().filter(|c| !["stallscope", "stacks-agent"].contains(c)) {
        let src = common::root().join("crates").join(krate).join("src");
        let p = prints(&src);
        assert!(p.is_empty(), "{krate} prints; tell its caller instead:\n{}", p.join("\n"));
        let m =
            std::fs::read_to_string(common::root().join("crates").join(krate).join("Cargo.toml"))
                .unwrap();
        assert!(!m.contains("\nclap "), "{krate} depends on clap: options belong in cli.rs");
    }
    // The check finds a print where there is one.
    let d = common::scratch("layout-prints");
    std::fs::create_dir_all(d.join("src")).unwrap();
    std::fs::write(
        d.join("src/lib.rs"),
        "// eprintln!(\"in a comment\")\nfn f() { my_eprintln!(); eprintln!(\"x\"); }\n#[cfg(test)]\nmod tests { fn t() { println!(); } }\n",
    )
    .unwrap();
    let p = prints(&d.join("src"));
    assert_eq!(p.len(), 1, "{p:?}");
}

/// Lines of a crate's shipped code (tests and comments left out) that name `reader`'s types in
/// the crate's own API: a `pub` item, field or signature, or an `impl` of a trait for or from
/// them.
fn api_naming(src: &Path, reader: &str) -> Vec<String> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let tests = test_module(&lines);
        for (i, l) in lines.iter().enumerate() {
            let code = l.split("//").next().unwrap_or("").trim();
            let api = code.starts_with("pub ") || code.starts_with("impl");
            if !tests.contains(&i) && api && code.contains(&format!("{reader}::")) {
                out.push(format!("{}:{}: {}", f.display(), i + 1, l.trim()));
            }
        }
    }
    out
}

/// Issue 55: the format crate describes the format; the readers' types stay out of its API (the
/// recorder converts them, `recorder::to_disk`).
#[test]
fn the_recording_format_names_no_reader_type_in_its_api() {
    let found = api_naming(&common::root().join("crates/recording/src"), "procwatch");
    assert!(found.is_empty(), "recording's API names procwatch's types:\n{}", found.join("\n"));
    // The check finds one when there is one.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "pub struct M {\n    pub pod: Option<procwatch::pods::Pod>,\n}\nimpl From<procwatch::task::TaskSample> for T {}\nfn private(x: procwatch::A) {}\n#[cfg(test)]\nmod tests {\n    pub fn t(x: procwatch::B) {}\n}\n",
    )
    .unwrap();
    assert_eq!(api_naming(dir.path(), "procwatch").len(), 2);
}
