//! The watch step: lists and watches `image.openshift.io/v1` ImageStreams (ImageStreamTags
//! cannot be watched) with kube-runtime's `watcher`, one watch across all namespaces or one per
//! `--namespace`, each with `--selector`, and turns what they report into [`Seen`]: a stream as
//! it is now, a stream deleted, or a (re-)list finished with the keys it held.
//!
//! Each object is decoded leniently ([`decode`]): a malformed one is logged, counted and
//! skipped, but its key still counts as listed, so it is never taken for deleted. A watch
//! error is counted and the watcher resumes from its last resourceVersion, or re-lists when
//! that expired (410), after a backoff that grows while errors keep coming
//! ([`WatchBackoff`]); a refusal (a 400, 401, 403 or 404: RBAC revoked mid-run) is also
//! reported on `/readyz` ([`crate::runtime::watch_errors`]) until the watch delivers again.

pub mod decode;

use std::collections::HashSet;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use self::decode::{Reading, Watched};
use super::checkpoint::StreamKey;
use super::metrics::Metrics;
use crate::api::ImageStream;
use crate::runtime::watch_errors::{Refusals, WatchBackoff};

/// Streams per list page. A page is held as text and as objects until its last stream is
/// diffed, and that is the peak of the first list: larger pages raise it more than they save.
pub(crate) const PAGE_SIZE: u32 = 100;

/// What the watch saw.
#[derive(Clone, Debug)]
pub enum Seen {
    /// A stream as it is now. `listing`: it comes from a (re-)list of its scope, not from a
    /// watch event.
    Applied {
        /// The stream (parsed as far as the mode reads it).
        stream: Box<ImageStream>,
        /// Part of a (re-)list.
        listing: bool,
        /// Which watch scope saw it (an index into the scopes).
        scope: usize,
    },
    /// A stream was deleted; the last state the watch had, if it could be read.
    Deleted {
        /// The stream's namespace and name.
        key: StreamKey,
        /// Its last state.
        last: Option<Box<ImageStream>>,
    },
    /// A (re-)list of a scope finished: every stream it held (readable or not).
    Listed {
        /// Which scope.
        scope: usize,
        /// The namespace the scope is limited to (None: all namespaces).
        namespace: Option<String>,
        /// The keys of every stream the list held.
        present: HashSet<StreamKey>,
    },
}

/// The watch scopes the settings ask for: all namespaces (None), or each namespace given.
pub(crate) fn scopes(namespaces: &[String]) -> Vec<Option<String>> {
    if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().cloned().map(Some).collect()
    }
}

/// Starts watching `scopes`, reading `R` of each stream; the stream of what is seen ends only
/// when every watch does (kube's watchers retry with backoff, so in practice never).
pub(crate) fn start<R: Reading>(
    client: &kube::Client,
    scopes: &[Option<String>],
    selector: Option<&str>,
    metrics: Metrics,
    refusals: Arc<Refusals>,
) -> impl Stream<Item = Seen> + Send + use<R> {
    let mut config = watcher::Config::default().page_size(PAGE_SIZE);
    if let Some(selector) = selector {
        config = config.labels(selector);
    }
    let watches = scopes.iter().enumerate().map(|(i, namespace)| {
        let api: Api<Watched<R>> = match namespace {
            None => Api::all(client.clone()),
            Some(ns) => Api::namespaced(client.clone(), ns),
        };
        let mut listing = Listing {
            scope: i,
            namespace: namespace.clone(),
            present: None,
            metrics: metrics.clone(),
            refusals: refusals.clone(),
        };
        watcher(api, config.clone())
            .backoff(WatchBackoff::default())
            .filter_map(move |event| std::future::ready(listing.seen(event)))
            .boxed()
    });
    futures::stream::select_all(watches)
}

/// Counts a failed ImageStream list or watch of `namespace` (None: every namespace), which is
/// retried with backoff, and reports it on `/readyz` when it is a refusal (else a warning).
pub(crate) fn failed(
    metrics: &Metrics,
    refusals: &Refusals,
    namespace: Option<&str>,
    e: &watcher::Error,
) {
    metrics.watch_restarts.inc();
    if refusals.failed(namespace, e).is_none() {
        warn!(
            namespace = namespace.unwrap_or_default(),
            error = %e,
            "ImageStream list or watch failed; resuming with backoff"
        );
    }
}

/// One scope's watch: the keys of the list in progress.
struct Listing {
    scope: usize,
    namespace: Option<String>,
    /// Some while a (re-)list is in progress.
    present: Option<HashSet<StreamKey>>,
    metrics: Metrics,
    refusals: Arc<Refusals>,
}

impl Listing {
    fn seen<R>(
        &mut self,
        event: Result<watcher::Event<Watched<R>>, watcher::Error>,
    ) -> Option<Seen> {
        if let Ok(e) = &event
            && !matches!(e, watcher::Event::Init)
        {
            // Init comes before the list is asked for: no proof that the watch is allowed.
            self.refusals.recovered(self.namespace.as_deref());
        }
        match event {
            Ok(watcher::Event::Init) => {
                self.present = Some(HashSet::new());
                None
            }
            Ok(watcher::Event::InitApply(obj)) => {
                self.present
                    .get_or_insert_default()
                    .insert(decode::key(&obj));
                self.applied(obj, true)
            }
            Ok(watcher::Event::InitDone) => Some(Seen::Listed {
                scope: self.scope,
                namespace: self.namespace.clone(),
                present: self.present.take().unwrap_or_default(),
            }),
            Ok(watcher::Event::Apply(obj)) => self.applied(obj, false),
            Ok(watcher::Event::Delete(obj)) => {
                let key = decode::key(&obj);
                let last = decode::typed(obj, &self.metrics).map(Box::new);
                Some(Seen::Deleted { key, last })
            }
            Err(e) => {
                failed(&self.metrics, &self.refusals, self.namespace.as_deref(), &e);
                None
            }
        }
    }

    fn applied<R>(&self, obj: Watched<R>, listing: bool) -> Option<Seen> {
        let stream = decode::typed(obj, &self.metrics)?;
        Some(Seen::Applied {
            stream: Box::new(stream),
            listing,
            scope: self.scope,
        })
    }
}
