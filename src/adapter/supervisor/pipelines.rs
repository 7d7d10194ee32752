//! The tasks of each source, one after the other: its pipeline (started on a feed, stopped
//! with a flush of its checkpoint), the next pipeline once the previous one has stopped, and,
//! once a deleted source's last pipeline has stopped, the deletion of its checkpoint.

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Supervisor;
use crate::adapter::index::{SourceId, WatchKey};
use crate::adapter::join::Room;
use crate::adapter::pipeline::{self, Pipeline};
use crate::adapter::settings;

/// A source's pipeline that runs: what it was started for, and how to stop it.
pub(super) struct Running {
    pub(super) generation: Option<i64>,
    pub(super) key: WatchKey,
    /// Turns true once the pipeline has recorded the first list of its namespaces.
    pub(super) listed: tokio::sync::watch::Receiver<bool>,
    stop: CancellationToken,
}

impl Supervisor {
    /// Starts the pipeline of `id`, served `key`, after its previous one.
    pub(super) fn start(
        &mut self,
        id: &SourceId,
        key: WatchKey,
        settings: crate::source::Settings,
    ) {
        self.set_key(id, Some(key.clone()));
        let (Some(feed), Some(served)) = (self.feeds.get(&key.whole), self.sources.get_mut(id))
        else {
            return;
        };
        let stop = CancellationToken::new();
        let (listed, listed_rx) = tokio::sync::watch::channel(false);
        let metrics = settings::metrics(&self.reports.metrics);
        self.backlogs.insert(id, &metrics, served.counters.clone());
        let pipeline = Pipeline {
            id: id.clone(),
            settings: Arc::new(settings),
            owner: settings::owner(&served.source),
            selector: served.source.spec.selector.clone(),
            fed: feed.join(id.clone(), key.namespaces.clone()),
            room: Room {
                id: id.clone(),
                depth: metrics.queue_depth.clone(),
                bound: self.shared.max_queued,
                shedding: self.reports.mt.shedding.clone(),
                sheds: self.reports.mt.sheds.clone(),
            },
            scopes: key.scopes(),
            whole: key.whole,
            lister: self.lister.clone(),
            routes: served.routes.subscribe(),
            counters: served.counters.clone(),
            metrics,
            listed,
            relisted: self.relisted.clone(),
            fence: self.shared.fence.clone(),
            troubles: self.troubles.clone(),
        };
        info!(namespace = %id.0, source = %id.1, namespaces = %key.describe(), "serving the source");
        served.running = Some(Running {
            generation: served.source.metadata.generation,
            key,
            listed: listed_rx,
            stop: stop.clone(),
        });
        let client = self.ctx.client.clone();
        self.then(id, pipeline::run(client, pipeline, stop));
    }

    /// Stops the pipeline of `id`, if one runs (its task ends after its last flush).
    pub(super) fn stop_running(&mut self, id: &SourceId) {
        let Some(running) = self.sources.get_mut(id).and_then(|s| s.running.take()) else {
            return;
        };
        running.stop.cancel();
        self.backlogs.remove(id);
        if let Some(feed) = self.feeds.get(&running.key.whole) {
            feed.leave(id.clone());
        }
    }

    /// Deletes the checkpoint of the deleted source `id`, once its last pipeline has stopped.
    pub(super) fn delete_checkpoint(&mut self, id: &SourceId) {
        let (client, gone) = (self.ctx.client.clone(), id.clone());
        let namespace = self.shared.checkpoint_namespace.clone();
        self.then(id, async move {
            if let Err(e) = crate::adapter::cleanup::delete(&client, &namespace, &gone).await {
                warn!(namespace = %gone.0, source = %gone.1, error = %e, "deleting the checkpoint of a deleted source failed; the next start sweeps it");
            }
        });
    }

    /// Runs `task` for `id` once the source's previous task (if any) has ended.
    fn then(&mut self, id: &SourceId, task: impl Future<Output = ()> + Send + 'static) {
        let before = self.tails.remove(id);
        // Boxed: a future captured by an async block and awaited there is stored twice in the
        // block (as the capture and as the awaited value), and a pipeline's is about 2 KiB, for
        // every source (BENCHMARKS.md, issue 15).
        let task = Box::pin(task);
        self.tails.insert(
            id.clone(),
            tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.await;
                }
                task.await;
            }),
        );
    }
}
