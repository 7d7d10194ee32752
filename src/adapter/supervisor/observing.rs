//! When a source is observed, and what an observation changes: one observation per source at
//! a time (one asked for meanwhile follows it, so the last to land is the newest); a stale one
//! is dropped; a fresh one sets the source's route and readiness, and its watch key, which
//! (with a new generation) restarts its pipeline.

use std::time::Instant;

use kube::ResourceExt;
use tracing::{info, warn};

use super::{Supervisor, resync_after};
use crate::adapter::crd::ImageStreamSource;
use crate::adapter::index::{SourceId, watch_key};
use crate::adapter::observe::{self, Observation};
use crate::adapter::permissions::affected_by;
use crate::adapter::rbacwatch::Changed;
use crate::adapter::settings;
use crate::adapter::sinkrefs::refs_of;

/// Where a source's observations stand.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Observing {
    Idle,
    Running,
    /// Running, and another is wanted once it is done (the source or its sink changed).
    Again,
}

impl Supervisor {
    /// Observes the sources whose resync is due at `now` and that are not being observed: at
    /// start every source is observed once, queued behind [`super::OBSERVATIONS_IN_FLIGHT`], and
    /// at 10,000 sources that takes longer than a first resync; one still queued then is not
    /// observed twice (its observation, when it lands, sets its next resync).
    pub(super) fn observe_where_due(&mut self, now: Instant) {
        let due: Vec<SourceId> = (self.sources.iter())
            .filter(|(_, served)| served.due <= now && served.observing == Observing::Idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            self.observe(id);
        }
    }

    /// RBAC changed where [`Supervisor::rbac_changes`] says: the sources whose reviews it could
    /// change are observed (a source not observed yet counts as concerned).
    pub(super) fn rbac_changed(&mut self) {
        let changes = std::mem::take(&mut self.rbac_changes);
        let concerned: Vec<SourceId> = (self.sources.iter())
            .filter(|(_, served)| {
                changes.iter().any(|c| {
                    let namespace = match c {
                        Changed::Namespace(ns) => Some(ns.as_str()),
                        Changed::Cluster => None,
                    };
                    served
                        .scope
                        .as_ref()
                        .is_none_or(|scope| affected_by(scope, namespace))
                })
            })
            .map(|(id, _)| id.clone())
            .collect();
        if !concerned.is_empty() {
            info!(
                sources = concerned.len(),
                "RBAC changed: asking the permissions of the sources it concerns again"
            );
        }
        for id in &concerned {
            self.observe(id);
        }
    }

    /// Whether every watch `source` depends on works: RBAC, and its sink kinds'.
    fn watched(&self, source: &ImageStreamSource) -> bool {
        self.rbac.working()
            && refs_of(source)
                .iter()
                .all(|(kind, _, _)| self.sink_watches.get(kind).is_some_and(|w| w.working()))
    }

    /// Observes every source for which `which` holds.
    pub(super) fn observe_where(&mut self, which: impl Fn(&ImageStreamSource) -> bool) {
        let ids: Vec<SourceId> = (self.sources.iter())
            .filter(|(_, served)| which(&served.source))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ids {
            self.observe(id);
        }
    }

    /// Observes the source `id` as it is now, once the observation in flight (if any) is done.
    pub(super) fn observe(&mut self, id: &SourceId) {
        self.observe_as(id, false);
    }

    /// Writes the status of `id` anew after its pipeline listed, from what its last observation
    /// of this generation asked (nothing is asked again); a full observation when there is none.
    pub(super) fn observe_listed(&mut self, id: &SourceId) {
        self.observe_as(id, true);
    }

    fn observe_as(&mut self, id: &SourceId, reusing: bool) {
        let Some(served) = self.sources.get_mut(id) else {
            return;
        };
        if served.observing != Observing::Idle {
            served.observing = Observing::Again;
            return;
        }
        served.observing = Observing::Running;
        // Whether the pipeline of this generation has recorded its first list (a new
        // generation's pipeline starts after this observation, and lists after that).
        let listed = served.running.as_ref().is_some_and(|r| {
            r.generation == served.source.metadata.generation && *r.listed.borrow()
        });
        let trouble = served.trouble.clone();
        let reuse = served.asked.clone().filter(|_| reusing);
        let (source, tx, id) = (served.source.clone(), self.observed.clone(), id.clone());
        let (ctx, permits) = (self.ctx.clone(), self.observing.clone());
        tokio::spawn(async move {
            // Never closed, so a permit always comes.
            let _permit = permits.acquire_owned().await;
            let uid = source.uid();
            // Boxed once it may run: at a start every source's observation waits here for a
            // permit, and inline each waiting task held the whole observation's future (4.5
            // KiB: 45 MiB of the start's peak at 10,000 sources; BENCHMARKS.md, issue 30).
            let o = Box::pin(observe::run(ctx, source, listed, trouble, reuse)).await;
            let _ = tx.send((id, uid, o));
        });
    }

    /// An observation came back (None: it failed, and the next resync tries again): the next
    /// one asked for meanwhile starts, and the route, the readiness and the pipeline follow it.
    pub(super) fn observed(&mut self, id: &SourceId, uid: Option<String>, o: Option<Observation>) {
        let Some(served) = self.sources.get_mut(id).filter(|s| s.source.uid() == uid) else {
            return; // Of a source deleted (and maybe created again: its own runs).
        };
        let again = served.observing == Observing::Again;
        served.observing = Observing::Idle;
        let source = served.source.clone();
        // The reviews answered (or the spec is invalid: nothing to ask until it changes).
        let worked = o
            .as_ref()
            .is_some_and(|o| o.denied.is_some() || o.scope.is_none());
        let watched = self.watched(&source);
        let spread = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), id);
        let due = resync_after(
            Instant::now(),
            worked,
            watched,
            spread as f64 / u64::MAX as f64,
        );
        if let Some(served) = self.sources.get_mut(id) {
            served.due = due;
        }
        if again {
            self.observe(id);
        }
        let (Some(o), Some(served)) = (o, self.sources.get_mut(id)) else {
            return;
        };
        if served.source.uid() != Some(o.uid.clone())
            || served.source.metadata.generation != o.generation
        {
            return; // Stale: a newer observation is on its way.
        }
        served.ready = o.ready;
        // Kept for the observation after the first list only: 10,000 sources' would be megabytes.
        served.asked = (!o.listed).then(|| o.asked.clone());
        if o.denied.is_some() || o.scope.is_none() {
            served.scope = o.scope.clone();
        }
        served.routes.send_if_modified(|r| {
            let changed = *r != o.route;
            *r = o.route.clone();
            changed
        });
        let source = served.source.clone();
        let settings = settings::of(&source, &self.shared);
        if let Err(why) = &settings {
            warn!(namespace = %o.id.0, source = %o.id.1, reason = %why, "the source cannot be served");
        }
        if o.denied.is_none() && o.scope.is_some() {
            // The reviews could not be asked: what the source is served stays as it was (never
            // more than its service account was last seen to be allowed), until they can.
            self.gauges();
            return;
        }
        let mode = source
            .spec
            .mode
            .unwrap_or(crate::adapter::crd::Mode::ImageStreamTag);
        let denied = o.denied.clone().unwrap_or_default();
        let key = settings
            .as_ref()
            .ok()
            .and_then(|_| watch_key(o.scope.as_ref(), &denied, mode));
        let current = served
            .running
            .as_ref()
            .map(|r| (r.generation, r.key.clone()));
        if current == key.clone().map(|k| (o.generation, k)) {
            self.gauges();
            return;
        }
        self.stop_running(&o.id);
        match (key, settings) {
            (Some(key), Ok(settings)) => self.start(&o.id, key, settings),
            _ => self.set_key(&o.id, None),
        }
        self.gauges();
    }
}
