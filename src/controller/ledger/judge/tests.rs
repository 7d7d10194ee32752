//! Each way a candidate can stand, read from the stream.

use serde_json::{Value, json};

use super::*;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn tags() -> Tags {
    Tags {
        candidate: "candidate".into(),
        served: "latest".into(),
    }
}

/// `nb` whose candidate points at `candidate` (imported at 10:00), served `served`, with the
/// served tag's `annotations` and the candidate's `conditions`.
fn stream(
    candidate: Option<&str>,
    served: &str,
    annotations: Value,
    conditions: Value,
) -> ImageStream {
    let ev = |d: &str| json!({"created": "2026-12-01T10:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": 2});
    let items: Vec<Value> = candidate.into_iter().map(ev).collect();
    serde_json::from_value(json!({
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [
            {"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}},
            {"name": "latest", "annotations": annotations, "from": {"kind": "ImageStreamImage", "name": format!("nb@{served}")}}
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": if items.is_empty() { Value::Null } else { json!(items) }, "conditions": conditions},
            {"tag": "latest", "items": [ev(served)]}
        ]}
    }))
    .unwrap()
}

#[test]
fn a_candidate_nothing_began_validating_waits_since_its_import() {
    let j = judge(&stream(Some(B), A, json!({}), json!([])), &tags());
    assert_eq!(
        j.standing,
        Standing::Waiting {
            digest: B.into(),
            since: Some("2026-12-01T10:00:00Z".parse().unwrap())
        }
    );
    // Marked for an older candidate: this one still waits.
    let older = json!({annotation::PHASE: "Validating", annotation::CANDIDATE_DIGEST: A});
    assert!(matches!(
        judge(&stream(Some(B), A, older, json!([])), &tags()).standing,
        Standing::Waiting { .. }
    ));
}

#[test]
fn a_candidate_being_validated_names_its_begin_run() {
    let marked = json!({annotation::PHASE: "Validating", annotation::CANDIDATE_DIGEST: B, annotation::CUSTOMRUN: "imagegate-1-begin"});
    assert_eq!(
        judge(&stream(Some(B), A, marked, json!([])), &tags()).standing,
        Standing::Validating {
            digest: B.into(),
            run: "imagegate-1-begin".into()
        }
    );
}

#[test]
fn a_candidate_with_its_verdict_is_settled() {
    let cases = [
        // Served.
        stream(
            Some(B),
            B,
            json!({annotation::PHASE: "Promoted"}),
            json!([]),
        ),
        // Failed, the served tag kept.
        stream(
            Some(B),
            A,
            json!({annotation::PHASE: "UpdateFailed", annotation::CANDIDATE_DIGEST: B}),
            json!([]),
        ),
        // Rolled back from: refused at promote.
        stream(
            Some(B),
            A,
            json!({annotation::PHASE: "RolledBack", annotation::ROLLED_BACK_DIGESTS: format!("{A}, {B}")}),
            json!([]),
        ),
        // No candidate yet.
        stream(None, A, json!({}), json!([])),
    ];
    for is in &cases {
        assert_eq!(judge(is, &tags()).standing, Standing::Settled, "{is:?}");
    }
}

#[test]
fn a_failing_import_and_a_failed_update_are_read() {
    let failing = json!([{"type": "ImportSuccess", "status": "False", "reason": "Unauthorized", "message": "unauthorized: access to quay.io/org/nb denied", "generation": 3}]);
    let failed = json!({annotation::PHASE: "UpdateFailed", annotation::CANDIDATE_DIGEST: B});
    let j = judge(&stream(Some(B), A, failed, failing), &tags());
    assert_eq!(
        j.import_failing.as_deref(),
        Some("unauthorized: access to quay.io/org/nb denied")
    );
    assert!(j.update_failed);
    let j = judge(&stream(Some(B), B, json!({}), json!([])), &tags());
    assert_eq!((j.import_failing, j.update_failed), (None, false));
}
