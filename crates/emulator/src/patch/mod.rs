//! Patch logic of the API emulator: the four PATCH content types of kube-apiserver and the
//! field-ownership bookkeeping (`metadata.managedFields`) that server-side apply depends on.
//!
//! Everything here is pure: values in, values (or a [`PatchError`] that already knows its HTTP
//! status) out. The PATCH verb (`verbs::patching`) takes the [`PatchType`] from the request's
//! `Content-Type`, decodes the body (JSON, or YAML for an apply), runs the patch and, for writes
//! that are not applies, calls [`record_update`] so that a later apply sees who owns what.
//!
//! - [`merge_patch`]: RFC 7386 (`application/merge-patch+json`).
//! - [`json_patch()`]: RFC 6902 (`application/json-patch+json`).
//! - [`strategic_merge_patch`]: kube `strategicpatch` (`application/strategic-merge-patch+json`).
//! - [`server_side_apply`]: structured-merge-diff (`application/apply-patch+yaml`).
//!
//! There is no OpenAPI schema here: the only schema knowledge is the list of [`MergeKey`]s the
//! caller passes in. Maps are always merged field by field, lists with a merge key element by
//! element, every other list is atomic.
//!
//! Where it lives: `request` (a PATCH's content type), `error` ([`PatchError`]
//! and the kube status of each failure), this file (merge keys, merge patch, JSON patch),
//! `strategic`, `apply` (server-side apply), `managed` (the `metadata.managedFields` bookkeeping
//! of every write) and `fieldset` (the field sets that apply and the bookkeeping work on).

mod apply;
mod compare;
mod error;
mod fieldset;
#[cfg(test)]
mod fixtures;
mod managed;
mod request;
mod strategic;

use serde_json::Value;

pub use apply::{ApplyRequest, server_side_apply};
pub use error::{FieldConflict, PatchError};
pub use managed::{Writer, record_update, record_write};
pub use request::PatchType;
pub use strategic::strategic_merge_patch;

/// A list merge key known for a path: `path` is the dotted field path from the object root,
/// ignoring list indices, e.g. `("spec.tags", "name")` or `("status.tags.conditions", "type")`.
///
/// Several entries for the same path make a composite key (structured-merge-diff
/// `listMapKeys`); strategic merge patch uses the first one (its `patchMergeKey`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeKey {
    /// Dotted field path of the list, without indices.
    pub path: &'static str,
    /// Field of each element that identifies it.
    pub key: &'static str,
}

/// The merge keys of the kinds the emulator serves (ImageStream, CustomRun, ConfigMap) and of
/// `ObjectMeta`; [`record_update`] uses them, and a handler can pass them anywhere else.
pub const DEFAULT_MERGE_KEYS: &[MergeKey] = &[
    MergeKey {
        path: "metadata.ownerReferences",
        key: "uid",
    },
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
        path: "status.conditions",
        key: "type",
    },
];

/// The key fields of the list at `path`, in declaration order.
fn keys_at<'k>(keys: &'k [MergeKey], path: &str) -> Vec<&'k str> {
    keys.iter()
        .filter(|k| k.path == path)
        .map(|k| k.key)
        .collect()
}

/// `parent.child`, or `child` at the root.
fn join_path(parent: &str, child: &str) -> String {
    if parent.is_empty() {
        child.to_owned()
    } else {
        format!("{parent}.{child}")
    }
}

/// RFC 7386 JSON merge patch: objects merge recursively, `null` removes, everything else
/// (arrays included) replaces.
pub fn merge_patch(original: &Value, patch: &Value) -> Value {
    let mut doc = original.clone();
    json_patch::merge(&mut doc, patch);
    doc
}

/// RFC 6902 JSON patch. All or nothing: on any failed operation the original is untouched
/// and the error says which operation failed (a failed `test` is its own variant).
pub fn json_patch(original: &Value, patch: &Value) -> Result<Value, PatchError> {
    let ops: json_patch::Patch =
        serde_json::from_value(patch.clone()).map_err(|e| PatchError::InvalidBody {
            format: "JSON",
            detail: e.to_string(),
        })?;
    let mut doc = original.clone();
    json_patch::patch(&mut doc, &ops).map_err(|e| {
        let path = e.path.to_string();
        match e.kind {
            json_patch::PatchErrorKind::TestFailed => PatchError::JsonPatchTestFailed {
                operation: e.operation,
                path,
            },
            kind => PatchError::JsonPatchFailed {
                operation: e.operation,
                path,
                detail: kind.to_string(),
            },
        }
    })?;
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "patch", "resourceVersion": "7", "labels": {"conformance": "patch"}},
            "data": data})
    }

    #[test]
    fn merge_patch_sets_replaces_and_removes_keys() {
        // Conformance 4.1.
        let patch = json!({"data": {"a": null, "b": "20", "c": "3"},
            "metadata": {"labels": {"merged": "yes"}}});
        let out = merge_patch(&cm(json!({"a": "1", "b": "2"})), &patch);
        assert_eq!(out["data"], json!({"b": "20", "c": "3"}));
        assert_eq!(
            out["metadata"]["labels"],
            json!({"conformance": "patch", "merged": "yes"})
        );
        assert_eq!(out["metadata"]["name"], "patch");
    }

    #[test]
    fn merge_patch_replaces_a_keyed_list_wholesale() {
        // Conformance 4.8: RFC 7386 knows no merge keys.
        let is = json!({"spec": {"tags": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        let out = merge_patch(
            &is,
            &json!({"spec": {"tags": [{"name": "c", "from": {"name": "x"}}]}}),
        );
        assert_eq!(
            out["spec"]["tags"],
            json!([{"name": "c", "from": {"name": "x"}}])
        );
    }

    #[test]
    fn json_patch_adds_replaces_and_removes() {
        // Conformance 4.2.
        let ops = json!([{"op": "add", "path": "/data/d", "value": "4"},
            {"op": "replace", "path": "/data/b", "value": "21"},
            {"op": "remove", "path": "/data/c"}]);
        let out = json_patch(&cm(json!({"b": "20", "c": "3"})), &ops).unwrap();
        assert_eq!(out["data"], json!({"b": "21", "d": "4"}));
    }

    #[test]
    fn json_patch_moves_and_copies() {
        let ops = json!([{"op": "copy", "from": "/data/b", "path": "/data/c"},
            {"op": "move", "from": "/data/b", "path": "/data/d"}]);
        let out = json_patch(&cm(json!({"b": "1"})), &ops).unwrap();
        assert_eq!(out["data"], json!({"c": "1", "d": "1"}));
    }

    #[test]
    fn json_patch_with_a_failing_test_is_invalid_and_applies_nothing() {
        // Conformance 4.3: 422 Invalid, nothing of the patch applied.
        let original = cm(json!({"b": "21"}));
        let ops = json!([{"op": "add", "path": "/data/z", "value": "0"},
            {"op": "test", "path": "/data/b", "value": "nope"},
            {"op": "add", "path": "/data/e", "value": "5"}]);
        let err = json_patch(&original, &ops).unwrap_err();
        assert!(
            matches!(err, PatchError::JsonPatchTestFailed { operation: 1, ref path } if path == "/data/b"),
            "{err:?}"
        );
        assert_eq!((err.http_code(), err.reason()), (422, "Invalid"));
    }

    #[test]
    fn json_patch_whose_resource_version_test_holds_is_applied() {
        // Conformance 4.4.
        let ops = json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/data/f", "value": "6"}]);
        let out = json_patch(&cm(json!({})), &ops).unwrap();
        assert_eq!(out["data"]["f"], "6");
    }

    #[test]
    fn json_patch_errors_map_to_kube_statuses() {
        let cases = [
            (
                json!([{"op": "remove", "path": "/data/missing"}]),
                422,
                "Invalid",
            ),
            (
                json!([{"op": "add", "path": "/nope/x", "value": 1}]),
                422,
                "Invalid",
            ),
            (
                json!([{"op": "frobnicate", "path": "/data"}]),
                400,
                "BadRequest",
            ),
            (json!({"op": "add"}), 400, "BadRequest"),
        ];
        for (ops, code, reason) in cases {
            let err = json_patch(&cm(json!({})), &ops).unwrap_err();
            assert_eq!((err.http_code(), err.reason()), (code, reason), "{ops}");
        }
    }
}
