//! The object store: every object of every type, one global resourceVersion counter, and the
//! event log that watches are served from.
//!
//! Like etcd behind kube-apiserver, every write gets the next revision, and the log keeps the
//! recent events so that a watch can resume from a resourceVersion, as the watch cache keeps
//! them ([`crate::window`]); a watch from before the window gets `410 Expired`.
//! All writes go through [`Store::write`], which runs the caller's decision under the lock, so a
//! read-modify-write (a precondition, a strategy looking at other objects) is atomic.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

use super::registry::{ResourceType, builtin_types};
use super::status::ApiError;
pub use super::stored::Stored;
use super::window::{Log, Window};

/// A stored object, frozen as its JSON. Shared, because lists, watches and snapshots hand out
/// the same version.
pub type Obj = Arc<Stored>;

/// Identifies a stored resource independently of its version: `(group, plural)`.
pub type ResKey = (String, String);

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was deleted; `object` is its last state with the deletion's resourceVersion.
    Deleted,
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct Event {
    /// The revision of the write.
    pub rv: u64,
    /// The resource written.
    pub res: ResKey,
    /// The namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the write (for deletions: before, with the new resourceVersion).
    pub object: Obj,
    /// The object before the write, so that a selector watch can tell "left the selection".
    pub previous: Option<Obj>,
}

/// What a write decided to do.
pub enum WriteOp {
    /// Store this object (create or replace).
    Put(Value),
    /// Delete the object.
    Delete,
    /// Change nothing and return the current object (no new revision, no event).
    Unchanged(Obj),
}

/// The outcome of a write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as deleted).
    pub object: Obj,
    /// The event emitted, None when nothing changed.
    pub event: Option<EventType>,
}

/// A list snapshot kept for `continue` tokens, so later pages come from the first page's state.
struct Snapshot {
    rv: u64,
    items: Arc<[Obj]>,
    created: std::time::Instant,
}

struct Inner {
    rv: u64,
    /// Shared with every request that routes by them; replaced, not changed, when CRDs come
    /// and go.
    types: Arc<Vec<ResourceType>>,
    objects: HashMap<ResKey, BTreeMap<(String, String), Obj>>,
    log: Log,
    snapshots: HashMap<u64, Snapshot>,
    next_snapshot: u64,
    /// Bumped by [`Store::drop_watches`]; open watches end when they see it change.
    watch_epoch: u64,
}

/// Read access to committed state while a write decision is being made: under the store's
/// lock (a [`Store::write`] decision), or one read at a time (a [`Store::write_optimistic`]
/// decision, which, like kube-apiserver's admission, may read others' slightly older state).
pub struct Reader<'a> {
    from: ReadFrom<'a>,
}

enum ReadFrom<'a> {
    Locked(&'a Inner),
    Store(&'a Store),
}

impl Reader<'_> {
    fn with<T>(&self, f: impl FnOnce(&Inner) -> T) -> T {
        match self.from {
            ReadFrom::Locked(inner) => f(inner),
            ReadFrom::Store(store) => f(&store.lock()),
        }
    }

    /// The current object, if any.
    pub fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Obj> {
        self.with(|inner| get_in(inner, group, plural, namespace, name))
    }
}

/// The retained events after a revision, and a receiver for everything after them.
pub type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// The store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    epoch_tx: tokio::sync::watch::Sender<u64>,
}

/// How often [`Store::write_optimistic`] decides again before it gives up with a 409.
const OPTIMISTIC_ATTEMPTS: usize = 16;

/// The most events of one resource the log keeps by default (kube-apiserver's watch cache
/// grows to 100 × 1024 at most).
pub const DEFAULT_RETAINED_EVENTS: usize = 100 * 1024;

impl Store {
    /// An empty store serving the built-in types, keeping `window` for watches.
    pub fn new(window: Window) -> Self {
        let (tx, _) = broadcast::channel(65_536);
        let (epoch_tx, _) = tokio::sync::watch::channel(0);
        Store {
            inner: Mutex::new(Inner {
                rv: 1,
                types: Arc::new(builtin_types()),
                objects: HashMap::new(),
                log: Log::new(window),
                snapshots: HashMap::new(),
                next_snapshot: 1,
                watch_epoch: 0,
            }),
            tx,
            epoch_tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-written object (writes are a
        // single insert), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current resourceVersion (the revision of the last write), for the tests of the
    /// counter that every write stamps.
    #[cfg(test)]
    fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// A snapshot of the served resource types.
    pub fn types(&self) -> Arc<Vec<ResourceType>> {
        self.lock().types.clone()
    }

    /// The resource type for a group, version and plural.
    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.lock()
            .types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// The stored (not virtual) resource type of a kind.
    pub fn find_type_of_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<ResourceType> {
        self.lock()
            .types
            .iter()
            .find(|t| t.group == group && t.version == version && t.kind == kind && !t.is_virtual())
            .cloned()
    }

    /// Adds (or replaces) resource types, as a CRD being established does.
    pub fn register_types(&self, new: Vec<ResourceType>) {
        let mut inner = self.lock();
        for t in new {
            Arc::make_mut(&mut inner.types).retain(|x| {
                !(x.group == t.group && x.version == t.version && x.plural == t.plural)
            });
            Arc::make_mut(&mut inner.types).push(t);
        }
    }

    /// Removes every version of a resource, as deleting its CRD does. Its objects are deleted
    /// (with DELETED events) first.
    pub fn unregister(&self, group: &str, plural: &str) {
        let keys: Vec<(String, String)> = {
            let inner = self.lock();
            inner
                .objects
                .get(&(group.to_string(), plural.to_string()))
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        for (ns, name) in keys {
            let _ = self.write(group, plural, &ns, &name, |_, cur| match cur {
                Some(_) => Ok(WriteOp::Delete),
                None => Err(ApiError::not_found(group, plural, &name)),
            });
        }
        Arc::make_mut(&mut self.lock().types).retain(|t| !(t.group == group && t.plural == plural));
    }

    /// The current object, if any.
    pub fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Obj> {
        get_in(&self.lock(), group, plural, namespace, name)
    }

    /// All objects of a resource (optionally in one namespace) and the list's resourceVersion.
    pub fn list(&self, group: &str, plural: &str, namespace: Option<&str>) -> (Vec<Obj>, u64) {
        let inner = self.lock();
        (list_in(&inner, group, plural, namespace), inner.rv)
    }

    /// Runs `decide` on the current object under the lock and commits what it returns: the
    /// object gets the next resourceVersion, the change goes into the event log and to every
    /// open watch. `decide` must set everything but `metadata.resourceVersion`.
    pub fn write<F>(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        decide: F,
    ) -> Result<Written, ApiError>
    where
        F: FnOnce(&Reader<'_>, Option<&Obj>) -> Result<WriteOp, ApiError>,
    {
        let mut inner = self.lock();
        let res: ResKey = (group.to_string(), plural.to_string());
        let key = (namespace.to_string(), name.to_string());
        let current = inner.objects.get(&res).and_then(|m| m.get(&key)).cloned();
        let op = decide(
            &Reader {
                from: ReadFrom::Locked(&inner),
            },
            current.as_ref(),
        )?;
        self.commit(&mut inner, res, key, current, op)
    }

    /// Like [`Store::write`], but `decide` runs without the lock, against the object as it was
    /// read, and what it returns is committed only if nobody wrote that object meanwhile;
    /// otherwise it decides again on the newer object. This is etcd's compare-and-swap loop
    /// as kube-apiserver's `GuaranteedUpdate` runs it: a long decision (the managed fields of
    /// a large object) does not hold up every other write and read. `decide` may run more
    /// than once, so it must only decide.
    pub fn write_optimistic<F>(
        &self,
        group: &str,
        plural: &str,
        namespace: &str,
        name: &str,
        mut decide: F,
    ) -> Result<Written, ApiError>
    where
        F: FnMut(&Reader<'_>, Option<&Obj>) -> Result<WriteOp, ApiError>,
    {
        let res: ResKey = (group.to_string(), plural.to_string());
        let key = (namespace.to_string(), name.to_string());
        for _ in 0..OPTIMISTIC_ATTEMPTS {
            let read = self.get(group, plural, namespace, name);
            let op = decide(
                &Reader {
                    from: ReadFrom::Store(self),
                },
                read.as_ref(),
            )?;
            let mut inner = self.lock();
            let current = inner.objects.get(&res).and_then(|m| m.get(&key)).cloned();
            let unchanged = match (&read, &current) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if unchanged {
                return self.commit(&mut inner, res, key, current, op);
            }
        }
        Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {plural}.{group} \"{name}\": the object kept changing while this write was decided ({OPTIMISTIC_ATTEMPTS} attempts); please apply your changes to the latest version and try again"
            ),
        ))
    }

    /// Commits a decision under the lock: the next revision, the log, the watches.
    fn commit(
        &self,
        inner: &mut Inner,
        res: ResKey,
        key: (String, String),
        current: Option<Obj>,
        op: WriteOp,
    ) -> Result<Written, ApiError> {
        let (kind, stored) = match op {
            WriteOp::Unchanged(obj) => {
                return Ok(Written {
                    object: obj,
                    event: None,
                });
            }
            WriteOp::Put(mut obj) => {
                inner.rv += 1;
                set_rv(&mut obj, inner.rv);
                let obj = Arc::new(Stored::new(&obj));
                inner
                    .objects
                    .entry(res.clone())
                    .or_default()
                    .insert(key.clone(), obj.clone());
                let kind = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, obj)
            }
            WriteOp::Delete => {
                let Some(cur) = current.clone() else {
                    return Err(ApiError::not_found(&res.0, &res.1, &key.1));
                };
                inner.rv += 1;
                if let Some(m) = inner.objects.get_mut(&res) {
                    m.remove(&key);
                }
                let mut last = cur.value();
                set_rv(&mut last, inner.rv);
                (EventType::Deleted, Arc::new(Stored::new(&last)))
            }
        };
        let event = Arc::new(Event {
            rv: inner.rv,
            res,
            namespace: key.0,
            kind,
            object: stored.clone(),
            previous: current,
        });
        inner.log.push(event.clone(), std::time::Instant::now());
        // Nobody listening is fine: the log still has the event for later watches.
        let _ = self.tx.send(event);
        Ok(Written {
            object: stored,
            event: Some(kind),
        })
    }

    /// Starts a watch of one resource from `from_rv` (exclusive): the events after it that are
    /// still retained, and a receiver for everything later, taken under one lock so that no
    /// event falls between them. `Err` when `from_rv` is older than the retained window.
    pub fn subscribe(&self, res: &ResKey, from_rv: u64) -> Result<Subscription, u64> {
        let inner = self.lock();
        let backlog = inner.log.since(res, from_rv)?;
        Ok((backlog, self.tx.subscribe()))
    }

    /// The current objects of a resource plus a receiver for later events, under one lock
    /// (a watch without a resourceVersion starts with synthetic ADDED events for these).
    pub fn subscribe_current(
        &self,
        group: &str,
        plural: &str,
        namespace: Option<&str>,
    ) -> (Vec<Obj>, u64, broadcast::Receiver<Arc<Event>>) {
        let inner = self.lock();
        (
            list_in(&inner, group, plural, namespace),
            inner.rv,
            self.tx.subscribe(),
        )
    }

    /// Forgets every retained event: a watch from any earlier resourceVersion now gets
    /// `410 Expired`, as after an etcd compaction.
    pub fn compact(&self) -> u64 {
        let mut inner = self.lock();
        let rv = inner.rv;
        inner.log.clear(rv);
        inner.snapshots.clear();
        rv
    }

    /// The watch window kept.
    pub fn window(&self) -> Window {
        self.lock().log.window()
    }

    /// Starts the watch window now, as a server's watch cache starts with a list when it
    /// starts: a watch from an earlier resourceVersion gets `410 Expired`. Nothing where the
    /// window keeps every event from the first ([`Window::from_first_event`]).
    pub fn start_window(&self) {
        let mut inner = self.lock();
        if !inner.log.window().from_first_event {
            let rv = inner.rv;
            inner.log.clear(rv);
        }
    }

    /// Ends every open watch (they see a new epoch and close their streams), as an API server
    /// restart or a load balancer timeout does.
    pub fn drop_watches(&self) {
        let epoch = {
            let mut inner = self.lock();
            inner.watch_epoch += 1;
            inner.watch_epoch
        };
        let _ = self.epoch_tx.send(epoch);
    }

    /// A receiver that changes when [`Store::drop_watches`] is called.
    pub fn watch_epoch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.epoch_tx.subscribe()
    }

    /// Keeps `items` for later pages of a paginated list; returns the snapshot's id.
    pub fn save_snapshot(&self, rv: u64, items: Arc<[Obj]>) -> u64 {
        let mut inner = self.lock();
        // Tokens live for a few minutes, like etcd's compaction interval makes them do.
        inner
            .snapshots
            .retain(|_, s| s.created.elapsed() < std::time::Duration::from_secs(300));
        let id = inner.next_snapshot;
        inner.next_snapshot += 1;
        inner.snapshots.insert(
            id,
            Snapshot {
                rv,
                items,
                created: std::time::Instant::now(),
            },
        );
        id
    }

    /// The items and resourceVersion of a saved snapshot, if it has not expired.
    pub fn snapshot(&self, id: u64) -> Option<(u64, Arc<[Obj]>)> {
        self.lock()
            .snapshots
            .get(&id)
            .map(|s| (s.rv, s.items.clone()))
    }
}

fn get_in(inner: &Inner, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Obj> {
    inner
        .objects
        .get(&(group.to_string(), plural.to_string()))
        .and_then(|m| m.get(&(namespace.to_string(), name.to_string())))
        .cloned()
}

fn list_in(inner: &Inner, group: &str, plural: &str, namespace: Option<&str>) -> Vec<Obj> {
    let Some(m) = inner.objects.get(&(group.to_string(), plural.to_string())) else {
        return Vec::new();
    };
    match namespace {
        None => m.values().cloned().collect(),
        Some(ns) => m
            .range((ns.to_string(), String::new())..)
            .take_while(|((n, _), _)| n == ns)
            .map(|(_, v)| v.clone())
            .collect(),
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        md.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}})
    }

    fn put(store: &Store, name: &str) -> Written {
        let obj = cm(name);
        store
            .write("", "configmaps", "ns", name, |_, _| Ok(WriteOp::Put(obj)))
            .unwrap()
    }

    #[test]
    fn every_write_gets_the_next_resource_version() {
        let store = Store::new(Window::lenient(10));
        let a = put(&store, "a");
        let b = put(&store, "b");
        assert_eq!(a.object.value()["metadata"]["resourceVersion"], "2");
        assert_eq!(b.object.value()["metadata"]["resourceVersion"], "3");
        assert_eq!(store.current_rv(), 3);
    }

    #[test]
    fn unchanged_writes_emit_nothing() {
        let store = Store::new(Window::lenient(10));
        let a = put(&store, "a").object;
        let w = store
            .write("", "configmaps", "ns", "a", |_, cur| {
                Ok(WriteOp::Unchanged(cur.unwrap().clone()))
            })
            .unwrap();
        assert!(w.event.is_none());
        assert_eq!(w.object, a);
        assert_eq!(store.current_rv(), 2);
    }

    #[test]
    fn subscribe_replays_events_after_the_given_revision_only() {
        let store = Store::new(Window::lenient(10));
        put(&store, "a");
        put(&store, "b");
        put(&store, "c");
        let (backlog, _) = store
            .subscribe(&("".into(), "configmaps".into()), 3)
            .unwrap();
        let names: Vec<_> = backlog
            .iter()
            .map(|e| {
                e.object.value()["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["c"]);
    }

    #[test]
    fn an_optimistic_write_decides_again_when_the_object_changed_meanwhile() {
        let store = Store::new(Window::lenient(10));
        put(&store, "a");
        let mut seen = Vec::new();
        let w = store
            .write_optimistic("", "configmaps", "ns", "a", |_, cur| {
                let rv = cur.unwrap().value()["metadata"]["resourceVersion"].clone();
                seen.push(rv.clone());
                if seen.len() == 1 {
                    // Another writer commits between this read and the commit.
                    put(&store, "a");
                }
                let mut o = cm("a");
                o["data"] = json!({"decided-on": rv});
                Ok(WriteOp::Put(o))
            })
            .unwrap();
        assert_eq!(seen, vec![json!("2"), json!("3")]);
        let v = w.object.value();
        assert_eq!(
            v["data"]["decided-on"], "3",
            "only the second decision is committed"
        );
        assert_eq!(v["metadata"]["resourceVersion"], "4");
        assert_eq!(store.current_rv(), 4);
    }

    #[test]
    fn an_optimistic_write_that_keeps_losing_the_race_is_a_conflict() {
        let store = Store::new(Window::lenient(100));
        put(&store, "a");
        let mut runs = 0;
        let e = store
            .write_optimistic("", "configmaps", "ns", "a", |_, _| {
                runs += 1;
                put(&store, "a");
                Ok(WriteOp::Put(cm("a")))
            })
            .unwrap_err();
        assert_eq!((e.code, e.reason), (409, "Conflict"));
        assert_eq!(runs, OPTIMISTIC_ATTEMPTS);
    }

    #[test]
    fn compaction_expires_older_revisions() {
        let store = Store::new(Window::lenient(10));
        put(&store, "a");
        let rv = store.compact();
        assert!(
            store
                .subscribe(&("".into(), "configmaps".into()), rv - 1)
                .is_err()
        );
        assert!(
            store
                .subscribe(&("".into(), "configmaps".into()), rv)
                .is_ok()
        );
    }

    #[test]
    fn the_window_slides_when_the_log_is_full() {
        let store = Store::new(Window::lenient(2));
        for n in ["a", "b", "c", "d"] {
            put(&store, n);
        }
        let res = ("".to_string(), "configmaps".to_string());
        assert!(store.subscribe(&res, 2).is_err());
        assert_eq!(store.subscribe(&res, 3).unwrap().0.len(), 2);
    }

    #[test]
    fn delete_reports_the_last_state_with_a_new_revision() {
        let store = Store::new(Window::lenient(10));
        put(&store, "a");
        let w = store
            .write("", "configmaps", "ns", "a", |_, _| Ok(WriteOp::Delete))
            .unwrap();
        assert_eq!(w.event, Some(EventType::Deleted));
        assert_eq!(w.object.value()["metadata"]["resourceVersion"], "3");
        assert!(store.get("", "configmaps", "ns", "a").is_none());
    }

    #[test]
    fn list_in_one_namespace_excludes_the_others() {
        let store = Store::new(Window::lenient(10));
        put(&store, "a");
        let other = json!({"metadata": {"name": "z", "namespace": "other"}});
        store
            .write("", "configmaps", "other", "z", |_, _| {
                Ok(WriteOp::Put(other))
            })
            .unwrap();
        let (items, _) = store.list("", "configmaps", Some("ns"));
        assert_eq!(items.len(), 1);
        let (all, _) = store.list("", "configmaps", None);
        assert_eq!(all.len(), 2);
    }
}
