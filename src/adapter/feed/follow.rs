//! The feed's watch: ImageStreams of every namespace, from a starting point and never listed.
//!
//! It takes a resourceVersion to start from (a list of one item: the collection's version,
//! without reading the streams), says so ([`Followed::From`]), then watches from it and passes
//! on each change with the version it was made at. A watch that ends (its timeout, a dropped
//! connection) is resumed from the last version seen (a change's, or a BOOKMARK's); one that
//! cannot be resumed (410: the version was compacted away) starts from a new point, which the
//! sources learn from the next [`Followed::From`] (each lists its own namespaces again). Errors
//! are counted and retried after a growing backoff ([`WatchBackoff`]); a refusal (403 and the
//! like) is also reported on `/readyz` ([`Refusals`]) until the watch works again.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use tokio::sync::mpsc;

use crate::runtime::watch_errors::{Refusals, WatchBackoff};
use crate::source::metrics::Metrics;
use crate::source::watch::decode::{self, Reading, Watched};
use crate::source::watch::{Seen, failed};

/// The server-side timeout asked of each watch request, as kube's watcher asks.
const WATCH_TIMEOUT_SECS: u32 = 290;

/// What the feed's watch reports.
#[derive(Debug)]
pub(crate) enum Followed {
    /// The watch starts (again) from a point the sources do not know: every change from here
    /// on follows. A source must list its namespaces after this to know their state.
    From,
    /// A change, made at `version` (None: a resourceVersion that is not a number).
    Change {
        /// The change's resourceVersion, as a number (Kubernetes 1.35 makes them comparable
        /// within a resource: KEP-5504).
        version: Option<u64>,
        /// The stream as it is now, or deleted.
        seen: Seen,
    },
}

/// A resourceVersion as a number, if it is one.
pub(crate) fn version(rv: Option<&str>) -> Option<u64> {
    rv?.parse().ok().filter(|v| *v > 0)
}

/// Watches every ImageStream, reading `R` of each, and sends what it sees to `to` until `to` is
/// closed.
pub(crate) async fn run<R: Reading>(
    client: kube::Client,
    to: mpsc::Sender<Followed>,
    metrics: Metrics,
    refusals: Arc<Refusals>,
) {
    let api: Api<Watched<R>> = Api::all(client);
    let mut backoff = WatchBackoff::default();
    // BOOKMARKs are asked for by default: an idle watch resumes from a recent version.
    let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
    'start: loop {
        let start = match api.list(&ListParams::default().limit(1)).await {
            Ok(list) => (list.metadata.resource_version)
                .filter(|rv| !rv.is_empty())
                .ok_or(watcher::Error::NoResourceVersion),
            Err(e) => Err(watcher::Error::InitialListFailed(e)),
        };
        let mut from = match start {
            Ok(rv) => rv,
            Err(e) => {
                failed(&metrics, &refusals, None, &e);
                pause(&mut backoff, &to).await;
                continue 'start;
            }
        };
        refusals.recovered(None);
        if to.send(Followed::From).await.is_err() {
            return;
        }
        loop {
            let events = match api.watch(&params, &from).await {
                Ok(events) => events,
                Err(e) => {
                    let gone = matches!(&e, kube::Error::Api(s) if s.code == 410);
                    failed(
                        &metrics,
                        &refusals,
                        None,
                        &watcher::Error::WatchStartFailed(e),
                    );
                    pause(&mut backoff, &to).await;
                    if gone {
                        continue 'start;
                    }
                    continue;
                }
            };
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let obj = match event {
                    Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => (obj, false),
                    Ok(WatchEvent::Deleted(obj)) => (obj, true),
                    Ok(WatchEvent::Bookmark(b)) => {
                        from = b.metadata.resource_version;
                        continue;
                    }
                    Ok(WatchEvent::Error(s)) => {
                        let gone = s.code == 410;
                        failed(&metrics, &refusals, None, &watcher::Error::WatchError(s));
                        pause(&mut backoff, &to).await;
                        if gone {
                            continue 'start;
                        }
                        break;
                    }
                    Err(e) => {
                        failed(&metrics, &refusals, None, &watcher::Error::WatchFailed(e));
                        pause(&mut backoff, &to).await;
                        break;
                    }
                };
                refusals.recovered(None);
                let (obj, deleted) = obj;
                let rv = kube::Resource::meta(&obj).resource_version.clone();
                let version = version(rv.as_deref());
                if let Some(rv) = rv {
                    from = rv;
                }
                let seen = if deleted {
                    let key = decode::key(&obj);
                    let last = decode::typed(obj, &metrics).map(Box::new);
                    Some(Seen::Deleted { key, last })
                } else {
                    decode::typed(obj, &metrics).map(|stream| Seen::Applied {
                        stream: Box::new(stream),
                        listing: false,
                        scope: 0,
                    })
                };
                let Some(seen) = seen else { continue };
                if to.send(Followed::Change { version, seen }).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Waits the next backoff, or until nobody listens any more.
async fn pause(backoff: &mut WatchBackoff, to: &mpsc::Sender<Followed>) {
    let wait = backoff.next().unwrap_or_default();
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        () = to.closed() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_a_positive_number_or_none() {
        assert_eq!(version(Some("42")), Some(42));
        assert_eq!(version(Some("18446744073709551615")), Some(u64::MAX));
        for not in [
            None,
            Some(""),
            Some("0"),
            Some("-1"),
            Some("a1"),
            Some("1.5"),
        ] {
            assert_eq!(version(not), None, "{not:?}");
        }
    }
}
