//! Which ImagePromotions judge a run, and what a run may not change about them.

use super::*;
use crate::controller::crd::PromoteAs;
use serde_json::{Value, json};

const D: &str = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";

fn run(params: &[(&str, &str)]) -> CustomRun {
    let mut all = vec![("imagestream", "nb"), ("digest", D)];
    all.extend_from_slice(params);
    let params: Vec<Value> = all
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"params": params}
    }))
    .unwrap()
}

fn spec(v: Value) -> ImagePromotionSpec {
    serde_json::from_value(v).unwrap()
}

fn promotion(name: &str, v: Value) -> ImagePromotion {
    ImagePromotion::new(name, spec(v))
}

fn gov() -> ImagePromotion {
    promotion(
        "gov",
        json!({"imageStream": "nb", "validation": {"pipeline": "imagegate-promote", "tasks": ["validate"]}}),
    )
}

fn refused(result: Result<Judged, Refusal>) -> (&'static str, String) {
    let o = result.expect_err("refused");
    (o.reason, o.message)
}

#[test]
fn a_stream_no_imagepromotion_governs_keeps_the_defaults() {
    let judged = judge(&run(&[]), &Own::Defaults, &[]).unwrap();
    assert!(judged.governing.is_empty() && judged.reviews.is_empty());
    assert!(judged.request.validation_required);
    assert!(judged.request.proofs.is_empty());
    // Another stream's policy does not govern this one.
    let other = promotion(
        "other",
        json!({"imageStream": "other", "validation": {"required": false}}),
    );
    let elsewhere = promotion("elsewhere", json!({"imageStream": "team-b/nb"}));
    let judged = judge(&run(&[]), &Own::Defaults, &[other, elsewhere]).unwrap();
    assert!(judged.governing.is_empty());
    assert!(judged.request.validation_required);
}

#[test]
fn an_inline_or_unnamed_run_is_held_to_every_governing_imagepromotion() {
    let lax = promotion("lax", json!({"validation": {"required": false}}));
    let all = [lax, gov()];
    for own in [
        Own::Defaults,
        Own::Inline(spec(json!({"validation": {"required": false}}))),
    ] {
        let judged = judge(&run(&[]), &own, &all).unwrap();
        assert_eq!(judged.governing, ["gov", "lax"], "sorted by name");
        assert_eq!(judged.reviews, ["gov", "lax"]);
        assert!(
            judged.request.validation_required,
            "gov requires the status"
        );
        assert_eq!(judged.request.proofs.len(), 1);
        assert_eq!(
            judged.request.proofs[0].asks(),
            "ImagePromotion \"gov\" governs nb and asks for proof from Pipeline \"imagegate-promote\""
        );
    }
    // Naming the lax one changes nothing, and the review names it once.
    let own = Own::Named("lax".into(), all[0].spec.clone());
    let judged = judge(&run(&[]), &own, &all).unwrap();
    assert_eq!(judged.reviews, ["gov", "lax"]);
    assert_eq!(judged.request.proofs.len(), 1);
}

#[test]
fn a_run_adds_requirements_to_the_governing_ones() {
    let checked = promotion(
        "gov",
        json!({"imageStream": "nb", "checks": {"nonRootUser": true}}),
    );
    let own = Own::Inline(spec(json!({
        "checks": {"maxAge": "720h"},
        "validation": {"pipeline": "mine", "tasks": ["scan"]}
    })));
    let judged = judge(&run(&[]), &own, &[checked]).unwrap();
    assert_eq!(judged.request.checks.len(), 2, "each set must pass");
    assert_eq!(judged.request.proofs.len(), 1);
    assert_eq!(judged.request.proofs[0].asked_by, "the inline spec asks");
}

#[test]
fn params_and_inline_specs_never_name_another_stream_or_tag_than_the_policy() {
    let pinned = promotion(
        "pinned",
        json!({"imageStream": "nb", "candidateTag": "candidate", "servedTag": "latest", "previousTag": "latest-before"}),
    );
    let named = Own::Named("pinned".into(), pinned.spec.clone());
    let all = [pinned];
    let cases: [(CustomRun, Own, &str); 4] = [
        (
            run(&[("candidate-tag", "nightly")]),
            named.clone(),
            "param \"candidate-tag\" is \"nightly\", but ImagePromotion \"pinned\" sets \"candidate\"; it governs ImageStream \"nb\", and a run may not name another candidateTag",
        ),
        (
            run(&[("served-tag", "stable")]),
            Own::Defaults,
            "param \"served-tag\" is \"stable\", but ImagePromotion \"pinned\" sets \"latest\"",
        ),
        (
            run(&[]),
            Own::Inline(spec(json!({"previousTag": "nightly"}))),
            "the inline spec's previousTag is \"nightly\", but ImagePromotion \"pinned\" sets \"latest-before\"",
        ),
        (
            run(&[("allow-rolled-back", "true")]),
            named.clone(),
            "param \"allow-rolled-back\" counts only where no ImagePromotion governs the stream; ImagePromotion \"pinned\" does not set allowRolledBack",
        ),
    ];
    for (i, (r, own, want)) in cases.into_iter().enumerate() {
        let (why, message) = refused(judge(&r, &own, &all));
        assert_eq!(why, reason::PARAM_OVERRIDES_POLICY, "{i}");
        assert!(message.contains(want), "{i}: {want:?} not in {message:?}");
    }
    // A named ImagePromotion that sets another stream.
    let lax = promotion(
        "lax",
        json!({"imageStream": "other", "validation": {"required": false}}),
    );
    let own = Own::Named("lax".into(), lax.spec.clone());
    assert_eq!(
        refused(judge(&run(&[]), &own, &[lax])),
        (
            reason::PARAM_OVERRIDES_POLICY,
            "param \"imagestream\" is \"nb\", but ImagePromotion \"lax\" promotes ImageStream \"other\"".into()
        )
    );
}

#[test]
fn the_governing_tags_apply_when_the_run_names_none() {
    let custom = promotion(
        "gov",
        json!({"candidateTag": "latest-candidate", "servedTag": "stable"}),
    );
    let judged = judge(&run(&[]), &Own::Defaults, &[custom]).unwrap();
    let r = &judged.request;
    assert_eq!(
        (
            r.candidate_tag.as_str(),
            r.served_tag.as_str(),
            r.previous_tag.as_str()
        ),
        ("latest-candidate", "stable", "stable-previous")
    );
}

#[test]
fn governing_imagepromotions_that_disagree_are_a_conflict() {
    let a = promotion("a", json!({"candidateTag": "candidate"}));
    let b = promotion("b", json!({"imageStream": "nb", "candidateTag": "nightly"}));
    assert_eq!(
        refused(judge(&run(&[]), &Own::Defaults, &[a.clone(), b])),
        (
            reason::POLICY_CONFLICT,
            "ImagePromotions \"a\" and \"b\" both govern ImageStream \"nb\" and set candidateTag \"candidate\" and \"nightly\"; make them agree".into()
        )
    );
    let docker = promotion(
        "c",
        json!({"imageStream": "nb", "promoteAs": "DockerImage"}),
    );
    let (why, _) = refused(judge(
        &run(&[]),
        &Own::Defaults,
        &[a.clone(), docker.clone()],
    ));
    assert_eq!(why, reason::POLICY_CONFLICT);
    // Naming one of them settles how to promote.
    let own = Own::Named("c".into(), docker.spec.clone());
    let judged = judge(&run(&[]), &own, &[a, docker]).unwrap();
    assert_eq!(judged.request.promote_as, PromoteAs::DockerImage);
}

#[test]
fn how_to_promote_is_the_governing_policys_not_an_inline_specs() {
    let own = Own::Inline(spec(
        json!({"promoteAs": "DockerImage", "odh": {"enabled": true}}),
    ));
    let judged = judge(&run(&[]), &own, &[gov()]).unwrap();
    assert_eq!(judged.request.promote_as, PromoteAs::ImageStreamImage);
    assert!(judged.request.odh.is_none());
    // Where nothing governs, the inline spec says.
    let judged = judge(&run(&[]), &own, &[]).unwrap();
    assert_eq!(judged.request.promote_as, PromoteAs::DockerImage);
}

#[test]
fn a_rolled_back_digest_is_allowed_only_by_every_governing_imagepromotion() {
    let allows = promotion("allows", json!({"allowRolledBack": true}));
    let denies = promotion("denies", json!({"imageStream": "nb"}));
    let yes = [("allow-rolled-back", "true")];
    // Nothing governs: the param counts.
    assert!(
        judge(&run(&yes), &Own::Defaults, &[])
            .unwrap()
            .request
            .allow_rolled_back
    );
    assert!(
        !judge(&run(&[]), &Own::Defaults, &[])
            .unwrap()
            .request
            .allow_rolled_back
    );
    // Only allowing policies: allowed, with or without the param.
    let judged = judge(&run(&[]), &Own::Defaults, std::slice::from_ref(&allows)).unwrap();
    assert!(judged.request.allow_rolled_back);
    // One that does not: not allowed, and asking for it is refused.
    let both = [allows, denies];
    assert!(
        !judge(&run(&[]), &Own::Defaults, &both)
            .unwrap()
            .request
            .allow_rolled_back
    );
    let (why, message) = refused(judge(&run(&yes), &Own::Defaults, &both));
    assert_eq!(why, reason::PARAM_OVERRIDES_POLICY);
    assert!(message.contains("ImagePromotion \"denies\""), "{message}");
    let own = Own::Inline(spec(json!({"allowRolledBack": true})));
    let (why, message) = refused(judge(&run(&[]), &own, &both));
    assert_eq!(why, reason::PARAM_OVERRIDES_POLICY);
    assert_eq!(
        message,
        "the inline spec's allowRolledBack is true, but ImagePromotion \"denies\", which governs ImageStream \"nb\", does not set it"
    );
}

#[test]
fn a_governing_imagepromotion_that_cannot_be_parsed_ends_the_run() {
    let broken = promotion("broken", json!({"checks": {"maxSize": "5GB"}}));
    let (why, message) = refused(judge(&run(&[]), &Own::Defaults, &[broken]));
    assert_eq!(why, reason::INVALID_PARAMS);
    assert!(
        message.starts_with("ImagePromotion \"broken\": checks.maxSize"),
        "{message}"
    );
}

#[test]
fn a_policy_gates_the_stream_it_names_or_those_with_its_candidate_tag() {
    let stream = |tags: Value| -> ImageStream {
        serde_json::from_value(
            json!({"metadata": {"name": "nb", "namespace": "ds"}, "spec": {"tags": tags}}),
        )
        .unwrap()
    };
    let with = stream(json!([{"name": "upstream"}]));
    let without = stream(json!([{"name": "latest"}]));
    // Named, in either form: gated whatever its tags.
    for named in ["nb", "ds/nb"] {
        assert!(
            gates(&spec(json!({"imageStream": named})), "ds", &without),
            "{named}"
        );
    }
    assert!(!gates(
        &spec(json!({"imageStream": "other/nb"})),
        "ds",
        &with
    ));
    // Namespace-wide: the streams with its candidate tag (default `candidate`, "" the default).
    let wide = spec(json!({"candidateTag": "upstream"}));
    assert!(gates(&wide, "ds", &with));
    assert!(!gates(&wide, "ds", &without));
    assert!(!gates(&spec(json!({"candidateTag": ""})), "ds", &with));
    assert_eq!(
        spec(json!({"candidateTag": ""})).candidate_tag_or_default(),
        "candidate"
    );
    assert_eq!(
        spec(json!({"servedTag": "stable"})).served_tag_or_default(),
        "stable"
    );
}

#[test]
fn signature_requirements_add_up_and_a_run_cannot_drop_one() {
    let pem = crate::controller::params::signature::tests::PEM;
    let key = |name: &str| json!({"keys": [{"name": name, "publicKey": pem}]});
    let team = promotion(
        "team",
        json!({"imageStream": "nb", "signature": key("team-key")}),
    );
    let platform = promotion("platform", json!({"signature": key("platform-key")}));
    // A run that inlines a spec without any signature is held to both.
    let inline = Own::Inline(spec(json!({})));
    let judged = judge(&run(&[]), &inline, &[team.clone(), platform.clone()]).unwrap();
    let by: Vec<&str> = (judged.request.signatures.iter())
        .map(|s| s.by.as_str())
        .collect();
    assert_eq!(
        by,
        ["ImagePromotion \"platform\"", "ImagePromotion \"team\""]
    );
    // Its own key adds a requirement; it replaces none.
    let own = Own::Inline(spec(json!({"signature": key("my-key")})));
    let judged = judge(&run(&[]), &own, &[team.clone(), platform]).unwrap();
    assert_eq!(judged.request.signatures.len(), 3);
    assert_eq!(judged.request.signatures[0].by, "the inline spec");
    // The same policy named and governing counts once.
    let named = Own::Named("team".into(), team.spec.clone());
    let judged = judge(&run(&[]), &named, &[team]).unwrap();
    assert_eq!(judged.request.signatures.len(), 1);
    // An inline spec may add a key, but not make the controller read a ConfigMap or a Secret.
    for named in [
        json!({"keys": [{"name": "k", "configMapKeyRef": {"name": "keys", "key": "cosign.pub"}}]}),
        json!({"keys": [{"name": "k", "publicKey": pem}], "pullSecrets": ["someone-elses"]}),
    ] {
        let own = Own::Inline(spec(json!({ "signature": named })));
        let (why, message) = refused(judge(&run(&[]), &own, &[]));
        assert_eq!(why, reason::INVALID_PARAMS);
        assert!(
            message.contains("may list keys only as publicKey"),
            "{message}"
        );
    }
    // A governing policy whose key cannot be used ends the run before anything is asked.
    let broken = promotion(
        "broken",
        json!({"signature": {"keys": [{"name": "k", "publicKey": "not a key"}]}}),
    );
    let (why, message) = refused(judge(&run(&[]), &Own::Defaults, &[broken]));
    assert_eq!(why, reason::INVALID_PARAMS);
    assert!(
        message.starts_with("ImagePromotion \"broken\": signature.keys[0].publicKey"),
        "{message}"
    );
}

#[test]
fn chains_keys_are_the_platform_s_and_a_run_may_add_them_only_inline() {
    let pem = crate::controller::params::signature::tests::PEM;
    let validation = |key: Value| {
        json!({"validation": {"pipeline": "imagegate-promote", "tasks": ["validate"],
            "chains": {"keys": [key]}}})
    };
    let from_map =
        json!({"name": "chains", "configMapKeyRef": {"name": "chains-keys", "key": "cosign.pub"}});
    // An ImagePromotion may keep Chains' key in the controller's ConfigMap.
    let platform = promotion("platform", validation(from_map.clone()));
    let judged = judge(&run(&[]), &Own::Defaults, std::slice::from_ref(&platform)).unwrap();
    assert_eq!(judged.request.proofs.len(), 1);
    assert_eq!(judged.request.proofs[0].chains[0].name, "chains");
    // The runner's inline spec may not make the controller read one on its behalf.
    let own = Own::Inline(spec(validation(from_map)));
    let (why, message) = refused(judge(&run(&[]), &own, std::slice::from_ref(&platform)));
    assert_eq!(why, reason::INVALID_PARAMS);
    assert!(
        message.contains("validation.chains may list keys only as publicKey"),
        "{message}"
    );
    // Inline it may add a proof with a key of its own; the platform's stays.
    let own = Own::Inline(spec(validation(json!({"name": "mine", "publicKey": pem}))));
    let judged = judge(&run(&[]), &own, &[platform]).unwrap();
    let names: Vec<&str> = (judged.request.proofs.iter())
        .map(|p| p.chains[0].name.as_str())
        .collect();
    assert_eq!(names, ["mine", "chains"]);
}
