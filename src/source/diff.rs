//! The pure core of the source: the changes of one ImageStream's tags, found by diffing the
//! state last delivered ([`StreamState`], what the checkpoint stores) against the stream now.
//!
//! Diffing state against state, never event by event, is what makes a 410 re-list, a dropped
//! watch or a restart send exactly the changes that happened: the history of each tag
//! (`status.tags[t].items`, newest first, a new import prepended) says which images the
//! receiver has not been told about yet, and the recorded `(digest, generation)` of the last
//! one delivered says where to start. The caller delivers the changes; each acknowledgement
//! moves the recorded state by the state rule ([`super::state::after`]), and once all are
//! delivered the stream is in [`super::state::of_stream`].
//!
//! The invariants the tests pin: `diff(Some(&of_stream(is)), Some(is))` is always empty, and
//! so is the diff from the state that the changes of any diff lead to.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;

use super::change::{ChangeKind, TagChange};
use super::checkpoint::StreamKey;
use super::state::{Digest, StreamState, TagFilter, TagState, tags_now};
use crate::api::{ImageStream, NamedTagEventList, TagEvent, TagEventCondition};

#[cfg(test)]
mod tests;

/// The changes from `before` (None: nothing delivered about this stream yet) to `now` (None:
/// the stream is gone), oldest first per tag, tags in name order.
///
/// `stream` names the stream the state is about: the checkpoint's key, still known when the
/// stream is gone (a deletion missed while down leaves nothing else to name it by). When the
/// stream is gone or was re-created (another uid), every recorded tag is sent as deleted first,
/// then the new stream's tags as new.
pub fn diff(
    stream: &ObjectRef<ImageStream>,
    before: Option<&StreamState>,
    now: Option<&ImageStream>,
    filter: &TagFilter,
) -> Vec<TagChange> {
    let namespace = stream.namespace.as_deref().unwrap_or_default();
    let name = stream.name.as_str();
    let mut changes = Vec::new();
    let mut recorded: BTreeMap<&str, &TagState> = before
        .map(|state| {
            state
                .tags
                .iter()
                .filter(|(tag, _)| filter.allows(tag))
                .collect()
        })
        .unwrap_or_default();

    let same_stream = match (before, now) {
        (Some(state), Some(is)) => state.uid == uid(is),
        _ => true,
    };
    if now.is_none() || !same_stream {
        let old = Stream {
            namespace,
            name,
            uid: before.map(|state| state.uid.as_str()).unwrap_or_default(),
        };
        changes.extend(recorded.iter().map(|(tag, state)| old.deleted(tag, state)));
        recorded.clear();
    }
    let Some(is) = now else {
        return changes;
    };

    let new = Stream {
        namespace,
        name,
        uid: uid(is),
    };
    let present = tags_now(is, filter);
    let mut names: Vec<&str> = recorded.keys().chain(present.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    for tag in names {
        match (recorded.get(tag), present.get(tag)) {
            (Some(state), None) => changes.push(new.deleted(tag, state)),
            (state, Some((_, list))) => changes.extend(new.tag_changes(tag, state.copied(), list)),
            (None, None) => {}
        }
    }
    changes
}

/// The changes a first start with `--emit-existing` sends for a stream: one Updated for each
/// tag's current image (not its whole history), plus a current import failure.
///
/// The Updated carries the entry just older in the history as `previous_digest`: it is what the
/// tag pointed at before, even though the receiver was not told about it.
pub fn existing(is: &ImageStream, filter: &TagFilter) -> Vec<TagChange> {
    let stream = Stream::of(is);
    let mut changes = Vec::new();
    for (tag, (_, list)) in tags_now(is, filter) {
        let history = imported(list);
        if let Some((event, digest)) = history.first() {
            let previous = history.get(1).map(|(_, digest)| digest.to_string());
            changes.push(stream.updated(tag, event, digest, previous));
        }
        if let Some(failure) = list.import_failure() {
            changes.push(stream.failed(tag, failure, list));
        }
    }
    changes
}

/// What to diff a stream against when what was delivered about it is unknown (its checkpoint
/// entry was lost): per tag, the newest history entry with another image than the current one.
///
/// `diff(Some(&one_behind(is)), Some(is))` is then each tag's current image once (from the
/// history entry it was first imported with, whose `created` the event id hashes: the same id as
/// when it was first sent, even where OpenShift has since rewritten that entry's generation) and a
/// standing import failure: a duplicate of what was most likely delivered already, never a loss,
/// and never the whole history again. Recorded at once, it keeps that so across a crash.
pub fn one_behind(is: &ImageStream, filter: &TagFilter) -> StreamState {
    let tags = tags_now(is, filter)
        .into_iter()
        .filter_map(|(tag, (_, list))| {
            let history = imported(list);
            let (_, current) = history.first()?;
            let (event, digest) = history.iter().find(|(_, d)| d != current)?;
            let state = TagState {
                digest: Some(Digest::new(digest)),
                generation: event.generation,
                failure_generation: None,
            };
            Some((tag, state))
        });
    StreamState {
        uid: uid(is).to_string(),
        tags: tags.collect(),
    }
}

/// The stream a change is about; the part of every [`TagChange`] that does not depend on the tag.
struct Stream<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

impl<'a> Stream<'a> {
    fn of(is: &'a ImageStream) -> Self {
        Stream {
            namespace: is.metadata.namespace.as_deref().unwrap_or_default(),
            name: is.metadata.name.as_deref().unwrap_or_default(),
            uid: uid(is),
        }
    }

    /// The changes of one tag present now, given what was recorded about it (None: a new tag).
    fn tag_changes(
        &self,
        tag: &str,
        recorded: Option<&TagState>,
        list: &NamedTagEventList,
    ) -> Vec<TagChange> {
        let history = imported(list);
        let fresh: Vec<&(&TagEvent, &str)> = match recorded {
            None => history.iter().collect(),
            Some(state) => {
                let position = history.iter().position(|(event, digest)| {
                    state.digest.as_ref().is_some_and(|d| d.is(digest))
                        && event.generation == state.generation
                });
                match position {
                    Some(position) => history[..position].iter().collect(),
                    // The recorded entry was pruned (or rewritten in place by a collapse):
                    // generations only grow, so what is newer than it is what we have not sent.
                    None => history
                        .iter()
                        .filter(|(event, _)| event.generation > state.generation)
                        .collect(),
                }
            }
        };

        let mut changes = Vec::new();
        // The image before each fresh entry: the recorded one until an entry is sent, then that
        // entry's. The recorded digest is written out only for a change that names it (most
        // streams seen have no fresh entry).
        let recorded_digest = recorded.and_then(|state| state.digest.as_ref());
        let mut previous: Option<&str> = None;
        for (event, digest) in fresh.into_iter().rev() {
            // Same image as before (openshift's collapse rule bumps only the generation of
            // items[0], or a ref-only change): the tag's image did not change.
            let same = match previous {
                Some(previous) => previous == *digest,
                None => recorded_digest.is_some_and(|d| d.is(digest)),
            };
            if same {
                continue;
            }
            let before = match previous {
                Some(previous) => Some(previous.to_owned()),
                None => recorded_digest.map(ToString::to_string),
            };
            changes.push(self.updated(tag, event, digest, before));
            previous = Some(digest);
        }

        // A standing failure is newer than every entry: a successful import clears it.
        let delivered = recorded.and_then(|state| state.failure_generation);
        if let Some(failure) = list.import_failure()
            && delivered.is_none_or(|generation| failure.generation > generation)
        {
            changes.push(self.failed(tag, failure, list));
        }
        changes
    }

    fn change(&self, kind: ChangeKind, tag: &str) -> TagChange {
        TagChange {
            kind,
            namespace: self.namespace.to_string(),
            image_stream: self.name.to_string(),
            image_stream_uid: self.uid.to_string(),
            tag: tag.to_string(),
            digest: None,
            previous_digest: None,
            docker_image_reference: None,
            generation: 0,
            time: None,
            reason: None,
            message: None,
        }
    }

    fn updated(
        &self,
        tag: &str,
        event: &TagEvent,
        digest: &str,
        previous: Option<String>,
    ) -> TagChange {
        TagChange {
            digest: Some(digest.to_string()),
            previous_digest: previous,
            docker_image_reference: reference(event),
            generation: event.generation,
            time: event.created.as_ref().and_then(rfc3339),
            ..self.change(ChangeKind::Updated, tag)
        }
    }

    /// An ImportFailed; the digest is the one the tag still points at (a failure keeps items).
    fn failed(
        &self,
        tag: &str,
        failure: &TagEventCondition,
        list: &NamedTagEventList,
    ) -> TagChange {
        let current = imported(list).first().copied();
        TagChange {
            digest: current.map(|(_, digest)| digest.to_string()),
            docker_image_reference: current.and_then(|(event, _)| reference(event)),
            generation: failure.generation,
            time: failure.last_transition_time.as_ref().and_then(rfc3339),
            reason: failure.reason.clone(),
            message: failure.message.clone(),
            ..self.change(ChangeKind::ImportFailed, tag)
        }
    }

    fn deleted(&self, tag: &str, state: &TagState) -> TagChange {
        TagChange {
            digest: state.digest.as_ref().map(ToString::to_string),
            generation: state.generation,
            ..self.change(ChangeKind::Deleted, tag)
        }
    }
}

/// The history entries that name an image, newest first, with their digests. Entries without
/// one (`reference: true` tags pointing at a tag, not a digest) say nothing about an image.
fn imported(list: &NamedTagEventList) -> Vec<(&TagEvent, &str)> {
    list.history()
        .iter()
        .filter_map(|event| event.digest().map(|digest| (event, digest)))
        .collect()
}

fn uid(is: &ImageStream) -> &str {
    is.metadata.uid.as_deref().unwrap_or_default()
}

fn reference(event: &TagEvent) -> Option<String> {
    Some(event.docker_image_reference.clone()).filter(|r| !r.is_empty())
}

/// The time as the API serializes it (RFC 3339, seconds, `Z`).
fn rfc3339(time: &Time) -> Option<String> {
    match serde_json::to_value(time) {
        Ok(serde_json::Value::String(text)) => Some(text),
        _ => None,
    }
}

/// The streams deleted while the watch was down: those known before a (re-)list of the scope
/// limited to `namespace` (None: all namespaces) that the list did not hold. Each is diffed
/// against "gone" ([`diff`] with `now` None), one `deleted` per recorded tag.
pub fn gone<'a>(
    known: impl IntoIterator<Item = &'a StreamKey>,
    namespace: Option<&str>,
    listed: &HashSet<StreamKey>,
) -> Vec<StreamKey> {
    let mut gone: Vec<StreamKey> = known
        .into_iter()
        .filter(|key| namespace.is_none_or(|ns| ns == key.0) && !listed.contains(*key))
        .cloned()
        .collect();
    gone.sort_unstable();
    gone.dedup();
    gone
}
