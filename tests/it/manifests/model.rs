//! The manifests as the checks see them: each YAML document with the file it came from, the
//! problems found (file, `kind/name`, field path, message), and the small readers every check
//! shares (`$(...)` variables, param names).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// The directories whose YAML files are the shipped manifests.
pub const MANIFEST_DIRS: [&str; 4] = ["config", "tekton", "knative", "examples"];

/// One YAML document.
#[derive(Clone, Debug)]
pub struct Doc {
    /// The file, relative to the repository (`tekton/300-pipeline.yaml`).
    pub file: String,
    /// Its position in the file, from 0.
    pub index: usize,
    /// The document.
    pub obj: Value,
}

impl Doc {
    /// `kind`, or "".
    pub fn kind(&self) -> &str {
        self.obj["kind"].as_str().unwrap_or_default()
    }

    /// `metadata.name` (or `generateName`), or "".
    pub fn name(&self) -> &str {
        let meta = &self.obj["metadata"];
        meta["name"]
            .as_str()
            .or_else(|| meta["generateName"].as_str())
            .unwrap_or_default()
    }

    /// `metadata.namespace`, if set.
    pub fn namespace(&self) -> Option<&str> {
        self.obj["metadata"]["namespace"].as_str()
    }

    /// The top directory of its file (`tekton`).
    pub fn directory(&self) -> &str {
        self.file.split('/').next().unwrap_or_default()
    }

    /// `Kind/name`, as problems name a document.
    pub fn what(&self) -> String {
        format!("{}/{}", self.kind(), self.name())
    }

    /// `spec`, or null.
    pub fn spec(&self) -> &Value {
        &self.obj["spec"]
    }
}

/// The manifests: each file's text and its parsed documents.
#[derive(Clone, Debug, Default)]
pub struct Manifests {
    /// Text of each file, by path relative to the repository.
    pub files: BTreeMap<String, String>,
    /// Every document of every file that parses.
    pub docs: Vec<Doc>,
    /// Files that do not parse: (file, message).
    pub unparsable: Vec<(String, String)>,
    /// Files whose documents a test changed (their text is stale).
    touched: BTreeSet<String>,
}

impl Manifests {
    /// The YAML files of [`MANIFEST_DIRS`] under `root`, and the JSON ones (the Grafana dashboard
    /// a kustomization's configMapGenerator ships; JSON is YAML to the parser).
    pub fn load(root: &Path) -> Manifests {
        let mut files = BTreeMap::new();
        for dir in MANIFEST_DIRS {
            let mut stack = vec![root.join(dir)];
            while let Some(d) = stack.pop() {
                for entry in std::fs::read_dir(&d).expect("a manifest directory") {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path
                        .extension()
                        .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                    {
                        let rel = path.strip_prefix(root).unwrap().to_string_lossy();
                        files.insert(rel.into_owned(), std::fs::read_to_string(&path).unwrap());
                    }
                }
            }
        }
        Manifests::from_files(files)
    }

    /// Parses the files. A repeated key in a mapping is an error, as it is for the API server's
    /// strict decoding (a YAML parser that keeps one of them silently drops the other).
    pub fn from_files(files: BTreeMap<String, String>) -> Manifests {
        let mut m = Manifests {
            files,
            ..Manifests::default()
        };
        for (file, text) in &m.files {
            match parse(text) {
                Ok(objs) => m
                    .docs
                    .extend(objs.into_iter().enumerate().map(|(index, obj)| Doc {
                        file: file.clone(),
                        index,
                        obj,
                    })),
                Err(e) => m.unparsable.push((file.clone(), e)),
            }
        }
        m
    }

    /// Adds a file (a case's extra manifest) and parses it.
    pub fn add_file(&mut self, file: &str, text: &str) {
        let mut files = std::mem::take(&mut self.files);
        files.insert(file.into(), text.into());
        let touched = std::mem::take(&mut self.touched);
        let edited: Vec<Doc> = self
            .docs
            .iter()
            .filter(|d| touched.contains(&d.file))
            .cloned()
            .collect();
        *self = Manifests::from_files(files);
        for d in edited {
            if let Some(slot) = self
                .docs
                .iter_mut()
                .find(|x| x.file == d.file && x.index == d.index)
            {
                *slot = d;
            }
        }
        self.touched = touched;
    }

    /// The first document of `kind` in a file under `dir` ("" for any), to change; its file's
    /// text is written anew from the documents when asked for.
    pub fn first_mut(&mut self, kind: &str, dir: &str) -> &mut Value {
        let doc = self
            .docs
            .iter_mut()
            .find(|d| d.kind() == kind && d.file.starts_with(dir))
            .unwrap_or_else(|| panic!("no {kind} in {dir:?} to change"));
        self.touched.insert(doc.file.clone());
        &mut doc.obj
    }

    /// The text of every file as it is now (changed files serialised from their documents).
    pub fn texts(&self) -> BTreeMap<String, String> {
        let mut out = self.files.clone();
        for file in &self.touched {
            let docs: Vec<String> = self
                .docs
                .iter()
                .filter(|d| &d.file == file)
                .map(|d| serde_norway::to_string(&d.obj).unwrap())
                .collect();
            out.insert(file.clone(), docs.join("---\n"));
        }
        out
    }
}

/// The documents of a YAML text (empty documents skipped).
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        // serde_norway's own Value refuses a repeated key; serde_json's map would keep the last.
        let v = serde_norway::Value::deserialize(doc)
            .map_err(|e| format!("document {}: YAML does not parse: {e}", i + 1))?;
        if v.is_null() {
            continue;
        }
        out.push(
            serde_json::to_value(v)
                .map_err(|e| format!("document {}: not a JSON-like object: {e}", i + 1))?,
        );
    }
    Ok(out)
}

/// One problem: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// `Kind/name` of the document, or "" for the file.
    pub what: String,
    /// The field path inside the document, or "".
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if !self.what.is_empty() {
            write!(f, " ({})", self.what)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Problems (which fail the check) and warnings (which do not).
#[derive(Debug, Default)]
pub struct Report {
    /// Problems.
    pub errors: Vec<Problem>,
    /// Warnings.
    pub warnings: Vec<Problem>,
}

impl Report {
    /// A problem in a document.
    pub fn error(&mut self, doc: &Doc, path: &str, message: impl Into<String>) {
        self.errors.push(problem(doc, path, message.into()));
    }

    /// A problem of a whole file.
    pub fn file_error(&mut self, file: &str, message: impl Into<String>) {
        self.errors.push(Problem {
            file: file.into(),
            what: String::new(),
            path: String::new(),
            message: message.into(),
        });
    }

    /// A warning in a document.
    pub fn warn(&mut self, doc: &Doc, path: &str, message: impl Into<String>) {
        self.warnings.push(problem(doc, path, message.into()));
    }
}

fn problem(doc: &Doc, path: &str, message: String) -> Problem {
    Problem {
        file: doc.file.clone(),
        what: doc.what(),
        path: path.into(),
        message,
    }
}

/// `base.key`, or `key` at the root.
pub fn at(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.into()
    } else {
        format!("{base}.{key}")
    }
}

/// The items of a list, or none.
pub fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// The `name` of each item of a list of named things (params, tasks, results).
pub fn names_of(list: &Value) -> Vec<String> {
    items(list)
        .iter()
        .filter_map(|i| i["name"].as_str().map(str::to_string))
        .collect()
}

/// The names that appear more than once, sorted.
pub fn duplicates(names: &[String]) -> BTreeSet<String> {
    names
        .iter()
        .filter(|n| names.iter().filter(|m| m == n).count() > 1)
        .cloned()
        .collect()
}

/// Every string under `node` with its field path, skipping the subtrees `skip` names.
pub fn strings<'a>(
    node: &'a Value,
    path: &str,
    skip: &dyn Fn(&str) -> bool,
) -> Vec<(String, &'a str)> {
    let mut out = Vec::new();
    walk_strings(node, path.to_string(), skip, &mut out);
    out
}

fn walk_strings<'a>(
    node: &'a Value,
    path: String,
    skip: &dyn Fn(&str) -> bool,
    out: &mut Vec<(String, &'a str)>,
) {
    if skip(&path) {
        return;
    }
    match node {
        Value::String(s) => out.push((path, s)),
        Value::Object(o) => {
            for (k, v) in o {
                walk_strings(v, at(&path, k), skip, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                walk_strings(v, format!("{path}[{i}]"), skip, out);
            }
        }
        _ => {}
    }
}

/// The expressions of the `$(...)` references in a string, trimmed (Tekton's variable syntax; a
/// reference holds no parentheses).
pub fn refs(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        match after.find([')', '(']) {
            Some(end) if after.as_bytes()[end] == b')' => {
                out.push(after[..end].trim().to_string());
                rest = &after[end + 1..];
            }
            Some(end) => rest = &after[end..],
            None => break,
        }
    }
    out
}

/// Every `$(...)` under `node`: (field path, expression).
pub fn variables(node: &Value, path: &str, skip: &dyn Fn(&str) -> bool) -> Vec<(String, String)> {
    strings(node, path, skip)
        .into_iter()
        .flat_map(|(p, s)| refs(s).into_iter().map(move |e| (p.clone(), e)))
        .collect()
}

/// The param name of `prefix.x`, `prefix.x[*]`, `prefix.x.key` or `prefix["x"]`.
pub fn param_ref(expr: &str, prefix: &str) -> Option<String> {
    let rest = expr.strip_prefix(prefix)?;
    if let Some(name) = rest.strip_prefix('.') {
        let end = name
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(name.len());
        return (end > 0).then(|| name[..end].to_string());
    }
    let inner = rest.strip_prefix('[')?.trim_start();
    let quote = inner.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &inner[1..];
    let end = body.find(quote)?;
    (end > 0).then(|| body[..end].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_found_and_trimmed() {
        assert_eq!(
            refs("a $(params.x) b $( tasks.t.results.r ) $(oops"),
            vec!["params.x", "tasks.t.results.r"]
        );
        assert_eq!(refs("$(f(x))"), Vec::<String>::new());
    }

    #[test]
    fn param_references_in_every_form_tekton_accepts() {
        for (expr, name) in [
            ("params.image", Some("image")),
            ("params.list[*]", Some("list")),
            ("params.obj.key", Some("obj")),
            ("params['with.dot']", Some("with.dot")),
            ("params[\"q\"]", Some("q")),
            ("params", None),
            ("paramsx.y", None),
        ] {
            assert_eq!(param_ref(expr, "params").as_deref(), name, "{expr}");
        }
    }

    #[test]
    fn a_repeated_key_does_not_parse() {
        let e = parse("kind: A\nmetadata:\n  name: a\n  name: b\n").unwrap_err();
        assert!(e.contains("duplicate entry with key \"name\""), "{e}");
    }
}
