//! (c) spot checks of PipelineRun and TaskRun, what the controller reads as the proof of
//! validation, over the DERIVED fixture of a run of `tekton/300-pipeline.yaml`.

use imagegate::api::{CustomRun, PipelineRun, TaskRun};

use super::{DIGEST_B, LIFECYCLE, parse};

const CHILDREN: &str = "DERIVED_pipelinerun_imagegate-promote_children.yaml";

#[test]
fn a_pipelinerun_names_its_pipeline_and_its_taskruns_by_pipeline_task() {
    let pr: PipelineRun = parse(CHILDREN, 0);
    assert_eq!(pr.pipeline_name(), Some("imagegate-promote"));
    assert_eq!(
        pr.task_runs_of("validate"),
        ["imagegate-5c1d9e0b7a-validate"]
    );
    assert!(pr.task_runs_of("begin").is_empty(), "begin is a CustomRun");
    assert!(pr.task_runs_of("scan").is_empty());
}

#[test]
fn a_taskrun_carries_its_resolved_image_its_condition_and_its_owner() {
    let pr: PipelineRun = parse(CHILDREN, 0);
    let uid = pr.metadata.uid.clone().unwrap();
    let ok: TaskRun = parse(CHILDREN, 1);
    assert!(ok.is_controlled_by(&uid));
    assert!(ok.succeeded_condition().unwrap().is_true());
    assert!(
        ok.param_str("image")
            .unwrap()
            .ends_with(&format!("@{DIGEST_B}"))
    );
    assert_eq!(ok.param_str("missing"), None);
    let failed: TaskRun = parse(CHILDREN, 2);
    assert!(!failed.is_controlled_by(&uid), "another run's TaskRun");
    let condition = failed.succeeded_condition().unwrap();
    assert!(condition.is_false());
    assert_eq!(condition.reason.as_deref(), Some("Failed"));
}

#[test]
fn a_customrun_the_pipeline_created_belongs_to_its_pipelinerun() {
    let run: CustomRun = parse(LIFECYCLE, 0);
    assert_eq!(
        run.pipeline_run(),
        Some((
            "promote-nb-x7k2p".to_string(),
            "6f1d2b7a-93c4-4e0b-8a5f-0c9e3d2b1a77".to_string()
        ))
    );
    // The label alone names no PipelineRun: anyone who creates a CustomRun writes its labels.
    let mut labelled = run.clone();
    labelled.metadata.owner_references = None;
    assert!(
        labelled
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key("tekton.dev/pipelineRun")
    );
    assert_eq!(labelled.pipeline_run(), None);
    // Nor does an owner reference without a uid.
    let mut no_uid = run.clone();
    no_uid.metadata.owner_references.as_mut().unwrap()[0].uid = String::new();
    assert_eq!(no_uid.pipeline_run(), None);
}
