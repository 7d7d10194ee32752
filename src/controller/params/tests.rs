//! Reading params over a spec: defaults, overrides, the namespace rule, and every refusal.

use super::*;
use serde_json::json;

const D: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn run(params: serde_json::Value) -> CustomRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"customRef": {"apiVersion": API_VERSION, "kind": KIND}, "params": params}
    }))
    .unwrap()
}

fn parse_params(params: serde_json::Value) -> Result<Request, String> {
    parse(&run(params), &ImagePromotionSpec::default())
}

#[test]
fn defaults_fill_the_tags_and_the_action() {
    let r = parse_params(json!([
        {"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}
    ]))
    .unwrap();
    assert_eq!(r.namespace, "ds");
    assert_eq!(r.imagestream, "nb");
    assert_eq!(r.candidate_tag, "candidate");
    assert_eq!(r.served_tag, "latest");
    assert_eq!(r.action, Action::Promote);
    assert_eq!(r.digest.as_deref(), Some(D));
    assert_eq!(r.validation(), Validation::Missing, "fails closed");
}

#[test]
fn the_spec_supplies_defaults_that_params_override() {
    let spec = ImagePromotionSpec {
        image_stream: Some("from-spec".into()),
        served_tag: Some("served".into()),
        ..Default::default()
    };
    let r = parse(&run(json!([{"name": "digest", "value": D}])), &spec).unwrap();
    assert_eq!(
        (r.imagestream.as_str(), r.served_tag.as_str()),
        ("from-spec", "served")
    );
    let r = parse(
        &run(json!([{"name": "digest", "value": D}, {"name": "served-tag", "value": "prod"}])),
        &spec,
    )
    .unwrap();
    assert_eq!(r.served_tag, "prod");
}

#[test]
fn another_namespace_is_refused_whatever_the_params_say() {
    let err = parse_params(json!([
        {"name": "imagestream", "value": "other/nb"}, {"name": "digest", "value": D}
    ]))
    .unwrap_err();
    assert!(
        err.contains("only promote ImageStreams in its own namespace"),
        "{err}"
    );
    let ok = parse_params(json!([
        {"name": "imagestream", "value": "ds/nb"}, {"name": "digest", "value": D}
    ]))
    .unwrap();
    assert_eq!(ok.imagestream, "nb");
}

#[test]
fn bad_params_say_what_is_wrong() {
    let cases = [
        (
            json!([{"name": "digest", "value": D}]),
            "\"imagestream\" is required",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}]),
            "\"digest\" is required",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": "latest"}]),
            "not an image digest",
        ),
        (
            json!([{"name": "imagestream", "value": "NB!"}, {"name": "digest", "value": D}]),
            "not a valid ImageStream name",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}, {"name": "action", "value": "deploy"}]),
            "not one of begin",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}, {"name": "digst", "value": D}]),
            "unknown param \"digst\"",
        ),
        (
            json!([{"name": "imagestream", "value": ["a"]}]),
            "must be a string",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}, {"name": "served-tag", "value": "candidate"}]),
            "must differ",
        ),
        (
            json!([{"name": "imagestream", "value": "nb"}, {"name": "imagestream", "value": "nb2"}]),
            "given twice",
        ),
    ];
    for (params, want) in cases {
        let err = parse_params(params.clone()).unwrap_err();
        assert!(err.contains(want), "{params}: {err}");
    }
}

#[test]
fn rollback_needs_no_digest() {
    let r = parse_params(json!([
        {"name": "imagestream", "value": "nb"}, {"name": "action", "value": "rollback"}
    ]))
    .unwrap();
    assert_eq!(r.action, Action::Rollback);
    assert!(r.digest.is_none());
}

#[test]
fn validation_status_must_say_success_and_may_be_missing_only_where_the_spec_allows() {
    use Validation::{Failed, Missing, Passed};
    let unsafe_spec = ImagePromotionSpec {
        validation: crate::controller::crd::Validation {
            required: Some(false),
            ..Default::default()
        },
        ..Default::default()
    };
    for (status, required, not_required) in [
        ("", Missing, Passed),
        ("Succeeded", Passed, Passed),
        ("Completed", Passed, Passed),
        ("Failed", Failed, Failed),
        ("None", Failed, Failed),
        ("succeeded", Failed, Failed),
    ] {
        let params = json!([
            {"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D},
            {"name": "validation-status", "value": status}
        ]);
        let r = parse_params(params.clone()).unwrap();
        assert_eq!(r.validation(), required, "{status:?}");
        let r = parse(&run(params), &unsafe_spec).unwrap();
        assert_eq!(
            r.validation(),
            not_required,
            "{status:?} with required: false"
        );
    }
}

#[test]
fn spec_source_follows_custom_ref_name_and_custom_spec() {
    let mut r = run(json!([]));
    assert_eq!(spec_source(&r).unwrap(), SpecSource::Defaults);
    r.spec.custom_ref.as_mut().unwrap().name = Some("notebooks".into());
    assert_eq!(
        spec_source(&r).unwrap(),
        SpecSource::Named("notebooks".into())
    );
    let inline: CustomRun = serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"customSpec": {"apiVersion": API_VERSION, "kind": KIND,
                                "spec": {"servedTag": "served", "checks": {"nonRootUser": true}}}}
    }))
    .unwrap();
    match spec_source(&inline).unwrap() {
        SpecSource::Inline(s) => assert_eq!(s.served_tag.as_deref(), Some("served")),
        other => panic!("{other:?}"),
    }
    assert!(is_ours(&inline));
}

#[test]
fn a_typo_in_an_inline_spec_is_refused_not_ignored() {
    let inline: CustomRun = serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "r", "namespace": "ds"},
        "spec": {"customSpec": {"apiVersion": API_VERSION, "kind": KIND,
                                "spec": {"check": {"nonRootUser": true}}}}
    }))
    .unwrap();
    let err = spec_source(&inline).unwrap_err();
    assert!(err.contains("unknown field `check`"), "{err}");
}

#[test]
fn an_inline_spec_that_is_not_an_object_is_refused_not_taken_for_defaults() {
    for (spec, kind) in [
        (json!([]), "spec: expected an object, got an array"),
        (json!(["x"]), "spec: expected an object, got an array"),
        (json!("candidate"), "spec: expected an object, got a string"),
        (json!(3), "spec: expected an object, got a number"),
        (json!(true), "spec: expected an object, got a boolean"),
        (
            json!({"checks": []}),
            "spec.checks: expected an object, got an array",
        ),
        (
            json!({"validation": []}),
            "spec.validation: expected an object, got an array",
        ),
        (
            json!({"odh": []}),
            "spec.odh: expected an object, got an array",
        ),
    ] {
        let inline: CustomRun = serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ds"},
            "spec": {"customSpec": {"apiVersion": API_VERSION, "kind": KIND, "spec": spec}}
        }))
        .unwrap();
        let err = spec_source(&inline).unwrap_err();
        assert_eq!(
            err,
            format!("customSpec.spec is not a valid ImagePromotion spec: {kind}"),
        );
    }
}

#[test]
fn digests_are_checked_strictly() {
    assert!(is_digest(D));
    assert!(!is_digest("sha256:AAAA"));
    assert!(!is_digest(&D.to_uppercase()));
    assert!(!is_digest(&format!("{D}0")));
}

#[test]
fn the_proof_needs_a_pipeline_and_its_tasks_with_valid_names() {
    let with = |pipeline: Option<&str>, tasks: &[&str]| {
        let spec = ImagePromotionSpec {
            validation: crate::controller::crd::Validation {
                pipeline: pipeline.map(str::to_string),
                tasks: tasks.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
            ..Default::default()
        };
        parse(
            &run(json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}])),
            &spec,
        )
    };
    assert_eq!(with(None, &[]).unwrap().proofs, vec![]);
    assert_eq!(
        with(Some("imagegate-promote"), &["validate", "scan"])
            .unwrap()
            .proofs,
        vec![Proof {
            pipeline: "imagegate-promote".into(),
            tasks: vec!["validate".into(), "scan".into()],
            asked_by: SPEC_ASKS.into(),
            pins: Default::default(),
            chains: vec![],
        }]
    );
    for (pipeline, tasks, want) in [
        (
            None,
            &["validate"][..],
            "validation.tasks needs validation.pipeline",
        ),
        (
            Some("p"),
            &[][..],
            "validation.pipeline \"p\" needs validation.tasks",
        ),
        (
            Some("Bad_Name"),
            &["validate"][..],
            "\"Bad_Name\" is not a valid Pipeline name",
        ),
        (
            Some("p"),
            &["ok", "a.b"][..],
            "validation.tasks[1]: \"a.b\" is not a valid pipeline task name",
        ),
    ] {
        let err = with(pipeline, tasks).unwrap_err();
        assert!(err.contains(want), "{want:?} not in {err:?}");
    }
}

#[test]
fn a_chains_record_needs_the_tasks_it_is_of_and_one_to_sixteen_usable_keys() {
    let with = |validation: serde_json::Value| {
        let spec: ImagePromotionSpec =
            serde_json::from_value(json!({ "validation": validation })).unwrap();
        parse(
            &run(json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}])),
            &spec,
        )
    };
    let key = |name: &str| json!({"name": name, "configMapKeyRef": {"name": "chains-keys", "key": "cosign.pub"}});
    let ok =
        with(json!({"pipeline": "p", "tasks": ["validate"], "chains": {"keys": [key("chains")]}}));
    assert_eq!(ok.unwrap().proofs[0].chains.len(), 1);
    let many: Vec<_> = (0..17).map(|i| key(&format!("k{i}"))).collect();
    for (validation, want) in [
        (
            json!({"chains": {"keys": [key("chains")]}}),
            "validation.chains needs validation.pipeline and validation.tasks",
        ),
        (
            json!({"pipeline": "p", "tasks": ["v"], "chains": {"keys": []}}),
            "validation.chains.keys: name 1 to 16",
        ),
        (
            json!({"pipeline": "p", "tasks": ["v"], "chains": {"keys": many}}),
            "validation.chains.keys: name 1 to 16",
        ),
        (
            json!({"pipeline": "p", "tasks": ["v"], "chains": {"keys": [{"name": "k", "publicKey": "nope"}]}}),
            "validation.chains.keys[0].publicKey: not a PEM public key",
        ),
        (
            json!({"pipeline": "p", "tasks": ["v"], "chains": {"keys": [key("k"), key("k")]}}),
            "validation.chains.keys[1].name: \"k\" is named twice",
        ),
    ] {
        let err = with(validation).unwrap_err();
        assert!(err.contains(want), "{want:?} not in {err:?}");
    }
}

#[test]
fn the_previous_tag_defaults_after_the_served_tag_and_may_not_be_another_tag() {
    let params = json!([{"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D}]);
    assert_eq!(
        parse_params(params.clone()).unwrap().previous_tag,
        "latest-previous"
    );
    let named = |tag: &str| ImagePromotionSpec {
        previous_tag: Some(tag.into()),
        ..Default::default()
    };
    assert_eq!(
        parse(&run(params.clone()), &named("rollback-to"))
            .unwrap()
            .previous_tag,
        "rollback-to"
    );
    for (tag, want) in [
        ("latest", "must differ from the candidate tag"),
        ("candidate", "must differ"),
        ("-bad", "\"-bad\" is not a valid tag name"),
    ] {
        let err = parse(&run(params.clone()), &named(tag)).unwrap_err();
        assert!(err.contains(want), "{tag}: {err}");
    }
}

#[test]
fn allow_rolled_back_is_true_or_false() {
    let with = |value: &str| {
        parse_params(json!([
            {"name": "imagestream", "value": "nb"}, {"name": "digest", "value": D},
            {"name": "allow-rolled-back", "value": value}
        ]))
    };
    assert!(with("true").unwrap().allow_rolled_back);
    assert!(!with("false").unwrap().allow_rolled_back);
    assert!(!with("").unwrap().allow_rolled_back);
    assert_eq!(
        with("yes").unwrap_err(),
        "param \"allow-rolled-back\": \"yes\" is not \"true\" or \"false\""
    );
}
