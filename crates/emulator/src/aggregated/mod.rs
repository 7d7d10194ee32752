//! The image-API-only mode (`imagegate-emulator --serve-image-api-only`): the emulator as an
//! aggregated API server behind a real kube-apiserver, serving `image.openshift.io/v1` and
//! nothing else, the way openshift-apiserver serves it on OpenShift. kube-apiserver serves
//! everything else itself and proxies the image group here (an `APIService`), so clients talk
//! only to the real server.
//!
//! What an aggregated server must do, and where it is done:
//! - serve HTTPS, and ask the front proxy for its client certificate ([`tls`]);
//! - believe the identity headers (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-*`) only
//!   from a certificate of the request-header CA with an allowed name; anything else is
//!   anonymous, or 401 ([`authn`]);
//! - authorize every request by asking the API server (SubjectAccessReview), so the cluster's
//!   RBAC decides ([`authz`]);
//! - serve only its group: `/apis` lists `image.openshift.io` alone, `/openapi/v3` only its
//!   document, other groups and `/api` are 404.
//!
//! The control API (`/_emulator/v1/...`) stays open on this port: tests drive imports through
//! it directly, as they do in the default mode. It is not part of any real API server.

pub mod authn;
pub mod authz;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use self::authn::{RequestHeader, User};
use self::authz::{Attributes, Decision, Delegated};
use crate::control::{self, Control};
use crate::http::{AppState, Query, error_response, json_response, router};
use crate::openshift::Settings;
use crate::registry::{self, ResourceType};
use crate::status::ApiError;
use crate::verbs::{Cluster, Target};

/// The API group this mode serves.
pub const GROUP: &str = "image.openshift.io";

/// The flags of the image-API-only mode, named as kube-apiserver and every aggregated server
/// built on k8s.io/apiserver name them.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Serve only the OpenShift image API (`image.openshift.io/v1`) over HTTPS, as an
    /// aggregated API server behind kube-apiserver: identity from the front proxy's headers,
    /// authorization by SubjectAccessReview.
    #[arg(long, requires_all = ["tls_cert_file", "tls_private_key_file", "requestheader_client_ca_file", "authorization_kubeconfig"])]
    pub serve_image_api_only: bool,

    /// The port to serve HTTPS on (0 picks a free one).
    #[arg(long, default_value_t = 0, requires = "serve_image_api_only")]
    pub secure_port: u16,

    /// The address to serve HTTPS on.
    #[arg(long, default_value = "127.0.0.1", requires = "serve_image_api_only")]
    pub bind_address: IpAddr,

    /// The serving certificate (PEM; the chain, leaf first). Its names must include the
    /// `APIService`'s Service, `<service>.<namespace>.svc`.
    #[arg(long, requires = "serve_image_api_only")]
    pub tls_cert_file: Option<PathBuf>,

    /// The serving certificate's private key (PEM).
    #[arg(long, requires = "serve_image_api_only")]
    pub tls_private_key_file: Option<PathBuf>,

    /// The CA bundle (PEM) that signs the front proxy's client certificate (kube-apiserver's
    /// `--proxy-client-cert-file`).
    #[arg(long, requires = "serve_image_api_only")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// Common names the front proxy's certificate may have (empty: any the CA signed).
    #[arg(long, value_delimiter = ',', requires = "serve_image_api_only")]
    pub requestheader_allowed_names: Vec<String>,

    /// Headers that carry the user name, tried in order.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub requestheader_username_headers: Vec<String>,

    /// Headers that carry the groups.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub requestheader_group_headers: Vec<String>,

    /// Prefixes of the headers that carry extra attributes.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// A kubeconfig for the API server that reviews each request (SubjectAccessReview); its
    /// user needs the ClusterRole `system:auth-delegator`.
    #[arg(long, requires = "serve_image_api_only")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// Paths served to anyone, without authentication or authorization.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    pub authorization_always_allow_paths: Vec<String>,
}

/// Why the image-API-only mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A required flag is missing.
    #[error("--{0} is required with --serve-image-api-only")]
    Missing(&'static str),
    /// The certificates or the key.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The authorization kubeconfig.
    #[error("cannot use --authorization-kubeconfig {path}: {reason}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The port.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// A running image API server; [`ImageApi::shutdown`] stops it.
pub struct ImageApi {
    addr: SocketAddr,
    cluster: Arc<Cluster>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    imports: Option<tokio::task::JoinHandle<()>>,
}

impl ImageApi {
    /// The address it serves HTTPS on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The emulated image API, for seeding.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// Stops accepting, ends open connections (watches among them) and waits.
    pub async fn shutdown(self) {
        if let Some(imports) = &self.imports {
            imports.abort();
        }
        let _ = self.stop.send(true);
        self.cluster.store.drop_watches();
        let _ = self.task.await;
    }
}

/// What the guard needs for each request.
struct Guard {
    control: Arc<Control>,
    request_header: RequestHeader,
    authorizer: Delegated,
    always_allow: Vec<String>,
    cluster: Arc<Cluster>,
}

fn required<T: Clone>(v: &Option<T>, flag: &'static str) -> Result<T, StartError> {
    v.clone().ok_or(StartError::Missing(flag))
}

/// Starts the image API on `options`' address with a fresh emulated cluster, whose
/// ImageStreams report `internal_registry` as their registry host.
pub async fn start(
    options: &Options,
    internal_registry: String,
    window: crate::window::Window,
    imports: &crate::imports::Imports,
) -> Result<ImageApi, StartError> {
    let tls = tls::server_config(
        &required(&options.tls_cert_file, "tls-cert-file")?,
        &required(&options.tls_private_key_file, "tls-private-key-file")?,
        &required(
            &options.requestheader_client_ca_file,
            "requestheader-client-ca-file",
        )?,
    )?;
    let client = review_client(&required(
        &options.authorization_kubeconfig,
        "authorization-kubeconfig",
    )?)
    .await?;
    let addr = SocketAddr::new(options.bind_address, options.secure_port);
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Listen { addr, source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| StartError::Listen { addr, source })?;
    let settings = Settings { internal_registry };
    let mut cluster = Cluster::new(settings, window);
    cluster.imports = imports.clone();
    let cluster = Arc::new(cluster);
    cluster.store.start_window();
    let imports = crate::imports::spawn(cluster.clone(), imports);
    let control = Arc::new(Control::default());
    let guard = Arc::new(Guard {
        control: control.clone(),
        request_header: RequestHeader {
            allowed_names: options.requestheader_allowed_names.clone(),
            username_headers: options.requestheader_username_headers.clone(),
            group_headers: options.requestheader_group_headers.clone(),
            extra_headers_prefixes: options.requestheader_extra_headers_prefix.clone(),
        },
        authorizer: Delegated::new(client),
        always_allow: options.authorization_always_allow_paths.clone(),
        cluster: cluster.clone(),
    });
    let app = router(AppState {
        cluster: cluster.clone(),
        control,
    })
    .layer(middleware::from_fn_with_state(guard, guard_request));
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(tls::serve(listener, tls, app, stopped));
    Ok(ImageApi {
        addr,
        cluster,
        stop,
        task,
        imports,
    })
}

async fn review_client(path: &std::path::Path) -> Result<kube::Client, StartError> {
    let fail = |reason: String| StartError::Kubeconfig {
        path: path.display().to_string(),
        reason,
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| fail(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| fail(e.to_string()))
}

/// The image group's types among everything the emulated cluster knows.
fn image_types(cluster: &Cluster) -> Vec<ResourceType> {
    cluster
        .store
        .types()
        .iter()
        .filter(|t| t.group == GROUP)
        .cloned()
        .collect()
}

/// What the guard decided for a request.
enum Admission {
    /// Pass it on to the emulator as this user.
    Serve(User),
    /// Answer with this document of the image group alone.
    Document(serde_json::Value),
}

/// Authenticates, authorizes and confines every request to the image group, then hands it to
/// the emulator's router. A refused request is answered with the real server's `Status` and
/// recorded in the request log like any other.
async fn guard_request(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if path.starts_with(control::PREFIX) || guard.always_allow.contains(&path) {
        return next.run(req).await;
    }
    let head = Head {
        method: req.method().clone(),
        path: path.clone(),
        query: req.uri().query().unwrap_or("").to_string(),
        headers: req.headers().clone(),
        cert: req.extensions().get::<tls::PeerCertificate>().cloned(),
    };
    match admit(&guard, &head).await {
        Ok(Admission::Serve(user)) => {
            let mut req = req;
            req.extensions_mut()
                .insert(control::AuthenticatedUser(user.name));
            next.run(req).await
        }
        Ok(Admission::Document(doc)) => json_response(StatusCode::OK, &doc),
        Err((user, e)) => {
            let ua = head
                .headers
                .get(axum::http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let mut record =
                control::RequestRecord::new(&head.method, &path, &head.query, ua, &head.headers);
            record.user = user;
            record.code = e.code;
            guard.control.log(record);
            error_response(&e)
        }
    }
}

/// What the guard reads of a request (owned: the request's body stays behind).
struct Head {
    method: Method,
    path: String,
    query: String,
    headers: axum::http::HeaderMap,
    cert: Option<tls::PeerCertificate>,
}

/// The guard's decision; a refusal carries the user (as far as known) and the error.
async fn admit(guard: &Guard, head: &Head) -> Result<Admission, (String, ApiError)> {
    let path = head.path.as_str();
    let user = guard
        .request_header
        .authenticate(
            head.cert.as_ref().map(|c| c.0.as_ref().as_ref()),
            &head.headers,
        )
        .map_err(|e| {
            tracing::info!(path, error = %e, "unauthenticated request");
            (
                String::new(),
                ApiError::new(401, "Unauthorized", "Unauthorized"),
            )
        })?;
    let attrs = Attributes::of(&head.method, path, &Query::parse(&head.query));
    match guard.authorizer.authorize(&user, &attrs).await {
        Ok(Decision::Allow) => {}
        Ok(Decision::Deny(reason)) => {
            return Err((user.name.clone(), forbidden(&attrs, &user, &reason)));
        }
        Err(e) => {
            tracing::warn!(path, error = %e, "authorization failed");
            return Err((user.name, ApiError::internal(e.to_string())));
        }
    }
    if let Some(doc) = own_documents(&guard.cluster, &head.method, path) {
        return Ok(Admission::Document(doc));
    }
    // `/version` is answered as the emulator answers it; `/api`, `/openapi/v2` (the aggregator
    // skips a 404 there) and every other group are not served here.
    if !in_group(path) && path != "/version" {
        let e = ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
        return Err((user.name, e));
    }
    namespace_for_write(&guard.cluster, &head.method, &attrs)
        .map_err(|e| (user.name.clone(), e))?;
    Ok(Admission::Serve(user))
}

fn forbidden(attrs: &Attributes, user: &User, reason: &str) -> ApiError {
    let mut e = ApiError::new(
        403,
        "Forbidden",
        attrs.forbidden_message(&user.name, reason),
    );
    if let Attributes::Resource {
        group,
        resource,
        name,
        ..
    } = attrs
    {
        e = e.with_details(group, resource, name);
    }
    e
}

/// Paths of the image group itself: `/apis/image.openshift.io[/...]`.
fn in_group(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    p == format!("/apis/{GROUP}") || p.starts_with(&format!("/apis/{GROUP}/"))
}

/// The documents that must list the image group alone: the group list and the OpenAPI v3
/// index and document. None for every other path.
fn own_documents(cluster: &Cluster, method: &Method, path: &str) -> Option<serde_json::Value> {
    if method != Method::GET {
        return None;
    }
    let types = image_types(cluster);
    let doc = match path.trim_end_matches('/') {
        "/apis" => registry::group_list(&types),
        "/openapi/v3" => crate::openapi::index(&types),
        p => crate::openapi::document(&types, p.strip_prefix("/openapi/v3/")?)?,
    };
    Some(doc)
}

/// A write in a namespace the emulator has not seen (a create, or a server-side apply or PUT
/// that creates): the namespace is kube-apiserver's, not copied here, so it is made on first use.
fn namespace_for_write(
    cluster: &Cluster,
    method: &Method,
    attrs: &Attributes,
) -> Result<(), ApiError> {
    let Attributes::Resource { namespace, .. } = attrs else {
        return Ok(());
    };
    let writes = matches!(*method, Method::POST | Method::PUT | Method::PATCH);
    if !writes || namespace.is_empty() {
        return Ok(());
    }
    let Some(ty) = cluster.store.find_type("", "v1", "namespaces") else {
        return Ok(());
    };
    let target = Target {
        ty,
        namespace: None,
        name: Some(namespace.clone()),
        subresource: None,
    };
    if cluster.get(&target).is_ok() {
        return Ok(());
    }
    cluster
        .seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
        .map(|_| ())
}
