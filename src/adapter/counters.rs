//! Each source's delivery counters (`status.deliveries`): counted as deliveries end, written
//! by one task when they changed, at once if the source's last write is older than [`INTERVAL`],
//! else once that much has passed ([`due`]): a quiet source's first delivery shows within a
//! second, and a busy one costs the API server at most two status writes a minute, however many
//! events it delivers. They start from what the status held, so they keep counting across
//! adapter restarts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::index::SourceId;
use crate::adapter::crd::ImageStreamSource;
use crate::adapter::crd::status::Deliveries;
use crate::source::deliver::Delivered;

/// How long after a source's counters were written they may be written again.
pub const INTERVAL: Duration = Duration::from_secs(30);

/// How often the writer looks for counters to write.
const TICK: Duration = Duration::from_secs(1);

/// Whether counters last written at `last` (None: never by this process) may be written at
/// `now` (pure).
pub(crate) fn due(last: Option<Instant>, now: Instant) -> bool {
    last.is_none_or(|at| now.duration_since(at) >= INTERVAL)
}

/// One source's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    delivered: AtomicI64,
    dead_lettered: AtomicI64,
    failed: AtomicI64,
    last_delivered: Mutex<Option<String>>,
    changed: AtomicBool,
    /// When they were last written.
    written: Mutex<Option<Instant>>,
}

impl Counters {
    /// Counters that go on from `status` (what the source's status holds).
    pub(crate) fn from_status(status: Option<&Deliveries>) -> Counters {
        let d = status.cloned().unwrap_or_default();
        Counters {
            delivered: AtomicI64::new(d.delivered),
            dead_lettered: AtomicI64::new(d.dead_lettered),
            failed: AtomicI64::new(d.failed),
            last_delivered: Mutex::new(d.last_delivered_time),
            changed: AtomicBool::new(false),
            written: Mutex::new(None),
        }
    }

    /// Counts a delivery that ended at `now`.
    pub(crate) fn tally(&self, delivered: &Delivered, now: chrono::DateTime<chrono::Utc>) {
        match delivered {
            Delivered::Sink { .. } => {
                self.delivered.fetch_add(1, Ordering::Relaxed);
                let time = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                *self
                    .last_delivered
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(time);
            }
            Delivered::DeadLettered { .. } => {
                self.dead_lettered.fetch_add(1, Ordering::Relaxed);
            }
            Delivered::Failed { .. } => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.changed.store(true, Ordering::Release);
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> Deliveries {
        Deliveries {
            delivered: self.delivered.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            last_delivered_time: self
                .last_delivered
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }

    fn written(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether they changed since the last call (and resets that).
    fn take_changed(&self) -> bool {
        self.changed.swap(false, Ordering::AcqRel)
    }
}

/// The counters of every source served, by source.
pub(crate) type Board = Arc<Mutex<BTreeMap<SourceId, Arc<Counters>>>>;

/// Writes the counters that changed and are [`due`], every [`TICK`], until `stop`; every one
/// that changed once more at the end.
pub(crate) async fn run(client: kube::Client, board: Board, stop: CancellationToken) {
    loop {
        let stopping = tokio::select! {
            () = stop.cancelled() => true,
            () = tokio::time::sleep(TICK) => false,
        };
        let now = Instant::now();
        let changed: Vec<(SourceId, Arc<Counters>)> = board
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, c)| stopping || due(*c.written(), now))
            .filter(|(_, c)| c.take_changed())
            .map(|(id, c)| (id.clone(), c.clone()))
            .collect();
        for (id, counters) in changed {
            *counters.written() = Some(now);
            if let Err(e) = write(&client, &id, &counters.snapshot()).await {
                // Written at the next tick.
                counters.changed.store(true, Ordering::Release);
                *counters.written() = None;
                warn!(namespace = %id.0, source = %id.1, error = %e, "writing the delivery counters failed");
            }
        }
        if stopping {
            return;
        }
    }
}

async fn write(client: &kube::Client, id: &SourceId, d: &Deliveries) -> Result<(), kube::Error> {
    let api: Api<ImageStreamSource> = Api::namespaced(client.clone(), &id.0);
    let patch = json!({"status": {"deliveries": d}});
    match api
        .patch_status(&id.1, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        // The source is gone: nothing to count.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_written_at_once_when_quiet_and_at_most_every_interval_when_busy() {
        let t0 = Instant::now();
        assert!(due(None, t0), "never written: at once");
        assert!(!due(Some(t0), t0 + Duration::from_secs(29)));
        assert!(due(Some(t0), t0 + INTERVAL));
    }

    #[test]
    fn counters_go_on_from_the_status_and_say_when_they_changed() {
        let c = Counters::from_status(Some(&Deliveries {
            delivered: 4,
            ..Default::default()
        }));
        assert!(!c.take_changed());
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .to_utc();
        c.tally(&Delivered::Sink { attempts: 1 }, now);
        c.tally(
            &Delivered::DeadLettered {
                attempts: 3,
                code: Some(500),
            },
            now,
        );
        c.tally(
            &Delivered::Failed {
                attempts: 1,
                error: "x".into(),
            },
            now,
        );
        assert!(c.take_changed());
        assert!(!c.take_changed());
        assert_eq!(
            c.snapshot(),
            Deliveries {
                delivered: 5,
                dead_lettered: 1,
                failed: 1,
                last_delivered_time: Some("2026-12-02T10:00:00Z".into()),
            }
        );
    }
}
