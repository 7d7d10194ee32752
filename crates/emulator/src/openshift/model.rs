//! A typed model of an ImageStream's tag lists over `serde_json::Value`.
//!
//! Field names, null and omitempty rules follow openshift/api image/v1/types.go. Values are
//! decoded with nulls removed (Go's decoder leaves a field at its zero value for null, exactly
//! as for an absent key). Unknown fields are kept in `extra`, so this layer loses nothing.
//! [`Stream`] holds `spec.tags` / `status.tags` as maps and every other field as it came; the
//! tag-history rules on it live in [`tagevents`](super::tagevents).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{API_VERSION, StrategyError, field, invalid};

/// Decodes after dropping null-valued keys, so that null means "default" everywhere.
pub(crate) fn from_json<T: DeserializeOwned>(mut v: Value) -> Result<T, serde_json::Error> {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    serde_json::from_value(v)
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagReference {
    pub name: String,
    /// No omitempty in Go: `annotations: null` is the common case.
    pub annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<ObjectReference>,
    #[serde(skip_serializing_if = "is_false")]
    pub reference: bool,
    pub generation: Option<i64>,
    pub import_policy: TagImportPolicy,
    pub reference_policy: TagReferencePolicy,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagImportPolicy {
    #[serde(skip_serializing_if = "is_false")]
    pub insecure: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub scheduled: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub import_mode: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct TagReferencePolicy {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct NamedTagEventList {
    pub tag: String,
    /// No omitempty in Go: a tag that never imported shows `items: null`.
    pub items: Option<Vec<TagEvent>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<TagEventCondition>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagEvent {
    pub created: Option<String>,
    pub docker_image_reference: String,
    pub image: String,
    pub generation: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub(crate) struct TagEventCondition {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub generation: i64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TagReference {
    /// `SetDefaults_TagReferencePolicy` / `SetDefaults_TagImportPolicy`, applied wherever a
    /// TagReference is decoded (ImageStream and ImageStreamTag alike).
    pub fn apply_defaults(&mut self) {
        if self.reference_policy.kind.is_empty() {
            self.reference_policy.kind = "Source".into();
        }
        if self.import_policy.import_mode.is_empty() {
            self.import_policy.import_mode = "Legacy".into();
        }
    }
}

/// An ImageStream with its tag lists held as maps keyed by tag name, as openshift-apiserver
/// holds them internally (which is why v1 output is sorted and duplicates collapse, last wins).
/// Every other field stays in `obj` untouched.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stream {
    pub obj: Map<String, Value>,
    pub spec_tags: BTreeMap<String, TagReference>,
    pub status_tags: BTreeMap<String, NamedTagEventList>,
}

impl Stream {
    /// A stream that does not exist yet (what istag and import writes start from).
    pub fn empty(namespace: &str, name: &str) -> Stream {
        let obj = json!({
            "apiVersion": API_VERSION, "kind": "ImageStream",
            "metadata": {"name": name, "namespace": namespace}, "spec": {}
        });
        let Value::Object(obj) = obj else {
            unreachable!("a json! object literal")
        };
        Stream {
            obj,
            spec_tags: BTreeMap::new(),
            status_tags: BTreeMap::new(),
        }
    }

    /// Splits the tag lists out of an ImageStream; malformed shapes are 422 Invalid.
    pub fn parse(v: &Value) -> Result<Stream, StrategyError> {
        let Value::Object(obj) = v else {
            return Err(invalid(&[field::invalid(
                "<root>",
                &short(v),
                "must be an object",
            )]));
        };
        let mut obj = obj.clone();
        let mut errs = Vec::new();
        if !matches!(
            obj.get("metadata"),
            None | Some(Value::Null | Value::Object(_))
        ) {
            errs.push(field::invalid("metadata", "", "must be an object"));
        }
        let spec: Vec<TagReference> = take_list(&mut obj, "spec", "tags", &mut errs);
        let status: Vec<NamedTagEventList> = take_list(&mut obj, "status", "tags", &mut errs);
        if !errs.is_empty() {
            return Err(invalid(&errs));
        }
        Ok(Stream {
            obj,
            spec_tags: spec.into_iter().map(|t| (t.name.clone(), t)).collect(),
            status_tags: status.into_iter().map(|t| (t.tag.clone(), t)).collect(),
        })
    }

    /// The object with both tag lists back in, sorted by name (empty lists omitted, as Go's
    /// `omitempty` does).
    pub fn into_value(self) -> Value {
        let Stream {
            mut obj,
            spec_tags,
            status_tags,
        } = self;
        let spec = section(&mut obj, "spec");
        if !spec_tags.is_empty() {
            let tags = spec_tags
                .into_iter()
                .map(|(name, t)| to_value(TagReference { name, ..t }));
            spec.insert("tags".into(), Value::Array(tags.collect()));
        }
        if !status_tags.is_empty() || obj.contains_key("status") {
            let status = section(&mut obj, "status");
            if !status_tags.is_empty() {
                let tags = status_tags
                    .into_iter()
                    .map(|(tag, t)| to_value(NamedTagEventList { tag, ..t }));
                status.insert("tags".into(), Value::Array(tags.collect()));
            }
        }
        Value::Object(obj)
    }

    pub fn meta_str(&self, key: &str) -> &str {
        self.obj
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.meta_str("name")
    }

    pub fn namespace(&self) -> &str {
        self.meta_str("namespace")
    }

    pub fn generation(&self) -> i64 {
        self.obj
            .get("metadata")
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    pub fn metadata_mut(&mut self) -> &mut Map<String, Value> {
        section(&mut self.obj, "metadata")
    }

    pub fn set_generation(&mut self, generation: i64) {
        self.metadata_mut()
            .insert("generation".into(), json!(generation));
    }

    pub fn has_annotation(&self, key: &str) -> bool {
        self.obj
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(key))
            .is_some()
    }

    pub fn set_annotation(&mut self, key: &str, value: &str) {
        let meta = self.metadata_mut();
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        annotations[key] = json!(value);
    }

    pub fn labels(&self) -> BTreeMap<String, String> {
        string_map(self.obj.get("metadata").and_then(|m| m.get("labels")))
    }

    pub fn status_str(&self, key: &str) -> &str {
        self.obj
            .get("status")
            .and_then(|s| s.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// `spec` as one value (tags included), for the "did the spec change" comparison.
    pub fn spec_value(&self) -> Value {
        let mut spec = self.obj.get("spec").cloned().unwrap_or_else(|| json!({}));
        if let Value::Object(m) = &mut spec {
            let tags = self.spec_tags.iter().map(|(name, t)| {
                to_value(TagReference {
                    name: name.clone(),
                    ..t.clone()
                })
            });
            m.insert("tags".into(), Value::Array(tags.collect()));
        }
        spec
    }

    /// The v1 defaulting openshift-apiserver applies on every decode (`v1/defaults.go`):
    /// `referencePolicy.type` Source, `importPolicy.importMode` Legacy, and the always-present
    /// `lookupPolicy`.
    pub fn apply_defaults(&mut self) {
        let spec = section(&mut self.obj, "spec");
        match spec.get_mut("lookupPolicy") {
            None | Some(Value::Null) => {
                spec.insert("lookupPolicy".into(), json!({"local": false}));
            }
            Some(Value::Object(lp)) => {
                lp.entry("local").or_insert(json!(false));
            }
            Some(_) => {}
        }
        self.spec_tags
            .values_mut()
            .for_each(TagReference::apply_defaults);
    }

    /// `collapseEmptyStatusTags`: status tags with neither items nor conditions are dropped.
    pub fn collapse_empty_status_tags(&mut self) {
        self.status_tags.retain(|_, t| {
            t.items.as_ref().is_some_and(|i| !i.is_empty()) || !t.conditions.is_empty()
        });
    }
}

fn take_list<T: DeserializeOwned>(
    obj: &mut Map<String, Value>,
    section: &str,
    key: &str,
    errs: &mut Vec<String>,
) -> Vec<T> {
    let list = match obj.get_mut(section) {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Object(m)) => m.remove(key),
        Some(other) => {
            errs.push(field::invalid(section, &short(other), "must be an object"));
            return Vec::new();
        }
    };
    match list {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .filter_map(|(i, item)| {
                let path = format!("{section}.{key}[{i}]");
                if !item.is_object() {
                    errs.push(field::invalid(&path, &short(&item), "must be an object"));
                    return None;
                }
                from_json(item)
                    .map_err(|e| errs.push(field::invalid(&path, "", &e.to_string())))
                    .ok()
            })
            .collect(),
        Some(other) => {
            errs.push(field::invalid(
                &format!("{section}.{key}"),
                &short(&other),
                "must be a list",
            ));
            Vec::new()
        }
    }
}

/// The object under `key`, created (or replacing a non-object) if needed.
pub(crate) fn section<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> &'a mut Map<String, Value> {
    let v = obj.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object above"),
    }
}

pub(crate) fn to_value<T: Serialize>(t: T) -> Value {
    // Serializing these plain structs cannot fail (string keys, no custom serializers).
    serde_json::to_value(t).unwrap_or(Value::Null)
}

pub(crate) fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Null, `{}` and `[]` are the same thing to Go's semantic equality (nil and empty maps and
/// slices compare equal); a missing key is null.
pub(crate) fn semantic_eq(a: &Value, b: &Value) -> bool {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x.keys().chain(y.keys()).all(|k| {
            semantic_eq(
                x.get(k).unwrap_or(&Value::Null),
                y.get(k).unwrap_or(&Value::Null),
            )
        }),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(p, q))
        }
        _ if empty(a) && empty(b) => true,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semantic_equality_treats_null_and_empty_alike_but_not_zero() {
        assert!(semantic_eq(&json!({"a": null, "b": []}), &json!({"a": {}})));
        assert!(!semantic_eq(
            &json!({"generation": null}),
            &json!({"generation": 0})
        ));
    }

    #[test]
    fn malformed_streams_are_invalid_not_panics() {
        for bad in [
            json!(3),
            json!({"spec": 1}),
            json!({"spec": {"tags": {}}}),
            json!({"spec": {"tags": [1]}}),
            json!({"spec": {"tags": [{"name": "a", "generation": "x"}]}}),
            json!({"status": {"tags": [{"tag": "a", "items": 7}]}}),
        ] {
            assert!(
                matches!(Stream::parse(&bad), Err(StrategyError::Invalid(_))),
                "{bad}"
            );
        }
        let ok = Stream::parse(
            &json!({"spec": {"tags": null}, "status": {"tags": [{"tag": "a", "items": null}]}}),
        )
        .unwrap();
        assert!(ok.spec_tags.is_empty() && ok.status_tags["a"].items.is_none());
    }
}
