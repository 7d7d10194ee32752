//! The demo's reading of `tekton/`: the EventListener, TriggerBinding, TriggerTemplate, Pipeline
//! and rollback PipelineRun that pipeline authors apply, parsed from the committed files, plus the
//! two evaluators the stand-in needs: Tekton's `$(...)` substitution and the subset of CEL that
//! the EventListener's filter is written in.
//!
//! The files are compiled into the binary, so the demo runs from any directory; `--tekton-dir`
//! reads an edited copy instead. Nothing here repeats a param, a path or a filter: what the
//! stand-in does is what the files say.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

/// The files of `tekton/` the demo reads, by name.
const EMBEDDED: &[(&str, &str)] = &[
    (
        "100-imagepromotion.yaml",
        include_str!("../../../tekton/100-imagepromotion.yaml"),
    ),
    (
        "200-task-smoke-test.yaml",
        include_str!("../../../tekton/200-task-smoke-test.yaml"),
    ),
    (
        "300-pipeline.yaml",
        include_str!("../../../tekton/300-pipeline.yaml"),
    ),
    (
        "410-triggerbinding.yaml",
        include_str!("../../../tekton/410-triggerbinding.yaml"),
    ),
    (
        "420-triggertemplate.yaml",
        include_str!("../../../tekton/420-triggertemplate.yaml"),
    ),
    (
        "430-eventlistener.yaml",
        include_str!("../../../tekton/430-eventlistener.yaml"),
    ),
    (
        "500-rollback-pipelinerun.yaml",
        include_str!("../../../tekton/500-rollback-pipelinerun.yaml"),
    ),
];

/// Every object of `tekton/`, by kind and name.
#[derive(Clone, Debug, Default)]
pub struct TektonFiles {
    objects: Vec<(String, Value)>,
}

impl TektonFiles {
    /// The files compiled into the binary.
    pub fn embedded() -> anyhow::Result<TektonFiles> {
        let mut files = TektonFiles::default();
        for (name, text) in EMBEDDED {
            files.add(name, text)?;
        }
        Ok(files)
    }

    /// Every `*.yaml` file of `dir` (an edited copy of `tekton/`).
    pub fn from_dir(dir: &Path) -> anyhow::Result<TektonFiles> {
        let mut files = TektonFiles::default();
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("cannot read {}", p.display()))?;
            files.add(&p.display().to_string(), &text)?;
        }
        Ok(files)
    }

    fn add(&mut self, file: &str, text: &str) -> anyhow::Result<()> {
        for doc in serde_yaml::Deserializer::from_str(text) {
            let v: Value = serde::Deserialize::deserialize(doc)
                .with_context(|| format!("{file} is not valid YAML"))?;
            if v.is_null() {
                continue;
            }
            if v.get("kind").and_then(Value::as_str).is_none() {
                bail!("{file}: a document without a kind");
            }
            self.objects.push((file.to_string(), v));
        }
        Ok(())
    }

    /// The object of `kind` named `name`.
    pub fn get(&self, kind: &str, name: &str) -> anyhow::Result<&Value> {
        self.objects
            .iter()
            .map(|(_, o)| o)
            .find(|o| {
                o.get("kind").and_then(Value::as_str) == Some(kind)
                    && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
            })
            .ok_or_else(|| anyhow!("tekton/ has no {kind} named {name:?}"))
    }

    /// The only object of `kind` (the EventListener, the rollback PipelineRun).
    pub fn single(&self, kind: &str) -> anyhow::Result<&Value> {
        let mut found = self
            .objects
            .iter()
            .filter(|(_, o)| o.get("kind").and_then(Value::as_str) == Some(kind));
        match (found.next(), found.next()) {
            (Some((_, o)), None) => Ok(o),
            (None, _) => bail!("tekton/ has no {kind}"),
            (Some((a, _)), Some((b, _))) => {
                bail!("tekton/ has more than one {kind} ({a}, {b}); the demo runs one")
            }
        }
    }
}

/// A string field of an object, or an error naming the object and the field.
pub fn str_at<'a>(obj: &'a Value, pointer: &str) -> anyhow::Result<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str).ok_or_else(|| {
        anyhow!(
            "{} {:?} has no string at {pointer}",
            obj.get("kind").and_then(Value::as_str).unwrap_or("object"),
            obj.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
        )
    })
}

/// A list field, empty when absent.
pub fn list_at<'a>(obj: &'a Value, pointer: &str) -> &'a [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `[{name, value}]` params as a map of strings (Tekton's string params).
pub fn params_of(list: &[Value]) -> anyhow::Result<Vec<(String, String)>> {
    list.iter()
        .map(|p| {
            let name = str_at(p, "/name")?.to_string();
            let value = match p.get("value") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => bail!("param {name:?} is not a string: {other}"),
                None => bail!("param {name:?} has no value"),
            };
            Ok((name, value))
        })
        .collect()
}

/// Declared params `[{name, default}]`: the defaults of those that have one.
pub fn defaults_of(list: &[Value]) -> BTreeMap<String, String> {
    list.iter()
        .filter_map(|p| {
            Some((
                p.get("name")?.as_str()?.to_string(),
                p.get("default")?.as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Replaces every `$(expr)` in `text` with `lookup(expr)`; an expression `lookup` does not know
/// is an error, as Tekton's validation makes it one.
pub fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find(')')
            .ok_or_else(|| anyhow!("unterminated $( in {text:?}"))?;
        let expr = after[..end].trim();
        let value =
            lookup(expr).ok_or_else(|| anyhow!("$({expr}) in {text:?} names nothing known"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitutes every string inside a JSON value (a resource template).
pub fn substitute_value(
    v: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Value> {
    Ok(match v {
        Value::String(s) => Value::String(substitute(s, lookup)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| substitute_value(i, lookup))
                .collect::<anyhow::Result<_>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, i)| Ok((k.clone(), substitute_value(i, lookup)?)))
                .collect::<anyhow::Result<_>>()?,
        ),
        other => other.clone(),
    })
}

/// A request as a TriggerBinding and a CEL interceptor see it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Header names in lower case, values joined with `,` (Tekton's rendering).
    pub headers: BTreeMap<String, String>,
    /// The JSON body.
    pub body: Value,
}

impl Request {
    /// A header, case-insensitively (Tekton canonicalises the name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// `body.a.b` as a TriggerBinding renders it: strings as they are, anything else as JSON.
    pub fn body_path(&self, path: &str) -> Option<Value> {
        let mut cur = &self.body;
        for part in path.split('.') {
            cur = cur.get(part)?;
        }
        Some(cur.clone())
    }

    /// Evaluates one TriggerBinding expression (`header.X`, `body.a.b`).
    pub fn binding(&self, expr: &str) -> Option<String> {
        if let Some(h) = expr.strip_prefix("header.") {
            return self.header(h).map(str::to_string);
        }
        let path = expr.strip_prefix("body.")?;
        Some(match self.body_path(path)? {
            Value::String(s) => s,
            other => other.to_string(),
        })
    }
}

/// Evaluates a CEL filter over `request`: the subset the EventListener's filters use
/// (`header.match(name, value)`, `header.canonical(name)`, `body.a.b`, string literals, `==`,
/// `!=`, `!`, `&&`, `||`, parentheses). Anything else is an error, never a silent `true`.
pub fn cel_filter(expr: &str, request: &Request) -> anyhow::Result<bool> {
    let tokens = cel::tokenize(expr)?;
    let mut p = cel::Parser {
        tokens: &tokens,
        pos: 0,
        request,
    };
    let v = p.or()?;
    if p.pos != tokens.len() {
        bail!("CEL filter {expr:?}: unexpected {:?}", tokens[p.pos]);
    }
    match v {
        cel::Val::Bool(b) => Ok(b),
        other => bail!("CEL filter {expr:?} evaluates to {other:?}, not a bool"),
    }
}

mod cel {
    use anyhow::{anyhow, bail};
    use serde_json::Value;

    use super::Request;

    #[derive(Clone, Debug, PartialEq)]
    pub enum Tok {
        Ident(String),
        Str(String),
        Dot,
        Comma,
        LParen,
        RParen,
        And,
        Or,
        Eq,
        Ne,
        Not,
    }

    pub fn tokenize(s: &str) -> anyhow::Result<Vec<Tok>> {
        let mut out = Vec::new();
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
            match c {
                _ if c.is_whitespace() => i += 1,
                '.' => (out.push(Tok::Dot), i += 1).1,
                ',' => (out.push(Tok::Comma), i += 1).1,
                '(' => (out.push(Tok::LParen), i += 1).1,
                ')' => (out.push(Tok::RParen), i += 1).1,
                '&' if two == "&&" => (out.push(Tok::And), i += 2).1,
                '|' if two == "||" => (out.push(Tok::Or), i += 2).1,
                '=' if two == "==" => (out.push(Tok::Eq), i += 2).1,
                '!' if two == "!=" => (out.push(Tok::Ne), i += 2).1,
                '!' => (out.push(Tok::Not), i += 1).1,
                '\'' | '"' => {
                    let end = chars[i + 1..]
                        .iter()
                        .position(|&x| x == c)
                        .ok_or_else(|| anyhow!("unterminated string in {s:?}"))?;
                    out.push(Tok::Str(chars[i + 1..i + 1 + end].iter().collect()));
                    i += end + 2;
                }
                _ if c.is_alphanumeric() || c == '_' => {
                    let end = chars[i..]
                        .iter()
                        .position(|x| !(x.is_alphanumeric() || *x == '_'))
                        .map_or(chars.len(), |p| i + p);
                    out.push(Tok::Ident(chars[i..end].iter().collect()));
                    i = end;
                }
                _ => bail!("CEL filter {s:?}: the demo does not evaluate {c:?}"),
            }
        }
        Ok(out)
    }

    #[derive(Clone, Debug, PartialEq)]
    pub enum Val {
        Bool(bool),
        Str(String),
        Json(Value),
        Null,
    }

    impl Val {
        fn truthy(&self) -> anyhow::Result<bool> {
            match self {
                Val::Bool(b) => Ok(*b),
                other => bail!("{other:?} is not a bool"),
            }
        }

        fn same(&self, other: &Val) -> bool {
            let norm = |v: &Val| match v {
                Val::Json(Value::String(s)) => Val::Str(s.clone()),
                Val::Json(Value::Bool(b)) => Val::Bool(*b),
                Val::Json(Value::Null) => Val::Null,
                other => other.clone(),
            };
            norm(self) == norm(other)
        }
    }

    pub struct Parser<'a> {
        pub tokens: &'a [Tok],
        pub pos: usize,
        pub request: &'a Request,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<&Tok> {
            self.tokens.get(self.pos)
        }

        fn expect(&mut self, t: &Tok) -> anyhow::Result<()> {
            match self.peek() {
                Some(x) if x == t => {
                    self.pos += 1;
                    Ok(())
                }
                other => bail!("expected {t:?}, found {other:?}"),
            }
        }

        pub fn or(&mut self) -> anyhow::Result<Val> {
            let mut v = self.and()?;
            while self.peek() == Some(&Tok::Or) {
                self.pos += 1;
                let r = self.and()?;
                v = Val::Bool(v.truthy()? || r.truthy()?);
            }
            Ok(v)
        }

        fn and(&mut self) -> anyhow::Result<Val> {
            let mut v = self.unary()?;
            while self.peek() == Some(&Tok::And) {
                self.pos += 1;
                let r = self.unary()?;
                v = Val::Bool(v.truthy()? && r.truthy()?);
            }
            Ok(v)
        }

        fn unary(&mut self) -> anyhow::Result<Val> {
            if self.peek() == Some(&Tok::Not) {
                self.pos += 1;
                return Ok(Val::Bool(!self.unary()?.truthy()?));
            }
            let l = self.primary()?;
            match self.peek() {
                Some(Tok::Eq) => {
                    self.pos += 1;
                    let r = self.primary()?;
                    Ok(Val::Bool(l.same(&r)))
                }
                Some(Tok::Ne) => {
                    self.pos += 1;
                    let r = self.primary()?;
                    Ok(Val::Bool(!l.same(&r)))
                }
                _ => Ok(l),
            }
        }

        fn primary(&mut self) -> anyhow::Result<Val> {
            match self.peek().cloned() {
                Some(Tok::LParen) => {
                    self.pos += 1;
                    let v = self.or()?;
                    self.expect(&Tok::RParen)?;
                    Ok(v)
                }
                Some(Tok::Str(s)) => {
                    self.pos += 1;
                    Ok(Val::Str(s))
                }
                Some(Tok::Ident(root)) => {
                    self.pos += 1;
                    let mut path = Vec::new();
                    while self.peek() == Some(&Tok::Dot) {
                        self.pos += 1;
                        match self.peek().cloned() {
                            Some(Tok::Ident(p)) => {
                                self.pos += 1;
                                path.push(p);
                            }
                            other => bail!("expected a name after '.', found {other:?}"),
                        }
                    }
                    if self.peek() == Some(&Tok::LParen) {
                        self.pos += 1;
                        let mut args = Vec::new();
                        while self.peek() != Some(&Tok::RParen) {
                            args.push(self.or()?);
                            if self.peek() == Some(&Tok::Comma) {
                                self.pos += 1;
                            }
                        }
                        self.expect(&Tok::RParen)?;
                        return self.call(&root, &path, args);
                    }
                    self.path(&root, &path)
                }
                other => bail!("unexpected {other:?}"),
            }
        }

        fn path(&self, root: &str, path: &[String]) -> anyhow::Result<Val> {
            match root {
                "body" => Ok(self
                    .request
                    .body_path(&path.join("."))
                    .map_or(Val::Null, Val::Json)),
                "true" if path.is_empty() => Ok(Val::Bool(true)),
                "false" if path.is_empty() => Ok(Val::Bool(false)),
                "null" if path.is_empty() => Ok(Val::Null),
                other => {
                    bail!("the demo's CEL knows body, header, true, false and null, not {other:?}")
                }
            }
        }

        fn call(&self, root: &str, path: &[String], args: Vec<Val>) -> anyhow::Result<Val> {
            let arg = |i: usize| match args.get(i) {
                Some(Val::Str(s)) => Ok(s.clone()),
                other => Err(anyhow!("argument {i} must be a string, not {other:?}")),
            };
            match (root, path) {
                ("header", [f]) if f == "match" && args.len() == 2 => Ok(Val::Bool(
                    self.request.header(&arg(0)?) == Some(arg(1)?.as_str()),
                )),
                ("header", [f]) if f == "canonical" && args.len() == 1 => Ok(self
                    .request
                    .header(&arg(0)?)
                    .map_or(Val::Null, |s| Val::Str(s.to_string()))),
                _ => bail!(
                    "the demo's CEL does not know {root}.{}() with {} arguments",
                    path.join("."),
                    args.len()
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(ty: &str, tag: &str) -> Request {
        Request {
            headers: [
                ("ce-specversion".to_string(), "1.0".to_string()),
                ("ce-type".to_string(), ty.to_string()),
                ("ce-imagetag".to_string(), tag.to_string()),
                ("ce-id".to_string(), "abc".to_string()),
            ]
            .into(),
            body: json!({"imageStream": "nb", "tag": tag, "generation": 3, "previousDigest": null}),
        }
    }

    #[test]
    fn the_committed_filter_accepts_only_candidate_updates() {
        let files = TektonFiles::embedded().unwrap();
        let el = files.single("EventListener").unwrap();
        let filter = list_at(el, "/spec/triggers/0/interceptors/0/params")
            .iter()
            .find(|p| p["name"] == "filter")
            .and_then(|p| p["value"].as_str())
            .unwrap();
        let updated = "dev.imagegate.imagestreamtag.updated";
        assert!(cel_filter(filter, &request(updated, "candidate")).unwrap());
        assert!(!cel_filter(filter, &request(updated, "latest")).unwrap());
        assert!(
            !cel_filter(
                filter,
                &request("dev.imagegate.imagestreamtag.deleted", "candidate")
            )
            .unwrap()
        );
    }

    #[test]
    fn cel_operators_and_errors() {
        let r = request("t", "candidate");
        assert!(
            cel_filter(
                "body.tag == 'candidate' && !(body.imageStream != \"nb\")",
                &r
            )
            .unwrap()
        );
        assert!(
            cel_filter(
                "body.missing == 'x' || header.canonical('Ce-Id') == 'abc'",
                &r
            )
            .unwrap()
        );
        assert!(cel_filter("body.previousDigest == null", &r).unwrap());
        assert!(
            cel_filter("body.tag", &r).is_err(),
            "a string is not a filter"
        );
        assert!(
            cel_filter("body.tag.size() > 3", &r).is_err(),
            "unknown syntax is an error"
        );
        assert!(cel_filter("header.match('ce-type')", &r).is_err());
    }

    #[test]
    fn substitution_renders_known_names_and_refuses_unknown_ones() {
        let lookup = |e: &str| (e == "tt.params.id").then(|| "42".to_string());
        assert_eq!(
            substitute("pr-$(tt.params.id)-x", &lookup).unwrap(),
            "pr-42-x"
        );
        assert_eq!(substitute("no vars", &lookup).unwrap(), "no vars");
        let err = substitute("$(tt.params.nope)", &lookup).unwrap_err();
        assert!(err.to_string().contains("tt.params.nope"), "{err}");
        assert!(substitute("$(tt.params.id", &lookup).is_err());
    }

    #[test]
    fn bindings_read_headers_case_insensitively_and_render_non_strings_as_json() {
        let r = request("t", "candidate");
        assert_eq!(r.binding("header.Ce-Id").as_deref(), Some("abc"));
        assert_eq!(r.binding("body.imageStream").as_deref(), Some("nb"));
        assert_eq!(r.binding("body.generation").as_deref(), Some("3"));
        assert_eq!(r.binding("body.nope"), None);
    }

    #[test]
    fn every_embedded_file_parses_and_names_what_the_demo_needs() {
        let files = TektonFiles::embedded().unwrap();
        files.single("EventListener").unwrap();
        files.single("TriggerBinding").unwrap();
        files.single("TriggerTemplate").unwrap();
        files.single("PipelineRun").unwrap();
        files.get("Pipeline", "imagegate-promote").unwrap();
        files.get("ImagePromotion", "notebooks").unwrap();
    }
}
