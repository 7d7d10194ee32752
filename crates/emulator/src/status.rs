//! Errors as the Kubernetes API reports them: a `metav1.Status` with an HTTP code and a reason.
//!
//! Every failure the emulator returns goes through [`ApiError`], so that clients (kube-rs,
//! kubectl, the conformance suite) see exactly the shape a real API server sends.

use serde_json::{Value, json};

/// A failed API request, rendered as a `Status` object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// The HTTP status code, repeated in `Status.code`.
    pub code: u16,
    /// The machine-readable `Status.reason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// The human-readable message, worded like kube-apiserver's.
    pub message: String,
    /// `Status.details` (`name`, `group`, `kind`), when known.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error without details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// Adds `Status.details` naming the object.
    pub fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = json!({ "kind": kind });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        if !name.is_empty() {
            d["name"] = json!(name);
        }
        self.details = Some(d);
        self
    }

    /// Adds `details.causes` from kube-style field errors (`spec.x: Invalid value: ...`), which
    /// kubectl prints one per line.
    pub fn with_field_causes(mut self, errors: &[String]) -> Self {
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| {
                let (field, message) = e.split_once(": ").unwrap_or(("", e));
                let reason = if message.starts_with("Required value") {
                    "FieldValueRequired"
                } else if message.starts_with("Unsupported value") {
                    "FieldValueNotSupported"
                } else if message.contains(" in body must be of type ") {
                    "FieldValueTypeInvalid"
                } else {
                    "FieldValueInvalid"
                };
                json!({ "reason": reason, "message": message, "field": field })
            })
            .collect();
        let mut d = self.details.take().unwrap_or_else(|| json!({}));
        d["causes"] = Value::Array(causes);
        self.details = Some(d);
        self
    }

    /// 404 `"<plural>.<group> \"<name>\" not found"`, as `errors.NewNotFound` words it.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 409 Conflict for a stale resourceVersion, worded like the registry's optimistic lock.
    pub fn conflict(group: &str, plural: &str, name: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 422 Invalid, `<Kind>[.<group>] "<name>" is invalid: <why>` (a core kind unqualified,
    /// as `errors.NewInvalid` words it).
    pub fn invalid(group: &str, kind: &str, name: &str, why: impl AsRef<str>) -> Self {
        ApiError::new(
            422,
            "Invalid",
            format!(
                "{} \"{name}\" is invalid: {}",
                qualified(group, kind),
                why.as_ref()
            ),
        )
        .with_details(group, kind, name)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed, as the generic handler answers a verb the storage does not implement.
    pub fn method_not_allowed(verb: &str, group: &str, plural: &str) -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "{verb} is not supported on resources of kind \"{}\"",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, "")
    }

    /// 410 Expired, for a resourceVersion or continue token older than what is retained.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // An error the server did not classify (a storage error): no reason at all.
            s.as_object_mut().map(|o| o.remove("reason"));
        }
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// A `Status` with `status: Success`, as DELETE answers for built-in kinds.
pub fn success_status(group: &str, plural: &str, name: &str, uid: Option<&str>) -> Value {
    let mut details = json!({ "name": name, "kind": plural });
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    if let Some(uid) = uid {
        details["uid"] = json!(uid);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_kube_apiserver() {
        let e = ApiError::not_found("image.openshift.io", "imagestreams", "nb");
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["status"], "Failure");
        assert_eq!(
            s["message"],
            "imagestreams.image.openshift.io \"nb\" not found"
        );
        assert_eq!(s["details"]["name"], "nb");
    }

    #[test]
    fn method_not_allowed_names_the_qualified_resource() {
        let e = ApiError::method_not_allowed("watch", "image.openshift.io", "imagestreamtags");
        assert_eq!(
            e.message,
            "watch is not supported on resources of kind \"imagestreamtags.image.openshift.io\""
        );
        assert_eq!(e.to_status()["code"], 405);
    }
}
