//! The proof of validation in the decision of `promote`: asked for after the status and the
//! candidate were confirmed, refused without a write when it falls short.

use super::*;
use crate::controller::proof::{Evidence, Proof};

fn proof() -> Proof {
    Proof {
        pipeline: "imagegate-promote".into(),
        tasks: vec!["validate".into()],
    }
}

fn evidence(validated: &str) -> Evidence {
    Evidence::Found {
        pipeline_run: Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": "pr", "uid": "u1"},
                "spec": {"pipelineRef": {"name": "imagegate-promote"}},
                "status": {"childReferences": [{"kind": "TaskRun", "name": "pr-validate", "pipelineTaskName": "validate"}]}
            }))
            .unwrap(),
        ),
        task_runs: vec![(
            "pr-validate".into(),
            Some(
                serde_json::from_value(json!({
                    "metadata": {"name": "pr-validate", "ownerReferences": [
                        {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": "pr", "uid": "u1", "controller": true}]},
                    "spec": {"params": [{"name": "image", "value": format!("registry/ds/nb@{validated}")}]},
                    "status": {"conditions": [{"type": "Succeeded", "status": "True"}]}
                }))
                .unwrap(),
            ),
        )],
    }
}

fn with_evidence(e: Evidence) -> Fetched {
    Fetched {
        evidence: Some(e),
        ..Fetched::default()
    }
}

#[test]
fn a_proof_is_read_only_after_the_status_and_the_candidate_are_confirmed() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let p = proof();
    let mut a = ask(&t, "Succeeded", &checks);
    a.proof = Some(&p);
    assert_eq!(decide(&a, &is, &nothing(), now()), Decision::NeedEvidence);
    // A missing status or a moved candidate decides first, without reading anything.
    let mut missing = ask(&t, "", &checks);
    missing.proof = Some(&p);
    assert!(matches!(
        decide(&missing, &is, &nothing(), now()),
        Decision::Final(o) if o.reason == reason::VALIDATION_REQUIRED
    ));
    let moved = stream(C, A, json!(null));
    assert!(matches!(
        decide(&a, &moved, &nothing(), now()),
        Decision::Final(o) if o.reason == reason::CANDIDATE_MOVED
    ));
}

#[test]
fn a_proof_of_the_digest_promotes_and_one_of_another_is_unverified_without_a_write() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let p = proof();
    let mut a = ask(&t, "Succeeded", &checks);
    a.proof = Some(&p);
    let d = decide(&a, &is, &with_evidence(evidence(B)), now());
    assert_eq!(written(&d).1.reason, reason::PROMOTED);
    match decide(&a, &is, &with_evidence(evidence(C)), now()) {
        Decision::Final(o) => {
            assert_eq!((o.reason, o.succeeded), (reason::UNVERIFIED, false));
            assert!(
                o.message
                    .starts_with(&format!("nothing proves that {B} was validated: ")),
                "{}",
                o.message
            );
            assert!(o.message.contains(&format!("not {B}")), "{}", o.message);
            assert!(
                o.message.ends_with(&format!("latest keeps {A}")),
                "{}",
                o.message
            );
        }
        other => panic!("{other:?}"),
    }
    match decide(&a, &is, &with_evidence(Evidence::NoPipelineRun), now()) {
        Decision::Final(o) => assert_eq!(o.reason, reason::UNVERIFIED),
        other => panic!("{other:?}"),
    }
}
