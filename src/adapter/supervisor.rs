//! The supervisor: one loop over the ImageStreamSources and Namespaces of the cluster that
//! keeps one pipeline per served source and a feed (one ImageStream watch of every namespace) per
//! way of reading streams in use.
//!
//! A source is observed ([`super::reconcile::observe`]: its sink, the namespaces it selects, its
//! service account's permissions; the status written) when it appears, when its generation
//! changes, when a Namespace appears, goes or changes labels (sources with a
//! `namespaceSelector`), when an object its sink or dead-letter sink references changes
//! address ([`super::sinkwatch`]: one watch per kind referenced), when RBAC changes where its
//! reviews ask ([`super::rbacwatch`], [`RBAC_SETTLE`] after the first change of a burst), and at its
//! own resync ([`resync_after`]): every [`SAFETY_NET`] (about an hour, spread) while those
//! watches work, every [`RESYNC`] while one it depends on does not or its last observation
//! failed. So an idle source costs the API server no request between safety nets. One observation of a
//! source runs at a time (one asked for meanwhile follows it), so the last to land is the
//! newest. An observation sets the source's route (events wait
//! while the sink or dead-letter sink does not resolve) and its watch key; a new generation
//! or key restarts its pipeline, after the previous one flushed its checkpoint. A source
//! deleted stops at once; its checkpoint is deleted once its pipeline has stopped.
//!
//! This file holds the loop and the indexes it keeps (sources, feeds, sink watches);
//! [`observing`] when a source is observed and what an observation changes; [`pipelines`] each
//! source's tasks, one after the other (its pipelines, then its checkpoint's deletion);
//! [`watches`] the feeds and the sink watches the indexes call for.

mod observing;
mod pipelines;
mod watches;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use self::observing::Observing;
use self::pipelines::Running;
use super::backlog::{self, Backlogs};
use super::counters::{self, Board, Counters};
use super::feed::Feed;
use super::index::{Index, SourceId};
use super::join::{LISTS_IN_FLIGHT, Lister};
use super::metrics::MtMetrics;
use super::observe::Observation;
use super::rbacwatch::{self, Changed, RbacWatch};
use super::settings;
use super::sinkrefs::{SinkIndex, SinkKind, SinkObject, refs_of};
use super::sinkwatch::SinkWatch;
use crate::adapter::crd::ImageStreamSource;
use crate::adapter::reconcile::{Context, RESYNC};
use crate::runtime::admin::Health;
use crate::runtime::watch_errors::Refusals;
use crate::source::deliver::job::Route;
use crate::source::metrics::Metrics;

/// Observations in flight at once. Each asks the API server a few requests (three
/// SubjectAccessReviews per namespace, the sink, the status); at start and at every resync all
/// sources are observed, and 1,000 sources at once opened thousands of connections (HTTP/1.1:
/// one per request in flight, kept idle in the client's pool afterwards), the adapter's RSS
/// and the server's load with them, and requests failed to connect. Bounded, they queue.
pub(crate) const OBSERVATIONS_IN_FLIGHT: usize = 16;

/// How long the resync of a source is, while the watches it depends on work: the safety net
/// for what no watch shows (an authorizer other than RBAC), spread by up to a tenth either way
/// so that sources observed together do not stay together.
pub(crate) const SAFETY_NET: Duration = Duration::from_secs(3600);

/// How often the sources due are looked for.
const TICK: Duration = Duration::from_secs(5);

/// How long after the first RBAC change of a burst the sources it concerns are observed (a
/// `kubectl apply` of many objects is one re-check, not one per object).
pub(crate) const RBAC_SETTLE: Duration = Duration::from_secs(2);

/// When the RBAC changes collected are re-checked, given when that was set to happen (None:
/// nothing waits) and a change at `now` (pure): [`RBAC_SETTLE`] after the first change of the
/// burst, never later. Were it moved on by every change, a tenant changing a RoleBinding of its
/// own namespace every second would hold up every re-check of the cluster, a revocation
/// elsewhere among them.
pub(crate) fn recheck_at<T: Copy + std::ops::Add<Duration, Output = T>>(
    set: Option<T>,
    now: T,
) -> T {
    set.unwrap_or(now + RBAC_SETTLE)
}

/// When a source observed at `now` is due again (pure): after [`SAFETY_NET`] spread by
/// `spread` (in [0, 1)) when the observation worked and every watch it depends on works, else
/// after [`RESYNC`].
pub(crate) fn resync_after(now: Instant, worked: bool, watched: bool, spread: f64) -> Instant {
    if worked && watched {
        now + SAFETY_NET.mul_f64(0.9 + 0.2 * spread.clamp(0.0, 1.0))
    } else {
        now + RESYNC
    }
}

/// What the supervisor reports to.
pub(crate) struct Reports {
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
    /// The namespaces it selects, as last observed (None: not yet, or its spec is invalid).
    scope: Option<crate::adapter::permissions::Scope>,
    /// When it is observed again, unless something observes it sooner.
    due: Instant,
    /// Why its checkpoint cannot be served (past its cap), as its pipeline last said.
    trouble: Option<String>,
    /// What its last observation asked of the API server ([`super::observe::Asked`]).
    asked: Option<Arc<super::observe::Asked>>,
}

struct Supervisor {
    ctx: Context,
    shared: settings::Shared,
    reports: Reports,
    refusals: Arc<Refusals>,
    sources: BTreeMap<SourceId, Served>,
    index: Index,
    /// The feeds running: of whole streams (`true`), of their tags and labels.
    feeds: BTreeMap<bool, Feed>,
    /// What every source lists its namespaces with.
    lister: Arc<Lister>,
    sinks: SinkIndex,
    sink_watches: BTreeMap<SinkKind, SinkWatch>,
    sink_changes: mpsc::UnboundedSender<SinkObject>,
    board: Board,
    /// The running pipelines' queue and checkpoint gauges.
    backlogs: Backlogs,
    /// Per source, the last task of its pipelines and checkpoint deletion: the next waits.
    tails: BTreeMap<SourceId, JoinHandle<()>>,
    /// Each observation's source and uid, and what it found.
    observed: mpsc::UnboundedSender<(SourceId, Option<String>, Option<Observation>)>,
    /// [`OBSERVATIONS_IN_FLIGHT`] permits.
    observing: Arc<Semaphore>,
    /// Sources whose pipeline has just recorded its first list: observed again (`Ready`).
    relisted: mpsc::UnboundedSender<SourceId>,
    /// The watch of RBAC.
    rbac: RbacWatch,
    /// Where RBAC changed since the last re-check, and when that burst is done.
    rbac_changes: BTreeSet<Changed>,
    /// Where pipelines say why their checkpoint cannot be served, or that it is loaded.
    troubles: mpsc::UnboundedSender<(SourceId, Option<String>)>,
}

/// Serves every ImageStreamSource until `stop` is cancelled; then stops every pipeline
/// (each flushes its checkpoint) and writes the counters a last time.
pub(crate) async fn run(
    ctx: Context,
    shared: settings::Shared,
    reports: Reports,
    stop: CancellationToken,
) {
    let client = ctx.client.clone();
    let (observed, mut observations) = mpsc::unbounded_channel();
    let (sink_changes, mut sink_changed) = mpsc::unbounded_channel();
    let (relisted, mut relisted_rx) = mpsc::unbounded_channel();
    let (rbac_tx, mut rbac_rx) = mpsc::unbounded_channel();
    let (troubles, mut troubled) = mpsc::unbounded_channel();
    let rbac = rbacwatch::start(&client, rbac_tx);
    let board = Board::default();
    let counters_stop = CancellationToken::new();
    let writer = tokio::spawn(counters::run(
        client.clone(),
        board.clone(),
        counters_stop.clone(),
    ));
    let backlogs = Backlogs::default();
    let gauges = tokio::spawn(backlog::run(
        backlogs.clone(),
        reports.metrics.clone(),
        reports.mt.clone(),
        counters_stop.clone(),
    ));
    let refusals = Refusals::new(reports.health.clone(), "ImageStream");
    let lister = Arc::new(Lister {
        client: client.clone(),
        permits: Arc::new(Semaphore::new(LISTS_IN_FLIGHT)),
        metrics: reports.metrics.clone(),
        refusals: refusals.clone(),
    });
    let mut s = Supervisor {
        refusals,
        lister,
        ctx,
        shared,
        reports,
        sources: BTreeMap::new(),
        index: Index::default(),
        feeds: BTreeMap::new(),
        sinks: SinkIndex::default(),
        sink_watches: BTreeMap::new(),
        sink_changes,
        board,
        backlogs,
        tails: BTreeMap::new(),
        observed,
        observing: Arc::new(Semaphore::new(OBSERVATIONS_IN_FLIGHT)),
        relisted,
        rbac,
        rbac_changes: BTreeSet::new(),
        troubles,
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
    let mut tick = tokio::time::interval(TICK);
    // When the RBAC changes collected are re-checked (None: none waits).
    let mut rbac_settled: Option<tokio::time::Instant> = None;
    loop {
        let settle = async {
            match rbac_settled {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => break,
            Some(event) = sources.next() => match event {
                Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
                Ok(watcher::Event::InitApply(source)) => {
                    listing.get_or_insert_default().insert(id_of(&source), slim(source));
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
                Ok(watcher::Event::Apply(source)) => s.upsert(slim(source)),
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
            Some(id) = relisted_rx.recv() => s.observe_listed(&id),
            Some((id, trouble)) = troubled.recv() => {
                if let Some(served) = s.sources.get_mut(&id)
                    && served.trouble != trouble
                {
                    served.trouble = trouble;
                    s.observe(&id);
                }
            }
            Some(object) = sink_changed.recv() => {
                for id in s.sinks.referencing(&object) {
                    s.observe(&id);
                }
            }
            Some(change) = rbac_rx.recv() => {
                s.rbac_changes.insert(change);
                rbac_settled = Some(recheck_at(rbac_settled, tokio::time::Instant::now()));
            }
            () = settle, if listed => {
                rbac_settled = None;
                s.rbac_changed();
            }
            _ = tick.tick(), if listed => {
                s.tails.retain(|_, tail| !tail.is_finished());
                let now = Instant::now();
                s.observe_where_due(now);
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
    let _ = gauges.await;
}

/// A source as the adapter keeps it, for as long as it is served: without its
/// `managedFields`, which the API server sends with every object and nothing here reads (a few
/// KiB a source once the adapter has written its status a few times).
fn slim(mut source: ImageStreamSource) -> Arc<ImageStreamSource> {
    source.metadata.managed_fields = None;
    Arc::new(source)
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
        let namespace = &self.shared.checkpoint_namespace;
        if let Err(e) = super::cleanup::sweep(&self.ctx.client, namespace, &uids).await {
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
                        scope: None,
                        due: Instant::now() + RESYNC,
                        trouble: None,
                        asked: None,
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
        self.delete_checkpoint(id);
        self.gauges();
    }

    fn gauges(&self) {
        self.reports
            .mt
            .set_sources(self.sources.values().map(|s| s.ready));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbac_changes_are_rechecked_two_seconds_after_the_first_of_a_burst_however_it_goes_on() {
        let t0 = Instant::now();
        let first = recheck_at(None, t0);
        assert_eq!(first, t0 + RBAC_SETTLE);
        let later = recheck_at(Some(first), t0 + Duration::from_millis(1_900));
        assert_eq!(later, first, "a change meanwhile does not move it on");
    }

    #[test]
    fn a_source_is_due_in_about_an_hour_when_watched_and_in_30_s_otherwise() {
        let now = Instant::now();
        assert_eq!(
            resync_after(now, true, true, 0.0),
            now + SAFETY_NET.mul_f64(0.9)
        );
        assert_eq!(
            resync_after(now, true, true, 1.0),
            now + SAFETY_NET.mul_f64(1.1)
        );
        assert_eq!(
            resync_after(now, true, true, 7.0),
            now + SAFETY_NET.mul_f64(1.1)
        );
        assert_eq!(
            resync_after(now, false, true, 0.5),
            now + RESYNC,
            "it failed"
        );
        assert_eq!(
            resync_after(now, true, false, 0.5),
            now + RESYNC,
            "not watched"
        );
    }
}
