//! The source's metrics (`imagegate_source_*`): events sent, failed and dead-lettered by type,
//! delivery latency (watch event seen to the sink's 2xx), queue depth and watch restarts, and
//! the checkpoint's size, pending writes and write failures.

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

/// The reason label of a checkpoint write failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// `forbidden`, `namespace_missing`, `too_large`, `invalid` or `unavailable`.
    pub reason: String,
}

/// The source's metrics, registered in one registry: a handle, cloned by every step of a
/// flow (one `Arc`; the multi-tenant adapter's every source holds several, BENCHMARKS.md,
/// issue 30), whose fields are [`Instruments`]'.
#[derive(Clone)]
pub struct Metrics(std::sync::Arc<Instruments>);

impl std::ops::Deref for Metrics {
    type Target = Instruments;

    fn deref(&self) -> &Instruments {
        &self.0
    }
}

/// The instruments behind [`Metrics`].
#[derive(Clone)]
pub struct Instruments {
    /// `imagegate_source_events_sent_total{type}`: accepted by the sink.
    pub sent: Family<TypeLabels, Counter>,
    /// `imagegate_source_events_failed_total{type}`: delivery rounds that ended refused (after
    /// the retries) with no dead-letter sink taking the event; the event is held and sent again.
    pub failed: Family<TypeLabels, Counter>,
    /// `imagegate_source_events_held`: events the sink refused that are held (not acknowledged)
    /// and sent again until the sink or the dead-letter sink takes them.
    pub held: Gauge,
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
    /// `imagegate_source_checkpoint_write_failures_total{reason}`: flushes that failed.
    pub checkpoint_write_failures: Family<ReasonLabels, Counter>,
    /// `imagegate_source_checkpoint_pending_entries`: entries not yet written.
    pub checkpoint_pending: Gauge,
    /// `imagegate_source_checkpoint_pending_age_seconds`: how long the oldest of them has waited.
    pub checkpoint_pending_age: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// `imagegate_source_checkpoint_shards`: ConfigMaps the checkpoint is spread over.
    pub checkpoint_shards: Gauge,
    /// `imagegate_source_checkpoint_bytes`: the bytes of its entries.
    pub checkpoint_bytes: Gauge,
    /// `imagegate_source_checkpoint_written_bytes_total`: bytes of shards the flushes had the
    /// API server store (each shard written counts whole).
    pub checkpoint_written_bytes: Counter,
    /// `imagegate_source_checkpoint_lost_streams_total`: streams whose recorded state was lost
    /// (shard gone, entry unreadable), whose current tags were sent again.
    pub checkpoint_lost_streams: Counter,
}

impl Metrics {
    /// Creates the metrics and registers them under `imagegate_source`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let m = Instruments {
            sent: Family::default(),
            failed: Family::default(),
            held: Gauge::default(),
            dead_lettered: Family::default(),
            attempts_failed: Family::default(),
            latency: Histogram::new(exponential_buckets(0.0005, 2.0, 20)),
            queue_depth: Gauge::default(),
            watch_restarts: Counter::default(),
            malformed: Counter::default(),
            checkpoint_write_failures: Family::default(),
            checkpoint_pending: Gauge::default(),
            checkpoint_pending_age: Gauge::default(),
            checkpoint_shards: Gauge::default(),
            checkpoint_bytes: Gauge::default(),
            checkpoint_written_bytes: Counter::default(),
            checkpoint_lost_streams: Counter::default(),
        };
        let sub = registry.sub_registry_with_prefix("imagegate_source");
        sub.register(
            "events_sent",
            "Events the sink accepted, by type",
            m.sent.clone(),
        );
        sub.register(
            "events_failed",
            "Delivery rounds the sink refused (after the retries) with no dead-letter sink taking the event, which is then held and sent again, by type",
            m.failed.clone(),
        );
        sub.register(
            "events_held",
            "Events the sink refused that are held, not acknowledged, and sent again until taken",
            m.held.clone(),
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
        sub.register(
            "checkpoint_write_failures",
            "Checkpoint flushes that failed, by reason",
            m.checkpoint_write_failures.clone(),
        );
        sub.register(
            "checkpoint_pending_entries",
            "Checkpoint entries recorded and not yet written",
            m.checkpoint_pending.clone(),
        );
        sub.register(
            "checkpoint_pending_age_seconds",
            "How long the oldest checkpoint entry not yet written has waited",
            m.checkpoint_pending_age.clone(),
        );
        sub.register(
            "checkpoint_shards",
            "ConfigMaps the checkpoint is spread over",
            m.checkpoint_shards.clone(),
        );
        sub.register(
            "checkpoint_bytes",
            "Bytes of the checkpoint's entries",
            m.checkpoint_bytes.clone(),
        );
        sub.register(
            "checkpoint_written_bytes",
            "Bytes of checkpoint shards written to the API server (each written shard counts whole)",
            m.checkpoint_written_bytes.clone(),
        );
        sub.register(
            "checkpoint_lost_streams",
            "Streams whose checkpoint entry was lost at a start, whose current tags were sent again",
            m.checkpoint_lost_streams.clone(),
        );
        Metrics(std::sync::Arc::new(m))
    }

    /// These metrics, but for the gauges of one flow's own queue and checkpoint, which are new
    /// and not registered (the multi-tenant adapter adds them up per process).
    pub(crate) fn with_own_gauges(&self) -> Metrics {
        Metrics(std::sync::Arc::new(Instruments {
            queue_depth: Gauge::default(),
            checkpoint_pending: Gauge::default(),
            checkpoint_pending_age: Gauge::default(),
            checkpoint_shards: Gauge::default(),
            checkpoint_bytes: Gauge::default(),
            ..(*self.0).clone()
        }))
    }

    /// The label for a checkpoint write failure.
    pub fn reason(reason: &str) -> ReasonLabels {
        ReasonLabels {
            reason: reason.to_string(),
        }
    }

    /// The label for an event type.
    pub fn of(ty: &str) -> TypeLabels {
        TypeLabels {
            r#type: ty.to_string(),
        }
    }
}
