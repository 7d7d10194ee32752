//! The receiver's endpoints, plain HTTP (a Route or Ingress terminates TLS for senders outside
//! the cluster): `POST /v1/distribution` takes a Distribution registry's notifications,
//! `POST /v1/harbor` Harbor's webhooks (either payload format). A sender not configured has no
//! endpoint (404). Each answer is quick: the notification is authenticated, parsed and queued,
//! never imported while the registry waits.
//!
//! | answer | when |
//! |---|---|
//! | 202 | authenticated and parsed; its pushes are queued (a notification naming none too) |
//! | 401 | no or a wrong `Authorization: Bearer` secret |
//! | 400 | not a notification of the sender's format |
//! | 413 | a body over [`MAX_BODY`] |
//! | 503 | the queue is full: the registry sends it again |

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use tracing::{debug, warn};

use super::auth::Secret;
use super::metrics::{Metrics, outcome};
use super::nudge::Queue;
use super::wire;

/// The largest notification body taken (registries send small batches).
pub const MAX_BODY: usize = 1 << 20;

/// The Distribution registry sender's name, in metrics, logs and its path.
pub const DISTRIBUTION: &str = "distribution";
/// Harbor's.
pub const HARBOR: &str = "harbor";
/// Every sender the receiver knows.
pub const SENDERS: [&str; 2] = [DISTRIBUTION, HARBOR];

/// What the handlers share.
pub struct Context {
    /// The configured senders (of [`SENDERS`]) and their secrets; only they have an endpoint.
    pub senders: Vec<(&'static str, Secret)>,
    /// Where accepted pushes go.
    pub queue: Queue,
    /// Counts.
    pub metrics: Metrics,
}

/// The routes: `POST /v1/<sender>` for each configured sender.
pub fn router(ctx: Arc<Context>) -> Router {
    let mut router = Router::new();
    for (sender, _) in &ctx.senders {
        let sender: &'static str = sender;
        let handler = move |State(ctx): State<Arc<Context>>, headers: HeaderMap, body: Bytes| async move {
            notified(&ctx, sender, &headers, &body)
        };
        router = router.route(&format!("/v1/{sender}"), post(handler));
    }
    router
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(ctx)
}

fn notified(
    ctx: &Context,
    sender: &'static str,
    headers: &HeaderMap,
    body: &[u8],
) -> (StatusCode, String) {
    let started = Instant::now();
    let (code, what, said) = take(ctx, sender, headers, body);
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
    if !secret.is_some_and(|s| s.admits(authorization)) {
        warn!(sender, "a notification without the sender's secret refused");
        let why = "the sender's secret is required (Authorization: Bearer)\n".to_string();
        return (StatusCode::UNAUTHORIZED, outcome::UNAUTHORIZED, why);
    }
    let parsed = match sender {
        HARBOR => {
            let ce_type = headers.get("ce-type").and_then(|v| v.to_str().ok());
            wire::harbor(body, ce_type)
        }
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
