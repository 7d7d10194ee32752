//! The feed: one ImageStream watch across every namespace for all the sources that read
//! streams the same way, and its fan-out. Each change goes to the sources joined for its
//! namespace ([`routes`]), through each source's own unbounded channel, so a source whose sink
//! is slow never holds up the watch or another source.
//!
//! The feed keeps no copy of the streams and never lists them ([`follow`]). A source learns the
//! state of its namespaces from a list of its own ([`super::join`]), made after the feed tells
//! it [`Fed::List`]: when it joins (once the watch has a starting point), and again whenever
//! the watch had to start from a new point (a 410). Each change carries its resourceVersion,
//! so the source drops those its list already holds.
//!
//! What the watch sees is queued for its sources as one [`Arc`], not a copy per source: a
//! source copies it only when it takes it, and the last to take it takes it without a copy.
//! The commands travel boxed: a tokio channel allocates its slots 32 at a time for its whole
//! life.
//!
//! One watch for every namespace set, instead of one per set: each watch is an HTTP/1.1
//! connection of its own to the API server (kube's client has no HTTP/2), with its buffers, and
//! a watch per set kept a copy of its streams for the sources joining later. At 1,000 sources
//! of a namespace each, that was most of the adapter's memory (BENCHMARKS.md, issue 15). The
//! price: the adapter reads the changes of streams in namespaces no source selects (its
//! ClusterRole lets it; a source is only ever given its own namespaces' streams).

pub mod follow;
pub mod routes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::info;

use self::follow::Followed;
use self::routes::Routes;
use super::index::SourceId;
use crate::runtime::watch_errors::Refusals;
use crate::source::metrics::Metrics;
use crate::source::watch::Seen;
use crate::source::watch::decode;

/// What the feed's watch may have read ahead of its sources (it waits when they fall behind).
const AHEAD: usize = 256;

/// What a joined source is sent.
#[derive(Clone, Debug)]
pub enum Fed {
    /// List your namespaces now: the changes that follow start from a point no later than the
    /// list.
    List,
    /// A change of a stream in the source's namespaces, made at `version` (None: not a number).
    Change {
        /// Its resourceVersion.
        version: Option<u64>,
        /// The stream as it is now, or deleted (its `scope` is not the source's: 0).
        seen: Seen,
    },
}

enum Command {
    Join(SourceId, Option<Vec<String>>, Member),
    Leave(SourceId),
}

/// A joined source as the fan-out sees it: its channel, and whether it takes changes now.
#[derive(Clone)]
struct Member {
    tx: mpsc::UnboundedSender<Arc<Fed>>,
    shed: Arc<AtomicBool>,
}

/// What a joined source takes its changes from: its channel, and the switch that stops the
/// feed sending to it while the source is over its bound ([`super::join`] sheds and catches
/// up with a list of its own).
pub struct Intake {
    /// What the feed sent.
    pub rx: mpsc::UnboundedReceiver<Arc<Fed>>,
    /// True: the feed sends this source nothing (not even [`Fed::List`]).
    pub shed: Arc<AtomicBool>,
}

/// A running feed; dropping it stops the watch.
pub struct Feed {
    commands: mpsc::UnboundedSender<Box<Command>>,
    stop: CancellationToken,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Feed {
    /// Starts the watch of every namespace, reading whole streams (`whole`: modes `resource`
    /// and `reference`) or their tags and labels.
    pub fn start(
        client: &kube::Client,
        whole: bool,
        metrics: Metrics,
        refusals: Arc<Refusals>,
    ) -> Feed {
        let (followed, rx) = mpsc::channel(AHEAD);
        let client = client.clone();
        // The watch ends with the fan-out, even while it waits on an idle watch.
        let ended = followed.clone();
        let watch = if whole {
            follow::run::<decode::Whole>(client, followed, metrics, refusals).boxed()
        } else {
            follow::run::<decode::TagsAndLabels>(client, followed, metrics, refusals).boxed()
        };
        tokio::spawn(async move {
            tokio::select! {
                () = watch => {}
                () = ended.closed() => {}
            }
        });
        let (commands, commanded) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        info!(
            reading = reading(whole),
            "ImageStream watch of every namespace started"
        );
        tokio::spawn(fan_out(rx, commanded, stop.clone()));
        Feed { commands, stop }
    }

    /// Joins `id` for `namespaces` (None: every namespace): [`Fed::List`] once the watch has a
    /// starting point, then every change of those namespaces.
    pub fn join(&self, id: SourceId, namespaces: Option<Vec<String>>) -> Intake {
        let (tx, rx) = mpsc::unbounded_channel();
        let shed = Arc::new(AtomicBool::new(false));
        let member = Member {
            tx,
            shed: shed.clone(),
        };
        let _ = self
            .commands
            .send(Box::new(Command::Join(id, namespaces, member)));
        Intake { rx, shed }
    }

    /// `id` no longer takes changes.
    pub(crate) fn leave(&self, id: SourceId) {
        let _ = self.commands.send(Box::new(Command::Leave(id)));
    }
}

/// For the log and the metric's help: what a feed reads of each stream.
pub(crate) fn reading(whole: bool) -> &'static str {
    if whole { "whole" } else { "tags" }
}

async fn fan_out(
    mut followed: mpsc::Receiver<Followed>,
    mut commands: mpsc::UnboundedReceiver<Box<Command>>,
    stop: CancellationToken,
) {
    let mut routes: Routes<Member> = Routes::default();
    // Whether the watch has a starting point: a source that joins before is told to list
    // when it has one.
    let mut started = false;
    let list = Arc::new(Fed::List);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            command = commands.recv() => match command.map(|c| *c) {
                Some(Command::Join(id, namespaces, member)) => {
                    if started {
                        let _ = member.tx.send(list.clone());
                    }
                    routes.join(id, namespaces, member);
                }
                Some(Command::Leave(id)) => routes.leave(&id),
                None => break,
            },
            next = followed.recv() => {
                let Some(next) = next else { break };
                let (namespace, fed) = match next {
                    Followed::From => {
                        started = true;
                        (None, list.clone())
                    }
                    Followed::Change { version, seen } => {
                        let namespace = namespace_of(&seen).to_owned();
                        (Some(namespace), Arc::new(Fed::Change { version, seen }))
                    }
                };
                // A source that left without saying so (its flow ended) is dropped; one that
                // sheds is skipped (it lists when it takes changes again).
                let to: Box<dyn Iterator<Item = _>> = match &namespace {
                    None => Box::new(routes.all()),
                    Some(ns) => Box::new(routes.of(ns)),
                };
                let closed: Vec<SourceId> = to
                    .filter(|(_, m)| !m.shed.load(Ordering::Acquire))
                    .filter(|(_, m)| m.tx.send(fed.clone()).is_err())
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in closed {
                    routes.leave(&id);
                }
            }
        }
    }
}

/// The namespace of the stream a change is about.
pub(crate) fn namespace_of(seen: &Seen) -> &str {
    match seen {
        Seen::Applied { stream, .. } => stream.metadata.namespace.as_deref().unwrap_or_default(),
        Seen::Deleted { key, .. } => &key.0,
        Seen::Listed { namespace, .. } => namespace.as_deref().unwrap_or_default(),
    }
}

/// A change of the stream `ns/name`, as the feed's watch reports one (for tests).
#[cfg(test)]
pub(crate) fn change_of(ns: &str, name: &str) -> Seen {
    let mut is = crate::api::ImageStream::new(name, Default::default());
    is.metadata.namespace = Some(ns.into());
    Seen::Applied {
        stream: Box::new(is),
        listing: false,
        scope: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(ns: &str, name: &str) -> Followed {
        Followed::Change {
            version: Some(7),
            seen: change_of(ns, name),
        }
    }

    fn name_of(fed: &Fed) -> String {
        match fed {
            Fed::List => "LIST".into(),
            Fed::Change {
                seen: Seen::Applied { stream, .. },
                ..
            } => stream.metadata.name.clone().unwrap_or_default(),
            Fed::Change { .. } => "other".into(),
        }
    }

    fn names(list: &[&str]) -> Option<Vec<String>> {
        Some(list.iter().map(|s| s.to_string()).collect())
    }

    #[tokio::test]
    async fn sources_list_once_the_watch_has_a_start_and_take_only_their_namespaces() {
        let (watch, followed) = mpsc::channel(8);
        let (commands, commanded) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let task = tokio::spawn(fan_out(followed, commanded, stop.clone()));
        let sheds = std::sync::Mutex::new(Vec::new());
        let join = |name: &str, namespaces: Option<Vec<String>>| {
            let (tx, rx) = mpsc::unbounded_channel();
            let id = ("ds".to_string(), name.to_string());
            let shed = Arc::new(AtomicBool::new(false));
            sheds.lock().unwrap().push(shed.clone());
            let member = Member { tx, shed };
            commands
                .send(Box::new(Command::Join(id, namespaces, member)))
                .unwrap();
            rx
        };
        // Joined before the watch has a starting point: told to list when it has one.
        let mut early = join("early", names(&["ds"]));
        watch.send(Followed::From).await.unwrap();
        assert_eq!(name_of(&early.recv().await.unwrap()), "LIST");
        // Joined after: told at once.
        let mut all = join("all", None);
        let mut ml = join("ml", names(&["ml"]));
        assert_eq!(name_of(&all.recv().await.unwrap()), "LIST");
        assert_eq!(name_of(&ml.recv().await.unwrap()), "LIST");

        watch.send(applied("ds", "first")).await.unwrap();
        watch.send(applied("ml", "second")).await.unwrap();
        let (e, a) = (early.recv().await.unwrap(), all.recv().await.unwrap());
        assert_eq!(name_of(&e), "first");
        assert!(Arc::ptr_eq(&e, &a), "one copy for every source");
        assert_eq!(name_of(&all.recv().await.unwrap()), "second");
        assert_eq!(name_of(&ml.recv().await.unwrap()), "second");

        // A new starting point (a 410): every source lists again.
        watch.send(Followed::From).await.unwrap();
        for rx in [&mut early, &mut all, &mut ml] {
            assert_eq!(name_of(&rx.recv().await.unwrap()), "LIST");
        }

        // `early` sheds: it is sent nothing, not even a new starting point, until it takes
        // changes again.
        let early_shed = sheds.lock().unwrap()[0].clone();
        early_shed.store(true, Ordering::Release);
        watch.send(applied("ds", "shed")).await.unwrap();
        watch.send(Followed::From).await.unwrap();
        assert_eq!(name_of(&all.recv().await.unwrap()), "shed");
        assert_eq!(name_of(&all.recv().await.unwrap()), "LIST");
        assert_eq!(name_of(&ml.recv().await.unwrap()), "LIST");
        assert!(
            early.try_recv().is_err(),
            "a shedding source is sent nothing"
        );
        early_shed.store(false, Ordering::Release);

        let leave = ("ds".to_string(), "all".to_string());
        commands.send(Box::new(Command::Leave(leave))).unwrap();
        assert!(all.recv().await.is_none(), "a source that left is let go");
        drop(ml);
        watch.send(applied("ml", "third")).await.unwrap();
        watch.send(applied("ds", "fourth")).await.unwrap();
        assert_eq!(name_of(&early.recv().await.unwrap()), "fourth");
        assert!(early.try_recv().is_err(), "ds took nothing of ml");
        stop.cancel();
        task.await.unwrap();
    }
}
