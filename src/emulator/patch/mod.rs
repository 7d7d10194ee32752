//! Patch logic of the API emulator: the four PATCH content types of kube-apiserver and the
//! field-ownership bookkeeping (`metadata.managedFields`) that server-side apply depends on.
//!
//! Everything here is pure: values in, values (or a [`PatchError`] that already knows its HTTP
//! status) out. The HTTP handler parses the body with [`parse_patch_body`], checks the query with
//! [`validate_patch_options`], runs the patch and, for writes that are not applies, calls
//! [`record_update`] so that a later apply sees who owns what.
//!
//! - [`merge_patch`]: RFC 7386 (`application/merge-patch+json`).
//! - [`json_patch`]: RFC 6902 (`application/json-patch+json`).
//! - [`strategic_merge_patch`]: kube `strategicpatch` (`application/strategic-merge-patch+json`).
//! - [`server_side_apply`]: structured-merge-diff (`application/apply-patch+yaml`).
//!
//! There is no OpenAPI schema here: the only schema knowledge is the list of [`MergeKey`]s the
//! caller passes in. Maps are always merged field by field, lists with a merge key element by
//! element, every other list is atomic.

mod apply;
mod fieldset;
mod strategic;

use serde_json::{Value, json};

pub use apply::{ApplyRequest, Writer, record_update, record_write, server_side_apply};
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

/// The PATCH flavours kube-apiserver accepts, told apart by the request's `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// All patch types, in the order kube-apiserver lists them in `Accept-Patch`.
    pub const ALL: [PatchType; 4] = [
        PatchType::Json,
        PatchType::Merge,
        PatchType::Strategic,
        PatchType::Apply,
    ];

    /// The patch type of a `Content-Type` header value; parameters such as `;charset=utf-8` are
    /// ignored. `None` means 415 Unsupported Media Type, as in kube-apiserver (which has no
    /// `apply-patch+json`: an apply body in JSON is sent as YAML, JSON being YAML).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let media = ct.split(';').next().unwrap_or_default().trim();
        PatchType::ALL
            .into_iter()
            .find(|t| t.content_type().eq_ignore_ascii_case(media))
    }

    /// The canonical media type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// An owner that an apply would take a field from, as kube reports it in a 409.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldConflict {
    /// The other field manager.
    pub manager: String,
    /// Its operation, `Apply` or `Update`.
    pub operation: String,
    /// Its API version (kube prints it for `Update` owners only).
    pub api_version: String,
    /// Its subresource, empty for the main resource.
    pub subresource: String,
    /// The field in structured-merge-diff notation, e.g. `.data.x` or `.spec.tags[name="a"].from`.
    pub field: String,
}

impl FieldConflict {
    /// The owner as kube's `printManager` spells it: `"conf-a"`, `"kubectl" using v1`, ...
    pub fn owner(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// Why a patch could not be applied. Each variant knows the HTTP status kube-apiserver answers.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body does not parse (400 BadRequest).
    #[error("the body of the {format} patch is invalid: {detail}")]
    InvalidBody {
        /// What was expected, e.g. "JSON merge".
        format: &'static str,
        /// The parser's complaint.
        detail: String,
    },
    /// A JSON-patch `test` operation did not hold (422 Invalid); nothing was applied.
    #[error("the JSON patch test of operation {operation} at {path} failed: value did not match")]
    JsonPatchTestFailed {
        /// Index of the failed operation.
        operation: usize,
        /// Its JSON pointer.
        path: String,
    },
    /// A JSON-patch operation pointed at a path that does not exist (422 Invalid).
    #[error("the JSON patch operation {operation} at {path} failed: {detail}")]
    JsonPatchFailed {
        /// Index of the failed operation.
        operation: usize,
        /// Its JSON pointer.
        path: String,
        /// What was wrong.
        detail: String,
    },
    /// A strategic-patch directive in the wrong shape (400 BadRequest, kube's
    /// `interpretStrategicMergePatchError`).
    #[error("invalid strategic merge patch: {0}")]
    BadStrategicPatch(String),
    /// A strategic patch kube cannot apply, e.g. a list element without its merge key; kube
    /// does not map these errors, so they surface as 500 InternalError.
    #[error("{0}")]
    StrategicPatchFailed(String),
    /// An apply without `?fieldManager=` (422 Invalid, PatchOptions validation).
    #[error(
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    )]
    MissingFieldManager,
    /// Another invalid PatchOptions query parameter (422 Invalid).
    #[error("PatchOptions.meta.k8s.io \"\" is invalid: {field}: {detail}")]
    InvalidOptions {
        /// The offending option, e.g. `force`.
        field: &'static str,
        /// kube's field-error text, e.g. `Forbidden: may not be specified for non-apply patch`.
        detail: String,
    },
    /// An applied configuration the field manager refuses (400 BadRequest): wrong kind or
    /// version, a name that is not the object's, `metadata.managedFields` set, a keyed list
    /// element without its key.
    #[error("{0}")]
    InvalidApplyConfig(String),
    /// The apply would change fields other managers own (409 Conflict).
    #[error("{}", conflict_message(.0))]
    Conflict(Vec<FieldConflict>),
}

impl PatchError {
    /// The HTTP status kube-apiserver answers with.
    pub fn http_code(&self) -> u16 {
        match self {
            PatchError::InvalidBody { .. }
            | PatchError::BadStrategicPatch(_)
            | PatchError::InvalidApplyConfig(_) => 400,
            PatchError::Conflict(_) => 409,
            PatchError::JsonPatchTestFailed { .. }
            | PatchError::JsonPatchFailed { .. }
            | PatchError::MissingFieldManager
            | PatchError::InvalidOptions { .. } => 422,
            PatchError::StrategicPatchFailed(_) => 500,
        }
    }

    /// The `reason` of the `Status` object kube-apiserver answers with.
    pub fn reason(&self) -> &'static str {
        match self.http_code() {
            400 => "BadRequest",
            409 => "Conflict",
            422 => "Invalid",
            _ => "InternalError",
        }
    }

    /// The `details.causes` of the `Status` (`[{reason, message, field}]`), empty when kube
    /// sends none.
    pub fn status_causes(&self) -> Vec<Value> {
        match self {
            PatchError::Conflict(conflicts) => conflicts
                .iter()
                .map(|c| {
                    json!({"reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.owner()), "field": c.field})
                })
                .collect(),
            PatchError::MissingFieldManager => vec![json!({"reason": "FieldValueRequired",
                "message": "Required value: is required for apply patch", "field": "fieldManager"})],
            PatchError::InvalidOptions { field, detail } => {
                let reason = if detail.starts_with("Forbidden") {
                    "FieldValueForbidden"
                } else {
                    "FieldValueInvalid"
                };
                vec![json!({"reason": reason, "message": detail, "field": field})]
            }
            _ => Vec::new(),
        }
    }
}

/// kube's `getConflictMessage`: one line for one conflict, else grouped by manager.
fn conflict_message(conflicts: &[FieldConflict]) -> String {
    if let [c] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.owner(),
            c.field
        );
    }
    let mut lines = Vec::new();
    let mut last_owner = None;
    for c in conflicts {
        let owner = c.owner();
        if last_owner.as_ref() != Some(&owner) {
            lines.push(format!("conflicts with {owner}:"));
            last_owner = Some(owner);
        }
        lines.push(format!("- {}", c.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Parses a PATCH body: JSON for the three JSON types (a JSON patch must be an array, the
/// others an object), YAML (of which JSON is a subset) for an apply.
pub fn parse_patch_body(pt: PatchType, body: &[u8]) -> Result<Value, PatchError> {
    let (format, parsed) = match pt {
        PatchType::Apply => (
            "apply",
            serde_yaml::from_slice::<Value>(body).map_err(|e| e.to_string()),
        ),
        PatchType::Json => (
            "JSON",
            serde_json::from_slice(body).map_err(|e| e.to_string()),
        ),
        PatchType::Merge => (
            "JSON merge",
            serde_json::from_slice(body).map_err(|e| e.to_string()),
        ),
        PatchType::Strategic => (
            "strategic merge",
            serde_json::from_slice(body).map_err(|e| e.to_string()),
        ),
    };
    let value = parsed.map_err(|detail| PatchError::InvalidBody { format, detail })?;
    let shape_ok = match pt {
        PatchType::Json => value.is_array(),
        _ => value.is_object(),
    };
    if !shape_ok {
        let want = if pt == PatchType::Json {
            "an array of operations"
        } else {
            "an object"
        };
        return Err(PatchError::InvalidBody {
            format,
            detail: format!("expected {want}"),
        });
    }
    Ok(value)
}

/// kube's `ValidatePatchOptions`: `force` only with apply, `fieldManager` required for apply,
/// at most 128 printable characters.
pub fn validate_patch_options(
    pt: PatchType,
    field_manager: &str,
    force: Option<bool>,
) -> Result<(), PatchError> {
    if pt != PatchType::Apply && force.is_some() {
        return Err(PatchError::InvalidOptions {
            field: "force",
            detail: "Forbidden: may not be specified for non-apply patch".into(),
        });
    }
    if pt == PatchType::Apply && field_manager.is_empty() {
        return Err(PatchError::MissingFieldManager);
    }
    if field_manager.len() > 128 {
        return Err(PatchError::InvalidOptions {
            field: "fieldManager",
            detail: "Too long: may not be more than 128 bytes".into(),
        });
    }
    if field_manager.chars().any(|c| c.is_control()) {
        return Err(PatchError::InvalidOptions {
            field: "fieldManager",
            detail: format!(
                "Invalid value: {field_manager:?}: must only contain printable characters"
            ),
        });
    }
    Ok(())
}

/// The field manager kube records for a write without `?fieldManager=`: the User-Agent up to
/// its first `/` (`kubectl/v1.31 (linux)` -> `kubectl`), at most 128 bytes.
pub fn default_field_manager(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or_default();
    let mut end = prefix.len().min(128);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    prefix[..end].to_owned()
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
    use super::*;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "patch", "resourceVersion": "7", "labels": {"conformance": "patch"}},
            "data": data})
    }

    #[test]
    fn content_types_map_to_patch_types_ignoring_parameters_and_case() {
        let cases = [
            ("application/merge-patch+json", Some(PatchType::Merge)),
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::Strategic),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            ("Application/Apply-Patch+YAML", Some(PatchType::Apply)),
            ("application/json", None),
            ("application/apply-patch+json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(PatchType::from_content_type(ct), want, "{ct}");
        }
        for t in PatchType::ALL {
            assert_eq!(PatchType::from_content_type(t.content_type()), Some(t));
        }
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

    #[test]
    fn bodies_parse_per_patch_type() {
        let ok = [
            (PatchType::Merge, "{\"a\": 1}", json!({"a": 1})),
            (PatchType::Json, "[]", json!([])),
            (PatchType::Strategic, "{}", json!({})),
            (
                PatchType::Apply,
                "{\"kind\": \"ConfigMap\"}",
                json!({"kind": "ConfigMap"}),
            ),
            (
                PatchType::Apply,
                "kind: ConfigMap\ndata:\n  x: \"1\"\n",
                json!({"kind": "ConfigMap", "data": {"x": "1"}}),
            ),
        ];
        for (pt, body, want) in ok {
            assert_eq!(
                parse_patch_body(pt, body.as_bytes()).unwrap(),
                want,
                "{body}"
            );
        }
        let bad = [
            (PatchType::Merge, "{"),
            (PatchType::Merge, "[1]"),
            (PatchType::Json, "{}"),
            (PatchType::Strategic, "null"),
            (PatchType::Apply, "kind: [unterminated"),
            (PatchType::Apply, "- a\n- b\n"),
        ];
        for (pt, body) in bad {
            let err = parse_patch_body(pt, body.as_bytes()).unwrap_err();
            assert_eq!(
                (err.http_code(), err.reason()),
                (400, "BadRequest"),
                "{body}"
            );
        }
    }

    #[test]
    fn patch_options_are_validated_like_kube() {
        // Conformance 4.13 is the missing fieldManager.
        let cases = [
            (PatchType::Apply, "", None, Some("fieldManager")),
            (PatchType::Apply, "conf-a", Some(true), None),
            (PatchType::Merge, "", None, None),
            (PatchType::Merge, "", Some(false), Some("force")),
            (PatchType::Strategic, "me\n", None, Some("fieldManager")),
        ];
        for (pt, manager, force, bad_field) in cases {
            match (validate_patch_options(pt, manager, force), bad_field) {
                (Ok(()), None) => {}
                (Err(e), Some(field)) => {
                    assert_eq!((e.http_code(), e.reason()), (422, "Invalid"));
                    assert_eq!(e.status_causes()[0]["field"], field);
                }
                (got, want) => panic!("{pt:?} {manager:?} {force:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn default_field_manager_is_the_user_agent_product() {
        let cases = [
            ("kubectl/v1.31.0 (linux/amd64) kubernetes/abc", "kubectl"),
            ("python-requests/2.31", "python-requests"),
            ("", ""),
        ];
        for (ua, want) in cases {
            assert_eq!(default_field_manager(ua), want);
        }
        assert_eq!(default_field_manager(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn conflict_messages_read_like_kube() {
        let c = |manager: &str, operation: &str, field: &str| FieldConflict {
            manager: manager.into(),
            operation: operation.into(),
            api_version: "v1".into(),
            subresource: String::new(),
            field: field.into(),
        };
        let one = PatchError::Conflict(vec![c("conf-a", "Apply", ".data.x")]);
        assert_eq!(
            one.to_string(),
            "Apply failed with 1 conflict: conflict with \"conf-a\": .data.x"
        );
        assert_eq!((one.http_code(), one.reason()), (409, "Conflict"));
        assert_eq!(
            one.status_causes(),
            vec![
                json!({"reason": "FieldManagerConflict", "message": "conflict with \"conf-a\"", "field": ".data.x"})
            ]
        );
        let two = PatchError::Conflict(vec![
            c("conf-a", "Apply", ".data.x"),
            c("kubectl", "Update", ".data.y"),
            c("kubectl", "Update", ".data.z"),
        ]);
        assert_eq!(
            two.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"conf-a\":\n- .data.x\n\
             conflicts with \"kubectl\" using v1:\n- .data.y\n- .data.z"
        );
    }
}
