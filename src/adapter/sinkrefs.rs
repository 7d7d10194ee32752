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
pub(crate) struct SinkKind {
    /// `apiVersion` (`v1`, `eventing.knative.dev/v1`).
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// The resource, as the resolution reads it.
    pub plural: String,
}

impl SinkKind {
    /// Its group (empty for the core group), version and kind.
    pub(crate) fn gvk(&self) -> kube::core::GroupVersionKind {
        crate::adapter::sink::resolve::gvk(&self.api_version, &self.kind)
    }

    /// Whether its objects' address is their name (a core Service): only their existence counts.
    pub(crate) fn is_core_service(&self) -> bool {
        self.api_version == "v1" && self.kind == "Service"
    }

    /// `Kind (apiVersion)`, for the log.
    pub(crate) fn describe(&self) -> String {
        format!("{} ({})", self.kind, self.api_version)
    }
}

/// One sink object: its kind, namespace and name.
pub(crate) type SinkObject = (SinkKind, String, String);

/// The objects `source`'s sink and dead-letter sink reference (none for a `uri` or an invalid
/// destination: nothing to watch).
pub(crate) fn refs_of(source: &ImageStreamSource) -> BTreeSet<SinkObject> {
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
pub(crate) fn fingerprint(kind: &SinkKind, object: &Value) -> u64 {
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
pub(crate) fn changed(
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
pub(crate) struct KindChange {
    /// Kinds now referenced by their first source.
    pub start: Vec<SinkKind>,
    /// Kinds no source references any more.
    pub stop: Vec<SinkKind>,
}

/// Which source references which sink object, and how many sources each kind has.
#[derive(Debug, Default)]
pub(crate) struct SinkIndex {
    by_source: BTreeMap<SourceId, BTreeSet<SinkObject>>,
    by_object: BTreeMap<SinkObject, BTreeSet<SourceId>>,
    kinds: BTreeMap<SinkKind, usize>,
}

impl SinkIndex {
    /// `id` now references `refs` (empty: none, as when it is deleted).
    pub(crate) fn set(&mut self, id: &SourceId, refs: BTreeSet<SinkObject>) -> KindChange {
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
    pub(crate) fn referencing(&self, object: &SinkObject) -> Vec<SourceId> {
        self.by_object
            .get(object)
            .map(|ids| ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The kinds referenced now.
    #[cfg(test)]
    pub(crate) fn kinds(&self) -> impl Iterator<Item = &SinkKind> {
        self.kinds.keys()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::adapter::crd::{Delivery, Destination, ImageStreamSourceSpec, KReference};

    fn dest(api_version: &str, kind: &str, name: &str, namespace: Option<&str>) -> Destination {
        Destination {
            r#ref: Some(KReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                namespace: namespace.map(Into::into),
            }),
            ..Default::default()
        }
    }

    fn source(sink: Destination, dead_letter: Option<Destination>) -> ImageStreamSource {
        let mut s = ImageStreamSource::new(
            "team",
            ImageStreamSourceSpec {
                sink,
                delivery: dead_letter.map(|d| Delivery {
                    dead_letter_sink: Some(d),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        s.metadata.namespace = Some("ds".into());
        s
    }

    fn broker() -> SinkKind {
        SinkKind {
            api_version: "eventing.knative.dev/v1".into(),
            kind: "Broker".into(),
            plural: "brokers".into(),
        }
    }

    fn service() -> SinkKind {
        SinkKind {
            api_version: "v1".into(),
            kind: "Service".into(),
            plural: "services".into(),
        }
    }

    fn obj(kind: SinkKind, ns: &str, name: &str) -> SinkObject {
        (kind, ns.into(), name.into())
    }

    fn id(name: &str) -> SourceId {
        ("ds".into(), name.into())
    }

    #[test]
    fn a_source_references_its_sink_and_dead_letter_sink_in_its_own_namespace_by_default() {
        let s = source(
            dest("eventing.knative.dev/v1", "Broker", "default", None),
            Some(dest("v1", "Service", "dls", Some("ops"))),
        );
        assert_eq!(
            refs_of(&s),
            [obj(broker(), "ds", "default"), obj(service(), "ops", "dls")].into()
        );
        assert_eq!(broker().gvk().group, "eventing.knative.dev");
        assert_eq!(service().gvk().group, "");
        assert_eq!(broker().gvk().version, "v1");
        assert_eq!(service().gvk().version, "v1");
    }

    #[test]
    fn a_uri_or_an_invalid_ref_references_nothing() {
        let uri = Destination {
            uri: Some("http://x.ds.svc".into()),
            ..Default::default()
        };
        assert!(refs_of(&source(uri, None)).is_empty());
        let empty_name = dest("eventing.knative.dev/v1", "Broker", "", None);
        assert!(refs_of(&source(empty_name, None)).is_empty());
    }

    #[test]
    fn a_kind_is_watched_from_its_first_source_to_its_last() {
        let mut index = SinkIndex::default();
        let a = [obj(broker(), "ds", "default")].into();
        let change = index.set(&id("a"), a);
        assert_eq!(change.start, [broker()]);
        assert!(change.stop.is_empty());
        let b = [obj(broker(), "ds", "other"), obj(service(), "ds", "s")].into();
        let change = index.set(&id("b"), b);
        assert_eq!(change.start, [service()], "Brokers are already watched");
        assert_eq!(index.kinds().count(), 2);

        // b moves from a Broker and a Service to a URI: the Service watch stops, not the Broker's.
        let change = index.set(&id("b"), BTreeSet::new());
        assert_eq!(change.stop, [service()]);
        assert!(change.start.is_empty());
        let change = index.set(&id("a"), BTreeSet::new());
        assert_eq!(change.stop, [broker()]);
        assert_eq!(index.kinds().count(), 0);
        assert_eq!(index.set(&id("a"), BTreeSet::new()), KindChange::default());
    }

    #[test]
    fn exactly_the_sources_that_reference_an_object_are_found() {
        let mut index = SinkIndex::default();
        index.set(&id("a"), [obj(broker(), "ds", "default")].into());
        index.set(&id("b"), [obj(broker(), "ds", "default")].into());
        index.set(&id("c"), [obj(broker(), "ml", "default")].into());
        index.set(&id("d"), [obj(service(), "ds", "default")].into());
        assert_eq!(
            index.referencing(&obj(broker(), "ds", "default")),
            [id("a"), id("b")]
        );
        assert_eq!(
            index.referencing(&obj(broker(), "ml", "default")),
            [id("c")]
        );
        assert!(index.referencing(&obj(broker(), "ds", "gone")).is_empty());

        // a now references another Broker: only b is left on the first.
        index.set(&id("a"), [obj(broker(), "ds", "next")].into());
        assert_eq!(
            index.referencing(&obj(broker(), "ds", "default")),
            [id("b")]
        );
        assert_eq!(index.referencing(&obj(broker(), "ds", "next")), [id("a")]);
    }

    #[test]
    fn only_an_address_change_changes_the_fingerprint() {
        let at = |url: &str, ready: &str| {
            json!({"metadata": {"resourceVersion": ready},
               "status": {"address": {"url": url}, "conditions": [{"type": "Ready", "status": ready}]}})
        };
        let k = broker();
        assert_eq!(
            fingerprint(&k, &at("http://a", "True")),
            fingerprint(&k, &at("http://a", "False"))
        );
        assert_ne!(
            fingerprint(&k, &at("http://a", "True")),
            fingerprint(&k, &at("http://b", "True"))
        );
        assert_ne!(
            fingerprint(&k, &at("http://a", "True")),
            fingerprint(&k, &json!({"status": {}})),
            "an address written or removed counts"
        );
        let addresses =
            json!({"status": {"addresses": [{"url": "http://c"}], "address": {"url": "http://a"}}});
        assert_ne!(
            fingerprint(&k, &at("http://a", "True")),
            fingerprint(&k, &addresses)
        );
        // A core Service's address is its name: its spec and status do not count.
        assert_eq!(
            fingerprint(&service(), &json!({"spec": {"ports": [{"port": 80}]}})),
            fingerprint(&service(), &json!({"spec": {"ports": [{"port": 8080}]}}))
        );
    }

    #[test]
    fn a_relist_finds_the_objects_added_changed_and_gone() {
        let key = |n: &str| ("ds".to_string(), n.to_string());
        let before = [(key("same"), 1), (key("moved"), 2), (key("gone"), 3)].into();
        let after = [(key("same"), 1), (key("moved"), 9), (key("new"), 4)].into();
        assert_eq!(
            changed(&before, &after),
            [key("gone"), key("moved"), key("new")]
        );
        assert!(changed(&after, &after).is_empty());
    }
}
