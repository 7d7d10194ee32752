//! Delivery of one CloudEvent to an HTTP sink with Knative's semantics: retries with the
//! delivery spec's backoff, `Retry-After`, then a dead-letter sink that gets the event with
//! Knative's `knativeerror*` extensions. Every attempt sends the same event, so the same id.
//!
//! The semantics are knative/eventing's (`pkg/kncloudevents`): what is retried from
//! `retries.go` `SelectiveRetry`, the backoff from `RetryConfigFromDeliverySpec`,
//! `Retry-After` from `generateBackoffFn`, the dead-letter extensions from `event_dispatcher.go`
//! `dispatchExecutionInfoTransformers` and `attributes/knative_error.go`, `backoffDelay` as
//! `rickb777/date/period` parses it. Unlike Knative, `retry: None` retries forever (a change is
//! never dropped because the sink was down), `Retry-After` is always honoured, and every wait
//! is capped by `max_backoff`. A 2xx body is ignored: a reply event (an EventListener's 202
//! CloudEvent) is never routed anywhere.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, NaiveDateTime, Utc};
use cloudevents::event::{ExtensionValue, SpecVersion};
use cloudevents::message::{
    BinaryDeserializer, BinarySerializer, MessageAttributeValue, StructuredDeserializer,
    StructuredSerializer,
};
use cloudevents::{AttributesReader, Event};
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::watch;

/// Extension naming the sink that failed (Knative's `KnativeErrorDestExtensionKey`).
pub const KNATIVE_ERROR_DEST: &str = "knativeerrordest";
/// Extension carrying the last status code (an integer; `500` for a transport error).
pub const KNATIVE_ERROR_CODE: &str = "knativeerrorcode";
/// Extension carrying the base64 of the last response body, at most 1024 characters.
pub const KNATIVE_ERROR_DATA: &str = "knativeerrordata";
/// Knative's `KnativeErrorDataExtensionMaxLength`, in base64 characters.
pub const KNATIVE_ERROR_DATA_MAX: usize = 1024;
/// Bytes of a failed response's body kept: exactly what 1024 base64 characters encode, so the
/// base64 of the kept bytes equals Knative's truncated base64 of the whole body.
pub const ERROR_BODY_LIMIT: usize = KNATIVE_ERROR_DATA_MAX / 4 * 3;
/// A cap on the waits: five minutes, used when the caller has no better one.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A 2xx body up to this size is read so the connection is reused; a larger one is dropped.
const DRAIN_LIMIT: usize = 64 * 1024;

/// How the event travels over HTTP (CloudEvents HTTP binding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ContentMode {
    /// Attributes in `ce-` headers, the data as the body (what Knative and Tekton expect).
    #[default]
    Binary,
    /// The whole event as `application/cloudevents+json`.
    Structured,
}

/// Knative's delivery spec `backoffPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BackoffPolicy {
    /// `backoffDelay * n` before the n-th retry.
    Linear,
    /// `backoffDelay * 2^n` before the n-th retry.
    #[default]
    Exponential,
}

/// Knative's delivery spec, with a cap on the waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliverySpec {
    /// Retries after the first attempt (`retry: 2` gives at most 3 attempts). None: retry
    /// forever, with waits capped by `max_backoff`.
    pub retry: Option<u32>,
    /// `backoffPolicy`.
    pub backoff_policy: BackoffPolicy,
    /// `backoffDelay` (see [`parse_iso8601_duration`]).
    pub backoff_delay: Duration,
    /// No wait, backoff or `Retry-After`, is longer than this.
    pub max_backoff: Duration,
    /// `deadLetterSink`: where an event goes when the sink refused it for good.
    pub dead_letter_sink: Option<Url>,
}

impl DeliverySpec {
    /// The backoff before retry number `retry` (1 for the first), capped by `max_backoff`:
    /// linear `backoffDelay * retry`, exponential `backoffDelay * 2^retry`. Knative's formulas
    /// (`RetryConfigFromDeliverySpec`; "backoffDelay*<numberOfRetries>" in `DeliverySpec`),
    /// numbered as its table test numbers them: `PT0.5S` exponential waits 1 s, 2 s, 4 s...
    /// (Its in-memory dispatcher passes go-retryablehttp's 0-based index instead, so a first
    /// linear retry waits nothing; that is not copied.)
    pub fn delay(&self, retry: u32) -> Duration {
        let factor = match self.backoff_policy {
            BackoffPolicy::Linear => Some(retry),
            BackoffPolicy::Exponential => 2u32.checked_pow(retry),
        };
        factor
            .and_then(|factor| self.backoff_delay.checked_mul(factor))
            .map_or(self.max_backoff, |delay| delay.min(self.max_backoff))
    }

    /// The wait before retry number `retry` after `err`: the backoff, or the sink's
    /// `Retry-After` on a 429 or 503 when that is longer (Knative's `generateBackoffFn`), never
    /// more than `max_backoff`.
    fn wait_before(&self, retry: u32, err: &SendError) -> Duration {
        let asked = match err {
            SendError::Status {
                status: 429 | 503,
                retry_after: Some(after),
                ..
            } => *after,
            _ => Duration::ZERO,
        };
        self.delay(retry).max(asked).min(self.max_backoff)
    }
}

/// Whether Knative retries a failure (`SelectiveRetry`): a transport error (no status),
/// 404 (a pod becoming ready), 408, 409, 429 and every status from 500 up. Not 1xx, 2xx, 3xx
/// or other 4xx: a 400 will not get better by sending it again.
pub fn is_retryable(status: Option<u16>) -> bool {
    match status {
        None => true,
        Some(status) => status >= 500 || matches!(status, 404 | 408 | 409 | 429),
    }
}

/// Parses an ISO-8601 duration as Knative's `backoffDelay` (`PT0.2S`, `PT1M`, `P1D`, `P1W`,
/// `P1DT12H`, `+PT1S`, `P0`), with a message that says what is wrong.
///
/// As `rickb777/date/period`, which Knative uses: `nY nM nW nD`, then `T` and `nH nM nS`; one
/// fraction with `.` or `,`; a year is 365.2425 days, a month a twelfth of that, a day 24 h.
/// Stricter: designators in that order, the fraction on the last one, something after `T`, no
/// negative durations. More precise: 9 fraction digits are kept (Knative keeps 2).
pub fn parse_iso8601_duration(s: &str) -> Result<Duration, String> {
    // Designators in order and their seconds; the first four come before 'T'.
    const DESIGNATORS: [char; 7] = ['Y', 'M', 'W', 'D', 'H', 'M', 'S'];
    const SECONDS: [u128; 7] = [31_556_952, 2_629_746, 604_800, 86_400, 3_600, 60, 1];
    let fail = |why: String| Err(format!("invalid ISO-8601 duration {s:?}: {why}"));
    if s.starts_with('-') {
        return fail("a negative duration cannot be a delay".into());
    }
    let Some(body) = s.strip_prefix('+').unwrap_or(s).strip_prefix('P') else {
        return fail("it must start with 'P', as in PT0.2S, PT1M or P1D".into());
    };
    let (date, time) = match body.split_once('T') {
        _ if body == "0" => return Ok(Duration::ZERO),
        None if body.is_empty() => return fail("there is nothing after 'P'".into()),
        Some((_, "")) => return fail("'T' must be followed by hours, minutes or seconds".into()),
        Some((date, time)) => (date, time),
        None => (body, ""),
    };
    let (mut total, mut fraction_seen) = (0u128, false);
    for (mut rest, mut next, end, in_time) in [(date, 0, 4, false), (time, 4, 7, true)] {
        while !rest.is_empty() {
            if fraction_seen {
                return fail("only the last component may have a fraction".into());
            }
            let number_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == ','))
                .unwrap_or(rest.len());
            let (number, tail) = rest.split_at(number_len);
            let Some(designator) = tail.chars().next() else {
                return fail(format!("{number:?} has no designator after it"));
            };
            rest = &tail[designator.len_utf8()..];
            let Some(index) = (next..end).find(|&i| DESIGNATORS[i] == designator) else {
                return fail(match designator {
                    'T' => "'T' appears twice".into(),
                    'H' | 'S' if !in_time => {
                        format!(
                            "{designator:?} needs a 'T' before it, as in PT{number}{designator}"
                        )
                    }
                    'Y' | 'W' | 'D' if in_time => format!("{designator:?} cannot come after 'T'"),
                    'Y' | 'M' | 'W' | 'D' | 'H' | 'S' => format!(
                        "{designator:?} is repeated or out of order (the order is PnYnMnWnDTnHnMnS)"
                    ),
                    _ => format!("unexpected {designator:?}"),
                });
            };
            next = index + 1;
            let (whole, fraction) = match number.split_once(['.', ',']) {
                Some((whole, fraction)) => (whole, fraction),
                None => (number, "0"),
            };
            let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            if number.is_empty() {
                return fail(format!("expected a number before {designator:?}"));
            } else if !digits(whole) || !digits(fraction) || fraction.len() > 9 {
                return fail(format!(
                    "{number:?} is not a number (digits, and maybe '.' or ',' and 1 to 9 digits)"
                ));
            }
            fraction_seen = number.len() > whole.len();
            let unit = SECONDS[index] * 1_000_000_000;
            let part =
                fraction.parse::<u128>().unwrap_or(0) * unit / 10u128.pow(fraction.len() as u32);
            let nanos = whole
                .parse::<u128>()
                .ok()
                .and_then(|w| w.checked_mul(unit)?.checked_add(part));
            total = match nanos.and_then(|nanos| total.checked_add(nanos)) {
                Some(total) if total / 1_000_000_000 <= u128::from(u64::MAX) => total,
                _ => return fail("it is too large".into()),
            };
        }
    }
    Ok(Duration::new(
        (total / 1_000_000_000) as u64,
        (total % 1_000_000_000) as u32,
    ))
}

/// `Retry-After` as a wait from `now`: delay-seconds or an HTTP-date (IMF-fixdate, RFC 850 or
/// asctime, as Go's `http.ParseTime` reads them); a date in the past is no wait; anything else
/// is None.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    // IMF-fixdate, then the obsolete RFC 850 and asctime forms.
    let at = DateTime::parse_from_rfc2822(value)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"]
                .iter()
                .find_map(|format| NaiveDateTime::parse_from_str(value, format).ok())
                .map(|t| t.and_utc())
        })?;
    Some((at - now).to_std().unwrap_or(Duration::ZERO))
}

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

/// One attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The event cannot be written as an HTTP request (e.g. a header value reqwest refuses).
    /// Never retried: the next attempt would fail the same way.
    #[error("the event cannot be encoded as an HTTP request: {0}")]
    Encode(String),
    /// No HTTP response: connection refused or reset, TLS failure, timeout.
    #[error("{0}")]
    Transport(String),
    /// The sink answered with a status other than 2xx.
    #[error("the sink answered {status}{}", body_excerpt(.body))]
    Status {
        /// The status code.
        status: u16,
        /// The sink's `Retry-After`, if it sent one that parses.
        retry_after: Option<Duration>,
        /// The first [`ERROR_BODY_LIMIT`] bytes of the body.
        body: Vec<u8>,
    },
}

fn body_excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}

impl SendError {
    /// The status code, None when there was no response.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            Self::Encode(_) | Self::Transport(_) => None,
        }
    }

    /// Whether another attempt may succeed ([`is_retryable`]; never for [`SendError::Encode`]).
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Encode(_)) && is_retryable(self.status())
    }
}

/// The HTTP client that sends events. Cheap to clone.
#[derive(Clone, Debug)]
pub struct SinkClient {
    http: reqwest::Client,
}

impl SinkClient {
    /// `timeout` is `K_SINK_TIMEOUT`, for a whole attempt (None: none, as Knative's default
    /// -1). `ca_pem` is `K_CA_CERTS`, a PEM bundle added to the built-in trust roots for an
    /// https sink, as Knative adds it to the system pool. Redirects are not followed: a 3xx is
    /// a failure that is not retried, as in Knative.
    pub fn new(timeout: Option<Duration>, ca_pem: Option<&str>) -> Result<Self, DeliverError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("imagegate/", env!("CARGO_PKG_VERSION")));
        if let Some(timeout) = timeout {
            builder = builder.timeout(timeout);
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
        Ok(Self { http })
    }

    /// One attempt: POSTs the encoded event to `sink`. Ok with the status on a 2xx (whose body
    /// is ignored); otherwise the status, `Retry-After` and the start of the body, or why there
    /// was no response.
    pub async fn post(&self, sink: &Url, event: &Encoded) -> Result<u16, SendError> {
        let mut request = reqwest::Request::new(reqwest::Method::POST, sink.clone());
        *request.headers_mut() = event.headers.clone();
        *request.body_mut() = Some(event.body.clone().into());
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
        let body = read_at_most(&mut response, ERROR_BODY_LIMIT).await;
        Err(SendError::Status {
            status,
            retry_after,
            body,
        })
    }
}

/// An event as it goes on the wire: its headers and body, written once by the CloudEvents SDK's
/// binary or structured serialization (the SDK walks the event and names the headers; this only
/// collects what it writes), so that every attempt sends the same bytes without encoding the
/// event again.
#[derive(Clone, Debug)]
pub struct Encoded {
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Encoded {
    /// `event` in `mode`: binary, each attribute and extension a header named as the SDK's
    /// HTTP binding names it (`ce-<name>`; `datacontenttype` is `Content-Type`) and the data
    /// the body; structured, the event as `application/cloudevents+json`.
    pub fn new(event: &Event, mode: ContentMode) -> Result<Encoded, SendError> {
        let wire = Wire::default();
        match mode {
            ContentMode::Binary => event.clone().deserialize_binary(wire),
            ContentMode::Structured => event.clone().deserialize_structured(wire),
        }
        .map_err(|e| SendError::Encode(e.to_string()))
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// What the SDK's serialization writes into an [`Encoded`].
#[derive(Default)]
struct Wire {
    headers: HeaderMap,
}

impl Wire {
    /// The header of `attribute`, named by the SDK's HTTP binding rule (`ce-<name>`;
    /// `datacontenttype` is `Content-Type`).
    fn put(mut self, attribute: &str, value: String) -> cloudevents::message::Result<Self> {
        let name = HeaderName::try_from(cloudevents::binding::http::header_prefix(attribute))
            .map_err(other_error)?;
        let value = HeaderValue::try_from(value).map_err(other_error)?;
        self.headers.insert(name, value);
        Ok(self)
    }
}

fn other_error(e: impl std::error::Error + Send + Sync + 'static) -> cloudevents::message::Error {
    cloudevents::message::Error::Other {
        source: Box::new(e),
    }
}

impl BinarySerializer<Encoded> for Wire {
    fn set_spec_version(self, version: SpecVersion) -> cloudevents::message::Result<Self> {
        self.put("specversion", version.to_string())
    }

    fn set_attribute(
        self,
        name: &str,
        value: MessageAttributeValue,
    ) -> cloudevents::message::Result<Self> {
        self.put(name, value.to_string())
    }

    fn set_extension(
        self,
        name: &str,
        value: MessageAttributeValue,
    ) -> cloudevents::message::Result<Self> {
        self.put(name, value.to_string())
    }

    fn end_with_data(self, bytes: Vec<u8>) -> cloudevents::message::Result<Encoded> {
        Ok(Encoded {
            headers: self.headers,
            body: bytes.into(),
        })
    }

    fn end(self) -> cloudevents::message::Result<Encoded> {
        Ok(Encoded {
            headers: self.headers,
            body: bytes::Bytes::new(),
        })
    }
}

impl StructuredSerializer<Encoded> for Wire {
    fn set_structured_event(mut self, bytes: Vec<u8>) -> cloudevents::message::Result<Encoded> {
        self.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/cloudevents+json"),
        );
        Ok(Encoded {
            headers: self.headers,
            body: bytes.into(),
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

/// What became of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// The sink accepted it after `attempts` attempts.
    Sink {
        /// Attempts made, the successful one included.
        attempts: u32,
    },
    /// The sink refused it for good and the dead-letter sink accepted it.
    DeadLettered {
        /// Attempts made to the sink (not counting those to the dead-letter sink).
        attempts: u32,
        /// The sink's last status, None if the last attempt got no response.
        code: Option<u16>,
    },
    /// The sink refused it for good (retries exhausted or not retryable) and there is no
    /// dead-letter sink, or that refused it too. Never silent: the caller logs and counts it.
    Failed {
        /// Attempts made to the sink.
        attempts: u32,
        /// What went wrong, for the log.
        error: String,
    },
}

/// The caller asked to stop: nothing more was sent and the event is not delivered (an
/// attempt in flight was abandoned; it may have arrived, and the next start sends it again
/// with the same id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("delivery stopped by shutdown")]
pub struct Stopped;

/// Delivers `event` to `sink`: retries as `spec` says, honouring `Retry-After` on 429/503
/// (capped by `max_backoff`), and when the sink refused it for good, sends it to the
/// dead-letter sink (with the same retries) carrying [`knative_error_extensions`]. Every
/// attempt sends the same event with the same id. `stop` turning true aborts waits and
/// attempts in flight and returns [`Stopped`].
pub async fn deliver(
    client: &SinkClient,
    sink: &Url,
    event: &Event,
    mode: ContentMode,
    spec: &DeliverySpec,
    stop: &watch::Receiver<bool>,
) -> Result<Delivered, Stopped> {
    let mut stop = stop.clone();
    let (attempts, result) = with_retries(client, sink, event, mode, spec, &mut stop).await?;
    let err = match result {
        Ok(_) => return Ok(Delivered::Sink { attempts }),
        Err(err) => err,
    };
    let Some(dead_letter_sink) = &spec.dead_letter_sink else {
        return Ok(Delivered::Failed {
            attempts,
            error: format!("sink {sink}: {err}"),
        });
    };
    let mut dead = event.clone();
    for (name, value) in knative_error_extensions(sink, &err) {
        dead.set_extension(name, value);
    }
    let (_, dead_result) =
        with_retries(client, dead_letter_sink, &dead, mode, spec, &mut stop).await?;
    Ok(match dead_result {
        Ok(_) => Delivered::DeadLettered {
            attempts,
            code: err.status(),
        },
        Err(dead_err) => Delivered::Failed {
            attempts,
            error: format!("sink {sink}: {err}; dead-letter sink {dead_letter_sink}: {dead_err}"),
        },
    })
}

/// Attempts until success, a failure that is not retried, or the retries are spent; returns
/// the number of attempts and the last result.
async fn with_retries(
    client: &SinkClient,
    sink: &Url,
    event: &Event,
    mode: ContentMode,
    spec: &DeliverySpec,
    stop: &mut watch::Receiver<bool>,
) -> Result<(u32, Result<u16, SendError>), Stopped> {
    // Encoded once: every attempt sends the same bytes. An event the SDK cannot encode is
    // refused for good after one attempt, as a send that fails to encode is.
    let encoded = match Encoded::new(event, mode) {
        Ok(encoded) => encoded,
        Err(err) => return Ok((1, Err(err))),
    };
    let mut attempts: u32 = 0;
    loop {
        if *stop.borrow() {
            return Err(Stopped);
        }
        attempts = attempts.saturating_add(1);
        let result = tokio::select! {
            biased;
            () = stopped(stop) => return Err(Stopped),
            result = client.post(sink, &encoded) => result,
        };
        let err = match result {
            Ok(status) => return Ok((attempts, Ok(status))),
            Err(err) => err,
        };
        // `attempts` failed so far, so the next attempt is retry number `attempts`.
        if !err.is_retryable() || spec.retry.is_some_and(|retries| attempts > retries) {
            return Ok((attempts, Err(err)));
        }
        let wait = spec.wait_before(attempts, &err);
        // An operator should see a sink that refuses without a log line per attempt: the
        // first failure and every tenth one are warnings, the rest debug.
        if attempts == 1 || attempts.is_multiple_of(10) {
            tracing::warn!(
                sink = %sink,
                event_id = event.id(),
                attempt = attempts,
                error = %err,
                wait_ms = wait.as_millis() as u64,
                "delivery attempt failed; retrying"
            );
        } else {
            tracing::debug!(
                sink = %sink,
                event_id = event.id(),
                attempt = attempts,
                error = %err,
                wait_ms = wait.as_millis() as u64,
                "delivery attempt failed; retrying"
            );
        }
        tokio::select! {
            biased;
            () = stopped(stop) => return Err(Stopped),
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Resolves when `stop` is true; never if its sender is gone without saying so.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The extensions Knative's dispatcher puts on an event it sends to a dead-letter sink
/// (`dispatchExecutionInfoTransformers`, `KnativeErrorTransformers`):
/// - `knativeerrordest`: the sink's URL, a string;
/// - `knativeerrorcode`: the last status, an integer (a `ce-` header in binary mode, a JSON
///   number in structured mode); `500` when there was no response, as Knative records a
///   transport error; `-1` (Knative's `NoResponse`) when no request could be written;
/// - `knativeerrordata`: the response body in standard base64 with padding, cut to its first
///   1024 characters; for a transport error the body Knative records, `dispatch error: <error>`;
///   empty when there was no body.
pub fn knative_error_extensions(
    sink: &Url,
    err: &SendError,
) -> [(&'static str, ExtensionValue); 3] {
    let (code, body): (i64, Vec<u8>) = match err {
        SendError::Status { status, body, .. } => (i64::from(*status), body.clone()),
        SendError::Transport(message) => (500, format!("dispatch error: {message}").into_bytes()),
        SendError::Encode(_) => (-1, Vec::new()),
    };
    let mut data = BASE64.encode(&body[..body.len().min(ERROR_BODY_LIMIT)]);
    data.truncate(KNATIVE_ERROR_DATA_MAX);
    [
        (
            KNATIVE_ERROR_DEST,
            ExtensionValue::String(sink.as_str().to_owned()),
        ),
        (KNATIVE_ERROR_CODE, ExtensionValue::Integer(code)),
        (KNATIVE_ERROR_DATA, ExtensionValue::String(data)),
    ]
}

#[cfg(test)]
mod tests;
