//! The facts the docs state that a test can check, kept true (issue 31, item 7): every path of
//! this repository they name exists, every `imagegate` command they show is one, with the flags
//! they give it, every flag in a table of flags is one of imagegate's, and every `IMAGEGATE_*`
//! variable they name is read somewhere. What a reader takes on trust (what a flag does, counts
//! in prose) stays with review.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The top-level folders of this repository a path in the docs starts with.
const OURS: [&str; 11] = [
    "src/", "tests/", "config/", "crates/", "tekton/", "knative/", "scripts/", "benches/", "docs/",
    "schemas/", "fuzz/",
];

/// Paths the docs name in another project's tree (Tekton's, Knative's release layouts), said
/// beside the module they are in. Kept exact: each must still be named and must not be ours.
const UPSTREAM: [&str; 9] = [
    "config/300-crds/",
    "config/core/resources/",
    "config/controller.yaml",
    "config/interceptors/",
    "config/100-deployment.yaml",
    "config/core/200-*",
    "config/channels/in-memory-channel/200-*",
    "config/core/roles/",
    "config/core/configmaps/",
];

/// README.md, docs/*.md and each top-level folder's README.md, with their text.
fn docs() -> Vec<(String, String)> {
    let mut files = vec![PathBuf::from("README.md")];
    for dir in std::fs::read_dir(ROOT).unwrap() {
        let dir = dir.unwrap().path();
        if dir.join("README.md").is_file() {
            files.push(dir.strip_prefix(ROOT).unwrap().join("README.md"));
        }
    }
    for doc in std::fs::read_dir(Path::new(ROOT).join("docs")).unwrap() {
        let doc = doc.unwrap().path();
        if doc.extension().is_some_and(|e| e == "md") {
            files.push(doc.strip_prefix(ROOT).unwrap().to_path_buf());
        }
    }
    files.sort();
    (files.into_iter())
        .map(|f| {
            let text = std::fs::read_to_string(Path::new(ROOT).join(&f)).unwrap();
            (f.to_string_lossy().into_owned(), text)
        })
        .collect()
}

/// The `code spans` of `text`, each with the line it starts on (a span may go on over a line
/// break, as Markdown allows); fenced blocks left out.
fn spans(text: &str) -> Vec<(usize, String)> {
    let mut fenced = false;
    let prose: Vec<&str> = (text.lines())
        .map(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return "";
            }
            if fenced { "" } else { l }
        })
        .collect();
    let prose = prose.join("\n");
    let mut out = Vec::new();
    let mut at = 0;
    for (i, part) in prose.split('`').enumerate() {
        if i % 2 == 1 {
            let line = prose[..at].matches('\n').count() + 1;
            out.push((line, part.replace('\n', " ")));
        }
        at += part.len() + 1;
    }
    out
}

/// Whether `pattern` (`*` any run of characters within a name, `**` any folders) names
/// something in the tree.
fn exists(pattern: &str) -> bool {
    let path = Path::new(ROOT).join(pattern.trim_end_matches('/'));
    if let Some((dir, rest)) = pattern.split_once("/**") {
        return exists(dir) && (rest.is_empty() || rest == "/");
    }
    if let Some((dir, rest)) = pattern.split_once("/*/") {
        // A folder wildcard: some folder of `dir` holds the rest.
        return std::fs::read_dir(Path::new(ROOT).join(dir)).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                e.path().is_dir() && exists(&format!("{dir}/{name}/{rest}"))
            })
        });
    }
    if !pattern.contains('*') {
        // `config/400`: the files of that number (`config/400-deployment.yaml`).
        let numbered = pattern.rsplit('/').next().unwrap_or_default();
        if !numbered.is_empty() && numbered.chars().all(|c| c.is_ascii_digit()) {
            return exists(&format!("{pattern}-*"));
        }
        return path.exists();
    }
    let (dir, name) = pattern.rsplit_once('/').unwrap_or(("", pattern));
    let (prefix, suffix) = name.split_once('*').unwrap_or((name, ""));
    std::fs::read_dir(Path::new(ROOT).join(dir)).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(prefix) && n.ends_with(suffix.trim_start_matches('*'))
        })
    })
}

/// Whether `path` is in a folder the fuzzers make and git ignores (`fuzz/.gitignore`: their
/// corpus, logs, artifacts): named by the docs as where a run writes.
fn generated(path: &str) -> bool {
    let ignored = std::fs::read_to_string(Path::new(ROOT).join("fuzz/.gitignore")).unwrap();
    (ignored.lines())
        .filter(|l| l.ends_with('/'))
        .any(|dir| path.starts_with(&format!("fuzz/{dir}")))
}

/// A code span as a path of ours: the span's first word, without a `:line` or `#anchor`.
fn path_of(span: &str) -> Option<&str> {
    let word = span.split_whitespace().next()?;
    let word = word.split([':', '#']).next()?;
    let word = word.trim_end_matches(['.', ',', ';', ')']);
    (OURS.iter().any(|o| word.starts_with(o)) && !word.contains(['<', '{', '$'])).then_some(word)
}

#[test]
fn every_path_of_this_repository_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut upstream_named: BTreeSet<String> = BTreeSet::new();
    for (file, text) in docs() {
        for (line, span) in spans(&text) {
            let Some(path) = path_of(&span) else { continue };
            if UPSTREAM.contains(&path) {
                upstream_named.insert(path.to_string());
                continue;
            }
            if !exists(path) && !generated(path) {
                missing.push(format!("{file}:{line}: `{path}`"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths named in the docs that are not in the tree:\n{}",
        missing.join("\n")
    );
    for path in UPSTREAM {
        assert!(
            upstream_named.contains(path),
            "no doc names {path} now: drop it from UPSTREAM"
        );
        assert!(!exists(path), "{path} is ours now: drop it from UPSTREAM");
    }
}

#[test]
fn the_path_check_sees_what_is_missing() {
    assert!(exists("src/lib.rs") && exists("config/400") && exists("tests/it/*.rs"));
    assert!(exists("crates/*/src/**") && !exists("crates/*/nowhere/**"));
    assert!(generated("fuzz/corpus/") && !generated("fuzz/fuzz_targets/"));
    assert!(!exists("src/odh/") && !exists("config/999") && !exists("tests/it/*.py"));
    assert_eq!(path_of("src/leader.rs:12"), Some("src/leader.rs"));
    assert_eq!(path_of("docs/security.md#rbac"), Some("docs/security.md"));
    assert_eq!(path_of("kubectl apply -k config/"), None);
    let spans = spans("a `b` c `d\ne` f\n```\n`not`\n```\n`g`");
    assert_eq!(spans, [(1, "b".into()), (1, "d e".into()), (6, "g".into())]);
}

/// Every subcommand's name (`adopt check` for a nested one) and its long flags.
fn commands() -> Vec<(String, BTreeSet<String>)> {
    fn walk(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, BTreeSet<String>)>) {
        for sub in cmd.get_subcommands() {
            let name = format!("{prefix}{}", sub.get_name());
            let mut flags: BTreeSet<String> = (sub.get_arguments())
                .chain(cmd.get_arguments().filter(|a| a.is_global_set()))
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .collect();
            flags.insert("--help".into());
            out.push((name.clone(), flags));
            walk(sub, &format!("{name} "), out);
        }
    }
    let cli = imagegate::cli::Cli::command();
    // The program itself, as "": its own flags.
    let mut own: BTreeSet<String> = (cli.get_arguments())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    own.extend(["--help".to_string(), "--version".to_string()]);
    let mut out = vec![(String::new(), own)];
    walk(&cli, "", &mut out);
    out
}

#[test]
fn every_imagegate_command_the_docs_show_is_one_with_the_flags_they_give_it() {
    let commands = commands();
    let mut wrong = Vec::new();
    for (file, text) in docs() {
        for (line, span) in spans(&text) {
            let span = span.strip_prefix("kubectl ").unwrap_or(&span);
            let Some(rest) = span.strip_prefix("imagegate ") else {
                continue;
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            // A placeholder (`imagegate ...`, `imagegate <command>`) names no command.
            if words.first().is_none_or(|w| w.starts_with(['.', '<', '['])) {
                continue;
            }
            // Alternatives (`promote|rollback|reject`, escaped in a table) each name one.
            let first = words[0].replace('\\', "");
            for alternative in first.split('|') {
                let words: Vec<&str> = std::iter::once(alternative)
                    .chain(words[1..].iter().copied())
                    .collect();
                // The longest command the span starts with (`adopt check` before `adopt`);
                // a flag first is the program's own (`imagegate --version`).
                let found = (1..=words.len().min(2)).rev().find_map(|n| {
                    let name = if words[0].starts_with('-') {
                        String::new()
                    } else {
                        words[..n].join(" ")
                    };
                    commands.iter().find(|(c, _)| *c == name)
                });
                let Some((name, flags)) = found else {
                    wrong.push(format!(
                        "{file}:{line}: `imagegate {rest}`: no such command"
                    ));
                    continue;
                };
                for word in &words {
                    let flag = word.split('=').next().unwrap_or(word);
                    if flag.starts_with("--") && !flags.contains(flag) {
                        wrong.push(format!("{file}:{line}: `imagegate {name}` has no {flag}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_flag_in_a_table_of_the_docs_is_one_of_imagegates() {
    let all: BTreeSet<String> = commands().into_iter().flat_map(|(_, f)| f).collect();
    assert!(
        all.contains("--sink") && all.contains("--admin-addr"),
        "{all:?}"
    );
    let mut wrong = Vec::new();
    for (file, text) in docs() {
        for (i, row) in text.lines().enumerate() {
            let Some(cell) = row.strip_prefix("| `--") else {
                continue;
            };
            let flag = format!(
                "--{}",
                cell.split(['`', ' ', '=']).next().unwrap_or_default()
            );
            if !all.contains(&flag) {
                wrong.push(format!("{file}:{}: {flag}", i + 1));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "flags in the docs' tables that no imagegate command has:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_imagegate_variable_the_docs_name_is_read_somewhere() {
    let mut code = String::new();
    let mut dirs: Vec<PathBuf> = [
        "src", "crates", "scripts", ".ci", "tests", "benches", "fuzz",
    ]
    .iter()
    .map(|d| Path::new(ROOT).join(d))
    .collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("target") && !path.ends_with("corpus") {
                    dirs.push(path);
                }
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                // The docs' own text is not where a variable is read.
                if path.extension().is_none_or(|e| e != "md") {
                    code.push_str(&text);
                }
            }
        }
    }
    let mut unread = BTreeSet::new();
    for (file, text) in docs() {
        for (i, _) in text.match_indices("IMAGEGATE_") {
            let name: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            let name = name.trim_end_matches('_');
            if !code.contains(name) {
                unread.insert(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        unread.is_empty(),
        "variables the docs name that nothing reads:\n{}",
        unread.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}
