//! What counts as proof, case by case: each way the evidence can fall short is named.

use super::*;
use serde_json::{Value, json};

const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const UID: &str = "pr-uid-1";

fn proof() -> Proof {
    Proof {
        pipeline: "imagegate-promote".into(),
        tasks: vec!["validate".into()],
        asked_by: "ImagePromotion \"notebooks\" asks".into(),
        pins: Default::default(),
        chains: vec![],
    }
}

fn pipeline_run(spec: Value, children: Value) -> Box<PipelineRun> {
    Box::new(
        serde_json::from_value(json!({
            "metadata": {"name": "pr", "uid": UID},
            "spec": spec,
            "status": {"childReferences": children}
        }))
        .unwrap(),
    )
}

fn validate_child() -> Value {
    json!([{"kind": "TaskRun", "name": "pr-validate", "pipelineTaskName": "validate"}])
}

fn task_run(status: &str, image: Option<&str>, owner_uid: &str) -> TaskRun {
    let params: Vec<Value> = image
        .map(|i| json!({"name": "image", "value": i}))
        .into_iter()
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "pr-validate", "ownerReferences": [
            {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": "pr", "uid": owner_uid, "controller": true}
        ]},
        "spec": {"params": params},
        "status": {"conditions": [{"type": "Succeeded", "status": status, "reason": "Failed", "message": "exit 1"}]}
    }))
    .unwrap()
}

/// A succeeded run of the digest whose pod template sets `env`.
fn with_env(env: Value) -> TaskRun {
    let mut run = task_run("True", Some(&image(B)), UID);
    run.spec.pod_template = Some(json!({"env": env, "nodeSelector": {"a": "b"}}));
    run
}

fn found(spec: Value, run: Option<TaskRun>) -> Evidence {
    Evidence::Found {
        pipeline_run: pipeline_run(spec, validate_child()),
        task_runs: vec![("pr-validate".into(), run)],
        chains_keys: vec![],
    }
}

fn by_name() -> Value {
    json!({"pipelineRef": {"name": "imagegate-promote"}})
}

fn image(digest: &str) -> String {
    format!("registry/ds/nb@{digest}")
}

#[test]
fn a_succeeded_task_of_the_pipeline_that_validated_the_digest_is_proof() {
    let ok = found(by_name(), Some(task_run("True", Some(&image(B)), UID)));
    assert_eq!(
        verify(&proof(), 0, &ok, B),
        Ok(format!(
            "PipelineRun \"pr\" of Pipeline \"imagegate-promote\" validated {B} in validate"
        ))
    );
}

#[test]
fn every_way_the_evidence_falls_short_is_named() {
    let cases = [
        (Evidence::NoPipelineRun, "belongs to no PipelineRun"),
        (
            Evidence::PipelineRunGone { name: "pr".into() },
            "its PipelineRun \"pr\" does not exist",
        ),
        (
            found(
                json!({"pipelineRef": {"name": "other"}}),
                Some(task_run("True", Some(&image(B)), UID)),
            ),
            "runs Pipeline \"other\", not \"imagegate-promote\"",
        ),
        (
            found(
                json!({"pipelineSpec": {"tasks": []}}),
                Some(task_run("True", Some(&image(B)), UID)),
            ),
            "runs an inline pipelineSpec",
        ),
        (
            found(by_name(), Some(task_run("True", Some(&image(C)), UID))),
            &format!("validated \"registry/ds/nb@{C}\", not {B}"),
        ),
        (
            found(by_name(), Some(task_run("True", Some(B), UID))),
            &format!("validated \"{B}\", not {B}"),
        ),
        (
            found(by_name(), Some(task_run("True", None, UID))),
            "has no \"image\" param",
        ),
        (
            found(by_name(), Some(task_run("False", Some(&image(B)), UID))),
            "did not succeed (Failed: exit 1)",
        ),
        (
            found(by_name(), Some(task_run("Unknown", Some(&image(B)), UID))),
            "did not succeed",
        ),
        (
            found(
                by_name(),
                Some(task_run("True", Some(&image(B)), "another-uid")),
            ),
            "is not controlled by the PipelineRun",
        ),
        (
            found(by_name(), None),
            "(TaskRun \"pr-validate\") does not exist",
        ),
        (
            found(
                by_name(),
                Some(with_env(
                    json!([{"name": "SMOKE_TEST", "value": "true"}, {"value": "x"}]),
                )),
            ),
            "its pod template sets environment variables (SMOKE_TEST, ?)",
        ),
        (
            Evidence::Found {
                pipeline_run: pipeline_run(by_name(), json!([])),
                task_runs: vec![],
                chains_keys: vec![],
            },
            "task \"validate\" has no TaskRun in PipelineRun \"pr\"",
        ),
    ];
    for (evidence, want) in cases {
        let got = verify(&proof(), 0, &evidence, B).unwrap_err();
        assert!(got.why.contains(want), "{want:?} not in {got:?}");
    }
}

#[test]
fn a_pod_template_without_environment_does_not_spoil_the_proof() {
    for template in [
        json!({"automountServiceAccountToken": false}),
        json!({"env": []}),
        json!({"env": null}),
    ] {
        let mut run = task_run("True", Some(&image(B)), UID);
        run.spec.pod_template = Some(template.clone());
        assert!(
            verify(&proof(), 0, &found(by_name(), Some(run)), B).is_ok(),
            "{template}"
        );
    }
}

#[test]
fn every_problem_is_reported_together() {
    let two = Proof {
        pipeline: "imagegate-promote".into(),
        tasks: vec!["validate".into(), "scan".into()],
        asked_by: "ImagePromotion \"notebooks\" asks".into(),
        pins: Default::default(),
        chains: vec![],
    };
    let evidence = found(
        json!({"pipelineRef": {"name": "other"}}),
        Some(task_run("False", Some(&image(B)), UID)),
    );
    let got = verify(&two, 0, &evidence, B).unwrap_err();
    assert_eq!(got.why.matches("; ").count(), 2, "{got:?}");
    assert!(got.why.contains("task \"scan\" has no TaskRun"), "{got:?}");
    assert!(!got.not_yet, "refused, not waited for");
}
