//! The demo's reading of `tekton/`: the EventListener, TriggerBinding, TriggerTemplate, Pipeline
//! and rollback PipelineRun that pipeline authors apply, parsed from the committed files, and
//! Tekton's `$(...)` substitution. The EventListener's CEL filters are evaluated by
//! [`super::interceptor`].
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
        "210-task-notebook-validation.yaml",
        include_str!("../../../tekton/210-task-notebook-validation.yaml"),
    ),
    (
        "300-pipeline.yaml",
        include_str!("../../../tekton/300-pipeline.yaml"),
    ),
    (
        "310-pipeline-rbac.yaml",
        include_str!("../../../tekton/310-pipeline-rbac.yaml"),
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
        for doc in serde_norway::Deserializer::from_str(text) {
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

    /// Every object of `kind`, in file order.
    pub fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects
            .iter()
            .map(|(_, o)| o)
            .filter(|o| o.get("kind").and_then(Value::as_str) == Some(kind))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

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
