//! With `odh.enabled`: the candidate hidden, the served tag described on promotion, a failure
//! noted in the stream's description, no bare served tag, and the DockerImage pin.

use super::*;
use crate::controller::crd::Odh;
use crate::controller::params::odh::{OdhSettings, settings};
use crate::odh::key;

use super::super::odh::{CANDIDATE_BUILD, PREVIOUS_BUILD, UPDATE_FAILED_NOTE, description_after};

fn odh(software: &str) -> OdhSettings {
    let on = Odh {
        enabled: true,
        ..Odh::default()
    };
    settings(&on, Action::Promote, software, "")
        .unwrap()
        .unwrap()
}

fn with_odh<'a>(mut a: Ask<'a>, settings: &'a OdhSettings) -> Ask<'a> {
    a.odh = Some(settings);
    a
}

fn labelled(labels: &[(&str, &str)]) -> Fetched {
    with_image(&ImageFacts {
        reference: format!("quay.io/org/nb@{B}"),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..ImageFacts::default()
    })
}

fn tag<'p>(patch: &'p Value, name: &str) -> &'p Value {
    patch["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tag {name} in {patch}"))
}

#[test]
fn begin_hides_the_candidate_in_its_own_write() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Begin, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let d = decide(&with_odh(ask(&t, "", &checks), &s), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::VALIDATING);
    assert_eq!(
        tag(patch, "latest")["annotations"][annotation::PHASE],
        "Validating"
    );
    assert_eq!(
        tag(patch, "candidate"),
        &json!({"name": "candidate", "annotations": {key::TAG_OUTDATED: "true"}})
    );
}

#[test]
fn begin_with_nothing_to_validate_still_hides_the_candidate_once() {
    let mut is = stream(B, B, json!(null));
    let t = target(Action::Begin, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let a = with_odh(ask(&t, "", &checks), &s);
    let d = decide(&a, &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::ALREADY_PROMOTED);
    assert_eq!(patch["spec"]["tags"].as_array().unwrap().len(), 1);
    is.spec.tags[0].annotations =
        Some([(key::TAG_OUTDATED.to_string(), "true".to_string())].into());
    assert!(matches!(
        decide(&a, &is, &nothing(), now()),
        Decision::Final(o) if o.reason == reason::ALREADY_PROMOTED
    ));
}

#[test]
fn a_promotion_asks_for_the_image_then_describes_it_on_the_served_tag() {
    let is = stream(B, A, json!({key::BUILD_COMMIT: "old", key::SOFTWARE: "[]"}));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let s = odh(r#"[{"name":"Python","version":"v3.12"}]"#);
    let a = with_odh(ask(&t, "Succeeded", &checks), &s);
    assert_eq!(
        decide(&a, &is, &unread(), now()),
        Decision::NeedImage {
            digest: B.into(),
            reference: format!("quay.io/org/nb@{B}")
        }
    );
    let image = labelled(&[
        ("vcs-ref", "0a1b2c3"),
        (key::SOFTWARE, r#"[{"name":"Python","version":"v3.11"}]"#),
        (
            key::PYTHON_DEPENDENCIES,
            r#"[{"name":"JupyterLab","version":"4.5"}]"#,
        ),
    ]);
    let d = decide(&a, &is, &image, now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::PROMOTED);
    let served = &tag(patch, "latest")["annotations"];
    assert_eq!(served[key::BUILD_COMMIT], "0a1b2c3");
    assert_eq!(
        served[key::SOFTWARE],
        r#"[{"name":"Python","version":"v3.12"}]"#,
        "the param wins over the label"
    );
    assert_eq!(
        served[key::PYTHON_DEPENDENCIES],
        r#"[{"name":"JupyterLab","version":"4.5"}]"#
    );
    assert_eq!(
        tag(patch, "latest-previous")["annotations"][key::TAG_OUTDATED],
        "true"
    );
    assert_eq!(
        tag(patch, "candidate")["annotations"][key::TAG_OUTDATED],
        "true"
    );
    // Every tag the gate writes carries a build commit after a move, none a real one.
    assert_eq!(
        tag(patch, "latest-previous")["annotations"][key::BUILD_COMMIT],
        PREVIOUS_BUILD
    );
    assert_eq!(
        tag(patch, "candidate")["annotations"][key::BUILD_COMMIT],
        CANDIDATE_BUILD
    );
}

#[test]
fn the_candidate_gets_its_build_mark_only_when_the_served_tag_moves_and_only_once() {
    // Before a move, a workbench without the commit annotation is on the served build and
    // matches the unmarked candidate: begin writes no mark.
    let is = stream(B, A, json!(null));
    let t = target(Action::Begin, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let d = decide(&with_odh(ask(&t, "", &checks), &s), &is, &nothing(), now());
    let candidate = &tag(written(&d).0, "candidate")["annotations"];
    assert_eq!(candidate.get(key::BUILD_COMMIT), None, "{candidate}");
    // A candidate already hidden and marked is not written again by a promotion.
    let mut is = stream(B, A, json!(null));
    is.spec.tags[0].annotations = Some(
        [
            (key::TAG_OUTDATED.to_string(), "true".to_string()),
            (key::BUILD_COMMIT.to_string(), CANDIDATE_BUILD.to_string()),
        ]
        .into(),
    );
    let t = target(Action::Promote, Some(B));
    let a = with_odh(ask(&t, "Succeeded", &checks), &s);
    let d = decide(&a, &is, &labelled(&[("vcs-ref", "0a1b2c3")]), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::PROMOTED);
    let names: Vec<&Value> = patch["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(names, ["latest", "latest-previous"], "{patch}");
}

#[test]
fn an_image_that_does_not_describe_itself_loses_the_old_lists_and_gets_its_digest_as_commit() {
    let is = stream(
        B,
        A,
        json!({key::SOFTWARE: "[]", key::PYTHON_DEPENDENCIES: "[]"}),
    );
    let t = target(Action::Promote, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let a = with_odh(ask(&t, "Succeeded", &checks), &s);
    let d = decide(&a, &is, &labelled(&[(key::SOFTWARE, "Python 3.12")]), now());
    let (patch, outcome) = written(&d);
    let served = &tag(patch, "latest")["annotations"];
    assert_eq!(served[key::SOFTWARE], Value::Null);
    assert_eq!(served[key::PYTHON_DEPENDENCIES], Value::Null);
    assert_eq!(served[key::BUILD_COMMIT], "sha256:bbbbbbbbbbbb");
    assert!(
        outcome
            .message
            .contains("opendatahub.io/notebook-software removed: the image label")
            && outcome
                .message
                .contains("opendatahub.io/notebook-python-dependencies removed: no param"),
        "{}",
        outcome.message
    );
}

#[test]
fn a_failure_notes_the_description_and_the_next_success_removes_it() {
    let mut is = stream(B, A, json!(null));
    is.metadata.annotations =
        Some([(key::IMAGE_DESC.to_string(), "Jupyter minimal.".to_string())].into());
    let t = target(Action::Reject, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let d = decide(
        &with_odh(ask(&t, "Failed", &checks), &s),
        &is,
        &nothing(),
        now(),
    );
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.phase, phase::UPDATE_FAILED);
    let noted = format!("Jupyter minimal. {UPDATE_FAILED_NOTE}");
    assert_eq!(
        patch["metadata"]["annotations"][key::IMAGE_DESC],
        noted.as_str()
    );
    assert!(
        tag(patch, "latest").get("from").is_none(),
        "the served image is unchanged"
    );

    is.metadata.annotations = Some([(key::IMAGE_DESC.to_string(), noted)].into());
    let t = target(Action::Promote, Some(B));
    let a = with_odh(ask(&t, "Succeeded", &checks), &s);
    let d = decide(&a, &is, &labelled(&[]), now());
    let (patch, _) = written(&d);
    assert_eq!(
        patch["metadata"]["annotations"][key::IMAGE_DESC],
        "Jupyter minimal."
    );
}

#[test]
fn the_description_rule_is_idempotent_and_leaves_unrelated_outcomes_alone() {
    let failed = Outcome {
        phase: phase::UPDATE_FAILED.into(),
        ..Outcome::failed(reason::VALIDATION_FAILED, "x")
    };
    let once = description_after(Some("d"), &failed).unwrap();
    assert_eq!(description_after(once.as_deref(), &failed).unwrap(), once);
    assert_eq!(
        description_after(None, &failed).unwrap().as_deref(),
        Some(UPDATE_FAILED_NOTE)
    );
    let mut ok = Outcome::failed(reason::PROMOTED, "");
    ok.succeeded = true;
    assert_eq!(description_after(Some(UPDATE_FAILED_NOTE), &ok), Some(None));
    assert_eq!(description_after(Some("d"), &ok), Some(Some("d".into())));
    let moved = Outcome::failed(reason::CANDIDATE_MOVED, "");
    assert_eq!(description_after(once.as_deref(), &moved), None);
}

#[test]
fn a_served_tag_without_an_image_is_never_created_by_a_mark() {
    let mut is = stream(B, A, json!(null));
    is.spec.tags.retain(|t| t.name != "latest");
    is.status
        .as_mut()
        .unwrap()
        .tags
        .retain(|t| t.tag != "latest");
    let t = target(Action::Begin, Some(B));
    let (checks, s) = (no_checks(), odh(""));
    let d = decide(&with_odh(ask(&t, "", &checks), &s), &is, &nothing(), now());
    let (patch, _) = written(&d);
    let names: Vec<&str> = patch["spec"]["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["candidate"], "only the candidate mark");
}

#[test]
fn the_docker_image_pin_names_the_upstream_repository_by_digest() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let mut a = ask(&t, "Succeeded", &checks);
    a.promote_as = PromoteAs::DockerImage;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        tag(patch, "latest")["from"],
        json!({"kind": "DockerImage", "name": format!("quay.io/org/nb@{B}")})
    );
    assert_eq!(
        tag(patch, "latest-previous")["from"]["kind"],
        "ImageStreamImage",
        "the previous tag stays pinned in the stream"
    );
}

#[test]
fn the_docker_image_pin_is_imported_as_the_candidate_was() {
    // Issue 33, on the real server: the served tag's own importPolicy imported the pin, so a
    // candidate from an insecure registry left the served tag on its old image, and a manifest
    // list the candidate kept whole was imported as one platform's manifest.
    let mut is = stream(B, A, json!(null));
    is.spec.tags[0].import_policy = Some(crate::api::imagestream::TagImportPolicy {
        insecure: true,
        scheduled: true,
        import_mode: Some("PreserveOriginal".into()),
    });
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let mut a = ask(&t, "Succeeded", &checks);
    a.promote_as = PromoteAs::DockerImage;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        tag(patch, "latest")["importPolicy"],
        json!({"insecure": true, "importMode": "PreserveOriginal"}),
        "not scheduled: the served tag moves only with the gate"
    );
    // A secure candidate makes the served tag secure again; the stream form needs no import.
    is.spec.tags[0].import_policy = None;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        tag(patch, "latest")["importPolicy"],
        json!({"insecure": false})
    );
    a.promote_as = PromoteAs::ImageStreamImage;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(tag(patch, "latest").get("importPolicy"), None);
}

#[test]
fn on_the_real_stream_whose_served_tag_could_not_import_a_promotion_pins_it_again_with_insecure() {
    // The real server's stream after the failed import (tests/fixtures): its candidate reads
    // an insecure registry. A promotion of that digest said AlreadyPromoted (the pin named it)
    // though users were still served the old one; now it pins it again with what the served
    // tag's import needs, and asks for the import.
    let path = format!(
        "{}/tests/fixtures/real-openshift_nb_after-promote-as-dockerimage-insecure.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let is: ImageStream = serde_json::from_value(v["object"].clone()).unwrap();
    let digest = is.current_digest("candidate").unwrap().to_string();
    assert_ne!(
        is.current_digest("latest"),
        Some(digest.as_str()),
        "still the old image"
    );
    let t = target(Action::Promote, Some(&digest));
    let checks = no_checks();
    let mut a = ask(&t, "Succeeded", &checks);
    a.promote_as = PromoteAs::DockerImage;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    let served = tag(patch, "latest");
    assert_eq!(served["from"]["name"], format!("127.0.0.1:5000/x@{digest}"));
    assert_eq!(
        served["importPolicy"],
        json!({"insecure": true, "importMode": "Legacy"})
    );
    assert_eq!(served["referencePolicy"], json!({"type": "Local"}));
    assert_eq!(served["generation"], 0, "imported again");
    let message = served["annotations"][annotation::MESSAGE].as_str().unwrap();
    assert!(
        message.contains("pinned and imported again") && message.contains("HTTP response to HTTPS"),
        "{message}"
    );
}

#[test]
fn the_served_tag_is_resolved_as_the_candidate_was_validated() {
    // Issue 33: the examples' served tag kept `Source` while a candidate said `Local`: the
    // pipeline validated the integrated registry's pull spec, users pulled upstream.
    let mut is = stream(B, A, json!(null));
    is.spec.tags[0].reference_policy = Some(crate::api::imagestream::TagReferencePolicy {
        type_: "Local".into(),
    });
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    for form in [PromoteAs::ImageStreamImage, PromoteAs::DockerImage] {
        let mut a = ask(&t, "Succeeded", &checks);
        a.promote_as = form;
        let d = decide(&a, &is, &nothing(), now());
        let (patch, _) = written(&d);
        assert_eq!(
            tag(patch, "latest")["referencePolicy"],
            json!({"type": "Local"}),
            "{form:?}"
        );
    }
    // A rollback too.
    let t = target(Action::Rollback, Some(A));
    let mut both = stream(
        B,
        B,
        json!({annotation::PROMOTED_DIGESTS: format!("{A},{B}")}),
    );
    both.spec.tags[0].reference_policy = is.spec.tags[0].reference_policy.clone();
    let d = decide(&ask(&t, "", &checks), &both, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        tag(patch, "latest")["referencePolicy"],
        json!({"type": "Local"})
    );
    // A candidate that names none leaves the served tag's own.
    let plain = stream(B, A, json!(null));
    let d = decide(
        &ask(&target(Action::Promote, Some(B)), "Succeeded", &checks),
        &plain,
        &nothing(),
        now(),
    );
    assert_eq!(tag(written(&d).0, "latest").get("referencePolicy"), None);
}

#[test]
fn a_first_promotion_pins_in_the_stream_whatever_the_form() {
    let mut is = stream(B, A, json!(null));
    is.spec.tags.retain(|t| t.name != "latest");
    is.status
        .as_mut()
        .unwrap()
        .tags
        .retain(|t| t.tag != "latest");
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let mut a = ask(&t, "Succeeded", &checks);
    a.promote_as = PromoteAs::DockerImage;
    let d = decide(&a, &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(tag(patch, "latest")["from"]["kind"], "ImageStreamImage");
}

#[test]
fn a_docker_image_pin_waiting_for_its_import_has_landed() {
    let mut is = stream(
        B,
        A,
        json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "run-1"}),
    );
    is.spec.tags[1].from = Some(k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("DockerImage".into()),
        name: Some(format!("quay.io/org/nb@{B}")),
        ..Default::default()
    });
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    assert!(
        matches!(&d, Decision::Final(o) if o.reason == reason::PROMOTED),
        "{d:?}"
    );
}

#[test]
fn a_rollback_describes_the_build_it_returns_to() {
    let is = stream(
        B,
        B,
        json!({annotation::PREVIOUS_DIGEST: A, key::BUILD_COMMIT: "commit-b"}),
    );
    let t = target(Action::Rollback, None);
    let (checks, s) = (no_checks(), odh(""));
    let a = with_odh(ask(&t, "", &checks), &s);
    assert!(matches!(
        decide(&a, &is, &unread(), now()),
        Decision::NeedImage { digest, .. } if digest == A
    ));
    let image = with_image(&ImageFacts {
        reference: format!("quay.io/org/nb@{A}"),
        labels: [("vcs-ref".to_string(), "commit-a".to_string())].into(),
        ..ImageFacts::default()
    });
    let d = decide(&a, &is, &image, now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::ROLLED_BACK);
    assert_eq!(
        tag(patch, "latest")["annotations"][key::BUILD_COMMIT],
        "commit-a"
    );
    // Facts about another digest are not used to describe this one.
    let wrong = labelled(&[("vcs-ref", "commit-b")]);
    assert!(matches!(
        decide(&a, &is, &wrong, now()),
        Decision::NeedImage { .. }
    ));
}
