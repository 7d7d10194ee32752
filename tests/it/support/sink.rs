//! A real CloudEvents HTTP receiver for tests, built on the CloudEvents SDK's HTTP binding:
//! it records every request it parses (attempts included), and can be told to answer the next
//! requests with an error status.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use cloudevents::AttributesReader;

/// One request the sink received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The parsed event.
    pub event: cloudevents::Event,
    /// The request's content type (binary mode: the data's; structured: cloudevents+json).
    pub content_type: String,
    /// The status the sink answered.
    pub answered: u16,
    /// The request's `Host` header: the host the sender addressed (through a proxy, the
    /// cluster-local name it resolved, e.g. `display.ds.svc.cluster.local`).
    pub host: String,
    /// The request's `Authorization` header, if any.
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Inner {
    received: Vec<Received>,
    /// Statuses to answer next, in order; 202 when empty.
    script: Vec<u16>,
    /// Answer every request with this status (after the script).
    always: Option<u16>,
    /// Answer 401, as a Knative Broker with `authentication-oidc` on does, unless the request
    /// carries a bearer token (of the emulator's TokenRequest) for this audience.
    audience: Option<String>,
}

/// A running sink.
#[derive(Clone)]
pub struct Sink {
    /// Its URL.
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let host = headers
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let event = match cloudevents::binding::http::to_event(&headers, body.to_vec()) {
        Ok(e) => e,
        Err(_) => return StatusCode::BAD_REQUEST,
    };
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let answered = {
        let mut i = inner.lock().unwrap();
        let token_ok = |want: &str| {
            let claims = authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("Bearer "))
                .and_then(imagegate_emulator::token_claims);
            claims.is_some_and(|c| {
                c["aud"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == want))
                    && c["exp"]
                        .as_i64()
                        .is_some_and(|e| e > chrono::Utc::now().timestamp())
            })
        };
        let answered = match i.audience.clone() {
            Some(want) if !token_ok(&want) => 401,
            _ if i.script.is_empty() => i.always.unwrap_or(202),
            _ => i.script.remove(0),
        };
        i.received.push(Received {
            event,
            content_type,
            answered,
            host,
            authorization: authorization.clone(),
        });
        answered
    };
    if answered == HANG {
        // Holds the connection open and never answers, as a listener that accepted the
        // request and hung does.
        std::future::pending::<()>().await;
    }
    StatusCode::from_u16(answered).unwrap_or(StatusCode::ACCEPTED)
}

/// In [`Sink::fail_next`]'s statuses: take the request and never answer it (recorded as
/// answered 0).
pub const HANG: u16 = 0;

impl Sink {
    /// Starts a sink on 127.0.0.1:0.
    pub async fn start() -> Sink {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = Router::new()
            .route("/", post(receive))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Sink { url, inner }
    }

    /// Answers the next requests with these statuses, then 202 again ([`HANG`]: none, ever).
    pub fn fail_next(&self, statuses: &[u16]) {
        self.inner
            .lock()
            .unwrap()
            .script
            .extend_from_slice(statuses);
    }

    /// Answers every request with `status` (None: back to 202).
    pub fn always(&self, status: Option<u16>) {
        self.inner.lock().unwrap().always = status;
    }

    /// Answers 401 to a request without a token for `audience` (None: takes any).
    pub fn require_audience(&self, audience: Option<&str>) {
        self.inner.lock().unwrap().audience = audience.map(str::to_string);
    }

    /// Every request received.
    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().unwrap().received.clone()
    }

    /// The events accepted (2xx), in arrival order.
    pub fn accepted(&self) -> Vec<cloudevents::Event> {
        self.received()
            .into_iter()
            .filter(|r| (200..300).contains(&r.answered))
            .map(|r| r.event)
            .collect()
    }

    /// Waits until `n` events were accepted and returns them.
    pub async fn wait_accepted(&self, n: usize) -> Vec<cloudevents::Event> {
        self.wait_accepted_within(n, Duration::from_secs(30)).await
    }

    /// [`Sink::wait_accepted`], for at most `within`.
    pub async fn wait_accepted_within(
        &self,
        n: usize,
        within: Duration,
    ) -> Vec<cloudevents::Event> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.accepted();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "only {} of {n} events arrived: {:?}",
                got.len(),
                got.iter()
                    .map(|e| (e.ty().to_string(), e.subject().map(str::to_string)))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
