//! The signature policy in the decision: the signatures are asked for once, with where the
//! candidate is; a met policy is reported in `checks` and the write goes on; an unmet one ends
//! the run without a write, `SignatureMissing` when nothing over the digest was found, else
//! `SignatureUntrusted`.

use super::*;
use crate::controller::params::signature::{KeySource, SignatureRequirement, TrustedKey};
use crate::controller::signature::{Finding, Signatures};

fn requirement() -> Vec<SignatureRequirement> {
    vec![SignatureRequirement {
        by: "ImagePromotion \"signed\"".into(),
        keys: vec![TrustedKey {
            name: "publisher".into(),
            source: KeySource::Inline("PEM".into()),
        }],
        keyless: None,
        pull_secrets: vec![],
    }]
}

fn found(count: usize, matched: Option<&str>) -> Fetched {
    Fetched {
        signatures: Some(Signatures {
            looked_up: format!("quay.io/org/nb@{B}"),
            found: count,
            findings: vec![Finding {
                by: "ImagePromotion \"signed\"".into(),
                matched: matched.map(str::to_string),
                unusable: vec![],
                tried: vec!["publisher".into()],
                rejected: vec![],
            }],
        }),
        ..nothing()
    }
}

#[test]
fn the_signatures_are_asked_for_at_begin_and_promote_with_where_the_candidate_is() {
    let mut is = stream(B, A, json!(null));
    let required = requirement();
    for action in [Action::Begin, Action::Promote] {
        let t = target(action, Some(B));
        let checks = no_checks();
        let a = Ask {
            signatures: &required,
            ..ask(&t, "Succeeded", &checks)
        };
        assert_eq!(
            decide(&a, &is, &nothing(), now()),
            Decision::NeedSignatures {
                digest: B.into(),
                reference: format!("quay.io/org/nb@{B}"),
                insecure: false,
            }
        );
    }
    // The candidate tag's importPolicy.insecure says how its registry is reached.
    is.spec.tags[0].import_policy =
        Some(serde_json::from_value(json!({"insecure": true})).unwrap());
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let a = Ask {
        signatures: &required,
        ..ask(&t, "Succeeded", &checks)
    };
    assert!(matches!(
        decide(&a, &is, &nothing(), now()),
        Decision::NeedSignatures { insecure: true, .. }
    ));
    // No policy: nothing is asked of the registry.
    assert!(matches!(
        decide(&ask(&t, "Succeeded", &checks), &is, &nothing(), now()),
        Decision::Write { .. }
    ));
}

#[test]
fn a_met_policy_is_reported_in_checks_and_the_promotion_goes_on() {
    let is = stream(B, A, json!(null));
    let required = requirement();
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let a = Ask {
        signatures: &required,
        ..ask(&t, "Succeeded", &checks)
    };
    let d = decide(&a, &is, &found(1, Some("key \"publisher\"")), now());
    let (_, outcome) = written(&d);
    assert_eq!(outcome.reason, reason::PROMOTED);
    assert_eq!(outcome.checks.len(), 1);
    assert_eq!(outcome.checks[0].name, "signature");
    assert!(outcome.checks[0].passed);
    assert!(
        outcome.checks[0]
            .message
            .contains("signed by key \"publisher\""),
        "{}",
        outcome.checks[0].message
    );
}

#[test]
fn an_unmet_policy_is_the_candidate_s_verdict_the_image_kept_and_the_tag_marked_failed() {
    let is = stream(B, A, json!(null));
    let required = requirement();
    for action in [Action::Begin, Action::Promote] {
        let t = target(action, Some(B));
        let checks = no_checks();
        let a = Ask {
            signatures: &required,
            ..ask(&t, "Succeeded", &checks)
        };
        for (fetched, why) in [
            (found(0, None), reason::SIGNATURE_MISSING),
            (found(2, None), reason::SIGNATURE_UNTRUSTED),
        ] {
            let d = decide(&a, &is, &fetched, now());
            let (patch, o) = written(&d);
            assert_eq!((o.succeeded, o.reason), (false, why), "{action:?}");
            assert_eq!(o.phase, phase::UPDATE_FAILED);
            assert!(
                o.message.contains(&format!("latest keeps {A}")),
                "{}",
                o.message
            );
            assert!(!o.checks[0].passed);
            let tag = &patch["spec"]["tags"][0];
            assert_eq!(tag["name"], "latest");
            assert!(tag.get("from").is_none(), "the image is kept: {tag}");
            assert_eq!(tag["annotations"][annotation::PHASE], "UpdateFailed");
            assert_eq!(tag["annotations"][annotation::CANDIDATE_DIGEST], B);
        }
    }
    // A candidate whose history records no pull spec for it cannot be looked up: refused the same.
    let mut bare = serde_json::to_value(stream(B, A, json!(null))).unwrap();
    for tag in bare["status"]["tags"].as_array_mut().unwrap() {
        for item in tag["items"].as_array_mut().unwrap() {
            item["dockerImageReference"] = json!("");
        }
    }
    let bare: ImageStream = serde_json::from_value(bare).unwrap();
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let a = Ask {
        signatures: &required,
        ..ask(&t, "Succeeded", &checks)
    };
    let d = decide(&a, &bare, &nothing(), now());
    let (_, o) = written(&d);
    assert_eq!(o.reason, reason::SIGNATURE_MISSING);
    assert!(o.message.contains("has no pull spec"), "{}", o.message);
}
