//! The proof of validation in the decision of `promote`: asked for after the status and the
//! candidate were confirmed, refused without a write when it falls short.

use super::*;
use crate::controller::proof::{Evidence, Proof};

fn proof() -> Proof {
    Proof {
        pipeline: "imagegate-promote".into(),
        tasks: vec!["validate".into()],
        asked_by: "ImagePromotion \"gov\" governs nb and asks".into(),
        pins: Default::default(),
        chains: vec![],
    }
}

fn evidence(validated: &str) -> Evidence {
    evidence_of(
        validated,
        json!([{"kind": "CustomRun", "name": "run-1", "pipelineTaskName": "promote"}]),
        json!([]),
    )
}

/// The evidence of a PipelineRun with `runs` among its children besides its TaskRun, and
/// `conditions`.
fn evidence_of(
    validated: &str,
    runs: serde_json::Value,
    conditions: serde_json::Value,
) -> Evidence {
    let mut children =
        vec![json!({"kind": "TaskRun", "name": "pr-validate", "pipelineTaskName": "validate"})];
    children.extend(runs.as_array().unwrap().iter().cloned());
    Evidence::Found {
        pipeline_run: Box::new(
            serde_json::from_value(json!({
                "metadata": {"name": "pr", "uid": "u1"},
                "spec": {"pipelineRef": {"name": "imagegate-promote"}},
                "status": {"childReferences": children, "conditions": conditions}
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
        chains_keys: vec![],
    }
}

fn with_evidence(e: Evidence) -> Fetched {
    Fetched {
        evidence: Some(e),
        ..nothing()
    }
}

#[test]
fn a_proof_is_read_only_after_the_status_and_the_candidate_are_confirmed() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let p = proof();
    let mut a = ask(&t, "Succeeded", &checks);
    a.proofs = std::slice::from_ref(&p);
    assert_eq!(decide(&a, &is, &nothing(), now()), Decision::NeedEvidence);
    // A missing status or a moved candidate decides first, without reading anything.
    let mut missing = ask(&t, "", &checks);
    missing.proofs = std::slice::from_ref(&p);
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
    a.proofs = std::slice::from_ref(&p);
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

#[test]
fn only_the_running_pipelinerun_that_lists_the_run_proves_it() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let p = proof();
    let mut a = ask(&t, "Succeeded", &checks);
    a.proofs = std::slice::from_ref(&p);
    // Not listed yet: wait (Tekton lists a child right after it creates it).
    let unlisted = evidence_of(B, json!([]), json!([]));
    assert!(matches!(
        decide(&a, &is, &with_evidence(unlisted), now()),
        Decision::Wait(why) if why.starts_with("PipelineRun \"pr\" does not list CustomRun \"run-1\" among its children yet")
    ));
    // Finished, listed or not: an old proof is not replayed.
    let done = json!([{"type": "Succeeded", "status": "True", "reason": "Succeeded"}]);
    let listed = json!([{"kind": "CustomRun", "name": "run-1", "pipelineTaskName": "promote"}]);
    for runs in [json!([]), listed] {
        match decide(
            &a,
            &is,
            &with_evidence(evidence_of(B, runs, done.clone())),
            now(),
        ) {
            Decision::Final(o) => {
                assert_eq!(o.reason, reason::UNVERIFIED);
                assert_eq!(
                    o.message,
                    format!(
                        "nothing proves that {B} was validated: ImagePromotion \"gov\" governs nb \
                         and asks for proof from Pipeline \"imagegate-promote\", but PipelineRun \
                         \"pr\" has finished; only the running PipelineRun that created a CustomRun \
                         proves it; latest keeps {A}"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
    }
    // No PipelineRun at all.
    match decide(&a, &is, &with_evidence(Evidence::NoPipelineRun), now()) {
        Decision::Final(o) => assert!(
            o.message
                .contains("a tekton.dev/pipelineRun label alone proves nothing"),
            "{}",
            o.message
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_proof_asked_for_must_hold() {
    let is = stream(B, A, json!(null));
    let t = target(Action::Promote, Some(B));
    let checks = no_checks();
    let both = [
        proof(),
        Proof {
            pipeline: "imagegate-promote".into(),
            tasks: vec!["scan".into()],
            asked_by: "ImagePromotion \"security\" governs nb and asks".into(),
            pins: Default::default(),
            chains: vec![],
        },
    ];
    let mut a = ask(&t, "Succeeded", &checks);
    a.proofs = &both;
    match decide(&a, &is, &with_evidence(evidence(B)), now()) {
        Decision::Final(o) => {
            assert_eq!(o.reason, reason::UNVERIFIED);
            assert!(
                o.message.contains("ImagePromotion \"security\" governs nb and asks for proof from Pipeline \"imagegate-promote\": task \"scan\" has no TaskRun"),
                "{}",
                o.message
            );
            assert!(
                !o.message.contains("\"gov\""),
                "gov's proof holds: {}",
                o.message
            );
        }
        other => panic!("{other:?}"),
    }
}
