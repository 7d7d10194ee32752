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
//!
//! [`spec`] is the delivery spec, [`wire`] the encoding, [`client`] one attempt; this module
//! runs the attempts and the dead-letter sink; [`job`] is what the queue runs for each job (the
//! route of the moment, the rounds while the sink refuses, the counts). [`guard`] is which
//! addresses a tenant's sink may resolve to.

mod client;
mod error;
pub mod guard;
pub mod job;
pub mod oidc;
mod spec;
mod wire;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use backon::Retryable;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use cloudevents::event::ExtensionValue;
use cloudevents::{AttributesReader, Event};
use reqwest::Url;
use tokio_util::sync::CancellationToken;

pub use self::client::{DeliverError, SinkClient, parse_retry_after};
pub use self::error::{ERROR_BODY_LIMIT, KNATIVE_ERROR_DATA_MAX, SendError, is_retryable};
pub use self::spec::{
    BackoffPolicy, DEFAULT_MAX_BACKOFF, Delays, DeliverySpec, parse_iso8601_duration,
};
pub use self::wire::{ContentMode, Encoded};

/// Extension naming the sink that failed (Knative's `KnativeErrorDestExtensionKey`).
pub(crate) const KNATIVE_ERROR_DEST: &str = "knativeerrordest";
/// Extension carrying the last status code (an integer; `500` for a transport error).
pub(crate) const KNATIVE_ERROR_CODE: &str = "knativeerrorcode";
/// Extension carrying the base64 of the last response body, at most 1024 characters.
pub(crate) const KNATIVE_ERROR_DATA: &str = "knativeerrordata";

/// What became of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Delivered {
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
pub(crate) struct Stopped;

/// An event, built by a function that gives the same event on every call (a queued change
/// does: its id and time come from the change, never from the clock now). [`deliver`] builds
/// it once per attempt, so the event and its encoding are moved into the request, never
/// copied, and every attempt still sends the same event with the same id.
pub(crate) type MakeEvent<'a> = &'a (dyn Fn() -> Event + Sync);

/// Delivers the event `make` builds to `sink`: retries as `spec` says, honouring
/// `Retry-After` on 429/503 (capped by `max_backoff`), and when the sink refused it for good,
/// sends it to the dead-letter sink (with the same retries) carrying
/// [`knative_error_extensions`]. Every attempt sends the same event with the same id. `stop`
/// being cancelled aborts waits and attempts in flight and returns [`Stopped`].
pub(crate) async fn deliver(
    client: &SinkClient,
    sink: &Url,
    make: MakeEvent<'_>,
    mode: ContentMode,
    spec: &DeliverySpec,
    stop: &CancellationToken,
) -> Result<Delivered, Stopped> {
    let (attempts, result) = with_retries(client, sink, make, mode, spec, stop).await?;
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
    let dead = || {
        let mut dead = make();
        for (name, value) in knative_error_extensions(sink, &err, client.keeps_error_bodies()) {
            dead.set_extension(name, value);
        }
        dead
    };
    let (_, dead_result) = with_retries(client, dead_letter_sink, &dead, mode, spec, stop).await?;
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

/// The longest wait between two rounds of a held event's delivery.
pub(crate) const HOLD_MAX: Duration = Duration::from_secs(60);

/// How long a held event waits before its delivery round `round` (2, 3, ...): 1 s, doubling,
/// at most [`HOLD_MAX`]. A round is a whole [`deliver`], retries and dead-letter sink included.
pub(crate) fn hold_delay(round: u32) -> Duration {
    let doublings = round.saturating_sub(2).min(6);
    Duration::from_secs(1 << doublings).min(HOLD_MAX)
}

/// Attempts until success, a failure that is not retried, or the retries are spent; returns
/// the number of attempts and the last result.
async fn with_retries(
    client: &SinkClient,
    sink: &Url,
    make: MakeEvent<'_>,
    mode: ContentMode,
    spec: &DeliverySpec,
    stop: &CancellationToken,
) -> Result<(u32, Result<u16, SendError>), Stopped> {
    // An event the SDK cannot encode is refused for good after one attempt, as a send that
    // fails to encode is. The first attempt sends this encoding; a retry encodes again (the
    // same bytes: the same event).
    let event = make();
    let id = event.id().to_owned();
    let first = match Encoded::new(event, mode) {
        Ok(encoded) => std::sync::Mutex::new(Some(encoded)),
        Err(err) => return Ok((1, Err(err))),
    };
    if stop.is_cancelled() {
        return Err(Stopped);
    }
    // Counted where the attempts are made, read where they are logged (both closures borrow
    // it; an atomic keeps the future Send).
    let attempts = AtomicU32::new(0);
    let attempt = || {
        attempts.fetch_add(1, Ordering::Relaxed);
        let taken = first.lock().unwrap_or_else(|p| p.into_inner()).take();
        let encoded = taken.map_or_else(|| Encoded::new(make(), mode), Ok);
        async move { client.post(sink, encoded?).await }
    };
    let retrying = attempt
        .retry(spec.delays())
        .when(SendError::is_retryable)
        // The backoff, or a 429's or 503's `Retry-After` when longer (Knative's
        // `generateBackoffFn`), capped; None once the retries are spent.
        .adjust(|err, delay| delay.map(|delay| spec.wait_after(delay, err)))
        .notify(|err, wait| log_retry(sink, &id, attempts.load(Ordering::Relaxed), err, wait));
    let result = tokio::select! {
        biased;
        () = stop.cancelled() => return Err(Stopped),
        result = retrying => result,
    };
    Ok((attempts.load(Ordering::Relaxed), result))
}

/// An operator should see a sink that refuses without a log line per attempt: the first
/// failure and every tenth one are warnings, the rest debug.
fn log_retry(sink: &Url, event_id: &str, attempt: u32, err: &SendError, wait: Duration) {
    let wait_ms = wait.as_millis() as u64;
    if attempt == 1 || attempt.is_multiple_of(10) {
        tracing::warn!(sink = %sink, event_id, attempt, error = %err, wait_ms, "delivery attempt failed; retrying");
    } else {
        tracing::debug!(sink = %sink, event_id, attempt, error = %err, wait_ms, "delivery attempt failed; retrying");
    }
}

/// What a dead letter says of a transport error without detail ([`knative_error_extensions`]).
pub(crate) const UNREACHABLE: &str = "the sink could not be reached";

/// The extensions Knative's dispatcher puts on an event it sends to a dead-letter sink
/// (`dispatchExecutionInfoTransformers`, `KnativeErrorTransformers`):
/// - `knativeerrordest`: the sink's URL, a string;
/// - `knativeerrorcode`: the last status, an integer (a `ce-` header in binary mode, a JSON
///   number in structured mode); `500` when there was no response, as Knative records a
///   transport error; `-1` (Knative's `NoResponse`) when no request could be written;
/// - `knativeerrordata`: the response body in standard base64 with padding, cut to its first
///   1024 characters; for a transport error the body Knative records, `dispatch error: <error>`;
///   empty when there was no body.
///
/// Without `detail` (a tenant's raw-URI sink, which may be any address the adapter reaches) a
/// transport error is only [`UNREACHABLE`]: its words (connection refused, a DNS failure, a
/// timeout) would tell the tenant what listens where on the adapter's network (F-7). The log
/// keeps them.
pub(crate) fn knative_error_extensions(
    sink: &Url,
    err: &SendError,
    detail: bool,
) -> [(&'static str, ExtensionValue); 3] {
    let (code, body): (i64, Vec<u8>) = match err {
        SendError::Status { status, body, .. } => (i64::from(*status), body.clone()),
        SendError::Transport(_) if !detail => {
            (500, format!("dispatch error: {UNREACHABLE}").into_bytes())
        }
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
