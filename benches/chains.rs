//! What the signed record of the validation (`validation.chains`, issue 32) adds to a promotion:
//! the same promotions, one at a time, create to final, with a proof of validation that asks for
//! the validating TaskRun only, and with one that also asks for Tekton Chains' signed record of
//! it (the bench plays Chains, signing each TaskRun's provenance with the platform's key as
//! Chains' `tekton` storage does: tests/it/support/chains.rs), the two phases interleaved in one
//! run against the emulator (in the bench process) with Tekton's released PipelineRun and TaskRun
//! CRDs; and the API requests each promotion makes, from the emulator's request log. No registry
//! is asked: Chains' `tekton` storage is the TaskRun's annotations. Not a test: it prints a report
//! (the numbers go into BENCHMARKS.md).
//!
//! `IMAGEGATE_TEKTON_PIPELINE_DIR="$(scripts/realcluster manifests tekton-pipeline)" cargo bench
//! --bench chains` (RUNS=60 per phase by default).

mod common;

// What the tests play Tekton and Chains with, included by path (only part of each is used here).
#[path = "../tests/it/support/chains.rs"]
mod chains;
#[allow(dead_code)]
#[path = "../tests/it/support/tekton.rs"]
mod tekton;
#[allow(dead_code)]
#[path = "../tests/it/support/upstream.rs"]
mod upstream;

use common::{Killed, ms, percentile, sorted};
use std::process::{Command, Stdio};
use std::time::Instant;

use imagegate::api::CustomRun;
use imagegate_emulator::{Config, Emulator};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

/// The phases: a namespace each.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    /// `validation.pipeline` and `tasks`: the TaskRun must have validated the candidate.
    Proof,
    /// The same, and Chains' record of the TaskRun signed by the platform's key.
    Chains,
}

impl Phase {
    fn namespace(self) -> &'static str {
        match self {
            Phase::Proof => "proof",
            Phase::Chains => "chains",
        }
    }
}

fn main() {
    common::run(bench());
}

async fn bench() {
    let runs = common::env_usize("RUNS", 60);
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str(include_str!("../config/300-imagepromotion-crd.yaml"))
        .unwrap();
    emu.seed_str(include_str!("../config/204-clusterrole-promoter.yaml"))
        .unwrap();
    let client = emu.client().unwrap();
    upstream::install_released_pipelinerun_crds(client.clone()).await;
    let platform = chains::key();
    emu.seed(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "imagegate-system"}}),
    )
    .unwrap();
    emu.seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "chains-keys", "namespace": "imagegate-system"},
        "data": {"cosign.pub": platform.pem}}))
        .unwrap();
    let phases = [Phase::Proof, Phase::Chains];
    for phase in phases {
        let ns = phase.namespace();
        emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
        emu.seed_str(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: promoter, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-promoter}}\n\
             subjects:\n- {{kind: ServiceAccount, name: default, namespace: {ns}}}\n"
        ))
        .unwrap();
        let mut validation = json!({"pipeline": "imagegate-promote", "tasks": ["validate"]});
        if phase == Phase::Chains {
            validation["chains"] = json!({"keys": [{"name": "chains",
                "configMapKeyRef": {"name": "chains-keys", "key": "cosign.pub"}}]});
        }
        emu.seed(
            json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "gov", "namespace": ns},
            "spec": {"validation": validation}}),
        )
        .unwrap();
    }

    // One stream and one validated PipelineRun per run, made (and signed where the phase asks)
    // beforehand: what is timed is the promotion.
    let served = format!("sha256:{}", "a".repeat(64));
    let mut prepared = Vec::new();
    let t_setup = Instant::now();
    for phase in phases {
        let ns = phase.namespace();
        let task_runs: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &tekton::resource("TaskRun", "taskruns"));
        for i in 0..runs {
            let name = format!("nb-{i}");
            let digest = format!("sha256:{:064x}", 0x1000 + i);
            emu.seed(json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"tags": [
                    {"name": "candidate", "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:latest")},
                     "importPolicy": {"scheduled": true}}]}}))
                .unwrap();
            emu.import(ns, &name, "candidate", Some(&served)).unwrap();
            let streams: Api<imagegate::api::ImageStream> = Api::namespaced(client.clone(), ns);
            streams
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(json!({"spec": {"tags": [{"name": "latest",
                        "from": {"kind": "ImageStreamImage", "name": format!("{name}@{served}")}}]}})),
                )
                .await
                .unwrap();
            emu.import(ns, &name, "candidate", Some(&digest)).unwrap();
            let repo = (streams.get(&name).await.unwrap().status)
                .map(|s| s.docker_image_repository)
                .unwrap_or_default();
            let image = format!("{repo}@{digest}");
            let mut pr = tekton::PipelineRunStandIn::create(
                &client,
                ns,
                &format!("pr-{i}"),
                "imagegate-promote",
            )
            .await;
            let task_run = pr
                .task_run_that_ran("validate", Some(&image), true, Some(chains::ran(&image)))
                .await;
            if phase == Phase::Chains {
                let (uid, statement) = chains::record(&task_runs, &task_run).await;
                chains::sign(&task_runs, &task_run, &uid, &statement, &platform).await;
            }
            prepared.push((name, digest, pr));
        }
    }
    eprintln!(
        "seeded {} streams and validations in {:?}",
        prepared.len(),
        t_setup.elapsed()
    );

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "controller").unwrap();
    let admin = common::free_port();
    let _controller = Killed::new(
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["controller", "--admin-addr", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", &kubeconfig)
            .env("POD_NAMESPACE", "imagegate-system")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_ready(admin).await;

    // The phases interleaved, run by run, so that a drift of the machine weighs on each alike.
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); phases.len()];
    let mut requests = vec![0usize; phases.len()];
    let mut one: Vec<Vec<String>> = vec![Vec::new(); phases.len()];
    for i in 0..runs {
        for (p, phase) in phases.iter().enumerate() {
            let (name, digest, pr) = &mut prepared[p * runs + i];
            let ns = phase.namespace();
            let before = emu.requests().len();
            let took = promote(&client, ns, name, digest, pr).await;
            let all = emu.requests();
            // The controller's own requests (the bench's are as admin).
            let controller: Vec<String> = (all[before..].iter())
                .filter(|r| r.user == "controller")
                .map(|r| format!("{} {}{}", r.verb, r.resource, sub(&r.subresource)))
                .collect();
            requests[p] += controller.len();
            if i == 0 {
                one[p] = controller;
            }
            latencies[p].push(took);
        }
    }

    common::report_header(
        "imagegate Tekton Chains record benchmark",
        "emulator in the bench process with Tekton's released PipelineRun/TaskRun CRDs, controller a separate release binary, records signed as Chains' tekton storage writes them; runs one at a time, the two phases interleaved",
    );
    println!("| promotions per phase | {runs} |");
    let base = percentile(&sorted(&latencies[0]), 0.5);
    for (p, phase) in phases.iter().enumerate() {
        let s = sorted(&latencies[p]);
        let what = match phase {
            Phase::Proof => "proof of validation (the TaskRun)",
            Phase::Chains => "proof with Chains' signed record",
        };
        println!(
            "| {what}: create-to-final p50 / p99 | {} / {} ({:.2}x the proof's p50) |",
            ms(percentile(&s, 0.5)),
            ms(percentile(&s, 0.99)),
            percentile(&s, 0.5) / base
        );
        println!(
            "| {what}: the controller's API requests per promotion | {:.1} |",
            requests[p] as f64 / runs as f64
        );
    }
    for (p, phase) in phases.iter().enumerate() {
        println!();
        println!(
            "The controller's API requests of the first promotion with {}:",
            phase.namespace()
        );
        println!();
        for r in &one[p] {
            println!("    {r}");
        }
    }
    emu.shutdown().await;
}

fn sub(subresource: &str) -> String {
    if subresource.is_empty() {
        String::new()
    } else {
        format!("/{subresource}")
    }
}

/// Creates the promote run of `pr` for `digest` on `ns/name`, lists it among the PipelineRun's
/// children as Tekton does right after, and waits until it is final; the seconds it took. A run
/// that does not end Promoted stops the benchmark.
async fn promote(
    client: &kube::Client,
    ns: &str,
    name: &str,
    digest: &str,
    pr: &mut tekton::PipelineRunStandIn,
) -> f64 {
    let runs: Api<CustomRun> = Api::namespaced(client.clone(), ns);
    let run_name = format!("{}-promote", pr.name);
    let mut body = json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": run_name, "namespace": ns},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "name": "gov"},
                 "params": [{"name": "imagestream", "value": name},
                            {"name": "digest", "value": digest},
                            {"name": "validation-status", "value": "Succeeded"}]}
    });
    json_patch::merge(&mut body, &pr.child_metadata("promote"));
    let run: CustomRun = serde_json::from_value(body).unwrap();
    let start = Instant::now();
    runs.create(&PostParams::default(), &run).await.unwrap();
    pr.list_custom_run(&run_name, "promote").await;
    common::promoted_since(&runs, &run_name, start).await
}
