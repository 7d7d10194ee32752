//! What a PATCH request says before any patching: its type (from `Content-Type`), its body
//! (parsed and shape-checked), its options (`fieldManager`, `force`) and the field manager kube
//! falls back to without `?fieldManager=`.

use serde_json::Value;

use super::PatchError;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
