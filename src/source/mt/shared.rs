//! One shared ImageStream watch ([`super::index::WatchKey`]) and its fan-out: every change it
//! sees goes to every source that joined it, each through its own unbounded channel, so a
//! source whose sink is slow never holds up the watch or another source (its flow takes each
//! change off its channel at once and queues it).
//!
//! The watch keeps the streams it last saw ([`Cache`]); a source that joins a watch already
//! running is first given them as a list of each scope, so its flow starts as a single
//! source's starts: against its checkpoint, or as a first start.
//!
//! What the watch sees is queued for its sources as one [`Arc`], not a copy per source: a
//! source copies it only when it takes it, and the last to take it takes it without a copy
//! (so a change waiting in the queues of many sources is held once). The commands travel
//! boxed: a tokio channel allocates its slots 32 at a time for its whole life, and the adapter
//! holds a channel of each kind per source.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::index::{SourceId, WatchKey};
use crate::api::ImageStream;
use crate::source::checkpoint::StreamKey;
use crate::source::metrics::Metrics;
use crate::source::tracker::key_of;
use crate::source::watch::{self, Seen, decode};
use crate::watch_errors::Refusals;

enum Command {
    Join(SourceId, mpsc::UnboundedSender<Arc<Seen>>),
    Leave(SourceId),
}

/// A running shared watch; dropping it stops the watch.
pub struct Shared {
    commands: mpsc::UnboundedSender<Box<Command>>,
    stop: CancellationToken,
    scopes: usize,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Shared {
    /// Starts watching what `key` says.
    pub fn start(
        client: &kube::Client,
        key: &WatchKey,
        metrics: Metrics,
        refusals: Arc<Refusals>,
    ) -> Shared {
        let scopes = key.scopes();
        let seen = if key.whole {
            watch::start::<decode::Whole>(client, &scopes, None, metrics, refusals).boxed()
        } else {
            watch::start::<decode::TagsAndLabels>(client, &scopes, None, metrics, refusals).boxed()
        };
        let (commands, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        info!(namespaces = %key.describe(), "shared ImageStream watch started");
        tokio::spawn(fan_out(seen, Cache::new(scopes.clone()), rx, stop.clone()));
        Shared {
            commands,
            stop,
            scopes: scopes.len(),
        }
    }

    /// How many scopes the watch has.
    pub fn scopes(&self) -> usize {
        self.scopes
    }

    /// Joins `id`: what the watch holds now, as a list, then every change.
    pub fn join(&self, id: SourceId) -> mpsc::UnboundedReceiver<Arc<Seen>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = self.commands.send(Box::new(Command::Join(id, tx)));
        rx
    }

    /// `id` no longer takes changes.
    pub fn leave(&self, id: SourceId) {
        let _ = self.commands.send(Box::new(Command::Leave(id)));
    }
}

async fn fan_out(
    mut seen: futures::stream::BoxStream<'static, Seen>,
    mut cache: Cache,
    mut commands: mpsc::UnboundedReceiver<Box<Command>>,
    stop: CancellationToken,
) {
    let mut joined: BTreeMap<SourceId, mpsc::UnboundedSender<Arc<Seen>>> = BTreeMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            command = commands.recv() => match command.map(|c| *c) {
                Some(Command::Join(id, tx)) => {
                    for s in cache.replay() {
                        let _ = tx.send(Arc::new(s));
                    }
                    joined.insert(id, tx);
                }
                Some(Command::Leave(id)) => {
                    joined.remove(&id);
                }
                None => break,
            },
            next = seen.next() => {
                let Some(next) = next else { break };
                cache.apply(&next);
                let next = Arc::new(next);
                // A source that left without saying so (its flow ended) is dropped.
                joined.retain(|_, tx| tx.send(next.clone()).is_ok());
            }
        }
    }
}

/// What a shared watch last saw, per scope: the streams, the keys present (readable or not),
/// and whether the scope was listed once.
pub struct Cache {
    scopes: Vec<Option<String>>,
    streams: Vec<HashMap<StreamKey, Box<ImageStream>>>,
    present: Vec<HashSet<StreamKey>>,
    listed: Vec<bool>,
}

impl Cache {
    /// An empty cache of `scopes`.
    pub fn new(scopes: Vec<Option<String>>) -> Cache {
        let n = scopes.len();
        Cache {
            scopes,
            streams: (0..n).map(|_| HashMap::new()).collect(),
            present: (0..n).map(|_| HashSet::new()).collect(),
            listed: vec![false; n],
        }
    }

    /// The scope of a stream in `namespace`.
    fn scope_of(&self, namespace: &str) -> Option<usize> {
        self.scopes
            .iter()
            .position(|s| s.as_deref().is_none_or(|ns| ns == namespace))
    }

    /// Records what the watch saw.
    pub fn apply(&mut self, seen: &Seen) {
        match seen {
            Seen::Applied { stream, scope, .. } => {
                let key = key_of(stream);
                self.present[*scope].insert(key.clone());
                self.streams[*scope].insert(key, stream.clone());
            }
            Seen::Deleted { key, .. } => {
                if let Some(scope) = self.scope_of(&key.0) {
                    self.present[scope].remove(key);
                    self.streams[scope].remove(key);
                }
            }
            Seen::Listed { scope, present, .. } => {
                self.streams[*scope].retain(|k, _| present.contains(k));
                self.present[*scope] = present.clone();
                self.listed[*scope] = true;
            }
        }
    }

    /// What a source joining now is given: per scope, every stream as part of a list, then the
    /// end of the list once the scope was listed (else the list in progress ends it).
    pub fn replay(&self) -> Vec<Seen> {
        let mut out = Vec::new();
        for (scope, namespace) in self.scopes.iter().enumerate() {
            for stream in self.streams[scope].values() {
                out.push(Seen::Applied {
                    stream: stream.clone(),
                    listing: true,
                    scope,
                });
            }
            if self.listed[scope] {
                out.push(Seen::Listed {
                    scope,
                    namespace: namespace.clone(),
                    present: self.present[scope].clone(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(ns: &str, name: &str) -> Box<ImageStream> {
        let mut is = ImageStream::new(name, Default::default());
        is.metadata.namespace = Some(ns.into());
        Box::new(is)
    }

    fn key(ns: &str, name: &str) -> StreamKey {
        (ns.into(), name.into())
    }

    #[test]
    fn a_late_joiner_is_given_what_the_watch_holds_as_a_list() {
        let mut cache = Cache::new(vec![Some("ds".into()), Some("ml".into())]);
        for (ns, name, scope) in [("ds", "nb", 0), ("ds", "gone", 0), ("ml", "x", 1)] {
            cache.apply(&Seen::Applied {
                stream: stream(ns, name),
                listing: true,
                scope,
            });
        }
        cache.apply(&Seen::Listed {
            scope: 0,
            namespace: Some("ds".into()),
            present: [key("ds", "nb"), key("ds", "gone"), key("ds", "bad")].into(),
        });
        cache.apply(&Seen::Deleted {
            key: key("ds", "gone"),
            last: None,
        });
        let replay = cache.replay();
        // ds: nb, then its list's end without the deleted stream; ml: x, its list not done.
        assert_eq!(replay.len(), 3);
        let Seen::Listed { present, .. } = &replay[1] else {
            panic!("ds's list ends after its streams")
        };
        assert_eq!(*present, [key("ds", "nb"), key("ds", "bad")].into());
        assert!(matches!(
            &replay[2],
            Seen::Applied {
                scope: 1,
                listing: true,
                ..
            }
        ));
    }

    #[test]
    fn a_relist_forgets_the_streams_it_no_longer_holds() {
        let mut cache = Cache::new(vec![None]);
        for name in ["a", "b"] {
            cache.apply(&Seen::Applied {
                stream: stream("ds", name),
                listing: true,
                scope: 0,
            });
        }
        cache.apply(&Seen::Listed {
            scope: 0,
            namespace: None,
            present: [key("ds", "a")].into(),
        });
        let replay = cache.replay();
        assert_eq!(replay.len(), 2);
    }

    fn applied(name: &str) -> Seen {
        Seen::Applied {
            stream: stream("ds", name),
            listing: false,
            scope: 0,
        }
    }

    fn name_of(seen: &Seen) -> String {
        match seen {
            Seen::Applied { stream, .. } => stream.metadata.name.clone().unwrap_or_default(),
            _ => String::new(),
        }
    }

    #[tokio::test]
    async fn each_change_reaches_every_source_joined_and_none_that_left() {
        let (watch, seen) = mpsc::unbounded_channel::<Seen>();
        let seen =
            futures::stream::unfold(
                seen,
                |mut rx| async move { rx.recv().await.map(|s| (s, rx)) },
            )
            .boxed();
        let (commands, rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = tokio::spawn(fan_out(seen, Cache::new(vec![None]), rx, stop.clone()));
        let join = |id: &str| {
            let (tx, rx) = mpsc::unbounded_channel();
            let id = ("ds".to_string(), id.to_string());
            commands.send(Box::new(Command::Join(id, tx))).unwrap();
            rx
        };
        watch.send(applied("zero")).unwrap();
        let (mut a, mut b) = (join("a"), join("b"));
        // Whether a join or the change came first, each source gets "zero" once (as a change,
        // or from the cache as a list): once both have, both have joined.
        assert_eq!(name_of(&a.recv().await.unwrap()), "zero");
        assert_eq!(name_of(&b.recv().await.unwrap()), "zero");
        watch.send(applied("first")).unwrap();
        let (got_a, got_b) = (a.recv().await.unwrap(), b.recv().await.unwrap());
        assert_eq!(name_of(&got_a), "first");
        assert!(Arc::ptr_eq(&got_a, &got_b), "one copy for both sources");

        let leave = ("ds".to_string(), "a".to_string());
        commands.send(Box::new(Command::Leave(leave))).unwrap();
        assert!(a.recv().await.is_none(), "a source that left is let go");
        watch.send(applied("second")).unwrap();
        assert_eq!(name_of(&b.recv().await.unwrap()), "second");
        stop.cancel();
        task.await.unwrap();
    }
}
