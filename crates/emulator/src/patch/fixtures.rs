//! Fixtures shared by the server-side apply and managedFields tests: the ConfigMap of the
//! conformance suite, an apply with the usual defaults, and readers of `metadata.managedFields`.

use serde_json::{Value, json};

use super::{ApplyRequest, DEFAULT_MERGE_KEYS, PatchError, server_side_apply};

pub(super) const NOW: &str = "2025-01-02T03:04:05Z";
pub(super) const LATER: &str = "2025-01-02T03:05:00Z";

/// The ConfigMap the conformance suite applies (4.9-4.13).
pub(super) fn cfg(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ssa", "labels": {"conformance": "ssa"}}, "data": data})
}

pub(super) fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, PatchError> {
    server_side_apply(ApplyRequest {
        live,
        applied,
        manager,
        force,
        keys: DEFAULT_MERGE_KEYS,
        api_version: "v1",
        now: NOW,
    })
}

/// What the store adds on create.
pub(super) fn stored(mut obj: Value) -> Value {
    obj["metadata"]["namespace"] = json!("conf");
    obj["metadata"]["uid"] = json!("u-1");
    obj["metadata"]["resourceVersion"] = json!("1");
    obj
}

pub(super) fn owners(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap().into(),
                        e["operation"].as_str().unwrap().into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn fields_of<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|entries| {
            entries
                .iter()
                .find(|e| e["manager"] == manager && e["operation"] == operation)
        })
        .map_or(&Value::Null, |e| &e["fieldsV1"])
}
