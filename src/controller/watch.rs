//! The CustomRun watch the controller reconciles from: kube-runtime's watcher and reflector,
//! as `Controller::new` builds them, with one addition: a deleted run is forgotten by the
//! per-run map ([`RunStates`]), and after every (re-)list so is each run the list no longer
//! has (deleted while the watch was down, when no delete event comes).

use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};

use crate::api::CustomRun;

use super::runs::{RunKey, RunStates};

/// The store of the watched runs and the stream of runs to reconcile (for
/// `Controller::for_stream`); `runs` forgets the ones that are gone.
pub fn customruns(
    api: Api<CustomRun>,
    runs: Arc<RunStates>,
) -> (
    Store<CustomRun>,
    impl Stream<Item = Result<CustomRun, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let known = store.clone();
    let events = watcher::watcher(api, watcher::Config::default());
    let applied = reflector::reflector(writer, events)
        .inspect_ok(move |event| forget_gone(&runs, &known, event))
        .applied_objects();
    (store, applied)
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
