//! The multi-tenant adapter's index (pure): what each source is served ([`WatchKey`]: its
//! namespaces, and how much of each stream it reads), and which feeds ([`super::feed`]) must
//! start or stop when a source comes, changes or goes.
//!
//! A source is served the namespaces it selects ([`crate::adapter::reconcile::scope`]: its
//! `namespaces`, the namespaces its `namespaceSelector` matches, or its own) less those its
//! service account may not read, sorted (or "all"). All sources that read streams the same
//! way share one feed, one watch across every namespace: modes `resource` and `reference` send
//! the whole object, `imagestreamtag` reads the status and labels only. A feed starts when the
//! first source needs it and stops when the last one leaves. Each source takes from it only
//! its own namespaces; its `selector` is matched against the stream labels after that
//! ([`super::filter`]), and `tags` by the source's own tracker.

use std::collections::BTreeMap;

use crate::adapter::crd::Mode;
use crate::adapter::permissions::Scope;

/// A source: its namespace and name.
pub(crate) type SourceId = (String, String);

/// What a source is served: its namespaces, and how its feed reads the streams.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct WatchKey {
    /// The namespaces, sorted (None: every namespace).
    pub namespaces: Option<Vec<String>>,
    /// Whether the whole stream is read (modes resource and reference).
    pub whole: bool,
}

impl WatchKey {
    /// The watch scopes: one cluster-wide, or one per namespace.
    pub(crate) fn scopes(&self) -> Vec<Option<String>> {
        match &self.namespaces {
            None => vec![None],
            Some(names) => names.iter().cloned().map(Some).collect(),
        }
    }

    /// For the log: `all` or `a,b`, and what is read.
    pub(crate) fn describe(&self) -> String {
        let names = match &self.namespaces {
            None => "all".to_owned(),
            Some(names) => names.join(","),
        };
        let reading = if self.whole { "whole" } else { "tags" };
        format!("{names} ({reading})")
    }
}

/// The watch that serves a source in `mode` selecting `scope` (None: its spec is invalid), of
/// which its service account may not read `denied` (`""`: cluster-wide). None: nothing is
/// served (every selected namespace is denied, or none is selected).
pub(crate) fn watch_key(scope: Option<&Scope>, denied: &[String], mode: Mode) -> Option<WatchKey> {
    let whole = mode != Mode::ImageStreamTag;
    let namespaces = match scope? {
        // A cluster-wide watch needs the cluster-wide grant: all or nothing.
        Scope::All if denied.is_empty() => None,
        Scope::All => return None,
        Scope::Namespaces(names) => {
            let mut allowed: Vec<String> = names
                .iter()
                .filter(|n| !denied.contains(n) && !denied.iter().any(String::is_empty))
                .cloned()
                .collect();
            allowed.sort();
            allowed.dedup();
            if allowed.is_empty() {
                return None;
            }
            Some(allowed)
        }
    };
    Some(WatchKey { namespaces, whole })
}

/// Which feeds start and stop after a change of the index: a feed reads whole streams
/// (`true`) or their tags and labels (`false`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Change {
    /// The feed to start (no source read streams so before).
    pub start: Option<bool>,
    /// The feed to stop (no source reads streams so now).
    pub stop: Option<bool>,
}

/// The watch of every source served.
#[derive(Debug, Default)]
pub(crate) struct Index {
    keys: BTreeMap<SourceId, WatchKey>,
}

impl Index {
    /// Sets the watch of `id` (None: it is not served, or gone); says which watches start and
    /// stop.
    pub(crate) fn set(&mut self, id: &SourceId, key: Option<WatchKey>) -> Change {
        let old = match &key {
            Some(k) => self.keys.insert(id.clone(), k.clone()),
            None => self.keys.remove(id),
        };
        let (before, now) = (old.map(|k| k.whole), key.map(|k| k.whole));
        if before == now {
            return Change::default();
        }
        Change {
            start: now.filter(|w| self.readers(*w) == 1),
            stop: before.filter(|w| self.readers(*w) == 0),
        }
    }

    /// The watch serving `id`.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &SourceId) -> Option<&WatchKey> {
        self.keys.get(id)
    }

    /// How many sources read whole streams (`whole`), or their tags and labels.
    pub(crate) fn readers(&self, whole: bool) -> usize {
        self.keys.values().filter(|k| k.whole == whole).count()
    }

    /// Every feed needed (whole or not).
    #[cfg(test)]
    pub(crate) fn feeds(&self) -> std::collections::BTreeSet<bool> {
        self.keys.values().map(|k| k.whole).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> SourceId {
        ("ds".into(), name.into())
    }

    fn key(names: &[&str]) -> WatchKey {
        WatchKey {
            namespaces: Some(names.iter().map(|s| s.to_string()).collect()),
            whole: false,
        }
    }

    fn names(list: &[&str]) -> Scope {
        Scope::Namespaces(list.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn sources_that_read_alike_share_one_feed_whatever_their_namespaces() {
        let mut index = Index::default();
        let first = index.set(&id("a"), Some(key(&["ds", "ml"])));
        assert_eq!(first.start, Some(false));
        assert_eq!(
            index.set(&id("b"), Some(key(&["ops"]))),
            Change::default(),
            "another namespace set, the same feed"
        );
        let whole = WatchKey {
            namespaces: None,
            whole: true,
        };
        assert_eq!(
            index.set(&id("c"), Some(whole.clone())),
            Change {
                start: Some(true),
                stop: None
            }
        );
        assert_eq!(index.feeds(), [false, true].into());
        // One leaves: the feed stays for the other; the last leaves: it stops.
        assert_eq!(index.set(&id("a"), None), Change::default());
        assert_eq!(index.set(&id("b"), None).stop, Some(false));
        assert_eq!(index.get(&id("c")), Some(&whole));
        assert_eq!(index.feeds(), [true].into());
    }

    #[test]
    fn a_source_changing_how_it_reads_moves_feeds_and_a_new_namespace_set_does_not() {
        let mut index = Index::default();
        index.set(&id("a"), Some(key(&["ds"])));
        assert_eq!(index.set(&id("a"), Some(key(&["ml"]))), Change::default());
        let mut whole = key(&["ml"]);
        whole.whole = true;
        assert_eq!(
            index.set(&id("a"), Some(whole)),
            Change {
                start: Some(true),
                stop: Some(false)
            }
        );
        assert_eq!(index.readers(true), 1);
        assert_eq!(index.readers(false), 0);
    }

    #[test]
    fn the_key_is_the_sorted_namespaces_less_the_denied_and_the_reading() {
        let scope = names(&["ml", "ds", "ops", "ds"]);
        let got = watch_key(Some(&scope), &["ops".into()], Mode::ImageStreamTag);
        assert_eq!(got, Some(key(&["ds", "ml"])));
        let whole = watch_key(Some(&scope), &[], Mode::Resource).unwrap();
        assert!(whole.whole);
        assert_eq!(
            watch_key(
                Some(&names(&["ops"])),
                &["ops".into()],
                Mode::ImageStreamTag
            ),
            None
        );
        assert_eq!(
            watch_key(None, &[], Mode::ImageStreamTag),
            None,
            "an invalid spec"
        );
    }

    #[test]
    fn every_namespace_is_all_or_nothing() {
        let all = watch_key(Some(&Scope::All), &[], Mode::ImageStreamTag).unwrap();
        assert_eq!(all.namespaces, None);
        assert_eq!(all.scopes(), vec![None]);
        assert_eq!(
            watch_key(Some(&Scope::All), &[String::new()], Mode::ImageStreamTag),
            None
        );
    }
}
