//! The CustomRun watch the controller reconciles from: kube-runtime's watcher and reflector,
//! as `Controller::new` builds them, with one addition: a deleted run is forgotten by the
//! per-run map ([`RunStates`]), and after every (re-)list so is each run the list no longer
//! has (deleted while the watch was down, when no delete event comes).
//!
//! The CustomRun CRD has no field to select a custom task's runs by, so the watch lists every
//! run of the cluster. Only this task's runs go further ([`ours`]): another task's run is never
//! stored nor handed to the reconciler, so that a tenant's runs of another task, however many
//! and however large, cannot grow the controller (security review F-10), and the watch does not
//! even decode their params ([`decode::Watched`]: they are skipped as they are read).
//!
//! `Controller::for_stream` takes the stream as it is, so the backoff is added here: without it
//! a watch the API server refuses (RBAC revoked mid-run) is retried at once, forever. Each error
//! is counted (`imagegate_controller_watch_restarts_total`) and a refusal is reported on
//! `/readyz` ([`crate::runtime::watch_errors`]) until the watch delivers again.

use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use prometheus_client::metrics::counter::Counter;

use crate::api::CustomRun;
use crate::runtime::watch_errors::{Refusals, WatchBackoff};

use super::runs::{RunKey, RunStates};

pub mod decode;

use self::decode::Watched;

/// Where a watch reports its errors.
#[derive(Clone)]
pub struct Reporting {
    /// The namespace watched (None: all).
    pub namespace: Option<String>,
    /// Refusals, reported on `/readyz`.
    pub refusals: Arc<Refusals>,
    /// Every error (`imagegate_controller_watch_restarts_total`).
    pub restarts: Counter,
}

/// The store of the watched runs and the stream of runs to reconcile (for
/// `Controller::for_stream`), retried with a backoff that grows while errors keep coming
/// ([`WatchBackoff`]) and its errors reported to `reporting`; `runs` forgets the ones that are
/// gone.
pub fn customruns(
    api: Api<CustomRun>,
    runs: Arc<RunStates>,
    reporting: Reporting,
) -> (
    Store<CustomRun>,
    impl Stream<Item = Result<CustomRun, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let known = store.clone();
    let failed = reporting.clone();
    let api: Api<Watched> = match &reporting.namespace {
        Some(ns) => Api::namespaced(api.into_client(), ns),
        None => Api::all(api.into_client()),
    };
    // Lists come in pages of [`PAGE`] runs, so that a page of large runs of another task is
    // never held whole beside the store.
    let events = watcher::watcher(api, watcher::Config::default().page_size(PAGE))
        .map_ok(unwrapped)
        // Before the filter: any run listed, ours or not, shows that the watch is allowed.
        .inspect_ok(move |event| {
            // Init comes before the list is asked for: no proof that the watch is allowed.
            if !matches!(event, Event::Init) {
                reporting.refusals.recovered(reporting.namespace.as_deref());
            }
        })
        .try_filter_map(|event| std::future::ready(Ok(ours(event))))
        .inspect_err(move |e| {
            failed.restarts.inc();
            if failed
                .refusals
                .failed(failed.namespace.as_deref(), e)
                .is_none()
            {
                tracing::warn!(error = %e, "CustomRun watch failed; resuming with backoff");
            }
        })
        .backoff(WatchBackoff::default());
    let applied = reflector::reflector(writer, events)
        .inspect_ok(move |event| forget_gone(&runs, &known, event))
        .applied_objects();
    (store, applied)
}

/// The runs per page of the watch's lists (kube-runtime's default is 500: 500 runs of 100 KiB
/// of params are a 50 MB answer, read whole before it is decoded). 20 runs of 100 KiB are 2 MB in
/// flight; 10,000 runs are 500 list requests at start (BENCHMARKS.md, issue 30).
pub(crate) const PAGE: u32 = 20;

/// `event` as the store and the reconciler take it: a run of this custom task without its
/// `managedFields` (the API server's bookkeeping, never read); another task's run not at all.
///
/// An update that makes a stored run another task's (its `customRef` edited) becomes a delete:
/// the store drops the copy it had, so no requeue reconciles a run that is no longer this task's
/// from a stale copy; a delete is passed on as it is (a no-op for a run never stored).
/// Deletes are not reconciled (`applied_objects`), so another task's runs cost the controller
/// no reconcile and no queue entry: 10,000 of them would otherwise be 10,000 reconciles at the
/// first list, each held in kube-runtime's runner at once (BENCHMARKS.md, issue 30).
pub(crate) fn ours(event: Event<CustomRun>) -> Option<Event<CustomRun>> {
    let trimmed = |mut run: CustomRun| {
        run.metadata.managed_fields = None;
        run
    };
    match event {
        Event::InitApply(run) => {
            super::params::is_ours(&run).then(|| Event::InitApply(trimmed(run)))
        }
        Event::Apply(run) if super::params::is_ours(&run) => Some(Event::Apply(trimmed(run))),
        Event::Apply(run) => Some(Event::Delete(run)),
        Event::Init | Event::InitDone | Event::Delete(_) => Some(event),
    }
}

/// The run each event carries, as the rest of the controller knows it.
fn unwrapped(event: Event<Watched>) -> Event<CustomRun> {
    match event {
        Event::Init => Event::Init,
        Event::InitApply(w) => Event::InitApply(w.0),
        Event::InitDone => Event::InitDone,
        Event::Apply(w) => Event::Apply(w.0),
        Event::Delete(w) => Event::Delete(w.0),
    }
}

/// The reflector has applied `event` to `store` when this runs.
fn forget_gone(runs: &RunStates, store: &Store<CustomRun>, event: &Event<CustomRun>) {
    match event {
        Event::Delete(run) => runs.forget(&RunKey::of(run)),
        Event::InitDone => runs.retain(|key| {
            let at = ObjectRef::new(&key.name).within(&key.namespace);
            store.get(&at).is_some()
        }),
        Event::Apply(_) | Event::Init | Event::InitApply(_) => {}
    }
}
