//! The HTTP face of the emulator: routes Kubernetes REST paths to the verbs, serves discovery
//! and OpenAPI, applies injected faults and records every request.
//!
//! Paths are parsed by hand rather than with a route table because the Kubernetes URL space
//! is data-driven: which `/apis/{group}/{version}/{plural}` exist depends on the CRDs created.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_stream::wrappers::ReceiverStream;

use super::control::{self, Control, RequestRecord};
use super::openapi;
use super::patch::PatchType;
use super::registry;
use super::status::ApiError;
use super::verbs::{Cluster, FieldValidation, ListOptions, Target, WriteOptions};
use super::watch::{self, WatchOptions};

/// Shared state of the HTTP server.
#[derive(Clone)]
pub struct AppState {
    /// The emulated cluster.
    pub cluster: Arc<Cluster>,
    /// Faults and the request log.
    pub control: Arc<Control>,
}

/// The router: everything goes through one handler that parses the Kubernetes path.
pub fn router(state: AppState) -> Router {
    Router::new().fallback(handle).with_state(state)
}

/// The largest request body accepted (kube-apiserver's limit is 3 MiB for most requests).
const MAX_BODY: usize = 3 * 1024 * 1024;

async fn handle(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    user: Option<Extension<control::AuthenticatedUser>>,
    body: Body,
) -> Response {
    let path = uri.path().to_string();
    let query = Query::parse(uri.query().unwrap_or(""));
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(&ApiError::new(
                413,
                "RequestEntityTooLarge",
                "the request body is too large",
            ));
        }
    };
    if let Some(rest) = path.strip_prefix(control::PREFIX) {
        return control::handle(&state, &method, rest, &query, &body).await;
    }
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut record = RequestRecord::new(
        &method,
        &path,
        uri.query().unwrap_or(""),
        &user_agent,
        &headers,
    );
    if let Some(Extension(control::AuthenticatedUser(name))) = user {
        record.user = name;
    }
    let route = parse_path(&state.cluster, &path, &query);
    if let Ok(Route::Resource { target, watch }) = &route {
        record.set_target(
            target,
            verb_of(&method, target, *watch || query.flag("watch")),
        );
    }
    if let Some(fault) = state.control.take_fault(&record) {
        if let Some(delay) = fault.delay_ms {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        if let Some(code) = fault.status {
            let err = ApiError::new(
                code,
                fault_reason(code),
                fault
                    .message
                    .clone()
                    .unwrap_or_else(|| "injected by the emulator".into()),
            );
            record.code = code;
            state.control.log(record);
            return error_response(&err);
        }
    }
    let response = match route {
        Err(e) => error_response(&e),
        Ok(Route::Doc(v)) => json_response(StatusCode::OK, &v),
        Ok(Route::Text(t)) => (StatusCode::OK, t).into_response(),
        Ok(Route::Resource { target, watch }) => {
            serve_resource(&state, &method, *target, watch, &query, &headers, &body).await
        }
    };
    record.code = response.status().as_u16();
    state.control.log(record);
    response
}

fn fault_reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// The Kubernetes verb of a request, as RBAC and audit logs name it.
pub fn verb_of(method: &Method, t: &Target, watch: bool) -> &'static str {
    match *method {
        Method::GET if watch => "watch",
        Method::GET if t.name.is_some() => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if t.name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

enum Route {
    Doc(Value),
    Text(&'static str),
    Resource { target: Box<Target>, watch: bool },
}

/// The query string, parsed leniently (kube sends `?&limit=500`).
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses `a=b&c=d`.
    pub fn parse(q: &str) -> Self {
        Query(
            form_urlencoded::parse(q.as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }
    /// The value of a parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// A boolean parameter (`true`, `1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true") | Some("1"))
    }
}

fn parse_path(cluster: &Cluster, path: &str, query: &Query) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let not_found = || {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let types = cluster.store.types();
    match segs.as_slice() {
        ["version"] => return Ok(Route::Doc(version())),
        ["healthz"] | ["livez"] | ["readyz"] => return Ok(Route::Text("ok")),
        ["api"] => {
            return Ok(Route::Doc(json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
            })));
        }
        ["apis"] => return Ok(Route::Doc(registry::group_list(&types))),
        ["openapi", "v3"] => return Ok(Route::Doc(openapi::index(&types))),
        ["openapi", "v3", rest @ ..] => {
            return openapi::document(&types, &rest.join("/"))
                .map(Route::Doc)
                .ok_or_else(not_found);
        }
        ["apis", group] => {
            return registry::group(&types, group)
                .map(Route::Doc)
                .ok_or_else(not_found);
        }
        _ => {}
    }
    let (group, version, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found()),
    };
    if !types
        .iter()
        .any(|t| t.group == group && t.version == version)
    {
        return Err(not_found());
    }
    if rest.is_empty() {
        return Ok(Route::Doc(registry::resource_list(&types, group, version)));
    }
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let find = |plural: &str| {
        types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    };
    // `namespaces/{ns}/{plural}/...` addresses a namespaced resource; anything else under
    // `namespaces` is the namespace object itself.
    let namespaced = match rest {
        ["namespaces", _, plural, ..] => find(plural).filter(|t| t.namespaced).is_some(),
        _ => false,
    };
    let (namespace, rest) = if namespaced {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Err(not_found()),
    };
    let ty = find(plural).ok_or_else(not_found)?;
    if ty.namespaced && namespace.is_none() && name.is_some() {
        return Err(not_found());
    }
    if let Some(s) = &sub
        && !(s == "status" && ty.status_subresource)
        && !(s == "token" && ty.group.is_empty() && ty.plural == "serviceaccounts")
    {
        return Err(not_found());
    }
    let _ = query;
    Ok(Route::Resource {
        target: Box::new(Target {
            ty,
            namespace,
            name,
            subresource: sub,
        }),
        watch,
    })
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": format!("v1.33.0-imagegate-emulator-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

async fn serve_resource(
    state: &AppState,
    method: &Method,
    target: Target,
    watch_path: bool,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let cluster = &state.cluster;
    let wopts = WriteOptions {
        field_manager: query.get("fieldManager").map(str::to_string),
        default_manager: default_manager(headers),
        force: query.flag("force"),
        dry_run: query.get("dryRun") == Some("All"),
        applied: false,
        field_validation: match FieldValidation::parse(query.get("fieldValidation").unwrap_or("")) {
            Some(v) => v,
            None => {
                return error_response(&ApiError::bad_request(format!(
                    "fieldValidation: Unsupported value: {:?}: supported values: \"Ignore\", \"Warn\", \"Strict\"",
                    query.get("fieldValidation").unwrap_or("")
                )));
            }
        },
    };
    let is_watch = watch_path || query.flag("watch");
    let result: Result<(StatusCode, Value), ApiError> = match *method {
        Method::GET if is_watch => {
            let opts = WatchOptions {
                resource_version: query.get("resourceVersion").map(str::to_string),
                allow_bookmarks: query.flag("allowWatchBookmarks"),
                timeout_seconds: query.get("timeoutSeconds").and_then(|s| s.parse().ok()),
                send_initial_events: query.flag("sendInitialEvents"),
                label_selector: query.get("labelSelector").map(str::to_string),
                field_selector: query.get("fieldSelector").map(str::to_string),
            };
            return match watch::start(cluster.clone(), target, opts) {
                Ok(rx) => {
                    let stream = futures::StreamExt::map(ReceiverStream::new(rx), ok_chunk);
                    Response::builder()
                        .status(StatusCode::OK)
                        .header(header::CONTENT_TYPE, "application/json")
                        .header(header::CACHE_CONTROL, "no-cache, private")
                        .body(Body::from_stream(stream))
                        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
                }
                Err(e) => error_response(&e),
            };
        }
        Method::GET if target.name.is_some() => cluster.get(&target).map(|v| (StatusCode::OK, v)),
        Method::GET => {
            let opts = ListOptions {
                label_selector: query.get("labelSelector").map(str::to_string),
                field_selector: query.get("fieldSelector").map(str::to_string),
                limit: query.get("limit").and_then(|s| s.parse().ok()).unwrap_or(0),
                continue_token: query
                    .get("continue")
                    .filter(|c| !c.is_empty())
                    .map(str::to_string),
            };
            return match cluster.list(&target, &opts) {
                Ok(page) => bytes_response(StatusCode::OK, page.to_json()),
                Err(e) => error_response(&e),
            };
        }
        Method::POST if target.subresource.as_deref() == Some("token") => body_media_type(headers)
            .and_then(|()| parse_json(body))
            .and_then(|b| cluster.token_request(&target, &b))
            .map(|v| (StatusCode::CREATED, v)),
        // An import may read a registry: resolved here, before the write that records it.
        Method::POST
            if target.name.is_none()
                && target.ty.behavior == crate::registry::Behavior::ImageStreamImport =>
        {
            match body_media_type(headers).and_then(|()| parse_json(body)) {
                Ok(b) => {
                    let answers = match crate::openshift::requested_images(&b) {
                        Ok(images) => {
                            let now = crate::verbs::now();
                            Some(crate::imports::resolve_all(cluster, &images, &now).await)
                        }
                        Err(_) => None,
                    };
                    cluster
                        .stream_import(&target, b, answers)
                        .map(|v| (StatusCode::CREATED, v))
                }
                Err(e) => Err(e),
            }
        }
        Method::POST if target.name.is_none() => body_media_type(headers)
            .and_then(|()| parse_json(body))
            .and_then(|b| cluster.create(&target, b, &wopts))
            .map(|v| (StatusCode::CREATED, v)),
        Method::PUT if target.name.is_some() => body_media_type(headers)
            .and_then(|()| parse_json(body))
            .and_then(|b| cluster.update(&target, b, &wopts))
            .map(|v| (StatusCode::OK, v)),
        Method::PATCH if target.name.is_some() => {
            let ct = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            match PatchType::from_content_type(ct) {
                // Not a patch type at all: refused by content negotiation for a built-in kind,
                // by the patch handler's list of the types it takes for a custom resource.
                None if target.ty.behavior == crate::registry::Behavior::Custom => {
                    Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
                    ))
                }
                None => Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    "415: Unsupported Media Type",
                )),
                Some(kind) => cluster
                    .patch(&target, kind, body, &wopts)
                    .map(|(code, v)| (StatusCode::from_u16(code).unwrap_or(StatusCode::OK), v)),
            }
        }
        Method::DELETE if target.name.is_some() => {
            let b = if body.is_empty() {
                None
            } else {
                serde_json::from_slice(body).ok()
            };
            cluster.delete(&target, b).map(|v| (StatusCode::OK, v))
        }
        Method::DELETE => delete_collection(cluster, &target, query).map(|v| (StatusCode::OK, v)),
        _ => Err(ApiError::method_not_allowed(
            method.as_str(),
            &target.ty.group,
            &target.ty.plural,
        )),
    };
    match result {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => error_response(&e),
    }
}

/// The body of a create or update must be JSON or YAML: the emulator has no protobuf (or CBOR)
/// codec, and says so with the real server's 415 rather than failing to parse the bytes.
fn body_media_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "" | "application/json" | "application/yaml" | "*/*" => Ok(()),
        _ => Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct:?})"
            ),
        )),
    }
}

fn delete_collection(cluster: &Cluster, target: &Target, query: &Query) -> Result<Value, ApiError> {
    if !target.ty.allows("deletecollection") {
        return Err(ApiError::method_not_allowed(
            "deletecollection",
            &target.ty.group,
            &target.ty.plural,
        ));
    }
    let opts = ListOptions {
        label_selector: query.get("labelSelector").map(str::to_string),
        field_selector: query.get("fieldSelector").map(str::to_string),
        ..Default::default()
    };
    let mut list = cluster.list(target, &opts)?.to_value();
    let mut deleted = Vec::new();
    for item in list["items"].as_array().cloned().unwrap_or_default() {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let t = Target {
            name: Some(name),
            ..target.clone()
        };
        if cluster.delete(&t, None).is_ok() {
            deleted.push(item);
        }
    }
    list["items"] = Value::Array(deleted);
    Ok(list)
}

/// The field manager kube-apiserver derives from the User-Agent (`kubectl-client-side-apply`,
/// `kube-rs`): the part before the first `/`.
fn default_manager(headers: &HeaderMap) -> String {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    ua.split('/')
        .next()
        .unwrap_or("unknown")
        .chars()
        .take(128)
        .collect()
}

fn parse_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    serde_json::from_slice(body)
        .or_else(|_| serde_norway::from_slice(body))
        .map_err(|e| {
            ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
        })
}

/// A JSON response.
pub fn json_response(code: StatusCode, v: &Value) -> Response {
    bytes_response(code, serde_json::to_vec(v).unwrap_or_default())
}

/// A response of JSON already encoded.
fn bytes_response(code: StatusCode, body: Vec<u8>) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// A `Status` response for an error.
pub fn error_response(e: &ApiError) -> Response {
    json_response(
        StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.to_status(),
    )
}

fn ok_chunk(b: Bytes) -> Result<Bytes, std::convert::Infallible> {
    Ok(b)
}
