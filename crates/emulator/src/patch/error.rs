//! Why a patch fails, as kube-apiserver reports it: [`PatchError`] knows the HTTP status, the
//! `Status` reason and causes of each failure, and [`FieldConflict`] is one owner an apply would
//! take a field from, worded like kube's 409.

use serde_json::{Value, json};

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
            | PatchError::MissingFieldManager => 422,
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

#[cfg(test)]
mod tests {
    use super::*;

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
