//! The source's flow, wired: [`watch`] -> [`tracker`] (state and diff, or the ApiServerSource
//! modes' [`apiserver`]) -> [`queue`] -> [`deliver::job`](super::deliver::job) -> [`ack`] -> checkpoint. The watch never
//! waits on the sink: it only waits while the queue's hand-off channel is full.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::ack;
use super::apiserver::{self, Announced, Shape, WatchAction};
use super::checkpoint::{Checkpoint, Loaded, StreamKey};
use super::deliver::SinkClient;
use super::deliver::job::{Route, Routes, Sender, Tally};
use super::diff;
use super::event;
use super::metrics::Metrics;
use super::pending::Pending;
use super::queue::{self, Job, Queue};
use super::settings::{Mode, Settings};
use super::tracker::{self, Decision, Tracker};
use super::watch::{self, Seen, decode};
use crate::api::ImageStream;
use crate::runtime::watch_errors::Refusals;

/// The bounded hand-off between the watch and the queue's dispatcher, in jobs.
const HANDOFF: usize = 10_000;

/// Where the flow reports what happens: its metrics, and its watches' refusals (on `/readyz`).
pub(crate) struct Reports {
    /// The source's metrics.
    pub metrics: Metrics,
    /// The refusals of the ImageStream watches.
    pub refusals: Arc<Refusals>,
}

/// What a flow follows: the stream of what its watch sees over `scopes` watch scopes, and
/// where its events go.
pub(crate) struct Input {
    /// What the watch sees.
    pub seen: futures::stream::BoxStream<'static, Seen>,
    /// How many scopes the watch has (each is listed once before the flow is listed).
    pub scopes: usize,
    /// Where the events go.
    pub routes: Routes,
}

/// Runs the watch and the delivery until `stop` is cancelled (or every watch ends). `listed`
/// turns true once the first list of every scope is recorded.
pub(crate) async fn run(
    client: kube::Client,
    settings: Arc<Settings>,
    checkpoint: Arc<Checkpoint>,
    loaded: Loaded,
    reports: Reports,
    listed: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let Reports { metrics, refusals } = reports;
    let scopes = watch::scopes(&settings.namespaces);
    let selector = settings.selector.as_deref();
    let seen = match settings.mode {
        Mode::ImageStreamTag => {
            watch::start::<decode::TagsOnly>(&client, &scopes, selector, metrics.clone(), refusals)
                .boxed()
        }
        Mode::Resource | Mode::Reference => {
            watch::start::<decode::Whole>(&client, &scopes, selector, metrics.clone(), refusals)
                .boxed()
        }
    };
    let route = Route {
        sink: settings.sink.clone(),
        dead_letter_sink: settings.delivery.dead_letter_sink.clone(),
        auth: settings.oidc.clone(),
        error_bodies: true,
    };
    // The sender stays in this frame while the flow runs: the route never changes.
    let (_route, routes) = tokio::sync::watch::channel(Some(route));
    let input = Input {
        seen,
        scopes: scopes.len(),
        routes,
    };
    serve(
        settings, checkpoint, loaded, metrics, None, input, listed, stop,
    )
    .await
}

/// Follows `input` (tracker, queue, delivery, acknowledgements into `checkpoint`) until `stop`
/// is cancelled or the input ends; waits for the acknowledgements of what was delivered.
///
/// It returns its future rather than being an `async fn`, whose future would hold its
/// arguments twice: the multi-tenant adapter holds one for every source it serves.
#[allow(clippy::too_many_arguments, clippy::manual_async_fn)]
pub(crate) fn serve(
    settings: Arc<Settings>,
    checkpoint: Arc<Checkpoint>,
    loaded: Loaded,
    metrics: Metrics,
    tally: Option<Tally>,
    input: Input,
    listed: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
) -> impl Future<Output = anyhow::Result<()>> + Send + 'static {
    async move {
        let sink = Arc::new(SinkClient::shared_guarded(
            settings.sink_timeout,
            settings.ca_pem.as_deref(),
            settings.sink_guard.as_deref(),
        )?);
        let sender = Sender {
            settings: settings.clone(),
            sink,
            metrics: metrics.clone(),
            routes: input.routes,
            tally,
            stop: stop.clone(),
        };
        let (queue, dispatcher) = queue::start(
            HANDOFF,
            settings.concurrency,
            Arc::new(sender),
            ack::Recorder {
                checkpoint: checkpoint.clone(),
                metrics: metrics.clone(),
            },
        );
        let tracking = match Shape::of(settings.mode) {
            None => Tracking::Tags(Tracker::new(
                loaded,
                settings.tags.clone(),
                settings.emit_existing,
            )),
            Some(shape) => Tracking::Objects(Announced::new(settings.emit_existing), shape),
        };
        let flow = Flow {
            settings: settings.clone(),
            queue,
            checkpoint,
            metrics,
            tracking,
        };
        flow.follow(input.seen, input.scopes, listed, stop).await;
        let _ = dispatcher.await;
        Ok(())
    }
}

/// What is tracked, by mode.
enum Tracking {
    /// Mode `imagestreamtag`: the tag states.
    Tags(Tracker),
    /// Modes `resource` and `reference`: the versions announced, and what the events carry.
    Objects(Announced, Shape),
}

struct Flow {
    settings: Arc<Settings>,
    queue: Queue<Pending>,
    checkpoint: Arc<Checkpoint>,
    metrics: Metrics,
    tracking: Tracking,
}

impl Flow {
    /// Takes what the watch sees until `stop` is cancelled or the watch ends; tells `listed`
    /// once each of the `scopes` has been listed. Dropping the flow closes the queue.
    /// (A function that returns its future: see [`serve`].)
    #[allow(clippy::manual_async_fn)]
    fn follow<S: futures::Stream<Item = Seen> + Unpin + Send>(
        mut self,
        mut seen: S,
        scopes: usize,
        listed: tokio::sync::watch::Sender<bool>,
        stop: CancellationToken,
    ) -> impl Future<Output = ()> + Send {
        async move {
            let mut listed_scopes = HashSet::new();
            loop {
                let next = tokio::select! {
                    _ = stop.cancelled() => break,
                    next = seen.next() => next,
                };
                let Some(next) = next else { break };
                self.metrics.queue_depth.set(self.queue.depth() as i64);
                match next {
                    Seen::Applied {
                        stream,
                        listing,
                        scope,
                    } => {
                        let first_list = listing && !listed_scopes.contains(&scope);
                        // Boxed, as the deletion below: what one change takes to decide and queue
                        // is large, and inline this loop would hold it while it waits too (a flow
                        // per source in the multi-tenant adapter).
                        Box::pin(self.applied(&stream, first_list)).await;
                    }
                    Seen::Deleted { key, last } => {
                        Box::pin(self.deleted(key, last.as_deref())).await
                    }
                    Seen::Listed {
                        scope,
                        namespace,
                        present,
                    } => {
                        for key in diff::gone(self.known(), namespace.as_deref(), &present) {
                            Box::pin(self.deleted(key, None)).await;
                        }
                        listed_scopes.insert(scope);
                        if listed_scopes.len() == scopes && !*listed.borrow() {
                            if let Tracking::Tags(t) = &mut self.tracking {
                                t.first_list_done();
                            }
                            listed.send_replace(true);
                            info!(streams = self.known().count(), "watching ImageStreams");
                        }
                    }
                }
            }
        }
    }

    /// The streams known (tracked or announced).
    fn known(&self) -> Box<dyn Iterator<Item = &StreamKey> + '_> {
        match &self.tracking {
            Tracking::Tags(t) => Box::new(t.keys()),
            Tracking::Objects(a, _) => Box::new(a.keys()),
        }
    }

    async fn applied(&mut self, is: &ImageStream, first_list: bool) {
        let seen = Instant::now();
        let key = tracker::key_of(is);
        if key.1.is_empty() {
            warn!("an ImageStream without a name was skipped");
            return;
        }
        match &mut self.tracking {
            Tracking::Tags(t) => {
                let decision = t.applied(is, first_list);
                self.decided(key, decision, seen).await;
            }
            Tracking::Objects(a, shape) => {
                let shape = *shape;
                let version = is.metadata.resource_version.as_deref().unwrap_or_default();
                if let Some(action) = a.applied(&key, version, first_list) {
                    self.announce(&key, shape, action, is, seen).await;
                }
            }
        }
    }

    async fn deleted(&mut self, key: StreamKey, last: Option<&ImageStream>) {
        let seen = Instant::now();
        match &mut self.tracking {
            Tracking::Tags(t) => {
                let decision = t.deleted(&key);
                self.decided(key, decision, seen).await;
            }
            Tracking::Objects(a, shape) => {
                let shape = *shape;
                a.deleted(&key);
                // A stream gone while the watch was down has no last state to send.
                if let Some(is) = last {
                    self.announce(&key, shape, WatchAction::Delete, is, seen)
                        .await;
                }
            }
        }
    }

    /// Records, counts and queues what the tracker decided for `key`.
    async fn decided(&self, key: StreamKey, decision: Decision, seen: Instant) {
        if decision.lost {
            self.metrics.checkpoint_lost_streams.inc();
            warn!(namespace = %key.0, imagestream = %key.1, "this stream's checkpoint entry was lost; sending its current tags again");
        }
        if let Some(state) = decision.record {
            self.checkpoint.record(key.clone(), Some(state));
        }
        for (change, after) in decision.send {
            debug!(
                namespace = %change.namespace,
                imagestream = %change.image_stream,
                tag = %change.tag,
                digest = change.digest.as_deref().unwrap_or(""),
                event_id = %event::event_id(&change),
                "change"
            );
            let order = Arc::from(format!("{}/{}/{}", key.0, key.1, change.tag));
            let item = Pending::Tag {
                change,
                found: chrono::Utc::now(),
                after,
            };
            self.push(order, item, seen).await;
        }
    }

    async fn announce(
        &self,
        key: &StreamKey,
        shape: Shape,
        action: WatchAction,
        is: &ImageStream,
        seen: Instant,
    ) {
        let now = chrono::Utc::now();
        let url = &self.settings.api_server_url;
        let event = apiserver::event(shape, action, is, url, now);
        let order = Arc::from(format!("{}/{}", key.0, key.1));
        self.push(order, Pending::Object(Box::new(event)), seen)
            .await;
    }

    async fn push(&self, key: Arc<str>, item: Pending, seen: Instant) {
        if self.queue.push(Job { key, item, seen }).await.is_err() {
            error!("the delivery queue is gone; stopping");
        }
        // Now, not at the next change: an event that waits alone must show.
        self.metrics.queue_depth.set(self.queue.depth() as i64);
    }
}
