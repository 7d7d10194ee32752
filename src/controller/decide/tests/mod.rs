//! Table tests of the decision, over ImageStreams shaped like the oracle sequence.

mod odh;
mod proof;
mod rollback;
mod signature;

use super::*;
use crate::controller::crd::Checks;
use serde_json::json;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// nb: candidate history [candidate_now, A], latest history [served_now] (+ A behind it).
fn stream(candidate_now: &str, served_now: &str, served_annotations: Value) -> ImageStream {
    let ev = |d: &str, g: i64| json!({"created": "2026-01-01T00:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": g});
    serde_json::from_value(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ds", "resourceVersion": "42", "generation": 5},
        "spec": {"tags": [
            {"name": "candidate", "annotations": null, "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "generation": 5},
            {"name": "latest", "annotations": served_annotations, "from": {"kind": "ImageStreamImage", "name": format!("nb@{served_now}")}, "generation": 4}
        ]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": [ev(candidate_now, 5), ev(A, 3)]},
            {"tag": "latest", "items": [ev(served_now, 4), ev(A, 2)]}
        ]}
    }))
    .unwrap()
}

fn target(action: Action, digest: Option<&str>) -> Target {
    Target {
        action,
        imagestream: "nb".into(),
        candidate_tag: "candidate".into(),
        served_tag: "latest".into(),
        digest: digest.map(str::to_string),
    }
}

fn ask<'a>(t: &'a Target, status: &'a str, checks: &'a ParsedChecks) -> Ask<'a> {
    Ask {
        target: t,
        run_name: "run-1",
        validation_status: status,
        validation: match status {
            "Succeeded" | "Completed" => Validation::Passed,
            "" => Validation::Missing,
            _ => Validation::Failed,
        },
        checks: std::slice::from_ref(checks),
        proofs: &[],
        signatures: &[],
        previous_tag: "latest-previous",
        allow_rolled_back: false,
        promote_as: PromoteAs::ImageStreamImage,
        odh: None,
    }
}

/// What the decisions read before they decide: the candidate's image (one platform).
fn nothing() -> Fetched {
    Fetched {
        image: Some(ImageFacts::default()),
        ..Fetched::default()
    }
}

/// Nothing read yet.
fn unread() -> Fetched {
    Fetched::default()
}

fn with_image(facts: &ImageFacts) -> Fetched {
    Fetched {
        image: Some(facts.clone()),
        ..Fetched::default()
    }
}

fn no_checks() -> ParsedChecks {
    Checks::default().parse().unwrap()
}

fn now() -> chrono::DateTime<chrono::Utc> {
    "2026-01-02T00:00:00Z".parse().unwrap()
}

fn written(d: &Decision) -> (&Value, &Outcome) {
    match d {
        Decision::Write { patch, outcome } => (patch, outcome),
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn a_validated_candidate_is_promoted_with_one_conditional_write() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    let tag = &patch["spec"]["tags"][0];
    assert_eq!(tag["name"], "latest");
    assert_eq!(
        tag["from"],
        json!({"kind": "ImageStreamImage", "name": format!("nb@{B}"), "namespace": "ds"})
    );
    assert_eq!(tag["annotations"][annotation::PHASE], "Promoted");
    assert_eq!(tag["annotations"][annotation::PREVIOUS_DIGEST], A);
    assert_eq!(tag["annotations"][annotation::CUSTOMRUN], "run-1");
    assert_eq!(
        (outcome.reason, outcome.succeeded),
        (reason::PROMOTED, true)
    );
    assert_eq!(
        (
            outcome.promoted_digest.as_str(),
            outcome.previous_digest.as_str()
        ),
        (B, A)
    );
}

#[test]
fn a_digest_already_served_is_already_promoted_without_a_write() {
    let is = stream(
        B,
        B,
        json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "other-run", annotation::PREVIOUS_DIGEST: A}),
    );
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!(o.reason, reason::ALREADY_PROMOTED);
            assert_eq!(o.previous_digest, A);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn our_own_landed_promotion_finishes_as_promoted_after_a_restart() {
    let is = stream(
        C,
        B,
        json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "run-1", annotation::PREVIOUS_DIGEST: A}),
    );
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!(
                o.reason,
                reason::PROMOTED,
                "the candidate moved after our write; the run still promoted"
            );
            assert_eq!(
                (o.promoted_digest.as_str(), o.previous_digest.as_str()),
                (B, A)
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `stream`, whose candidate tag was `history` (newest first) and whose served tag serves
/// `served_now`.
fn stream_with_history(history: &[&str], served_now: &str) -> ImageStream {
    let mut is = stream(history[0], served_now, json!(null));
    let items: Vec<Value> = history
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"created": "2026-01-01T00:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": 10 - i as i64}))
        .collect();
    let mut value = serde_json::to_value(&is).unwrap();
    value["status"]["tags"][0]["items"] = json!(items);
    is = serde_json::from_value(value).unwrap();
    is
}

#[test]
fn a_validated_candidate_the_tag_moved_past_is_promoted_when_newer_than_what_is_served() {
    // The candidate moves faster than validation: B was validated while C was imported. The
    // served tag advances to B (never starved), and C gets its own run.
    let is = stream_with_history(&[C, B, A], A);
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(
        (outcome.reason, outcome.succeeded),
        (reason::PROMOTED, true)
    );
    assert!(
        outcome.message.contains(&format!("since moved on to {C}")),
        "{}",
        outcome.message
    );
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::SERVED_DIGEST],
        B
    );

    // Never backwards: with C served, a late promote of B is refused.
    let is = stream_with_history(&[C, B, A], C);
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!((o.reason, o.succeeded), (reason::CANDIDATE_MOVED, false));
            assert!(o.message.contains("not newer than"), "{}", o.message);
        }
        other => panic!("{other:?}"),
    }
    // Nor when what is served was never a candidate (no order to go by).
    let is = stream_with_history(&[C, B], A);
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => assert_eq!(o.reason, reason::CANDIDATE_MOVED),
        other => panic!("{other:?}"),
    }
}

#[test]
fn promoting_a_candidate_the_tag_moved_past_keeps_the_newer_ones_validating_mark() {
    // C's validation began (its begin marked the served tag) while B's went on; B passes.
    let mut is = stream_with_history(&[C, B, A], A);
    let mut value = serde_json::to_value(&is).unwrap();
    value["spec"]["tags"][1]["annotations"] = json!({
        annotation::PHASE: "Validating", annotation::CANDIDATE_DIGEST: C,
        annotation::CUSTOMRUN: "run-c-begin", annotation::MESSAGE: format!("validating candidate {C}")
    });
    is = serde_json::from_value(value).unwrap();
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    let ann = &patch["spec"]["tags"][0]["annotations"];
    assert_eq!(ann[annotation::SERVED_DIGEST], B, "B is served");
    for key in [
        annotation::PHASE,
        annotation::CANDIDATE_DIGEST,
        annotation::CUSTOMRUN,
        annotation::MESSAGE,
    ] {
        assert!(
            ann.get(key).is_none(),
            "{key} is left to C's validation: {ann}"
        );
    }
    assert_eq!(
        (outcome.reason, outcome.phase.as_str()),
        (reason::PROMOTED, "Validating")
    );
}

#[test]
fn a_moved_candidate_is_not_promoted() {
    let is = stream(C, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!((o.reason, o.succeeded), (reason::CANDIDATE_MOVED, false));
            assert!(o.message.contains(C), "{}", o.message);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_validation_marks_the_served_tag_and_keeps_its_image() {
    let is = stream(B, A, json!({"keep": "me"}));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Failed", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    let tag = &patch["spec"]["tags"][0];
    assert!(tag.get("from").is_none(), "the served image is not touched");
    assert_eq!(tag["annotations"][annotation::PHASE], "UpdateFailed");
    assert_eq!(tag["annotations"][annotation::CANDIDATE_DIGEST], B);
    assert!(
        tag["annotations"].get("keep").is_none(),
        "other annotations are left to the merge"
    );
    assert_eq!(
        (outcome.reason, outcome.succeeded),
        (reason::VALIDATION_FAILED, false)
    );
    assert_eq!(outcome.previous_digest, A);
    assert_eq!(outcome.promoted_digest, "");
}

#[test]
fn checks_need_the_image_then_a_failing_check_marks_update_failed() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = Checks {
        non_root_user: true,
        ..Default::default()
    }
    .parse()
    .unwrap();
    match decide(&ask(&t, "Succeeded", &checks), &is, &unread(), now()) {
        Decision::NeedImage { digest, reference } => {
            assert_eq!(digest, B);
            assert_eq!(reference, format!("quay.io/org/nb@{B}"));
        }
        other => panic!("{other:?}"),
    }
    let root = ImageFacts {
        reference: format!("quay.io/org/nb@{B}"),
        user: Some("0".into()),
        ..Default::default()
    };
    let d = decide(
        &ask(&t, "Succeeded", &checks),
        &is,
        &with_image(&root),
        now(),
    );
    let (_, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::VALIDATION_FAILED);
    assert_eq!(outcome.checks.len(), 1);
    assert!(!outcome.checks[0].passed);
    let user = ImageFacts {
        user: Some("1001".into()),
        ..root
    };
    let d = decide(
        &ask(&t, "Succeeded", &checks),
        &is,
        &with_image(&user),
        now(),
    );
    let (_, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::PROMOTED);
    assert!(outcome.checks[0].passed);
}

#[test]
fn begin_marks_validating_once() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Begin, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::PHASE],
        "Validating"
    );
    assert!(patch["spec"]["tags"][0].get("from").is_none());
    assert_eq!(
        (outcome.reason, outcome.succeeded),
        (reason::VALIDATING, true)
    );
    let marked = stream(B, A, patch["spec"]["tags"][0]["annotations"].clone());
    assert!(matches!(
        decide(&ask(&t, "", &checks), &marked, &nothing(), now()),
        Decision::Final(_)
    ));
}

#[test]
fn reject_marks_update_failed_and_fails() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Reject, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Failed", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::PHASE],
        "UpdateFailed"
    );
    assert_eq!(
        (outcome.reason, outcome.succeeded),
        (reason::REJECTED, false)
    );
}

#[test]
fn rollback_returns_to_the_previous_digest() {
    let is = stream(
        B,
        B,
        json!({annotation::PHASE: "Promoted", annotation::PREVIOUS_DIGEST: A, annotation::CUSTOMRUN: "promote-run"}),
    );
    let t = target(Action::Rollback, None);
    let checks = no_checks();
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    let tag = &patch["spec"]["tags"][0];
    assert_eq!(tag["from"]["name"], format!("nb@{A}"));
    assert_eq!(tag["annotations"][annotation::PHASE], "RolledBack");
    assert_eq!(tag["annotations"][annotation::PREVIOUS_DIGEST], B);
    assert_eq!(
        (
            outcome.reason,
            outcome.promoted_digest.as_str(),
            outcome.previous_digest.as_str()
        ),
        (reason::ROLLED_BACK, A, B)
    );
}

#[test]
fn rollback_to_a_digest_the_gate_never_served_is_refused() {
    let is = stream(
        B,
        B,
        json!({annotation::PROMOTED_DIGESTS: format!("{A},{B}")}),
    );
    let unknown = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
    let t = target(Action::Rollback, Some(unknown));
    let checks = no_checks();
    match decide(&ask(&t, "", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => assert_eq!(o.reason, reason::NOT_SERVED_BY_GATE),
        other => panic!("{other:?}"),
    }
}

#[test]
fn begin_for_a_digest_already_served_leaves_no_validating_mark() {
    let is = stream(B, B, json!({annotation::PHASE: "Promoted"}));
    let t = target(Action::Begin, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => assert_eq!((o.reason, o.succeeded), (reason::ALREADY_PROMOTED, true)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rollback_only_returns_to_a_digest_the_gate_served_not_to_the_tags_history() {
    // A is in the served tag's history (anyone with `oc tag` writes that), but the gate served
    // only C and B; B is only in the candidate's history.
    let served = json!({annotation::PROMOTED_DIGESTS: format!("{C},{B}")});
    let is = stream(B, B, served);
    let checks = no_checks();
    for digest in [
        A,
        "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
    ] {
        let t = target(Action::Rollback, Some(digest));
        match decide(&ask(&t, "", &checks), &is, &nothing(), now()) {
            Decision::Final(o) => {
                assert_eq!(o.reason, reason::NOT_SERVED_BY_GATE);
                assert_eq!(
                    o.message,
                    format!(
                        "{digest} was never served by the gate on nb:latest (it lists what it \
                         served in imagegate.dev/promoted-digests); a rollback returns only to a \
                         digest the gate promoted, or to the one served before its first \
                         promotion; latest keeps {B}"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }
    let t = target(Action::Rollback, Some(C));
    assert_eq!(
        written(&decide(&ask(&t, "", &checks), &is, &nothing(), now()))
            .1
            .reason,
        reason::ROLLED_BACK
    );
    // With no list (a tag promoted before the gate kept one), its last way back counts.
    let legacy = stream(B, B, json!({annotation::PREVIOUS_DIGEST: A}));
    let t = target(Action::Rollback, Some(A));
    assert_eq!(
        written(&decide(&ask(&t, "", &checks), &legacy, &nothing(), now()))
            .1
            .reason,
        reason::ROLLED_BACK
    );
    let t = target(Action::Rollback, Some(C));
    assert!(
        matches!(decide(&ask(&t, "", &checks), &legacy, &nothing(), now()),
        Decision::Final(o) if o.reason == reason::NOT_SERVED_BY_GATE)
    );
}

#[test]
fn a_promotion_records_what_the_gate_served_starting_with_the_digest_before_it() {
    let checks = no_checks();
    let t = target(Action::Promote, Some(B));
    let first = stream(B, A, json!(null));
    let d = decide(&ask(&t, "Succeeded", &checks), &first, &nothing(), now());
    assert_eq!(
        written(&d).0["spec"]["tags"][0]["annotations"][annotation::PROMOTED_DIGESTS],
        format!("{A},{B}")
    );
    let many: Vec<String> = (0..PROMOTED_KEPT)
        .map(|i| format!("sha256:{i:064}"))
        .collect();
    let full = stream(B, A, json!({annotation::PROMOTED_DIGESTS: many.join(",")}));
    let d = decide(&ask(&t, "Succeeded", &checks), &full, &nothing(), now());
    let list = written(&d).0["spec"]["tags"][0]["annotations"][annotation::PROMOTED_DIGESTS]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(list.split(',').count(), PROMOTED_KEPT, "bounded");
    assert!(list.ends_with(B) && !list.contains(&many[0]), "{list}");
}

#[test]
fn landed_recognises_each_actions_own_write() {
    let checks = no_checks();
    let cases = [
        (
            Action::Promote,
            Some(B),
            stream(
                B,
                B,
                json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "run-1"}),
            ),
            Some(reason::PROMOTED),
        ),
        (
            Action::Promote,
            Some(B),
            stream(
                B,
                B,
                json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "run-2"}),
            ),
            None,
        ),
        (
            Action::Promote,
            Some(B),
            stream(
                B,
                A,
                json!({annotation::PHASE: "Promoted", annotation::CUSTOMRUN: "run-1"}),
            ),
            None,
        ),
        (
            Action::Begin,
            Some(B),
            stream(
                B,
                A,
                json!({annotation::PHASE: "Validating", annotation::CUSTOMRUN: "run-1", annotation::CANDIDATE_DIGEST: B}),
            ),
            Some(reason::VALIDATING),
        ),
        (
            Action::Begin,
            Some(C),
            stream(
                B,
                A,
                json!({annotation::PHASE: "Validating", annotation::CUSTOMRUN: "run-1", annotation::CANDIDATE_DIGEST: B}),
            ),
            None,
        ),
        (
            Action::Reject,
            Some(B),
            stream(
                B,
                A,
                json!({annotation::PHASE: "UpdateFailed", annotation::CUSTOMRUN: "run-1", annotation::CANDIDATE_DIGEST: B}),
            ),
            Some(reason::REJECTED),
        ),
        (
            Action::Rollback,
            None,
            stream(
                B,
                A,
                json!({annotation::PHASE: "RolledBack", annotation::CUSTOMRUN: "run-1"}),
            ),
            Some(reason::ROLLED_BACK),
        ),
    ];
    for (action, digest, is, want) in cases {
        let t = target(action, digest);
        let got = landed(&ask(&t, "", &checks), &is).map(|o| o.reason);
        assert_eq!(got, want, "{action:?} {digest:?}");
    }
}

#[test]
fn a_promotion_without_validation_status_fails_closed_and_writes_nothing() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!(
                (o.reason, o.succeeded),
                (reason::VALIDATION_REQUIRED, false)
            );
            assert!(o.message.contains("validation-status"), "{}", o.message);
            assert!(
                o.message.contains(&format!("latest keeps {A}")),
                "{}",
                o.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn begin_reports_the_candidate_by_digest_through_the_streams_repository() {
    let t = target(Action::Begin, Some(B));
    let checks = no_checks();
    let mut is = stream(B, A, json!(null));
    // Without an integrated registry: the digest's own pull spec from the history.
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    assert_eq!(written(&d).1.image, format!("quay.io/org/nb@{B}"));
    is.status.as_mut().unwrap().docker_image_repository =
        "image-registry.openshift-image-registry.svc:5000/ds/nb".into();
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    let (_, outcome) = written(&d);
    assert_eq!(
        outcome.image,
        format!("image-registry.openshift-image-registry.svc:5000/ds/nb@{B}")
    );
    // After a restart, the landed mark reports the same image.
    let marked = stream(
        B,
        A,
        json!({annotation::PHASE: "Validating", annotation::CUSTOMRUN: "run-1", annotation::CANDIDATE_DIGEST: B}),
    );
    let again = landed(&ask(&t, "", &checks), &marked).unwrap();
    assert_eq!(again.image, format!("quay.io/org/nb@{B}"));
}

#[test]
fn an_image_index_is_refused_at_begin_and_at_promote_and_marked_update_failed() {
    let is = stream(B, A, json!(null));
    let checks = no_checks();
    let index = with_image(&ImageFacts {
        reference: format!("quay.io/org/nb@{B}"),
        platforms: vec![
            ("linux/amd64".into(), C.into()),
            ("linux/arm64/v8".into(), A.into()),
        ],
        ..ImageFacts::default()
    });
    for (action, status) in [(Action::Begin, ""), (Action::Promote, "Succeeded")] {
        let t = target(action, Some(B));
        let a = ask(&t, status, &checks);
        // The image is read first, whatever the checks.
        assert!(
            matches!(decide(&a, &is, &unread(), now()), Decision::NeedImage { ref digest, .. } if digest == B),
            "{action:?}"
        );
        let d = decide(&a, &is, &index, now());
        let (patch, outcome) = written(&d);
        assert_eq!(
            (outcome.reason, outcome.succeeded),
            (reason::UNVALIDATED_PLATFORMS, false),
            "{action:?}"
        );
        assert_eq!(
            outcome.message,
            format!(
                "{B} is an image index of 2 platforms (linux/amd64, linux/arm64/v8); a validation \
                 runs on one of them, so promoting it would serve the others unvalidated; import \
                 the candidate tag with importMode: Legacy (one platform); latest keeps {A}"
            )
        );
        let tag = &patch["spec"]["tags"][0];
        assert_eq!(tag["annotations"][annotation::PHASE], "UpdateFailed");
        assert!(tag.get("from").is_none(), "the served tag keeps its image");
    }
}
