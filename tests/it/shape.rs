//! The tree's shape, kept (issue 31): no import circle among the product's modules. Each flow
//! goes one way through `src/` (`source: watch -> state -> diff -> event -> queue -> deliver ->
//! ack`, `controller: reconcile -> params -> decide -> promote -> status`); two modules that
//! import each other, directly or round a longer circle, make a reader double back.
//!
//! A module's imports are the `crate::`, `super::` and `self::` paths of its file outside
//! comments and its `#[cfg(test)]` part, `use` groups (`super::{a, b::c}`) expanded; an import
//! of a module's own ancestor or descendant is the tree's nesting, not a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Every file of `src/`.
fn files() -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![Path::new(SRC).to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Every product module (`a::b`) and its file, unit-test files left out.
fn modules() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for path in files() {
        let rel = path.strip_prefix(SRC).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            parts.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            parts.pop();
        }
        if parts.is_empty() || parts.iter().any(|p| p == "tests" || p.ends_with("tests")) {
            continue;
        }
        out.insert(parts.join("::"), std::fs::read_to_string(&path).unwrap());
    }
    out
}

/// The code of a file without comments and without its `#[cfg(test)]` part.
fn code(text: &str) -> String {
    let product = text.split("#[cfg(test)]").next().unwrap_or_default();
    product
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths from `at` on: `a::b::c`, or a group `a::{b, c::{d}}` expanded.
fn paths_at(text: &[char], mut at: usize, prefix: &str, out: &mut Vec<String>) -> usize {
    let mut path = prefix.to_string();
    loop {
        let start = at;
        while at < text.len() && is_ident(text[at]) {
            at += 1;
        }
        let word: String = text[start..at].iter().collect();
        if !word.is_empty() && word != "self" {
            path = if path.is_empty() {
                word
            } else {
                format!("{path}::{word}")
            };
        }
        if text[at..].starts_with(&[':', ':']) {
            at += 2;
            if text.get(at) == Some(&'{') {
                at += 1;
                loop {
                    while at < text.len() && (text[at].is_whitespace() || text[at] == ',') {
                        at += 1;
                    }
                    if at >= text.len() || text[at] == '}' {
                        return at + 1;
                    }
                    at = paths_at(text, at, &path, out);
                    // Skip an `as name`.
                    while at < text.len() && !matches!(text[at], ',' | '}') {
                        at += 1;
                    }
                }
            }
            continue;
        }
        out.push(path);
        return at;
    }
}

/// Every `crate::`/`super::`/`self::` path in `code`.
fn paths(code: &str) -> Vec<String> {
    let text: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let fresh = at == 0 || !is_ident(text[at - 1]) && text[at - 1] != ':';
        let rest = &text[at..];
        if fresh
            && ["crate::", "super::", "self::"]
                .iter()
                .any(|p| rest.starts_with(&p.chars().collect::<Vec<_>>()))
        {
            at = paths_at(&text, at, "", &mut out);
        } else {
            at += 1;
        }
    }
    out
}

/// The module `path` (written in `from`) names: the longest prefix that is a module.
fn target(from: &str, path: &str, modules: &BTreeMap<String, String>) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = from.split("::").collect();
    match segs.first() {
        Some(&"crate") => {
            base.clear();
            segs.remove(0);
        }
        Some(&"self") => {
            segs.remove(0);
        }
        Some(&"super") => {
            while segs.first() == Some(&"super") {
                base.pop();
                segs.remove(0);
            }
        }
        _ => return None,
    }
    let full: Vec<&str> = base.into_iter().chain(segs).collect();
    (1..=full.len())
        .rev()
        .map(|n| full[..n].join("::"))
        .find(|k| modules.contains_key(k))
}

#[test]
fn no_two_modules_of_the_product_import_each_other_round_a_circle() {
    let modules = modules();
    assert!(
        modules.len() > 100,
        "the walk found {} modules",
        modules.len()
    );
    let mut edges: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in &modules {
        let nested = |t: &str| {
            t == m || t.starts_with(&format!("{m}::")) || m.starts_with(&format!("{t}::"))
        };
        let to: BTreeSet<String> = (paths(&code(text)).iter())
            .filter_map(|p| target(m, p, &modules))
            .filter(|t| !nested(t))
            .collect();
        edges.insert(m, to);
    }
    // Who reaches `m` back from each module `m` imports: a circle.
    let mut circles = BTreeSet::new();
    for (m, to) in &edges {
        for next in to {
            let mut seen = BTreeSet::new();
            let mut stack = vec![(next.clone(), vec![m.to_string(), next.clone()])];
            while let Some((at, path)) = stack.pop() {
                if !seen.insert(at.clone()) {
                    continue;
                }
                for n in edges.get(at.as_str()).into_iter().flatten() {
                    if n == m {
                        let mut circle = path.clone();
                        circle.sort();
                        circles.insert(circle.join(", "));
                    } else {
                        let mut p = path.clone();
                        p.push(n.clone());
                        stack.push((n.clone(), p));
                    }
                }
            }
        }
    }
    assert!(circles.is_empty(), "import circles in src/: {circles:#?}");
}

#[test]
fn the_reader_of_imports_sees_groups_and_ignores_comments_and_tests() {
    let text = "use super::{a, b::{c, d as e}};\n// use crate::gone;\nfn f() { crate::x::y(); }\n#[cfg(test)]\nmod t { use crate::hidden; }";
    let got = paths(&code(text));
    assert_eq!(
        got,
        ["super::a", "super::b::c", "super::b::d", "crate::x::y"]
    );
}

/// Product files (unit tests aside) longer than this are split along their steps (issue 31).
const MAX_LINES: usize = 500;
/// The files still longer, each with what will shorten it: kept exact, so that a file that
/// grows past the bound fails here, and one that shrinks under it leaves this list. None now.
const STILL_LONG: [&str; 0] = [];

#[test]
fn no_product_file_is_longer_than_500_lines_but_the_ones_named() {
    let mut long = Vec::new();
    for path in files() {
        let rel = path
            .strip_prefix(SRC)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel
            .split('/')
            .any(|p| p == "tests" || p.ends_with("tests.rs"))
        {
            continue;
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines > MAX_LINES {
            long.push(rel);
        }
    }
    long.sort();
    let mut named: Vec<String> = STILL_LONG.iter().map(|s| s.to_string()).collect();
    named.sort();
    assert_eq!(long, named, "files of src/ over {MAX_LINES} lines");
}

/// One way of placing unit tests (issue 31): at the end of their file, `#[cfg(test)] mod tests
/// { .. }`, while the file with them stays within [`MAX_LINES`]; beside it in `<file>/tests.rs`
/// (or a `<file>/tests/` folder of several) only when they would take it past that. A
/// `pub(crate) mod tests;` is a helper other modules' tests share, and stays a file.
#[test]
fn unit_tests_are_inline_unless_their_file_would_pass_500_lines() {
    let lines = |p: &Path| std::fs::read_to_string(p).unwrap().lines().count();
    let mut misplaced = Vec::new();
    for path in files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let rel = path
            .strip_prefix(SRC)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for (i, line) in text.lines().enumerate() {
            let next = text.lines().nth(i + 1).unwrap_or_default().trim();
            if line.trim() == "#[cfg(test)]"
                && next.starts_with("mod ")
                && next != "mod tests;"
                && next != "mod tests {"
            {
                misplaced.push(format!("{rel}: `{next}` (the unit tests are `mod tests`)"));
            }
        }
        if !text.lines().any(|l| l == "mod tests;") {
            continue;
        }
        let folder = match path.file_stem().unwrap().to_str().unwrap() {
            "mod" | "lib" => path.parent().unwrap().to_path_buf(),
            stem => path.with_file_name(stem),
        };
        let file = folder.join("tests.rs");
        if file.is_file() && lines(&path) + lines(&file) <= MAX_LINES {
            misplaced.push(format!(
                "{rel}: {} lines with its tests/tests.rs: inline them",
                lines(&path) + lines(&file)
            ));
        }
    }
    misplaced.sort();
    assert!(
        misplaced.is_empty(),
        "unit tests out of place: {misplaced:#?}"
    );
}
