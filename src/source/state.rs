//! What receivers have been told about each tag and stream (what the diff compares against
//! and the checkpoint persists), and the one rule that moves it: [`after`], the state of a
//! tag once a receiver has been told one more thing about it. The state of a tag now
//! ([`of_tag`]) is that rule applied to what its status entry says, so a stream whose every
//! change was delivered is in exactly the state the next diff starts from.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::change::{ChangeKind, TagChange};
use crate::api::{ImageStream, NamedTagEventList, TagEvent};

/// Which tags to consider (the `--tag` flag; empty = all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagFilter(pub Vec<String>);

impl TagFilter {
    /// Whether changes of `tag` are wanted.
    pub fn allows(&self, tag: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|t| t == tag)
    }
}

/// What the receiver has been told about one tag: the minimum state that makes a diff after a
/// restart, a re-list or a dropped watch produce exactly the changes that happened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagState {
    /// The digest last delivered as current (`d`), None before the first import.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
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
pub enum Told<'a> {
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
    pub fn of(change: &'a TagChange) -> Told<'a> {
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
pub fn after(before: Option<&TagState>, told: Told<'_>) -> Option<TagState> {
    match told {
        Told::Updated { digest, generation } => Some(TagState {
            digest: Some(digest.to_owned()),
            generation,
            failure_generation: before.and_then(|b| b.failure_generation),
        }),
        Told::ImportFailed { generation, digest } => {
            let mut state = before.cloned().unwrap_or_default();
            state.failure_generation = Some(generation);
            if state.digest.is_none() {
                state.digest = digest.map(str::to_owned);
            }
            Some(state)
        }
        Told::Deleted => None,
    }
}

/// The tag states after each change of a batch of one stream, in order: [`after`] folded
/// from the stream's state `before`. What each change's acknowledgement records.
pub fn afters(before: Option<&StreamState>, changes: &[TagChange]) -> Vec<Option<TagState>> {
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
pub fn of_tag(list: &NamedTagEventList) -> Option<TagState> {
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
pub fn tags_now<'a>(
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
pub fn of_stream(is: &ImageStream, filter: &TagFilter) -> StreamState {
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
    pub fn told(mut self, uid: &str, tag: &str, state: Option<TagState>) -> StreamState {
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

/// The states of a stream's tags, by tag name: a map, held as a vector sorted by name.
///
/// The source keeps one per stream (of thousands) for as long as it runs, and a stream has a
/// handful of tags: a B-tree node alone takes ~800 bytes, three tags in a vector ~170. It
/// serializes exactly as a map did (`{"latest":{...}}`), so checkpoints written by earlier
/// versions read unchanged; a name repeated in the JSON keeps its last value, as a map does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TagStates(Vec<(Box<str>, TagState)>);

impl TagStates {
    fn find(&self, tag: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(name, _)| (**name).cmp(tag))
    }

    /// The state of `tag`.
    pub fn get(&self, tag: &str) -> Option<&TagState> {
        self.find(tag).ok().map(|i| &self.0[i].1)
    }

    /// The state of `tag`, to change it.
    pub fn get_mut(&mut self, tag: &str) -> Option<&mut TagState> {
        self.find(tag).ok().map(|i| &mut self.0[i].1)
    }

    /// Sets the state of `tag`; returns the one it replaces.
    pub fn insert(&mut self, tag: &str, state: TagState) -> Option<TagState> {
        match self.find(tag) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, state)),
            Err(i) => {
                self.0.insert(i, (tag.into(), state));
                None
            }
        }
    }

    /// Forgets `tag`; returns its state.
    pub fn remove(&mut self, tag: &str) -> Option<TagState> {
        self.find(tag).ok().map(|i| self.0.remove(i).1)
    }

    /// The tags and their states, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TagState)> {
        self.0.iter().map(|(tag, state)| (&**tag, state))
    }

    /// The tag names, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(tag, _)| &**tag)
    }

    /// How many tags have a state.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no tag has a state.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<Box<str>>> FromIterator<(K, TagState)> for TagStates {
    /// Sorted by name; of a name given twice, the last state wins (as in a map).
    fn from_iter<I: IntoIterator<Item = (K, TagState)>>(iter: I) -> Self {
        let mut tags: Vec<(Box<str>, TagState)> =
            iter.into_iter().map(|(k, v)| (k.into(), v)).collect();
        // Stable: of equal names the later stays later, and dedup keeps the first of a run.
        tags.sort_by(|a, b| a.0.cmp(&b.0));
        tags.reverse();
        tags.dedup_by(|later, earlier| later.0 == earlier.0);
        tags.reverse();
        tags.shrink_to_fit();
        TagStates(tags)
    }
}

impl<K: Into<Box<str>>, const N: usize> From<[(K, TagState); N]> for TagStates {
    fn from(tags: [(K, TagState); N]) -> Self {
        tags.into_iter().collect()
    }
}

impl std::ops::Index<&str> for TagStates {
    type Output = TagState;

    fn index(&self, tag: &str) -> &TagState {
        self.get(tag)
            .unwrap_or_else(|| panic!("no state for tag {tag:?}"))
    }
}

impl Serialize for TagStates {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for TagStates {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TagStates;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of tag names to tag states")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TagStates, A::Error> {
                let mut tags = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, TagState>()? {
                    tags.push(entry);
                }
                Ok(tags.into_iter().collect())
            }
        }
        deserializer.deserialize_map(Visitor)
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
            digest: digest.map(str::to_string),
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
            afters(Some(&before), &changes),
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

    fn at(generation: i64) -> TagState {
        TagState {
            digest: Some(format!("sha256:{generation}")),
            generation,
            failure_generation: None,
        }
    }

    #[test]
    fn tag_states_serialize_as_the_map_checkpoints_have_always_held() {
        let state = StreamState {
            uid: "u1".into(),
            tags: [("latest", at(2)), ("candidate", at(3))].into(),
        };
        let json = r#"{"u":"u1","t":{"candidate":{"d":"sha256:3","g":3},"latest":{"d":"sha256:2","g":2}}}"#;
        assert_eq!(serde_json::to_string(&state).unwrap(), json);
        assert_eq!(serde_json::from_str::<StreamState>(json).unwrap(), state);
    }

    #[test]
    fn tag_states_read_in_any_order_and_the_last_of_a_repeated_tag_wins() {
        let json = r#"{"u":"u1","t":{"z":{"g":1},"a":{"g":2},"z":{"g":3}}}"#;
        let state: StreamState = serde_json::from_str(json).unwrap();
        assert_eq!(state.tags.keys().collect::<Vec<_>>(), ["a", "z"]);
        assert_eq!(state.tags["z"].generation, 3);
        let old: StreamState = serde_json::from_str(r#"{"u":"u1"}"#).unwrap();
        assert!(
            old.tags.is_empty(),
            "a stream without tags reads as no tags"
        );
    }

    #[test]
    fn tag_states_insert_and_remove_keep_the_names_in_order() {
        let mut tags = TagStates::default();
        assert_eq!(tags.insert("m", at(1)), None);
        assert_eq!(tags.insert("a", at(2)), None);
        assert_eq!(tags.insert("z", at(3)), None);
        assert_eq!(tags.insert("m", at(4)), Some(at(1)));
        assert_eq!(tags.keys().collect::<Vec<_>>(), ["a", "m", "z"]);
        assert_eq!(tags.remove("a"), Some(at(2)));
        assert_eq!(tags.remove("a"), None);
        tags.get_mut("z").unwrap().failure_generation = Some(5);
        assert_eq!(tags.get("z").unwrap().failure_generation, Some(5));
        assert_eq!(tags.len(), 2);
    }
}
