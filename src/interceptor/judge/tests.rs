//! Each thing a forged or stale event can claim, refused; the genuine one passed with the
//! stream's own values.

use serde_json::{Value, json};

use super::*;

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

fn key() -> RunKey {
    RunKey::from_bytes(&[9; 32]).unwrap()
}

/// `nb` of `ds`: its candidate at `candidate` (imported at 10:00), served `A`.
fn stream(candidate: &str) -> ImageStream {
    let ev = |d: &str| json!({"created": "2026-12-01T10:00:00Z", "dockerImageReference": format!("quay.io/org/nb@{d}"), "image": d, "generation": 2});
    serde_json::from_value(json!({
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [{"name": "candidate"}, {"name": "latest"}]},
        "status": {"dockerImageRepository": "", "tags": [
            {"tag": "candidate", "items": [ev(candidate)]},
            {"tag": "latest", "items": [ev(A)]}
        ]}
    }))
    .unwrap()
}

fn policy(name: &str, spec: Value) -> ImagePromotion {
    serde_json::from_value(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": name, "namespace": "ds"}, "spec": spec
    }))
    .unwrap()
}

fn claimed(tag: &str, digest: &str) -> Claimed {
    Claimed {
        id: "forged-or-not".into(),
        namespace: "ds".into(),
        imagestream: "nb".into(),
        tag: tag.into(),
        digest: digest.into(),
    }
}

#[test]
fn the_current_candidate_passes_with_what_the_api_says_and_a_keyed_run_id() {
    let p = candidate(
        &claimed("candidate", B),
        Some(&stream(B)),
        &[policy("notebooks", json!({}))],
        &key(),
    )
    .unwrap();
    let want_id = key().run_id(&Candidate {
        namespace: "ds",
        imagestream: "nb",
        tag: "candidate",
        digest: B,
        since: "2026-12-01T10:00:00Z",
    });
    assert_eq!(p.run_id, want_id);
    assert_eq!(
        Value::Object(p.extensions),
        json!({"imagegate": {"namespace": "ds", "imageStream": "nb", "tag": "candidate",
            "digest": B, "runId": want_id, "eventId": "forged-or-not"}})
    );
}

#[test]
fn the_run_id_does_not_depend_on_the_event_id() {
    let mut other = claimed("candidate", B);
    other.id = "another-id".into();
    let p = |c: &Claimed| {
        candidate(c, Some(&stream(B)), &[policy("p", json!({}))], &key())
            .unwrap()
            .run_id
    };
    assert_eq!(p(&claimed("candidate", B)), p(&other));
}

#[test]
fn a_digest_the_candidate_tag_does_not_point_at_is_refused() {
    let r = candidate(
        &claimed("candidate", A),
        Some(&stream(B)),
        &[policy("p", json!({}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::NOT_CURRENT);
    assert!(r.message.contains(B), "{}", r.message);
}

#[test]
fn another_tag_than_the_policys_candidate_tag_is_refused() {
    // The served tag of the stream, whose digest the forger reads off the stream.
    let r = candidate(
        &claimed("latest", A),
        Some(&stream(B)),
        &[policy("p", json!({}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::NOT_CANDIDATE_TAG);
    // The policy names another candidate tag: `candidate` is then just a tag.
    let r = candidate(
        &claimed("candidate", B),
        Some(&stream(B)),
        &[policy("p", json!({"candidateTag": "upstream"}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::NOT_CANDIDATE_TAG);
}

#[test]
fn an_ungoverned_missing_or_conflicting_stream_is_refused() {
    let r = candidate(&claimed("candidate", B), Some(&stream(B)), &[], &key()).unwrap_err();
    assert_eq!(r.reason, reason::NOT_GOVERNED);
    let r = candidate(
        &claimed("candidate", B),
        Some(&stream(B)),
        &[policy("other", json!({"imageStream": "other"}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::NOT_GOVERNED);
    let r = candidate(
        &claimed("candidate", B),
        None,
        &[policy("p", json!({}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::NO_STREAM);
    let r = candidate(
        &claimed("candidate", B),
        Some(&stream(B)),
        &[
            policy("a", json!({})),
            policy("b", json!({"imageStream": "nb", "candidateTag": "next"})),
        ],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::POLICY_CONFLICT);
}

#[test]
fn a_policy_of_another_namespace_governs_nothing_here() {
    let mut p = policy("p", json!({}));
    p.metadata.namespace = Some("elsewhere".into());
    let r = candidate(&claimed("candidate", B), Some(&stream(B)), &[p], &key()).unwrap_err();
    assert_eq!(r.reason, reason::NOT_GOVERNED);
}

#[test]
fn a_stream_of_another_namespace_than_the_triggers_is_refused() {
    assert!(namespace(&claimed("candidate", B), Some("ds")).is_ok());
    let r = namespace(&claimed("candidate", B), Some("team-b")).unwrap_err();
    assert_eq!(r.reason, reason::OTHER_NAMESPACE);
    let r = namespace(&claimed("candidate", B), None).unwrap_err();
    assert_eq!(r.reason, reason::OTHER_NAMESPACE);
}

#[test]
fn a_candidate_the_served_tag_already_serves_is_refused() {
    // Issue 33: `imagegate adopt` adds the candidate tag on the digest already served, and the
    // real server imports it at once: that import's event would start a pipeline that can only
    // end AlreadyPromoted.
    let r = candidate(
        &claimed("candidate", A),
        Some(&stream(A)),
        &[policy("p", json!({}))],
        &key(),
    )
    .unwrap_err();
    assert_eq!(r.reason, reason::ALREADY_SERVED);
    assert!(
        r.message.contains("latest already serves") && r.message.contains(A),
        "{}",
        r.message
    );
    // Served by the tag the policy names, not by another.
    let p = candidate(
        &claimed("candidate", A),
        Some(&stream(A)),
        &[policy("p", json!({"servedTag": "stable"}))],
        &key(),
    );
    assert!(p.is_ok(), "{p:?}");
    // Two policies serving two tags: refused only when every one already serves it.
    let two = [
        policy("a", json!({"servedTag": "latest"})),
        policy("b", json!({"servedTag": "stable"})),
    ];
    assert!(candidate(&claimed("candidate", A), Some(&stream(A)), &two, &key()).is_ok());
}
