//! Watch streams, as kube-apiserver serves them.
//!
//! A watch is a 200 response whose body is newline-delimited JSON `WatchEvent`s. It starts
//! from a resourceVersion (replaying retained events after it), from "now" with synthetic
//! ADDED events for the current objects (no resourceVersion, or `0`), or as a streaming list
//! (`sendInitialEvents=true`: the current objects, then a BOOKMARK annotated
//! `k8s.io/initial-events-end`). A resourceVersion older than the retained window is answered
//! the way a real server does it: an `ERROR` event carrying a 410 `Expired` Status inside the
//! 200 stream (kube's watcher re-lists only on that form). Bookmarks carry the stream's own
//! progress, never a revision whose events it has not delivered yet.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::registry::ResourceType;
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{Event, EventType, Obj};
use super::verbs::{Cluster, Target};

/// The query parameters of a watch.
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// `resourceVersion` (None or `"0"`: start from the current state).
    pub resource_version: Option<String>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds` (default: 30 minutes, kube-apiserver's minimum request timeout).
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: bool,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
}

/// Starts a watch; the receiver yields the body's chunks until the watch ends.
pub fn start(
    cluster: Arc<Cluster>,
    t: Target,
    opts: WatchOptions,
) -> Result<mpsc::Receiver<Bytes>, ApiError> {
    let ty = t.ty.clone();
    if !ty.allows("watch") {
        return Err(ApiError::method_not_allowed("watch", &ty.group, &ty.plural));
    }
    let ls = LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let mut fs = cluster.field_selector(&ty, opts.field_selector.as_deref())?;
    if let Some(name) = &t.name {
        // A watch on a single object is a field selector on its name.
        fs = FieldSelector::parse(&format!(
            "metadata.name={}",
            name.replace('\\', "\\\\")
                .replace(',', "\\,")
                .replace('=', "\\=")
        ))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    let rv = match opts.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                format!("resourceVersion: Invalid value: \"{s}\": must be a number"),
            )
        })?),
    };
    let filter = Filter {
        res: (ty.group.clone(), ty.plural.clone()),
        namespace: t.namespace.clone(),
        ls,
        fs,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let mut initial: Vec<Obj> = Vec::new();
    let mut initial_end = None;
    let (backlog, live, progress) = if opts.send_initial_events || rv.is_none() {
        let (items, current, live) =
            cluster
                .store
                .subscribe_current(&ty.group, &ty.plural, t.namespace.as_deref());
        initial.extend(items.into_iter().filter(|o| filter.selects(o)));
        // The end of the initial events is a bookmark, sent only to a watch that allows them.
        if opts.send_initial_events && opts.allow_bookmarks {
            let mut bm = bookmark(&ty, current);
            bm["object"]["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            initial_end = Some(bm);
        }
        (Vec::new(), live, current)
    } else {
        let from = rv.unwrap_or_default();
        match cluster.store.subscribe(&filter.res, from) {
            Ok((backlog, live)) => (backlog, live, from),
            Err(oldest) => {
                let status =
                    ApiError::expired(format!("too old resource version: {from} ({oldest})"))
                        .to_status();
                let line = json!({ "type": "ERROR", "object": status });
                let _ = tx.try_send(to_bytes(&line));
                return Ok(rx);
            }
        }
    };
    let timeout = Duration::from_secs(opts.timeout_seconds.unwrap_or(1800));
    let epoch = cluster.store.watch_epoch();
    tokio::spawn(run(Stream {
        tx,
        ty,
        filter,
        initial,
        initial_end,
        backlog,
        live,
        progress,
        allow_bookmarks: opts.allow_bookmarks,
        bookmark_every: cluster.store.window().bookmark_every,
        timeout,
        epoch,
    }));
    Ok(rx)
}

struct Filter {
    res: (String, String),
    namespace: Option<String>,
    ls: LabelSelector,
    fs: FieldSelector,
}

impl Filter {
    fn selects(&self, obj: &Obj) -> bool {
        Cluster::selected(obj, &self.ls, &self.fs)
    }

    /// The event this watch sends for a committed change, if any: an object that stops
    /// matching the selectors is DELETED for this watch, one that starts matching is ADDED.
    fn translate(&self, e: &Event) -> Option<(&'static str, Obj)> {
        if e.res != self.res {
            return None;
        }
        if let Some(ns) = &self.namespace
            && &e.namespace != ns
        {
            return None;
        }
        let now = self.selects(&e.object);
        let before = e.previous.as_ref().is_some_and(|p| self.selects(p));
        let kind = match (e.kind, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some((kind, e.object.clone()))
    }
}

struct Stream {
    tx: mpsc::Sender<Bytes>,
    ty: ResourceType,
    filter: Filter,
    /// The current objects, sent as ADDED first (a watch from now or a streaming list).
    initial: Vec<Obj>,
    /// The BOOKMARK that ends a streaming list's initial events.
    initial_end: Option<Value>,
    backlog: Vec<Arc<Event>>,
    live: broadcast::Receiver<Arc<Event>>,
    progress: u64,
    allow_bookmarks: bool,
    /// How often a bookmark is sent ([`crate::window::Window::bookmark_every`]); one is also
    /// sent 2 s before the timeout, as kube-apiserver does, so that the client resumes from as
    /// close to now as it can.
    bookmark_every: Duration,
    timeout: Duration,
    epoch: tokio::sync::watch::Receiver<u64>,
}

async fn run(mut s: Stream) {
    let deadline = tokio::time::Instant::now() + s.timeout;
    for obj in std::mem::take(&mut s.initial) {
        if s.tx.send(object_line("ADDED", &obj)).await.is_err() {
            return;
        }
    }
    if let Some(end) = s.initial_end.take()
        && s.tx.send(to_bytes(&end)).await.is_err()
    {
        return;
    }
    for e in std::mem::take(&mut s.backlog) {
        s.progress = s.progress.max(e.rv);
        if let Some((kind, obj)) = s.filter.translate(&e)
            && s.tx.send(object_line(kind, &obj)).await.is_err()
        {
            return;
        }
    }
    let mut last_bookmark = s.progress;
    let mut ticker = tokio::time::interval(s.bookmark_every);
    ticker.tick().await;
    let before_end = deadline.checked_sub(Duration::from_secs(2));
    let mut ending_bookmark_due = s.allow_bookmarks && s.timeout > Duration::from_secs(2);
    let before_end = before_end.unwrap_or(deadline);
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tokio::time::sleep_until(before_end), if ending_bookmark_due => {
                ending_bookmark_due = false;
                if s.progress > last_bookmark {
                    last_bookmark = s.progress;
                    if s.tx.send(to_bytes(&bookmark(&s.ty, s.progress))).await.is_err() {
                        return;
                    }
                }
            }
            changed = s.epoch.changed() => {
                if changed.is_err() { return; }
                // Dropped by the control API: end the stream like a server closing it.
                return;
            }
            _ = ticker.tick(), if s.allow_bookmarks => {
                if s.progress > last_bookmark {
                    last_bookmark = s.progress;
                    if s.tx.send(to_bytes(&bookmark(&s.ty, s.progress))).await.is_err() {
                        return;
                    }
                }
            }
            got = s.live.recv() => match got {
                Ok(e) => {
                    if e.rv <= s.progress {
                        continue; // already replayed from the backlog
                    }
                    s.progress = e.rv;
                    if let Some((kind, obj)) = s.filter.translate(&e)
                        && s.tx.send(object_line(kind, &obj)).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // A watcher too slow to keep up is closed the way the watch cache does
                    // it, so that the client re-lists instead of missing events.
                    let status = ApiError::expired(format!(
                        "too old resource version: {} (the watch fell behind)", s.progress
                    )).to_status();
                    let _ = s.tx.send(to_bytes(&json!({"type": "ERROR", "object": status}))).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = s.tx.closed() => return,
        }
    }
}

/// The line of an event about a stored object: its JSON as stored, not decoded and encoded
/// again for every watch.
fn object_line(kind: &str, obj: &Obj) -> Bytes {
    let json = obj.json();
    let mut b = Vec::with_capacity(json.len() + 32);
    b.extend_from_slice(b"{\"type\":\"");
    b.extend_from_slice(kind.as_bytes());
    b.extend_from_slice(b"\",\"object\":");
    b.extend_from_slice(json.as_bytes());
    b.extend_from_slice(b"}\n");
    Bytes::from(b)
}

fn bookmark(ty: &ResourceType, rv: u64) -> Value {
    json!({
        "type": "BOOKMARK",
        "object": {
            "kind": ty.kind,
            "apiVersion": ty.api_version(),
            "metadata": { "resourceVersion": rv.to_string() },
        }
    })
}

/// One line of the stream, `{"type":…,"object":…}` with `type` first, as the API server writes
/// it (the field order of Go's `metav1.WatchEvent`). A client that reads the type first decodes
/// the object straight into its type; with `object` first (the order of a JSON map's sorted
/// keys), a serde client such as kube-rs must buffer the whole object before it can.
fn to_bytes(v: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(rename = "type")]
        kind: &'a Value,
        object: &'a Value,
    }
    let line = Line {
        kind: &v["type"],
        object: &v["object"],
    };
    let mut b = serde_json::to_vec(&line).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}
