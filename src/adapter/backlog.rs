//! The sources' backlogs, summed into the process gauges (bounded: no source names). Each
//! source's flow keeps its own queue and checkpoint gauges ([`super::settings::metrics`]); every
//! [`INTERVAL`] they are read and `imagegate_source_queue_depth` (events not yet delivered, over
//! all sources), the checkpoint's pending entries, shards and bytes (sums) and pending age (the
//! oldest) are set from them, as the single source sets them for its one flow. Two gauges say
//! which tenant is stuck, which a sum hides: the sources with events waiting, and the longest
//! any source has had events waiting while none of its deliveries ended ([`stall`]: a sink
//! that refuses everything, or one that does not resolve).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::counters::Counters;
use super::index::SourceId;
use super::metrics::MtMetrics;
use crate::source::metrics::Metrics;

/// How often the gauges are set from the sources'.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);

/// Since when a source has had events waiting with no delivery ending, and how many of its
/// deliveries had ended then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stall {
    /// When it was first seen waiting, or last seen to move.
    pub since: Instant,
    /// Its deliveries ended (sink, dead-letter sink, failed) at that time.
    pub ended: i64,
}

/// The stall of a source whose queue holds `depth` events and whose deliveries ended number
/// `ended`, seen at `now`, given what it was (`before`): none while nothing waits; it starts
/// again whenever a delivery ends.
pub(crate) fn stall(before: Option<Stall>, depth: i64, ended: i64, now: Instant) -> Option<Stall> {
    if depth <= 0 {
        return None;
    }
    match before {
        Some(s) if s.ended == ended => Some(s),
        _ => Some(Stall { since: now, ended }),
    }
}

/// One source's backlog as read at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Sample {
    /// Events not yet delivered.
    pub depth: i64,
    /// How long it has been stalled ([`stall`]).
    pub stalled: Duration,
    /// Checkpoint entries not yet written.
    pub pending: i64,
    /// How long the oldest of them has waited, in seconds.
    pub pending_age: f64,
    /// Checkpoint shards.
    pub shards: i64,
    /// Checkpoint bytes.
    pub bytes: i64,
}

/// What the process gauges say about all the sources.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    /// Events not yet delivered, summed.
    pub depth: i64,
    /// Sources with events not yet delivered.
    pub backlogged: i64,
    /// The longest stall, in seconds.
    pub stalled: f64,
    /// Checkpoint entries not yet written, summed.
    pub pending: i64,
    /// The oldest of them, in seconds.
    pub pending_age: f64,
    /// Checkpoint shards, summed.
    pub shards: i64,
    /// Checkpoint bytes, summed.
    pub bytes: i64,
}

/// Adds up `samples`.
pub(crate) fn totals(samples: impl IntoIterator<Item = Sample>) -> Totals {
    samples.into_iter().fold(Totals::default(), |t, s| Totals {
        depth: t.depth + s.depth,
        backlogged: t.backlogged + i64::from(s.depth > 0),
        stalled: t.stalled.max(s.stalled.as_secs_f64()),
        pending: t.pending + s.pending,
        pending_age: t.pending_age.max(s.pending_age),
        shards: t.shards + s.shards,
        bytes: t.bytes + s.bytes,
    })
}

struct Entry {
    metrics: Metrics,
    counters: Arc<Counters>,
    stall: Option<Stall>,
}

/// The running pipelines' gauges, by source.
#[derive(Clone, Default)]
pub(crate) struct Backlogs(Arc<Mutex<BTreeMap<SourceId, Entry>>>);

impl Backlogs {
    /// The pipeline of `id` now reports to `metrics` (its own gauges) and `counters`.
    pub(crate) fn insert(&self, id: &SourceId, metrics: &Metrics, counters: Arc<Counters>) {
        let entry = Entry {
            metrics: metrics.clone(),
            counters,
            stall: None,
        };
        self.lock().insert(id.clone(), entry);
    }

    /// `id` runs no pipeline any more.
    pub(crate) fn remove(&self, id: &SourceId) {
        self.lock().remove(id);
    }

    /// Reads every source's gauges at `now`, moving their stalls on.
    pub(crate) fn sample(&self, now: Instant) -> Vec<Sample> {
        let mut entries = self.lock();
        (entries.values_mut())
            .map(|e| {
                let m = &e.metrics;
                let depth = m.queue_depth.get();
                let d = e.counters.snapshot();
                e.stall = stall(
                    e.stall,
                    depth,
                    d.delivered + d.dead_lettered + d.failed,
                    now,
                );
                Sample {
                    depth,
                    stalled: e.stall.map_or(Duration::ZERO, |s| now - s.since),
                    pending: m.checkpoint_pending.get(),
                    pending_age: m.checkpoint_pending_age.get(),
                    shards: m.checkpoint_shards.get(),
                    bytes: m.checkpoint_bytes.get(),
                }
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SourceId, Entry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Sets the gauges from `backlogs` every [`INTERVAL`] until `stop`, and a last time then.
pub(crate) async fn run(
    backlogs: Backlogs,
    metrics: Metrics,
    mt: MtMetrics,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(INTERVAL);
    loop {
        let stopping = tokio::select! {
            () = stop.cancelled() => true,
            _ = tick.tick() => false,
        };
        set(&metrics, &mt, totals(backlogs.sample(Instant::now())));
        if stopping {
            return;
        }
    }
}

/// Sets the process gauges to `t`.
pub(crate) fn set(metrics: &Metrics, mt: &MtMetrics, t: Totals) {
    metrics.queue_depth.set(t.depth);
    metrics.checkpoint_pending.set(t.pending);
    metrics.checkpoint_pending_age.set(t.pending_age);
    metrics.checkpoint_shards.set(t.shards);
    metrics.checkpoint_bytes.set(t.bytes);
    mt.backlogged.set(t.backlogged);
    mt.stalled.set(t.stalled);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_lasts_while_events_wait_and_no_delivery_ends() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(stall(None, 0, 5, at(0)), None, "nothing waits");
        let s = stall(None, 2, 5, at(1));
        assert_eq!(s.map(|s| s.since), Some(at(1)));
        let s = stall(s, 3, 5, at(9));
        assert_eq!(s.map(|s| s.since), Some(at(1)), "more waiting, none ended");
        let s = stall(s, 2, 6, at(10));
        assert_eq!(s.map(|s| s.since), Some(at(10)), "a delivery ended: moving");
        assert_eq!(stall(s, 0, 8, at(11)), None, "drained");
    }

    #[test]
    fn totals_sum_the_sizes_and_keep_the_worst_ages() {
        let a = Sample {
            depth: 3,
            stalled: Duration::from_secs(40),
            pending: 1,
            pending_age: 0.5,
            shards: 1,
            bytes: 100,
        };
        let b = Sample {
            depth: 0,
            stalled: Duration::ZERO,
            pending: 2,
            pending_age: 7.0,
            shards: 2,
            bytes: 50,
        };
        let c = Sample {
            depth: 1,
            stalled: Duration::from_secs(2),
            ..Sample::default()
        };
        let t = totals([a, b, c]);
        assert_eq!(
            t,
            Totals {
                depth: 4,
                backlogged: 2,
                stalled: 40.0,
                pending: 3,
                pending_age: 7.0,
                shards: 3,
                bytes: 150,
            }
        );
        assert_eq!(totals([]), Totals::default());
    }

    #[test]
    fn the_sampled_backlog_follows_a_pipeline_gauges_and_its_deliveries() {
        let backlogs = Backlogs::default();
        let metrics = crate::adapter::settings::metrics(&Metrics::register(
            &mut prometheus_client::registry::Registry::default(),
        ));
        let counters = Arc::new(Counters::default());
        let id: SourceId = ("ds".into(), "team".into());
        backlogs.insert(&id, &metrics, counters.clone());
        let t0 = Instant::now();
        metrics.queue_depth.set(2);
        assert_eq!(backlogs.sample(t0)[0].stalled, Duration::ZERO);
        let later = backlogs.sample(t0 + Duration::from_secs(5));
        assert_eq!(
            (later[0].depth, later[0].stalled),
            (2, Duration::from_secs(5))
        );
        let delivered = crate::source::deliver::Delivered::Sink { attempts: 1 };
        counters.tally(&delivered, chrono::Utc::now());
        let moved = backlogs.sample(t0 + Duration::from_secs(6));
        assert_eq!(moved[0].stalled, Duration::ZERO, "a delivery ended");
        backlogs.remove(&id);
        assert!(backlogs.sample(t0).is_empty());
    }
}
