//! Tests of the ImageStreamSource types: the JSON names Knative's duck types use, and the
//! generated CRD (duck labels, category, printer columns, status subresource, event registry).

use super::*;
use serde_json::{Value, json};

use crate::source::event::types;

fn full_spec() -> Value {
    json!({
        "sink": {
            "ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default", "namespace": "ds"},
            "uri": "/extra",
            "CACerts": "-----BEGIN CERTIFICATE-----",
            "audience": "broker"
        },
        "ceOverrides": {"extensions": {"team": "a"}},
        "namespaces": ["ds", "ml"],
        "selector": {"matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
        "tags": ["candidate"],
        "mode": "imagestreamtag",
        "contentMode": "structured",
        "delivery": {
            "retry": 3, "backoffPolicy": "linear", "backoffDelay": "PT1S",
            "deadLetterSink": {"uri": "http://dls.ds.svc.cluster.local"}, "timeout": "PT10S"
        },
        "serviceAccountName": "watcher",
        "emitExisting": true
    })
}

#[test]
fn every_spec_field_uses_knatives_json_name_and_round_trips() {
    let spec: ImageStreamSourceSpec = serde_json::from_value(full_spec()).unwrap();
    assert_eq!(
        spec.sink.r#ref.as_ref().map(|r| r.kind.as_str()),
        Some("Broker")
    );
    assert_eq!(
        spec.sink.ca_certs.as_deref(),
        Some("-----BEGIN CERTIFICATE-----")
    );
    assert_eq!(spec.mode, Some(Mode::ImageStreamTag));
    assert_eq!(spec.content_mode, Some(ContentMode::Structured));
    let delivery = spec.delivery.as_ref().unwrap();
    assert_eq!(delivery.backoff_policy, Some(BackoffPolicy::Linear));
    assert_eq!(serde_json::to_value(&spec).unwrap(), full_spec());
    let minimal: ImageStreamSourceSpec =
        serde_json::from_value(json!({"sink": {"uri": "http://x"}})).unwrap();
    assert_eq!(
        serde_json::to_value(&minimal).unwrap(),
        json!({"sink": {"uri": "http://x"}})
    );
}

#[test]
fn a_misspelt_field_is_refused() {
    let err = serde_json::from_value::<ImageStreamSourceSpec>(json!({"sink": {"url": "http://x"}}))
        .unwrap_err();
    assert!(err.to_string().contains("unknown field `url`"), "{err}");
}

#[test]
fn the_modes_are_the_command_lines() {
    for (mode, text) in [
        (Mode::ImageStreamTag, "imagestreamtag"),
        (Mode::Resource, "resource"),
        (Mode::Reference, "reference"),
    ] {
        assert_eq!(serde_json::to_value(mode).unwrap(), json!(text));
    }
}

#[test]
fn the_crd_is_a_knative_source_in_the_sources_category() {
    let crd = crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("imagestreamsources.sources.imagegate.dev")
    );
    let labels = crd.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get(DUCK_SOURCE_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(EVENTING_SOURCE_LABEL).map(String::as_str),
        Some("true")
    );
    let names = &crd.spec.names;
    assert!(
        names
            .categories
            .as_ref()
            .unwrap()
            .contains(&"sources".to_string())
    );
    let version = &crd.spec.versions[0];
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<(String, String)> = version
        .additional_printer_columns
        .clone()
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.json_path))
        .collect();
    assert_eq!(
        columns,
        [
            ("Ready", r#".status.conditions[?(@.type=="Ready")].status"#),
            ("Reason", r#".status.conditions[?(@.type=="Ready")].reason"#),
            ("Sink", ".status.sinkUri"),
            ("Age", ".metadata.creationTimestamp"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

#[test]
fn the_registry_annotation_lists_every_event_type_with_the_schemas() {
    let crd = crd();
    let annotation = &crd.metadata.annotations.unwrap()[EVENT_TYPES_ANNOTATION];
    let listed: Vec<Value> = serde_json::from_str(annotation).unwrap();
    let listed_types: Vec<&str> = listed.iter().map(|t| t["type"].as_str().unwrap()).collect();
    assert_eq!(
        listed_types,
        [
            types::UPDATED,
            types::DELETED,
            types::IMPORT_FAILED,
            types::RESOURCE_ADD,
            types::RESOURCE_UPDATE,
            types::RESOURCE_DELETE,
            types::REF_ADD,
            types::REF_UPDATE,
            types::REF_DELETE,
        ]
    );
    assert_eq!(
        listed[0]["schema"],
        "https://imagegate.dev/schemas/imagestreamtag-updated.json"
    );
    assert!(
        listed[3].get("schema").is_none(),
        "ApiServerSource publishes none"
    );
    assert!(
        listed
            .iter()
            .all(|t| t["description"].as_str().is_some_and(|d| !d.is_empty()))
    );
}

#[test]
fn the_status_has_knatives_source_status_names() {
    let status = ImageStreamSourceStatus {
        observed_generation: Some(2),
        conditions: vec![status::Condition {
            r#type: status::condition::READY.into(),
            status: "True".into(),
            reason: Some(status::reason::READY.into()),
            ..Default::default()
        }],
        sink_uri: Some("http://x".into()),
        sink_ca_certs: Some("pem".into()),
        ce_attributes: vec![status::CeAttributes {
            r#type: types::UPDATED.into(),
            source: None,
        }],
        deliveries: Some(status::Deliveries {
            delivered: 4,
            ..Default::default()
        }),
    };
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!({
            "observedGeneration": 2,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
            "sinkUri": "http://x", "sinkCACerts": "pem",
            "ceAttributes": [{"type": "dev.imagegate.imagestreamtag.updated"}],
            "deliveries": {"delivered": 4, "deadLettered": 0, "failed": 0}
        })
    );
}

#[test]
fn the_yaml_starts_with_the_generated_header() {
    assert!(crd_yaml().starts_with(CRD_HEADER));
}
