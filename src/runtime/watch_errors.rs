//! What both programs do with a watch error: retry after a backoff that grows while errors
//! keep coming ([`WatchBackoff`]), and, when the error is a refusal (a 400, 401, 403 or 404
//! where a list or watch worked before: RBAC revoked or narrowed, a CRD or an aggregated API
//! removed, a token no longer accepted), make it visible while it lasts ([`Refusals`]): a
//! warning per refused attempt, and `/readyz` unready with the reason ("watch" condition).
//!
//! The condition is set again by every refused attempt and cleared by the watch's next event
//! (a list or a change). A refused watch request can also recover without an event (the watch
//! starts again and nothing changes), so the condition lapses [`HOLD`] after the last refusal:
//! longer than the longest backoff, so a refusal that persists keeps the program unready.
//! Other errors (a 410, a 5xx, a dropped connection) are counted by the caller and retried the
//! same way, without touching readiness: they are the API server's trouble, not the program's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use tracing::warn;

use crate::runtime::admin::Health;

/// How long a refusal keeps the program unready after it was last seen: twice the longest
/// watch backoff (30 s), so a refusal that persists is seen again before it lapses.
pub(crate) const HOLD: Duration = Duration::from_secs(60);

/// The first delay after a watch error.
const FIRST_DELAY: Duration = Duration::from_millis(800);
/// The longest delay.
const LONGEST_DELAY: Duration = Duration::from_secs(30);
/// A quiet time after which the delays start over.
const START_OVER_AFTER: Duration = Duration::from_secs(120);

/// The delays before a failed watch is retried: kube's default (0.8 s doubling to 30 s, starting
/// over after 120 s without an error), except that an event does not start it over. kube's
/// `StreamBackoff` resets its backoff at every `Ok` item, and the watcher yields `Init` before
/// each (re-)list, so with kube's own backoff a refused re-list is retried every 0.8 s forever.
#[derive(Debug)]
pub(crate) struct WatchBackoff {
    next: Duration,
    last_error: Option<Instant>,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: FIRST_DELAY,
            last_error: None,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    /// The delay after an error.
    fn next(&mut self) -> Option<Duration> {
        Some(self.after_error_at(Instant::now()))
    }
}

impl WatchBackoff {
    /// The delay after an error at `now`.
    fn after_error_at(&mut self, now: Instant) -> Duration {
        if self
            .last_error
            .is_some_and(|t| now.duration_since(t) > START_OVER_AFTER)
        {
            self.next = FIRST_DELAY;
        }
        self.last_error = Some(now);
        let delay = self.next;
        self.next = (self.next * 2).min(LONGEST_DELAY);
        delay
    }
}

impl Backoff for WatchBackoff {
    /// Called by `StreamBackoff` at every event, `Init` included: ignored (the delays start over
    /// only after a quiet time, in `next`).
    fn reset(&mut self) {}
}

/// The readiness condition of refused watches.
const CONDITION: &str = "watch";

/// A refusal: the status code and the API server's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// 400, 401, 403 or 404.
    pub code: u16,
    /// What the API server said.
    pub message: String,
}

/// The refusal in a watcher's error, if it is one (a status the API server will answer again
/// until someone changes the cluster).
pub(crate) fn refusal(e: &watcher::Error) -> Option<Refusal> {
    let (code, message) = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => (s.code, s.message.clone()),
        watcher::Error::WatchError(s) => (s.code, s.message.clone()),
        _ => return None,
    };
    matches!(code, 400 | 401 | 403 | 404).then_some(Refusal { code, message })
}

/// The refused watches of one program, by scope, reported on its [`Health`].
pub struct Refusals {
    health: Arc<Health>,
    /// What is watched, for the messages ("CustomRun", "ImageStream").
    kind: &'static str,
    /// The scopes refused now: scope (namespace, or "" for all) -> the reason.
    refused: Mutex<BTreeMap<String, String>>,
}

impl Refusals {
    /// The refusals of the watches of `kind`, reported on `health`.
    pub fn new(health: Arc<Health>, kind: &'static str) -> Arc<Refusals> {
        Arc::new(Refusals {
            health,
            kind,
            refused: Mutex::default(),
        })
    }

    /// A watch of `namespace` (None: all namespaces) failed with `e`: a refusal is logged and
    /// keeps the program unready; returns it, or None for another error.
    pub(crate) fn failed(&self, namespace: Option<&str>, e: &watcher::Error) -> Option<Refusal> {
        let refusal = refusal(e)?;
        let scope = match namespace {
            Some(ns) => format!(" in namespace {ns:?}"),
            None => String::new(),
        };
        // The status code only: `/readyz` is served without authentication, and the API
        // server's message (the identity, the verb, the resource) stays in the log.
        let why = format!(
            "the API server refuses the {} watch{scope} ({}); retrying with backoff",
            self.kind, refusal.code
        );
        warn!(
            namespace = namespace.unwrap_or_default(),
            code = refusal.code,
            reason = %refusal.message,
            "{} watch refused; retrying with backoff until the API server allows it",
            self.kind
        );
        let mut refused = self.lock();
        refused.insert(namespace.unwrap_or_default().to_string(), why);
        self.report(&refused);
        Some(refusal)
    }

    /// The watch of `namespace` delivered an event: it is no longer refused.
    pub(crate) fn recovered(&self, namespace: Option<&str>) {
        let mut refused = self.lock();
        if refused.remove(namespace.unwrap_or_default()).is_some() {
            self.report(&refused);
        }
    }

    /// Sets the condition from the scopes refused now, held for [`HOLD`] (each scope still
    /// refused renews it on its next refused attempt).
    fn report(&self, refused: &BTreeMap<String, String>) {
        if refused.is_empty() {
            self.health.set_condition(CONDITION, None);
        } else {
            let why = refused.values().cloned().collect::<Vec<_>>().join("; ");
            self.health.set_failing_for(CONDITION, why, HOLD);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.refused.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delays_grow_through_events_and_start_over_after_a_quiet_time() {
        let mut b = WatchBackoff::default();
        let mut at = Instant::now();
        let mut secs = |b: &mut WatchBackoff, later: u64| {
            at += Duration::from_secs(later);
            b.after_error_at(at).as_secs_f64()
        };
        assert_eq!(secs(&mut b, 0), 0.8);
        b.reset(); // an Init between two refused lists
        assert_eq!(secs(&mut b, 1), 1.6);
        for want in [3.2, 6.4, 12.8, 25.6, 30.0, 30.0] {
            assert_eq!(secs(&mut b, 30), want);
        }
        assert_eq!(secs(&mut b, 121), 0.8, "after 120 s without an error");
        assert!(b.next().is_some(), "never ends");
    }

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(&format!("refused with {code}"), "Forbidden")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_a_status_the_api_server_repeats_is_a_refusal() {
        for code in [400, 401, 403, 404] {
            let e = watcher::Error::WatchStartFailed(api_error(code));
            assert_eq!(refusal(&e).map(|r| r.code), Some(code));
            let e = watcher::Error::InitialListFailed(api_error(code));
            assert_eq!(refusal(&e).map(|r| r.code), Some(code));
        }
        for code in [409, 410, 429, 500, 503] {
            let e = watcher::Error::WatchStartFailed(api_error(code));
            assert_eq!(refusal(&e), None, "{code}");
        }
        assert_eq!(refusal(&watcher::Error::NoResourceVersion), None);
    }

    #[test]
    fn a_refused_scope_keeps_the_program_unready_until_its_watch_recovers() {
        let health = Health::new();
        health.set_ready(true);
        let refusals = Refusals::new(health.clone(), "CustomRun");
        let e = watcher::Error::WatchStartFailed(api_error(403));
        assert!(refusals.failed(Some("a"), &e).is_some());
        assert!(refusals.failed(Some("b"), &e).is_some());
        assert_eq!(
            health.reason().as_deref(),
            Some(
                "the API server refuses the CustomRun watch in namespace \"a\" (403); retrying \
                 with backoff; the API server refuses the CustomRun watch in namespace \"b\" \
                 (403); retrying with backoff"
            )
        );
        refusals.recovered(Some("a"));
        assert!(health.reason().unwrap().contains("\"b\""));
        assert!(!health.reason().unwrap().contains("\"a\""));
        refusals.recovered(Some("b"));
        assert!(health.is_ready(), "{:?}", health.reason());

        let gone = watcher::Error::WatchStartFailed(api_error(410));
        assert!(refusals.failed(None, &gone).is_none());
        assert!(health.is_ready(), "a 410 is no refusal");
    }
}
