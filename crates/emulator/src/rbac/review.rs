//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: whether a user may do something,
//! answered from the RBAC objects the emulator stores, as kube-apiserver's RBAC authorizer
//! answers it. Nothing is stored: the review comes back with its `status`.

use serde_json::{Value, json};

use super::{Attributes, GROUP, Rbac, UserInfo};
use crate::status::ApiError;
use crate::store::Store;

/// The API group of SubjectAccessReviews.
pub const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";

/// The RBAC objects stored now that can decide a request in `namespace`: the cluster's, and
/// only that namespace's Roles and RoleBindings (the only ones that grant anything there, as
/// in kube-apiserver's authorizer); every namespace's for a request without one. Decoding every
/// namespace's for each review made 3,000 reviews over 1,000 namespaces take the emulator's
/// cores for seconds (`benches/source_mt.rs`).
fn stored(store: &Store, namespace: &str) -> Rbac {
    let mut objects = Vec::new();
    let only = (!namespace.is_empty()).then_some(namespace);
    for (plural, namespaced) in [
        ("roles", true),
        ("clusterroles", false),
        ("rolebindings", true),
        ("clusterrolebindings", false),
    ] {
        let (items, _) = store.list(GROUP, plural, if namespaced { only } else { None });
        objects.extend(items.iter().map(|o| o.value()));
    }
    Rbac::from_objects(&objects)
}

fn invalid(message: &str) -> ApiError {
    ApiError::invalid(AUTHORIZATION_GROUP, "SubjectAccessReview", "", message)
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_string()
}

/// The user and the request a review asks about, validated as the API server validates a
/// `SubjectAccessReviewSpec`.
fn parse(spec: &Value) -> Result<(UserInfo, Attributes), ApiError> {
    let user = UserInfo {
        name: text(spec, "user"),
        groups: spec["groups"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(invalid(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    let (resource, non_resource) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    let attrs = match (resource.is_object(), non_resource.is_object()) {
        (true, false) => Attributes::Resource {
            verb: text(resource, "verb"),
            group: text(resource, "group"),
            resource: text(resource, "resource"),
            subresource: text(resource, "subresource"),
            namespace: text(resource, "namespace"),
            name: text(resource, "name"),
        },
        (false, true) => Attributes::NonResource {
            verb: text(non_resource, "verb"),
            path: text(non_resource, "path"),
        },
        _ => {
            return Err(invalid(
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    Ok((user, attrs))
}

/// Answers the review `body`: the review as sent, with `status.allowed` and, when allowed, the
/// grant in `status.reason`.
pub fn review(store: &Store, mut body: Value) -> Result<Value, ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request is not a JSON object",
        ));
    }
    let (user, attrs) = parse(&body["spec"])?;
    let namespace = match &attrs {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    let status = match stored(store, namespace).authorize(&user, &attrs) {
        Some(grant) => json!({"allowed": true, "reason": grant.reason()}),
        None => json!({"allowed": false}),
    };
    body["apiVersion"] = json!(format!("{AUTHORIZATION_GROUP}/v1"));
    body["kind"] = json!("SubjectAccessReview");
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    body["metadata"]["creationTimestamp"] = Value::Null;
    body["status"] = status;
    Ok(body)
}
