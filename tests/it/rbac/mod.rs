//! The RBAC of `config/` against what the programs really do. The real `imagegate source` and
//! `imagegate controller` binaries run as their Deployments in `config/` run them (the
//! container's args and env), each under its ServiceAccount's user name, against the API
//! emulator, through a scenario that takes every API path each program has. Then
//! the emulator's request log is checked both ways: every call is allowed by the Roles,
//! ClusterRoles and bindings in `config/`, and every granted verb was used, unless its comment
//! says `unused-in-tests:` and why. The checker itself is `tests/it/support/rbac.rs` (on the
//! emulator's RBAC evaluator); [`checker`] shows it can fail, and [`calls`] takes the
//! controller's calls for the trust checks (SubjectAccessReviews, PipelineRuns, TaskRuns) and the
//! promoter's permission both ways.

mod calls;
mod checker;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::rbac::{self, Policy};
use crate::support::sink::Sink;
use crate::support::tekton::PipelineRunStandIn;
use crate::support::{EmulatorServer, Process, free_port};
use imagegate::api::CustomRun;
use imagegate::source::checkpoint;
use imagegate_emulator::control::RequestRecord;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "imagegate-system";
const SOURCE_SA: &str = "system:serviceaccount:imagegate-system:imagegate-source";
const CONTROLLER_SA: &str = "system:serviceaccount:imagegate-system:imagegate-controller";

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

fn config(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config")
        .join(file)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A program run the way its Deployment in `config/` runs it.
struct Program {
    name: &'static str,
    process: Process,
}

impl Program {
    /// The first container of the Deployment in `file`: its args, and its env with the
    /// downward API resolved for a pod named `pod` (`overrides` replace values, e.g. the sink).
    /// The admin server moves to a free port, and the program connects through `kubeconfig`.
    fn from_deployment(
        name: &'static str,
        file: &str,
        pod: &str,
        kubeconfig: &Path,
        overrides: &[(&str, &str)],
        extra_args: &[&str],
    ) -> Program {
        let text = read(&config(file));
        let deployment: Value = serde_norway::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .find(|v: &Value| v["kind"] == "Deployment")
            .unwrap_or_else(|| panic!("{file} has no Deployment"));
        let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let mut args: Vec<String> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        args.push("--admin-addr".into());
        args.push(format!("127.0.0.1:{}", free_port()));
        args.extend(extra_args.iter().map(|a| a.to_string()));
        let mut env: Vec<(String, String)> = Vec::new();
        for e in container["env"].as_array().unwrap() {
            let key = e["name"].as_str().unwrap().to_string();
            let value = match (
                &e["value"],
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
            ) {
                (Value::String(v), _) => v.clone(),
                (_, Some("metadata.namespace")) => namespace.to_string(),
                (_, Some("metadata.name")) => pod.to_string(),
                (_, Some("spec.serviceAccountName")) => {
                    deployment["spec"]["template"]["spec"]["serviceAccountName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                }
                _ => panic!("{file}: env {key} comes from something this test cannot resolve"),
            };
            let value = overrides
                .iter()
                .find(|(k, _)| *k == key)
                .map_or(value, |(_, v)| v.to_string());
            env.push((key, value));
        }
        env.push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command.args(args).env_clear().envs(env);
        Program {
            name,
            process: Process::start(format!("{name} ({pod})"), command),
        }
    }

    /// Starts it again after [`Program::stop`].
    fn start(&mut self) {
        self.process.restart();
    }

    /// What the program logged, for failure messages.
    fn logs(&self) -> String {
        self.process.log()
    }

    /// A graceful stop (SIGTERM, as the kubelet sends): the program flushes, releases its
    /// Lease and exits 0.
    async fn stop(&mut self) {
        let Some(exit) = self.process.stop(Duration::from_secs(30)).await else {
            return;
        };
        assert!(
            exit.success(),
            "{} exited with {exit}:\n{}",
            self.name,
            self.logs()
        );
    }
}

/// Polls `check` until it holds, failing with `what` after 30 s.
async fn eventually<F, Fut>(what: &str, program: &Program, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what} never happened; {} logged:\n{}",
            program.name,
            program.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An emulator with imagegate's namespace and the ImagePromotion CRD, both from `config/`.
async fn emulator() -> EmulatorServer {
    let emu = EmulatorServer::start().await;
    emu.seed_str(&read(&config("100-namespace.yaml"))).await;
    emu.seed_str(&read(&config("300-imagepromotion-crd.yaml")))
        .await;
    // Tekton's CustomRun CRD (the released one, support::upstream) is served from the start,
    // as on a cluster with Tekton installed.
    emu
}

/// Checks the request log of `sa` both ways and fails naming every problem, with the namespaces
/// of `onboarded` opted in as `tekton/` does (also used by the multi-tenant adapter's test,
/// `source_mt::rbac`).
pub(crate) fn assert_least_privilege(records: &[RequestRecord], sa: &str, onboarded: &[&str]) {
    let policy = Policy::installed(onboarded);
    let audit = rbac::audit(&policy, records, sa, sa);
    assert!(audit.requests > 0, "{sa} made no request at all");
    let problems: Vec<String> = [audit.denied, audit.unused, audit.stale_markers].concat();
    assert!(
        problems.is_empty(),
        "{} problems with the RBAC of config/ ({} requests checked):\n{}",
        problems.len(),
        audit.requests,
        problems.join("\n")
    );
}

async fn checkpoint_shards(admin: &kube::Client) -> Vec<ConfigMap> {
    Api::<ConfigMap>::namespaced(admin.clone(), NAMESPACE)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("imagegate-source-checkpoint-"))
        })
        .collect()
}

async fn checkpoint_holds(admin: &kube::Client, digest: &str) -> bool {
    checkpoint_shards(admin).await.iter().any(|cm| {
        cm.data.as_ref().is_some_and(|d| {
            d.values()
                .filter_map(|v| checkpoint::decode_state(v))
                .any(|s| {
                    s.tags
                        .iter()
                        .any(|(_, t)| t.digest.as_ref().is_some_and(|d| d.is(digest)))
                })
        })
    })
}

/// A checkpoint a source left when it crashed in its first split, holding `digest` as
/// delivered for the stream: the whole-space shard `-h` (epoch 1) and the new leaf `-h0`
/// (epoch 2), with `-h1` not yet written and no marker. The next source reads it; the halves
/// being small, it merges them back: `-h` written whole again, `-h0` deleted, the marker
/// created: every ConfigMap verb the source is granted.
async fn seed_interrupted_split(emu: &EmulatorServer, digest: &str) {
    let is = Api::<imagegate::api::ImageStream>::namespaced(emu.client(), "notebooks")
        .get("nb")
        .await
        .unwrap();
    let is = serde_json::to_value(is).unwrap();
    let generation = is["status"]["tags"][0]["items"][0]["generation"]
        .as_i64()
        .unwrap();
    let entry =
        json!({"u": is["metadata"]["uid"], "t": {"candidate": {"d": digest, "g": generation}}});
    for (suffix, epoch) in [("h", "1"), ("h0", "2")] {
        emu.seed(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": format!("imagegate-source-checkpoint-{suffix}"), "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/name": "imagegate", "app.kubernetes.io/component": "source-checkpoint"},
                "annotations": {checkpoint::EPOCH_ANNOTATION: epoch},
            },
            // The stream is in both: whichever half its hash falls in, the newest shard that
            // covers it holds it.
            "data": {"notebooks_nb": entry.to_string()},
        }))
        .await;
    }
}

#[tokio::test]
async fn the_source_makes_only_the_calls_config_grants_and_uses_every_grant() {
    let emu = emulator().await;
    let admin = &emu.client();
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "notebooks"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "importPolicy": {"scheduled": true}}]}
    }))
    .await;
    emu.import("notebooks", "nb", "candidate", A).await;
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, SOURCE_SA);

    // A split a crash interrupted: merged back (the state is small), the replaced shard
    // deleted, the marker written.
    seed_interrupted_split(&emu, A).await;
    let mut source = Program::from_deployment(
        "imagegate source",
        "400-source-deployment.yaml",
        "imagegate-source-0",
        &kubeconfig,
        &[("K_SINK", &sink.url)],
        &["--backoff-delay", "PT0.01S"],
    );
    eventually(
        "the interrupted split merged back into one shard, the half deleted",
        &source,
        move || async move {
            let names: Vec<String> = (checkpoint_shards(admin).await.iter())
                .filter_map(|cm| cm.metadata.name.clone())
                .collect();
            names == ["imagegate-source-checkpoint-h"]
        },
    )
    .await;
    assert!(checkpoint_holds(admin, A).await);
    // An import becomes an event, and the delivered digest is checkpointed.
    emu.import("notebooks", "nb", "candidate", B).await;
    let events = sink.wait_accepted(1).await;
    assert_eq!(
        events[0].extension("imagedigest").map(|v| v.to_string()),
        Some(B.to_string()),
        "A was delivered before the crash: only B is new"
    );
    eventually("a checkpoint write of B", &source, move || async move {
        checkpoint_holds(admin, B).await
    })
    .await;
    source.stop().await;

    // While it is down: an import, which the restart sends.
    emu.import("notebooks", "nb", "candidate", C).await;
    source.start();
    let events = sink.wait_accepted(2).await;
    assert_eq!(
        events[1].extension("imagedigest").map(|v| v.to_string()),
        Some(C.to_string()),
        "the restart sends the change made while down"
    );
    eventually("a checkpoint write of C", &source, move || async move {
        checkpoint_holds(admin, C).await
    })
    .await;
    source.stop().await;

    assert_least_privilege(&emu.requests().await, SOURCE_SA, &[]);
}

fn run_body(name: &str, params: &[(&str, &str)], spec: Value) -> CustomRun {
    crate::support::promotion_run(name, params, &json!({ "spec": spec }))
}

/// Creates a run and waits until it is done; returns its final (status, reason).
async fn run_to_end(
    runs: &Api<CustomRun>,
    controller: &Program,
    run: CustomRun,
) -> (String, String) {
    let name = run.metadata.name.clone().unwrap();
    runs.create(&PostParams::default(), &run).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let run = runs.get(&name).await.unwrap();
        if run.is_done() {
            let c = run.succeeded_condition().unwrap();
            return (c.status.clone(), c.reason.clone().unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "CustomRun {name} never finished: {:?}; {} logged:\n{}",
            run.status,
            controller.name,
            controller.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_controller_makes_only_the_calls_config_grants_and_uses_every_grant() {
    let emu = emulator().await;
    let admin = emu.client();
    // ds/nb: the candidate imported A then B, the served tag on A; the runs' account may promote.
    emu.seed_promotion_stream("ds", A, B).await;
    crate::support::controller::seed_promoter_role(&emu).await;
    crate::support::controller::grant_promote(&emu, "ds", "default").await;
    emu.set_image_metadata(
        B,
        json!({"Config": {"Labels": {"io.k8s.display-name": "nb"}}}),
    )
    .await;
    emu.seed(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "notebooks", "namespace": "ds"},
        "spec": {"checks": {"requiredLabels": ["io.k8s.display-name"]},
                 "validation": {"pipeline": "imagegate-promote", "tasks": ["validate"]}}
    }))
    .await;
    // The PipelineRun that validated B, as Tekton records it: the proof the promotion reads.
    crate::support::upstream::install_released_pipelinerun_crds(admin.clone()).await;
    let repository = Api::<imagegate::api::ImageStream>::namespaced(admin.clone(), "ds")
        .get("nb")
        .await
        .unwrap()
        .status
        .unwrap()
        .docker_image_repository;
    let mut pr = PipelineRunStandIn::create(&admin, "ds", "run-b", "imagegate-promote").await;
    pr.task_run("validate", Some(&format!("{repository}@{B}")), true)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, CONTROLLER_SA);
    let mut controller = Program::from_deployment(
        "imagegate controller",
        "401-controller-deployment.yaml",
        "imagegate-controller-0",
        &kubeconfig,
        &[],
        &[],
    );
    let runs: Api<CustomRun> = Api::namespaced(admin.clone(), "ds");

    // begin: the served tag is marked Validating (ImageStream get and patch, status, Events).
    let begin = run_body(
        "begin-b",
        &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        json!({}),
    );
    assert_eq!(
        run_to_end(&runs, &controller, begin).await,
        ("True".into(), "Validating".into())
    );
    // A failed validation with two retries: each attempt fails again, so the second Retrying
    // Event of the run is a patch of the first.
    let failing = run_body(
        "fail-b",
        &[
            ("imagestream", "nb"),
            ("digest", B),
            ("validation-status", "Failed"),
        ],
        json!({"retries": 2}),
    );
    assert_eq!(
        run_to_end(&runs, &controller, failing).await,
        ("False".into(), "ValidationFailed".into())
    );
    // A promotion through a named ImagePromotion with checks and a proof of validation
    // (ImagePromotion get, PipelineRun and TaskRun get, ImageStreamImage get).
    let mut promote = run_body(
        "promote-b",
        &[
            ("imagestream", "nb"),
            ("digest", B),
            ("validation-status", "Succeeded"),
        ],
        json!({"customRef": {"name": "notebooks"}}),
    );
    let owned: kube::core::ObjectMeta =
        serde_json::from_value(pr.child_metadata("promote")["metadata"].clone()).unwrap();
    promote.metadata.owner_references = owned.owner_references;
    promote.metadata.labels = owned.labels;
    pr.list_custom_run("promote-b", "promote").await;
    assert_eq!(
        run_to_end(&runs, &controller, promote).await,
        ("True".into(), "Promoted".into())
    );
    controller.stop().await;

    let records = emu.requests().await;
    assert!(
        !records.iter().any(|r| r.user == CONTROLLER_SA
            && !r.namespace.is_empty()
            && r.namespace != "ds"
            && r.namespace != NAMESPACE),
        "the controller acts only in the runs' namespace and its own"
    );
    assert_least_privilege(&records, CONTROLLER_SA, &["ds"]);
}

#[test]
fn config_follows_the_rbac_conventions_and_binds_every_service_account() {
    let policy = Policy::installed(&[]);
    let problems = policy.convention_problems();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let adapter = "system:serviceaccount:imagegate-system:imagegate-source-multi-tenant";
    for sa in [SOURCE_SA, CONTROLLER_SA, adapter] {
        let grants = policy.grants(sa);
        assert!(!grants.is_empty(), "config/ grants {sa} nothing");
        // The namespaced state (Leases, checkpoint ConfigMaps) is granted only in the
        // programs' own namespace.
        for g in &grants {
            let namespaced_state = g
                .rule
                .resources
                .iter()
                .any(|r| r == "leases" || r == "configmaps");
            if namespaced_state {
                assert_eq!(
                    g.namespace.as_deref(),
                    Some(NAMESPACE),
                    "{}: granted beyond {NAMESPACE}",
                    g.rule.at
                );
            }
        }
    }
}
