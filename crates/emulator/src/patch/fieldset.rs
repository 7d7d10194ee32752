//! Field sets as structured-merge-diff sees them, stored in the `FieldsV1` shape of
//! `metadata.managedFields`: a tree whose steps are `f:<field>` (a map field) and
//! `k:{"<key>":<value>}` (a list element picked by its merge keys), where a node either is a
//! member itself (`{}`, or `".": {}` beside children) or only leads to members.
//!
//! What becomes a member follows SMD's `ToFieldSet` for typed objects without a schema: scalars,
//! nulls, empty maps and atomic lists are leaves; non-empty maps are not members themselves;
//! elements of keyed lists are members and also have their own fields.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{MergeKey, PatchError, join_path, keys_at};

/// A set of field paths; see the module doc for the shape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSet {
    member: bool,
    // Invariant: no child is empty, so `is_empty` needs no recursion.
    children: BTreeMap<String, FieldSet>,
}

/// A path into an object, one `f:` / `k:` step per element.
pub(crate) type FieldPath = Vec<String>;

impl FieldSet {
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    pub(crate) fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((step, rest)) => self.children.entry(step.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` itself is a member.
    pub(crate) fn has(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((step, rest)) => self.children.get(step).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether `path` or anything below it is a member.
    pub(crate) fn touches(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((step, rest)) => self.children.get(step).is_some_and(|c| c.touches(rest)),
        }
    }

    pub(crate) fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (step, child) in &other.children {
            let merged = match out.children.get(step) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(step.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other`.
    pub(crate) fn difference(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |a, b| a && !b, true)
    }

    pub(crate) fn intersection(&self, other: &FieldSet) -> FieldSet {
        self.combine(other, |a, b| a && b, false)
    }

    /// `self` without the members of `other` and everything below them (SMD
    /// `RecursiveDifference`), used to drop the fields the server owns.
    pub(crate) fn without_subtrees(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (step, child) in &self.children {
            let kept = match other.children.get(step) {
                Some(o) if o.member => continue,
                Some(o) => child.without_subtrees(o),
                None => child.clone(),
            };
            if !kept.is_empty() {
                out.children.insert(step.clone(), kept);
            }
        }
        out
    }

    /// Node-wise combination; children only in `self` are kept when `keep_mine`.
    fn combine(
        &self,
        other: &FieldSet,
        member: fn(bool, bool) -> bool,
        keep_mine: bool,
    ) -> FieldSet {
        let mut out = FieldSet {
            member: member(self.member, other.member),
            children: BTreeMap::new(),
        };
        for (step, child) in &self.children {
            let combined = match other.children.get(step) {
                Some(o) => child.combine(o, member, keep_mine),
                None if keep_mine => child.clone(),
                None => continue,
            };
            if !combined.is_empty() {
                out.children.insert(step.clone(), combined);
            }
        }
        out
    }

    /// Every member path, parents before children, siblings in step order.
    pub(crate) fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (step, child) in &self.children {
            prefix.push(step.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON of this set.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (step, child) in &self.children {
            m.insert(step.clone(), child.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Reads a `fieldsV1` JSON; `None` if it is not a tree of objects.
    pub(crate) fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let mut set = FieldSet::default();
        for (step, child) in v.as_object()? {
            if step == "." {
                set.member = true;
                continue;
            }
            let mut node = FieldSet::from_fields_v1(child)?;
            if node.is_empty() {
                node.member = true;
            }
            set.children.insert(step.clone(), node);
        }
        Some(set)
    }
}

/// The fields the server owns, which never count as anyone's (kube's `stripMeta`).
pub(crate) fn server_owned() -> FieldSet {
    let mut set = FieldSet::default();
    for field in ["apiVersion", "kind"] {
        set.insert(&[format!("f:{field}")]);
    }
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "selfLink",
        "managedFields",
        "clusterName",
    ] {
        set.insert(&["f:metadata".to_owned(), format!("f:{field}")]);
    }
    set
}

/// The fields `obj` sets, without the server-owned ones. With `strict`, an element of a keyed
/// list that lacks a key is an error (an applied config); otherwise that list counts as atomic
/// (a stored object, which kube would not reject at this point either).
pub(crate) fn owned_fields(
    obj: &Value,
    keys: &[MergeKey],
    strict: bool,
) -> Result<FieldSet, PatchError> {
    let mut set = FieldSet::default();
    if let Value::Object(m) = obj {
        walk_map(m, "", keys, strict, &mut Vec::new(), &mut set)?;
    }
    Ok(set.without_subtrees(&server_owned()))
}

pub(super) fn walk_map(
    m: &Map<String, Value>,
    dotted: &str,
    keys: &[MergeKey],
    strict: bool,
    path: &mut FieldPath,
    set: &mut FieldSet,
) -> Result<(), PatchError> {
    for (name, child) in m {
        walk_entry(name, child, dotted, keys, strict, path, set)?;
    }
    Ok(())
}

/// The fields of one entry `name: child` of the map at `dotted` (whose path is `path`).
pub(super) fn walk_entry(
    name: &str,
    child: &Value,
    dotted: &str,
    keys: &[MergeKey],
    strict: bool,
    path: &mut FieldPath,
    set: &mut FieldSet,
) -> Result<(), PatchError> {
    let sub = join_path(dotted, name);
    path.push(format!("f:{name}"));
    match child {
        Value::Object(cm) if !cm.is_empty() => walk_map(cm, &sub, keys, strict, path, set)?,
        Value::Array(items) => match element_steps(items, &sub, keys, strict)? {
            Some(steps) => {
                for (step, item) in steps.into_iter().zip(items) {
                    path.push(step);
                    set.insert(path);
                    if let Value::Object(im) = item {
                        walk_map(im, &sub, keys, strict, path, set)?;
                    }
                    path.pop();
                }
            }
            None => set.insert(path),
        },
        _ => set.insert(path),
    }
    path.pop();
    Ok(())
}

/// The `k:` step of every element of the list at `dotted`, or `None` for an atomic list.
pub(super) fn element_steps(
    items: &[Value],
    dotted: &str,
    keys: &[MergeKey],
    strict: bool,
) -> Result<Option<Vec<String>>, PatchError> {
    let names = keys_at(keys, dotted);
    if names.is_empty() {
        return Ok(None);
    }
    let mut steps = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match key_step(item, &names) {
            Some(step) => steps.push(step),
            None if strict => {
                return Err(PatchError::InvalidApplyConfig(format!(
                    ".{dotted}: element {i}: associative list with keys has an element that omits key field {:?}",
                    names.join(",")
                )));
            }
            None => return Ok(None),
        }
    }
    Ok(Some(steps))
}

/// `k:{"name":"a"}` for an element, key fields sorted by name; `None` if a key is missing.
pub(crate) fn key_step(item: &Value, names: &[&str]) -> Option<String> {
    let mut names = names.to_vec();
    names.sort_unstable();
    let mut parts = Vec::with_capacity(names.len());
    for name in names {
        let v = item.get(name).filter(|v| !v.is_null())?;
        parts.push(format!("{}:{}", Value::from(name), v));
    }
    Some(format!("k:{{{}}}", parts.join(",")))
}

/// The decoded key of a `k:` step.
fn step_key(step: &str) -> Option<Map<String, Value>> {
    serde_json::from_str(step.strip_prefix("k:")?).ok()
}

fn matches_key(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// The value at `path`, if there is one.
pub(crate) fn value_at<'v>(obj: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(obj, |v, step| {
        if let Some(name) = step.strip_prefix("f:") {
            v.as_object()?.get(name)
        } else {
            let key = step_key(step)?;
            v.as_array()?.iter().find(|item| matches_key(item, &key))
        }
    })
}

/// Removes the value at `path`; false if there was none.
pub(crate) fn remove_at(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let Some(parent) = value_at_mut(obj, parent_path) else {
        return false;
    };
    if let Some(name) = last.strip_prefix("f:") {
        parent
            .as_object_mut()
            .and_then(|m| m.remove(name))
            .is_some()
    } else if let (Some(key), Some(items)) = (step_key(last), parent.as_array_mut()) {
        let before = items.len();
        items.retain(|item| !matches_key(item, &key));
        items.len() != before
    } else {
        false
    }
}

pub(crate) fn value_at_mut<'v>(obj: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(obj, |v, step| {
        if let Some(name) = step.strip_prefix("f:") {
            v.as_object_mut()?.get_mut(name)
        } else {
            let key = step_key(step)?;
            v.as_array_mut()?
                .iter_mut()
                .find(|item| matches_key(item, &key))
        }
    })
}

/// A path as structured-merge-diff prints it: `.spec.tags[name="a"].from`.
pub(crate) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for step in path {
        if let Some(name) = step.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(key) = step_key(step) {
            let fields: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", fields.join(",")));
        } else {
            out.push_str(&format!("[{step}]"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KEYS: &[MergeKey] = &[
        MergeKey {
            path: "spec.tags",
            key: "name",
        },
        MergeKey {
            path: "status.tags",
            key: "tag",
        },
        MergeKey {
            path: "status.tags.conditions",
            key: "type",
        },
        MergeKey {
            path: "spec.ports",
            key: "protocol",
        },
        MergeKey {
            path: "spec.ports",
            key: "containerPort",
        },
    ];

    fn fields(obj: Value) -> Value {
        owned_fields(&obj, KEYS, true).unwrap().to_fields_v1()
    }

    #[test]
    fn owned_fields_have_the_fields_v1_shape() {
        let cases = [
            (
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "n", "namespace": "ns", "labels": {"x": "1"}},
                    "data": {"x": "1"}}),
                json!({"f:data": {"f:x": {}}, "f:metadata": {"f:labels": {"f:x": {}}}}),
            ),
            (
                json!({"spec": {"tags": [{"name": "a", "from": {"kind": "DockerImage", "name": "r/a"}}]}}),
                json!({"f:spec": {"f:tags": {"k:{\"name\":\"a\"}": {".": {},
                    "f:from": {"f:kind": {}, "f:name": {}}, "f:name": {}}}}}),
            ),
            (
                json!({"status": {"tags": [{"tag": "t", "items": [{"image": "sha256:1"}],
                    "conditions": [{"type": "ImportSuccess", "status": "False"}]}]}}),
                json!({"f:status": {"f:tags": {"k:{\"tag\":\"t\"}": {".": {},
                    "f:conditions": {"k:{\"type\":\"ImportSuccess\"}": {".": {}, "f:status": {}, "f:type": {}}},
                    "f:items": {}, "f:tag": {}}}}}),
            ),
            (
                json!({"metadata": {"labels": {}}, "spec": {"args": ["a"], "x": null, "tags": []}}),
                json!({"f:metadata": {"f:labels": {}}, "f:spec": {"f:args": {}, "f:x": {}}}),
            ),
            (
                json!({"spec": {"ports": [{"containerPort": 80, "protocol": "TCP"}]}}),
                json!({"f:spec": {"f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":
                    {".": {}, "f:containerPort": {}, "f:protocol": {}}}}}),
            ),
        ];
        for (obj, want) in cases {
            assert_eq!(fields(obj.clone()), want, "{obj}");
        }
    }

    #[test]
    fn fields_v1_round_trips() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:x": {}}},
            "f:spec": {"f:tags": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}}});
        assert_eq!(FieldSet::from_fields_v1(&v).unwrap().to_fields_v1(), v);
        assert!(FieldSet::from_fields_v1(&json!({"f:x": 1})).is_none());
    }

    #[test]
    fn a_keyed_element_without_its_key_is_rejected_in_an_applied_config_only() {
        let obj = json!({"spec": {"tags": [{"from": {"name": "x"}}]}});
        let err = owned_fields(&obj, KEYS, true).unwrap_err();
        assert_eq!(err.http_code(), 400);
        let atomic = owned_fields(&obj, KEYS, false).unwrap();
        assert_eq!(atomic.to_fields_v1(), json!({"f:spec": {"f:tags": {}}}));
    }

    #[test]
    fn set_algebra_keeps_structure_and_drops_empty_nodes() {
        let a = FieldSet::from_fields_v1(&json!({"f:data": {"f:x": {}, "f:y": {}}})).unwrap();
        let b = FieldSet::from_fields_v1(&json!({"f:data": {"f:y": {}, "f:z": {}}})).unwrap();
        assert_eq!(
            a.difference(&b).to_fields_v1(),
            json!({"f:data": {"f:x": {}}})
        );
        assert_eq!(
            a.intersection(&b).to_fields_v1(),
            json!({"f:data": {"f:y": {}}})
        );
        assert_eq!(
            a.union(&b).to_fields_v1(),
            json!({"f:data": {"f:x": {}, "f:y": {}, "f:z": {}}})
        );
        assert!(a.difference(&a).is_empty());
        let tree = FieldSet::from_fields_v1(
            &json!({"f:spec": {".": {}, "f:a": {}}, "f:data": {"f:x": {}}}),
        )
        .unwrap();
        let cut = FieldSet::from_fields_v1(&json!({"f:spec": {}})).unwrap();
        assert_eq!(
            tree.without_subtrees(&cut).to_fields_v1(),
            json!({"f:data": {"f:x": {}}})
        );
    }

    #[test]
    fn paths_navigate_and_print_like_smd() {
        let mut obj =
            json!({"spec": {"tags": [{"name": "a", "from": {"name": "r/a"}}, {"name": "b"}]}});
        let path: FieldPath = ["f:spec", "f:tags", "k:{\"name\":\"a\"}", "f:from", "f:name"]
            .map(String::from)
            .to_vec();
        assert_eq!(value_at(&obj, &path), Some(&json!("r/a")));
        assert_eq!(display_path(&path), ".spec.tags[name=\"a\"].from.name");
        assert!(remove_at(&mut obj, &path[..3]));
        assert_eq!(obj, json!({"spec": {"tags": [{"name": "b"}]}}));
        assert!(!remove_at(&mut obj, &path[..3]));
    }
}
