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
