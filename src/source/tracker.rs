//! Mode `imagestreamtag`: what to send for each stream the watch sees. The tracker keeps, per
//! stream, the state receivers will have once everything queued so far is delivered, and diffs
//! each stream seen against it ([`super::diff`]): the changes, in order, each with the tag
//! state its acknowledgement records ([`super::state::states_after`]).
//!
//! A stream's first sight decides how it is diffed:
//! - with its state recorded in the checkpoint (or queued earlier): against that state, which
//!   finds the changes made while the source was down;
//! - on a first start (no checkpoint ever written): recorded as it is, nothing sent, or with
//!   `--emit-existing` its current tags ([`diff::existing`]);
//! - when its record was lost (a shard gone, an entry unreadable): against
//!   [`diff::one_behind`], which sends its current tags again with the ids they had, a
//!   duplicate rather than a loss;
//! - otherwise it is new: its whole history is sent.
//!
//! Pure: no I/O; the caller records, counts and queues what [`Decision`] says.

use std::collections::HashMap;

use kube::runtime::reflector::ObjectRef;

use super::change::TagChange;
use super::checkpoint::{Loaded, StreamKey};
use super::diff;
use super::state::{self, StreamState, TagFilter, TagState};
use crate::api::ImageStream;

/// What to do about one stream seen.
#[derive(Debug, Default, PartialEq)]
pub struct Decision {
    /// The state to record in the checkpoint at once: a first start's baseline, or the
    /// one-behind state of a stream whose record was lost (kept so across a crash).
    pub record: Option<StreamState>,
    /// The stream's record was lost; its current tags are sent again.
    pub lost: bool,
    /// The changes to send, in order, each with the tag's state once it is delivered (None:
    /// the tag is gone).
    pub send: Vec<(TagChange, Option<TagState>)>,
}

/// The states receivers will have been told once the queue is delivered, per stream.
#[derive(Debug)]
pub struct Tracker {
    enqueued: HashMap<StreamKey, StreamState>,
    /// No checkpoint was ever written: the first list is a baseline (or `--emit-existing`).
    first_start: bool,
    emit_existing: bool,
    loaded: Loaded,
    filter: TagFilter,
}

impl Tracker {
    /// A tracker that starts from what the checkpoint held (`loaded`).
    pub fn new(mut loaded: Loaded, filter: TagFilter, emit_existing: bool) -> Tracker {
        Tracker {
            enqueued: std::mem::take(&mut loaded.states),
            first_start: loaded.first_start,
            emit_existing,
            loaded,
            filter,
        }
    }

    /// `is` as it is now; `first_list`: it comes from the first list of its watch scope.
    pub fn applied(&mut self, is: &ImageStream, first_list: bool) -> Decision {
        let key = key_of(is);
        let now = state::of_stream(is, &self.filter);
        let unknown = first_list && !self.enqueued.contains_key(&key);
        let mut decision = Decision::default();
        let changes = if unknown && self.first_start {
            if !self.emit_existing {
                // Nothing was delivered before: record what exists now, send nothing.
                decision.record = Some(now.clone());
                self.enqueued.insert(key, now);
                return decision;
            }
            diff::existing(is, &self.filter)
        } else {
            if unknown && self.loaded.lost(&key) {
                let behind = diff::one_behind(is, &self.filter);
                decision.lost = true;
                decision.record = Some(behind.clone());
                self.enqueued.insert(key.clone(), behind);
            }
            let stream = ObjectRef::<ImageStream>::new(&key.1).within(&key.0);
            diff::diff(&stream, self.enqueued.get(&key), Some(is), &self.filter)
        };
        let before = self.enqueued.insert(key, now);
        decision.send = with_states_after(before.as_ref(), changes);
        decision
    }

    /// The stream `key` is gone: a deletion of every tag recorded.
    pub fn deleted(&mut self, key: &StreamKey) -> Decision {
        let before = self.enqueued.remove(key);
        let stream = ObjectRef::<ImageStream>::new(&key.1).within(&key.0);
        let changes = diff::diff(&stream, before.as_ref(), None, &self.filter);
        Decision {
            send: with_states_after(before.as_ref(), changes),
            ..Decision::default()
        }
    }

    /// The first list of every scope is done: streams seen from now on are new, even on a
    /// first start.
    pub fn first_list_done(&mut self) {
        self.first_start = false;
    }

    /// The streams tracked.
    pub fn keys(&self) -> impl Iterator<Item = &StreamKey> {
        self.enqueued.keys()
    }
}

fn with_states_after(
    before: Option<&StreamState>,
    changes: Vec<TagChange>,
) -> Vec<(TagChange, Option<TagState>)> {
    let afters = state::states_after(before, &changes);
    changes.into_iter().zip(afters).collect()
}

/// The namespace and name of a stream.
pub fn key_of(is: &ImageStream) -> StreamKey {
    (
        is.metadata.namespace.clone().unwrap_or_default(),
        is.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests;
