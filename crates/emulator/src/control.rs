//! The control API: what tests, the demo and users drive the emulator with, beside the
//! Kubernetes API. Served under [`PREFIX`], a path no real API server uses, so another process
//! (a test, a user with curl) can simulate an import while kubectl or imagegate watch.
//!
//! | method and path (under the prefix)                          | effect                             |
//! |-------------------------------------------------------------|------------------------------------|
//! | `POST seed` (YAML or JSON, multi-document)                  | store the objects                  |
//! | `POST namespaces/{ns}/imagestreams/{is}/import`             | scheduled import of a new digest   |
//! | `POST namespaces/{ns}/imagestreams/{is}/importfailure`      | a failed scheduled import          |
//! | `POST registry` `{"image", "digest"?, "failure"?}`           | what an upstream pull spec serves  |
//! | `GET registry`                                              | every upstream answer recorded     |
//! | `POST registries` `{"host", "insecure"?}`                   | imports read this registry for real |
//! | `GET registries`                                            | the registries read for real       |
//! | `POST imports` `{"scheduledIntervalSeconds"}`               | the scheduled imports' interval from now |
//! | `GET imports`                                               | whether the import controllers run, the interval |
//! | `PUT images/{digest}/metadata`                              | set an image's dockerImageMetadata |
//! | `POST compact`                                              | expire every older resourceVersion |
//! | `POST drop-watches`                                         | end every open watch               |
//! | `POST faults`, `DELETE faults`                              | inject / clear request faults      |
//! | `GET requests[?mutating=true]`, `DELETE requests`           | read / clear the request log       |

use std::sync::Mutex;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::http::{AppState, Query, error_response, json_response};
use super::simulate::ImportRequest;
use super::status::ApiError;
use super::upstream::{Answer, Failure};
use super::verbs::Target;

/// The path prefix of the control API.
pub const PREFIX: &str = "/_emulator/v1/";

/// One API request as the emulator saw it (what an audit log records).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`), empty for non-resource paths.
    pub verb: String,
    /// API group of the resource (`""` for core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`), empty if none.
    pub subresource: String,
    /// Namespace, empty for cluster-scoped or all-namespace requests.
    pub namespace: String,
    /// Object name, empty for collections.
    pub name: String,
    /// The client's User-Agent.
    pub user_agent: String,
    /// The user the bearer token names: `NAME` for a token `user:NAME`, `admin` for any other
    /// token, `system:anonymous` without one.
    pub user: String,
    /// The HTTP status answered (0 while in flight).
    pub code: u16,
}

impl RequestRecord {
    /// A record for a request not yet routed.
    pub(crate) fn new(
        method: &Method,
        path: &str,
        query: &str,
        user_agent: &str,
        headers: &HeaderMap,
    ) -> Self {
        RequestRecord {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            verb: String::new(),
            group: String::new(),
            resource: String::new(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
            user_agent: user_agent.to_string(),
            user: user_of(headers),
            code: 0,
        }
    }

    /// Fills in what routing found.
    pub(crate) fn set_target(&mut self, t: &Target, verb: &str) {
        self.verb = verb.to_string();
        self.group = t.ty.group.clone();
        self.resource = t.ty.plural.clone();
        self.subresource = t.subresource.clone().unwrap_or_default();
        self.namespace = t.namespace.clone().unwrap_or_default();
        self.name = t.name.clone().unwrap_or_default();
    }

    /// Whether the request could change state.
    pub(crate) fn is_mutating(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The emulator accepts any bearer token; a token of the form `user:NAME` names the user in
/// the request log (so tests can tell two programs apart), anything else is `admin`, and no
/// token is `system:anonymous`.
pub(crate) fn user_of(headers: &HeaderMap) -> String {
    match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        Some(token) => token
            .strip_prefix("user:")
            .map(str::to_string)
            .unwrap_or_else(|| "admin".into()),
        None => "system:anonymous".into(),
    }
}

/// The user a request was authenticated as, when the server authenticates (the
/// image-API-only mode, [`crate::aggregated`]): the request log records it instead of
/// [`user_of`]'s reading of the token.
#[derive(Clone, Debug)]
pub struct AuthenticatedUser(pub String);

/// A fault to inject into the next matching requests.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Fault {
    /// Only requests with this verb (`watch`, `patch`, ...).
    pub verb: Option<String>,
    /// Only requests for this resource (plural).
    pub resource: Option<String>,
    /// Only requests whose path contains this.
    pub path_contains: Option<String>,
    /// How many matching requests are affected.
    pub count: u32,
    /// Answer with this HTTP status (a `Status` body) instead of serving the request.
    pub status: Option<u16>,
    /// The Status message.
    pub message: Option<String>,
    /// Delay the request by this many milliseconds first.
    pub delay_ms: Option<u64>,
}

impl Fault {
    fn matches(&self, r: &RequestRecord) -> bool {
        self.count > 0
            && self.verb.as_deref().is_none_or(|v| v == r.verb)
            && self.resource.as_deref().is_none_or(|v| v == r.resource)
            && self
                .path_contains
                .as_deref()
                .is_none_or(|p| r.path.contains(p))
    }
}

/// Faults and the request log.
#[derive(Default)]
pub(crate) struct Control {
    faults: Mutex<Vec<Fault>>,
    log: Mutex<Vec<RequestRecord>>,
}

/// How many requests the log keeps (the oldest are dropped first).
const LOG_CAPACITY: usize = 200_000;

impl Control {
    /// Adds a fault.
    pub fn inject(&self, f: Fault) {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(f);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// The first fault matching the request, with one use consumed.
    pub fn take_fault(&self, r: &RequestRecord) -> Option<Fault> {
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        let f = faults.iter_mut().find(|f| f.matches(r))?;
        f.count -= 1;
        let out = f.clone();
        faults.retain(|f| f.count > 0);
        Some(out)
    }

    /// Records a served request.
    pub fn log(&self, r: RequestRecord) {
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() >= LOG_CAPACITY {
            log.drain(..LOG_CAPACITY / 10);
        }
        log.push(r);
    }

    /// The request log.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// `POST registry`: what the upstream registry serves for `image` from now on: `digest` (a new
/// random digest when neither it nor `failure` is given), or the refusal `failure`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamRequest {
    /// The pull spec, as a tag's `from.name` gives it (`quay.io/org/nb:latest`).
    pub image: String,
    /// The digest the registry serves for it now.
    #[serde(default)]
    pub digest: Option<String>,
    /// `dockerImageMetadata` of that image.
    #[serde(default)]
    pub docker_image_metadata: Option<Value>,
    /// The registry refuses instead: `{"reason": "NotFound"|"Unauthorized"|"InternalError",
    /// "message"?}` (the importer's message when none is given).
    #[serde(default)]
    pub failure: Option<UpstreamFailure>,
}

/// `POST registries`: from now on, imports read `host` over the registry v2 API (as
/// `--registry`, or `--insecure-registry` with `insecure`), for a registry started after the
/// emulator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryRequest {
    /// `host` or `host:port`, as pull specs name it.
    pub host: String,
    /// Read over plain HTTP whatever the tag says.
    #[serde(default)]
    pub insecure: bool,
}

/// `POST imports`: the scheduled import controller imports every scheduled tag every
/// `scheduledIntervalSeconds` from now (as `--scheduled-import-interval`), so that a test or a
/// demo can show a scheduled import without waiting OpenShift's 15 minutes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleRequest {
    /// Seconds, at least 1.
    pub scheduled_interval_seconds: u64,
}

fn imports_state(cluster: &super::verbs::Cluster) -> Value {
    json!({
        "enabled": cluster.imports.enabled,
        "scheduledIntervalSeconds": cluster.schedule.borrow().as_secs(),
    })
}

/// The `failure` of an [`UpstreamRequest`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamFailure {
    /// `NotFound`, `Unauthorized` or `InternalError`.
    pub reason: String,
    /// The message; the importer's own when absent.
    #[serde(default)]
    pub message: Option<String>,
}

impl UpstreamRequest {
    fn answer(&self) -> Result<Answer, ApiError> {
        if self.image.is_empty() {
            return Err(ApiError::bad_request("image is required"));
        }
        match (&self.digest, &self.failure) {
            (Some(_), Some(_)) => Err(ApiError::bad_request(
                "give either digest or failure, not both",
            )),
            (_, Some(f)) => Ok(Answer::Failure {
                failure: Failure::new(&f.reason, &self.image, f.message.as_deref()),
            }),
            (digest, None) => {
                let digest = digest
                    .clone()
                    .unwrap_or_else(crate::simulate::random_digest);
                if !crate::upstream::is_digest(&digest) {
                    return Err(ApiError::bad_request(format!(
                        "{digest:?} is not a sha256 digest"
                    )));
                }
                Ok(Answer::Image {
                    digest,
                    metadata: self.docker_image_metadata.clone(),
                })
            }
        }
    }
}

/// Serves a control request (`rest` is the path after [`PREFIX`]).
pub(crate) async fn handle(
    state: &AppState,
    method: &Method,
    rest: &str,
    query: &Query,
    body: &Bytes,
) -> Response {
    match serve(state, method, rest, query, body) {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => error_response(&e),
    }
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

fn serve(
    state: &AppState,
    method: &Method,
    rest: &str,
    query: &Query,
    body: &Bytes,
) -> Result<Value, ApiError> {
    let cluster = &state.cluster;
    let segs: Vec<&str> = rest.trim_matches('/').split('/').collect();
    match (method.clone(), segs.as_slice()) {
        (Method::POST, ["seed"]) => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
            let names = cluster.seed_str(text)?;
            Ok(json!({ "seeded": names }))
        }
        (Method::POST, ["namespaces", ns, "imagestreams", is, "import"]) => {
            let req: ImportRequest = serde_json::from_value(body_json(body)?)
                .map_err(|e| ApiError::bad_request(format!("invalid import request: {e}")))?;
            let out = cluster.import(ns, is, &req)?;
            Ok(
                json!({ "changed": out.is_some(), "digest": out.as_ref().map(|o| o.digest.clone()), "imageStream": out.map(|o| o.stream) }),
            )
        }
        (Method::POST, ["namespaces", ns, "imagestreams", is, "importfailure"]) => {
            let b = body_json(body)?;
            let tag = b
                .get("tag")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::bad_request("tag is required"))?;
            let reason = b
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("NotFound");
            let message = b.get("message").and_then(Value::as_str).map(str::to_string);
            let out = cluster.import_failure(ns, is, tag, reason, message.as_deref())?;
            Ok(json!({ "changed": out.is_some(), "imageStream": out }))
        }
        (Method::POST, ["registry"]) => {
            let req: UpstreamRequest = serde_json::from_value(body_json(body)?)
                .map_err(|e| ApiError::bad_request(format!("invalid registry request: {e}")))?;
            let answer = req.answer()?;
            cluster.upstream.set(&req.image, answer.clone());
            Ok(json!({ "image": req.image, "answer": answer }))
        }
        (Method::GET, ["registry"]) => Ok(json!({ "images": cluster.upstream.all() })),
        (Method::POST, ["registries"]) => {
            let req: RegistryRequest = serde_json::from_value(body_json(body)?)
                .map_err(|e| ApiError::bad_request(format!("invalid registries request: {e}")))?;
            if req.host.is_empty() || req.host.contains('/') {
                return Err(ApiError::bad_request(format!(
                    "{:?} is not a registry host (host or host:port)",
                    req.host
                )));
            }
            let mut added = cluster
                .registries_added
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            added.retain(|(h, _)| *h != req.host);
            added.push((req.host.clone(), req.insecure));
            Ok(json!({ "host": req.host, "insecure": req.insecure }))
        }
        (Method::GET, ["registries"]) => {
            let added = cluster
                .registries_added
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            Ok(json!({
                "registries": cluster.imports.registries,
                "insecureRegistries": cluster.imports.insecure_registries,
                "added": added.iter().map(|(h, i)| json!({"host": h, "insecure": i})).collect::<Vec<_>>(),
            }))
        }
        (Method::POST, ["imports"]) => {
            let req: ScheduleRequest = serde_json::from_value(body_json(body)?)
                .map_err(|e| ApiError::bad_request(format!("invalid imports request: {e}")))?;
            if req.scheduled_interval_seconds == 0 {
                return Err(ApiError::bad_request(
                    "scheduledIntervalSeconds: at least 1".to_string(),
                ));
            }
            let interval = std::time::Duration::from_secs(req.scheduled_interval_seconds);
            cluster.schedule.send_replace(interval);
            Ok(imports_state(cluster))
        }
        (Method::GET, ["imports"]) => Ok(imports_state(cluster)),
        (Method::PUT, ["images", digest, "metadata"]) => {
            let metadata = body_json(body)?;
            Ok(cluster.set_image_metadata(digest, metadata)?)
        }
        (Method::POST, ["compact"]) => {
            Ok(json!({ "compactedTo": cluster.store.compact().to_string() }))
        }
        (Method::POST, ["drop-watches"]) => {
            cluster.store.drop_watches();
            Ok(json!({}))
        }
        (Method::POST, ["faults"]) => {
            let f: Fault = serde_json::from_value(body_json(body)?)
                .map_err(|e| ApiError::bad_request(format!("invalid fault: {e}")))?;
            state.control.inject(f);
            Ok(json!({}))
        }
        (Method::DELETE, ["faults"]) => {
            state.control.clear_faults();
            Ok(json!({}))
        }
        (Method::GET, ["requests"]) => {
            let mutating = query.flag("mutating");
            let items: Vec<RequestRecord> = state
                .control
                .requests()
                .into_iter()
                .filter(|r| !mutating || r.is_mutating())
                .collect();
            Ok(json!({ "items": items }))
        }
        (Method::DELETE, ["requests"]) => {
            state.control.clear_requests();
            Ok(json!({}))
        }
        _ => Err(ApiError::new(
            404,
            "NotFound",
            format!("no control endpoint {method} {PREFIX}{rest}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(verb: &str, resource: &str) -> RequestRecord {
        let mut r = RequestRecord::new(&Method::GET, "/apis/x", "", "t", &HeaderMap::new());
        r.verb = verb.into();
        r.resource = resource.into();
        r
    }

    #[test]
    fn a_fault_affects_exactly_count_matching_requests() {
        let c = Control::default();
        c.inject(Fault {
            verb: Some("patch".into()),
            count: 2,
            status: Some(500),
            ..Default::default()
        });
        assert!(c.take_fault(&record("get", "imagestreams")).is_none());
        assert!(c.take_fault(&record("patch", "imagestreams")).is_some());
        assert!(c.take_fault(&record("patch", "customruns")).is_some());
        assert!(c.take_fault(&record("patch", "imagestreams")).is_none());
    }

    #[test]
    fn tokens_name_users() {
        let mut h = HeaderMap::new();
        assert_eq!(user_of(&h), "system:anonymous");
        h.insert(header::AUTHORIZATION, "Bearer user:source".parse().unwrap());
        assert_eq!(user_of(&h), "source");
        h.insert(header::AUTHORIZATION, "Bearer abc".parse().unwrap());
        assert_eq!(user_of(&h), "admin");
    }
}
