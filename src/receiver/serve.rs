//! The receiver's endpoints, plain HTTP (a Route or Ingress terminates TLS for senders outside
//! the cluster): `POST /v1/distribution` takes a Distribution registry's notifications,
//! `POST /v1/harbor` Harbor's webhooks (either payload format), `POST /v1/github` GitHub's
//! package events (GitHub Container Registry), signed, `POST /v1/quay/<secret>` Quay's
//! repository notifications and `POST /v1/dockerhub/<secret>` Docker Hub's webhooks, which can
//! carry their secret only in the URL. A sender not configured has no endpoint (404). Each answer is quick: the notification is authenticated, parsed and queued,
//! never imported while the registry waits.
//!
//! | answer | when |
//! |---|---|
//! | 202 | authenticated and parsed; its pushes are queued (a notification naming none too) |
//! | 401 | no or a wrong `Authorization: Bearer` secret (GitHub: no or a wrong `X-Hub-Signature-256`; Quay, Docker Hub: no or a wrong secret in the path) |
//! | 400 | not a notification of the sender's format |
//! | 413 | a body over [`MAX_BODY`] |
//! | 408 | a body not sent within [`READ_TIMEOUT`] (headers not sent within it: the connection is closed) |
//! | 503 | the queue is full: the registry sends it again |

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use super::auth::Secret;
use super::metrics::{Metrics, outcome};
use super::nudge::Queue;
use super::wire;

/// The largest notification body taken (registries send small batches).
pub(crate) const MAX_BODY: usize = 1 << 20;
/// How long a client has to send a request's headers, and then its body: the port is open to
/// anyone, so a client that trickles its request must not hold a connection for long.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The Distribution registry sender's name, in metrics, logs and its path.
pub(crate) const DISTRIBUTION: &str = "distribution";
/// Harbor's.
pub(crate) const HARBOR: &str = "harbor";
/// GitHub's (GitHub Container Registry's package events).
pub(crate) const GITHUB: &str = "github";
/// Quay's (its repository notifications).
pub(crate) const QUAY: &str = "quay";
/// Docker Hub's.
pub(crate) const DOCKERHUB: &str = "dockerhub";
/// Every sender the receiver knows.
pub const SENDERS: [&str; 5] = [DISTRIBUTION, HARBOR, GITHUB, QUAY, DOCKERHUB];

/// Whether `sender`'s secret is the last segment of its URL: its webhooks can be given a URL
/// and nothing else (no header, no signature). A URL is kept by proxies and access logs where a
/// header is not: docs/imports.md says so.
pub(crate) fn secret_in_path(sender: &str) -> bool {
    matches!(sender, QUAY | DOCKERHUB)
}

/// What the handlers share.
pub(crate) struct Context {
    /// The configured senders (of [`SENDERS`]) and their secrets; only they have an endpoint.
    pub(crate) senders: Vec<(&'static str, Secret)>,
    /// Where accepted pushes go.
    pub(crate) queue: Queue,
    /// Counts.
    pub(crate) metrics: Metrics,
}

/// The routes: `POST /v1/<sender>` for each configured sender.
pub(crate) fn router(ctx: Arc<Context>) -> Router {
    let mut router = Router::new();
    for (sender, _) in &ctx.senders {
        let sender: &'static str = sender;
        let handler = move |State(ctx): State<Arc<Context>>, request: Request| async move {
            let (parts, body) = request.into_parts();
            let read = tokio::time::timeout(READ_TIMEOUT, axum::body::to_bytes(body, MAX_BODY));
            let token = (parts.uri.path().strip_prefix("/v1/"))
                .and_then(|rest| rest.strip_prefix(sender)?.strip_prefix('/'))
                .map(str::to_string);
            match read.await {
                Ok(Ok(body)) => notified(&ctx, sender, &parts.headers, token.as_deref(), &body),
                Ok(Err(_)) => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("a notification is at most {MAX_BODY} bytes\n"),
                ),
                Err(_) => (
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive in time\n".to_string(),
                ),
            }
        };
        router = router.route(&format!("/v1/{sender}"), post(handler));
        if secret_in_path(sender) {
            router = router.route(&format!("/v1/{sender}/{{secret}}"), post(handler));
        }
    }
    router.with_state(ctx)
}

/// Serves `app` on `listener` (plain HTTP/1.1 only: registries send that, and an HTTP/2
/// connection has no header-read timeout to cut off a client that opens one and says nothing)
/// until `shutdown` resolves, each connection's request headers due within [`READ_TIMEOUT`].
pub(crate) async fn serve(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(TokioExecutor::new()).http1_only();
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT);
            if let Err(e) = builder.serve_connection(TokioIo::new(tcp), service).await {
                debug!(%peer, error = %e, "connection ended");
            }
        });
    }
}

fn notified(
    ctx: &Context,
    sender: &'static str,
    headers: &HeaderMap,
    token: Option<&str>,
    body: &[u8],
) -> (StatusCode, String) {
    let started = Instant::now();
    let (code, what, said) = take(ctx, sender, headers, token, body);
    ctx.metrics.notification(sender, what);
    ctx.metrics
        .duration
        .observe(started.elapsed().as_secs_f64());
    (code, said)
}

fn take(
    ctx: &Context,
    sender: &'static str,
    headers: &HeaderMap,
    token: Option<&str>,
    body: &[u8],
) -> (StatusCode, &'static str, String) {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let secret = ctx
        .senders
        .iter()
        .find(|(s, _)| *s == sender)
        .map(|(_, s)| s);
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let proven = match sender {
        // GitHub signs the body with the webhook's secret instead of sending it.
        GITHUB => secret.is_some_and(|s| s.signed(body, header("x-hub-signature-256"))),
        _ if secret_in_path(sender) => secret.is_some_and(|s| s.is(token)),
        _ => secret.is_some_and(|s| s.admits(authorization)),
    };
    if !proven {
        // Anyone may reach the port: counted, and logged at debug so that a flood of guesses
        // cannot flood the log.
        debug!(sender, "a notification without the sender's secret refused");
        let why = match sender {
            GITHUB => "a body signed with the webhook's secret is required (X-Hub-Signature-256)\n",
            _ if secret_in_path(sender) => {
                "the sender's secret is required (the URL's last segment)\n"
            }
            _ => "the sender's secret is required (Authorization: Bearer)\n",
        };
        return (
            StatusCode::UNAUTHORIZED,
            outcome::UNAUTHORIZED,
            why.to_string(),
        );
    }
    let parsed = match sender {
        HARBOR => wire::harbor(body, header("ce-type")),
        GITHUB => wire::github(body, header("x-github-event")),
        QUAY => wire::quay(body),
        DOCKERHUB => wire::dockerhub(body),
        _ => wire::distribution(body),
    };
    let parsed = match parsed {
        Ok(p) => p,
        Err(why) => {
            debug!(sender, %why, "a malformed notification refused");
            return (
                StatusCode::BAD_REQUEST,
                outcome::MALFORMED,
                format!("{why}\n"),
            );
        }
    };
    let n = parsed.pushes.len();
    if n > 0 && !ctx.queue.offer(parsed.pushes) {
        let why = "busy: send it again later\n".to_string();
        return (StatusCode::SERVICE_UNAVAILABLE, outcome::BUSY, why);
    }
    ctx.metrics.pushes(sender, n);
    let said = format!(
        "{n} tag(s) pushed, {} event(s) moved no tag\n",
        parsed.ignored
    );
    (StatusCode::ACCEPTED, outcome::ACCEPTED, said)
}
