//! The states of a stream's tags by name: a map, held as a vector sorted by name, that
//! serializes exactly as the map the checkpoint's JSON form holds.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::TagState;

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
    pub(crate) fn get(&self, tag: &str) -> Option<&TagState> {
        self.find(tag).ok().map(|i| &self.0[i].1)
    }

    /// Sets the state of `tag`; returns the one it replaces.
    pub(crate) fn insert(&mut self, tag: &str, state: TagState) -> Option<TagState> {
        match self.find(tag) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, state)),
            Err(i) => {
                self.0.insert(i, (tag.into(), state));
                None
            }
        }
    }

    /// Forgets `tag`; returns its state.
    pub(crate) fn remove(&mut self, tag: &str) -> Option<TagState> {
        self.find(tag).ok().map(|i| self.0.remove(i).1)
    }

    /// The tags and their states, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TagState)> {
        self.0.iter().map(|(tag, state)| (&**tag, state))
    }

    /// The tag names, in order.
    #[cfg(test)]
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(tag, _)| &**tag)
    }

    /// How many tags have a state.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no tag has a state.
    pub(crate) fn is_empty(&self) -> bool {
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
    use crate::source::state::StreamState;

    fn at(generation: i64) -> TagState {
        TagState {
            digest: Some(format!("sha256:{generation}").into()),
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
        let failed = TagState {
            failure_generation: Some(5),
            ..at(3)
        };
        assert_eq!(tags.insert("z", failed.clone()), Some(at(3)));
        assert_eq!(tags.get("z"), Some(&failed));
        assert_eq!(tags.len(), 2);
    }
}
