//! Strategic merge patch as kube-apiserver applies it (`k8s.io/apimachinery` `strategicpatch`,
//! `StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`).
//!
//! Maps merge recursively and `null` deletes a key. A list with a [`MergeKey`] merges element
//! by element; any other list is replaced, which is also what kube does for lists whose Go field
//! has no `patchStrategy:"merge"`. Directives: `$patch` (`replace`/`delete`, on maps and list
//! elements), `$retainKeys`, `$setElementOrder/<list>` and `$deleteFromPrimitiveList/<list>`.
//! No directive survives into the result.

use serde_json::{Map, Value};

use super::{MergeKey, PatchError, join_path, keys_at};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Applies a strategic merge patch to `original`; `keys` names the lists that merge by key.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    keys: &[MergeKey],
) -> Result<Value, PatchError> {
    let Value::Object(patch) = patch else {
        return Err(PatchError::InvalidBody {
            format: "strategic merge",
            detail: "expected an object".into(),
        });
    };
    let original = original.as_object().cloned().unwrap_or_default();
    merge_map(original, patch.clone(), "", keys).map(Value::Object)
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    path: &str,
    keys: &[MergeKey],
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => Ok(strip_map(patch, path, keys)),
            Some("delete") => Ok(Map::new()),
            _ => Err(PatchError::StrategicPatchFailed(format!(
                "unknown patch type: {directive} in map: {}",
                Value::Object(patch)
            ))),
        };
    }
    if let Some(retain) = patch.remove(RETAIN_KEYS) {
        let names = string_list(&retain).ok_or_else(|| {
            PatchError::BadStrategicPatch(
                "invalid patch: the $retainKeys directive must be a list of strings".into(),
            )
        })?;
        original.retain(|k, _| names.contains(&k.as_str()));
    }
    let mut orders = Map::new();
    for directive in patch
        .keys()
        .filter(|k| k.starts_with('$'))
        .cloned()
        .collect::<Vec<_>>()
    {
        let value = patch.remove(&directive).unwrap_or_default();
        if let Some(field) = directive.strip_prefix(SET_ELEMENT_ORDER) {
            if !value.is_array() {
                return Err(PatchError::BadStrategicPatch(format!(
                    "{directive} must be a list"
                )));
            }
            orders.insert(field.to_owned(), value);
        } else if let Some(field) = directive.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(gone) = value else {
                return Err(PatchError::BadStrategicPatch(format!(
                    "{directive} must be a list"
                )));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|v| !gone.contains(v));
            }
        } else {
            // An unknown `$` key is data in kube too (it would be an unknown field); keep it.
            patch.insert(directive, value);
        }
    }
    for (k, pv) in patch {
        let sub = join_path(path, &k);
        if pv.is_null() {
            original.remove(&k);
            continue;
        }
        let order = orders.remove(&k).and_then(|o| o.as_array().cloned());
        let merged = match (original.remove(&k), pv) {
            (Some(Value::Object(o)), Value::Object(p)) => {
                Value::Object(merge_map(o, p, &sub, keys)?)
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Value::Array(merge_list(o, p, order, &sub, keys)?)
            }
            // New keys and type changes take the patch value, minus directives and nulls.
            (_, pv) => strip(pv, &sub, keys),
        };
        original.insert(k, merged);
    }
    // An order for a list the patch does not otherwise touch still reorders it.
    for (k, order) in orders {
        let (Some(Value::Array(items)), Value::Array(order)) = (original.remove(&k), order) else {
            continue;
        };
        let sub = join_path(path, &k);
        let reordered = match keys_at(keys, &sub).first() {
            Some(key) => order_merged(items.clone(), &order, &items, key),
            None => items,
        };
        original.insert(k, Value::Array(reordered));
    }
    Ok(original)
}

fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    order: Option<Vec<Value>>,
    path: &str,
    keys: &[MergeKey],
) -> Result<Vec<Value>, PatchError> {
    let Some(&key) = keys_at(keys, path).first() else {
        return Ok(patch.into_iter().map(|v| strip(v, path, keys)).collect());
    };
    if !original.iter().chain(&patch).all(Value::is_object) {
        // Not a list of maps after all: nothing to merge by key, so the patch wins.
        return Ok(patch.into_iter().map(|v| strip(v, path, keys)).collect());
    }
    let server_order = original.clone();
    let mut merged = original;
    let mut plain = Vec::new();
    let mut replace = false;
    for item in &patch {
        match item.get(DIRECTIVE) {
            None => plain.push(item.clone()),
            Some(d) if d == "delete" => {
                let value = merge_key_of(item, key)?;
                merged.retain(|o| o.get(key) != Some(value));
            }
            Some(d) if d == "replace" => replace = true,
            Some(d) if d == "merge" => {
                return Err(PatchError::StrategicPatchFailed(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            Some(d) => {
                return Err(PatchError::StrategicPatchFailed(format!(
                    "unknown patch type: {d} in map: {item}"
                )));
            }
        }
    }
    if replace {
        merged.clear();
    }
    for item in plain {
        let value = merge_key_of(&item, key)?.clone();
        let Value::Object(p) = item else {
            unreachable!("checked above")
        };
        match merged.iter_mut().find(|o| o.get(key) == Some(&value)) {
            Some(slot) => {
                let o = std::mem::take(slot)
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                *slot = Value::Object(merge_map(o, p, path, keys)?);
            }
            None => merged.push(strip(Value::Object(p), path, keys)),
        }
    }
    Ok(order_merged(
        merged,
        order.as_deref().unwrap_or(&patch),
        &server_order,
        key,
    ))
}

fn merge_key_of<'v>(item: &'v Value, key: &str) -> Result<&'v Value, PatchError> {
    item.get(key).ok_or_else(|| {
        PatchError::StrategicPatchFailed(format!(
            "map: {item} does not contain declared merge key: {key}"
        ))
    })
}

/// kube's `normalizeElementOrder`: the elements named in the patch (or its
/// `$setElementOrder`) in that order, the server-only ones in their old order, interleaved
/// where the old order says how. Elements new to the list therefore come first.
fn order_merged(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: &str,
) -> Vec<Value> {
    let index = |list: &[Value], item: &Value| {
        let value = item.get(key)?;
        list.iter().position(|o| o.get(key) == Some(value))
    };
    let (mut from_patch, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| index(patch_order, item).is_some());
    from_patch.sort_by_key(|item| index(patch_order, item));
    server_only.sort_by_key(|item| index(server_order, item));
    let mut out = Vec::with_capacity(from_patch.len() + server_only.len());
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        from_patch.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                matches!((index(server_order, l), index(server_order, r)), (Some(li), Some(ri)) if li < ri)
            }
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    out
}

/// A patch value taken as is: directives applied to nothing, nulls dropped (kube's
/// `discardNullValuesFromPatch`).
fn strip(v: Value, path: &str, keys: &[MergeKey]) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_map(m, path, keys)),
        Value::Array(items) if !keys_at(keys, path).is_empty() => Value::Array(
            items
                .into_iter()
                .filter(|item| item.get(DIRECTIVE).is_none_or(|d| d != "delete"))
                .map(|item| strip(item, path, keys))
                .collect(),
        ),
        other => other,
    }
}

fn strip_map(m: Map<String, Value>, path: &str, keys: &[MergeKey]) -> Map<String, Value> {
    if m.get(DIRECTIVE).is_some_and(|d| d == "delete") {
        return Map::new();
    }
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive(k))
        .map(|(k, v)| {
            let sub = join_path(path, &k);
            (k, strip(v, &sub, keys))
        })
        .collect()
}

fn is_directive(k: &str) -> bool {
    k == DIRECTIVE
        || k == RETAIN_KEYS
        || k.starts_with(SET_ELEMENT_ORDER)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

fn string_list(v: &Value) -> Option<Vec<&str>> {
    v.as_array()?.iter().map(Value::as_str).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::patch::DEFAULT_MERGE_KEYS as KEYS;

    const REPO: &str = "quay.io/example";

    fn tag(name: &str) -> Value {
        json!({"name": name, "from": {"kind": "DockerImage", "name": format!("{REPO}/smp:{name}")}})
    }

    /// The ImageStream of conformance 4.6-4.8.
    fn image_stream() -> Value {
        let mut a = tag("a");
        a["annotations"] = json!({"x": "1"});
        json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "smp"}, "spec": {"tags": [tag("b"), a]}})
    }

    fn names(obj: &Value, list: &str, key: &str) -> Vec<String> {
        obj.pointer(list)
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .map(|t| t[key].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn smp(original: &Value, patch: Value) -> Value {
        strategic_merge_patch(original, &patch, KEYS).unwrap()
    }

    #[test]
    fn strategic_patch_adds_a_tag_and_keeps_the_others() {
        // Conformance 4.6; kube puts elements new to the list before the server-only ones.
        let out = smp(&image_stream(), json!({"spec": {"tags": [tag("c")]}}));
        assert_eq!(names(&out, "/spec/tags", "name"), ["c", "b", "a"]);
        assert_eq!(
            out["spec"]["tags"][2]["from"]["name"],
            format!("{REPO}/smp:a")
        );
    }

    #[test]
    fn strategic_patch_of_one_field_of_a_tag_keeps_its_other_fields() {
        // Conformance 4.7: annotations merge {x:1}+{y:2}, `from` stays.
        let out = smp(
            &image_stream(),
            json!({"spec": {"tags": [{"name": "a", "annotations": {"y": "2"}}]}}),
        );
        assert_eq!(names(&out, "/spec/tags", "name"), ["b", "a"]);
        let a = &out["spec"]["tags"][1];
        assert_eq!(a["from"]["name"], format!("{REPO}/smp:a"));
        assert_eq!(a["annotations"], json!({"x": "1", "y": "2"}));
    }

    #[test]
    fn strategic_patch_cases() {
        let is = image_stream();
        let cases: Vec<(&str, Value, Value, Value)> = vec![
            (
                "$patch: delete removes the element with that key",
                is.clone(),
                json!({"spec": {"tags": [{"name": "b", "$patch": "delete"}]}}),
                json!({"spec": {"tags": [{"name": "a", "from": {"kind": "DockerImage", "name": format!("{REPO}/smp:a")},
                    "annotations": {"x": "1"}}]}}),
            ),
            (
                "$patch: replace on a list replaces it with the other elements",
                is.clone(),
                json!({"spec": {"tags": [{"$patch": "replace"}, {"name": "z"}]}}),
                json!({"spec": {"tags": [{"name": "z"}]}}),
            ),
            (
                "$patch: replace on a map replaces it",
                json!({"spec": {"lookupPolicy": {"local": true}, "x": 1}}),
                json!({"spec": {"$patch": "replace", "y": 2}}),
                json!({"spec": {"y": 2}}),
            ),
            (
                "$patch: delete on a map empties it",
                json!({"spec": {"x": 1}}),
                json!({"spec": {"$patch": "delete"}}),
                json!({"spec": {}}),
            ),
            (
                "null deletes a key and nested nulls of new values are dropped",
                json!({"metadata": {"labels": {"a": "1", "b": "2"}}}),
                json!({"metadata": {"labels": {"a": null}, "annotations": {"n": null, "k": "v"}}}),
                json!({"metadata": {"labels": {"b": "2"}, "annotations": {"k": "v"}}}),
            ),
            (
                "a list without a merge key is replaced",
                json!({"spec": {"args": ["a", "b"], "env": [{"name": "A"}]}}),
                json!({"spec": {"args": ["c"], "env": [{"name": "B"}]}}),
                json!({"spec": {"args": ["c"], "env": [{"name": "B"}]}}),
            ),
            (
                "$setElementOrder is honoured and stripped",
                json!({"spec": {"tags": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"$setElementOrder/tags": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
                    "tags": [{"name": "c"}]}}),
                json!({"spec": {"tags": [{"name": "b"}, {"name": "a"}, {"name": "c"}]}}),
            ),
            (
                "$setElementOrder alone reorders",
                json!({"spec": {"tags": [{"name": "a"}, {"name": "b"}]}}),
                json!({"spec": {"$setElementOrder/tags": [{"name": "b"}, {"name": "a"}]}}),
                json!({"spec": {"tags": [{"name": "b"}, {"name": "a"}]}}),
            ),
            (
                "$retainKeys drops the keys not listed",
                json!({"spec": {"strategy": {"type": "Rolling", "rolling": {"x": 1}}}}),
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                json!({"spec": {"strategy": {"type": "Recreate"}}}),
            ),
            (
                "$deleteFromPrimitiveList removes values",
                json!({"metadata": {"finalizers": ["a", "b", "c"]}}),
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
                json!({"metadata": {"finalizers": ["a", "c"]}}),
            ),
            (
                "directives inside new values are stripped",
                json!({}),
                json!({"spec": {"tags": [{"name": "a", "$patch": "delete"}, {"name": "b"}], "m": {"$retainKeys": []}}}),
                json!({"spec": {"tags": [{"name": "b"}], "m": {}}}),
            ),
            (
                "a type change takes the patch value",
                json!({"data": {"x": {"a": 1}}}),
                json!({"data": {"x": "flat"}}),
                json!({"data": {"x": "flat"}}),
            ),
        ];
        for (name, original, patch, want) in cases {
            let mut got = smp(&original, patch);
            for k in ["apiVersion", "kind", "metadata"] {
                if want.get(k).is_none() && original.get(k) == got.get(k) {
                    got.as_object_mut().unwrap().remove(k);
                }
            }
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn strategic_patch_merges_image_stream_status_by_tag_and_conditions_by_type() {
        let live = json!({"status": {"tags": [
            {"tag": "latest", "items": [{"image": "sha256:1"}],
             "conditions": [{"type": "ImportSuccess", "status": "False", "message": "boom"}]},
            {"tag": "stable", "items": [{"image": "sha256:0"}]}]}});
        let patch = json!({"status": {"tags": [{"tag": "latest", "items": [{"image": "sha256:2"}, {"image": "sha256:1"}],
            "conditions": [{"type": "ImportSuccess", "status": "True", "message": null}]}]}});
        let out = smp(&live, patch);
        assert_eq!(names(&out, "/status/tags", "tag"), ["latest", "stable"]);
        assert_eq!(
            out["status"]["tags"][0]["items"],
            json!([{"image": "sha256:2"}, {"image": "sha256:1"}])
        );
        assert_eq!(
            out["status"]["tags"][0]["conditions"],
            json!([{"type": "ImportSuccess", "status": "True"}])
        );
        assert_eq!(out["status"]["tags"][1], live["status"]["tags"][1]);
    }

    #[test]
    fn strategic_patch_errors_map_to_kube_statuses() {
        let is = image_stream();
        let cases = [
            (json!({"spec": {"tags": [{"from": {}}]}}), 500),
            (json!({"spec": {"tags": [{"$patch": "delete"}]}}), 500),
            (json!({"spec": {"tags": [{"$patch": "merge"}]}}), 500),
            (json!({"spec": {"$patch": "bogus"}}), 500),
            (json!({"spec": {"$retainKeys": "tags"}}), 400),
            (json!({"spec": {"$setElementOrder/tags": {}}}), 400),
            (json!([]), 400),
        ];
        for (patch, code) in cases {
            let err = strategic_merge_patch(&is, &patch, KEYS).unwrap_err();
            assert_eq!(err.http_code(), code, "{patch}: {err}");
        }
    }
}
