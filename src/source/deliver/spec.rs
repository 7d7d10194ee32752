//! Knative's delivery spec (`retry`, `backoffPolicy`, `backoffDelay`, `deadLetterSink`) with a
//! cap on the waits: the wait before each retry, which failures are retried
//! (`SelectiveRetry`), and `backoffDelay` as ISO-8601 durations.

use std::time::Duration;

use reqwest::Url;

use super::error::SendError;

/// A cap on the waits: five minutes, used when the caller has no better one.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(300);

// One enum for `--backoff-policy`, the ImageStreamSource's `spec.delivery.backoffPolicy` (its
// doc is the CRD's description) and the delivery.
/// Knative's backoff policies.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
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
    /// (`RetryConfigFromDeliverySpec`; `backoffDelay*<numberOfRetries>` in `DeliverySpec`),
    /// numbered as its table test numbers them: `PT0.5S` exponential waits 1 s, 2 s, 4 s...
    /// (Its in-memory dispatcher passes go-retryablehttp's 0-based index instead, so a first
    /// linear retry waits nothing; that is not copied.)
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let factor = match self.backoff_policy {
            BackoffPolicy::Linear => Some(retry),
            BackoffPolicy::Exponential => 2u32.checked_pow(retry),
        };
        factor
            .and_then(|factor| self.backoff_delay.checked_mul(factor))
            .map_or(self.max_backoff, |delay| delay.min(self.max_backoff))
    }

    /// The waits before each retry, as Knative's formulas give them ([`DeliverySpec::delay`]):
    /// `retry` of them, or without end when `retry` is None.
    pub(crate) fn delays(&self) -> Delays {
        Delays {
            spec: self.clone(),
            next: 1,
        }
    }

    /// The wait after `err` when the backoff says `delay`: the backoff, or the sink's
    /// `Retry-After` on a 429 or 503 when that is longer (Knative's `generateBackoffFn`), never
    /// more than `max_backoff`.
    pub(crate) fn wait_after(&self, delay: Duration, err: &SendError) -> Duration {
        let asked = match err {
            SendError::Status {
                status: 429 | 503,
                retry_after: Some(after),
                ..
            } => *after,
            _ => Duration::ZERO,
        };
        delay.max(asked).min(self.max_backoff)
    }
}

/// Parses an ISO-8601 duration as Knative's `backoffDelay` (`PT0.2S`, `PT1M`, `P1D`, `P1W`,
/// `P1DT12H`, `+PT1S`, `P0`), with a message that says what is wrong.
///
/// As `rickb777/date/period`, which Knative uses: `nY nM nW nD`, then `T` and `nH nM nS`; one
/// fraction with `.` or `,`; a year is 365.2425 days, a month a twelfth of that, a day 24 h.
/// Stricter: designators in that order, the fraction on the last one, something after `T`, no
/// negative durations. More precise: 9 fraction digits are kept (Knative keeps 2).
// Written here, not taken from a crate: the `iso8601` crate (0.6) reads another language than
// Knative's. It drops what it cannot hold (`P1W1D` is one week, `PT1.5M` is zero), keeps only
// milliseconds, and refuses `+PT1S` and `P0`, which Knative accepts.
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

/// The backoff of a [`DeliverySpec`], for `backon`: the wait before each retry, until the
/// retries are spent.
#[derive(Clone, Debug)]
pub struct Delays {
    spec: DeliverySpec,
    /// The number of the next retry (1 for the first).
    next: u32,
}

impl Iterator for Delays {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.spec.retry.is_some_and(|retries| self.next > retries) {
            return None;
        }
        let delay = self.spec.delay(self.next);
        self.next = self.next.saturating_add(1);
        Some(delay)
    }
}
