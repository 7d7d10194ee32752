//! What receivers have been told about each tag and stream (what the diff compares against
//! and the checkpoint persists), and the one rule that moves it: [`after`], the state of a
//! tag once a receiver has been told one more thing about it. The state of a tag now
//! ([`of_tag`]) is that rule applied to what its status entry says, so a stream whose every
//! change was delivered is in exactly the state the next diff starts from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::change::{ChangeKind, TagChange};
use crate::api::{ImageStream, NamedTagEventList, TagEvent};

mod digest;
mod tags;

pub use self::digest::Digest;
pub use self::tags::TagStates;

/// Which tags to consider (the `--tag` flag; empty = all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagFilter(pub Vec<String>);

impl TagFilter {
    /// Whether changes of `tag` are wanted.
    pub(crate) fn allows(&self, tag: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|t| t == tag)
    }
}

/// What the receiver has been told about one tag: the minimum state that makes a diff after a
/// restart, a re-list or a dropped watch produce exactly the changes that happened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagState {
    /// The digest last delivered as current (`d`), None before the first import.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Digest>,
    /// The generation of the TagEvent last delivered (`g`).
    #[serde(rename = "g", default)]
    pub generation: i64,
    /// The generation of the last ImportSuccess=False delivered (`f`).
    #[serde(rename = "f", default, skip_serializing_if = "Option::is_none")]
    pub failure_generation: Option<i64>,
}

/// What the receiver has been told about one ImageStream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// The uid of the stream the state is about (`u`).
    #[serde(rename = "u")]
    pub uid: String,
    /// Per tag (`t`).
    #[serde(rename = "t", default)]
    pub tags: TagStates,
}

/// One thing a receiver can be told about a tag, as the state rule reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Told<'a> {
    /// The tag's image is `digest`, from the history entry of `generation`.
    Updated {
        /// The image.
        digest: &'a str,
        /// The history entry's generation.
        generation: i64,
    },
    /// An import failed (the condition of `generation`); `digest` is the image the tag still
    /// points at, if any.
    ImportFailed {
        /// The condition's generation.
        generation: i64,
        /// The image the tag keeps.
        digest: Option<&'a str>,
    },
    /// The tag is gone.
    Deleted,
}

impl<'a> Told<'a> {
    /// What `change` tells the receiver.
    pub(crate) fn of(change: &'a TagChange) -> Told<'a> {
        match change.kind {
            ChangeKind::Updated => Told::Updated {
                digest: change.digest.as_deref().unwrap_or_default(),
                generation: change.generation,
            },
            ChangeKind::ImportFailed => Told::ImportFailed {
                generation: change.generation,
                digest: change.digest.as_deref(),
            },
            ChangeKind::Deleted => Told::Deleted,
        }
    }
}

/// The rule: what a receiver knows about a tag once it has been told `told`, having known
/// `before` (None: nothing). None: nothing any more, the tag is gone.
///
/// An update replaces the image and keeps the failure last told; a failure records its
/// generation and keeps the image (the failed import left the tag where it was).
pub(crate) fn after(before: Option<&TagState>, told: Told<'_>) -> Option<TagState> {
    match told {
        Told::Updated { digest, generation } => Some(TagState {
            digest: Some(Digest::new(digest)),
            generation,
            failure_generation: before.and_then(|b| b.failure_generation),
        }),
        Told::ImportFailed { generation, digest } => {
            let mut state = before.cloned().unwrap_or_default();
            state.failure_generation = Some(generation);
            if state.digest.is_none() {
                state.digest = digest.map(Digest::new);
            }
            Some(state)
        }
        Told::Deleted => None,
    }
}

/// The tag states after each change of a batch of one stream, in order: [`after`] folded
/// from the stream's state `before`. What each change's acknowledgement records.
pub(crate) fn states_after(
    before: Option<&StreamState>,
    changes: &[TagChange],
) -> Vec<Option<TagState>> {
    let mut now: BTreeMap<&str, Option<TagState>> = BTreeMap::new();
    changes
        .iter()
        .map(|change| {
            let tag = change.tag.as_str();
            let prev = match now.get(tag) {
                Some(state) => state.as_ref(),
                None => before.and_then(|b| b.tags.get(tag)),
            };
            let next = after(prev, Told::of(change));
            now.insert(tag, next.clone());
            next
        })
        .collect()
}

/// A tag's state now: what a receiver knows once told everything its status entry says, the
/// newest image in its history, then a standing import failure. None when there is neither
/// (never imported and no failure, or only digest-less `reference: true` entries): nothing
/// was or will be said about it.
pub(crate) fn of_tag(list: &NamedTagEventList) -> Option<TagState> {
    let current = newest_image(list);
    let mut state = current.and_then(|(event, digest)| {
        after(
            None,
            Told::Updated {
                digest,
                generation: event.generation,
            },
        )
    });
    if let Some(failure) = list.import_failure() {
        let told = Told::ImportFailed {
            generation: failure.generation,
            digest: current.map(|(_, digest)| digest),
        };
        state = after(state.as_ref(), told);
    }
    state
}

/// The newest history entry that names an image, with its digest.
fn newest_image(list: &NamedTagEventList) -> Option<(&TagEvent, &str)> {
    list.history()
        .iter()
        .find_map(|event| event.digest().map(|digest| (event, digest)))
}

/// The allowed tags that have something to say ([`of_tag`]), by name, each with its state now
/// and its status entry. A name listed twice (malformed): the last wins, as on the server.
pub(crate) fn tags_now<'a>(
    is: &'a ImageStream,
    filter: &TagFilter,
) -> BTreeMap<&'a str, (TagState, &'a NamedTagEventList)> {
    let lists = is
        .status
        .as_ref()
        .map(|s| s.tags.as_slice())
        .unwrap_or_default();
    let mut tags = BTreeMap::new();
    for list in lists.iter().filter(|list| filter.allows(&list.tag)) {
        match of_tag(list) {
            Some(state) => tags.insert(list.tag.as_str(), (state, list)),
            None => tags.remove(list.tag.as_str()),
        };
    }
    tags
}

/// The state a stream is in now, as the receiver knows it once told all its changes (what the
/// checkpoint stores once they are delivered).
pub(crate) fn of_stream(is: &ImageStream, filter: &TagFilter) -> StreamState {
    StreamState {
        uid: is.metadata.uid.clone().unwrap_or_default(),
        tags: tags_now(is, filter)
            .into_iter()
            .map(|(tag, (state, _))| (tag, state))
            .collect(),
    }
}

impl StreamState {
    /// Records that a change of `tag` (of the stream with `uid`) was delivered: the tag's state
    /// becomes `state` (None: forgotten). A stream whose last tag went is left with no tags.
    pub(crate) fn told(mut self, uid: &str, tag: &str, state: Option<TagState>) -> StreamState {
        if self.uid != uid {
            uid.clone_into(&mut self.uid);
        }
        match state {
            Some(state) => {
                self.tags.insert(tag, state);
            }
            None => {
                self.tags.remove(tag);
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: ChangeKind, tag: &str, digest: Option<&str>, generation: i64) -> TagChange {
        TagChange {
            kind,
            namespace: "ds".into(),
            image_stream: "nb".into(),
            image_stream_uid: "u1".into(),
            tag: tag.into(),
            digest: digest.map(str::to_string),
            previous_digest: None,
            docker_image_reference: None,
            generation,
            time: None,
            reason: None,
            message: None,
        }
    }

    fn told(digest: Option<&str>, generation: i64, failure: Option<i64>) -> Option<TagState> {
        Some(TagState {
            digest: digest.map(Digest::new),
            generation,
            failure_generation: failure,
        })
    }

    #[test]
    fn an_update_replaces_the_image_and_keeps_the_failure_a_failure_keeps_the_image() {
        let before = told(Some("a"), 2, Some(1));
        let updated = Told::Updated {
            digest: "b",
            generation: 3,
        };
        assert_eq!(after(before.as_ref(), updated), told(Some("b"), 3, Some(1)));
        assert_eq!(after(None, updated), told(Some("b"), 3, None));
        let failed = Told::ImportFailed {
            generation: 4,
            digest: Some("c"),
        };
        assert_eq!(after(before.as_ref(), failed), told(Some("a"), 2, Some(4)));
        // Nothing known: the failure names the image the tag still points at.
        assert_eq!(after(None, failed), told(Some("c"), 0, Some(4)));
        assert_eq!(after(before.as_ref(), Told::Deleted), None);
    }

    #[test]
    fn each_change_acknowledges_the_state_it_brings_the_tag_to() {
        let before = StreamState {
            uid: "u1".into(),
            tags: [("latest", told(Some("a"), 2, Some(1)).unwrap())].into(),
        };
        let changes = vec![
            change(ChangeKind::Updated, "latest", Some("b"), 3),
            change(ChangeKind::ImportFailed, "latest", Some("b"), 4),
            change(ChangeKind::Updated, "candidate", Some("c"), 4),
            change(ChangeKind::Deleted, "old", Some("z"), 1),
        ];
        assert_eq!(
            states_after(Some(&before), &changes),
            [
                told(Some("b"), 3, Some(1)),
                told(Some("b"), 3, Some(4)),
                told(Some("c"), 4, None),
                None
            ]
        );
    }

    #[test]
    fn a_tags_state_now_is_the_rule_applied_to_its_newest_image_then_its_failure() {
        let list = |items: serde_json::Value, conditions: serde_json::Value| -> NamedTagEventList {
            serde_json::from_value(serde_json::json!({
                "tag": "latest", "items": items, "conditions": conditions,
            }))
            .unwrap()
        };
        let failure =
            serde_json::json!([{"type": "ImportSuccess", "status": "False", "generation": 5}]);
        let items = serde_json::json!([
            {"image": "sha256:b", "generation": 3, "dockerImageReference": "r@sha256:b"},
            {"image": "sha256:a", "generation": 2, "dockerImageReference": "r@sha256:a"},
        ]);
        assert_eq!(
            of_tag(&list(items.clone(), serde_json::json!([]))),
            told(Some("sha256:b"), 3, None)
        );
        assert_eq!(
            of_tag(&list(items, failure.clone())),
            told(Some("sha256:b"), 3, Some(5))
        );
        // A first import that failed: the failure alone.
        assert_eq!(
            of_tag(&list(serde_json::json!([]), failure)),
            told(None, 0, Some(5))
        );
        // Only a reference to another tag: nothing to say.
        let reference = serde_json::json!([{"image": "", "generation": 1, "dockerImageReference": "other:tag"}]);
        assert_eq!(of_tag(&list(reference, serde_json::json!([]))), None);
    }

    #[test]
    fn a_stream_whose_last_tag_is_deleted_is_left_with_no_tags() {
        let s = StreamState::default().told("u1", "latest", Some(TagState::default()));
        assert_eq!(s.uid, "u1");
        assert_eq!(s.tags.len(), 1);
        let s = s.told("u1", "latest", None);
        assert!(s.tags.is_empty());
        // A re-created stream's first acknowledgement takes its new uid.
        let s = s.told("u2", "latest", Some(TagState::default()));
        assert_eq!(s.uid, "u2");
    }
}
