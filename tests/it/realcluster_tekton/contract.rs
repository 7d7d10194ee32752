//! The CustomRun contract when `begin` succeeds, against the real Tekton Pipelines controller
//! (v1.15.0) and the image API on the same cluster: a properly validated promotion whose results
//! Tekton hands downstream (`$(tasks.begin.results.*)` and `$(tasks.promote.results.*)` in a
//! later task and in the PipelineRun's results), a `when` on a custom-task result, a PipelineRun
//! cancelled while `promote` waits and after it landed, and `imagegate controller` killed in the
//! middle of a PipelineRun.
//!
//! `imagegate controller` reconciles every ImagePromotion CustomRun of the cluster, so this test
//! and `customrun` never run at once (their nextest test group, `.config/nextest.toml`).

use std::process::Command;

use serde_json::{Value, json};

use super::cluster::{Kubectl, cluster, condition, finished, succeeded};
use crate::support::{EmulatorServer, Process, free_port};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const NS: &str = "tekton-contract";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// The settings of `tekton/100-imagepromotion.yaml` (its name, tags and proof of validation)
/// without checks: the stream's images are the test's own.
const PROMOTION: &str = r#"
apiVersion: imagegate.dev/v1alpha1
kind: ImagePromotion
metadata: {name: notebooks}
spec:
  candidateTag: candidate
  servedTag: latest
  validation: {pipeline: imagegate-promote, tasks: [validate]}
"#;

/// A step whose result `text` is its param (the kwok Stage writes it), for a task downstream.
const ECHO: &str = r#"
apiVersion: tekton.dev/v1
kind: Task
metadata: {name: echo}
spec:
  params: [{name: text, type: string, default: ""}]
  results: [{name: text, type: string}]
  steps:
  - name: echo
    image: registry.example/echo@sha256:3333333333333333333333333333333333333333333333333333333333333333
    command: ["/bin/true"]
    env: [{name: REALCLUSTER_RESULT_text, value: $(params.text)}]
"#;

/// The shipped Pipeline's shape with `promote` as a task (so that later tasks can read its
/// results): begin -> validate (the shipped smoke test on begin's `image`) -> promote, when
/// begin's `phase` result is `Validating` -> report, which reads both custom tasks' results; a
/// task whose `when` on begin's result is false; and the results in the PipelineRun's.
const PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: imagegate-promote}
spec:
  params:
  - {name: imagestream, type: string}
  - {name: digest, type: string}
  - {name: hold, type: string, default: "no"}
  tasks:
  - name: begin
    taskRef: {apiVersion: imagegate.dev/v1alpha1, kind: ImagePromotion, name: notebooks}
    params:
    - {name: imagestream, value: $(params.imagestream)}
    - {name: digest, value: $(params.digest)}
    - {name: action, value: begin}
  - name: validate
    runAfter: [begin]
    taskRef: {kind: Task, name: imagegate-smoke-test}
    params:
    - {name: image, value: $(tasks.begin.results.image)}
    - {name: command, value: "true"}
  - name: promote
    runAfter: [validate]
    when:
    - {input: $(tasks.begin.results.phase), operator: in, values: ["Validating"]}
    taskRef: {apiVersion: imagegate.dev/v1alpha1, kind: ImagePromotion, name: notebooks}
    params:
    - {name: imagestream, value: $(params.imagestream)}
    - {name: digest, value: $(params.digest)}
    - {name: action, value: promote}
    - {name: validation-status, value: Succeeded}
  - name: already-promoted
    runAfter: [begin]
    when:
    - {input: $(tasks.begin.results.phase), operator: in, values: ["Promoted"]}
    taskRef: {name: echo}
  - name: report
    runAfter: [promote]
    taskRef: {name: echo}
    params:
    - {name: text, value: "$(tasks.promote.results.promoted-digest) replaced $(tasks.promote.results.previous-digest), validated as $(tasks.begin.results.image)"}
  results:
  - {name: image, value: $(tasks.begin.results.image)}
  - {name: promoted-digest, value: $(tasks.promote.results.promoted-digest)}
  - {name: phase, value: $(tasks.promote.results.phase)}
  - {name: report, value: $(tasks.report.results.text)}
"#;

fn pipelinerun(name: &str, candidate: &str) -> String {
    json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": name, "labels": {HOLD: name}},
        "spec": {
            "pipelineRef": {"name": "imagegate-promote"},
            "params": [
                {"name": "imagestream", "value": format!("{NS}/nb")},
                {"name": "digest", "value": candidate},
            ],
        },
    })
    .to_string()
}

/// The label (from the PipelineRun, which Tekton copies to its pods) that [`hold_report`] selects.
const HOLD: &str = "imagegate.test/run";

/// A kwok Stage, weighted over the shipped one, that keeps the `report` pod of PipelineRun `run`
/// Running (ten minutes): the shipped Stage for Tekton's pods with a delay, narrowed to it.
fn hold_report(k: &Kubectl, run: &str) {
    let shipped =
        std::fs::read_to_string(format!("{ROOT}/realcluster/kwok/tekton-step-stage.yaml")).unwrap();
    let mut stage: Value = serde_norway::from_str(&shipped).unwrap();
    stage["metadata"] = json!({"name": format!("hold-report-{run}")});
    stage["spec"]["weight"] = json!(1);
    stage["spec"]["delay"] = json!({"durationMilliseconds": 600_000});
    let labels = &mut stage["spec"]["selector"]["matchLabels"];
    labels[HOLD] = json!(run);
    labels["tekton.dev/pipelineTask"] = json!("report");
    k.create(NS, &stage.to_string());
}

/// The test's one runtime: the kube client inside [`EmulatorServer`] lives on it.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

pub(super) fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    runtime().block_on(f)
}

/// The image API `up` serves on this cluster (its control API reached directly).
pub(super) fn image_api() -> EmulatorServer {
    let c = cluster();
    let env = std::fs::read_to_string(c.dir.join("env")).unwrap();
    let port = env
        .lines()
        .filter_map(|l| l.strip_prefix("IMAGE_API_PORT="))
        .next_back()
        .expect("the cluster's env names the image API's port");
    block_on(async {
        imagegate::runtime::tls::install_crypto_provider();
        let config = kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        EmulatorServer::behind_api_server(
            format!("https://127.0.0.1:{port}"),
            &std::fs::read(c.dir.join("pki/ca.crt")).unwrap(),
            c.kubeconfig.clone(),
            kube::Client::try_from(config).unwrap(),
        )
    })
}

/// `imagegate controller` as its ServiceAccount, on a free admin port, ready.
pub(super) fn controller(dir: &std::path::Path) -> (Process, u16) {
    let kubeconfig = dir.join("controller.kubeconfig");
    cluster().kubeconfig_of("imagegate-system", "imagegate-controller", &kubeconfig);
    let admin = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args(["--log-format", "json", "controller", "--admin-addr"])
        .arg(format!("127.0.0.1:{admin}"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info");
    let process = Process::start("imagegate controller", command);
    block_on(crate::support::wait_ready(admin));
    (process, admin)
}

/// What `nb`'s served tag serves, and its phase.
fn served(k: &Kubectl) -> (String, String) {
    let stream = k.get(NS, "imagestream/nb").expect("nb is served");
    let digest = stream["status"]["tags"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["tag"] == "latest"))
        .and_then(|t| t["items"][0]["image"].as_str())
        .unwrap_or("")
        .to_string();
    let phase = stream["spec"]["tags"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "latest"))
        .and_then(|t| t["annotations"]["imagegate.dev/phase"].as_str())
        .unwrap_or("")
        .to_string();
    (digest, phase)
}

fn result<'a>(run: &'a Value, name: &str) -> Option<&'a str> {
    run["status"]["results"]
        .as_array()?
        .iter()
        .find(|r| r["name"] == name)?["value"]
        .as_str()
}

fn cancel(k: &Kubectl, run: &str) {
    k.ok(&[
        "patch",
        "-n",
        NS,
        &format!("pipelinerun/{run}"),
        "--type=merge",
        "-p",
        r#"{"spec": {"status": "Cancelled"}}"#,
    ]);
}

fn install(k: &Kubectl) {
    k.ok(&["apply", "--server-side", "-k", &format!("{ROOT}/config")]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/imagepromotions.imagegate.dev",
    ]);
    k.namespace(NS);
    // The namespace opted in to the controller's writes, as `kubectl apply -k tekton/` does.
    k.create(
        NS,
        &std::fs::read_to_string(format!("{ROOT}/tekton/330-controller-rbac.yaml")).unwrap(),
    );
    k.create(NS, PROMOTION);
    k.create(
        NS,
        &std::fs::read_to_string(format!("{ROOT}/tekton/200-task-smoke-test.yaml")).unwrap(),
    );
    k.create(NS, ECHO);
    k.create(NS, PIPELINE);
    k.ok(&[
        "create",
        "rolebinding",
        "default-promoter",
        "-n",
        NS,
        "--clusterrole=imagegate-promoter",
        &format!("--serviceaccount={NS}:default"),
    ]);
    // The image API as `up` registered it (the customrun test takes it down for a while).
    k.ok(&[
        "wait",
        "--for=condition=Available",
        "--timeout=60s",
        "apiservice/v1.image.openshift.io",
    ]);
}

/// A validated promotion: Tekton resolves begin's and promote's results in a later task and in
/// the PipelineRun's results, and a `when` on begin's `phase` result skips a task.
fn results_flow_downstream(k: &Kubectl) {
    k.create(NS, &pipelinerun("promoted", &digest('b')));
    let run = k.wait(NS, "pipelinerun/promoted", 90, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    // begin's `image`: the candidate's pull spec by digest, as the stream resolves it.
    let begin = k.get(NS, "customrun/promoted-begin").unwrap();
    let image = result(&begin, "image").unwrap_or_default().to_string();
    assert!(
        image.ends_with(&format!("/nb@{}", digest('b'))),
        "{begin:#}"
    );
    assert_eq!(result(&run, "image"), Some(image.as_str()), "{run:#}");
    assert_eq!(result(&run, "promoted-digest"), Some(digest('b').as_str()));
    assert_eq!(result(&run, "phase"), Some("Promoted"));
    assert_eq!(
        result(&run, "report"),
        Some(
            format!(
                "{} replaced {}, validated as {image}",
                digest('b'),
                digest('a')
            )
            .as_str()
        )
    );
    let skipped: Vec<(&str, &str)> = run["status"]["skippedTasks"]
        .as_array()
        .expect("skipped tasks")
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [("already-promoted", "When Expressions evaluated to false")]
    );
    assert_eq!(served(k), (digest('b'), "Promoted".to_string()));
}

#[test]
fn a_validated_promotion_on_real_tekton_hands_its_results_downstream_and_ends_as_the_contract_says()
{
    let c = cluster();
    let k = c.kubectl();
    install(&k);
    let emu = image_api();
    block_on(emu.seed_promotion_stream(NS, &digest('a'), &digest('b')));
    let dir = tempfile::tempdir().unwrap();
    let (mut controller, _) = controller(dir.path());

    results_flow_downstream(&k);

    // The controller killed (-9) once `begin` has ended: Tekton runs `validate` and makes the
    // `promote` CustomRun, which waits; the restarted controller ends it and the run goes on.
    block_on(emu.import(NS, "nb", "candidate", &digest('c')));
    k.create(NS, &pipelinerun("restarted", &digest('c')));
    k.wait(NS, "customrun/restarted-begin", 60, finished);
    controller.kill();
    let promote = k.wait(NS, "customrun/restarted-promote", 60, |_| true);
    assert_eq!(
        succeeded(&promote),
        None,
        "nobody reconciled it: {promote:#}"
    );
    controller.restart();
    let run = k.wait(NS, "pipelinerun/restarted", 90, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    assert_eq!(served(&k), (digest('c'), "Promoted".to_string()));

    // Cancelled while `promote` waits for the (stopped) controller: Tekton patches it
    // RunCancelled and ends the PipelineRun; the controller, back, ends it CustomRunCancelled
    // and the served tag keeps what it served.
    block_on(emu.import(NS, "nb", "candidate", &digest('d')));
    k.create(NS, &pipelinerun("cancelled", &digest('d')));
    k.wait(NS, "customrun/cancelled-begin", 60, finished);
    controller.kill();
    k.wait(NS, "customrun/cancelled-promote", 60, |_| true);
    k.wait(NS, "pipelinerun/cancelled", 30, |r| {
        r["status"]["childReferences"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["pipelineTaskName"] == "promote"))
    });
    cancel(&k, "cancelled");
    let run = k.wait(NS, "pipelinerun/cancelled", 30, finished);
    assert_eq!(condition(&run, "Succeeded").unwrap()["reason"], "Cancelled");
    controller.restart();
    let promote = k.wait(NS, "customrun/cancelled-promote", 30, finished);
    let done = condition(&promote, "Succeeded").unwrap();
    assert_eq!(done["reason"], "CustomRunCancelled", "{promote:#}");
    assert_eq!(
        done["message"],
        "CustomRun cancelled as the PipelineRun it belongs to has been cancelled."
    );
    assert_eq!(served(&k).0, digest('c'));

    // Cancelled after `promote` landed (while `report` runs): Tekton patches every CustomRun of
    // the run RunCancelled, the finished `promote` too; imagegate leaves a finished run as it
    // ended (done is decided before cancelled), and the promotion stands.
    block_on(emu.import(NS, "nb", "candidate", &digest('e')));
    hold_report(&k, "landed");
    k.create(NS, &pipelinerun("landed", &digest('e')));
    let promote = k.wait(NS, "customrun/landed-promote", 60, finished);
    assert_eq!(succeeded(&promote), Some("True"), "{promote:#}");
    k.wait(NS, "pipelinerun/landed", 30, |r| {
        r["status"]["childReferences"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["pipelineTaskName"] == "report"))
    });
    cancel(&k, "landed");
    let run = k.wait(NS, "pipelinerun/landed", 30, finished);
    let promote = k.wait(NS, "customrun/landed-promote", 30, |r| {
        r["spec"]["status"] == "RunCancelled"
    });
    assert_eq!(condition(&run, "Succeeded").unwrap()["reason"], "Cancelled");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let promote_after = k.get(NS, "customrun/landed-promote").unwrap();
    assert_eq!(
        condition(&promote_after, "Succeeded").unwrap()["reason"],
        "Promoted",
        "{promote_after:#}"
    );
    assert_eq!(
        promote_after["metadata"]["resourceVersion"], promote["metadata"]["resourceVersion"],
        "imagegate wrote nothing more to the finished run"
    );
    assert_eq!(served(&k), (digest('e'), "Promoted".to_string()));

    a_candidate_faster_than_validation_still_advances_the_served_tag(&k, &emu);
    the_pin_holds_for_what_was_pinned_and_not_for_an_edited_task(&k, &emu, &mut controller);
}

/// Upstream moves the candidate every 2 s while each validation takes 5 s (a kwok Stage holds
/// every `validate` pod of these runs that long): every `promote` finds the candidate moved
/// on, and the served tag must still advance, run after run, never backwards, and end at the
/// last candidate.
fn a_candidate_faster_than_validation_still_advances_the_served_tag(
    k: &Kubectl,
    emu: &EmulatorServer,
) {
    let shipped =
        std::fs::read_to_string(format!("{ROOT}/realcluster/kwok/tekton-step-stage.yaml")).unwrap();
    let mut stage: Value = serde_norway::from_str(&shipped).unwrap();
    stage["metadata"] = json!({"name": "validate-takes-5s"});
    stage["spec"]["weight"] = json!(1);
    stage["spec"]["delay"] = json!({"durationMilliseconds": 5_000});
    let labels = &mut stage["spec"]["selector"]["matchLabels"];
    labels[HOLD] = json!("churn");
    labels["tekton.dev/pipelineTask"] = json!("validate");
    k.create(NS, &stage.to_string());

    let digests: Vec<String> = ['5', '6', '7', '8', '9', 'f']
        .into_iter()
        .map(digest)
        .collect();
    for (i, d) in digests.iter().enumerate() {
        block_on(emu.import(NS, "nb", "candidate", d));
        let mut run: Value = serde_json::from_str(&pipelinerun(&format!("churn-{i}"), d)).unwrap();
        run["metadata"]["labels"][HOLD] = json!("churn");
        k.create(NS, &run.to_string());
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let mut promoted = Vec::new();
    for (i, d) in digests.iter().enumerate() {
        let run = k.wait(NS, &format!("pipelinerun/churn-{i}"), 120, finished);
        let Some(promote) = k.get(NS, &format!("customrun/churn-{i}-promote")) else {
            // `begin` found the candidate moved on already: the newer one has its own run.
            let begin = k.get(NS, &format!("customrun/churn-{i}-begin")).unwrap();
            assert_eq!(
                condition(&begin, "Succeeded").unwrap()["reason"],
                "CandidateMoved",
                "{run:#}"
            );
            continue;
        };
        let done = condition(&promote, "Succeeded").unwrap();
        match done["reason"].as_str() {
            Some("Promoted") => promoted.push((
                done["lastTransitionTime"].as_str().unwrap().to_string(),
                i,
                d.clone(),
            )),
            // Finished after a newer one was promoted: never backwards.
            Some("CandidateMoved") => assert!(
                done["message"].as_str().unwrap().contains("not newer than"),
                "{promote:#}"
            ),
            _ => panic!("{promote:#}"),
        }
    }
    promoted.sort();
    let order: Vec<usize> = promoted.iter().map(|p| p.1).collect();
    assert!(
        order.len() >= 3,
        "the served tag advanced {} times while the candidate moved 6 times: {promoted:?}",
        order.len()
    );
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "promoted in import order, never backwards: {promoted:?}"
    );
    assert_eq!(served(k).0, digests[5], "it ends at the last candidate");
}

/// The ImagePromotion pins `validate` with the pin `tekton/100` ships: a run of the shipped Task
/// on real Tekton proves (the pin is of what Tekton records; the `command` param this test's
/// Pipeline still passes, as a PipelineRun of the old shape would, is not the Task's and changes
/// nothing). Then the three ways F-2 found to make `validate` succeed without running the
/// validation each end `promote` `Unverified` and leave the served tag: the run's pod template
/// setting the command's variable (the route a param was), a TaskRun made under the name Tekton
/// will give `validate` before it does (Tekton takes the TaskRun it finds by name), and an
/// edited Task (as someone with `update` on Tasks could).
fn the_pin_holds_for_what_was_pinned_and_not_for_an_edited_task(
    k: &Kubectl,
    emu: &EmulatorServer,
    controller: &mut Process,
) {
    let shipped: Value = serde_norway::from_str(
        &std::fs::read_to_string(format!("{ROOT}/tekton/100-imagepromotion.yaml")).unwrap(),
    )
    .unwrap();
    let pins = json!({"spec": {"validation": {"pins": shipped["spec"]["validation"]["pins"]}}});
    k.ok(&[
        "patch",
        "-n",
        NS,
        "imagepromotion",
        "notebooks",
        "--type=merge",
        "-p",
        &pins.to_string(),
    ]);
    block_on(emu.import(NS, "nb", "candidate", &digest('1')));
    k.create(NS, &pipelinerun("pinned", &digest('1')));
    let run = k.wait(NS, "pipelinerun/pinned", 90, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    assert_eq!(served(k), (digest('1'), "Promoted".to_string()));

    a_pod_template_that_sets_the_command_does_not_prove(k, emu);
    a_taskrun_made_before_tekton_makes_it_does_not_prove(k, emu, controller);

    let edited = json!({"spec": {"steps": [{
        "name": "smoke-test", "image": "$(params.image)",
        "env": [{"name": "SMOKE_TEST", "value": "true"}, {"name": "HOME", "value": "/tmp"}],
        "command": ["/bin/sh", "-c"], "args": ["sh -c \"$SMOKE_TEST\""]
    }]}});
    k.ok(&[
        "patch",
        "-n",
        NS,
        "task",
        "imagegate-smoke-test",
        "--type=merge",
        "-p",
        &edited.to_string(),
    ]);
    block_on(emu.import(NS, "nb", "candidate", &digest('2')));
    k.create(NS, &pipelinerun("edited", &digest('2')));
    let promote = k.wait(NS, "customrun/edited-promote", 90, finished);
    let done = condition(&promote, "Succeeded").unwrap();
    assert_eq!(done["reason"], "Unverified", "{promote:#}");
    assert!(
        done["message"].as_str().unwrap().contains("not the pinned"),
        "{promote:#}"
    );
    assert_eq!(served(k).0, digest('1'), "the served tag stays");
}

/// `promote` of PipelineRun `run` ends `Unverified` saying `why`, and the served tag stays at
/// `served`.
fn unverified(k: &Kubectl, run: &str, why: &str, served_digest: &str) {
    let promote = k.wait(NS, &format!("customrun/{run}-promote"), 90, finished);
    let done = condition(&promote, "Succeeded").unwrap();
    assert_eq!(done["reason"], "Unverified", "{promote:#}");
    assert!(
        done["message"].as_str().unwrap().contains(why),
        "{why:?} not said: {promote:#}"
    );
    assert_eq!(served(k).0, served_digest, "the served tag stays");
}

/// A PipelineRun of the real Pipeline whose pod template sets `SMOKE_TEST`: Tekton appends it
/// after the step's own, the later wins in the container, and the pinned step would run `true`;
/// Tekton records the Task's spec unchanged, so the pin alone would prove it.
fn a_pod_template_that_sets_the_command_does_not_prove(k: &Kubectl, emu: &EmulatorServer) {
    block_on(emu.import(NS, "nb", "candidate", &digest('3')));
    let mut run: Value = serde_json::from_str(&pipelinerun("overridden", &digest('3'))).unwrap();
    run["spec"]["taskRunTemplate"] =
        json!({"podTemplate": {"env": [{"name": "SMOKE_TEST", "value": "true"}]}});
    k.create(NS, &run.to_string());
    let validate = k.wait(NS, "taskrun/overridden-validate", 90, finished);
    assert_eq!(succeeded(&validate), Some("True"), "{validate:#}");
    assert_eq!(
        validate["spec"]["podTemplate"]["env"][0]["name"], "SMOKE_TEST",
        "Tekton gives the TaskRun the run's pod template: {validate:#}"
    );
    unverified(
        k,
        "overridden",
        "its pod template sets environment variables (SMOKE_TEST)",
        &digest('1'),
    );
}

/// The TaskRun `<run>-validate`, controlled by the PipelineRun (its uid), made by hand with a
/// trivial spec while `begin` waits (the controller stopped): Tekton finds it by name and takes
/// it as `validate`'s, lists it in `childReferences` and runs `promote` after it. What Tekton
/// recorded that it ran is not the pinned Task.
fn a_taskrun_made_before_tekton_makes_it_does_not_prove(
    k: &Kubectl,
    emu: &EmulatorServer,
    controller: &mut Process,
) {
    block_on(emu.import(NS, "nb", "candidate", &digest('4')));
    controller.kill();
    k.create(NS, &pipelinerun("premade", &digest('4')));
    let run = k.wait(NS, "pipelinerun/premade", 30, |r| {
        r["metadata"]["uid"].is_string()
    });
    let repository = k.get(NS, "imagestream/nb").unwrap()["status"]["dockerImageRepository"]
        .as_str()
        .unwrap()
        .to_string();
    let forged = json!({
        "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "metadata": {
            "name": "premade-validate",
            "labels": {"tekton.dev/pipelineRun": "premade", "tekton.dev/pipelineTask": "validate"},
            "ownerReferences": [{
                "apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": "premade",
                "uid": run["metadata"]["uid"], "controller": true
            }]
        },
        "spec": {
            "params": [{"name": "image", "value": format!("{repository}@{}", digest('4'))}],
            "taskSpec": {
                "params": [{"name": "image", "type": "string"}],
                "steps": [{"name": "smoke-test", "image": "$(params.image)", "command": ["/bin/true"]}]
            }
        }
    });
    k.create(NS, &forged.to_string());
    let validate = k.wait(NS, "taskrun/premade-validate", 90, finished);
    assert_eq!(succeeded(&validate), Some("True"), "{validate:#}");
    controller.restart();
    let listed = k.wait(NS, "pipelinerun/premade", 90, |r| {
        r["status"]["childReferences"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "premade-promote"))
    });
    assert!(
        listed["status"]["childReferences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "premade-validate"),
        "Tekton took the TaskRun made by hand as validate's: {listed:#}"
    );
    unverified(k, "premade", "not the pinned", &digest('1'));
}
