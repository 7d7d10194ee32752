//! The interceptor's endpoint: Triggers POSTs an InterceptorRequest, over TLS, to `/`; the
//! answer is an InterceptorResponse (HTTP 200 whether it passes or not, as Triggers expects).
//! One request reads the stream and the ImagePromotions of its namespace from the API, then
//! [`super::judge`] decides.
//!
//! Served with tokio-rustls and hyper-util's connection builder because `axum::serve` speaks
//! plain TCP only; the router is axum's.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use kube::Api;
use kube::api::ListParams;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::api::ImageStream;
use crate::controller::crd::ImagePromotion;
use crate::runkey::RunKey;

use super::judge::{self, Refused, reason};
use super::metrics::Metrics;
use super::wire::{self, InterceptorRequest, InterceptorResponse, Status, code};

/// What a request needs.
pub(crate) struct Context {
    /// Reads streams and ImagePromotions.
    pub(crate) client: kube::Client,
    /// Names the runs.
    pub(crate) key: RunKey,
    /// Counts.
    pub(crate) metrics: Metrics,
}

/// The interceptor's routes.
pub(crate) fn router(ctx: Arc<Context>) -> Router {
    Router::new().route("/", post(intercept)).with_state(ctx)
}

/// How long a client has to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// Serves `app` over TLS (`tls`) on `listener` until `shutdown` resolves.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
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
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => return debug!(%peer, "TLS handshake timed out"),
            };
            let service = TowerToHyperService::new(app);
            if let Err(e) = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "connection ended");
            }
        });
    }
}

async fn intercept(
    State(ctx): State<Arc<Context>>,
    body: Bytes,
) -> axum::Json<InterceptorResponse> {
    let started = Instant::now();
    let answer = match serde_json::from_slice::<InterceptorRequest>(&body) {
        Ok(request) => decide(&ctx, &request).await,
        Err(e) => Err(Refused::new(
            reason::MALFORMED,
            code::INVALID_ARGUMENT,
            format!("not an InterceptorRequest: {e}"),
        )),
    };
    ctx.metrics
        .duration
        .observe(started.elapsed().as_secs_f64());
    axum::Json(match answer {
        Ok(passed) => {
            ctx.metrics.passed().inc();
            InterceptorResponse {
                extensions: passed,
                continue_: true,
                status: Status::default(),
            }
        }
        Err(refused) => {
            ctx.metrics.refused(refused.reason).inc();
            InterceptorResponse {
                extensions: Default::default(),
                continue_: false,
                status: Status {
                    code: refused.code,
                    message: refused.message,
                },
            }
        }
    })
}

/// Passes or refuses one request, logging which.
async fn decide(
    ctx: &Context,
    request: &InterceptorRequest,
) -> Result<serde_json::Map<String, serde_json::Value>, Refused> {
    let trigger = request.context.as_ref().map(|c| c.trigger_id.as_str());
    let event_id = wire::event_id(request);
    let result = judged(ctx, request).await;
    match &result {
        Ok(p) => info!(
            trigger = trigger.unwrap_or(""),
            event_id = event_id.as_deref().unwrap_or(""),
            run_id = %p.run_id,
            "passed the stream's current candidate"
        ),
        Err(r) => warn!(
            trigger = trigger.unwrap_or(""),
            event_id = event_id.as_deref().unwrap_or(""),
            reason = r.reason,
            "refused an event: {}",
            r.message
        ),
    }
    result.map(|p| p.extensions)
}

async fn judged(ctx: &Context, request: &InterceptorRequest) -> Result<judge::Passed, Refused> {
    let claimed = wire::claimed(request)
        .map_err(|m| Refused::new(reason::MALFORMED, code::INVALID_ARGUMENT, m))?;
    let trigger_ns = request.context.as_ref().and_then(|c| c.namespace());
    judge::namespace(&claimed, trigger_ns)?;
    let ns = claimed.namespace.as_str();
    let unavailable = |what: String, e: kube::Error| {
        Refused::new(
            reason::API,
            code::UNAVAILABLE,
            format!(
                "cannot read {what}: {e} (the candidate is re-driven by the controller's ledger \
                 once its grace period passes)"
            ),
        )
    };
    let streams: Api<ImageStream> = Api::namespaced(ctx.client.clone(), ns);
    let stream = streams
        .get_opt(&claimed.imagestream)
        .await
        .map_err(|e| unavailable(format!("ImageStream {ns}/{}", claimed.imagestream), e))?;
    let policies: Api<ImagePromotion> = Api::namespaced(ctx.client.clone(), ns);
    let policies = policies
        .list(&ListParams::default())
        .await
        .map_err(|e| unavailable(format!("the ImagePromotions of namespace {ns}"), e))?
        .items;
    judge::candidate(&claimed, stream.as_ref(), &policies, &ctx.key)
}
