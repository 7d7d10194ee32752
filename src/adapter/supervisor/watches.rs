//! The watches the sources need, started and stopped as the indexes say: a feed per way of
//! reading streams in use ([`crate::adapter::index`]), one watch per sink kind referenced
//! ([`crate::adapter::sinkrefs`]).

use std::collections::BTreeSet;

use tracing::info;

use super::Supervisor;
use crate::adapter::feed::{self, Feed};
use crate::adapter::index::{SourceId, WatchKey};
use crate::adapter::sinkrefs::SinkObject;
use crate::adapter::sinkwatch;

impl Supervisor {
    /// Sets what `id` is served in the index, starting and stopping feeds.
    pub(super) fn set_key(&mut self, id: &SourceId, key: Option<WatchKey>) {
        let change = self.index.set(id, key);
        if let Some(whole) = change.start {
            let started = Feed::start(
                &self.ctx.client,
                whole,
                self.reports.metrics.clone(),
                self.refusals.clone(),
            );
            self.feeds.insert(whole, started);
        }
        if let Some(whole) = change.stop {
            info!(
                reading = feed::reading(whole),
                "ImageStream watch of every namespace stopped"
            );
            self.feeds.remove(&whole);
        }
        self.reports.mt.watches.set(self.feeds.len() as i64);
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
