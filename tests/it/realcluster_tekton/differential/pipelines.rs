//! The pipeline runner: PipelineRuns of the shipped Pipeline (`tekton/300-pipeline.yaml` with its
//! Tasks) on the real Tekton Pipelines controller and on the demo's stand-in
//! (`imagegate_demo::standin::pipeline_run`), each task ending as the case says: the test plays
//! the custom-task controller for `begin`, `promote` and `reject` on both sides (the CustomRuns'
//! status on the real one), and the smoke test passes or fails (a kwok Stage for the case's
//! digest on the real side). Compared: which tasks ran with which params, which were skipped and
//! why, the PipelineRun's results and its final condition.
//!
//! The test ends ImagePromotion CustomRuns itself, so it never runs beside the tests that run
//! `imagegate controller` (their nextest test group, `.config/nextest.toml`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use imagegate_demo::standin::{self, TaskOutcome, TaskStatus};
use serde_json::{Value, json};

use super::super::cluster::{Kubectl, cluster, condition, finished};
use super::{block_on, tekton_file};

const NS: &str = "tekton-diff-pipelines";

/// How each task of a case ends if it runs: custom tasks by (status, reason, results), the smoke
/// test by passing or not.
struct Case {
    run: &'static str,
    digest: char,
    validate_passes: bool,
    ends: Vec<End>,
}

/// How a custom task of a case ends: its status (True or not), reason and results.
struct End {
    task: &'static str,
    ok: bool,
    reason: &'static str,
    results: Vec<(&'static str, String)>,
}

fn end(
    task: &'static str,
    ok: bool,
    reason: &'static str,
    results: Vec<(&'static str, String)>,
) -> End {
    End {
        task,
        ok,
        reason,
        results,
    }
}

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

fn cases() -> Vec<Case> {
    let image = |c: char| format!("image-registry.example/{NS}/jupyter@{}", digest(c));
    let begun = |c: char| {
        end(
            "begin",
            true,
            "Validating",
            vec![("image", image(c)), ("phase", "Validating".into())],
        )
    };
    vec![
        // The validation passes: promote runs, reject is skipped.
        Case {
            run: "passes",
            digest: 'a',
            validate_passes: true,
            ends: vec![
                begun('a'),
                end(
                    "promote",
                    true,
                    "Promoted",
                    vec![
                        ("promoted-digest", digest('a')),
                        ("previous-digest", digest('0')),
                        ("phase", "Promoted".into()),
                    ],
                ),
            ],
        },
        // The smoke test fails: reject runs, and ends False (Rejected) as imagegate ends it.
        Case {
            run: "fails",
            digest: 'b',
            validate_passes: false,
            ends: vec![
                begun('b'),
                end(
                    "reject",
                    false,
                    "Rejected",
                    vec![
                        ("promoted-digest", String::new()),
                        ("phase", "UpdateFailed".into()),
                    ],
                ),
            ],
        },
        // `begin` refuses (the candidate moved on): the run stops, neither finally task runs.
        Case {
            run: "begin-refuses",
            digest: 'c',
            validate_passes: true,
            ends: vec![end(
                "begin",
                false,
                "CandidateMoved",
                vec![("phase", "Promoted".into())],
            )],
        },
        // `promote` refuses: its results (a failed run writes them too) still reach the
        // PipelineRun's.
        Case {
            run: "promote-refuses",
            digest: 'd',
            validate_passes: true,
            ends: vec![
                begun('d'),
                end(
                    "promote",
                    false,
                    "CandidateMoved",
                    vec![
                        ("promoted-digest", String::new()),
                        ("phase", "Validating".into()),
                    ],
                ),
            ],
        },
    ]
}

fn pipelinerun(case: &Case) -> Value {
    json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": case.run, "annotations": {"imagegate.dev/digest": digest(case.digest)}},
        "spec": {
            "pipelineRef": {"name": "imagegate-promote"},
            "params": [
                {"name": "imagestream", "value": format!("{NS}/jupyter")},
                {"name": "digest", "value": digest(case.digest)},
            ],
        },
    })
}

fn condition_json(object: &Value) -> Value {
    let c = condition(object, "Succeeded").cloned().unwrap_or_default();
    json!({"status": c["status"], "reason": c["reason"], "message": c["message"]})
}

fn params_json(list: &Value) -> Value {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["value"].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// How the stand-in ran `case`, in the comparison's shape.
fn standin_run(case: &Case) -> Value {
    let mut params: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let ended = block_on(standin::pipeline_run(pipelinerun(case), NS, |task, p| {
        params.insert(task.to_string(), p.clone());
        if task == "validate" {
            let status = if case.validate_passes {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            };
            return TaskOutcome {
                status,
                reason: String::new(),
                message: String::new(),
                results: BTreeMap::new(),
            };
        }
        let End {
            ok,
            reason,
            results,
            ..
        } = case
            .ends
            .iter()
            .find(|e| e.task == task)
            .unwrap_or_else(|| {
                panic!(
                    "{}: the stand-in ran {task}, which the case does not end",
                    case.run
                )
            });
        TaskOutcome {
            status: if *ok {
                TaskStatus::Succeeded
            } else {
                TaskStatus::Failed
            },
            reason: reason.to_string(),
            message: String::new(),
            results: results
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        }
    }))
    .unwrap_or_else(|e| panic!("{}: the stand-in: {e:#}", case.run));
    let mut ran = serde_json::Map::new();
    let mut skipped = serde_json::Map::new();
    for (task, o) in &ended.tasks {
        if o.status == TaskStatus::None {
            skipped.insert(task.clone(), json!(o.reason));
        } else {
            ran.insert(
                task.clone(),
                json!({"status": o.status.as_str(), "params": params[task]}),
            );
        }
    }
    let c = &ended.condition;
    json!({
        "ran": ran, "skipped": skipped, "results": ended.results,
        "condition": {"status": if c.succeeded { "True" } else { "False" }, "reason": c.reason, "message": c.message},
    })
}

/// How real Tekton ran PipelineRun `run`, in the same shape.
fn real_run(k: &Kubectl, run: &Value) -> Value {
    let mut ran = serde_json::Map::new();
    for child in run["status"]["childReferences"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let kind = child["kind"].as_str().unwrap().to_lowercase();
        let object = k
            .get(NS, &format!("{kind}/{}", child["name"].as_str().unwrap()))
            .unwrap();
        let status = match condition(&object, "Succeeded").map(|c| c["status"].clone()) {
            Some(s) if s == "True" => "Succeeded",
            Some(s) if s == "False" => "Failed",
            _ => "unfinished",
        };
        ran.insert(
            child["pipelineTaskName"].as_str().unwrap().to_string(),
            json!({"status": status, "params": params_json(&object["spec"]["params"])}),
        );
    }
    let skipped: serde_json::Map<_, _> = run["status"]["skippedTasks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| (s["name"].as_str().unwrap().to_string(), s["reason"].clone()))
        .collect();
    json!({
        "ran": ran, "skipped": skipped, "results": params_json(&run["status"]["results"]),
        "condition": condition_json(run),
    })
}

fn install(k: &Kubectl) {
    k.namespace(NS);
    for file in [
        "200-task-smoke-test.yaml",
        "210-task-notebook-validation.yaml",
        "300-pipeline.yaml",
    ] {
        k.create(NS, &tekton_file(file));
    }
}

/// Ends every CustomRun Tekton made in [`NS`] as its case says (what `imagegate controller` would
/// write: the condition, the results, the times).
fn end_customruns(k: &Kubectl, cases: &[Case]) {
    let list: Value =
        serde_json::from_str(&k.ok(&["get", "customruns", "-n", NS, "-o", "json"])).unwrap();
    for run in list["items"].as_array().into_iter().flatten() {
        if condition(run, "Succeeded").is_some_and(|c| c["status"] != "Unknown") {
            continue;
        }
        let labels = &run["metadata"]["labels"];
        let (pipelinerun, task) = (
            labels["tekton.dev/pipelineRun"].as_str().unwrap_or(""),
            labels["tekton.dev/pipelineTask"].as_str().unwrap_or(""),
        );
        let end = cases
            .iter()
            .find(|c| c.run == pipelinerun)
            .and_then(|c| c.ends.iter().find(|e| e.task == task));
        // A task the case does not end: real Tekton ran what the stand-in would not.
        let (ok, reason, results) = end.map_or((false, "NotInTheCase", vec![]), |e| {
            (e.ok, e.reason, e.results.clone())
        });
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let status = json!({"status": {
            "conditions": [{"type": "Succeeded", "status": if ok { "True" } else { "False" },
                "reason": reason, "message": format!("ended by the differential test as {reason}"),
                "lastTransitionTime": now}],
            "startTime": now, "completionTime": now,
            "results": results.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
        }});
        k.ok(&[
            "patch",
            "-n",
            NS,
            &format!("customrun/{}", run["metadata"]["name"].as_str().unwrap()),
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    }
}

#[test]
fn the_pipeline_stand_in_runs_skips_and_ends_the_shipped_pipeline_as_real_tekton_does() {
    let c = cluster();
    let k = c.kubectl();
    install(&k);
    let cases = cases();
    let mut stages = Vec::new();
    for case in cases.iter().filter(|c| !c.validate_passes) {
        let stage = imagegate_demo::real::stages::fail(&digest(case.digest), 127).unwrap();
        stages.push(stage["metadata"]["name"].as_str().unwrap().to_string());
        k.create(NS, &stage.to_string());
    }
    for case in &cases {
        k.create(NS, &pipelinerun(case).to_string());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        end_customruns(&k, &cases);
        let done = cases.iter().all(|case| {
            k.get(NS, &format!("pipelinerun/{}", case.run))
                .is_some_and(|r| finished(&r))
        });
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the PipelineRuns did not finish in 120 s\n--- tekton-pipelines-controller.log:\n{}",
            c.log_tail("tekton-pipelines-controller")
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    for stage in stages {
        k.ok(&["delete", "stage", &stage]);
    }
    for case in &cases {
        let run = k.get(NS, &format!("pipelinerun/{}", case.run)).unwrap();
        assert_eq!(
            standin_run(case),
            real_run(&k, &run),
            "{}: the stand-in (left) and real Tekton (right) differ; the PipelineRun:\n{run:#}",
            case.run
        );
    }
}
