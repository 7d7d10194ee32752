//! The CustomRun contract against the real Tekton Pipelines controller (v1.15.0): `config/` and
//! `tekton/` as shipped, the real controller making the `begin` CustomRun of the shipped Pipeline
//! and cancelling it, `imagegate controller` (the binary, as its ServiceAccount with `config/`'s
//! RBAC) ending it, `retries` left to imagegate, a pipeline task's `timeout` while the image API is
//! down (with a controller restart mid-run), and the source's own CloudEvent reaching the shipped EventListener (the real Triggers
//! sink) that creates the PipelineRun.
//!
//! One test, in phases: `imagegate controller` reconciles every ImagePromotion CustomRun of the
//! cluster, so no other test may run one beside it, and the first phase needs it stopped. The
//! image API is not served on this cluster (the ImageStreams are another tier's), so a run that
//! gets as far as reading its ImageStream ends `ImageStreamNotFound`; what Tekton does with that
//! is part of the contract too.

use std::path::Path;
use std::process::Command;

use imagegate::source::change::{ChangeKind, TagChange};
use imagegate::source::deliver::{ContentMode, Encoded, SinkClient};
use imagegate::source::event::{self, EventSettings};
use serde_json::Value;

use super::cluster::{Kubectl, cluster, condition, finished, succeeded};
use crate::support::{Process, free_port};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The namespace `tekton/kustomization.yaml` installs into.
const NS: &str = "notebooks";
const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
/// What Tekton writes to `spec.statusMessage` when it cancels a CustomRun (pkg/reconciler/pipelinerun).
const CANCELLED: &str = "CustomRun cancelled as the PipelineRun it belongs to has been cancelled.";
const TIMED_OUT: &str = "CustomRun cancelled as the PipelineRun it belongs to has timed out.";

/// A PipelineRun of the shipped Pipeline for `notebooks/jupyter` at [`DIGEST`], with `extra` in
/// its spec.
fn pipelinerun(name: &str, extra: Value) -> String {
    let mut run = serde_json::json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": name},
        "spec": {
            "pipelineRef": {"name": "imagegate-promote"},
            "params": [
                {"name": "imagestream", "value": "notebooks/jupyter"},
                {"name": "digest", "value": DIGEST},
                {"name": "image", "value": format!("quay.io/modh/jupyter@{DIGEST}")},
            ],
        },
    });
    json_patch::merge(&mut run["spec"], &extra);
    run.to_string()
}

/// The CustomRun Tekton made for pipeline task `task` of PipelineRun `run`, once it exists.
fn customrun_of(k: &Kubectl, run: &str, task: &str) -> Value {
    k.wait(NS, &format!("customrun/{run}-{task}"), 60, |_| true)
}

/// Without `imagegate controller`: what Tekton writes into the CustomRun it makes from the
/// shipped `begin` task, and into it when the PipelineRun is cancelled or times out.
fn tekton_cancels_the_customruns_it_made(k: &Kubectl) {
    k.create(NS, &pipelinerun("cancelled", serde_json::json!({})));
    let begin = customrun_of(k, "cancelled", "begin");
    let spec = &begin["spec"];
    assert_eq!(
        spec["customRef"],
        serde_json::json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"})
    );
    // The pipeline task's params, with the Pipeline's default for candidate-tag filled in, and
    // its `timeout: 2m` as Go prints a duration.
    let params: Vec<(&str, &str)> = spec["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        params,
        [
            ("imagestream", "notebooks/jupyter"),
            ("candidate-tag", "candidate"),
            ("digest", DIGEST),
            ("action", "begin"),
        ]
    );
    assert_eq!(spec["timeout"], "2m0s", "{begin:#}");
    assert_eq!(spec["serviceAccountName"], "default");
    assert_eq!(spec.get("retries"), None);
    assert_eq!(
        begin["metadata"]["labels"]["tekton.dev/pipelineTask"],
        "begin"
    );
    assert_eq!(begin["metadata"]["labels"]["tekton.dev/memberOf"], "tasks");
    assert_eq!(begin["metadata"]["ownerReferences"][0]["name"], "cancelled");
    // Tekton cancels the children its PipelineRun's status lists. It creates the CustomRun before
    // it writes that status, so a cancel in between can end the PipelineRun without patching the
    // CustomRun (the 30 s wait below then fails): cancel once the status names it, as a user who
    // looked at the run would.
    k.wait(NS, "pipelinerun/cancelled", 30, |r| {
        r["status"]["childReferences"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["name"] == "cancelled-begin"))
    });

    k.ok(&[
        "patch",
        "-n",
        NS,
        "pipelinerun/cancelled",
        "--type=merge",
        "-p",
        r#"{"spec": {"status": "Cancelled"}}"#,
    ]);
    let begin = k.wait(NS, "customrun/cancelled-begin", 30, |r| {
        r["spec"]["status"] == "RunCancelled"
    });
    assert_eq!(begin["spec"]["statusMessage"], CANCELLED);
    // Tekton ends the PipelineRun at once: it does not wait for the custom task to confirm.
    let run = k.wait(NS, "pipelinerun/cancelled", 30, finished);
    assert_eq!(condition(&run, "Succeeded").unwrap()["reason"], "Cancelled");
    assert_eq!(
        succeeded(&begin),
        None,
        "nobody has reconciled it: {begin:#}"
    );

    k.create(
        NS,
        &pipelinerun(
            "timed-out",
            serde_json::json!({"timeouts": {"pipeline": "3s"}}),
        ),
    );
    customrun_of(k, "timed-out", "begin");
    let begin = k.wait(NS, "customrun/timed-out-begin", 30, |r| {
        r["spec"]["status"] == "RunCancelled"
    });
    assert_eq!(begin["spec"]["statusMessage"], TIMED_OUT);
    let run = k.wait(NS, "pipelinerun/timed-out", 30, finished);
    assert_eq!(
        condition(&run, "Succeeded").unwrap()["reason"],
        "PipelineRunTimeout"
    );
}

/// `imagegate controller` as its ServiceAccount (`config/`'s RBAC), on a free admin port.
fn start_controller(dir: &Path) -> Process {
    let c = cluster();
    let kubeconfig = dir.join("controller.kubeconfig");
    c.kubeconfig_of("imagegate-system", "imagegate-controller", &kubeconfig);
    let admin = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
    command
        .args(["--log-format", "json", "controller", "--admin-addr"])
        .arg(format!("127.0.0.1:{admin}"))
        .env("KUBECONFIG", &kubeconfig)
        .env("RUST_LOG", "info");
    let process = Process::start("imagegate controller", command);
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(crate::support::wait_ready(admin));
    process
}

/// The runs Tekton cancelled end `CustomRunCancelled` with Tekton's message, once imagegate sees them.
fn imagegate_ends_the_cancelled_runs(k: &Kubectl) {
    for (run, message) in [("cancelled", CANCELLED), ("timed-out", TIMED_OUT)] {
        let begin = k.wait(NS, &format!("customrun/{run}-begin"), 30, finished);
        let done = condition(&begin, "Succeeded").unwrap();
        assert_eq!(done["status"], "False", "{begin:#}");
        assert_eq!(done["reason"], "CustomRunCancelled");
        assert_eq!(done["message"], message);
        assert!(begin["status"]["completionTime"].is_string(), "{begin:#}");
    }
}

/// `retries: 2` on a custom task: Tekton hands the count to the CustomRun and makes no second
/// CustomRun; imagegate runs the attempts, archives the failed ones in `retriesStatus`, and ends
/// the run only after the last one. The ImageStream is missing, so every attempt fails.
fn imagegate_runs_the_retries_tekton_hands_it(k: &Kubectl) {
    let spec = serde_json::json!({
        "pipelineRef": null,
        "pipelineSpec": {
            "params": [{"name": "imagestream"}, {"name": "digest"}, {"name": "image"}],
            "tasks": [{
                "name": "begin",
                "retries": 2,
                "taskRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"},
                "params": [
                    {"name": "imagestream", "value": "$(params.imagestream)"},
                    {"name": "digest", "value": "$(params.digest)"},
                    {"name": "action", "value": "begin"},
                ],
            }],
        },
    });
    k.create(NS, &pipelinerun("retried", spec));
    let run = k.wait(NS, "pipelinerun/retried", 60, finished);
    assert_eq!(
        condition(&run, "Succeeded").unwrap()["reason"],
        "Failed",
        "{run:#}"
    );
    let children = run["status"]["childReferences"].as_array().unwrap();
    assert_eq!(children.len(), 1, "one CustomRun for all attempts: {run:#}");
    assert_eq!(children[0]["name"], "retried-begin");
    let begin = k.get(NS, "customrun/retried-begin").unwrap();
    assert_eq!(begin["spec"]["retries"], 2);
    let done = condition(&begin, "Succeeded").unwrap();
    assert_eq!(done["status"], "False", "{begin:#}");
    assert_eq!(done["reason"], "ImageStreamNotFound");
    let attempts = begin["status"]["retriesStatus"]
        .as_array()
        .unwrap_or_else(|| panic!("no retriesStatus: {begin:#}"));
    assert_eq!(attempts.len(), 2, "{begin:#}");
    // Each archived attempt is a CustomRun status of its own (conditions at its top level).
    for attempt in attempts {
        assert_eq!(
            attempt["conditions"][0]["reason"], "ImageStreamNotFound",
            "{attempt:#}"
        );
    }
}

/// The image API registered (an APIService) but down: the aggregator answers 503 for every
/// ImageStream, as when OpenShift's API server is unavailable. It replaces the APIService `up`
/// registered; the caller removes it again (the ImageStreams are then not found at all).
const IMAGE_API_DOWN: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: image-api-down, namespace: notebooks}
spec: {type: ExternalName, externalName: localhost}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.image.openshift.io}
spec:
  group: image.openshift.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service: {namespace: notebooks, name: image-api-down, port: PORT}
"#;

/// Registers the image API as down ([`IMAGE_API_DOWN`]) and waits until the aggregator says so;
/// the APIService it replaced, for [`bring_the_image_api_back`].
fn take_the_image_api_down(k: &Kubectl) -> Option<Value> {
    let nobody = free_port().to_string();
    let up = k.get("default", "apiservice/v1.image.openshift.io");
    k.ok(&[
        "delete",
        "apiservice",
        "v1.image.openshift.io",
        "--ignore-not-found",
    ]);
    k.create(NS, &IMAGE_API_DOWN.replace("PORT", &nobody));
    k.wait(NS, "service/image-api-down", 10, |_| true);
    let raw = "/apis/image.openshift.io/v1/namespaces/notebooks/imagestreams/jupyter";
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = k.run(&["get", "--raw", raw], "");
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("ServiceUnavailable") || err.contains("unable to handle the request") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the image API never answered 503: {err}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    up
}

/// Registers the image API again as `up` did (the test `contract` of this cluster needs it).
fn bring_the_image_api_back(k: &Kubectl, up: Option<Value>) {
    k.ok(&["delete", "apiservice", "v1.image.openshift.io"]);
    if let Some(mut up) = up {
        for field in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "managedFields",
        ] {
            up["metadata"].as_object_mut().unwrap().remove(field);
        }
        up.as_object_mut().unwrap().remove("status");
        k.create("default", &up.to_string());
        k.ok(&[
            "wait",
            "--for=condition=Available",
            "--timeout=60s",
            "apiservice/v1.image.openshift.io",
        ]);
    }
}

/// A pipeline task's `timeout: 3s` becomes the CustomRun's `spec.timeout`; while the image API
/// is down, imagegate retries its read (the run marked started) until the attempt is past it
/// and ends `CustomRunTimedOut`, which Tekton reads as the task's failure. The controller is
/// killed (-9) and restarted once the run has started: the restarted one keeps that attempt and
/// its clock.
fn a_pipeline_task_timeout_ends_the_customrun_timed_out(k: &Kubectl, controller: &mut Process) {
    let up = take_the_image_api_down(k);
    let spec = serde_json::json!({
        "pipelineRef": null,
        "pipelineSpec": {
            "params": [{"name": "imagestream"}, {"name": "digest"}, {"name": "image"}],
            "tasks": [{
                "name": "begin",
                "timeout": "3s",
                "taskRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "notebooks"},
                "params": [
                    {"name": "imagestream", "value": "$(params.imagestream)"},
                    {"name": "digest", "value": "$(params.digest)"},
                    {"name": "action", "value": "begin"},
                ],
            }],
        },
    });
    k.create(NS, &pipelinerun("slow", spec));
    let started = k.wait(NS, "customrun/slow-begin", 30, |r| {
        r["status"]["startTime"].is_string()
    });
    controller.kill();
    controller.restart();
    let run = k.wait(NS, "pipelinerun/slow", 60, finished);
    bring_the_image_api_back(k, up);
    let begin = k.get(NS, "customrun/slow-begin").unwrap();
    assert_eq!(begin["spec"]["timeout"], "3s");
    assert_eq!(begin["status"]["startTime"], started["status"]["startTime"]);
    assert_eq!(begin["status"].get("retriesStatus"), None, "{begin:#}");
    let done = condition(&begin, "Succeeded").unwrap();
    assert_eq!(done["status"], "False", "{begin:#}");
    assert_eq!(done["reason"], "CustomRunTimedOut");
    assert_eq!(
        done["message"],
        "the attempt did not finish within its timeout (3s)"
    );
    assert_eq!(
        condition(&run, "Succeeded").unwrap()["reason"],
        "Failed",
        "{run:#}"
    );
}

/// The source's CloudEvent for a new candidate digest, as `imagegate source` builds and encodes
/// it (binary mode), POSTed by the source's own client to the shipped EventListener's sink; the
/// imagegate interceptor passes it (stream `jupyter` has that candidate, ImagePromotion
/// `notebooks` governs it). The name of the PipelineRun made for it (keyed by the interceptor's
/// run key: found by its digest).
fn the_source_event_reaches_the_shipped_eventlistener(k: &Kubectl) -> String {
    let emu = super::contract::image_api();
    super::contract::block_on(async {
        emu.seed(serde_json::json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "jupyter", "namespace": NS},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/modh/jupyter:latest"}}]}
        }))
        .await;
        emu.import(NS, "jupyter", "candidate", DIGEST).await;
    });
    let listener = k.wait(NS, "eventlistener/imagegate", 60, |el| {
        condition(el, "Ready").is_some_and(|r| r["status"] == "True")
    });
    let url = listener["status"]["address"]["url"].as_str().unwrap();
    let change = TagChange {
        kind: ChangeKind::Updated,
        namespace: NS.into(),
        image_stream: "jupyter".into(),
        image_stream_uid: "8c1c4a4e-0000-4000-8000-000000000001".into(),
        tag: "candidate".into(),
        digest: Some(DIGEST.into()),
        previous_digest: None,
        docker_image_reference: Some(format!("quay.io/modh/jupyter@{DIGEST}")),
        generation: 1,
        time: Some("2026-12-01T10:00:00Z".into()),
        reason: None,
        message: None,
    };
    let settings = EventSettings::new("https://imagegate.dev/schemas/").unwrap();
    let event = event::tag_event(&change, &settings, chrono::Utc::now());
    let wire = Encoded::new(event, ContentMode::Binary).unwrap();
    let status = tokio::runtime::Runtime::new().unwrap().block_on(async {
        SinkClient::new(None, None)
            .unwrap()
            .post(&url.parse().unwrap(), wire)
            .await
    });
    assert_eq!(status.ok(), Some(202), "the sink accepted the event");
    let id = event::event_id(&change);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let runs: Value =
            serde_json::from_str(&k.ok(&["get", "pipelineruns", "-n", NS, "-o", "json"])).unwrap();
        let made = runs["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["metadata"]["annotations"]["imagegate.dev/event-id"] == id.as_str());
        if let Some(r) = made {
            let name = r["metadata"]["name"].as_str().unwrap().to_string();
            assert!(
                !name.contains(&id),
                "{name}: keyed by the interceptor, not the event's id"
            );
            return name;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no PipelineRun for event {id}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

#[test]
fn the_shipped_pipeline_on_real_tekton_hands_imagegate_its_customruns_and_reads_how_they_ended() {
    let c = cluster();
    let k = c.kubectl();
    k.ok(&["apply", "--server-side", "-k", &format!("{ROOT}/config")]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/imagepromotions.imagegate.dev",
    ]);
    k.namespace(NS);
    k.ok(&["apply", "--server-side", "-k", &format!("{ROOT}/tekton")]);
    // These PipelineRuns name no account, so Tekton gives their CustomRuns `default` (asserted
    // below); it may promote, as tekton/ lets the shipped TriggerTemplate's account.
    k.ok(&[
        "create",
        "rolebinding",
        "default-promoter",
        "-n",
        NS,
        "--clusterrole=imagegate-promoter",
        &format!("--serviceaccount={NS}:default"),
    ]);

    tekton_cancels_the_customruns_it_made(&k);
    let dir = tempfile::tempdir().unwrap();
    let mut controller = start_controller(dir.path());
    imagegate_ends_the_cancelled_runs(&k);
    imagegate_runs_the_retries_tekton_hands_it(&k);

    // The whole route up to imagegate's first check: the event passes the shipped CEL filter and
    // the imagegate interceptor, the binding and template name the PipelineRun with the
    // interceptor's run id and fill its params, Tekton makes `begin`, imagegate finds that the
    // pipeline's account may not promote (its RoleBinding taken away for this) and ends it;
    // Tekton fails the run, skips `validate` and `validate-notebook`, and neither `finally` task's `when` holds.
    k.ok(&[
        "delete",
        "rolebinding",
        "imagegate-pipeline-promoter",
        "-n",
        NS,
    ]);
    let name = the_source_event_reaches_the_shipped_eventlistener(&k);
    let run = k.wait(NS, &format!("pipelinerun/{name}"), 60, |_| true);
    assert_eq!(
        run["metadata"]["annotations"]["imagegate.dev/digest"],
        DIGEST
    );
    let run = k.wait(NS, &format!("pipelinerun/{name}"), 60, finished);
    assert_eq!(
        condition(&run, "Succeeded").unwrap()["reason"],
        "Failed",
        "{run:#}"
    );
    let begin = k.get(NS, &format!("customrun/{name}-begin")).unwrap();
    let done = condition(&begin, "Succeeded").unwrap();
    assert_eq!(done["reason"], "Forbidden", "{begin:#}");
    let skipped: Vec<(&str, &str)> = run["status"]["skippedTasks"]
        .as_array()
        .expect("skipped tasks")
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [
            ("validate", "PipelineRun was stopping"),
            ("validate-notebook", "PipelineRun was stopping"),
            ("promote", "When Expressions evaluated to false"),
            ("reject", "When Expressions evaluated to false"),
        ]
    );
    assert_eq!(
        run["status"]["childReferences"].as_array().unwrap().len(),
        1,
        "only begin ran: {run:#}"
    );
    a_pipeline_task_timeout_ends_the_customrun_timed_out(&k, &mut controller);
}
