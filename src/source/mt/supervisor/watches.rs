//! The watches the sources need, started and stopped as the indexes say: one shared
//! ImageStream watch per [`WatchKey`] in use ([`super::super::index`]), one watch per sink kind
//! referenced ([`super::super::sinks`]).

use std::collections::BTreeSet;

use tracing::info;

use super::super::index::{SourceId, WatchKey};
use super::super::shared::Shared;
use super::super::sinks::SinkObject;
use super::super::sinkwatch;
use super::Supervisor;

impl Supervisor {
    /// Moves `id` to the watch `key` in the index, starting and stopping watches.
    pub(super) fn set_key(&mut self, id: &SourceId, key: Option<WatchKey>) {
        let change = self.index.set(id, key);
        if let Some(start) = change.start {
            let watch = Shared::start(
                &self.ctx.client,
                &start,
                self.reports.metrics.clone(),
                self.refusals.clone(),
            );
            self.watches.insert(start, watch);
        }
        if let Some(stop) = change.stop {
            info!(namespaces = %stop.describe(), "shared ImageStream watch stopped");
            self.watches.remove(&stop);
        }
        self.reports.mt.watches.set(self.watches.len() as i64);
    }

    /// `id` now references the sink objects `refs`: the watches of their kinds follow.
    pub(super) fn set_refs(&mut self, id: &SourceId, refs: BTreeSet<SinkObject>) {
        let change = self.sinks.set(id, refs);
        for kind in change.stop {
            info!(kind = %kind.describe(), "sink watch stopped");
            self.sink_watches.remove(&kind);
        }
        for kind in change.start {
            let watch = sinkwatch::start(&self.ctx.client, kind.clone(), self.sink_changes.clone());
            self.sink_watches.insert(kind, watch);
        }
    }
}
