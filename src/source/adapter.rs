//! The adapter loop: watch ImageStreams, diff each against what was already enqueued, turn the
//! changes into CloudEvents, and hand them to the queue; acknowledgements from the sink
//! advance the delivered state, which the checkpoint persists. The watch never waits on the
//! sink, and a re-list, a dropped watch or a restart diffs state against state, so exactly
//! the changes that happened are sent.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use cloudevents::{AttributesReader, Event};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tracing::{debug, error, info, warn};

use crate::api::ImageStream;

use super::change::TagChange;
use super::checkpoint::{Checkpoint, Loaded, StreamKey};
use super::deliver::{self, Delivered};
use super::diff;
use super::event::{self, EventSettings, WatchAction};
use super::metrics::Metrics;
use super::queue::{self, Job, Queue};
use super::state::{self, StreamState, TagFilter, TagState};
use super::{Mode, Settings};

/// A queued event, as what it is built from. The CloudEvent is built when its delivery
/// starts, once (every attempt sends it as built): a built event (attributes, an extension
/// map, the data as a JSON value) is several times the size of its change, and in a burst or a
/// catch-up tens of thousands wait in the queue.
// Nearly every job is a `Tag`: boxing the change would add an allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Pending {
    /// Mode imagestreamtag.
    Tag {
        /// The change.
        change: TagChange,
        /// When it was found: the event's time when the change has none (a deletion).
        found: DateTime<Utc>,
        /// The tag's delivered state once it is delivered (None: the tag is gone), what the
        /// checkpoint records for it.
        after: Option<TagState>,
    },
    /// Modes resource and reference: the event, built from the object (which is not kept);
    /// these modes keep no checkpoint.
    Object(Box<Event>),
}

impl Pending {
    /// The CloudEvent to deliver, `K_CE_OVERRIDES` applied. The same for every call: the id
    /// and the time come from the change and when it was found, never from the clock now.
    pub fn event(&self, settings: &EventSettings, overrides: Option<&Value>) -> Event {
        let mut ev = match self {
            Pending::Tag { change, found, .. } => event::tag_event(change, settings, *found),
            Pending::Object(ev) => (**ev).clone(),
        };
        if let Some(o) = overrides
            && let Err(e) = event::apply_overrides(&mut ev, o)
        {
            warn!(error = %e, "K_CE_OVERRIDES not applied");
        }
        ev
    }
}

/// How much of each watched ImageStream the source reads.
pub trait Reading: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The stream parsed from its JSON text, or why it does not parse.
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error>;
}

/// Everything: modes `resource` and `reference` send the object itself.
#[derive(Clone, Debug)]
pub struct Whole;

impl Reading for Whole {
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error> {
        serde_json::from_str(text)
    }
}

/// What mode `imagestreamtag` uses: the status (every tag's history and conditions) and the
/// metadata that names the stream and resumes the watch (name, namespace, uid,
/// resourceVersion). The spec and the rest of the metadata (annotations, labels, the
/// `managedFields` a real API server sends with every object) are skipped unparsed, and a
/// malformed spec does not make the stream malformed: no event is made from it.
#[derive(Clone, Debug)]
pub struct TagsOnly;

impl Reading for TagsOnly {
    fn parse(text: &str) -> Result<ImageStream, serde_json::Error> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            uid: Option<String>,
            resource_version: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct Stream {
            metadata: Meta,
            #[serde(default)]
            status: Option<crate::api::imagestream::ImageStreamStatus>,
        }
        let Stream { metadata, status } = serde_json::from_str(text)?;
        Ok(ImageStream {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                ..ObjectMeta::default()
            },
            spec: Default::default(),
            status,
        })
    }
}

/// An ImageStream as the watch delivers it: parsed (as far as `R` reads), or why it could not
/// be. Deserializing never fails, so one malformed object cannot fail a whole list (and with
/// it the watch).
#[derive(Clone, Debug)]
pub struct Watched<R = Whole> {
    /// The stream's metadata (what could be read of it when the object is malformed).
    metadata: ObjectMeta,
    /// The rest of the stream (its metadata is in `metadata`), or why it does not parse.
    stream: Result<Box<ImageStream>, String>,
    reading: std::marker::PhantomData<R>,
}

impl<'de, R: Reading> serde::Deserialize<'de> for Watched<R> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The object is taken as its JSON text and parsed straight into the typed stream:
        // nearly every object parses, and the typed parse reads the text once. Only an object
        // that does not parse is read again, as a JSON value, for the name to log it by (a
        // typed parse that fails half-way leaves nothing to go on).
        let raw = <Box<serde_json::value::RawValue> as serde::Deserialize>::deserialize(d)?;
        match R::parse(raw.get()) {
            Ok(mut is) => Ok(Watched {
                metadata: std::mem::take(&mut is.metadata),
                stream: Ok(Box::new(is)),
                reading: std::marker::PhantomData,
            }),
            Err(e) => Ok(Watched::malformed(raw.get(), e.to_string())),
        }
    }
}

impl<R> Watched<R> {
    /// An object that does not parse as an ImageStream: its metadata, as far as it can be
    /// read, and why the object does not parse.
    fn malformed(text: &str, error: String) -> Self {
        let metadata = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|mut v| v.get_mut("metadata").map(Value::take))
            .map(<ObjectMeta as serde::Deserialize>::deserialize);
        let (metadata, error) = match metadata {
            Some(Ok(metadata)) => (metadata, error),
            Some(Err(e)) => (ObjectMeta::default(), format!("metadata: {e}")),
            None => (ObjectMeta::default(), error),
        };
        Watched {
            metadata,
            stream: Err(error),
            reading: std::marker::PhantomData,
        }
    }
}

impl<R: Reading> kube::Resource for Watched<R> {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        <ImageStream as kube::Resource>::plural(&())
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn dyn_key<R>(obj: &Watched<R>) -> StreamKey {
    (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

/// The typed ImageStream, or None (logged and counted) when the object does not parse.
fn typed<R>(obj: Watched<R>, metrics: &Metrics) -> Option<ImageStream> {
    match obj.stream {
        Ok(mut is) => {
            is.metadata = obj.metadata;
            Some(*is)
        }
        Err(e) => {
            let (namespace, name) = (
                obj.metadata.namespace.unwrap_or_default(),
                obj.metadata.name.unwrap_or_default(),
            );
            metrics.malformed.inc();
            warn!(namespace = %namespace, imagestream = %name, error = %e, "malformed ImageStream skipped");
            None
        }
    }
}

fn key_of(is: &ImageStream) -> StreamKey {
    (
        is.metadata.namespace.clone().unwrap_or_default(),
        is.metadata.name.clone().unwrap_or_default(),
    )
}

/// The watch side: what has been enqueued so far, per stream.
struct Watching {
    settings: Arc<Settings>,
    queue: Queue<Pending>,
    checkpoint: Arc<Checkpoint>,
    enqueued: HashMap<StreamKey, StreamState>,
    /// Resource/reference modes: the last resourceVersion announced per stream.
    announced: HashMap<StreamKey, String>,
    /// A first start without a checkpoint: record the first list silently (or emit it).
    first_start: bool,
    /// What the checkpoint said at the start: which streams' records were lost.
    loaded: Loaded,
    metrics: Metrics,
    filter: TagFilter,
}

impl Watching {
    async fn push(&self, key: String, item: Pending, seen: Instant) {
        let job = Job { key, item, seen };
        if self.queue.push(job).await.is_err() {
            error!("the delivery queue is gone; stopping");
        }
    }

    async fn apply(&mut self, is: &ImageStream, initial: bool) {
        let seen = Instant::now();
        let key = key_of(is);
        if key.1.is_empty() {
            warn!("an ImageStream without a name was skipped");
            return;
        }
        match self.settings.mode {
            Mode::ImageStreamTag => {
                let state = state::of_stream(is, &self.filter);
                let unknown = initial && !self.enqueued.contains_key(&key);
                if unknown && self.first_start && !self.settings.emit_existing {
                    // Nothing was delivered before: record what exists now, send nothing.
                    self.checkpoint.record(key.clone(), Some(state.clone()));
                    self.enqueued.insert(key, state);
                    return;
                }
                let r = ObjectRef::<ImageStream>::new(&key.1).within(&key.0);
                let changes = if unknown && self.first_start {
                    diff::existing(is, &self.filter)
                } else if unknown && self.loaded.lost(&key) {
                    // Its record was lost: its current tags again (same ids), not its history.
                    let behind = diff::one_behind(is, &self.filter);
                    self.metrics.checkpoint_lost_streams.inc();
                    warn!(namespace = %key.0, imagestream = %key.1, "this stream's checkpoint entry was lost; sending its current tags again");
                    self.checkpoint.record(key.clone(), Some(behind.clone()));
                    self.enqueued.insert(key.clone(), behind);
                    diff::diff(&r, self.enqueued.get(&key), Some(is), &self.filter)
                } else {
                    diff::diff(&r, self.enqueued.get(&key), Some(is), &self.filter)
                };
                let before = self.enqueued.get(&key).cloned();
                self.enqueued.insert(key.clone(), state);
                self.push_changes(&key, before.as_ref(), changes, seen)
                    .await;
            }
            Mode::Resource | Mode::Reference => {
                let rv = is.metadata.resource_version.clone().unwrap_or_default();
                let action = match self.announced.get(&key) {
                    Some(prev) if *prev == rv => return,
                    Some(_) => WatchAction::Update,
                    None => WatchAction::Add,
                };
                self.announced.insert(key.clone(), rv);
                self.push_object(&key, action, is, seen).await;
            }
        }
    }

    async fn delete(&mut self, key: StreamKey, last: Option<&ImageStream>) {
        let seen = Instant::now();
        match self.settings.mode {
            Mode::ImageStreamTag => {
                let before = self.enqueued.remove(&key);
                let r = ObjectRef::<ImageStream>::new(&key.1).within(&key.0);
                let changes = diff::diff(&r, before.as_ref(), None, &self.filter);
                self.push_changes(&key, before.as_ref(), changes, seen)
                    .await;
            }
            Mode::Resource | Mode::Reference => {
                self.announced.remove(&key);
                if let Some(is) = last {
                    self.push_object(&key, WatchAction::Delete, is, seen).await;
                }
            }
        }
    }

    async fn push_changes(
        &self,
        key: &StreamKey,
        before: Option<&StreamState>,
        changes: Vec<TagChange>,
        seen: Instant,
    ) {
        let afters = state::afters(before, &changes);
        for (change, after) in changes.into_iter().zip(afters) {
            debug!(
                namespace = %change.namespace,
                imagestream = %change.image_stream,
                tag = %change.tag,
                digest = change.digest.as_deref().unwrap_or(""),
                event_id = %event::event_id(&change),
                "change"
            );
            let order = format!("{}/{}/{}", key.0, key.1, change.tag);
            let found = chrono::Utc::now();
            let item = Pending::Tag {
                change,
                found,
                after,
            };
            self.push(order, item, seen).await;
        }
    }

    async fn push_object(
        &self,
        key: &StreamKey,
        action: WatchAction,
        is: &ImageStream,
        seen: Instant,
    ) {
        let obj = serde_json::to_value(is).unwrap_or(Value::Null);
        let ev = match self.settings.mode {
            Mode::Reference => event::reference_event(
                action,
                &obj,
                &self.settings.api_server_url,
                chrono::Utc::now(),
            ),
            _ => event::resource_event(
                action,
                &obj,
                &self.settings.api_server_url,
                chrono::Utc::now(),
            ),
        };
        let order = format!("{}/{}", key.0, key.1);
        self.push(order, Pending::Object(Box::new(ev)), seen).await;
    }
}

/// Runs the watch and the delivery until `stop` turns true.
pub async fn watch_and_deliver(
    client: kube::Client,
    settings: Arc<Settings>,
    checkpoint: Arc<Checkpoint>,
    mut loaded: Loaded,
    metrics: Metrics,
    listed: tokio::sync::watch::Sender<bool>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let first_start = loaded.first_start;
    let initial = std::mem::take(&mut loaded.states);
    let sink_client = Arc::new(deliver::SinkClient::new(
        settings.sink_timeout,
        settings.ca_pem.as_deref(),
    )?);
    let deliver_fn: queue::Deliver<Pending, Result<Delivered, deliver::Stopped>> = {
        let settings = settings.clone();
        let stop = stop.clone();
        let metrics = metrics.clone();
        Arc::new(move |job: Job<Pending>| {
            let settings = settings.clone();
            let client = sink_client.clone();
            let stop = stop.clone();
            let metrics = metrics.clone();
            Box::pin(async move {
                let ev = job
                    .item
                    .event(&settings.events, settings.overrides.as_ref());
                let out = deliver::deliver(
                    &client,
                    &settings.sink,
                    &ev,
                    settings.content_mode,
                    &settings.delivery,
                    &stop,
                )
                .await;
                let ty = ev.ty().to_string();
                match &out {
                    Ok(Delivered::Sink { attempts }) => {
                        metrics.sent.get_or_create(&Metrics::of(&ty)).inc();
                        metrics.latency.observe(job.seen.elapsed().as_secs_f64());
                        if *attempts > 1 {
                            metrics
                                .attempts_failed
                                .get_or_create(&Metrics::of(&ty))
                                .inc_by(u64::from(*attempts - 1));
                        }
                    }
                    Ok(Delivered::DeadLettered { attempts, .. }) => {
                        metrics.dead_lettered.get_or_create(&Metrics::of(&ty)).inc();
                        metrics
                            .attempts_failed
                            .get_or_create(&Metrics::of(&ty))
                            .inc_by(u64::from(*attempts));
                        warn!(event_id = %ev.id(), sink = %settings.sink, "event sent to the dead-letter sink");
                    }
                    Ok(Delivered::Failed { error, attempts }) => {
                        metrics.failed.get_or_create(&Metrics::of(&ty)).inc();
                        metrics
                            .attempts_failed
                            .get_or_create(&Metrics::of(&ty))
                            .inc_by(u64::from(*attempts));
                        error!(event_id = %ev.id(), sink = %settings.sink, error = %error, "the sink refused an event for good and there is no dead-letter sink");
                    }
                    Err(_) => {}
                }
                (job, out)
            })
        })
    };
    let (queue, mut done) = queue::start(10_000, settings.concurrency, deliver_fn);

    // Acknowledgements advance the delivered state; a stopped delivery advances nothing, so
    // the next start sends it again.
    let ack_task = {
        let checkpoint = checkpoint.clone();
        let metrics = metrics.clone();
        let depth = queue.depth_counter();
        tokio::spawn(async move {
            while let Some((job, outcome)) = done.recv().await {
                metrics
                    .queue_depth
                    .set(depth.load(std::sync::atomic::Ordering::Relaxed) as i64);
                if outcome.is_err() {
                    continue;
                }
                let Pending::Tag { change, after, .. } = job.item else {
                    continue;
                };
                let stream = (change.namespace, change.image_stream);
                let next = checkpoint.get(&stream).unwrap_or_default().told(
                    &change.image_stream_uid,
                    &change.tag,
                    after,
                );
                checkpoint.record(stream, Some(next).filter(|s| !s.tags.is_empty()));
            }
        })
    };

    let mut w = Watching {
        settings: settings.clone(),
        queue: queue.clone(),
        checkpoint: checkpoint.clone(),
        enqueued: initial,
        announced: HashMap::new(),
        first_start,
        loaded,
        metrics: metrics.clone(),
        filter: settings.tags.clone(),
    };
    // Mode imagestreamtag reads the status and a little metadata of each stream; the other
    // modes send the whole object.
    match settings.mode {
        Mode::ImageStreamTag => {
            watch::<TagsOnly>(&client, &settings, &mut w, &queue, &metrics, &listed, stop).await
        }
        Mode::Resource | Mode::Reference => {
            watch::<Whole>(&client, &settings, &mut w, &queue, &metrics, &listed, stop).await
        }
    }
    drop(w);
    drop(queue);
    let _ = ack_task.await;
    Ok(())
}

/// The watch loop: lists and watches ImageStreams (reading `R` of each) and hands each to `w`,
/// until `stop` turns true or the watch streams end.
async fn watch<R: Reading>(
    client: &kube::Client,
    settings: &Settings,
    w: &mut Watching,
    queue: &Queue<Pending>,
    metrics: &Metrics,
    listed_once: &tokio::sync::watch::Sender<bool>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // Pages of 100 streams (kube's default is 500): a page is held as text and as objects
    // until its last stream is diffed, and that is the peak of the first list. Measured at
    // 100,000 streams (BENCHMARKS.md), pages of 500 raised the catch-up's peak from 193 to
    // 220 MiB and did not make it faster.
    let mut config = watcher::Config::default().page_size(100);
    if let Some(sel) = &settings.selector {
        config = config.labels(sel);
    }
    // Watched as untyped objects and converted one by one: a malformed ImageStream is logged
    // and skipped instead of failing the whole list (and with it the watch).
    let apis: Vec<(Option<String>, Api<Watched<R>>)> = if settings.namespaces.is_empty() {
        vec![(None, Api::all(client.clone()))]
    } else {
        settings
            .namespaces
            .iter()
            .map(|ns| (Some(ns.clone()), Api::namespaced(client.clone(), ns)))
            .collect()
    };
    let scopes: Vec<Option<String>> = apis.iter().map(|(ns, _)| ns.clone()).collect();
    let streams = apis.into_iter().enumerate().map(|(i, (_, api))| {
        watcher(api, config.clone())
            .default_backoff()
            .map(move |e| (i, e))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    let mut listing: HashMap<usize, HashSet<StreamKey>> = HashMap::new();
    let mut listed: HashSet<usize> = HashSet::new();
    loop {
        let next = tokio::select! {
            _ = crate::leader::until(&mut stop, true) => break,
            next = events.next() => next,
        };
        let Some((i, ev)) = next else { break };
        metrics.queue_depth.set(queue.depth() as i64);
        match ev {
            Ok(watcher::Event::Init) => {
                listing.insert(i, HashSet::new());
            }
            Ok(watcher::Event::InitApply(obj)) => {
                // Known even when unreadable: keep it out of the "gone" set.
                listing.entry(i).or_default().insert(dyn_key(&obj));
                let Some(is) = typed(obj, metrics) else {
                    continue;
                };
                let initial = !listed.contains(&i);
                w.apply(&is, initial).await;
            }
            Ok(watcher::Event::InitDone) => {
                // Streams that existed before this (re-)list and are gone now were deleted
                // while the watch was down.
                let seen = listing.remove(&i).unwrap_or_default();
                let scope = &scopes[i];
                let gone: Vec<StreamKey> = w
                    .enqueued
                    .keys()
                    .chain(w.announced.keys())
                    .filter(|k| scope.as_ref().is_none_or(|ns| *ns == k.0) && !seen.contains(*k))
                    .cloned()
                    .collect::<HashSet<_>>()
                    .into_iter()
                    .collect();
                for key in gone {
                    w.delete(key, None).await;
                }
                listed.insert(i);
                if listed.len() == scopes.len() && !*listed_once.borrow() {
                    w.first_start = false;
                    listed_once.send_replace(true);
                    info!(
                        streams = w.enqueued.len().max(w.announced.len()),
                        "watching ImageStreams"
                    );
                }
            }
            Ok(watcher::Event::Apply(obj)) => {
                if let Some(is) = typed(obj, metrics) {
                    w.apply(&is, false).await;
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                let key = dyn_key(&obj);
                let is = typed(obj, metrics);
                w.delete(key, is.as_ref()).await;
            }
            Err(e) => {
                metrics.watch_restarts.inc();
                warn!(error = %e, "ImageStream watch failed; resuming");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::change::ChangeKind;

    fn change(kind: ChangeKind, tag: &str, digest: Option<&str>, generation: i64) -> TagChange {
        TagChange {
            kind,
            namespace: "ds".into(),
            image_stream: "nb".into(),
            image_stream_uid: "u1".into(),
            tag: tag.into(),
            digest: digest.map(str::to_string),
            previous_digest: None,
            docker_image_reference: None,
            generation,
            time: None,
            reason: None,
            message: None,
        }
    }

    #[test]
    fn a_watched_stream_is_typed_whole_and_a_malformed_one_keeps_its_name() {
        let good = serde_json::json!({
            "metadata": {"name": "nb", "namespace": "ds", "uid": "u1"},
            "spec": {},
            "status": {"tags": [{"tag": "latest", "items": [{"image": "sha256:a", "generation": 2}]}]},
        });
        let w: Watched = serde_json::from_value(good).unwrap();
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(key_of(&is), ("ds".into(), "nb".into()));
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(is.status.unwrap().tags[0].history()[0].generation, 2);

        let bad = serde_json::json!({
            "metadata": {"name": "nb", "namespace": "ds"},
            "status": {"tags": "not a list"},
        });
        let w: Watched = serde_json::from_value(bad).unwrap();
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        assert!(w.stream.is_err());

        for unnamed in [serde_json::json!({"metadata": 7}), serde_json::json!([1])] {
            let w: Watched = serde_json::from_value(unnamed).unwrap();
            assert!(w.stream.is_err());
        }
    }

    #[test]
    fn a_watch_line_is_typed_straight_from_its_text_and_a_malformed_object_keeps_its_name() {
        // The path the watch takes: kube-rs reads each line as a WatchEvent from its text.
        let line = r#"{"type":"MODIFIED","object":{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"nb","namespace":"ds","uid":"u1","resourceVersion":"7"},"spec":{"tags":[{"name":"latest"}]},"status":{"tags":[{"tag":"latest","items":[{"image":"sha256:a","generation":2,"created":"2026-12-01T10:00:00Z"}]}]},"unknownField":{"x":[1,2]}}}"#;
        let kube::core::WatchEvent::Modified(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(line).unwrap()
        else {
            panic!("not a MODIFIED event");
        };
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        assert_eq!(w.metadata.resource_version.as_deref(), Some("7"));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(
            is.status.unwrap().tags[0].history()[0].image,
            "sha256:a".to_string()
        );

        let bad = r#"{"type":"ADDED","object":{"metadata":{"name":"nb","namespace":"ds"},"status":{"tags":[{"tag":"latest","items":"not a list"}]}}}"#;
        let kube::core::WatchEvent::Added(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(bad).unwrap()
        else {
            panic!("not an ADDED event");
        };
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        let why = w.stream.as_ref().unwrap_err();
        assert!(why.contains("invalid type"), "{why}");
        let metrics = Metrics::register(&mut Default::default());
        assert!(typed(w, &metrics).is_none());
        assert_eq!(metrics.malformed.get(), 1);

        // A metadata that is no object: the stream is unnamed and the reason says so.
        let unnamed = r#"{"type":"ADDED","object":{"metadata":7}}"#;
        let kube::core::WatchEvent::Added(w) =
            serde_json::from_str::<kube::core::WatchEvent<Watched>>(unnamed).unwrap()
        else {
            panic!("not an ADDED event");
        };
        assert_eq!(dyn_key(&w), (String::new(), String::new()));
        assert!(w.stream.unwrap_err().starts_with("metadata: "));
    }

    #[test]
    fn mode_imagestreamtag_reads_the_status_and_the_naming_metadata_and_skips_the_rest() {
        let line = r#"{"type":"MODIFIED","object":{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"nb","namespace":"ds","uid":"u1","resourceVersion":"7","generation":3,"annotations":{"opendatahub.io/notebook-image":"true"},"managedFields":[{"manager":"oc","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:tags":{}}}}]},"spec":{"tags":[{"name":"latest","from":{"kind":"DockerImage","name":"quay.io/x/nb:latest"}}]},"status":{"dockerImageRepository":"r/ds/nb","tags":[{"tag":"latest","items":[{"image":"sha256:a","generation":2,"created":"2026-12-01T10:00:00Z"}],"conditions":[{"type":"ImportSuccess","status":"False","reason":"NotFound","generation":3}]}]}}}"#;
        let event = |line: &str| -> Watched<TagsOnly> {
            match serde_json::from_str::<kube::core::WatchEvent<Watched<TagsOnly>>>(line) {
                Ok(kube::core::WatchEvent::Modified(w)) => w,
                other => panic!("not a MODIFIED event: {other:?}"),
            }
        };
        let w = event(line);
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        assert_eq!(w.metadata.resource_version.as_deref(), Some("7"));
        let is = typed(w, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(is.metadata.annotations, None, "not read");
        assert_eq!(is.metadata.managed_fields, None, "not read");
        assert!(is.spec.tags.is_empty(), "the spec is not read");
        // The status is read whole: the same as the whole object's.
        let whole: kube::core::WatchEvent<Watched<Whole>> = serde_json::from_str(line).unwrap();
        let kube::core::WatchEvent::Modified(whole) = whole else {
            panic!("not a MODIFIED event")
        };
        let whole = typed(whole, &Metrics::register(&mut Default::default())).unwrap();
        assert_eq!(is.status, whole.status);
        assert_eq!(whole.spec.tags.len(), 1);

        // A malformed spec makes no event of mode imagestreamtag wrong: it is not malformed
        // there, and it is for the modes that send the object.
        let bad_spec = line.replace(r#""spec":{"tags":[{"#, r#""spec":{"tags":"no list","x":[{"#);
        assert!(
            serde_json::from_str::<Value>(&bad_spec).is_ok(),
            "{bad_spec}"
        );
        assert!(event(&bad_spec).stream.is_ok());
        let whole: kube::core::WatchEvent<Watched<Whole>> =
            serde_json::from_str(&bad_spec).unwrap();
        let kube::core::WatchEvent::Modified(whole) = whole else {
            panic!("not a MODIFIED event")
        };
        assert!(whole.stream.is_err());

        // A malformed status is malformed in every mode, and the stream keeps its name.
        let bad_status = line.replace(r#""items":[{"#, r#""items":"no list","x":[{"#);
        let w = event(&bad_status);
        assert_eq!(dyn_key(&w), ("ds".into(), "nb".into()));
        assert!(w.stream.is_err());
    }

    #[test]
    fn a_queued_change_builds_the_same_event_each_time_with_the_overrides() {
        let found = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let pending = Pending::Tag {
            change: change(ChangeKind::Deleted, "latest", Some("sha256:a"), 2),
            found,
            after: None,
        };
        let overrides = serde_json::json!({"extensions": {"team": "ml"}});
        let settings = EventSettings::default();
        let first = pending.event(&settings, Some(&overrides));
        let again = pending.event(&settings, Some(&overrides));
        assert_eq!(first, again);
        let change = change(ChangeKind::Deleted, "latest", Some("sha256:a"), 2);
        assert_eq!(first.id(), event::event_id(&change));
        assert_eq!(
            first.time(),
            Some(&found),
            "a deletion's time is when it was found"
        );
        assert_eq!(
            first.extension("team").map(ToString::to_string).as_deref(),
            Some("ml")
        );
    }
}
