//! The multi-tenant adapter's own metrics, with bounded labels (no source names): the sources
//! by readiness, the ImageStream watches of every namespace, and which sources' backlogs are stuck
//! ([`super::backlog`]). The delivery and checkpoint counters of [`crate::source::metrics`] add
//! up across sources; its queue and checkpoint gauges are the sums over them (the pending age
//! the oldest).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `ready` label: `True`, `False` or `Unknown` (not observed yet, or the reviews could not
/// be asked).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadyLabels {
    /// The source's `Ready` status.
    pub ready: &'static str,
}

/// The adapter's gauges.
#[derive(Clone, Default)]
pub struct MtMetrics {
    /// `imagegate_source_multi_tenant_sources{ready}`.
    pub sources: Family<ReadyLabels, Gauge>,
    /// `imagegate_source_multi_tenant_watches`: ImageStream watches of every namespace running.
    pub watches: Gauge,
    /// `imagegate_source_multi_tenant_sources_backlogged`: sources with events not yet
    /// delivered.
    pub backlogged: Gauge,
    /// `imagegate_source_multi_tenant_backlog_stalled_seconds`: the longest any source has had
    /// events waiting while none of its deliveries ended.
    pub stalled: Gauge<f64, AtomicU64>,
    /// `imagegate_source_multi_tenant_sources_shedding`: sources past their bound, taking no
    /// changes until their queue drains ([`super::join`]).
    pub shedding: Gauge,
    /// `imagegate_source_multi_tenant_sheds_total`: times a source went past its bound.
    pub sheds: Counter,
}

impl MtMetrics {
    /// Creates and registers them.
    pub fn register(registry: &mut Registry) -> MtMetrics {
        let m = MtMetrics::default();
        let sub = registry.sub_registry_with_prefix("imagegate_source_multi_tenant");
        sub.register(
            "sources",
            "ImageStreamSources served, by their Ready status",
            m.sources.clone(),
        );
        sub.register(
            "watches",
            "ImageStream watches of every namespace (one per way of reading streams in use: tags, whole)",
            m.watches.clone(),
        );
        sub.register(
            "sources_backlogged",
            "ImageStreamSources with events not yet delivered",
            m.backlogged.clone(),
        );
        sub.register(
            "backlog_stalled_seconds",
            "The longest any ImageStreamSource has had events waiting while none of its deliveries ended",
            m.stalled.clone(),
        );
        sub.register(
            "sources_shedding",
            "ImageStreamSources past their bound (--max-queued-per-source): they take no changes until their queue drains, then catch up with a list",
            m.shedding.clone(),
        );
        sub.register(
            "sheds",
            "Times an ImageStreamSource went past its bound (--max-queued-per-source)",
            m.sheds.clone(),
        );
        m
    }

    /// Sets the sources gauge from each source's readiness.
    pub fn set_sources<'a>(&self, readiness: impl Iterator<Item = &'a str>) {
        let mut counts = [0i64; 3];
        for r in readiness {
            counts[match r {
                "True" => 0,
                "False" => 1,
                _ => 2,
            }] += 1;
        }
        for (ready, n) in ["True", "False", "Unknown"].into_iter().zip(counts) {
            self.sources.get_or_create(&ReadyLabels { ready }).set(n);
        }
    }
}
