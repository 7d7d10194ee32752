//! The drift rule over adopted streams: in shape, each kind of drift, and streams adopt never
//! shaped.

use serde_json::{Value, json};

use super::{Drift, drift};
use crate::adopt::Options;
use crate::adopt::plan::{Plan, plan};
use crate::api::ImageStream;

fn adopted() -> Value {
    let path = format!(
        "{}/tests/fixtures/ci-note_ansible-runner_imagestream_import-failed.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let stream: Value = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    match plan(&stream, None, &Options::default()).unwrap() {
        Plan::Write(w, _) => w[0].after.clone(),
        other => panic!("{other:?}"),
    }
}

fn kinds(stream: &Value) -> Vec<Drift> {
    let is: ImageStream = serde_json::from_value(stream.clone()).unwrap();
    drift(&is).into_iter().map(|f| f.drift).collect()
}

fn edit_tag(stream: &mut Value, name: &str, f: impl Fn(&mut Value)) {
    for t in stream["spec"]["tags"].as_array_mut().unwrap() {
        if t["name"] == name {
            f(t);
        }
    }
}

#[test]
fn an_adopted_stream_has_no_drift() {
    assert_eq!(kinds(&adopted()), []);
}

#[test]
fn a_wholesale_edit_that_drops_the_candidate_is_candidate_missing() {
    let mut s = adopted();
    // What a client that writes back the tag list it knew does.
    s["spec"]["tags"] = json!([{"name": "latest", "from": {"kind": "ImageStreamImage",
        "name": "ansible-runner@sha256:bd09ef403f2f90f2c6bd133d7533e939058903f69223c5f12557a49e3aed14bb"}}]);
    assert_eq!(kinds(&s), [Drift::CandidateMissing]);
    let is: ImageStream = serde_json::from_value(s).unwrap();
    assert_eq!(
        super::remedies(&is, &drift(&is)),
        ["restore it with: imagegate adopt openshift/ansible-runner"]
    );
    assert!(
        drift(&is)[0]
            .message
            .contains("\"candidate\" is gone from spec.tags")
    );
}

#[test]
fn each_kind_of_drift_is_found() {
    let mut s = adopted();
    edit_tag(&mut s, "candidate", |t| {
        t["importPolicy"]["scheduled"] = json!(false);
        t["annotations"] = Value::Null;
    });
    edit_tag(&mut s, "latest", |t| {
        t["from"] =
            json!({"kind": "DockerImage", "name": "docker.io/ansible/ansible-runner:latest"});
    });
    assert_eq!(
        kinds(&s),
        [
            Drift::CandidateNotScheduled,
            Drift::CandidateOffered,
            Drift::ServedNotPinned
        ]
    );
    let mut gone = adopted();
    gone["spec"]["tags"] = json!([]);
    assert_eq!(
        kinds(&gone),
        [Drift::CandidateMissing, Drift::ServedMissing]
    );
    let mut unrecorded = adopted();
    unrecorded["metadata"]["annotations"] = json!({});
    assert_eq!(kinds(&unrecorded), [Drift::RecordMissing]);
}

#[test]
fn a_stream_adopt_never_shaped_has_no_drift() {
    let mut s = adopted();
    s["metadata"]["labels"] = json!({});
    s["spec"]["tags"] = json!([]);
    assert_eq!(kinds(&s), []);
}

#[test]
fn drift_labels_and_reasons_are_distinct() {
    let labels: std::collections::BTreeSet<_> = Drift::ALL.iter().map(|d| d.as_str()).collect();
    let reasons: std::collections::BTreeSet<_> = Drift::ALL.iter().map(|d| d.reason()).collect();
    assert_eq!(labels.len(), Drift::ALL.len());
    assert_eq!(reasons.len(), Drift::ALL.len());
}

/// A notebook stream gated by hand: a candidate tag added, no adopt, an ImagePromotion.
fn hand_made(candidate_annotations: Value) -> ImageStream {
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "my-nb", "namespace": "ds",
            "labels": {"opendatahub.io/notebook-image": "true"}},
        "spec": {"tags": [
            {"name": "latest-candidate", "annotations": candidate_annotations,
             "from": {"kind": "DockerImage", "name": "quay.io/me/nb:latest"},
             "importPolicy": {"scheduled": true}},
            {"name": "latest", "from": {"kind": "ImageStreamImage", "name": "my-nb@sha256:aa"}}
        ]}
    }))
    .unwrap()
}

fn promotion(name: &str, spec: Value) -> crate::controller::crd::ImagePromotion {
    serde_json::from_value(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": name, "namespace": "ds"}, "spec": spec
    }))
    .unwrap()
}

#[test]
fn a_hand_made_candidate_the_dashboard_would_offer_is_found_before_it_imports() {
    use super::{all_drift, governed_drift};
    let is = hand_made(Value::Null);
    let governing = [promotion(
        "nb",
        json!({"imageStream": "my-nb", "candidateTag": "latest-candidate"}),
    )];
    assert_eq!(
        drift(&is),
        [],
        "adopt's own rule does not see a stream it never shaped"
    );
    let found = governed_drift(&is, &governing);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].drift, Drift::CandidateOffered);
    assert!(
        found[0].message.contains("\"latest-candidate\""),
        "{}",
        found[0].message
    );
    assert!(
        found[0].message.contains("ImagePromotion nb"),
        "{}",
        found[0].message
    );
    // Adopt leaves a stream gated by hand alone: the repair is a patch of the one tag.
    assert_eq!(
        super::remedies(&is, &found),
        [format!(
            "repair it with: kubectl patch imagestream my-nb -n ds -p '{}'",
            json!({"spec": {"tags": [{"name": "latest-candidate", "annotations": {"opendatahub.io/image-tag-outdated": "true"}}]}})
        )]
    );
    // Two ImagePromotions that govern it with the same candidate report it once.
    let both = [
        governing[0].clone(),
        promotion("all", json!({"candidateTag": "latest-candidate"})),
    ];
    assert_eq!(all_drift(&is, &both).len(), 1);
    // Hidden: nothing to report.
    let hidden = hand_made(json!({"opendatahub.io/image-tag-outdated": "true"}));
    assert_eq!(governed_drift(&hidden, &governing), []);
}

#[test]
fn only_a_governed_candidate_of_a_listed_stream_is_reported() {
    use super::governed_drift;
    let is = hand_made(Value::Null);
    // Another stream's ImagePromotion, another namespace's, another candidate tag.
    assert_eq!(
        governed_drift(&is, &[promotion("x", json!({"imageStream": "other"}))]),
        []
    );
    let mut elsewhere = promotion("x", json!({"candidateTag": "latest-candidate"}));
    elsewhere.metadata.namespace = Some("other".into());
    assert_eq!(governed_drift(&is, &[elsewhere]), []);
    assert_eq!(
        governed_drift(&is, &[promotion("x", json!({}))]),
        [],
        "the default candidate tag is not in this stream"
    );
    // Not listed by the dashboard: nothing is offered.
    let mut unlisted = is.clone();
    unlisted.metadata.labels = None;
    let governing = [promotion("nb", json!({"candidateTag": "latest-candidate"}))];
    assert_eq!(governed_drift(&unlisted, &governing), []);
    assert_eq!(governed_drift(&is, &governing).len(), 1);
}

/// A governed candidate that imports from a registry but not on a schedule gets a new upstream
/// image only from a push notification or an import by hand: one notification lost (the
/// receiver answers before it imports) and the build is never validated. Reported, listed by
/// the dashboard or not, with the patch that schedules it; a candidate pinned by digest cannot
/// move, so it needs no schedule.
#[test]
fn a_governed_candidate_not_imported_on_a_schedule_is_reported() {
    use super::governed_drift;
    let governing = [promotion("nb", json!({"candidateTag": "latest-candidate"}))];
    let mut unscheduled = hand_made(json!({"opendatahub.io/image-tag-outdated": "true"}));
    unscheduled.metadata.labels = None;
    unscheduled.spec.tags[0].import_policy = None;
    let found = governed_drift(&unscheduled, &governing);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].drift, Drift::CandidateNotScheduled);
    assert!(
        found[0].message.contains("quay.io/me/nb:latest"),
        "{}",
        found[0].message
    );
    assert_eq!(
        super::remedies(&unscheduled, &found),
        [format!(
            "repair it with: kubectl patch imagestream my-nb -n ds -p '{}'",
            json!({"spec": {"tags": [{"name": "latest-candidate", "importPolicy": {"scheduled": true}}]}})
        )]
    );
    // Scheduled, or pinned by digest, or not governed: nothing.
    let mut scheduled = unscheduled.clone();
    scheduled.spec.tags[0].import_policy =
        serde_json::from_value(json!({"scheduled": true})).unwrap();
    assert_eq!(governed_drift(&scheduled, &governing), []);
    let mut pinned = unscheduled.clone();
    pinned.spec.tags[0].from =
        serde_json::from_value(json!({"kind": "DockerImage", "name": "quay.io/me/nb@sha256:aa"}))
            .unwrap();
    assert_eq!(governed_drift(&pinned, &governing), []);
    assert_eq!(
        governed_drift(
            &unscheduled,
            &[promotion("x", json!({"imageStream": "other"}))]
        ),
        []
    );
}
