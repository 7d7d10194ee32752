//! Which sources reference which sink object (pure): the multi-tenant adapter watches the
//! objects that sinks and dead-letter sinks name ([`super::sinkwatch`]), one watch per kind in
//! use, and re-observes exactly the sources that reference an object whose address changed.
//!
//! A source's references come from its spec alone ([`refs_of`]: each `ref` of `spec.sink` and
//! `spec.delivery.deadLetterSink`, its namespace defaulted to the source's), so they are known
//! before the source is first observed. A kind's watch starts when the first source references
//! the kind and stops when the last one no longer does ([`SinkIndex::set`]). An object's
//! address is summed up by [`fingerprint`]: only a change of it re-observes the sources.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use serde_json::Value;

use super::index::SourceId;
use crate::adapter::crd::ImageStreamSource;
use crate::adapter::sink::resolve::{Plan, plan};

/// A kind of sink object, as watched: its apiVersion, kind and resource (plural).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SinkKind {
    /// `apiVersion` (`v1`, `eventing.knative.dev/v1`).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// The resource, as the resolution reads it.
    pub plural: String,
}

impl SinkKind {
    /// Its group (empty for the core group), version and kind.
    pub fn gvk(&self) -> kube::core::GroupVersionKind {
        crate::adapter::sink::resolve::gvk(&self.api_version, &self.kind)
    }

    /// Whether its objects' address is their name (a core Service): only their existence counts.
    pub fn is_core_service(&self) -> bool {
        self.api_version == "v1" && self.kind == "Service"
    }

    /// `Kind (apiVersion)`, for the log.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.kind, self.api_version)
    }
}

/// One sink object: its kind, namespace and name.
pub type SinkObject = (SinkKind, String, String);

/// The objects `source`'s sink and dead-letter sink reference (none for a `uri` or an invalid
/// destination: nothing to watch).
pub fn refs_of(source: &ImageStreamSource) -> BTreeSet<SinkObject> {
    let namespace = source.metadata.namespace.clone().unwrap_or_default();
    let dead_letter = source
        .spec
        .delivery
        .as_ref()
        .and_then(|d| d.dead_letter_sink.as_ref());
    std::iter::once(&source.spec.sink)
        .chain(dead_letter)
        .filter_map(|dest| match plan(dest, &namespace) {
            Ok(Plan::Read(t)) => Some((
                SinkKind {
                    api_version: t.api_version,
                    kind: t.kind,
                    plural: t.plural,
                },
                t.namespace,
                t.name,
            )),
            _ => None,
        })
        .collect()
}

/// What address an object of `kind` gives, summed up: equal fingerprints, same address. A core
/// Service's address is its name, so only its existence counts; any other object's is its
/// `status.addresses` and `status.address`.
pub fn fingerprint(kind: &SinkKind, object: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    if !kind.is_core_service() {
        let status = object.get("status");
        for field in ["addresses", "address"] {
            let value = status.and_then(|s| s.get(field)).unwrap_or(&Value::Null);
            value.to_string().hash(&mut h);
        }
    }
    h.finish()
}

/// The objects (namespace, name) whose fingerprint differs between `before` and `after` (two
/// lists of one kind): added, changed or gone, as a re-list after a lost watch finds them.
pub fn changed(
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
) -> Vec<(String, String)> {
    let gone = before.keys().filter(|k| !after.contains_key(*k));
    let new_or_changed = after
        .iter()
        .filter(|(k, fp)| before.get(*k) != Some(*fp))
        .map(|(k, _)| k);
    let mut keys: Vec<(String, String)> = gone.chain(new_or_changed).cloned().collect();
    keys.sort();
    keys
}

/// The kinds whose watch must start or stop after a [`SinkIndex::set`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KindChange {
    /// Kinds now referenced by their first source.
    pub start: Vec<SinkKind>,
    /// Kinds no source references any more.
    pub stop: Vec<SinkKind>,
}

/// Which source references which sink object, and how many sources each kind has.
#[derive(Debug, Default)]
pub struct SinkIndex {
    by_source: BTreeMap<SourceId, BTreeSet<SinkObject>>,
    by_object: BTreeMap<SinkObject, BTreeSet<SourceId>>,
    kinds: BTreeMap<SinkKind, usize>,
}

impl SinkIndex {
    /// `id` now references `refs` (empty: none, as when it is deleted).
    pub fn set(&mut self, id: &SourceId, refs: BTreeSet<SinkObject>) -> KindChange {
        let before = self.by_source.remove(id).unwrap_or_default();
        let kinds_of = |refs: &BTreeSet<SinkObject>| -> BTreeSet<SinkKind> {
            refs.iter().map(|(k, _, _)| k.clone()).collect()
        };
        let (old_kinds, new_kinds) = (kinds_of(&before), kinds_of(&refs));
        for object in &before {
            if let Some(ids) = self.by_object.get_mut(object) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_object.remove(object);
                }
            }
        }
        for object in &refs {
            self.by_object
                .entry(object.clone())
                .or_default()
                .insert(id.clone());
        }
        if !refs.is_empty() {
            self.by_source.insert(id.clone(), refs);
        }
        let mut change = KindChange::default();
        for kind in old_kinds.difference(&new_kinds) {
            let n = self.kinds.get_mut(kind).expect("counted when referenced");
            *n -= 1;
            if *n == 0 {
                self.kinds.remove(kind);
                change.stop.push(kind.clone());
            }
        }
        for kind in new_kinds.difference(&old_kinds) {
            let n = self.kinds.entry(kind.clone()).or_default();
            *n += 1;
            if *n == 1 {
                change.start.push(kind.clone());
            }
        }
        change
    }

    /// The sources that reference `object`.
    pub fn referencing(&self, object: &SinkObject) -> Vec<SourceId> {
        self.by_object
            .get(object)
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The kinds referenced now.
    pub fn kinds(&self) -> impl Iterator<Item = &SinkKind> {
        self.kinds.keys()
    }
}

#[cfg(test)]
mod tests;
