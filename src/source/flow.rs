//! The source's flow, wired: [`watch`] -> [`tracker`] (state and diff, or the ApiServerSource
//! modes' [`apiserver`]) -> [`queue`] -> [`deliver`] -> [`ack`] -> checkpoint. The watch never
//! waits on the sink: it only waits while the queue's hand-off channel is full.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use super::apiserver::{self, Announced, Shape, WatchAction};
use super::checkpoint::{Checkpoint, Loaded, StreamKey};
use super::deliver::{self, Delivered, SinkClient};
use super::diff;
use super::event;
use super::metrics::Metrics;
use super::pending::Pending;
use super::queue::{self, Job, Queue};
use super::tracker::{self, Decision, Tracker};
use super::watch::{self, Seen, decode};
use super::{Mode, Settings, ack};
use crate::api::ImageStream;
use crate::watch_errors::Refusals;

/// The bounded hand-off between the watch and the queue's dispatcher, in jobs.
const HANDOFF: usize = 10_000;

/// Where the flow reports what happens: its metrics, and its watches' refusals (on `/readyz`).
pub struct Reports {
    /// The source's metrics.
    pub metrics: Metrics,
    /// The refusals of the ImageStream watches.
    pub refusals: Arc<Refusals>,
}

/// Runs the watch and the delivery until `stop` is cancelled (or every watch ends). `listed`
/// turns true once the first list of every scope is recorded.
pub async fn run(
    client: kube::Client,
    settings: Arc<Settings>,
    checkpoint: Arc<Checkpoint>,
    loaded: Loaded,
    reports: Reports,
    listed: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let Reports { metrics, refusals } = reports;
    let sink = Arc::new(SinkClient::new(
        settings.sink_timeout,
        settings.ca_pem.as_deref(),
    )?);
    let (queue, done) = queue::start(
        HANDOFF,
        settings.concurrency,
        sender(settings.clone(), sink, metrics.clone(), stop.clone()),
    );
    let acks = tokio::spawn(ack::run(
        done,
        checkpoint.clone(),
        metrics.clone(),
        queue.depth_counter(),
    ));

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
    flow.follow(seen, scopes.len(), listed, stop).await;
    let _ = acks.await;
    Ok(())
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
    async fn follow(
        mut self,
        mut seen: impl futures::Stream<Item = Seen> + Unpin,
        scopes: usize,
        listed: tokio::sync::watch::Sender<bool>,
        stop: CancellationToken,
    ) {
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
                    self.applied(&stream, first_list).await;
                }
                Seen::Deleted { key, last } => self.deleted(key, last.as_deref()).await,
                Seen::Listed {
                    scope,
                    namespace,
                    present,
                } => {
                    for key in diff::gone(self.known(), namespace.as_deref(), &present) {
                        self.deleted(key, None).await;
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
    }
}

/// What the queue runs for each job: the event built once, delivered with retries, counted.
fn sender(
    settings: Arc<Settings>,
    sink: Arc<SinkClient>,
    metrics: Metrics,
    stop: CancellationToken,
) -> queue::Deliver<Pending, ack::Outcome> {
    Arc::new(move |job: Job<Pending>| {
        let (settings, sink, metrics, stop) = (
            settings.clone(),
            sink.clone(),
            metrics.clone(),
            stop.clone(),
        );
        Box::pin(async move {
            let make = || {
                job.item
                    .event(&settings.events, settings.overrides.as_ref())
            };
            let outcome = deliver::deliver(
                &sink,
                &settings.sink,
                &make,
                settings.content_mode,
                &settings.delivery,
                &stop,
            )
            .await;
            if let Ok(delivered) = &outcome {
                count(&metrics, &settings, &job.item, delivered, job.seen);
            }
            (job, outcome)
        })
    })
}

/// Counts a delivery's end in the metrics; logs what did not reach the sink.
fn count(
    metrics: &Metrics,
    settings: &Settings,
    item: &Pending,
    delivered: &Delivered,
    seen: Instant,
) {
    let ty = Metrics::of(item.ty());
    let failed_attempts = match delivered {
        Delivered::Sink { attempts } => {
            metrics.sent.get_or_create(&ty).inc();
            metrics.latency.observe(seen.elapsed().as_secs_f64());
            attempts - 1
        }
        Delivered::DeadLettered { attempts, .. } => {
            metrics.dead_lettered.get_or_create(&ty).inc();
            warn!(event_id = %item.id(), sink = %settings.sink, "event sent to the dead-letter sink");
            *attempts
        }
        Delivered::Failed { error, attempts } => {
            metrics.failed.get_or_create(&ty).inc();
            error!(event_id = %item.id(), sink = %settings.sink, error = %error, "the sink refused an event for good and there is no dead-letter sink");
            *attempts
        }
    };
    if failed_attempts > 0 {
        metrics
            .attempts_failed
            .get_or_create(&ty)
            .inc_by(u64::from(failed_attempts));
    }
}
