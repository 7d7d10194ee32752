//! A source's side of the feed ([`super::feed`]): what it is fed, turned into what a watch of
//! its own namespaces would have shown it: a list of each, then the changes.
//!
//! When the feed says [`Fed::List`] (on joining, and after the feed's watch had to start again
//! from a new point), the source lists each of its namespaces itself, page by page, and
//! passes on the streams and the end of each list as a watch's (re-)list would. The changes
//! the feed queued meanwhile wait in its channel; after the lists, each is passed on only if
//! it is newer than the list of its namespace ([`Gate`]): the resourceVersions of one resource
//! are comparable (Kubernetes 1.35, KEP-5504), a change at or before a list's version is in
//! that list already. A change whose version is not a number is passed on: sent again at
//! worst, never lost.
//!
//! **A bound per source** ([`Room`]). Past it (events not yet delivered, or changes the feed
//! queued for it) the source *sheds*: the feed stops sending it anything, what it had queued
//! from the feed and the list in progress are dropped. Once its queue has drained to half the
//! bound (its sink took them, or resolved again), it lists its namespaces again and takes the
//! feed's changes from then on. Nothing is lost: the tracker diffs each listed stream against
//! what it already queued, over each tag's import history, so what happened meanwhile is sent
//! (the ApiServerSource modes send each stream's state once, as after a watch's re-list). So
//! one tenant whose sink is dead or slow holds at most about its bound (and a page of a list)
//! in memory, however fast its streams change, and the feed never waits on it.
//!
//! The lists of all sources share [`LISTS_IN_FLIGHT`] permits: at start every source lists, and
//! each list in flight is a connection of its own (HTTP/1.1), kept idle in the client's pool
//! afterwards.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::Stream;
use kube::api::{Api, ListParams};
use kube::runtime::watcher;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use super::feed::follow::version;
use super::feed::{Fed, Intake, namespace_of};
use super::index::SourceId;
use crate::runtime::watch_errors::{Refusals, WatchBackoff};
use crate::source::checkpoint::StreamKey;
use crate::source::metrics::Metrics;
use crate::source::watch::decode::{self, Reading, Watched};
use crate::source::watch::{PAGE_SIZE, Seen, failed};

/// Lists of sources' namespaces in flight at once, across the adapter.
pub const LISTS_IN_FLIGHT: usize = 16;

/// The default bound of a source, in events (`--max-queued-per-source`).
pub(crate) const DEFAULT_BOUND: usize = 1_000;

/// How often a shedding source looks whether its queue has drained.
const DRAIN_POLL: Duration = Duration::from_millis(200);

/// A source's bound and what it is measured on.
#[derive(Clone, Debug)]
pub struct Room {
    /// The source, for the log.
    pub id: SourceId,
    /// Its events not yet delivered (its queue-depth gauge, which its flow sets on every push
    /// and every acknowledgement).
    pub depth: Gauge,
    /// The bound, in events not yet delivered and in changes the feed queued for it.
    pub bound: usize,
    /// `imagegate_source_multi_tenant_sources_shedding`.
    pub shedding: Gauge,
    /// `imagegate_source_multi_tenant_sheds_total`.
    pub sheds: Counter,
}

/// Whether a source with `depth` events not yet delivered and `queued` changes from the feed
/// is past its `bound` (pure).
pub(crate) fn over(depth: i64, queued: usize, bound: usize) -> bool {
    usize::try_from(depth).unwrap_or(0) >= bound || queued >= bound
}

/// Whether a shedding source's queue has drained enough to take changes again (pure): to half
/// its bound, so that it does not shed again at the next change.
pub(crate) fn drained(depth: i64, bound: usize) -> bool {
    usize::try_from(depth).unwrap_or(0) <= bound / 2
}

/// One source shedding, in the gauge for as long as it lasts.
struct Shedding(Gauge);

impl Shedding {
    fn new(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Shedding {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Which changes pass to the source (pure): those of its namespaces, newer than their lists.
#[derive(Debug)]
pub(crate) struct Gate {
    scopes: Vec<Option<String>>,
    /// Per scope, the version of its last list (None: not listed, or not a number).
    listed_at: Vec<Option<u64>>,
}

impl Gate {
    /// The gate of `scopes` (a namespace each, or one None: every namespace).
    pub(crate) fn new(scopes: Vec<Option<String>>) -> Gate {
        let listed_at = vec![None; scopes.len()];
        Gate { scopes, listed_at }
    }

    /// The scope a stream of `namespace` is in, if the source has it.
    fn scope_of(&self, namespace: &str) -> Option<usize> {
        self.scopes
            .iter()
            .position(|s| s.as_deref().is_none_or(|ns| ns == namespace))
    }

    /// `scope` was listed at `version`.
    pub(crate) fn listed(&mut self, scope: usize, version: Option<u64>) {
        self.listed_at[scope] = version;
    }

    /// What the source is given of a change made at `version`, if anything: with the scope it
    /// is in for the source.
    pub(crate) fn pass(&self, version: Option<u64>, seen: Seen) -> Option<Seen> {
        let scope = self.scope_of(namespace_of(&seen))?;
        if let (Some(v), Some(at)) = (version, self.listed_at[scope])
            && v <= at
        {
            return None;
        }
        Some(match seen {
            Seen::Applied {
                stream, listing, ..
            } => Seen::Applied {
                stream,
                listing,
                scope,
            },
            other => other,
        })
    }
}

/// What the sources list with: one for the adapter, shared (an `Arc`) by every source.
pub struct Lister {
    /// The adapter's client.
    pub client: kube::Client,
    /// The permits shared by every source's lists.
    pub permits: Arc<Semaphore>,
    /// Where malformed streams and failed lists are counted.
    pub metrics: Metrics,
    /// Where refused lists are reported.
    pub refusals: Arc<Refusals>,
}

/// The list of one scope in progress.
struct Listing {
    scope: usize,
    present: HashSet<StreamKey>,
    version: Option<u64>,
    /// The next page's continue token.
    next: Option<String>,
}

impl Listing {
    fn of(scope: usize) -> Listing {
        Listing {
            scope,
            present: HashSet::new(),
            version: None,
            next: None,
        }
    }
}

struct Joined<R> {
    fed: Intake,
    room: Room,
    gate: Gate,
    lister: Arc<Lister>,
    out: VecDeque<Seen>,
    listing: Option<Listing>,
    backoff: WatchBackoff,
    reading: std::marker::PhantomData<R>,
}

/// What a source over `scopes` sees, from what the feed sends it: its lists, then the
/// changes, within its `room`. It ends when the feed lets it go.
pub fn follow<R: Reading>(
    fed: Intake,
    room: Room,
    scopes: Vec<Option<String>>,
    lister: Arc<Lister>,
) -> impl Stream<Item = Seen> + Send + 'static {
    let joined = Joined::<R> {
        fed,
        room,
        gate: Gate::new(scopes),
        lister,
        out: VecDeque::new(),
        listing: None,
        backoff: WatchBackoff::default(),
        reading: std::marker::PhantomData,
    };
    futures::stream::unfold(joined, |mut j| async move {
        let next = j.next().await?;
        Some((next, j))
    })
}

impl<R: Reading> Joined<R> {
    async fn next(&mut self) -> Option<Seen> {
        loop {
            if over(self.room.depth.get(), self.fed.rx.len(), self.room.bound) {
                self.shed().await;
                continue;
            }
            if let Some(seen) = self.out.pop_front() {
                if self.out.is_empty() {
                    // Give back the room a page took: a source spends its life between pages,
                    // and 10,000 sources' emptied buffers were 13 MiB (BENCHMARKS.md, issue 30).
                    self.out = VecDeque::new();
                }
                return Some(seen);
            }
            if let Some(listing) = self.listing.take() {
                // Boxed: a list is a large future, and a source spends its life elsewhere.
                Box::pin(self.page(listing)).await;
                continue;
            }
            match Arc::unwrap_or_clone(self.fed.rx.recv().await?) {
                Fed::List => self.listing = Some(Listing::of(0)),
                Fed::Change { version, seen } => {
                    if let Some(seen) = self.gate.pass(version, seen) {
                        return Some(seen);
                    }
                }
            }
        }
    }

    /// Sheds until the queue has drained, then starts a list of every scope (module docs).
    async fn shed(&mut self) {
        let (namespace, name) = self.room.id.clone();
        self.fed.shed.store(true, Ordering::Release);
        let dropped = self.drop_fed() + self.out.len();
        self.out = VecDeque::new();
        self.listing = None;
        let _shedding = Shedding::new(&self.room.shedding);
        self.room.sheds.inc();
        warn!(namespace = %namespace, source = %name, bound = self.room.bound,
              waiting = self.room.depth.get(), dropped,
              "the source is past its bound: it takes no changes until its queue drains, then catches up with a list of its namespaces");
        while !drained(self.room.depth.get(), self.room.bound) {
            tokio::time::sleep(DRAIN_POLL).await;
        }
        // What the feed sent before it was told to resume is in the list that follows.
        self.drop_fed();
        self.fed.shed.store(false, Ordering::Release);
        self.listing = Some(Listing::of(0));
        info!(namespace = %namespace, source = %name, waiting = self.room.depth.get(),
              "the source's queue drained: listing its namespaces to catch up");
    }

    /// Drops what the feed queued for the source; says how much.
    fn drop_fed(&mut self) -> usize {
        let mut n = 0;
        while self.fed.rx.try_recv().is_ok() {
            n += 1;
        }
        n
    }

    /// Reads the next page of `l` into `out`; the list goes on with the next page or scope.
    async fn page(&mut self, mut l: Listing) {
        let namespace = self.gate.scopes[l.scope].clone();
        let api: Api<Watched<R>> = match &namespace {
            None => Api::all(self.lister.client.clone()),
            Some(ns) => Api::namespaced(self.lister.client.clone(), ns),
        };
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(token) = &l.next {
            params = params.continue_token(token);
        }
        let page = {
            let _permit = self.lister.permits.acquire().await;
            api.list(&params).await
        };
        let page = match page {
            Ok(page) => page,
            Err(e) => {
                // An expired continue token (410) starts the scope's list over.
                let gone = matches!(&e, kube::Error::Api(s) if s.code == 410);
                let e = watcher::Error::InitialListFailed(e);
                failed(
                    &self.lister.metrics,
                    &self.lister.refusals,
                    namespace.as_deref(),
                    &e,
                );
                tokio::time::sleep(self.backoff.next().unwrap_or_default()).await;
                self.listing = Some(if gone { Listing::of(l.scope) } else { l });
                return;
            }
        };
        self.lister.refusals.recovered(namespace.as_deref());
        if l.next.is_none() {
            l.version = version(page.metadata.resource_version.as_deref());
        }
        for obj in page.items {
            l.present.insert(decode::key(&obj));
            if let Some(stream) = decode::typed(obj, &self.lister.metrics) {
                self.out.push_back(Seen::Applied {
                    stream: Box::new(stream),
                    listing: true,
                    scope: l.scope,
                });
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => {
                l.next = Some(token);
                self.listing = Some(l);
            }
            _ => {
                self.gate.listed(l.scope, l.version);
                self.out.push_back(Seen::Listed {
                    scope: l.scope,
                    namespace,
                    present: l.present,
                });
                if l.scope + 1 < self.gate.scopes.len() {
                    self.listing = Some(Listing::of(l.scope + 1));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::feed::change_of as applied;

    fn scope_of(seen: &Option<Seen>) -> Option<usize> {
        match seen {
            Some(Seen::Applied { scope, .. }) => Some(*scope),
            _ => None,
        }
    }

    #[test]
    fn a_change_passes_in_its_scope_only_when_newer_than_the_list_of_its_namespace() {
        let mut gate = Gate::new(vec![Some("ds".into()), Some("ml".into())]);
        gate.listed(0, Some(10));
        gate.listed(1, Some(20));
        // In the list of ds already (at or before 10): dropped; after it: passed, scope 0.
        assert!(gate.pass(Some(9), applied("ds", "nb")).is_none());
        assert!(gate.pass(Some(10), applied("ds", "nb")).is_none());
        assert_eq!(scope_of(&gate.pass(Some(11), applied("ds", "nb"))), Some(0));
        // ml was listed later, at 20: 15 is in its list.
        assert!(gate.pass(Some(15), applied("ml", "nb")).is_none());
        assert_eq!(scope_of(&gate.pass(Some(21), applied("ml", "nb"))), Some(1));
        // Not the source's namespace: never.
        assert!(gate.pass(Some(99), applied("ops", "nb")).is_none());
        // A deletion is judged the same way, by its namespace.
        let deleted = |v| {
            gate.pass(
                Some(v),
                Seen::Deleted {
                    key: ("ml".into(), "nb".into()),
                    last: None,
                },
            )
        };
        assert!(deleted(20).is_none());
        assert!(matches!(deleted(21), Some(Seen::Deleted { .. })));
    }

    #[test]
    fn a_source_sheds_at_its_bound_and_takes_changes_again_at_half() {
        assert!(!over(7, 0, 8));
        assert!(over(8, 0, 8), "its queue at the bound");
        assert!(over(0, 8, 8), "what the feed queued for it at the bound");
        assert!(!over(-1, 0, 8), "a gauge below 0 is no depth");
        assert!(!drained(5, 8));
        assert!(drained(4, 8));
        assert!(drained(0, 3), "half of 3 is 1");
        assert!(!drained(2, 3));
    }

    #[test]
    fn a_version_that_is_not_a_number_passes_rather_than_being_lost() {
        let mut gate = Gate::new(vec![None]);
        assert_eq!(scope_of(&gate.pass(Some(1), applied("ds", "nb"))), Some(0));
        gate.listed(0, None);
        assert!(gate.pass(Some(1), applied("ds", "nb")).is_some());
        gate.listed(0, Some(5));
        assert!(gate.pass(None, applied("ops", "nb")).is_some());
        assert!(gate.pass(Some(5), applied("ops", "nb")).is_none());
    }
}
