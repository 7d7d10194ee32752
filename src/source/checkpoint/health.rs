//! Whether the checkpoint is being persisted, and what an operator must do when it is not. Pure:
//! the I/O side reports each flush's outcome and asks for the verdict.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Why a checkpoint write failed, by what the operator can do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// 403: the source's ServiceAccount may not write ConfigMaps there.
    Forbidden,
    /// 404 on a create: the namespace does not exist.
    NamespaceMissing,
    /// One stream's entry alone is larger than a shard may be.
    TooLarge,
    /// 422 or another refusal of the object.
    Invalid,
    /// 429, 5xx, or no answer: the API server is in trouble.
    Unavailable,
}

impl FailureKind {
    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            FailureKind::Forbidden => "forbidden",
            FailureKind::NamespaceMissing => "namespace_missing",
            FailureKind::TooLarge => "too_large",
            FailureKind::Invalid => "invalid",
            FailureKind::Unavailable => "unavailable",
        }
    }

    /// From an HTTP status (None: no answer).
    pub(crate) fn of_status(code: Option<u16>, create: bool) -> FailureKind {
        match code {
            Some(403) => FailureKind::Forbidden,
            Some(404) if create => FailureKind::NamespaceMissing,
            Some(413) => FailureKind::TooLarge,
            Some(400..=499) if code != Some(429) && code != Some(409) => FailureKind::Invalid,
            _ => FailureKind::Unavailable,
        }
    }

    /// What the operator must do, for the log and `/readyz`.
    /// What kind of refusal it was, for `/readyz` (which never repeats the API server's own
    /// message: the log has it).
    pub(crate) fn describe(self) -> &'static str {
        match self {
            FailureKind::Forbidden => "403 Forbidden",
            FailureKind::NamespaceMissing => "404: no such namespace",
            FailureKind::TooLarge => "an entry too large for a ConfigMap",
            FailureKind::Invalid => "the object was refused",
            FailureKind::Unavailable => "the API server is unavailable",
        }
    }

    pub(crate) fn remedy(self, namespace: &str) -> String {
        match self {
            FailureKind::Forbidden => format!(
                "the source's ServiceAccount may not write ConfigMaps in namespace {namespace}: \
                 grant it list, create, patch and delete on configmaps there (config/201-clusterrole-source.yaml, bound by config/203-bindings.yaml)"
            ),
            FailureKind::NamespaceMissing => format!(
                "namespace {namespace} does not exist: create it, or point --checkpoint-namespace \
                 at the source's namespace"
            ),
            FailureKind::TooLarge => "one ImageStream's entry is larger than a ConfigMap may \
                 hold: it has too many tags; limit the tags reported with --tag"
                .to_string(),
            FailureKind::Invalid => "the API server refused the checkpoint ConfigMap; see the \
                 error (an admission policy or a quota may refuse it)"
                .to_string(),
            FailureKind::Unavailable => {
                "the API server did not accept the write; it is retried every flush".to_string()
            }
        }
    }
}

/// The flushes in a row that must fail before the source reports itself not ready.
pub(crate) const FAILED_FLUSHES_BEFORE_UNREADY: u32 = 3;
/// How often a failure that goes on is logged again at error level.
const REPEAT_ERROR_EVERY: Duration = Duration::from_secs(60);
/// How far apart the change-number samples are (the resolution of the pending age).
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What the log should say after a flush.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Say {
    /// Nothing new.
    Nothing,
    /// Writes are failing (for the first time, or still, once a minute): at error level.
    Failing,
    /// Writes work again after failing.
    Recovered,
}

/// The persistence state: flush outcomes and when changes were made.
#[derive(Debug)]
pub(crate) struct Persistence {
    failed_in_a_row: u32,
    last_error: Option<(FailureKind, String)>,
    reported: Option<Instant>,
    /// The whole layout has been written at least once since the start (every leaf, the marker).
    complete: bool,
    /// `(n, t)`: the changes numbered `n` or more were made at `t` or later.
    samples: VecDeque<(u64, Instant)>,
    started: Instant,
}

impl Persistence {
    /// The state at a start, at `now`.
    pub(crate) fn new(now: Instant) -> Persistence {
        Persistence {
            failed_in_a_row: 0,
            last_error: None,
            reported: None,
            complete: false,
            samples: VecDeque::new(),
            started: now,
        }
    }

    /// A change numbered `n` was made at `now`.
    pub(crate) fn changed(&mut self, n: u64, now: Instant) {
        let stale =
            (self.samples.back()).is_none_or(|(_, t)| now.duration_since(*t) >= SAMPLE_EVERY);
        if stale {
            self.samples.push_back((n, now));
        }
    }

    /// How long the oldest change not yet written (numbered `oldest`) has waited, at `now`.
    pub(crate) fn pending_age(&mut self, oldest: Option<u64>, now: Instant) -> Duration {
        let Some(oldest) = oldest else {
            self.samples.clear();
            return Duration::ZERO;
        };
        // Samples older than the one just before `oldest` are not needed again.
        while self.samples.len() > 1 && self.samples[1].0 <= oldest {
            self.samples.pop_front();
        }
        let since = match self.samples.front() {
            Some((n, t)) if *n <= oldest => *t,
            _ => self.started,
        };
        now.saturating_duration_since(since)
    }

    /// A flush ended: `Ok(complete)` says whether the whole layout is now written.
    pub(crate) fn flushed(
        &mut self,
        outcome: Result<bool, (FailureKind, String)>,
        now: Instant,
    ) -> Say {
        match outcome {
            Ok(complete) => {
                self.complete |= complete;
                let was_failing = self.failing();
                self.failed_in_a_row = 0;
                self.last_error = None;
                self.reported = None;
                if was_failing {
                    Say::Recovered
                } else {
                    Say::Nothing
                }
            }
            Err(error) => {
                self.failed_in_a_row += 1;
                self.last_error = Some(error);
                let due = self.failing()
                    && (self.reported).is_none_or(|t| now.duration_since(t) >= REPEAT_ERROR_EVERY);
                if due {
                    self.reported = Some(now);
                    Say::Failing
                } else {
                    Say::Nothing
                }
            }
        }
    }

    /// Whether writes have failed long enough to say so.
    pub(crate) fn failing(&self) -> bool {
        self.failed_in_a_row >= FAILED_FLUSHES_BEFORE_UNREADY
    }

    /// Why the source is not ready because of its checkpoint (None: it is fine).
    pub(crate) fn not_ready(&self, namespace: &str) -> Option<String> {
        match (&self.last_error, self.complete, self.failing()) {
            (Some((kind, _)), _, true) => Some(format!(
                "checkpoint writes are failing ({} flushes in a row): {}; {} (the log has the API \
                 server's answer)",
                self.failed_in_a_row,
                kind.describe(),
                kind.remedy(namespace)
            )),
            (_, false, _) => Some(format!(
                "the checkpoint has not yet been written to namespace {namespace}"
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: FailureKind) -> Result<bool, (FailureKind, String)> {
        Err((kind, "403 Forbidden".into()))
    }

    #[test]
    fn not_ready_until_the_whole_layout_is_written_once() {
        let t = Instant::now();
        let mut p = Persistence::new(t);
        assert!(p.not_ready("ig").unwrap().contains("not yet been written"));
        assert_eq!(p.flushed(Ok(false), t), Say::Nothing);
        assert!(p.not_ready("ig").is_some());
        p.flushed(Ok(true), t);
        assert_eq!(p.not_ready("ig"), None);
    }

    #[test]
    fn three_failed_flushes_in_a_row_make_it_unready_with_the_remedy_then_a_success_recovers() {
        let t = Instant::now();
        let mut p = Persistence::new(t);
        p.flushed(Ok(true), t);
        assert_eq!(p.flushed(err(FailureKind::Forbidden), t), Say::Nothing);
        assert_eq!(p.flushed(err(FailureKind::Forbidden), t), Say::Nothing);
        assert_eq!(p.not_ready("ig"), None);
        assert_eq!(p.flushed(err(FailureKind::Forbidden), t), Say::Failing);
        let why = p.not_ready("ig").unwrap();
        assert!(
            why.contains("403 Forbidden")
                && why.contains("may not write ConfigMaps in namespace ig"),
            "{why}"
        );
        // Said again only once a minute.
        assert_eq!(
            p.flushed(err(FailureKind::Forbidden), t + Duration::from_secs(1)),
            Say::Nothing
        );
        assert_eq!(
            p.flushed(err(FailureKind::Forbidden), t + Duration::from_secs(61)),
            Say::Failing
        );
        assert_eq!(p.flushed(Ok(true), t), Say::Recovered);
        assert_eq!(p.not_ready("ig"), None);
        assert_eq!(p.flushed(Ok(true), t), Say::Nothing);
    }

    #[test]
    fn the_pending_age_is_that_of_the_oldest_unwritten_change() {
        let t0 = Instant::now();
        let mut p = Persistence::new(t0);
        p.changed(1, t0 + Duration::from_secs(1));
        p.changed(2, t0 + Duration::from_millis(1050)); // within the sampling step: not sampled
        p.changed(3, t0 + Duration::from_secs(2));
        p.changed(9, t0 + Duration::from_secs(5));
        let now = t0 + Duration::from_secs(10);
        assert_eq!(p.pending_age(Some(2), now), Duration::from_secs(9));
        assert_eq!(p.pending_age(Some(3), now), Duration::from_secs(8));
        assert_eq!(p.pending_age(Some(9), now), Duration::from_secs(5));
        assert_eq!(p.pending_age(None, now), Duration::ZERO);
        // A change older than every sample (made before the start's first sample) counts from the start.
        assert_eq!(p.pending_age(Some(0), now), Duration::from_secs(10));
    }

    #[test]
    fn statuses_map_to_what_the_operator_can_do() {
        assert_eq!(
            FailureKind::of_status(Some(403), false),
            FailureKind::Forbidden
        );
        assert_eq!(
            FailureKind::of_status(Some(404), true),
            FailureKind::NamespaceMissing
        );
        assert_eq!(
            FailureKind::of_status(Some(422), false),
            FailureKind::Invalid
        );
        assert_eq!(
            FailureKind::of_status(Some(429), false),
            FailureKind::Unavailable
        );
        assert_eq!(
            FailureKind::of_status(Some(503), false),
            FailureKind::Unavailable
        );
        assert_eq!(
            FailureKind::of_status(None, false),
            FailureKind::Unavailable
        );
    }
}
