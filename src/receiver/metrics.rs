//! The receiver's metrics: the notifications it was sent and what became of them, and the
//! imports it asked for.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What became of a notification.
pub(crate) mod outcome {
    /// Authenticated and parsed; its pushes are queued.
    pub(crate) const ACCEPTED: &str = "accepted";
    /// No or a wrong secret (401).
    pub(crate) const UNAUTHORIZED: &str = "unauthorized";
    /// Not a notification of the sender's format, or too large (400, 413).
    pub(crate) const MALFORMED: &str = "malformed";
    /// The queue was full (503: the registry sends it again).
    pub(crate) const BUSY: &str = "busy";
    /// Every outcome, for the series made at start.
    pub(crate) const ALL: [&str; 4] = [ACCEPTED, UNAUTHORIZED, MALFORMED, BUSY];
}

/// What became of an import the receiver asked for.
pub(crate) mod import {
    /// The import found a new digest: the candidate tag moved.
    pub(crate) const CHANGED: &str = "changed";
    /// The import found what the tag already had.
    pub(crate) const UNCHANGED: &str = "unchanged";
    /// The registry refused the import (the tag's `ImportSuccess=False` says why).
    pub(crate) const REFUSED: &str = "refused";
    /// The API server could not be asked (after retries; the scheduled import is left).
    pub(crate) const FAILED: &str = "failed";
    /// Put off: the tag was imported less than the minimum interval ago (imported once the
    /// interval is over).
    pub(crate) const DEFERRED: &str = "deferred";
    /// Every outcome.
    pub(crate) const ALL: [&str; 5] = [CHANGED, UNCHANGED, REFUSED, FAILED, DEFERRED];
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Notification {
    sender: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Import {
    outcome: &'static str,
}

/// The receiver's metrics.
#[derive(Clone)]
pub struct Metrics {
    notifications: Family<Notification, Counter>,
    pushes: Family<Notification, Counter>,
    imports: Family<Import, Counter>,
    /// `imagegate_receiver_notification_duration_seconds`: from a notification's request to its
    /// answer (authentication, parsing, queueing).
    pub duration: Histogram,
}

impl Metrics {
    /// Registers the metrics, every series of `senders` at 0.
    pub fn register(registry: &mut Registry, senders: &[&'static str]) -> Metrics {
        let m = Metrics {
            notifications: Family::default(),
            pushes: Family::default(),
            imports: Family::default(),
            duration: Histogram::new(exponential_buckets(0.00005, 2.0, 16)),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_receiver");
        sub.register(
            "notifications",
            "Push notifications received, by sender and what became of them",
            m.notifications.clone(),
        );
        sub.register(
            "pushes",
            "Tags pushed, as accepted notifications named them, by sender",
            m.pushes.clone(),
        );
        sub.register(
            "imports",
            "Imports of governed candidate tags asked for on a push, by outcome",
            m.imports.clone(),
        );
        sub.register(
            "notification_duration_seconds",
            "Time from a notification's request to its answer",
            m.duration.clone(),
        );
        for sender in senders {
            for outcome in outcome::ALL {
                let _ = m
                    .notifications
                    .get_or_create(&Notification { sender, outcome });
            }
            let _ = m.pushes.get_or_create(&Notification {
                sender,
                outcome: outcome::ACCEPTED,
            });
        }
        for outcome in import::ALL {
            let _ = m.imports.get_or_create(&Import { outcome });
        }
        m
    }

    /// Counts a notification of `sender` with `outcome`.
    pub(crate) fn notification(&self, sender: &'static str, outcome: &'static str) {
        self.notifications
            .get_or_create(&Notification { sender, outcome })
            .inc();
    }

    /// Counts `n` pushes named by an accepted notification of `sender`.
    pub(crate) fn pushes(&self, sender: &'static str, n: usize) {
        self.pushes
            .get_or_create(&Notification {
                sender,
                outcome: outcome::ACCEPTED,
            })
            .inc_by(n as u64);
    }

    /// Counts an import with `outcome`.
    pub(crate) fn import(&self, outcome: &'static str) {
        self.imports.get_or_create(&Import { outcome }).inc();
    }
}
