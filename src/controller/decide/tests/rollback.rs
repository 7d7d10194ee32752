//! The way back in the decisions: the previous tag a promotion keeps, the digests a rollback
//! records, and the promotion of a rolled-back digest.

use super::*;

#[test]
fn a_promotion_keeps_the_digest_it_replaces_in_the_hidden_previous_tag() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        patch["spec"]["tags"][1],
        json!({
            "name": "latest-previous",
            "annotations": {"hidden": "true", "imagegate.dev/previous-of": "latest", "imagegate.dev/served-digest": A},
            "from": {"kind": "ImageStreamImage", "name": format!("nb@{A}"), "namespace": "ds"}
        })
    );
}

#[test]
fn the_previous_tag_is_hidden_from_open_data_hub_where_the_candidate_tag_is() {
    let mut is = stream(B, A, json!(null));
    is.spec.tags[0].annotations = Some(
        [(annotation::ODH_OUTDATED.to_string(), "true".to_string())]
            .into_iter()
            .collect(),
    );
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let d = decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now());
    let (patch, _) = written(&d);
    assert_eq!(
        patch["spec"]["tags"][1]["annotations"],
        json!({
            "hidden": "true",
            "imagegate.dev/previous-of": "latest",
            "imagegate.dev/served-digest": A,
            "opendatahub.io/image-tag-outdated": "true"
        })
    );
}

#[test]
fn a_rolled_back_digest_is_refused_unless_the_run_allows_it() {
    let is = stream(
        B,
        A,
        json!({annotation::ROLLED_BACK_DIGESTS: format!("{C},{B}")}),
    );
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    match decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()) {
        Decision::Final(o) => {
            assert_eq!((o.reason, o.succeeded), (reason::DIGEST_ROLLED_BACK, false));
            assert!(o.message.contains("allow-rolled-back"), "{}", o.message);
        }
        other => panic!("{other:?}"),
    }
    let mut allowed = ask(&t, "Succeeded", &checks);
    allowed.allow_rolled_back = true;
    let d = decide(&allowed, &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::PROMOTED);
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::ROLLED_BACK_DIGESTS],
        C,
        "promoted on purpose, it is no longer refused"
    );
}

#[test]
fn a_rollback_records_the_digest_it_leaves() {
    let is = stream(
        B,
        B,
        json!({annotation::PREVIOUS_DIGEST: A, annotation::ROLLED_BACK_DIGESTS: C}),
    );
    let t = target(Action::Rollback, None);
    let checks = no_checks();
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::ROLLED_BACK);
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::ROLLED_BACK_DIGESTS],
        format!("{C},{B}")
    );
}

#[test]
fn a_rollback_after_the_history_was_pruned_returns_to_the_previous_tag() {
    let mut is = stream(B, B, json!(null));
    let status = is.status.as_mut().unwrap();
    // Pruned: each tag keeps only its current image; the previous tag keeps A.
    for tag in &mut status.tags {
        if let Some(items) = tag.items.as_mut() {
            items.truncate(1);
        }
    }
    let mut kept = status.tags[0].clone();
    kept.tag = "latest-previous".into();
    kept.items.as_mut().unwrap()[0].image = A.into();
    status.tags.push(kept);
    let mut previous = is.spec.tags[1].clone();
    previous.name = "latest-previous".into();
    previous.annotations = Some(
        [(annotation::PREVIOUS_OF.to_string(), "latest".to_string())]
            .into_iter()
            .collect(),
    );
    is.spec.tags.push(previous.clone());
    let t = target(Action::Rollback, None);
    let checks = no_checks();
    let d = decide(&ask(&t, "", &checks), &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(
        (outcome.reason, outcome.promoted_digest.as_str()),
        (reason::ROLLED_BACK, A)
    );
    assert_eq!(patch["spec"]["tags"][0]["from"]["name"], format!("nb@{A}"));
    // A previous tag the gate did not write for this served tag is no way back.
    let mut foreign = is.clone();
    foreign.spec.tags[2].annotations = None;
    match decide(&ask(&t, "", &checks), &foreign, &nothing(), now()) {
        Decision::Final(o) => assert_eq!(o.reason, reason::INVALID_PARAMS),
        other => panic!("{other:?}"),
    }
    // Without the previous tag, nothing is left to return to.
    let mut bare = is.clone();
    bare.status.as_mut().unwrap().tags.pop();
    match decide(&ask(&t, "", &checks), &bare, &nothing(), now()) {
        Decision::Final(o) => assert_eq!(o.reason, reason::INVALID_PARAMS),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_rollback_to_a_rolled_back_digest_is_refused_unless_the_policy_allows_it() {
    // B was promoted, then rolled back to A: B is listed as rolled back.
    let served = json!({
        annotation::PROMOTED_DIGESTS: format!("{A},{B}"),
        annotation::PREVIOUS_DIGEST: B,
        annotation::ROLLED_BACK_DIGESTS: B,
    });
    let is = stream(B, A, served);
    let checks = no_checks();
    // Named, or the default target (the digest the last rollback left): refused.
    for t in [
        target(Action::Rollback, Some(B)),
        target(Action::Rollback, None),
    ] {
        match decide(&ask(&t, "", &checks), &is, &nothing(), now()) {
            Decision::Final(o) => {
                assert_eq!(o.reason, reason::DIGEST_ROLLED_BACK);
                assert!(o.message.contains("allowRolledBack"), "{}", o.message);
            }
            other => panic!("{other:?}"),
        }
    }
    let t = target(Action::Rollback, Some(B));
    let mut allowed = ask(&t, "", &checks);
    allowed.allow_rolled_back = true;
    let d = decide(&allowed, &is, &nothing(), now());
    let (patch, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::ROLLED_BACK);
    assert_eq!(
        patch["spec"]["tags"][0]["annotations"][annotation::ROLLED_BACK_DIGESTS],
        A,
        "B is served again on purpose; A is the digest left"
    );
}
