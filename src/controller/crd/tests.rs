//! Tests of the ImagePromotion types: JSON names, merging inline and named specs, and the
//! generated CRD schema.

use super::*;
use serde_json::{Value, json};

#[test]
fn an_empty_spec_round_trips_as_an_empty_object() {
    let spec: ImagePromotionSpec = serde_json::from_value(json!({})).unwrap();
    assert_eq!(spec, ImagePromotionSpec::default());
    assert_eq!(serde_json::to_value(&spec).unwrap(), json!({}));
    let spec: ImagePromotionSpec = serde_json::from_value(json!({"checks": {}})).unwrap();
    assert!(spec.checks.is_empty());
}

#[test]
fn every_field_uses_its_documented_json_name() {
    let spec = ImagePromotionSpec {
        image_stream: Some("app".into()),
        candidate_tag: Some("candidate".into()),
        served_tag: Some("latest".into()),
        previous_tag: Some("latest-before".into()),
        allow_rolled_back: true,
        on_tamper: OnTamper::Revert,
        checks: Checks {
            required_labels: vec!["vcs-ref".into()],
            allowed_registries: vec!["quay.io/org".into()],
            allowed_architectures: vec!["amd64".into()],
            allowed_os: vec!["linux".into()],
            max_age: Some("720h".into()),
            max_size: Some("5Gi".into()),
            non_root_user: true,
        },
        validation: Validation {
            required: Some(false),
            pipeline: Some("imagegate-promote".into()),
            tasks: vec!["validate".into()],
            pins: Default::default(),
            chains: None,
        },
        promote_as: PromoteAs::DockerImage,
        odh: Odh {
            enabled: true,
            build_commit_labels: vec!["vcs-ref".into()],
            software_label: Some("sw".into()),
            python_dependencies_label: Some("deps".into()),
        },
        redrive: Some(Redrive {
            trigger_template: "imagegate-promote".into(),
            attempts: Some(2),
        }),
        signature: Some(Signature {
            keyless: None,
            keys: vec![
                SignatureKey {
                    name: "inline".into(),
                    public_key: Some("PEM".into()),
                    ..SignatureKey::default()
                },
                SignatureKey {
                    name: "cm".into(),
                    config_map_key_ref: Some(KeyRef {
                        name: "keys".into(),
                        key: "cosign.pub".into(),
                    }),
                    ..SignatureKey::default()
                },
            ],
            pull_secrets: vec!["quay".into()],
        }),
    };
    let value = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        value,
        json!({
            "imageStream": "app", "candidateTag": "candidate", "servedTag": "latest",
            "previousTag": "latest-before",
            "checks": {
                "requiredLabels": ["vcs-ref"], "allowedRegistries": ["quay.io/org"],
                "allowedArchitectures": ["amd64"], "allowedOS": ["linux"],
                "maxAge": "720h", "maxSize": "5Gi", "nonRootUser": true
            },
            "validation": {"required": false, "pipeline": "imagegate-promote", "tasks": ["validate"]},
            "promoteAs": "DockerImage", "allowRolledBack": true, "onTamper": "Revert",
            "odh": {"enabled": true, "buildCommitLabels": ["vcs-ref"], "softwareLabel": "sw", "pythonDependenciesLabel": "deps"},
            "redrive": {"triggerTemplate": "imagegate-promote", "attempts": 2},
            "signature": {
                "keys": [
                    {"name": "inline", "publicKey": "PEM"},
                    {"name": "cm", "configMapKeyRef": {"name": "keys", "key": "cosign.pub"}}
                ],
                "pullSecrets": ["quay"]
            }
        })
    );
    assert_eq!(
        serde_json::from_value::<ImagePromotionSpec>(value).unwrap(),
        spec
    );
}

fn version_schema() -> Value {
    let crd = serde_json::to_value(ImagePromotion::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

fn keys_anywhere(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                found.push(key.clone());
                keys_anywhere(child, found);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| keys_anywhere(item, found)),
        _ => {}
    }
}

#[test]
fn the_crd_schema_is_structural_with_no_references_or_combinators() {
    let mut keys = Vec::new();
    keys_anywhere(&version_schema(), &mut keys);
    for forbidden in [
        "$ref",
        "$defs",
        "definitions",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
    ] {
        assert!(
            !keys.iter().any(|k| k == forbidden),
            "{forbidden} in schema"
        );
    }
    let checks = &version_schema()["properties"]["spec"]["properties"]["checks"];
    assert_eq!(checks["type"], "object");
    assert_eq!(checks["properties"]["allowedOS"]["type"], "array");
    assert_eq!(checks["properties"]["allowedOS"]["items"]["type"], "string");
    assert_eq!(checks["properties"]["nonRootUser"]["type"], "boolean");
    assert_eq!(checks["properties"]["maxAge"]["type"], "string");
    let spec = &version_schema()["properties"]["spec"]["properties"];
    assert_eq!(
        spec["promoteAs"]["enum"],
        json!(["ImageStreamImage", "DockerImage"])
    );
    assert_eq!(spec["odh"]["properties"]["enabled"]["type"], "boolean");
}

#[test]
fn odh_is_off_unless_enabled_and_an_empty_section_is_not_written() {
    let spec: ImagePromotionSpec = serde_json::from_value(json!({"odh": {}})).unwrap();
    assert!(!spec.odh.enabled);
    assert_eq!(serde_json::to_value(&spec).unwrap(), json!({}));
    let bad = serde_json::from_value::<ImagePromotionSpec>(json!({"promoteAs": "Tag"}));
    assert!(bad.is_err());
}

#[test]
fn every_schema_property_has_a_description_for_kubectl_explain() {
    fn walk(path: &str, schema: &Value, missing: &mut Vec<String>) {
        for (name, child) in schema["properties"].as_object().into_iter().flatten() {
            let path = format!("{path}.{name}");
            let described = child["description"].as_str().is_some_and(|d| !d.is_empty());
            if !described && path.starts_with(".spec") {
                missing.push(path.clone());
            }
            walk(&path, child, missing);
        }
    }
    let mut missing = Vec::new();
    walk("", &version_schema(), &mut missing);
    assert!(missing.is_empty(), "no description: {missing:?}");
}

#[test]
fn the_crd_names_group_and_scope_are_those_users_type() {
    let crd = ImagePromotion::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("imagepromotions.imagegate.dev")
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["ipromo".to_string()]));
    assert_eq!(
        crd.spec.names.categories,
        Some(vec!["imagegate".to_string()])
    );
    assert!(crd_yaml().starts_with("# Generated by `imagegate crds`; do not edit.\n"));
}
