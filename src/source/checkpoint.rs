//! The checkpoint: what the source has delivered, kept in the cluster, so that a restart (or a
//! new pod on another node) diffs the streams against it and sends exactly what it has not sent.
//!
//! **What is stored.** One entry per ImageStream: the [`StreamState`] the receivers have been
//! told about (the stream's uid and, per tag, the digest and generation last delivered as
//! current and the generation of the last import failure delivered), in the compact text of
//! [`entry`]. That is the minimum: the diff needs the uid to tell a re-created stream from the
//! old one, the generation to find the history entries not yet sent (several imports while
//! down are all sent, oldest first), the digest for `previousDigest` and for a tag whose
//! history was pruned, and the failure generation so an `ImportSuccess=False` already reported
//! is not reported again.
//!
//! **Where.** ConfigMaps in the source's own namespace, labelled `app.kubernetes.io/name:
//! imagegate`, `app.kubernetes.io/component: source-checkpoint`: the shards
//! `{prefix}-h{bits}`, whose number follows the size of the state ([`layout`]: a shard splits
//! past 512 KiB and merges back when small, so none comes near a ConfigMap's 1 MiB), and the
//! marker `{prefix}`, written once the first complete checkpoint is. The source needs `list`,
//! `create`, `patch` and `delete` on ConfigMaps in its namespace.
//!
//! **Writes.** [`Checkpoint::record`] only changes memory. [`Checkpoint::flush`], every
//! `flush_interval`, first splits and merges shards as their sizes require, then writes: a new
//! shard whole (a create), a changed one as one JSON merge patch carrying only its changed keys
//! (`null` removes one), so a flush costs a few requests however many streams exist; after that
//! it deletes the shards a split or a merge replaced and, the first time, writes the marker.
//! The API server's answers (the whole shard) are not parsed. A write that fails keeps its
//! changes pending for the next flush.
//!
//! **Reads.** [`Checkpoint::load`] reads every shard, one per page, and [`layout::restore`]
//! resolves what a crash mid-split left. [`Loaded`] says, per stream, what to do at the start:
//! diff against the recorded state; nothing recorded in a range the checkpoint holds: a new
//! stream; nothing recorded in a range whose shard is gone, or an unreadable entry, while the
//! marker says this is not a first start: the checkpoint was lost, so the stream's current tag
//! events are sent again (their ids are the same as the first time: a duplicate, never a loss).
//!
//! **Crashes.** The source records a state after the sink accepted the event, and flushes
//! later, so a crash between delivery and flush re-sends the last `flush_interval` of events
//! with the same ids (at least once). A clean shutdown ([`Checkpoint::run`]) flushes last, so a
//! clean restart re-sends nothing. When writes keep failing, [`Checkpoint::not_ready`] says why
//! and what to do, and the metrics count the failures and the pending age.

mod config;
mod entry;
mod error;
pub mod fit;
mod health;
pub mod layout;
mod load;
mod owner;
mod probe;
mod write;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use self::health::{Persistence, Say};
use self::layout::Layout;
use super::metrics::Metrics;
use super::state::StreamState;
use crate::api::status_code as code;
use crate::runtime::admin::Health;

pub use self::config::{Cap, CheckpointConfig, DEFAULT_WRITE_BUDGET, MAX_PAUSE, pause};
pub use self::entry::{StreamKey, data_key, decode_state, fnv1a64};
pub use self::error::CheckpointError;
pub use self::health::FailureKind;
pub use self::layout::{MAX_SHARD_BYTES, MERGE_BELOW, SPLIT_ABOVE};
pub(crate) use self::load::found_shard;
pub use self::load::{Loaded, data_bytes};
pub use self::owner::{
    CheckpointOwner, MANAGED_BY, OWNED_COMPONENT, OWNER_LABEL, OWNER_NAMESPACE_LABEL,
    OWNER_UID_LABEL,
};

/// The annotation with a shard's epoch (which of two overlapping shards is newer).
pub const EPOCH_ANNOTATION: &str = "imagegate.dev/checkpoint-epoch";
/// The marker's data key with the checkpoint format.
pub const FORMAT_KEY: &str = "format";
/// Tries per shard and flush; a flush that still fails keeps its changes for the next one.
pub const WRITE_ATTEMPTS: u32 = 4;
/// How many shards are written at once.
const CONCURRENT_WRITES: usize = 4;
/// A flush that takes longer counts as failed (kube's client retries 429, 503 and 504 itself,
/// for minutes): its unfinished writes stay pending, and the health says so.
const FLUSH_DEADLINE: Duration = Duration::from_secs(30);
/// The delivered state of every stream, kept in memory and written to the cluster.
pub struct Checkpoint {
    api: Api<ConfigMap>,
    /// Writes go through the raw client: the API server answers each with the whole shard,
    /// which is not needed, so it is not parsed.
    client: kube::Client,
    cfg: CheckpointConfig,
    /// The source it belongs to (multi-tenant), or None.
    owner: Option<CheckpointOwner>,
    layout: Mutex<Layout>,
    persistence: Mutex<Persistence>,
    /// One flush at a time.
    flushing: tokio::sync::Mutex<()>,
    /// Bytes of shards written since [`Checkpoint::run`] last looked.
    written: std::sync::atomic::AtomicU64,
    /// Every write goes through it: none after this process stopped leading, none that could
    /// land after another replica may have taken over (F-11).
    fence: crate::runtime::leader::Fence,
}

impl Checkpoint {
    /// Fences every write of this checkpoint by the Lease `fence` follows
    /// ([`crate::runtime::leader::Fence`]): a replica that lost it, or could not renew it in time, writes
    /// nothing that could overwrite a newer leader's checkpoint.
    pub(crate) fn set_fence(&mut self, fence: crate::runtime::leader::Fence) {
        self.fence = fence;
    }

    /// The labels of the ConfigMaps this checkpoint writes.
    fn labels(&self) -> BTreeMap<String, String> {
        CheckpointOwner::labels(self.owner.as_ref())
    }

    /// The metadata every ConfigMap this checkpoint creates carries: its name, namespace and
    /// labels (when owned, the owner's uid too).
    fn metadata(&self, name: &str) -> serde_json::Value {
        let mut labels = self.labels();
        if let Some(owner) = &self.owner {
            labels.insert(OWNER_UID_LABEL.into(), owner.uid.clone());
        }
        serde_json::json!({
            "name": name,
            "namespace": self.cfg.namespace,
            "labels": labels,
        })
    }

    fn layout(&self) -> MutexGuard<'_, Layout> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn persistence(&self) -> MutexGuard<'_, Persistence> {
        self.persistence.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a stream's delivered state (None: forget the stream, after its deletion was
    /// delivered). Only in memory; the next flush writes it.
    pub fn record(&self, key: StreamKey, state: Option<StreamState>) {
        let value = state.map(|s| entry::encode(&key, &entry::data_key(&key), &s));
        let n = {
            let mut layout = self.layout();
            layout.set(&key, value);
            layout.change_number()
        };
        self.persistence().changed(n, Instant::now());
    }

    /// The state recorded for a stream (delivered, written or not yet), if any. The checkpoint
    /// is the one copy of the delivered state the source keeps.
    pub fn get(&self, key: &StreamKey) -> Option<StreamState> {
        entry::decode_state(self.layout().get(key)?)
    }

    /// How many entries are waiting to be written.
    pub fn pending(&self) -> usize {
        self.layout().pending()
    }

    /// Why the source is not ready because of its checkpoint (None: it is being persisted).
    pub fn not_ready(&self) -> Option<String> {
        self.persistence().not_ready(&self.cfg.namespace)
    }

    /// Splits and merges shards as needed, then writes: new shards whole, changed ones as a
    /// merge patch of their changed keys, each retried with backoff; then, once every shard
    /// is written, deletes the shards they replaced and writes the marker. Returns whether the
    /// whole layout is in the cluster; on error the failed changes stay pending (the other
    /// shards are still written).
    pub async fn flush(&self) -> Result<bool, CheckpointError> {
        let _one = self.flushing.lock().await;
        let plan = {
            let mut layout = self.layout();
            layout.rebalance();
            layout.plan()
        };
        let jobs = (plan.whole.into_iter().map(|p| (p, true)))
            .chain(plan.patch.into_iter().map(|p| (p, false)));
        let results: Vec<_> = futures::stream::iter(jobs)
            .map(|(p, whole)| self.write_leaf(p, whole))
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut first_error = None;
        for result in results {
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
        let deletable = self.layout().deletable();
        for id in deletable {
            if let Err(e) = self.delete_shard(id).await {
                first_error.get_or_insert(e);
            }
        }
        let ready = {
            let layout = self.layout();
            layout.all_written().then_some(!layout.marker)
        };
        if ready == Some(true)
            && let Err(e) = self.write_marker().await
        {
            first_error.get_or_insert(e);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(self.layout().all_written()),
        }
    }

    /// [`Checkpoint::run`] once `listed` turns true, until `done` is cancelled. Never before:
    /// a first start that flushed an empty checkpoint (and its marker) and then crashed would
    /// look like a restart that lost every stream. Readiness then follows whether the
    /// checkpoint is being written, and `on_listed` is called (the multi-tenant adapter's
    /// supervisor is told here rather than by a task of each source's own). Returns at once,
    /// flushing nothing, when `done` is cancelled or `listed`'s sender goes before the first
    /// list.
    pub(crate) async fn run_once_listed(
        self: Arc<Self>,
        mut listed: tokio::sync::watch::Receiver<bool>,
        metrics: Metrics,
        health: Arc<Health>,
        done: tokio_util::sync::CancellationToken,
        on_listed: impl FnOnce() + Send,
    ) {
        let listed = tokio::select! {
            biased;
            () = done.cancelled() => false,
            listed = listed.wait_for(|listed| *listed) => listed.is_ok(),
        };
        if !listed {
            return;
        }
        health.set_ready(true);
        on_listed();
        self.run(metrics, health, done.cancelled_owned()).await;
    }

    /// Flushes at once, then after each flush waits its [`pause`] (`flush_interval`, longer when
    /// the flush used up the write budget), until `shutdown` completes; then flushes a last time
    /// so a clean restart re-sends nothing. Keeps the metrics and `not_ready` current; says at
    /// error level what to do when writes keep failing; sets `health`'s `checkpoint` condition.
    pub async fn run(
        self: Arc<Self>,
        metrics: Metrics,
        health: Arc<Health>,
        shutdown: impl Future<Output = ()>,
    ) {
        tokio::pin!(shutdown);
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(wait) => {
                    let outcome = self.flush_within(FLUSH_DEADLINE).await;
                    self.observe(&metrics, outcome);
                    health.set_condition("checkpoint", self.not_ready());
                    let written = self.take_written(&metrics);
                    wait = pause(self.cfg.flush_interval, written, self.cfg.write_budget);
                }
            }
        }
        let outcome = self.flush_within(FLUSH_DEADLINE).await;
        match &outcome {
            Ok(_) => {
                tracing::info!(namespace = %self.cfg.namespace, "checkpoint flushed on shutdown")
            }
            Err(e) => {
                tracing::error!(error = %e, reason = e.failure().label(), pending = self.pending(), "the last checkpoint flush failed: the changes delivered since the last good flush will be sent again after the restart")
            }
        }
        self.observe(&metrics, outcome);
        self.take_written(&metrics);
    }

    /// The bytes of shards written since the last call, counted in the metrics.
    fn take_written(&self, metrics: &Metrics) -> u64 {
        let written = self.written.swap(0, std::sync::atomic::Ordering::Relaxed);
        metrics.checkpoint_written_bytes.inc_by(written);
        written
    }

    /// [`Checkpoint::flush`], failed with [`CheckpointError::Timeout`] if it takes longer than
    /// `deadline` (what it wrote stays written; the rest stays pending).
    async fn flush_within(&self, deadline: Duration) -> Result<bool, CheckpointError> {
        // Boxed: a flush's requests are a large future, held only while it runs; inline, it
        // would be part of the flushing task's size for the task's whole life (a task per
        // source in the multi-tenant adapter).
        tokio::time::timeout(deadline, Box::pin(self.flush()))
            .await
            .unwrap_or(Err(CheckpointError::Timeout(deadline)))
    }

    /// Reports a flush's outcome to the metrics, the persistence state and the log.
    fn observe(&self, metrics: &Metrics, outcome: Result<bool, CheckpointError>) {
        let now = Instant::now();
        let (shards, bytes, pending, oldest) = {
            let layout = self.layout();
            let oldest = layout.oldest_pending();
            (
                layout.shard_count(),
                layout.bytes(),
                layout.pending(),
                oldest,
            )
        };
        let mut p = self.persistence();
        let age = p.pending_age(oldest, now);
        metrics.checkpoint_shards.set(shards as i64);
        metrics.checkpoint_bytes.set(bytes as i64);
        metrics.checkpoint_pending.set(pending as i64);
        metrics.checkpoint_pending_age.set(age.as_secs_f64());
        let error = outcome.as_ref().err().map(|e| (e.failure(), e.to_string()));
        if let Some((kind, _)) = &error {
            metrics
                .checkpoint_write_failures
                .get_or_create(&Metrics::reason(kind.label()))
                .inc();
        }
        let say = p.flushed(outcome.map_err(|e| (e.failure(), e.to_string())), now);
        match (say, error) {
            (Say::Failing, Some((kind, error))) => tracing::error!(
                namespace = %self.cfg.namespace,
                %error,
                reason = kind.label(),
                pending,
                oldest_pending_seconds = age.as_secs(),
                remedy = %kind.remedy(&self.cfg.namespace),
                "checkpoint writes keep failing: what was delivered since is not persisted, and a restart now would send it again"
            ),
            (Say::Recovered, _) => {
                tracing::info!(namespace = %self.cfg.namespace, "checkpoint writes succeed again")
            }
            (_, Some((kind, error))) => {
                tracing::warn!(%error, reason = kind.label(), pending, "checkpoint flush failed; retrying next interval")
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flushes_wait_the_interval_unless_the_last_one_used_up_the_write_budget() {
        let interval = Duration::from_millis(500);
        let budget = 2 * 1024 * 1024;
        // A few changed streams: one shard of 300 kB is well within the budget.
        assert_eq!(pause(interval, 300_000, budget), interval);
        assert_eq!(pause(interval, 0, budget), interval);
        // A burst that changed all 64 shards of 100,000 streams (20 MB): ten seconds.
        let burst = pause(interval, 20 * 1024 * 1024, budget);
        assert_eq!(burst, Duration::from_secs(10));
        // Never longer than MAX_PAUSE, whatever was written; a zero budget is no division by zero.
        assert_eq!(pause(interval, u64::MAX, budget), MAX_PAUSE);
        assert_eq!(pause(interval, 1, 0), Duration::from_secs(1));
    }
}
