//! Structural-schema pruning and validation of custom resources, as apiextensions-apiserver
//! does it with a CRD's `openAPIV3Schema`.
//!
//! On a real cluster a custom resource never stores a field its schema does not declare: the
//! field is dropped (pruning), or the request fails with `fieldValidation=Strict`. Values of the
//! wrong type fail with 422. The emulator does the same, so a product that writes a field Tekton's
//! CustomRun schema does not know sees it vanish here exactly as it would in production.

use serde_json::{Map, Value};

/// Fields of `metadata` that survive pruning (ObjectMeta's fields).
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "selfLink",
];

fn preserves_unknown(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Removes every field the schema does not declare and returns their paths
/// (`spec.foo`, `status.results[0].bar`). The root's `apiVersion`, `kind` and ObjectMeta
/// fields of `metadata` are always kept.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let extra: Vec<String> = m
            .keys()
            .filter(|k| !OBJECT_META.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in extra {
            m.remove(&k);
            unknown.push(format!("metadata.{k}"));
        }
    }
    if let Some(o) = obj.as_object_mut() {
        let props = schema.get("properties").and_then(Value::as_object);
        let keys: Vec<String> = o.keys().cloned().collect();
        for k in keys {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            match props.and_then(|p| p.get(&k)) {
                Some(sub) => {
                    if let Some(v) = o.get_mut(&k) {
                        prune_value(sub, v, &k, &mut unknown);
                    }
                }
                None if preserves_unknown(schema) => {}
                None => {
                    o.remove(&k);
                    unknown.push(k);
                }
            }
        }
    }
    unknown
}

fn prune_value(schema: &Value, v: &mut Value, path: &str, unknown: &mut Vec<String>) {
    if preserves_unknown(schema) && schema.get("properties").is_none() {
        return;
    }
    if schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        // An embedded object keeps its own apiVersion/kind/metadata.
        let mut inner = v.clone();
        let mut sub = Vec::new();
        if inner.is_object() {
            let found = prune(schema, &mut inner);
            sub.extend(found.into_iter().map(|p| join(path, &p)));
            *v = inner;
        }
        unknown.extend(sub);
        return;
    }
    match v {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                prune_object(schema, props, o, path, unknown);
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in o.iter_mut() {
                    prune_value(ap, child, &join(path, k), unknown);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, child) in items.iter_mut().enumerate() {
                    prune_value(item_schema, child, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn prune_object(
    schema: &Value,
    props: &Map<String, Value>,
    o: &mut Map<String, Value>,
    path: &str,
    unknown: &mut Vec<String>,
) {
    let keys: Vec<String> = o.keys().cloned().collect();
    for k in keys {
        match props.get(&k) {
            Some(sub) => {
                if let Some(child) = o.get_mut(&k) {
                    prune_value(sub, child, &join(path, &k), unknown);
                }
            }
            None if preserves_unknown(schema) => {}
            None => {
                o.remove(&k);
                unknown.push(join(path, &k));
            }
        }
    }
}

/// Checks types, enums, required fields and simple bounds; returns kube-style field errors
/// (`spec.retries: Invalid value: "string": spec.retries in body must be of type integer: "string"`:
/// a type error names the type of the value, not the value).
pub fn validate(schema: &Value, obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let (Some(props), Some(o)) = (
        schema.get("properties").and_then(Value::as_object),
        obj.as_object(),
    ) {
        for (k, sub) in props {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(v) = o.get(k) {
                validate_value(sub, v, k, &mut errors);
            }
        }
        required(schema, o, "", &mut errors);
    }
    errors
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn required(schema: &Value, o: &Map<String, Value>, path: &str, errors: &mut Vec<String>) {
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !o.contains_key(r) {
            errors.push(format!("{}: Required value", join(path, r)));
        }
    }
}

fn validate_value(schema: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    if v.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
            // kube drops nulls of non-nullable fields during defaulting; not an error.
        }
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let got = type_name(v);
        let ok = match want {
            "number" => matches!(got, "number" | "integer"),
            other => other == got,
        } || (int_or_string && matches!(got, "integer" | "string"));
        if !ok {
            errors.push(format!(
                "{path}: Invalid value: \"{got}\": {path} in body must be of type {want}: \"{got}\""
            ));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        errors.push(format!(
            "{path}: Unsupported value: {v}: supported values: {}",
            list.join(", ")
        ));
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        errors.push(format!(
            "{path}: Invalid value: {v}: {path} in body should be greater than or equal to {min}"
        ));
    }
    if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_f64), v.as_f64())
        && n > max
    {
        errors.push(format!(
            "{path}: Invalid value: {v}: {path} in body should be less than or equal to {max}"
        ));
    }
    match v {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    if let Some(child) = o.get(k) {
                        validate_value(sub, child, &join(path, k), errors);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in o {
                    validate_value(ap, child, &join(path, k), errors);
                }
            }
            required(schema, o, path, errors);
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, child) in items.iter().enumerate() {
                    validate_value(item_schema, child, &format!("{path}[{i}]"), errors);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["customRef"],
                    "properties": {
                        "retries": {"type": "integer"},
                        "status": {"type": "string", "enum": ["RunCancelled"]},
                        "customRef": {"type": "object", "properties": {"kind": {"type": "string"}}},
                        "params": {"type": "array", "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "value": {"x-kubernetes-preserve-unknown-fields": true}
                        }}},
                        "customSpec": {"type": "object", "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                        }},
                    }
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                           "properties": {"extraFields": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            }
        })
    }

    #[test]
    fn undeclared_fields_are_pruned_and_reported() {
        let mut obj = json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "bogus": 1},
            "spec": {"customRef": {"kind": "X", "extra": true}, "foo": 1,
                     "params": [{"name": "a", "value": {"any": "thing"}, "junk": 2}],
                     "customSpec": {"spec": {"anything": {"goes": 1}}}},
            "top": 1
        });
        let mut unknown = prune(&schema(), &mut obj);
        unknown.sort();
        assert_eq!(
            unknown,
            vec![
                "metadata.bogus",
                "spec.customRef.extra",
                "spec.foo",
                "spec.params[0].junk",
                "top"
            ]
        );
        assert_eq!(obj["spec"]["params"][0]["value"], json!({"any": "thing"}));
        assert_eq!(obj["spec"]["customSpec"]["spec"]["anything"]["goes"], 1);
        assert_eq!(obj["metadata"], json!({"name": "r"}));
    }

    #[test]
    fn preserve_unknown_fields_keeps_everything_below() {
        let mut obj = json!({"status": {"whatever": [1, 2], "extraFields": {"x": 1}}});
        assert!(prune(&schema(), &mut obj).is_empty());
        assert_eq!(obj["status"]["whatever"], json!([1, 2]));
    }

    #[test]
    fn wrong_types_enums_and_missing_required_fields_are_errors() {
        let obj = json!({"spec": {"retries": "many", "status": "Stopped"}});
        let errors = validate(&schema(), &obj);
        assert!(
            errors.iter().any(|e| {
                e.starts_with(
            "spec.retries: Invalid value: \"string\": spec.retries in body must be of type integer: \"string\""
        )
            }),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("spec.status: Unsupported value")),
            "{errors:?}"
        );
        assert!(
            errors.contains(&"spec.customRef: Required value".to_string()),
            "{errors:?}"
        );
    }

    #[test]
    fn valid_objects_have_no_errors() {
        let obj = json!({"spec": {"retries": 2, "customRef": {"kind": "X"}}});
        assert!(validate(&schema(), &obj).is_empty());
    }
}
