//! The supervisor: one loop over the ImageStreamSources and Namespaces of the cluster that
//! keeps one pipeline per served source and one shared watch per [`WatchKey`] in use.
//!
//! A source is observed ([`reconcile::observe`]: its sink, the namespaces it selects, its
//! service account's permissions; the status written) when it appears, when its generation
//! changes, when a Namespace appears, goes or changes labels (sources with a
//! `namespaceSelector`), when an object its sink or dead-letter sink references changes
//! address ([`super::sinkwatch`]: one watch per kind referenced), and every [`RESYNC`] (the
//! safety net, and how sinks of a kind that cannot be watched are seen). One observation of a
//! source runs at a time (one asked for meanwhile follows it), so the last to land is the
//! newest. An observation sets the source's route (events wait
//! while the sink or dead-letter sink does not resolve) and its watch key; a new generation
//! or key restarts its pipeline, after the previous one flushed its checkpoint. A source
//! deleted stops at once; its checkpoint is deleted once its pipeline has stopped.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::counters::{self, Board, Counters};
use super::index::{Index, SourceId, WatchKey, watch_key};
use super::metrics::MtMetrics;
use super::observe::{self, Observation};
use super::pipeline::{self, Pipeline};
use super::settings;
use super::shared::Shared;
use super::sinks::{SinkIndex, SinkKind, SinkObject, refs_of};
use super::sinkwatch::{self, SinkWatch};
use crate::admin::Health;
use crate::source::crd::ImageStreamSource;
use crate::source::flow::Route;
use crate::source::metrics::Metrics;
use crate::source::reconcile::{Context, RESYNC};
use crate::watch_errors::Refusals;

/// Observations in flight at once. Each asks the API server a few requests (three
/// SubjectAccessReviews per namespace, the sink, the status); at start and at every resync all
/// sources are observed, and 1,000 sources at once opened thousands of connections (HTTP/1.1:
/// one per request in flight, kept idle in the client's pool afterwards), the adapter's RSS
/// and the server's load with them, and requests failed to connect. Bounded, they queue.
pub const OBSERVATIONS_IN_FLIGHT: usize = 16;

/// What the supervisor reports to.
pub struct Reports {
    /// The delivery metrics, shared by every source.
    pub metrics: Metrics,
    /// The adapter's gauges.
    pub mt: MtMetrics,
    /// `/readyz`.
    pub health: Arc<Health>,
}

struct Served {
    source: Arc<ImageStreamSource>,
    routes: tokio::sync::watch::Sender<Option<Route>>,
    counters: Arc<Counters>,
    ready: &'static str,
    running: Option<Running>,
    /// One observation at a time per source, so that an older one never lands after a newer
    /// one (its status and route would win): while one runs, another is only asked for.
    observing: Observing,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Observing {
    Idle,
    Running,
    /// Running, and another is wanted once it is done (the source or its sink changed).
    Again,
}

struct Running {
    generation: Option<i64>,
    key: WatchKey,
    stop: CancellationToken,
}

struct Supervisor {
    ctx: Context,
    shared: settings::Shared,
    reports: Reports,
    refusals: Arc<Refusals>,
    sources: BTreeMap<SourceId, Served>,
    index: Index,
    watches: BTreeMap<WatchKey, Shared>,
    sinks: SinkIndex,
    sink_watches: BTreeMap<SinkKind, SinkWatch>,
    sink_changes: mpsc::UnboundedSender<SinkObject>,
    board: Board,
    /// Per source, the last task of its pipelines and checkpoint deletion: the next waits.
    tails: BTreeMap<SourceId, JoinHandle<()>>,
    /// Each observation's source and uid, and what it found.
    observed: mpsc::UnboundedSender<(SourceId, Option<String>, Option<Observation>)>,
    /// [`OBSERVATIONS_IN_FLIGHT`] permits.
    observing: Arc<Semaphore>,
}

/// Serves every ImageStreamSource until `stop` is cancelled; then stops every pipeline
/// (each flushes its checkpoint) and writes the counters a last time.
pub async fn run(
    ctx: Context,
    shared: settings::Shared,
    reports: Reports,
    stop: CancellationToken,
) {
    let client = ctx.client.clone();
    let (observed, mut observations) = mpsc::unbounded_channel();
    let (sink_changes, mut sink_changed) = mpsc::unbounded_channel();
    let board = Board::default();
    let counters_stop = CancellationToken::new();
    let writer = tokio::spawn(counters::run(
        client.clone(),
        board.clone(),
        counters_stop.clone(),
    ));
    let mut s = Supervisor {
        refusals: Refusals::new(reports.health.clone(), "ImageStream"),
        ctx,
        shared,
        reports,
        sources: BTreeMap::new(),
        index: Index::default(),
        watches: BTreeMap::new(),
        sinks: SinkIndex::default(),
        sink_watches: BTreeMap::new(),
        sink_changes,
        board,
        tails: BTreeMap::new(),
        observed,
        observing: Arc::new(Semaphore::new(OBSERVATIONS_IN_FLIGHT)),
    };
    let mut sources = watcher(
        Api::<ImageStreamSource>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let mut namespaces = watcher(
        Api::<Namespace>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .boxed();
    let mut listing: Option<BTreeMap<SourceId, Arc<ImageStreamSource>>> = None;
    let mut listed = false;
    let mut labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            Some(event) = sources.next() => match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(source)) => {
                    listing.get_or_insert_default().insert(id_of(&source), Arc::new(source));
                }
                Ok(watcher::Event::InitDone) => {
                    let list = listing.take().unwrap_or_default();
                    if !listed {
                        s.sweep(&list).await;
                        listed = true;
                        s.reports.health.set_ready(true);
                    }
                    let gone: Vec<SourceId> =
                        s.sources.keys().filter(|id| !list.contains_key(*id)).cloned().collect();
                    for id in gone {
                        s.remove(&id);
                    }
                    for source in list.into_values() {
                        s.upsert(source);
                    }
                }
                Ok(watcher::Event::Apply(source)) => s.upsert(Arc::new(source)),
                Ok(watcher::Event::Delete(source)) => s.remove(&id_of(&source)),
                Err(e) => warn!(error = %e, "ImageStreamSource watch failed; resuming with backoff"),
            },
            Some(event) = namespaces.next() => {
                let changed = match event {
                    Ok(watcher::Event::InitApply(ns) | watcher::Event::Apply(ns)) => {
                        let now = ns.labels().clone();
                        labels.insert(ns.name_any(), now.clone()) != Some(now)
                    }
                    Ok(watcher::Event::Delete(ns)) => labels.remove(&ns.name_any()).is_some(),
                    Ok(_) => false,
                    Err(e) => {
                        warn!(error = %e, "Namespace watch failed; resuming with backoff");
                        false
                    }
                };
                if changed && listed {
                    s.observe_where(|src| src.spec.namespace_selector.is_some());
                }
            }
            Some((id, uid, observation)) = observations.recv() => s.observed(&id, uid, observation),
            Some(object) = sink_changed.recv() => {
                for id in s.sinks.referencing(&object) {
                    s.observe(&id);
                }
            }
            _ = resync.tick(), if listed => {
                s.tails.retain(|_, tail| !tail.is_finished());
                s.observe_where(|_| true);
            }
        }
    }
    let ids: Vec<SourceId> = s.sources.keys().cloned().collect();
    for id in &ids {
        s.stop_running(id);
    }
    for (_, tail) in std::mem::take(&mut s.tails) {
        let _ = tail.await;
    }
    counters_stop.cancel();
    let _ = writer.await;
}

fn id_of(source: &ImageStreamSource) -> SourceId {
    (source.namespace().unwrap_or_default(), source.name_any())
}

impl Supervisor {
    /// Deletes the checkpoints of sources not in `list` (before any pipeline reads one).
    async fn sweep(&self, list: &BTreeMap<SourceId, Arc<ImageStreamSource>>) {
        let uids = list
            .iter()
            .map(|(id, s)| (id.clone(), s.uid().unwrap_or_default()))
            .collect();
        if let Err(e) = super::cleanup::sweep(&self.ctx.client, &uids).await {
            warn!(error = %e, "sweeping the checkpoints of deleted sources failed; they stay");
        }
    }

    /// A source seen: kept, and observed when it is new or its spec changed.
    fn upsert(&mut self, source: Arc<ImageStreamSource>) {
        let id = id_of(&source);
        let observe = match self.sources.get_mut(&id) {
            Some(served) => {
                let changed = served.source.metadata.generation != source.metadata.generation
                    || served.source.uid() != source.uid();
                served.source = source.clone();
                changed
            }
            None => {
                let counters = Arc::new(Counters::from_status(
                    source.status.as_ref().and_then(|s| s.deliveries.as_ref()),
                ));
                self.board
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.clone(), counters.clone());
                self.sources.insert(
                    id.clone(),
                    Served {
                        source: source.clone(),
                        routes: tokio::sync::watch::channel(None).0,
                        counters,
                        ready: "Unknown",
                        running: None,
                        observing: Observing::Idle,
                    },
                );
                info!(namespace = %id.0, source = %id.1, "ImageStreamSource added");
                true
            }
        };
        if observe {
            self.set_refs(&id, refs_of(&source));
            self.observe(&id);
        }
        self.gauges();
    }

    fn observe_where(&mut self, which: impl Fn(&ImageStreamSource) -> bool) {
        let ids: Vec<SourceId> = (self.sources.iter())
            .filter(|(_, served)| which(&served.source))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.observe(id);
        }
    }

    /// Observes the source `id` as it is now, once the observation in flight (if any) is done.
    fn observe(&mut self, id: &SourceId) {
        let Some(served) = self.sources.get_mut(id) else {
            return;
        };
        if served.observing != Observing::Idle {
            served.observing = Observing::Again;
            return;
        }
        served.observing = Observing::Running;
        let (source, tx, id) = (served.source.clone(), self.observed.clone(), id.clone());
        let (ctx, permits) = (self.ctx.clone(), self.observing.clone());
        tokio::spawn(async move {
            // Never closed, so a permit always comes.
            let _permit = permits.acquire_owned().await;
            let uid = source.uid();
            let o = observe::run(ctx, source).await;
            let _ = tx.send((id, uid, o));
        });
    }

    /// An observation came back (None: it failed, and the next resync tries again): the next
    /// one asked for meanwhile starts, and the route, the readiness and the pipeline follow it.
    fn observed(&mut self, id: &SourceId, uid: Option<String>, o: Option<Observation>) {
        let Some(served) = self.sources.get_mut(id).filter(|s| s.source.uid() == uid) else {
            return; // Of a source deleted (and maybe created again: its own runs).
        };
        let again = served.observing == Observing::Again;
        served.observing = Observing::Idle;
        if again {
            self.observe(id);
        }
        let (Some(o), Some(served)) = (o, self.sources.get_mut(id)) else {
            return;
        };
        if served.source.uid() != Some(o.uid.clone())
            || served.source.metadata.generation != o.generation
        {
            return; // Stale: a newer observation is on its way.
        }
        served.ready = o.ready;
        served.routes.send_if_modified(|r| {
            let changed = *r != o.route;
            *r = o.route.clone();
            changed
        });
        let source = served.source.clone();
        let settings = settings::of(&source, &self.shared);
        if let Err(why) = &settings {
            warn!(namespace = %o.id.0, source = %o.id.1, reason = %why, "the source cannot be served");
        }
        if o.denied.is_none() && o.scope.is_some() {
            // The reviews could not be asked: what the source is served stays as it was (never
            // more than its service account was last seen to be allowed), until they can.
            self.gauges();
            return;
        }
        let mode = source
            .spec
            .mode
            .unwrap_or(crate::source::crd::Mode::ImageStreamTag);
        let denied = o.denied.clone().unwrap_or_default();
        let key = settings
            .as_ref()
            .ok()
            .and_then(|_| watch_key(o.scope.as_ref(), &denied, mode));
        let current = served
            .running
            .as_ref()
            .map(|r| (r.generation, r.key.clone()));
        if current == key.clone().map(|k| (o.generation, k)) {
            self.gauges();
            return;
        }
        self.stop_running(&o.id);
        match (key, settings) {
            (Some(key), Ok(settings)) => self.start(&o.id, key, settings),
            _ => self.set_key(&o.id, None),
        }
        self.gauges();
    }

    /// Starts the pipeline of `id` on the watch `key`, after its previous one.
    fn start(&mut self, id: &SourceId, key: WatchKey, settings: crate::source::Settings) {
        self.set_key(id, Some(key.clone()));
        let (Some(watch), Some(served)) = (self.watches.get(&key), self.sources.get_mut(id)) else {
            return;
        };
        let stop = CancellationToken::new();
        let pipeline = Pipeline {
            id: id.clone(),
            settings: Arc::new(settings),
            owner: settings::owner(&served.source),
            selector: served.source.spec.selector.clone(),
            seen: watch.join(id.clone()),
            scopes: watch.scopes(),
            routes: served.routes.subscribe(),
            counters: served.counters.clone(),
            metrics: settings::metrics(&self.reports.metrics),
        };
        info!(namespace = %id.0, source = %id.1, namespaces = %key.describe(), "serving the source");
        served.running = Some(Running {
            generation: served.source.metadata.generation,
            key,
            stop: stop.clone(),
        });
        let before = self.tails.remove(id);
        let client = self.ctx.client.clone();
        self.tails.insert(
            id.clone(),
            tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.await;
                }
                pipeline::run(client, pipeline, stop).await;
            }),
        );
    }

    /// Stops the pipeline of `id`, if one runs (its task ends after its last flush).
    fn stop_running(&mut self, id: &SourceId) {
        let Some(running) = self.sources.get_mut(id).and_then(|s| s.running.take()) else {
            return;
        };
        running.stop.cancel();
        if let Some(watch) = self.watches.get(&running.key) {
            watch.leave(id.clone());
        }
    }

    /// Moves `id` to the watch `key` in the index, starting and stopping watches.
    fn set_key(&mut self, id: &SourceId, key: Option<WatchKey>) {
        let change = self.index.set(id, key);
        if let Some(start) = change.start {
            let watch = Shared::start(
                &self.ctx.client,
                &start,
                self.reports.metrics.clone(),
                self.refusals.clone(),
            );
            self.watches.insert(start, watch);
        }
        if let Some(stop) = change.stop {
            info!(namespaces = %stop.describe(), "shared ImageStream watch stopped");
            self.watches.remove(&stop);
        }
        self.reports.mt.watches.set(self.watches.len() as i64);
    }

    /// `id` now references the sink objects `refs`: the watches of their kinds follow.
    fn set_refs(&mut self, id: &SourceId, refs: std::collections::BTreeSet<SinkObject>) {
        let change = self.sinks.set(id, refs);
        for kind in change.stop {
            info!(kind = %kind.describe(), "sink watch stopped");
            self.sink_watches.remove(&kind);
        }
        for kind in change.start {
            let watch = sinkwatch::start(&self.ctx.client, kind.clone(), self.sink_changes.clone());
            self.sink_watches.insert(kind, watch);
        }
    }

    /// A source deleted: its pipeline stops now, its checkpoint is deleted once it has.
    fn remove(&mut self, id: &SourceId) {
        if !self.sources.contains_key(id) {
            return;
        }
        self.stop_running(id);
        self.set_key(id, None);
        self.set_refs(id, Default::default());
        self.sources.remove(id);
        self.board
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        info!(namespace = %id.0, source = %id.1, "ImageStreamSource deleted; stopping it");
        let before = self.tails.remove(id);
        let (client, gone) = (self.ctx.client.clone(), id.clone());
        self.tails.insert(
            id.clone(),
            tokio::spawn(async move {
                if let Some(before) = before {
                    let _ = before.await;
                }
                if let Err(e) = super::cleanup::delete(&client, &gone).await {
                    warn!(namespace = %gone.0, source = %gone.1, error = %e, "deleting the checkpoint of a deleted source failed; the next start sweeps it");
                }
            }),
        );
        self.gauges();
    }

    fn gauges(&self) {
        self.reports
            .mt
            .set_sources(self.sources.values().map(|s| s.ready));
    }
}
