//! The source's metrics (`imagegate_source_*`): events sent, failed and dead-lettered by type,
//! delivery latency (watch event seen to the sink's 2xx), queue depth and watch restarts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The event type label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// The CloudEvent type.
    pub r#type: String,
}

/// The source's metrics, registered in one registry.
#[derive(Clone)]
pub struct Metrics {
    /// `imagegate_source_events_sent_total{type}`: accepted by the sink.
    pub sent: Family<TypeLabels, Counter>,
    /// `imagegate_source_events_failed_total{type}`: refused for good with no dead-letter sink.
    pub failed: Family<TypeLabels, Counter>,
    /// `imagegate_source_events_dead_lettered_total{type}`.
    pub dead_lettered: Family<TypeLabels, Counter>,
    /// `imagegate_source_delivery_attempts_failed_total{type}`: failed attempts, counted when
    /// the event's delivery ends (accepted after retries, dead-lettered, or failed).
    pub attempts_failed: Family<TypeLabels, Counter>,
    /// `imagegate_source_delivery_latency_seconds`: change seen to sink 2xx.
    pub latency: Histogram,
    /// `imagegate_source_queue_depth`: events not yet delivered.
    pub queue_depth: Gauge,
    /// `imagegate_source_watch_restarts_total`: watch errors (each followed by a resume or re-list).
    pub watch_restarts: Counter,
    /// `imagegate_source_malformed_objects_total`: ImageStreams that did not parse (skipped).
    pub malformed: Counter,
}

impl Metrics {
    /// Creates the metrics and registers them under `imagegate_source`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Metrics {
            sent: Family::default(),
            failed: Family::default(),
            dead_lettered: Family::default(),
            attempts_failed: Family::default(),
            latency: Histogram::new(exponential_buckets(0.0005, 2.0, 20)),
            queue_depth: Gauge::default(),
            watch_restarts: Counter::default(),
            malformed: Counter::default(),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_source");
        sub.register(
            "events_sent",
            "Events the sink accepted, by type",
            m.sent.clone(),
        );
        sub.register(
            "events_failed",
            "Events refused for good with no dead-letter sink, by type",
            m.failed.clone(),
        );
        sub.register(
            "events_dead_lettered",
            "Events sent to the dead-letter sink, by type",
            m.dead_lettered.clone(),
        );
        sub.register(
            "delivery_attempts_failed",
            "Failed delivery attempts, counted when the event's delivery ends, by type",
            m.attempts_failed.clone(),
        );
        sub.register(
            "delivery_latency_seconds",
            "From the watch event that showed a change to the sink's 2xx",
            m.latency.clone(),
        );
        sub.register(
            "queue_depth",
            "Events not yet delivered",
            m.queue_depth.clone(),
        );
        sub.register(
            "watch_restarts",
            "Watch errors, each followed by a resume or a re-list",
            m.watch_restarts.clone(),
        );
        sub.register(
            "malformed_objects",
            "ImageStreams that could not be read and were skipped",
            m.malformed.clone(),
        );
        m
    }

    /// The label for an event type.
    pub fn of(ty: &str) -> TypeLabels {
        TypeLabels {
            r#type: ty.to_string(),
        }
    }
}
