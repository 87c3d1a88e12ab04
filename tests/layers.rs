//! The house rule of issue 23: no import circle between top-level modules of `src/` (a circle
//! inside one module, such as the machine's own files in `core/`, is allowed). Reads every
//! `crate::<module>` path outside `#[cfg(test)]` modules and comments, and fails naming a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "bin") {
                walk(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its test module and its comments.
fn code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let from = top_module(&src, &f);
        if matches!(from.as_str(), "lib" | "main") {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).unwrap());
        let mut rest = text.as_str();
        let deps = g.entry(from.clone()).or_default();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + 7..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != from {
                deps.insert(name);
            }
        }
    }
    g
}

/// A circle through `start`, if any (depth-first search).
fn circle(g: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn dfs(
        g: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in g.get(node).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if dfs(g, next, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    let mut seen = BTreeSet::new();
    dfs(g, start, start, &mut path, &mut seen).then_some(path)
}

#[test]
fn no_import_circle_between_top_level_modules() {
    let g = graph();
    assert!(g.len() > 20, "read the modules of src/: {:?}", g.keys());
    for m in g.keys() {
        if let Some(c) = circle(&g, m) {
            panic!(
                "import circle between top-level modules: {} -> {m}",
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn the_protocol_profile_imports_nothing_from_the_crate() {
    let g = graph();
    assert_eq!(
        g.get("protocol").map(|d| d.len()),
        Some(0),
        "{:?}",
        g.get("protocol")
    );
}

#[test]
fn the_pure_cores_import_nothing_from_core() {
    let g = graph();
    for pure in [
        "compaction",
        "context",
        "prompt",
        "queues",
        "retry",
        "session",
        "limits",
    ] {
        let deps = g.get(pure).unwrap_or_else(|| panic!("no module {pure}"));
        assert!(!deps.contains("core"), "{pure} imports core: {deps:?}");
    }
}
