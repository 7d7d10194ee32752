//! The runs the CLI creates, pinned to what the pipeline's tasks create.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::controller::crd::ImagePromotionSpec;

const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn request(action: Action) -> RunRequest {
    RunRequest {
        namespace: "ds".into(),
        imagestream: "nb".into(),
        action,
        digest: Some(B.into()),
        validation_status: None,
        allow_rolled_back: false,
        candidate_tag: None,
        served_tag: None,
        promotion: Some("notebooks".into()),
        service_account: "imagegate-pipeline".into(),
        timeout: Duration::from_secs(300),
    }
}

#[test]
fn a_promotion_by_hand_is_the_pipelines_task_without_evidence() {
    let run = custom_run(&request(Action::Promote));
    assert_eq!(
        serde_json::to_value(&run).unwrap(),
        json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"generateName": "imagegate-promote-nb-", "namespace": "ds",
                         "labels": {"app.kubernetes.io/created-by": "imagegate-cli"}},
            "spec": {
                "customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"},
                "params": [
                    {"name": "imagestream", "value": "nb"},
                    {"name": "action", "value": "promote"},
                    {"name": "digest", "value": B}],
                "serviceAccountName": "imagegate-pipeline",
                "timeout": "5m0s"}
        })
    );
    assert!(crate::controller::params::is_ours(&run));
}

#[test]
fn validation_status_and_other_params_are_passed_only_when_given() {
    let mut req = request(Action::Promote);
    req.validation_status = Some("Succeeded".into());
    req.allow_rolled_back = true;
    req.served_tag = Some("stable".into());
    let run = custom_run(&req);
    assert_eq!(run.param_str("validation-status"), Some("Succeeded"));
    assert_eq!(run.param_str("allow-rolled-back"), Some("true"));
    assert_eq!(run.param_str("served-tag"), Some("stable"));
    assert_eq!(run.param_str("candidate-tag"), None);

    let mut rollback = request(Action::Rollback);
    rollback.digest = None;
    rollback.promotion = None;
    let run = custom_run(&rollback);
    assert_eq!(run.param_str("digest"), None);
    assert_eq!(run.spec.custom_ref.unwrap().name, None);
}

#[test]
fn long_stream_names_keep_the_generated_name_valid() {
    let mut req = request(Action::Rollback);
    req.imagestream = "a".repeat(80);
    let prefix = custom_run(&req).metadata.generate_name.unwrap();
    assert!(prefix.len() <= 58 && prefix.ends_with('-'), "{prefix}");
}

#[test]
fn go_durations_are_printed_as_go_prints_them() {
    assert_eq!(go_duration(Duration::from_secs(45)), "45s");
    assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
    assert_eq!(go_duration(Duration::from_secs(5400)), "1h30m0s");
    for d in [45, 90, 300, 5400] {
        let text = go_duration(Duration::from_secs(d));
        assert_eq!(
            crate::api::parse_go_duration(&text),
            Ok(Duration::from_secs(d))
        );
    }
}

fn promotion(name: &str, stream: Option<&str>) -> ImagePromotion {
    let mut p = ImagePromotion::new(
        name,
        ImagePromotionSpec {
            image_stream: stream.map(str::to_string),
            ..Default::default()
        },
    );
    p.metadata.namespace = Some("ds".into());
    p
}

#[test]
fn the_promotion_is_the_flag_the_streams_own_or_the_only_one() {
    let general = promotion("notebooks", None);
    let own = promotion("nb-only", Some("nb"));
    let other = promotion("other-only", Some("other"));
    assert_eq!(choose_promotion(Some("x"), &[], "nb"), Ok(Some("x".into())));
    assert_eq!(choose_promotion(None, &[], "nb"), Ok(None));
    assert_eq!(
        choose_promotion(None, &[general.clone(), other.clone()], "nb"),
        Ok(Some("notebooks".into()))
    );
    assert_eq!(
        choose_promotion(None, &[general.clone(), own, other], "nb"),
        Ok(Some("nb-only".into()))
    );
    assert_eq!(
        choose_promotion(None, &[general, promotion("second", None)], "nb"),
        Err("several ImagePromotions could apply to \"nb\" (notebooks, second); choose one with --promotion".into())
    );
}
