//! The HTTP client that posts encoded events to a sink: `K_SINK_TIMEOUT`, `K_CA_CERTS`, no
//! redirects; one attempt's outcome, with the status, `Retry-After` and the start of the body
//! of a refusal.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Url;

use super::error::{ERROR_BODY_LIMIT, SendError};
use super::wire::Encoded;

/// A 2xx body up to this size is read so the connection is reused; a larger one is dropped.
const DRAIN_LIMIT: usize = 64 * 1024;
/// Idle connections kept per sink host, as Knative's senders keep (`MaxIdleConnsPerHost`):
/// HTTP/1.1 opens one connection per request in flight, and the multi-tenant adapter's sources
/// deliver at once (1,000 sources, one change each, opened ~1,000 connections to one sink
/// host); kept idle without a bound, each allocated some 30 KiB of buffers for the pool's 90 s.
pub(crate) const MAX_IDLE_PER_HOST: usize = 100;

/// The HTTP client for the sink (and the dead-letter sink) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// `K_CA_CERTS` is not a PEM bundle with at least one certificate.
    #[error("K_CA_CERTS: {0}")]
    CaCerts(String),
    /// reqwest refused the configuration.
    #[error("cannot build the sink's HTTP client: {}", error_chain(.0))]
    Client(#[source] reqwest::Error),
}

type SharedKey = (
    Option<Duration>,
    Option<String>,
    Option<crate::source::deliver::guard::Guard>,
);
type SharedClients = std::sync::Mutex<HashMap<SharedKey, std::sync::Weak<reqwest::Client>>>;

/// The clients [`SinkClient::shared`] handed out, by configuration, while some flow holds them.
fn shared_clients() -> &'static SharedClients {
    static CLIENTS: std::sync::OnceLock<SharedClients> = std::sync::OnceLock::new();
    CLIENTS.get_or_init(Default::default)
}

/// The configurations [`SinkClient::shared`] keeps a client of (after its last call's pruning).
#[cfg(test)]
pub(crate) fn shared_configurations() -> Vec<SharedKey> {
    let clients = shared_clients().lock().unwrap_or_else(|p| p.into_inner());
    clients.keys().cloned().collect()
}

/// How long an attempt waits for the sink's answer when nothing says otherwise.
pub const DEFAULT_SINK_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an attempt waits for the connection to the sink (within the attempt's timeout).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client that sends events. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SinkClient {
    // An Arc of its own (reqwest's client is one inside) so that the shared registry can hold a
    // `Weak` and notice when the last flow using a configuration has gone.
    http: std::sync::Arc<reqwest::Client>,
    /// The OIDC tokens sent to this sink, when it has an audience.
    oidc: Option<std::sync::Arc<super::oidc::Oidc>>,
    /// Whether a refusal's body is kept (for the log and `knativeerrordata`); not for a
    /// tenant's raw-URI sink, whose answers would otherwise come back to the tenant through the
    /// dead-letter sink (a read-back of any address the adapter reaches).
    error_bodies: bool,
}

impl SinkClient {
    /// `timeout` is `K_SINK_TIMEOUT`, for a whole attempt (None: [`DEFAULT_SINK_TIMEOUT`]; unlike
    /// Knative's default -1, never none: a sink that takes the connection and never answers
    /// would hold its delivery, and the change's stream, forever). Connecting is bounded by
    /// [`CONNECT_TIMEOUT`] within it. `ca_pem` is `K_CA_CERTS`, a PEM bundle added to the built-in trust roots for an
    /// https sink, as Knative adds it to the system pool. Redirects are not followed: a 3xx is
    /// a failure that is not retried, as in Knative.
    pub fn new(timeout: Option<Duration>, ca_pem: Option<&str>) -> Result<Self, DeliverError> {
        Self::build(timeout, ca_pem, None)
    }

    /// [`SinkClient::new`], with every name it connects to resolved through `guard`: an address
    /// a tenant's sink may not reach (loopback, link-local) is never connected to, whatever name
    /// leads there, unless the operator allows the name.
    fn build(
        timeout: Option<Duration>,
        ca_pem: Option<&str>,
        guard: Option<&crate::source::deliver::guard::Guard>,
    ) -> Result<Self, DeliverError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(MAX_IDLE_PER_HOST)
            .user_agent(concat!("imagegate/", env!("CARGO_PKG_VERSION")));
        builder = builder
            .timeout(timeout.unwrap_or(DEFAULT_SINK_TIMEOUT))
            .connect_timeout(CONNECT_TIMEOUT);
        if let Some(guard) = guard {
            builder = builder.dns_resolver(std::sync::Arc::new(GuardedResolver(guard.clone())));
        }
        if let Some(pem) = ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .map_err(|e| DeliverError::CaCerts(e.to_string()))?;
            if certs.is_empty() {
                return Err(DeliverError::CaCerts("no PEM certificate in it".into()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        // A PEM block that is no certificate only fails here.
        let http = builder.build().map_err(|e| match ca_pem {
            Some(_) => DeliverError::CaCerts(error_chain(&e)),
            None => DeliverError::Client(e),
        })?;
        Ok(Self {
            http: std::sync::Arc::new(http),
            oidc: None,
            error_bodies: true,
        })
    }

    /// A client for `timeout` and `ca_pem` shared with every other flow of the process that
    /// asks for the same: one connection pool and one TLS configuration, not one per source.
    /// The multi-tenant adapter runs a flow per source, and 1,000 clients of their own held
    /// 1,000 idle connections to sinks that are mostly the same few (a Broker's ingress).
    pub fn shared(timeout: Option<Duration>, ca_pem: Option<&str>) -> Result<Self, DeliverError> {
        Self::shared_guarded(timeout, ca_pem, None)
    }

    /// [`SinkClient::shared`], resolving names through `guard` when given (a tenant's sinks).
    pub fn shared_guarded(
        timeout: Option<Duration>,
        ca_pem: Option<&str>,
        guard: Option<&crate::source::deliver::guard::Guard>,
    ) -> Result<Self, DeliverError> {
        let key = (timeout, ca_pem.map(str::to_string), guard.cloned());
        let mut clients = shared_clients().lock().unwrap_or_else(|p| p.into_inner());
        // A configuration no flow uses any more (a source deleted, its timeout or CA bundle
        // changed) is dropped here, so the registry holds only what is in use.
        clients.retain(|_, client| client.strong_count() > 0);
        if let Some(http) = clients.get(&key).and_then(std::sync::Weak::upgrade) {
            return Ok(Self {
                http,
                oidc: None,
                error_bodies: true,
            });
        }
        let client = Self::build(timeout, ca_pem, guard)?;
        clients.insert(key, std::sync::Arc::downgrade(&client.http));
        Ok(client)
    }

    /// The same client, sending `oidc`'s token (`Authorization: Bearer`) with every attempt.
    pub fn with_oidc(&self, oidc: Option<std::sync::Arc<super::oidc::Oidc>>) -> Self {
        Self {
            http: self.http.clone(),
            oidc,
            error_bodies: self.error_bodies,
        }
    }

    /// Whether a refusal's body, and a transport error's words, may reach a dead letter.
    pub fn keeps_error_bodies(&self) -> bool {
        self.error_bodies
    }

    /// The same client, keeping (`true`) or dropping a refusal's body.
    pub fn with_error_bodies(mut self, keep: bool) -> Self {
        self.error_bodies = keep;
        self
    }

    /// Whether both send through one and the same client (connection pool, TLS configuration).
    #[cfg(test)]
    pub(crate) fn shares_client_with(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.http, &other.http)
    }

    /// One attempt: POSTs the encoded event to `sink`. Ok with the status on a 2xx (whose body
    /// is ignored); otherwise the status, `Retry-After` and the start of the body, or why there
    /// was no response.
    pub async fn post(&self, sink: &Url, event: Encoded) -> Result<u16, SendError> {
        let mut request = reqwest::Request::new(reqwest::Method::POST, sink.clone());
        *request.headers_mut() = event.headers;
        if let Some(oidc) = &self.oidc {
            // No token, no attempt: retried like a sink that did not answer.
            let token = oidc.token().await.map_err(SendError::Transport)?;
            let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| {
                    SendError::Transport(format!("the OIDC token is no header value: {e}"))
                })?;
            request
                .headers_mut()
                .insert(reqwest::header::AUTHORIZATION, value);
        }
        *request.body_mut() = Some(event.body.into());
        let mut response = self
            .http
            .execute(request)
            .await
            .map_err(|e| match e.is_builder() {
                true => SendError::Encode(error_chain(&e)),
                false => SendError::Transport(error_chain(&e)),
            })?;
        let status = response.status().as_u16();
        if response.status().is_success() {
            let _ = read_at_most(&mut response, DRAIN_LIMIT).await;
            return Ok(status);
        }
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| parse_retry_after(value, Utc::now()));
        let body = if self.error_bodies {
            read_at_most(&mut response, ERROR_BODY_LIMIT).await
        } else {
            Vec::new()
        };
        Err(SendError::Status {
            status,
            retry_after,
            body,
        })
    }
}

/// Resolves a tenant's sink names, keeping only the addresses [`address_allowed`] allows
/// (none left: the connection is refused, with why).
///
/// [`address_allowed`]: crate::source::deliver::guard::address_allowed
struct GuardedResolver(crate::source::deliver::guard::Guard);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if guard.allows(&host) {
                return Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs);
            }
            let kept: Vec<std::net::SocketAddr> = addrs
                .into_iter()
                .filter(|a| crate::source::deliver::guard::address_allowed(a.ip()))
                .collect();
            if kept.is_empty() {
                return Err(format!(
                    "{host} resolves only to loopback, link-local or unspecified addresses, \
                     where a tenant's sink may not point (--allow-sink-host allows a host)"
                )
                .into());
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The body's first `limit` bytes (fewer if reading fails; the error is the status's story).
async fn read_at_most(response: &mut reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())])
            }
            Ok(None) | Err(_) => break,
        }
    }
    body
}

/// reqwest's message and its causes ("error sending request ...: connection refused").
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `Retry-After` as a wait from `now`: delay-seconds or an HTTP-date (RFC 9110's IMF-fixdate,
/// RFC 850 or asctime form, in GMT, as `httpdate` reads them); a date in the past is no wait;
/// anything else (another zone, a missing weekday, a date before 1970) is None, so the backoff
/// applies.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = DateTime::<Utc>::from(httpdate::parse_http_date(value).ok()?);
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}
