//! A source's `selector`, applied to what it sees of its namespaces (pure). The feed's watch is
//! shared by sources with different selectors, so it has none, and a source's own lists have
//! none either (a list and the changes must agree); each source sees what a watch with its
//! selector would have shown: a stream that stops matching is deleted for it (the API server
//! sends `DELETED` when an object leaves a selector), one that starts matching is added, and a
//! (re-)list holds only the streams that match, so one that stopped matching while the
//! adapter was down is found gone, as in single-source mode.

use std::collections::{BTreeMap, HashMap, HashSet};

use kube::core::{Selector, SelectorExt};

use crate::adapter::crd::LabelSelector;
use crate::source::checkpoint::StreamKey;
use crate::source::tracker::key_of;
use crate::source::watch::Seen;

/// What a source's selector lets through.
#[derive(Debug, Default)]
enum Selects {
    /// Every stream, as it is (no selector).
    #[default]
    All,
    /// The streams whose labels it matches.
    Matching(Selector),
    /// None: a selector the API would refuse (the reconciler says `InvalidSpec`, so a source's
    /// flow does not run with one; should it, it sees nothing rather than everything).
    Nothing,
}

/// One source's view through its selector.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    selects: Selects,
    /// The streams that matched when last seen.
    matching: HashSet<StreamKey>,
    /// Per scope, the streams of the list in progress that did not match.
    unmatched: HashMap<usize, HashSet<StreamKey>>,
}

impl Filter {
    /// A filter of `selector` (None: every stream passes as it is).
    pub(crate) fn new(selector: Option<&LabelSelector>) -> Filter {
        let selects = match selector.map(LabelSelector::matcher) {
            None => Selects::All,
            Some(Ok(selector)) => Selects::Matching(selector),
            Some(Err(_)) => Selects::Nothing,
        };
        Filter {
            selects,
            ..Filter::default()
        }
    }

    /// Whether a stream with `labels` is one the source sees.
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match &self.selects {
            Selects::All => true,
            Selects::Matching(selector) => match labels {
                Some(labels) => selector.matches(labels),
                None => selector.matches(&BTreeMap::new()),
            },
            Selects::Nothing => false,
        }
    }

    /// What the source sees of `seen`, if anything.
    pub(crate) fn pass(&mut self, seen: Seen) -> Option<Seen> {
        if matches!(self.selects, Selects::All) {
            return Some(seen);
        }
        match seen {
            Seen::Applied {
                stream,
                listing,
                scope,
            } => {
                let key = key_of(&stream);
                if self.selects(stream.metadata.labels.as_ref()) {
                    self.matching.insert(key);
                    return Some(Seen::Applied {
                        stream,
                        listing,
                        scope,
                    });
                }
                if listing {
                    self.unmatched.entry(scope).or_default().insert(key.clone());
                }
                // It left the selector: deleted, for this source, if it matched before.
                self.matching.remove(&key).then_some(Seen::Deleted {
                    key,
                    last: Some(stream),
                })
            }
            Seen::Deleted { key, last } => self
                .matching
                .remove(&key)
                .then_some(Seen::Deleted { key, last }),
            Seen::Listed {
                scope,
                namespace,
                mut present,
            } => {
                let unmatched = self.unmatched.remove(&scope).unwrap_or_default();
                present.retain(|k| !unmatched.contains(k));
                Some(Seen::Listed {
                    scope,
                    namespace,
                    present,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::crd::LabelSelectorRequirement;
    use crate::api::ImageStream;

    fn stream(name: &str, team: &str) -> Box<ImageStream> {
        let mut is = ImageStream::new(name, Default::default());
        is.metadata.namespace = Some("ds".into());
        is.metadata.labels = Some([("team".to_string(), team.to_string())].into());
        Box::new(is)
    }

    fn applied(name: &str, team: &str, listing: bool) -> Seen {
        Seen::Applied {
            stream: stream(name, team),
            listing,
            scope: 0,
        }
    }

    fn team_a() -> Filter {
        Filter::new(Some(&LabelSelector {
            match_labels: [("team".to_string(), "a".to_string())].into(),
            ..Default::default()
        }))
    }

    fn key(name: &str) -> StreamKey {
        ("ds".into(), name.into())
    }

    #[test]
    fn a_stream_leaving_the_selector_is_deleted_once_and_one_never_matching_is_unseen() {
        let mut f = team_a();
        assert!(matches!(
            f.pass(applied("nb", "a", false)),
            Some(Seen::Applied { .. })
        ));
        let left = f.pass(applied("nb", "b", false));
        assert!(
            matches!(left, Some(Seen::Deleted { ref key, last: Some(_) }) if *key == ("ds".into(), "nb".into()))
        );
        assert!(f.pass(applied("nb", "b", false)).is_none());
        assert!(f.pass(applied("other", "b", false)).is_none());
        let gone = f.pass(Seen::Deleted {
            key: key("other"),
            last: None,
        });
        assert!(gone.is_none(), "never seen by this source");
    }

    #[test]
    fn a_list_holds_only_the_streams_that_match() {
        let mut f = team_a();
        assert!(f.pass(applied("nb", "a", true)).is_some());
        assert!(f.pass(applied("old", "b", true)).is_none());
        let listed = f.pass(Seen::Listed {
            scope: 0,
            namespace: Some("ds".into()),
            present: [key("nb"), key("old"), key("unreadable")].into(),
        });
        let Some(Seen::Listed { present, .. }) = listed else {
            panic!("a list passes")
        };
        assert_eq!(present, [key("nb"), key("unreadable")].into());
    }

    #[test]
    fn without_a_selector_everything_passes() {
        let mut f = Filter::new(None);
        assert!(f.pass(applied("nb", "b", false)).is_some());
        let deleted = Seen::Deleted {
            key: key("x"),
            last: None,
        };
        assert!(f.pass(deleted).is_some());
    }

    #[test]
    fn selectors_match_labels_as_the_api_server_does() {
        let labels: BTreeMap<String, String> = [
            ("team".to_string(), "a".to_string()),
            ("tier".into(), "gold".into()),
        ]
        .into();
        let req = |key: &str, op: &str, values: &[&str]| LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|s| s.to_string()).collect(),
        };
        let sel = |labels: &[(&str, &str)], exprs: Vec<LabelSelectorRequirement>| LabelSelector {
            match_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            match_expressions: exprs,
        };
        let selects = |selector: Option<&LabelSelector>,
                       labels: Option<&BTreeMap<String, String>>| {
            Filter::new(selector).selects(labels)
        };
        assert!(selects(None, None));
        assert!(selects(Some(&sel(&[], vec![])), None), "empty selects all");
        assert!(selects(Some(&sel(&[("team", "a")], vec![])), Some(&labels)));
        assert!(!selects(
            Some(&sel(&[("team", "b")], vec![])),
            Some(&labels)
        ));
        assert!(!selects(Some(&sel(&[("team", "a")], vec![])), None));
        let cases = [
            (req("tier", "In", &["gold", "silver"]), true),
            (req("tier", "In", &["bronze"]), false),
            (req("tier", "NotIn", &["bronze"]), true),
            (req("zone", "NotIn", &["x"]), true),
            (req("tier", "Exists", &[]), true),
            (req("zone", "Exists", &[]), false),
            (req("zone", "DoesNotExist", &[]), true),
            (req("team", "DoesNotExist", &[]), false),
            // What the API refuses selects nothing: an unknown operator, In without values,
            // Exists with some, a key that is no label key.
            (req("team", "Gt", &["1"]), false),
            (req("team", "In", &[]), false),
            (req("team", "Exists", &["a"]), false),
            (req("not a key", "DoesNotExist", &[]), false),
        ];
        for (r, want) in cases {
            let what = format!("{r:?}");
            assert_eq!(
                selects(Some(&sel(&[], vec![r])), Some(&labels)),
                want,
                "{what}"
            );
        }
    }
}
