//! The CustomRun `promote`, `rollback` and `reject` create: the same ImagePromotion run a
//! pipeline's task creates (`customRef` to `imagegate.dev/v1alpha1` ImagePromotion, the same
//! params), so the controller applies the same checks, proof and permission review to it. Pure:
//! the run from the request, and which ImagePromotion it names.
//!
//! What a run by hand carries, and what it does not:
//! - `validation-status` only when the operator gives `--validation-status`: the controller's
//!   fail-closed rule (`ValidationRequired`) is not bypassed by the CLI's defaults;
//! - never any proof of validation: a hand-made run belongs to no PipelineRun, so an
//!   ImagePromotion with `spec.validation.pipeline` refuses it (`Unverified`);
//! - `spec.timeout` = `--timeout`, so a run the command stopped waiting for also stops.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::api::{CustomRun, CustomRunSpec, CustomTaskRef, Param};
use crate::controller::crd::ImagePromotion;
use crate::controller::params::{API_VERSION, Action, KIND, names};

/// The label every run the CLI creates carries.
pub(crate) const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
/// Its value.
pub(crate) const CREATED_BY: &str = "imagegate-cli";

/// What a run-creating command asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RunRequest {
    /// The run's (and the stream's) namespace.
    pub namespace: String,
    /// The ImageStream.
    pub imagestream: String,
    /// promote, rollback or reject.
    pub action: Action,
    /// The `digest` param.
    pub digest: Option<String>,
    /// The `validation-status` param, only when the operator gave one.
    pub validation_status: Option<String>,
    /// `allow-rolled-back: "true"`.
    pub allow_rolled_back: bool,
    /// The `candidate-tag` param.
    pub candidate_tag: Option<String>,
    /// The `served-tag` param.
    pub served_tag: Option<String>,
    /// `customRef.name`.
    pub promotion: Option<String>,
    /// `spec.serviceAccountName`.
    pub service_account: String,
    /// `spec.timeout`.
    pub timeout: Duration,
}

/// The CustomRun for `req` (named by the server from `generateName`).
pub(crate) fn custom_run(req: &RunRequest) -> CustomRun {
    let mut params = vec![
        param(names::IMAGESTREAM, &req.imagestream),
        param(names::ACTION, req.action.as_str()),
    ];
    let optional = [
        (names::DIGEST, req.digest.as_deref()),
        (names::VALIDATION_STATUS, req.validation_status.as_deref()),
        (names::CANDIDATE_TAG, req.candidate_tag.as_deref()),
        (names::SERVED_TAG, req.served_tag.as_deref()),
        (
            names::ALLOW_ROLLED_BACK,
            req.allow_rolled_back.then_some("true"),
        ),
    ];
    params.extend(
        optional
            .into_iter()
            .filter_map(|(n, v)| v.map(|v| param(n, v))),
    );
    let mut run = CustomRun::new(
        "",
        CustomRunSpec {
            custom_ref: Some(CustomTaskRef {
                api_version: Some(API_VERSION.into()),
                kind: Some(KIND.into()),
                name: req.promotion.clone(),
            }),
            params,
            service_account_name: Some(req.service_account.clone()),
            timeout: Some(go_duration(req.timeout)),
            ..Default::default()
        },
    );
    run.metadata.name = None;
    run.metadata.namespace = Some(req.namespace.clone());
    run.metadata.generate_name = Some(generate_name(req.action, &req.imagestream));
    run.metadata.labels = Some(BTreeMap::from([(
        CREATED_BY_LABEL.into(),
        CREATED_BY.into(),
    )]));
    run
}

fn param(name: &str, value: &str) -> Param {
    Param {
        name: name.into(),
        value: value.into(),
    }
}

/// `imagegate-<action>-<stream>-`, cut to the 58 characters the API server keeps of a prefix.
fn generate_name(action: Action, stream: &str) -> String {
    let mut prefix = format!("imagegate-{}-{stream}", action.as_str());
    prefix.truncate(57);
    format!("{}-", prefix.trim_end_matches(['-', '.']))
}

/// A duration as Go prints it (`5m0s`, `1h30m0s`, `90s` is `1m30s`), what Tekton writes.
pub(crate) fn go_duration(d: Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// The ImagePromotion a run names: `--promotion`; else the one whose `spec.imageStream` is the
/// stream; else the namespace's only one that names no stream; else none (params only) when the
/// namespace has none. Several candidates is an error that lists them.
pub(crate) fn choose_promotion(
    flag: Option<&str>,
    promotions: &[ImagePromotion],
    stream: &str,
) -> Result<Option<String>, String> {
    if let Some(name) = flag {
        return Ok(Some(name.to_string()));
    }
    let name = |p: &ImagePromotion| p.metadata.name.clone().unwrap_or_default();
    let naming: Vec<String> = promotions
        .iter()
        .filter(|p| p.spec.image_stream.as_deref() == Some(stream))
        .map(name)
        .collect();
    let general: Vec<String> = promotions
        .iter()
        .filter(|p| p.spec.image_stream.is_none())
        .map(name)
        .collect();
    let pick = if naming.is_empty() { general } else { naming };
    match pick.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        several => Err(format!(
            "several ImagePromotions could apply to {stream:?} ({}); choose one with --promotion",
            several.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
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
}
