//! Label and field selectors with the semantics of kube-apiserver: a port of
//! `k8s.io/apimachinery` `labels.Parse` and `fields.ParseSelector`, with kube's error texts, so
//! `?labelSelector=` and `?fieldSelector=` behave (and fail) in the emulator as on a cluster.
//!
//! - `labels`: [`LabelSelector`], kube's lexer, parser and matcher for `?labelSelector=`.
//! - `fields`: [`FieldSelector`], the `field=value` terms of `?fieldSelector=`.
//! - `validation`: the key and value rules of kube's `validation` package, with its texts.
//!
//! This file holds what both share: [`SelectorError`] and [`field_value`], which reads the
//! value a field selector compares from an object.

mod fields;
mod labels;
mod validation;

use serde_json::Value;

pub use fields::FieldSelector;
pub use labels::LabelSelector;

/// A selector the API server refuses with a 400; the text is kube's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    message: String,
}

impl SelectorError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// The value of a dotted field path in an object (e.g. "metadata.name", "status.phase",
/// "spec.dockerImageRepository"), as a string (strings as is, numbers/bools rendered), None when
/// absent, null or not a scalar.
pub fn field_value(obj: &Value, path: &str) -> Option<String> {
    let value = path.split('.').try_fold(obj, |v, segment| v.get(segment))?;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn malformed_input_is_an_error_or_a_selector_never_a_panic() {
        let corpus = [
            "x notin (abc,,def),bar,z in (),w",
            "a in (b",
            "!!x,==,!=(),<>",
            "x in ((a)),y",
            "é=ü,ß in (ä)",
            "x\0y,\0",
            "x=\0,y",
            r"metadata.name=a\,b\=c\\,spec.x!=\",
            ")(,,=!<>in notin",
        ];
        for text in corpus {
            for (end, _) in text.char_indices().chain([(text.len(), ' ')]) {
                let _ = LabelSelector::parse(&text[..end]);
                let _ = FieldSelector::parse(&text[..end]);
            }
        }
    }

    #[test]
    fn empty_selectors_select_everything() {
        let label = LabelSelector::parse("").unwrap();
        assert!(label.is_empty() && label.matches_value(Some(&json!({"a": "b"}))));
        assert_eq!(label, LabelSelector::default());
        assert!(!LabelSelector::parse("a").unwrap().is_empty());
        for text in ["", ","] {
            let field = FieldSelector::parse(text).unwrap();
            assert!(field.is_empty() && field.matches(&|_| None), "{text:?}");
        }
    }

    #[test]
    fn field_value_renders_scalars_and_misses_the_rest() {
        let obj = json!({
            "metadata": {"name": "nb", "generation": 3, "deletionTimestamp": null},
            "spec": {"dockerImageRepository": "quay.io/x/y", "lookupPolicy": {"local": false}},
            "status": {"tags": [1]},
        });
        let cases = [
            ("metadata.name", Some("nb")),
            ("metadata.generation", Some("3")),
            ("spec.dockerImageRepository", Some("quay.io/x/y")),
            ("spec.lookupPolicy.local", Some("false")),
            ("metadata.deletionTimestamp", None),
            ("metadata.namespace", None),
            ("metadata.name.first", None),
            ("spec.lookupPolicy", None),
            ("status.tags", None),
            ("", None),
        ];
        for (path, want) in cases {
            assert_eq!(field_value(&obj, path).as_deref(), want, "{path:?}");
        }
    }
}
