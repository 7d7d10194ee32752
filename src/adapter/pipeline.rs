//! One source's pipeline: its checkpoint (ConfigMaps in its namespace, owned by it), then the
//! single source's flow ([`crate::source::flow::serve`]: tracker, queue, delivery,
//! acknowledgements) fed by its feed ([`super::join`]: its own lists, then the feed's changes)
//! through its selector ([`super::filter`]), its
//! deliveries along its route and counted in its [`Counters`]. It runs until stopped; a
//! checkpoint that cannot be read is retried with backoff, the changes waiting meanwhile.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::counters::Counters;
use super::feed::Intake;
use super::filter::Filter;
use super::index::SourceId;
use super::join::{self, Lister, Room};
use crate::adapter::crd::LabelSelector;
use crate::runtime::admin::Health;
use crate::source::Settings;
use crate::source::checkpoint::{Cap, Checkpoint, CheckpointError, CheckpointOwner, Loaded};
use crate::source::deliver::job::{Routes, Tally};
use crate::source::flow::{self, Input};
use crate::source::metrics::Metrics;
use crate::source::watch::decode;

/// The longest wait before reading a checkpoint again.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// What one pipeline runs with.
pub(crate) struct Pipeline {
    /// The source.
    pub id: SourceId,
    /// Its settings.
    pub settings: Arc<Settings>,
    /// The owner of its checkpoint.
    pub owner: CheckpointOwner,
    /// Its `selector`.
    pub selector: Option<LabelSelector>,
    /// What its feed sends it.
    pub fed: Intake,
    /// Its bound ([`join`]: past it, it sheds and catches up with a list).
    pub room: Room,
    /// Its namespaces (one None: every namespace).
    pub scopes: Vec<Option<String>>,
    /// Whether it reads whole streams (modes `resource` and `reference`).
    pub whole: bool,
    /// What it lists its namespaces with.
    pub lister: Arc<Lister>,
    /// Where its events go.
    pub routes: Routes,
    /// Its delivery counters.
    pub counters: Arc<Counters>,
    /// The metrics it reports to ([`super::settings::metrics`]).
    pub metrics: Metrics,
    /// Told true once the first list of every one of its namespaces is recorded.
    pub listed: tokio::sync::watch::Sender<bool>,
    /// Told its id once it has listed: the source is observed again, and its `Ready` turns
    /// True.
    pub relisted: mpsc::UnboundedSender<SourceId>,
    /// The Lease as the fence of its checkpoint's writes.
    pub fence: crate::runtime::leader::Fence,
    /// Told why its checkpoint cannot be served (past its cap), or None once it is loaded.
    pub troubles: mpsc::UnboundedSender<(SourceId, Option<String>)>,
}

/// Runs `p` until `stop` is cancelled; its checkpoint is flushed last.
///
/// It returns its future rather than being an `async fn`: an async fn's future holds its
/// arguments twice (as passed, and moved into its body), and this one is held for every
/// source for as long as it is served.
#[allow(clippy::manual_async_fn)]
pub(crate) fn run(
    client: kube::Client,
    p: Pipeline,
    stop: CancellationToken,
) -> impl Future<Output = ()> + Send + 'static {
    async move {
        let (namespace, name) = p.id.clone();
        // Boxed: the reads are a large future, done with once the checkpoint is loaded.
        let Some((checkpoint, loaded)) = Box::pin(load(&client, &p, &stop)).await else {
            return;
        };
        let _ = p.troubles.send((p.id.clone(), None));
        let checkpoint = Arc::new(checkpoint);
        // The source's own health: /readyz is the adapter's; a source's checkpoint trouble is
        // in the log and the metrics.
        let health = Health::new();
        let listed = p.listed;
        let flushed = CancellationToken::new();
        let flusher = tokio::spawn(checkpoint.clone().run_once_listed(
            listed.subscribe(),
            p.metrics.clone(),
            health,
            flushed.clone(),
            {
                let (relisted, id) = (p.relisted, p.id.clone());
                move || {
                    let _ = relisted.send(id);
                }
            },
        ));
        let mut filter = Filter::new(p.selector.as_ref());
        let scopes = p.scopes.len();
        let seen = if p.whole {
            join::follow::<decode::Whole>(p.fed, p.room, p.scopes, p.lister).boxed()
        } else {
            join::follow::<decode::TagsAndLabels>(p.fed, p.room, p.scopes, p.lister).boxed()
        };
        // Past its cap while it runs (its streams grew), the source takes nothing more: its
        // input ends, what it queued is delivered, its checkpoint is flushed at the stop, and
        // its status says why; the next load refuses it (read no further than the cap).
        let cap = p.settings.checkpoint.cap;
        let (shards, bytes) = (
            p.metrics.checkpoint_shards.clone(),
            p.metrics.checkpoint_bytes.clone(),
        );
        let (troubles, id) = (p.troubles.clone(), p.id.clone());
        let seen = seen
            .filter_map(move |s| std::future::ready(filter.pass(s)))
            .take_while(move |_| {
                let (n, b) = (count(shards.get()), count(bytes.get()));
                let within = cap.is_none_or(|cap| cap.holds(n, b));
                if let (false, Some(cap)) = (within, cap) {
                    let why = too_large(n, b, cap);
                    error!(namespace = %id.0, source = %id.1, shards = n, bytes = b, "the source's checkpoint is past its cap: it takes no more changes");
                    let _ = troubles.send((id.clone(), Some(why)));
                }
                std::future::ready(within)
            })
            .boxed();
        let counters = p.counters.clone();
        let tally: Tally = Arc::new(move |d| counters.tally(d, chrono::Utc::now()));
        let input = Input {
            seen,
            scopes,
            routes: p.routes,
        };
        let served = flow::serve(
            p.settings,
            checkpoint,
            loaded,
            p.metrics,
            Some(tally),
            input,
            listed,
            stop,
        )
        .await;
        flushed.cancel();
        let _ = flusher.await;
        match served {
            Ok(()) => info!(namespace = %namespace, source = %name, "source stopped"),
            Err(e) => {
                error!(namespace = %namespace, source = %name, error = %e, "source could not be served")
            }
        }
    }
}

/// A gauge's value as a count.
fn count(gauge: i64) -> usize {
    usize::try_from(gauge).unwrap_or(0)
}

/// What a source's status says of a checkpoint of `shards` ConfigMaps and `bytes` past `cap`.
pub(crate) fn too_large(shards: usize, bytes: usize, cap: Cap) -> String {
    format!(
        "its checkpoint holds more than the platform's cap for one source ({} ConfigMaps, {} \
         bytes; {shards} ConfigMaps and {bytes} bytes at least): it serves too many streams. \
         Select fewer namespaces or streams and re-create the source (its checkpoint goes with \
         it), or ask the platform team to raise --max-checkpoint-bytes-per-source",
        cap.shards, cap.bytes
    )
}

/// The source's checkpoint, read and checked writable; retried with backoff until `stop`.
async fn load(
    client: &kube::Client,
    p: &Pipeline,
    stop: &CancellationToken,
) -> Option<(Checkpoint, Loaded)> {
    let (namespace, name) = &p.id;
    let mut wait = Duration::from_secs(1);
    loop {
        let cfg = p.settings.checkpoint.clone();
        let loaded = Checkpoint::load_owned(client.clone(), cfg, Some(p.owner.clone())).await;
        if let Err(CheckpointError::TooLarge { shards, bytes, cap }) = &loaded {
            // Read no further than the cap, and not again until the source changes or the
            // adapter restarts: another read would only find it as large.
            let why = too_large(*shards, *bytes, *cap);
            error!(namespace = %namespace, source = %name, reason = %why, "the source's checkpoint is past its cap: not serving it");
            let _ = p.troubles.send((p.id.clone(), Some(why)));
            return None;
        }
        let error = match loaded {
            Ok((mut checkpoint, loaded)) => {
                checkpoint.set_fence(p.fence.clone());
                match checkpoint.probe().await {
                    Ok(()) => {
                        if loaded.first_start {
                            info!(namespace = %namespace, source = %name, "no checkpoint: first start");
                        }
                        return Some((checkpoint, loaded));
                    }
                    Err(e) => e,
                }
            }
            Err(e) => e,
        };
        warn!(namespace = %namespace, source = %name, error = %error, "the source's checkpoint cannot be used; retrying");
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(MAX_RETRY);
    }
}
