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
pub(crate) struct Decision {
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
pub(crate) struct Tracker {
    enqueued: HashMap<StreamKey, StreamState>,
    /// No checkpoint was ever written: the first list is a baseline (or `--emit-existing`).
    first_start: bool,
    emit_existing: bool,
    loaded: Loaded,
    filter: TagFilter,
}

impl Tracker {
    /// A tracker that starts from what the checkpoint held (`loaded`).
    pub(crate) fn new(mut loaded: Loaded, filter: TagFilter, emit_existing: bool) -> Tracker {
        Tracker {
            enqueued: std::mem::take(&mut loaded.states),
            first_start: loaded.first_start,
            emit_existing,
            loaded,
            filter,
        }
    }

    /// `is` as it is now; `first_list`: it comes from the first list of its watch scope.
    pub(crate) fn applied(&mut self, is: &ImageStream, first_list: bool) -> Decision {
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
    pub(crate) fn deleted(&mut self, key: &StreamKey) -> Decision {
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
    pub(crate) fn first_list_done(&mut self) {
        self.first_start = false;
    }

    /// The streams tracked.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &StreamKey> {
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
pub(crate) fn key_of(is: &ImageStream) -> StreamKey {
    (
        is.metadata.namespace.clone().unwrap_or_default(),
        is.metadata.name.clone().unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    //! Tests of the tracker: a first start records a baseline (or emits what exists), a restart
    //! sends what changed while down, a lost record sends the current tags again, a new stream its
    //! history, a deletion every recorded tag; each change carries the state it acknowledges.

    use std::collections::{BTreeSet, HashMap};

    use serde_json::json;

    use super::*;
    use crate::source::change::ChangeKind::{self, Deleted, ImportFailed, Updated};

    const A: &str = "sha256:aaaa";
    const B: &str = "sha256:bbbb";
    const C: &str = "sha256:cccc";

    /// Stream `ds/<name>` (uid `u-<name>`) whose tag `latest` has `items` (digest, generation),
    /// newest first, and maybe a standing import failure of generation `failure`.
    fn stream(name: &str, items: &[(&str, i64)], failure: Option<i64>) -> ImageStream {
        let items: Vec<_> = items
        .iter()
        .map(|(d, g)| json!({"image": d, "generation": g, "dockerImageReference": format!("q/nb@{d}")}))
        .collect();
        let conditions: Vec<_> = failure
            .iter()
            .map(|g| json!({"type": "ImportSuccess", "status": "False", "generation": g}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ds", "uid": format!("u-{name}")},
            "spec": {},
            "status": {"tags": [{"tag": "latest", "items": items, "conditions": conditions}]},
        }))
        .unwrap()
    }

    fn key(name: &str) -> StreamKey {
        ("ds".into(), name.into())
    }

    /// The kind, digest and generation of each change to send, and whether its acknowledgement
    /// leaves the tag with a state.
    fn sent(d: &Decision) -> Vec<(ChangeKind, Option<&str>, i64)> {
        d.send
            .iter()
            .map(|(c, _)| (c.kind, c.digest.as_deref(), c.generation))
            .collect()
    }

    fn tracker(loaded: Loaded, emit_existing: bool) -> Tracker {
        Tracker::new(loaded, TagFilter::default(), emit_existing)
    }

    #[test]
    fn a_first_start_records_what_exists_and_sends_nothing_then_tracks_changes() {
        let mut t = tracker(Loaded::first(), false);
        let nb = stream("nb", &[(B, 2), (A, 1)], None);
        let d = t.applied(&nb, true);
        assert_eq!(sent(&d), []);
        assert_eq!(d.record, Some(state::of_stream(&nb, &TagFilter::default())));
        t.first_list_done();
        // A stream created after the first list is new: its whole history.
        let late = stream("late", &[(B, 2), (A, 1)], None);
        let d = t.applied(&late, false);
        assert_eq!(sent(&d), [(Updated, Some(A), 1), (Updated, Some(B), 2)]);
        assert_eq!(d.record, None);
        // An import of the recorded stream: that change, acknowledging the new state.
        let d = t.applied(&stream("nb", &[(C, 3), (B, 2), (A, 1)], None), false);
        assert_eq!(sent(&d), [(Updated, Some(C), 3)]);
        assert_eq!(d.send[0].1.as_ref().unwrap().digest, Some(C.into()));
        assert_eq!(t.keys().count(), 2);
    }

    #[test]
    fn a_first_start_with_emit_existing_sends_each_tags_current_image_and_failure() {
        let mut t = tracker(Loaded::first(), true);
        let d = t.applied(&stream("nb", &[(B, 2), (A, 1)], Some(3)), true);
        assert_eq!(
            sent(&d),
            [(Updated, Some(B), 2), (ImportFailed, Some(B), 3)]
        );
        assert_eq!(d.record, None);
    }

    #[test]
    fn a_restart_sends_what_changed_while_down_and_a_new_stream_its_history() {
        let filter = TagFilter::default();
        let recorded = state::of_stream(&stream("nb", &[(A, 1)], None), &filter);
        let states = HashMap::from([(key("nb"), recorded)]);
        let mut t = tracker(Loaded::restart(states, BTreeSet::new()), false);
        let d = t.applied(&stream("nb", &[(C, 3), (B, 2), (A, 1)], None), true);
        assert_eq!(sent(&d), [(Updated, Some(B), 2), (Updated, Some(C), 3)]);
        assert!(!d.lost);
        // Each change acknowledges the state it brings the tag to, in order.
        let afters: Vec<_> = d
            .send
            .iter()
            .map(|(_, a)| a.clone().unwrap().generation)
            .collect();
        assert_eq!(afters, [2, 3]);
        // Not recorded, and its shard was read: a stream created while down.
        let d = t.applied(&stream("new", &[(B, 2), (A, 1)], None), true);
        assert_eq!(sent(&d), [(Updated, Some(A), 1), (Updated, Some(B), 2)]);
    }

    #[test]
    fn a_lost_record_sends_the_current_tags_again_and_records_one_behind() {
        let lost = BTreeSet::from([key("nb")]);
        let mut t = tracker(Loaded::restart(HashMap::new(), lost), false);
        let nb = stream("nb", &[(C, 3), (B, 2), (A, 1)], Some(4));
        let d = t.applied(&nb, true);
        assert!(d.lost);
        assert_eq!(d.record, Some(diff::one_behind(&nb, &TagFilter::default())));
        assert_eq!(
            sent(&d),
            [(Updated, Some(C), 3), (ImportFailed, Some(C), 4)]
        );
        // Seen again (a re-list): nothing more.
        assert_eq!(sent(&t.applied(&nb, false)), []);
    }

    #[test]
    fn a_deleted_stream_sends_a_deletion_of_every_recorded_tag_and_is_forgotten() {
        let mut t = tracker(Loaded::first(), false);
        t.applied(&stream("nb", &[(B, 2)], None), true);
        t.first_list_done();
        let d = t.deleted(&key("nb"));
        assert_eq!(sent(&d), [(Deleted, Some(B), 2)]);
        assert_eq!(d.send[0].1, None, "the tag is gone once delivered");
        assert_eq!(t.keys().count(), 0);
        assert_eq!(
            sent(&t.deleted(&key("nb"))),
            [],
            "a second deletion sends nothing"
        );
    }
}
