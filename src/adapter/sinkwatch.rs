//! The watches of sink objects: one cluster-wide watch per kind that sources' sinks or
//! dead-letter sinks reference ([`super::sinkrefs::SinkIndex`] says which), reporting each object
//! whose address changed: written, changed, removed, the object deleted or created. The
//! supervisor re-observes the sources that reference it, so events follow a moved sink within
//! a second; the resync stays the safety net.
//!
//! A kind the adapter may not watch, or that is not served (its CRD is not installed), is
//! logged once and retried with backoff; its sinks are then resolved again every 30 s until it works
//! ([`working`](SinkWatch::working)). The
//! source's `SinkProvided` says what the resolution itself finds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use super::sinkrefs::{SinkKind, SinkObject, changed, fingerprint};
use crate::runtime::watch_errors::refusal;

/// A running watch of one kind; dropping it stops the watch.
pub(crate) struct SinkWatch {
    task: JoinHandle<()>,
    /// Listed, and no error since: the kind's changes are seen as they happen.
    working: Arc<AtomicBool>,
}

impl Drop for SinkWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SinkWatch {
    /// Whether the kind's objects are watched now (else its sinks are seen at the resync).
    pub(crate) fn working(&self) -> bool {
        self.working.load(Ordering::Acquire)
    }
}

/// Starts watching the objects of `kind`, sending each whose address changed to `tx`.
pub(crate) fn start(
    client: &kube::Client,
    kind: SinkKind,
    tx: mpsc::UnboundedSender<SinkObject>,
) -> SinkWatch {
    info!(kind = %kind.describe(), "sink watch started");
    let working = Arc::new(AtomicBool::new(false));
    let task = tokio::spawn(run(client.clone(), kind, tx, working.clone()));
    SinkWatch { task, working }
}

async fn run(
    client: kube::Client,
    kind: SinkKind,
    tx: mpsc::UnboundedSender<SinkObject>,
    working: Arc<AtomicBool>,
) {
    let gvk = kind.gvk();
    let resource = ApiResource::from_gvk_with_plural(&gvk, &kind.plural);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let key = |o: &DynamicObject| (o.namespace().unwrap_or_default(), o.name_any());
    let fp = |o: &DynamicObject| fingerprint(&kind, &serde_json::to_value(o).unwrap_or_default());
    let send = |(namespace, name): (String, String)| {
        let _ = tx.send((kind.clone(), namespace, name));
    };
    let mut known: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut listing: BTreeMap<(String, String), u64> = BTreeMap::new();
    let (mut listed, mut refused) = (false, false);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => listing.clear(),
            Ok(watcher::Event::InitApply(o)) => {
                listing.insert(key(&o), fp(&o));
            }
            Ok(watcher::Event::InitDone) => {
                let list = std::mem::take(&mut listing);
                // The first list is what the sources' first observations read (the resync
                // covers a change in between); a re-list finds what the lost watch missed.
                if listed {
                    changed(&known, &list).into_iter().for_each(send);
                }
                known = list;
                listed = true;
                working.store(true, Ordering::Release);
                if std::mem::take(&mut refused) {
                    info!(kind = %kind.describe(), "sink watch works again");
                }
            }
            Ok(watcher::Event::Apply(o)) => {
                let (k, f) = (key(&o), fp(&o));
                if known.insert(k.clone(), f) != Some(f) {
                    send(k);
                }
            }
            Ok(watcher::Event::Delete(o)) => {
                let k = key(&o);
                if known.remove(&k).is_some() {
                    send(k);
                }
            }
            Err(e) => {
                working.store(false, Ordering::Release);
                match refusal(&e) {
                    Some(r) if !refused => {
                        refused = true;
                        warn!(kind = %kind.describe(), code = r.code, reason = %r.message,
                        "cannot watch the sinks of this kind (not granted, or not installed); \
                         they are re-resolved every 30 s until it works; retrying with backoff");
                    }
                    Some(_) => {}
                    None => warn!(kind = %kind.describe(), error = %e,
                    "sink watch failed; resuming with backoff"),
                }
            }
        }
    }
}
