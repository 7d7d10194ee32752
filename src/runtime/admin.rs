//! The admin HTTP server both programs run beside their work: `GET /livez` (the process is
//! up), `GET /readyz` (it is doing its job, else 503 with the reason) and `GET /metrics` (the
//! prometheus-client registry in OpenMetrics text). Anything else is 404.
//!
//! [`serve`] takes the listener and a shutdown future, so tests run the real server on port 0.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The content type of the OpenMetrics text format.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The reason a fresh [`Health`] gives until the program declares itself ready.
const STARTING: &str = "starting";

/// Readiness, shared between the program (which sets it) and the admin server (which reports
/// it). A new `Health` is not ready, with the reason `starting`.
#[derive(Debug)]
pub struct Health {
    state: Mutex<Readiness>,
}

#[derive(Debug)]
struct Readiness {
    ready: bool,
    reason: String,
    /// Named conditions that fail, with why (each must pass for the program to be ready), and
    /// when the failure lapses unless it is set again (None: when it is cleared).
    failing: std::collections::BTreeMap<&'static str, (String, Option<Instant>)>,
}

impl Health {
    /// A shared, not yet ready `Health`.
    pub fn new() -> Arc<Health> {
        Arc::new(Health {
            state: Mutex::new(Readiness {
                ready: false,
                reason: STARTING.into(),
                failing: Default::default(),
            }),
        })
    }

    /// Marks the program ready or not ready (without a particular reason).
    pub fn set_ready(&self, ready: bool) {
        let mut state = self.lock();
        state.ready = ready;
        state.reason = if ready {
            String::new()
        } else {
            "not ready".into()
        };
    }

    /// Marks the program not ready; `/readyz` answers 503 with `reason` as the body.
    pub fn set_not_ready(&self, reason: impl Into<String>) {
        let mut state = self.lock();
        state.ready = false;
        state.reason = reason.into();
    }

    /// Sets a named condition that must also hold (`None`: it holds; `Some(why)`: it fails, and
    /// `/readyz` says why). The program is ready when it is marked ready and every one holds.
    pub fn set_condition(&self, name: &'static str, failing: Option<String>) {
        let mut state = self.lock();
        match failing {
            Some(why) => state.failing.insert(name, (why, None)),
            None => state.failing.remove(name),
        };
    }

    /// Sets a named condition that fails for `hold` from now, unless it is set again or
    /// cleared (with [`Health::set_condition`]) before then: for a failure that is known only
    /// while it keeps recurring, such as a watch the API server refuses on each retry.
    pub(crate) fn set_failing_for(&self, name: &'static str, why: String, hold: Duration) {
        let mut state = self.lock();
        state
            .failing
            .insert(name, (why, Some(Instant::now() + hold)));
    }

    /// Whether the program is ready.
    pub fn is_ready(&self) -> bool {
        let state = self.lock();
        state.ready && state.failing().next().is_none()
    }

    /// Why the program is not ready (`None` when it is).
    pub fn reason(&self) -> Option<String> {
        let state = self.lock();
        let mut why: Vec<&str> = Vec::new();
        if !state.ready {
            why.push(&state.reason);
        }
        why.extend(state.failing());
        (!why.is_empty()).then(|| why.join("; "))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Readiness> {
        // A panic elsewhere while holding the lock leaves a plain bool and string behind,
        // which are still meaningful.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Readiness {
    /// The reasons of the conditions that fail now.
    fn failing(&self) -> impl Iterator<Item = &str> {
        let now = Instant::now();
        self.failing
            .values()
            .filter(move |(_, until)| until.is_none_or(|t| t > now))
            .map(|(why, _)| why.as_str())
    }
}

#[derive(Clone)]
struct AdminState {
    health: Arc<Health>,
    registry: Arc<Registry>,
}

/// The admin routes over a program's health and metrics registry.
pub fn router(health: Arc<Health>, registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(AdminState { health, registry })
}

/// Serves `router` on `listener` until `shutdown` completes, then finishes the requests in
/// flight and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn livez() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    match state.health.reason() {
        None => (StatusCode::OK, "ok").into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason).into_response(),
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    use axum::body::Body;
    use axum::http::{Method, Request};
    use prometheus_client::metrics::counter::Counter;
    use tower::ServiceExt;

    fn registry_with_counter() -> Arc<Registry> {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        counter.inc_by(3);
        registry.register(
            "imagegate_source_events",
            "Events sent",
            counter, // the `_total` suffix is added by the encoder
        );
        Arc::new(registry)
    }

    async fn call(router: Router, method: Method, path: &str) -> (StatusCode, String, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let resp = router.oneshot(req).await.unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            content_type,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    #[test]
    fn new_health_is_not_ready_because_it_is_starting() {
        let health = Health::new();
        assert!(!health.is_ready());
        assert_eq!(health.reason().as_deref(), Some("starting"));
        health.set_ready(true);
        assert!(health.is_ready());
        assert_eq!(health.reason(), None);
        health.set_not_ready("watch lost");
        assert!(!health.is_ready());
        assert_eq!(health.reason().as_deref(), Some("watch lost"));
    }

    #[tokio::test]
    async fn livez_is_ok_even_when_not_ready() {
        let app = router(Health::new(), registry_with_counter());
        let (status, _, body) = call(app, Method::GET, "/livez").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    }

    #[tokio::test]
    async fn readyz_follows_health_and_shows_the_reason() {
        let health = Health::new();
        let app = router(health.clone(), registry_with_counter());

        let (status, _, body) = call(app.clone(), Method::GET, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "starting")
        );

        health.set_ready(true);
        let (status, _, body) = call(app.clone(), Method::GET, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));

        health.set_not_ready("lease lost");
        let (status, _, body) = call(app.clone(), Method::GET, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "lease lost")
        );
    }

    #[tokio::test]
    async fn a_failing_condition_makes_a_ready_program_unready_with_its_reason() {
        let health = Health::new();
        let app = router(health.clone(), registry_with_counter());
        health.set_ready(true);
        health.set_condition("checkpoint", Some("checkpoint writes are failing".into()));
        assert!(!health.is_ready());
        let (status, _, body) = call(app.clone(), Method::GET, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "checkpoint writes are failing"
            )
        );
        health.set_not_ready("listing");
        assert_eq!(
            health.reason().as_deref(),
            Some("listing; checkpoint writes are failing")
        );
        health.set_ready(true);
        health.set_condition("checkpoint", None);
        let (status, _, _) = call(app, Method::GET, "/readyz").await;
        assert_eq!(status, StatusCode::OK);
    }

    #[test]
    fn a_condition_failing_for_a_while_lapses_unless_set_again_or_cleared() {
        let health = Health::new();
        health.set_ready(true);
        let hold = std::time::Duration::from_millis(150);
        health.set_failing_for("watch", "the watch is refused".into(), hold);
        assert_eq!(health.reason().as_deref(), Some("the watch is refused"));
        std::thread::sleep(hold / 2);
        health.set_failing_for("watch", "refused again".into(), hold);
        std::thread::sleep(hold / 2);
        assert_eq!(
            health.reason().as_deref(),
            Some("refused again"),
            "set again"
        );
        std::thread::sleep(hold);
        assert!(health.is_ready(), "lapsed: {:?}", health.reason());
        health.set_failing_for("watch", "refused".into(), hold);
        health.set_condition("watch", None);
        assert!(health.is_ready(), "cleared");
    }

    #[tokio::test]
    async fn metrics_are_openmetrics_text() {
        let app = router(Health::new(), registry_with_counter());
        let (status, content_type, body) = call(app, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(
            body.contains("# TYPE imagegate_source_events counter\n"),
            "{body}"
        );
        assert!(body.contains("imagegate_source_events_total 3\n"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[tokio::test]
    async fn unknown_paths_are_not_found() {
        let app = router(Health::new(), registry_with_counter());
        for path in ["/", "/healthz", "/metrics/extra", "/livez/"] {
            let (status, _, _) = call(app.clone(), Method::GET, path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[tokio::test]
    async fn serve_answers_on_port_zero_and_stops_on_shutdown() {
        crate::runtime::tls::install_crypto_provider();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let app = router(Health::new(), registry_with_counter());
        let server = tokio::spawn(serve(listener, app, async {
            let _ = stopped.await;
        }));

        let resp = reqwest::get(format!("http://{addr}/livez")).await.unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        assert_eq!(resp.text().await.unwrap(), "ok");

        stop.send(()).unwrap();
        let result = tokio::time::timeout(std::time::Duration::from_secs(30), server)
            .await
            .expect("the server stops after shutdown")
            .unwrap();
        assert!(result.is_ok());
    }
}
