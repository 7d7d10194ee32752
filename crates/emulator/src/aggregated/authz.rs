//! Authorization of the image-API-only mode, delegated to the real API server as an aggregated
//! server built on k8s.io/apiserver does (`--authorization-kubeconfig`): each request's
//! attributes go to the server as a SubjectAccessReview, so the RBAC the cluster holds (the
//! shipped ClusterRoles for ImageStreams among it) is what decides. Decisions are cached for
//! 10 s, allowed and denied alike, the defaults of k8s.io/apiserver's delegating authorizer.
//!
//! The attributes are read from the request as k8s.io/apiserver's `RequestInfoFactory` reads
//! them: `/apis/{group}/{version}/[watch/][namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`
//! is a resource request (GET is `get`, `list` or `watch`; a list or watch narrowed by a
//! `metadata.name=` field selector names the object), and every other path is a non-resource
//! request whose verb is the lower-cased method.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::Method;
use serde_json::{Value, json};

use super::authn::User;
use crate::http::Query;

/// How long a decision is reused.
const CACHE_TTL: Duration = Duration::from_secs(10);

/// What a request asks to do, as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request for an API resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
        verb: String,
        /// API group.
        group: String,
        /// API version.
        version: String,
        /// Resource (plural).
        resource: String,
        /// Subresource, empty if none.
        subresource: String,
        /// Namespace, empty for cluster-scoped and all-namespace requests.
        namespace: String,
        /// Object name, empty for collections.
        name: String,
    },
    /// Any other path (discovery, OpenAPI, `/version`).
    NonResource {
        /// The lower-cased HTTP method.
        verb: String,
        /// The path.
        path: String,
    },
}

impl Attributes {
    /// The attributes of `method path?query`.
    pub fn of(method: &Method, path: &str, query: &Query) -> Attributes {
        let non_resource = || Attributes::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        };
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, version, rest) = match segs.as_slice() {
            ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
            ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
            _ => return non_resource(),
        };
        let (watch_prefix, rest) = match rest {
            ["watch", rest @ ..] => (true, rest),
            _ => (false, rest),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (ns.to_string(), rest),
            _ => (String::new(), rest),
        };
        let (resource, mut name, subresource) = match rest {
            [r] => (*r, String::new(), ""),
            [r, n] => (*r, n.to_string(), ""),
            [r, n, s] => (*r, n.to_string(), *s),
            _ => return non_resource(),
        };
        let watch = watch_prefix || query.flag("watch");
        let verb = match *method {
            Method::GET | Method::HEAD if watch => "watch",
            Method::GET | Method::HEAD if name.is_empty() => "list",
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => return non_resource(),
        };
        if matches!(verb, "list" | "watch")
            && let Some(n) = query.get("fieldSelector").and_then(named_by_selector)
        {
            name = n;
        }
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            version: version.into(),
            resource: percent_decoded(resource),
            subresource: subresource.into(),
            namespace: percent_decoded(&namespace),
            name: percent_decoded(&name),
        }
    }

    /// The `spec` of a SubjectAccessReview of these attributes for `user`.
    pub fn review_spec(&self, user: &User) -> Value {
        let mut spec = json!({"user": user.name, "groups": user.groups, "extra": user.extra});
        match self {
            Attributes::Resource {
                verb,
                group,
                version,
                resource,
                subresource,
                namespace,
                name,
            } => {
                spec["resourceAttributes"] = json!({
                    "verb": verb, "group": group, "version": version, "resource": resource,
                    "subresource": subresource, "namespace": namespace, "name": name,
                });
            }
            Attributes::NonResource { verb, path } => {
                spec["nonResourceAttributes"] = json!({"verb": verb, "path": path});
            }
        }
        spec
    }

    /// kube-apiserver's message for a refusal (`endpoints/handlers/responsewriters.forbiddenMessage`).
    pub fn forbidden_message(&self, user: &str, reason: &str) -> String {
        let because = if reason.is_empty() {
            String::new()
        } else {
            format!(": {reason}")
        };
        match self {
            Attributes::NonResource { verb, path } => {
                format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"{because}")
            }
            Attributes::Resource {
                verb,
                group,
                resource,
                subresource,
                namespace,
                name,
                ..
            } => {
                let full = if subresource.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}/{subresource}")
                };
                let object = match (group.is_empty(), name.is_empty()) {
                    (true, true) => resource.clone(),
                    (true, false) => format!("{resource} \"{name}\""),
                    (false, true) => format!("{resource}.{group}"),
                    (false, false) => format!("{resource}.{group} \"{name}\""),
                };
                let scope = if namespace.is_empty() {
                    "at the cluster scope".to_string()
                } else {
                    format!("in the namespace \"{namespace}\"")
                };
                format!(
                    "{object} is forbidden: User \"{user}\" cannot {verb} resource \"{full}\" in API group \"{group}\" {scope}{because}"
                )
            }
        }
    }
}

/// `metadata.name=X` (or `==`) alone in a field selector names X.
fn named_by_selector(selector: &str) -> Option<String> {
    let mut parts = selector.split(',');
    let only = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    let value = only
        .strip_prefix("metadata.name==")
        .or_else(|| only.strip_prefix("metadata.name="))?;
    Some(value.to_string())
}

fn percent_decoded(s: &str) -> String {
    form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// A decision: allowed, or denied with the reviewer's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The request may go on.
    Allow,
    /// The request is refused (403) with this reason (may be empty).
    Deny(String),
}

/// Why a SubjectAccessReview could not be made (the request is refused with 500, as the
/// delegating authorizer does when the API server cannot be asked).
#[derive(Debug, thiserror::Error)]
#[error("SubjectAccessReview failed: {0}")]
pub struct ReviewFailed(pub String);

/// Asks the API server, through SubjectAccessReviews, and remembers the answers for 10 s.
pub struct Delegated {
    client: kube::Client,
    cache: Mutex<HashMap<String, (Decision, Instant)>>,
}

impl Delegated {
    /// Reviews through `client` (its identity needs `create` on
    /// `subjectaccessreviews.authorization.k8s.io`: the ClusterRole `system:auth-delegator`).
    pub fn new(client: kube::Client) -> Delegated {
        Delegated {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `user` may do what `attrs` says.
    pub async fn authorize(
        &self,
        user: &User,
        attrs: &Attributes,
    ) -> Result<Decision, ReviewFailed> {
        let spec = attrs.review_spec(user);
        let key = spec.to_string();
        if let Some(d) = self.cached(&key) {
            return Ok(d);
        }
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec,
        });
        let body = serde_json::to_vec(&review).map_err(|e| ReviewFailed(e.to_string()))?;
        let req = axum::http::Request::post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| ReviewFailed(e.to_string()))?;
        let answer: Value = self
            .client
            .request(req)
            .await
            .map_err(|e| ReviewFailed(e.to_string()))?;
        let status = &answer["status"];
        let decision = if status["allowed"].as_bool() == Some(true) {
            Decision::Allow
        } else {
            Decision::Deny(status["reason"].as_str().unwrap_or_default().to_string())
        };
        self.remember(key, decision.clone());
        Ok(decision)
    }

    fn cached(&self, key: &str) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|(_, at)| at.elapsed() < CACHE_TTL)
            .map(|(d, _)| d.clone())
    }

    fn remember(&self, key: String, decision: Decision) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() > 10_000 {
            cache.retain(|_, (_, at)| at.elapsed() < CACHE_TTL);
        }
        cache.insert(key, (decision, Instant::now()));
    }
}

#[cfg(test)]
mod tests;
