//! The interceptor's metrics: what it passed and refused, and how long it took.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::judge::reason;

/// The labels of `imagegate_interceptor_events_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Outcome {
    /// `passed` or `refused`.
    pub(crate) verdict: &'static str,
    /// Why it was refused (one of `judge::reason`); empty when passed.
    pub(crate) reason: &'static str,
}

/// The interceptor's metrics.
#[derive(Clone)]
pub struct Metrics {
    /// `imagegate_interceptor_events_total{verdict, reason}`.
    pub(crate) events: Family<Outcome, Counter>,
    /// `imagegate_interceptor_duration_seconds`: from the request to the answer (the API reads
    /// included).
    pub duration: Histogram,
}

impl Metrics {
    /// Registers the metrics, every series at 0.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            events: Family::default(),
            duration: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_interceptor");
        sub.register(
            "events",
            "Events Tekton Triggers asked the interceptor about, by verdict and the reason a refused one was refused",
            m.events.clone(),
        );
        sub.register(
            "duration_seconds",
            "Time from an interceptor request to its answer, the API reads included",
            m.duration.clone(),
        );
        m.passed();
        for r in reason::ALL {
            let _ = m.events.get_or_create(&Outcome {
                verdict: "refused",
                reason: r,
            });
        }
        m
    }

    /// The counter of passed events.
    pub(crate) fn passed(&self) -> Counter {
        self.events
            .get_or_create(&Outcome {
                verdict: "passed",
                reason: "",
            })
            .clone()
    }

    /// The counter of events refused for `reason`.
    pub(crate) fn refused(&self, reason: &'static str) -> Counter {
        self.events
            .get_or_create(&Outcome {
                verdict: "refused",
                reason,
            })
            .clone()
    }
}
