//! What one attempt to deliver can fail with, and which failures Knative retries: shared by the
//! encoding ([`super::wire`]), the client ([`super::client`]) and the retry policy
//! ([`super::spec`]), which all import it from here.

use std::time::Duration;

/// Knative's `KnativeErrorDataExtensionMaxLength`, in base64 characters.
pub const KNATIVE_ERROR_DATA_MAX: usize = 1024;
/// Bytes of a failed response's body kept: exactly what 1024 base64 characters encode, so the
/// base64 of the kept bytes equals Knative's truncated base64 of the whole body.
pub const ERROR_BODY_LIMIT: usize = KNATIVE_ERROR_DATA_MAX / 4 * 3;
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
    pub(crate) fn status(&self) -> Option<u16> {
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

/// Whether Knative retries a failure (`SelectiveRetry`): a transport error (no status),
/// 404 (a pod becoming ready), 408, 409, 429 and every status from 500 up. Not 1xx, 2xx, 3xx
/// or other 4xx: a 400 will not get better by sending it again.
pub fn is_retryable(status: Option<u16>) -> bool {
    match status {
        None => true,
        Some(status) => status >= 500 || matches!(status, 404 | 408 | 409 | 429),
    }
}
