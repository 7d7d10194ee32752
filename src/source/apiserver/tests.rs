//! Tests of the ApiServerSource modes: the events are what ApiServerSource sends (attributes,
//! extensions, data, subject), with ids from type, uid and resourceVersion; each version of a
//! stream is announced once, and a start's list is announced only with `--emit-existing`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeZone, Utc};
use cloudevents::event::{ExtensionValue, SpecVersion};
use cloudevents::{AttributesReader, Data, Event};
use serde_json::{Value, json};

use super::*;

const UID: &str = "ff02b090-c77d-441a-a60c-d5a26de66300";
const DIGEST: &str = "sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
const REF: &str = "docker.io/ansible/ansible-runner@sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb";
const API_SERVER: &str = "https://172.30.0.1:443";

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 10, 0, 0).unwrap()
}

fn json_data(event: &Event) -> Value {
    match event.data() {
        Some(Data::Json(value)) => value.clone(),
        other => panic!("not JSON data: {other:?}"),
    }
}

fn extensions(event: &Event) -> BTreeMap<String, String> {
    event
        .iter_extensions()
        .map(|(name, value)| match value {
            ExtensionValue::String(s) => (name.to_owned(), s.clone()),
            other => panic!("extension {name} is not a string: {other:?}"),
        })
        .collect()
}

fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn image_stream() -> Value {
    json!({
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {
            "name": "ansible-runner", "namespace": "openshift", "uid": UID,
            "resourceVersion": "2932387480", "generation": 3366,
            "creationTimestamp": "2020-05-29T13:52:00Z",
        },
        "spec": {"lookupPolicy": {"local": true}, "tags": [{
            "name": "latest", "annotations": null, "generation": 3365,
            "from": {"kind": "DockerImage", "name": "docker.io/ansible/ansible-runner:latest"},
            "referencePolicy": {"type": "Local"},
        }]},
        "status": {
            "dockerImageRepository": "image-registry.openshift-image-registry.svc:5000/openshift/ansible-runner",
            "tags": [{"tag": "latest", "items": [{
                "created": "2020-06-02T11:50:06Z", "dockerImageReference": REF,
                "generation": 3364, "image": DIGEST,
            }]}],
        },
    })
}

fn assert_apiserversource_attributes(event: &Event, ty: &str) {
    assert_eq!(event.specversion(), SpecVersion::V10);
    assert_eq!(event.ty(), ty);
    assert_eq!(event.source(), API_SERVER);
    assert_eq!(
        event.subject(),
        Some("/apis/image.openshift.io/v1/namespaces/openshift/imagestreams/ansible-runner")
    );
    assert_eq!(event.time(), Some(&now()));
    assert_eq!(event.datacontenttype(), Some("application/json"));
    assert_eq!(event.dataschema(), None);
    let want = strings(&[
        ("kind", "ImageStream"),
        ("apiversion", "image.openshift.io/v1"),
        ("name", "ansible-runner"),
        ("namespace", "openshift"),
    ]);
    assert_eq!(extensions(event), want);
    assert_eq!(event.id(), resource_event_id(ty, &image_stream()));
}

const ACTIONS: [(WatchAction, &str, &str); 3] = [
    (
        WatchAction::Add,
        "dev.knative.apiserver.resource.add",
        "dev.knative.apiserver.ref.add",
    ),
    (
        WatchAction::Update,
        "dev.knative.apiserver.resource.update",
        "dev.knative.apiserver.ref.update",
    ),
    (
        WatchAction::Delete,
        "dev.knative.apiserver.resource.delete",
        "dev.knative.apiserver.ref.delete",
    ),
];

#[test]
fn resource_events_are_what_apiserversource_sends_with_the_object_as_data() {
    for (action, resource_type, _) in ACTIONS {
        let event = resource_event(action, &image_stream(), API_SERVER, now());
        assert_apiserversource_attributes(&event, resource_type);
        assert_eq!(json_data(&event), image_stream());
    }
}

#[test]
fn reference_events_are_what_apiserversource_sends_with_the_object_reference_as_data() {
    for (action, _, reference_type) in ACTIONS {
        let event = reference_event(action, &image_stream(), API_SERVER, now());
        assert_apiserversource_attributes(&event, reference_type);
        let want = json!({
            "kind": "ImageStream", "namespace": "openshift", "name": "ansible-runner",
            "apiVersion": "image.openshift.io/v1",
        });
        assert_eq!(json_data(&event), want);
    }
}

#[test]
fn resource_and_reference_ids_follow_type_uid_and_resource_version() {
    let object = image_stream();
    // Computed outside Rust, as in the_id_is_the_documented_sha256_of_netstrings.
    let update = resource_event(WatchAction::Update, &object, API_SERVER, now());
    assert_eq!(update.id(), "90fb63329787414c765344490e5c41d1f996c31a");
    let later = resource_event(WatchAction::Update, &object, "https://other:6443", now());
    assert_eq!(
        later.id(),
        update.id(),
        "neither source nor time is part of the id"
    );
    let mut newer = object.clone();
    newer["metadata"]["resourceVersion"] = json!("2932387481");
    let mut recreated = object.clone();
    recreated["metadata"]["uid"] = json!("another-uid");
    let ids: BTreeSet<String> = [
        update.id().to_owned(),
        resource_event(WatchAction::Add, &object, API_SERVER, now())
            .id()
            .to_owned(),
        reference_event(WatchAction::Update, &object, API_SERVER, now())
            .id()
            .to_owned(),
        resource_event(WatchAction::Update, &newer, API_SERVER, now())
            .id()
            .to_owned(),
        resource_event(WatchAction::Update, &recreated, API_SERVER, now())
            .id()
            .to_owned(),
    ]
    .into();
    assert_eq!(ids.len(), 5);
}

#[test]
fn an_object_without_kind_and_api_version_is_sent_as_an_image_stream() {
    let mut object = image_stream();
    let map = object.as_object_mut().unwrap();
    map.remove("kind");
    map.remove("apiVersion");
    let event = resource_event(WatchAction::Add, &object, API_SERVER, now());
    assert_apiserversource_attributes(&event, types::RESOURCE_ADD);
    assert_eq!(json_data(&event), image_stream());
}

#[test]
fn the_subject_is_knatives_guessed_self_link() {
    assert_eq!(
        self_link("v1", "Pod", "test", "unit"),
        "/apis/v1/namespaces/test/pods/unit"
    );
    assert_eq!(
        self_link("serving.knative.dev", "Revision", "ns", "r"),
        "/apis/serving.knative.dev/versionUnknown/namespaces/ns/revisions/r"
    );
    assert_eq!(
        self_link("image.openshift.io/v1", "ImageStream", "", "x"),
        "/apis/image.openshift.io/v1/namespaces//imagestreams/x"
    );
}

#[test]
fn an_empty_api_server_url_still_gives_a_valid_source() {
    let event = reference_event(WatchAction::Add, &image_stream(), "", now());
    assert_eq!(event.source(), "/");
}

#[test]
fn the_image_stream_defaults_match_the_api_type() {
    let (kind, api_version) = kind_and_api_version(&json!({}));
    assert_eq!(
        (kind.as_str(), api_version.as_str()),
        ("ImageStream", "image.openshift.io/v1")
    );
}

#[test]
fn each_version_of_a_stream_is_announced_once_and_a_deletion_forgets_it() {
    let key: StreamKey = ("ds".into(), "nb".into());
    let mut announced = Announced::new(false);
    assert_eq!(announced.applied(&key, "7", false), Some(WatchAction::Add));
    assert_eq!(
        announced.applied(&key, "7", false),
        None,
        "a re-list of the same version"
    );
    assert_eq!(
        announced.applied(&key, "8", false),
        Some(WatchAction::Update)
    );
    // resourceVersions are opaque: any new string is a new version.
    assert_eq!(
        announced.applied(&key, "0a", false),
        Some(WatchAction::Update)
    );
    assert_eq!(announced.keys().collect::<Vec<_>>(), [&key]);
    announced.deleted(&key);
    assert_eq!(announced.keys().count(), 0);
    assert_eq!(announced.applied(&key, "9", false), Some(WatchAction::Add));
}

#[test]
fn a_starts_list_announces_nothing_and_later_versions_are_updates() {
    let (nb, other): (StreamKey, StreamKey) =
        (("ds".into(), "nb".into()), ("ds".into(), "x".into()));
    let mut announced = Announced::new(false);
    assert_eq!(announced.applied(&nb, "7", true), None, "listed on start");
    assert_eq!(announced.keys().collect::<Vec<_>>(), [&nb], "but recorded");
    assert_eq!(
        announced.applied(&nb, "7", false),
        None,
        "a re-list, unchanged"
    );
    assert_eq!(announced.applied(&nb, "8", true), Some(WatchAction::Update));
    assert_eq!(
        announced.applied(&other, "9", false),
        Some(WatchAction::Add),
        "created after the start's list (a watch event or a re-list)"
    );
}

#[test]
fn with_emit_existing_a_starts_list_announces_each_stream_as_added_once() {
    let key: StreamKey = ("ds".into(), "nb".into());
    let mut announced = Announced::new(true);
    assert_eq!(announced.applied(&key, "7", true), Some(WatchAction::Add));
    assert_eq!(announced.applied(&key, "7", false), None, "a re-list");
    assert_eq!(
        announced.applied(&key, "8", false),
        Some(WatchAction::Update)
    );
}

#[test]
fn only_the_apiserversource_modes_have_a_shape() {
    assert_eq!(Shape::of(Mode::Resource), Some(Shape::Resource));
    assert_eq!(Shape::of(Mode::Reference), Some(Shape::Reference));
    assert_eq!(Shape::of(Mode::ImageStreamTag), None);
}

#[test]
fn a_typed_stream_is_sent_as_its_object_in_either_mode() {
    let stream: ImageStream = serde_json::from_value(image_stream()).unwrap();
    let resource = event(
        Shape::Resource,
        WatchAction::Update,
        &stream,
        API_SERVER,
        now(),
    );
    assert_eq!(resource.ty(), types::RESOURCE_UPDATE);
    assert_eq!(json_data(&resource)["metadata"]["uid"], UID);
    let reference = event(
        Shape::Reference,
        WatchAction::Delete,
        &stream,
        API_SERVER,
        now(),
    );
    assert_eq!(reference.ty(), types::REF_DELETE);
    assert_eq!(json_data(&reference)["name"], "ansible-runner");
}
