//! OpenAPI v3 documents for the served types: `/openapi/v3` (the index of group-versions) and
//! `/openapi/v3/apis/{group}/{version}` (one document each).
//!
//! kubectl downloads these for its client-side validation and refuses to create objects of a
//! kind it finds no schema for. Custom resources get the schema of their CRD, so kubectl
//! validates them exactly as against a real server; built-in kinds get a schema of their
//! identity fields that leaves the rest to the server.

use serde_json::{Map, Value, json};

use super::registry::ResourceType;

fn gv_path(t: &ResourceType) -> String {
    if t.group.is_empty() {
        format!("api/{}", t.version)
    } else {
        format!("apis/{}/{}", t.group, t.version)
    }
}

/// The schema name of a kind, in the reverse-DNS style real servers use.
fn schema_name(t: &ResourceType) -> String {
    let prefix = match t.group.as_str() {
        "" => "io.k8s.api.core".to_string(),
        "image.openshift.io" => "com.github.openshift.api.image".to_string(),
        "coordination.k8s.io" => "io.k8s.api.coordination".to_string(),
        "events.k8s.io" => "io.k8s.api.events".to_string(),
        "rbac.authorization.k8s.io" => "io.k8s.api.rbac".to_string(),
        "authorization.k8s.io" => "io.k8s.api.authorization".to_string(),
        "apiextensions.k8s.io" => {
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_string()
        }
        g => g.split('.').rev().collect::<Vec<_>>().join("."),
    };
    format!("{prefix}.{}.{}", t.version, t.kind)
}

/// A short content hash, so clients can cache documents by URL like they do on real servers.
fn hash(doc: &Value) -> String {
    let bytes = serde_json::to_vec(doc).unwrap_or_default();
    // FNV-1a: stable across runs, no extra dependency.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016X}")
}

/// `GET /openapi/v3`.
pub fn index(types: &[ResourceType]) -> Value {
    let mut paths = Map::new();
    let mut gvs: Vec<String> = types.iter().map(gv_path).collect();
    gvs.sort();
    gvs.dedup();
    for gv in gvs {
        if let Some(doc) = document(types, &gv) {
            paths.insert(
                gv.clone(),
                json!({ "serverRelativeURL": format!("/openapi/v3/{gv}?hash={}", hash(&doc)) }),
            );
        }
    }
    json!({ "paths": paths })
}

fn object_meta() -> Value {
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
            "finalizers": {"type": "array", "items": {"type": "string", "default": ""}},
            "ownerReferences": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        },
    })
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn kind_schema(t: &ResourceType) -> Value {
    let gvk = json!([{ "group": t.group, "kind": t.kind, "version": t.version }]);
    let mut s = match &t.schema {
        Some(s) => s.clone(),
        None => json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
            },
        }),
    };
    if let Some(props) = s.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{META}")}], "default": {}}),
        );
    }
    s["x-kubernetes-group-version-kind"] = gvk;
    s
}

/// `GET /openapi/v3/{api/v1 | apis/{group}/{version}}`, None for unknown group-versions.
pub fn document(types: &[ResourceType], gv: &str) -> Option<Value> {
    let selected: Vec<&ResourceType> = types.iter().filter(|t| gv_path(t) == gv).collect();
    if selected.is_empty() {
        return None;
    }
    let mut schemas = Map::new();
    schemas.insert(META.into(), object_meta());
    let mut paths = Map::new();
    for t in selected {
        let name = schema_name(t);
        schemas.insert(name.clone(), kind_schema(t));
        let ns = if t.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let ok = json!({"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{name}")}}}}});
        let gvk = json!({ "group": t.group, "version": t.version, "kind": t.kind });
        let op = |verb: &str, action: &str, params: &[&str]| {
            let parameters: Vec<Value> = params
                .iter()
                .map(|p| json!({"name": p, "in": "query", "schema": {"type": "string", "uniqueItems": true}}))
                .collect();
            json!({
                "operationId": format!("{verb}{}", t.kind),
                "parameters": parameters,
                "responses": ok,
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let write_params = ["dryRun", "fieldManager", "fieldValidation"];
        let mut item = Map::new();
        if t.allows("get") {
            item.insert("get".into(), op("read", "get", &[]));
        }
        if t.allows("update") {
            item.insert("put".into(), op("replace", "put", &write_params));
        }
        if t.allows("patch") {
            // kubectl looks for `fieldValidation` among the PATCH parameters of the kind to
            // decide that the server validates fields (and then sends fieldValidation=Strict).
            let params = ["dryRun", "fieldManager", "fieldValidation", "force"];
            item.insert("patch".into(), op("patch", "patch", &params));
        }
        if t.allows("delete") {
            item.insert("delete".into(), op("delete", "delete", &["dryRun"]));
        }
        paths.insert(
            format!("/{gv}{ns}/{}/{{name}}", t.plural),
            Value::Object(item),
        );
        let mut coll = Map::new();
        if t.allows("list") {
            coll.insert(
                "get".into(),
                op(
                    "list",
                    "list",
                    &["labelSelector", "fieldSelector", "limit", "continue"],
                ),
            );
        }
        if t.allows("create") {
            coll.insert("post".into(), op("create", "post", &write_params));
        }
        paths.insert(format!("/{gv}{ns}/{}", t.plural), Value::Object(coll));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "imagegate API emulator", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::builtin_types;

    #[test]
    fn every_served_group_version_has_a_document_in_the_index() {
        let types = builtin_types();
        let idx = index(&types);
        let paths = idx["paths"].as_object().unwrap();
        assert!(paths.contains_key("api/v1"));
        assert!(paths.contains_key("apis/image.openshift.io/v1"));
        let url = paths["apis/image.openshift.io/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/image.openshift.io/v1?hash="));
    }

    #[test]
    fn schemas_name_their_group_version_kind() {
        let types = builtin_types();
        let doc = document(&types, "apis/image.openshift.io/v1").unwrap();
        let s = &doc["components"]["schemas"]["com.github.openshift.api.image.v1.ImageStream"];
        assert_eq!(
            s["x-kubernetes-group-version-kind"][0]["kind"],
            "ImageStream"
        );
        assert!(document(&types, "apis/nope.dev/v1").is_none());
    }
}
