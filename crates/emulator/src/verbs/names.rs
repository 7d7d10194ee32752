//! The names of new objects, validated as kube-apiserver's `ValidateObjectMeta` validates
//! them for ConfigMaps, Leases, Events and custom resources (not Images, named by digest): `metadata.name`, and
//! `metadata.generateName` with a trailing `-` allowed, must be lowercase RFC 1123 subdomains.

use serde_json::Value;

use super::md_str;
use crate::registry::ResourceType;
use crate::status::ApiError;

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', \
regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// Whether `s` is a lowercase RFC 1123 subdomain of at most 253 characters.
fn is_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// The field errors of a new object's name and generateName.
fn name_errors(obj: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(prefix) = md_str(obj, "generateName").filter(|p| !p.is_empty()) {
        // A prefix may end in '-': the generated suffix follows it.
        let masked = match prefix.strip_suffix('-') {
            Some(p) => format!("{p}a"),
            None => prefix.to_string(),
        };
        if !is_subdomain(&masked) {
            errors.push(format!(
                "metadata.generateName: Invalid value: \"{prefix}\": {SUBDOMAIN}"
            ));
        }
    }
    if let Some(name) = md_str(obj, "name").filter(|n| !n.is_empty())
        && !is_subdomain(name)
    {
        let why = if name.len() > 253 {
            "must be no more than 253 characters".to_string()
        } else {
            SUBDOMAIN.to_string()
        };
        errors.push(format!("metadata.name: Invalid value: \"{name}\": {why}"));
    }
    errors
}

/// 422 Invalid when the new object's name or generateName is not a valid subdomain.
pub(super) fn check_name(ty: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let errors = name_errors(obj);
    let why = match errors.len() {
        0 => return Ok(()),
        1 => errors[0].clone(),
        _ => format!("[{}]", errors.join(", ")),
    };
    let name = md_str(obj, "name").unwrap_or_default();
    Err(ApiError::invalid(&ty.group, &ty.kind, name, why).with_field_causes(&errors))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn names_are_lowercase_subdomains_and_a_prefix_may_end_in_a_dash() {
        for ok in ["a", "a-b.c", "promote.1a2b", "0"] {
            assert!(
                name_errors(&json!({"metadata": {"name": ok}})).is_empty(),
                "{ok}"
            );
        }
        for bad in ["Not_Valid", "a.", "-a", "a..b", &"a".repeat(254)] {
            assert_eq!(
                name_errors(&json!({"metadata": {"name": bad}})).len(),
                1,
                "{bad}"
            );
        }
        let prefix = |p: &str| {
            name_errors(&json!({"metadata": {"generateName": p, "name": format!("{p}x1")}}))
        };
        assert!(prefix("imagegate-source-checkpoint-").is_empty());
        assert_eq!(
            prefix("promote."),
            vec![format!(
                "metadata.generateName: Invalid value: \"promote.\": {SUBDOMAIN}"
            )]
        );
    }
}
