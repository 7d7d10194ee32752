use std::collections::BTreeMap;

use futures::FutureExt;
use serde_json::{Value, json};

use super::*;
use crate::tekton::TektonFiles;

fn ok(results: &[(&str, &str)]) -> TaskOutcome {
    TaskOutcome {
        status: TaskStatus::Succeeded,
        reason: "Succeeded".into(),
        message: String::new(),
        results: results
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn failed(reason: &str) -> TaskOutcome {
    TaskOutcome {
        status: TaskStatus::Failed,
        reason: reason.into(),
        message: String::new(),
        results: BTreeMap::new(),
    }
}

/// Runs `spec` with `params`; each task that runs ends as `ends` says (by name).
fn run(spec: &Value, params: &[(&str, &str)], ends: &[(&str, TaskOutcome)]) -> Ended {
    let params: BTreeMap<String, String> = params
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ctx = RunContext {
        run: "run",
        namespace: "ns",
        params: &params,
    };
    futures::executor::block_on(execute(
        &ctx,
        spec,
        |task, _| {
            let name = task["name"].as_str().unwrap();
            let end = ends
                .iter()
                .find(|(t, _)| *t == name)
                .unwrap_or_else(|| panic!("{name} was not expected to run"))
                .1
                .clone();
            async move { Ok(end) }.boxed()
        },
        |_, _| {},
    ))
    .unwrap()
}

fn skipped(ended: &Ended) -> Vec<(&str, &str)> {
    ended
        .tasks
        .iter()
        .filter(|(_, o)| o.status == TaskStatus::None)
        .map(|(t, o)| (t.as_str(), o.reason.as_str()))
        .collect()
}

fn shipped() -> (Value, Vec<(&'static str, &'static str)>) {
    let files = TektonFiles::embedded().unwrap();
    let spec = files.get("Pipeline", "imagegate-promote").unwrap()["spec"].clone();
    let params = vec![
        ("imagestream", "notebooks/nb"),
        ("candidate-tag", "candidate"),
        ("digest", "sha256:1"),
        ("smoke-test", "true"),
        ("validation", "smoke-test"),
        ("test-notebooks", ""),
    ];
    (spec, params)
}

#[test]
fn a_passed_validation_promotes_and_ends_completed_as_tekton_counts_the_skipped_tasks() {
    let (spec, params) = shipped();
    let ended = run(
        &spec,
        &params,
        &[
            ("begin", ok(&[("image", "q/nb@sha256:1")])),
            ("validate", ok(&[])),
            (
                "promote",
                ok(&[("promoted-digest", "sha256:1"), ("phase", "Promoted")]),
            ),
        ],
    );
    assert_eq!(
        skipped(&ended),
        [("validate-notebook", WHEN_FALSE), ("reject", WHEN_FALSE)]
    );
    assert_eq!(ended.results["promoted-digest"], "sha256:1");
    assert_eq!(ended.results["phase"], "Promoted");
    assert_eq!(
        ended.condition,
        RunCondition {
            succeeded: true,
            reason: "Completed",
            message: "Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 2".into(),
        }
    );
}

#[test]
fn a_failed_begin_stops_the_run_and_neither_finally_task_runs() {
    let (spec, params) = shipped();
    let ended = run(&spec, &params, &[("begin", failed("CandidateMoved"))]);
    assert_eq!(
        skipped(&ended),
        [
            ("validate", STOPPING),
            ("validate-notebook", STOPPING),
            ("promote", WHEN_FALSE),
            ("reject", WHEN_FALSE),
        ]
    );
    assert!(ended.results.is_empty(), "{:?}", ended.results);
    assert_eq!(ended.condition.reason, "Failed");
    assert_eq!(
        ended.condition.message,
        "Tasks Completed: 1 (Failed: 1, Cancelled 0), Skipped: 4"
    );
}

#[test]
fn a_task_after_one_skipped_by_its_when_runs_unless_it_reads_its_results() {
    let spec = json!({
        "tasks": [
            {"name": "a", "when": [{"input": "x", "operator": "in", "values": ["y"]}]},
            {"name": "b", "runAfter": ["a"]},
            {"name": "c", "params": [{"name": "p", "value": "$(tasks.a.results.r)"}]},
            {"name": "d", "runAfter": ["c"]},
        ],
        "finally": [
            {"name": "f", "params": [{"name": "p", "value": "$(tasks.a.results.r)"}]},
            {"name": "g", "params": [{"name": "s", "value": "$(tasks.status)/$(tasks.a.status)"}]},
        ],
        "results": [{"name": "r", "value": "$(tasks.a.results.r)"}],
    });
    let ended = run(&spec, &[], &[("b", ok(&[])), ("g", ok(&[]))]);
    assert_eq!(
        skipped(&ended),
        [
            ("a", WHEN_FALSE),
            ("c", RESULTS_MISSING),
            ("d", PARENT_SKIPPED),
            ("f", RESULTS_MISSING),
        ]
    );
    assert!(ended.results.is_empty());
    assert_eq!(ended.condition.reason, "Completed");
}

#[test]
fn an_expression_that_names_nothing_known_is_an_error_not_a_skip() {
    let spec =
        json!({"tasks": [{"name": "a", "params": [{"name": "p", "value": "$(params.nope)"}]}]});
    let params = BTreeMap::new();
    let ctx = RunContext {
        run: "run",
        namespace: "ns",
        params: &params,
    };
    let err = futures::executor::block_on(execute(
        &ctx,
        &spec,
        |_, _| async { Ok(ok(&[])) }.boxed(),
        |_, _| {},
    ))
    .unwrap_err();
    assert!(err.to_string().contains("params.nope"), "{err}");
}
