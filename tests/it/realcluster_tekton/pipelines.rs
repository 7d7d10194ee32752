//! Tekton Pipelines for real: PipelineRuns that the released controller (v1.15.0) runs to the end,
//! their TaskRuns' pods bound by kube-scheduler to kwok's Node and ended by the Stage
//! `realcluster/kwok/tekton-step-stage.yaml` as the test decides (the step's env). The results and
//! exit codes in the statuses are what Tekton itself read from the pods.

use serde_json::Value;

use super::cluster::{cluster, condition, finished, succeeded};

/// A Task of one step whose exit code (param `exit-code`) and result `greeting` (from param
/// `who`) the kwok Stage plays: the command never runs.
const GREET_TASK: &str = r#"
apiVersion: tekton.dev/v1
kind: Task
metadata: {name: greet}
spec:
  params:
  - {name: who, type: string, default: world}
  - {name: exit-code, type: string, default: "0"}
  results:
  - {name: greeting, type: string}
  steps:
  - name: greet
    image: registry.example/greet@sha256:1111111111111111111111111111111111111111111111111111111111111111
    command: ["/bin/sh", "-c", "echo -n \"hello from $WHO\" > $(results.greeting.path)"]
    env:
    - {name: WHO, value: $(params.who)}
    - {name: REALCLUSTER_EXIT_CODE, value: $(params.exit-code)}
    - {name: REALCLUSTER_RESULT_greeting, value: hello from $(params.who)}
"#;

/// A Pipeline of the greet Task that passes its params through and returns its result.
const GREET_PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: greet}
spec:
  params:
  - {name: who, type: string}
  - {name: exit-code, type: string, default: "0"}
  tasks:
  - name: greet
    taskRef: {name: greet}
    params:
    - {name: who, value: $(params.who)}
    - {name: exit-code, value: $(params.exit-code)}
  results:
  - {name: greeting, value: $(tasks.greet.results.greeting)}
"#;

fn pipelinerun(name: &str, pipeline: &str, params: &[(&str, &str)]) -> String {
    let params: Vec<Value> = params
        .iter()
        .map(|(n, v)| serde_json::json!({"name": n, "value": v}))
        .collect();
    serde_json::json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": name},
        "spec": {"pipelineRef": {"name": pipeline}, "params": params},
    })
    .to_string()
}

/// The TaskRun the PipelineRun made for `task`, as its status names it.
fn taskrun_of(run: &Value, task: &str) -> String {
    run["status"]["childReferences"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["pipelineTaskName"] == task))
        .and_then(|c| c["name"].as_str())
        .unwrap_or_else(|| panic!("no TaskRun for {task} in {run:#}"))
        .to_string()
}

fn result<'a>(object: &'a Value, field: &str, name: &str) -> Option<&'a Value> {
    object["status"][field]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| &r["value"])
}

#[test]
fn a_step_the_test_passes_ends_its_pipelinerun_succeeded_with_the_result_tekton_read_from_the_pod()
{
    let k = cluster().kubectl();
    let ns = "tekton-succeeds";
    k.namespace(ns);
    k.create(ns, GREET_TASK);
    k.create(ns, GREET_PIPELINE);
    k.create(ns, &pipelinerun("run", "greet", &[("who", "kwok")]));

    let run = k.wait(ns, "pipelinerun/run", 90, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    assert_eq!(condition(&run, "Succeeded").unwrap()["reason"], "Succeeded");
    assert_eq!(
        result(&run, "results", "greeting"),
        Some(&Value::from("hello from kwok")),
        "{run:#}"
    );
    let taskrun = k
        .get(ns, &format!("taskrun/{}", taskrun_of(&run, "greet")))
        .unwrap();
    assert_eq!(
        result(&taskrun, "results", "greeting"),
        Some(&Value::from("hello from kwok"))
    );
    let step = &taskrun["status"]["steps"][0];
    assert_eq!(step["name"], "greet");
    assert_eq!(step["terminated"]["exitCode"], 0, "{taskrun:#}");
    // The pod was bound by the scheduler to kwok's Node and ended by kwok, not by the test.
    let pod = k
        .get(
            ns,
            &format!("pod/{}", taskrun["status"]["podName"].as_str().unwrap()),
        )
        .unwrap();
    assert_eq!(pod["spec"]["nodeName"], "kwok-node-0");
    assert_eq!(pod["status"]["phase"], "Succeeded");
}

#[test]
fn a_step_the_test_fails_ends_its_pipelinerun_failed_with_the_steps_exit_code() {
    let k = cluster().kubectl();
    let ns = "tekton-fails";
    k.namespace(ns);
    k.create(ns, GREET_TASK);
    k.create(ns, GREET_PIPELINE);
    k.create(
        ns,
        &pipelinerun("run", "greet", &[("who", "kwok"), ("exit-code", "3")]),
    );

    let run = k.wait(ns, "pipelinerun/run", 90, finished);
    assert_eq!(succeeded(&run), Some("False"), "{run:#}");
    assert_eq!(condition(&run, "Succeeded").unwrap()["reason"], "Failed");
    let taskrun = k
        .get(ns, &format!("taskrun/{}", taskrun_of(&run, "greet")))
        .unwrap();
    let failed = condition(&taskrun, "Succeeded").unwrap();
    assert_eq!(failed["status"], "False");
    // The TaskRun names the step (Tekton's TaskRunReasonStepFailed); its PipelineRun says Failed.
    assert_eq!(failed["reason"], "StepFailed");
    let message = failed["message"].as_str().unwrap();
    assert!(
        message.contains("\"step-greet\" exited with code 3"),
        "{message}"
    );
    assert_eq!(
        taskrun["status"]["steps"][0]["terminated"]["exitCode"], 3,
        "{taskrun:#}"
    );
}

/// `build` fails; `test` (after it) never runs; of the two `finally` tasks, the one whose `when`
/// wants a failure runs and sees `$(tasks.build.status)`, the other is skipped.
const FINALLY_PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: with-finally}
spec:
  tasks:
  - name: build
    taskRef: {name: greet}
    params:
    - {name: who, value: build}
    - {name: exit-code, value: "1"}
  - name: test
    runAfter: [build]
    taskRef: {name: greet}
    params:
    - {name: who, value: test}
  finally:
  - name: report
    when:
    - {input: $(tasks.build.status), operator: in, values: ["Failed"]}
    taskRef: {name: greet}
    params:
    - {name: who, value: $(tasks.build.status)}
  - name: celebrate
    when:
    - {input: $(tasks.build.status), operator: in, values: ["Succeeded"]}
    taskRef: {name: greet}
    params:
    - {name: who, value: nobody}
  results:
  - {name: report, value: $(finally.report.results.greeting)}
"#;

#[test]
fn a_finally_task_runs_after_a_failed_task_and_reads_its_status() {
    let k = cluster().kubectl();
    let ns = "tekton-finally";
    k.namespace(ns);
    k.create(ns, GREET_TASK);
    k.create(ns, FINALLY_PIPELINE);
    k.create(ns, &pipelinerun("run", "with-finally", &[]));

    let run = k.wait(ns, "pipelinerun/run", 120, finished);
    assert_eq!(succeeded(&run), Some("False"), "{run:#}");
    let report = k
        .get(ns, &format!("taskrun/{}", taskrun_of(&run, "report")))
        .unwrap();
    assert_eq!(succeeded(&report), Some("True"), "{report:#}");
    assert_eq!(
        result(&report, "results", "greeting"),
        Some(&Value::from("hello from Failed"))
    );
    assert_eq!(
        result(&run, "results", "report"),
        Some(&Value::from("hello from Failed")),
        "{run:#}"
    );
    let skipped: Vec<(&str, &str)> = run["status"]["skippedTasks"]
        .as_array()
        .expect("skipped tasks")
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert!(
        skipped.contains(&("celebrate", "When Expressions evaluated to false")),
        "{skipped:?}"
    );
    assert!(
        skipped.iter().any(|(name, _)| *name == "test"),
        "{skipped:?}"
    );
    let children: Vec<&str> = run["status"]["childReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pipelineTaskName"].as_str().unwrap())
        .collect();
    assert_eq!(children.len(), 2, "only build and report ran: {children:?}");
}
