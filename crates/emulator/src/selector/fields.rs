//! Field selectors (`?fieldSelector=`): a port of kube's `fields.ParseSelector`, i.e.
//! `field=value` / `field!=value` terms with escaped values, matched against whatever field
//! values the server supports for a kind.

use std::fmt;
use std::str::FromStr;

use super::SelectorError;

/// A parsed field selector: `field=value` / `field!=value` terms that must all hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    equal: bool,
    value: String,
}

impl FieldSelector {
    /// Parses `s` like `fields.ParseSelector`: terms split on unescaped commas and sorted, each
    /// split at its first `!=`, `==` or `=`, values unescaped (`\,`, `\=`, `\\`). Field names
    /// are not checked here; the server rejects the ones it does not support.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, op, raw)) = split_term(part) else {
                let msg = format!("invalid selector: '{s}'; can't understand '{part}'");
                return Err(SelectorError::new(msg));
            };
            let value = unescape_value(raw)?;
            terms.push(FieldTerm {
                field: field.to_string(),
                equal: op != "!=",
                value,
            });
        }
        Ok(Self { terms })
    }

    /// The field paths it mentions, so the server can reject unsupported fields with a 400 like
    /// kube: `field label not supported: <field>`.
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// `get` returns the value of a supported field path (e.g. "metadata.name") of the object, or
    /// None if absent; an absent field compares as the empty string, like kube's `Fields.Get`.
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = get(&t.field).unwrap_or_default();
            (have == t.value) == t.equal
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Kube's form: terms in parse order, `==` written as `=`, values escaped.
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            let op = if t.equal { "=" } else { "!=" };
            let sep = if i > 0 { "," } else { "" };
            write!(f, "{sep}{}{op}{}", t.field, escape_value(&t.value))?;
        }
        Ok(())
    }
}

/// Splits on commas not escaped by a backslash; the escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut in_slash) = (0, false);
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The field, operator and raw value at the first operator; field names cannot be escaped.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        ["!=", "==", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .map(|op| (&term[..i], op, &rest[op.len()..]))
    })
}

/// `fields.UnescapeValue`, with kube's messages (the unescaped rune is printed as a number).
fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                let msg = format!("invalid field selector: invalid escape sequence: \\{c}");
                return Err(SelectorError::new(msg));
            }
            out.push(c);
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' || c == '=' {
            let msg = format!(
                "invalid field selector: unescaped character in value: {}",
                c as u32
            );
            return Err(SelectorError::new(msg));
        } else {
            out.push(c);
        }
    }
    if in_slash {
        return Err(SelectorError::new(
            "invalid field selector: invalid escape sequence: \\",
        ));
    }
    Ok(out)
}

/// `fields.EscapeValue`.
fn escape_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::selector::field_value;

    #[test]
    fn conformance_field_selector_on_metadata_name_selects_what_kube_selects() {
        let objects: Vec<Value> = ["l0", "l1", "l2", "l3", "l4"]
            .iter()
            .map(|n| json!({"metadata": {"name": n, "labels": {"conformance-set": "list"}}}))
            .collect();
        let cases: [(&str, &[&str]); 2] = [
            ("metadata.name=l2", &["l2"]),
            ("metadata.name!=l2", &["l0", "l1", "l3", "l4"]),
        ];
        for (selector, want) in cases {
            let parsed = FieldSelector::parse(selector).unwrap();
            let got: Vec<&str> = objects
                .iter()
                .filter(|o| parsed.matches(&|path| field_value(o, path)))
                .map(|o| o["metadata"]["name"].as_str().unwrap())
                .collect();
            assert_eq!(got, want, "3.7 {selector:?}");
        }
    }

    #[test]
    fn field_selectors_match_with_escapes_like_kube() {
        let cases = [
            ("metadata.name=l2", Some("l2"), true),
            ("metadata.name==l2", Some("l2"), true),
            ("metadata.name!=l2", Some("l2"), false),
            ("metadata.name!=l2", None, true),
            ("metadata.name=", None, true),
            ("metadata.name=", Some(""), true),
            (r"metadata.name=a\,b", Some("a,b"), true),
            (r"metadata.name=a\=b", Some("a=b"), true),
            (r"metadata.name=a\\b", Some(r"a\b"), true),
            (r"metadata.name!=a\\\,b", Some(r"a\,b"), false),
            ("metadata.name=a b", Some("a b"), true),
            (" metadata.name=l2", Some("l2"), false),
        ];
        for (selector, name, want) in cases {
            let parsed = FieldSelector::parse(selector).unwrap();
            let get = |path: &str| {
                if path == "metadata.name" {
                    name.map(str::to_string)
                } else {
                    None
                }
            };
            assert_eq!(parsed.matches(&get), want, "{selector:?} on {name:?}");
        }
    }

    #[test]
    fn field_selectors_list_their_fields_sorted_and_print_escaped() {
        let parsed = FieldSelector::parse(r"status.phase!=Failed,metadata.name=a\,b,,=x").unwrap();
        assert_eq!(parsed.fields(), ["", "metadata.name", "status.phase"]);
        assert_eq!(
            parsed.to_string(),
            r"=x,metadata.name=a\,b,status.phase!=Failed"
        );
        assert_eq!(FieldSelector::parse(&parsed.to_string()).unwrap(), parsed);
        let both = FieldSelector::parse("b==1,a=2").unwrap();
        assert_eq!(
            (both.fields(), both.to_string()),
            (vec!["a", "b"], "a=2,b=1".to_string())
        );
    }

    #[test]
    fn invalid_field_selectors_fail_with_kubes_messages() {
        let cases = [
            (
                "metadata.name",
                "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
            ),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a==b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                r"a=b\x",
                r"invalid field selector: invalid escape sequence: \x",
            ),
            (
                r"a=b\",
                r"invalid field selector: invalid escape sequence: \",
            ),
        ];
        for (selector, want) in cases {
            let err = FieldSelector::parse(selector).unwrap_err();
            assert_eq!(err.to_string(), want, "{selector:?}");
        }
    }
}
