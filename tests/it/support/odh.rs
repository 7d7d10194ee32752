//! Open Data Hub notebook streams for the end-to-end tests, built from the real objects in
//! `tests/fixtures/`: the shipped jupyter-minimal stream (its operator placeholders replaced by
//! digests, as the operator's kustomize does) with a gated candidate tag, a custom (BYON) image
//! as the dashboard creates it, and the ImagePromotion that enables the `odh` section.

use imagegate::api::ImageStream;
use kube::api::Api;
use serde_json::{Value, json};

use super::EmulatorServer;

/// The shipped stream's name.
pub const MINIMAL: &str = "jupyter-minimal-notebook";
/// Its served tag (N).
pub const SERVED: &str = "2025.2";
/// The upstream repository of the notebook images.
pub const REPO: &str = "quay.io/opendatahub/workbench-images";

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// `ds/jupyter-minimal-notebook` from the operator's manifest: N (`2025.2`, recommended, commit
/// `commit-a`) serving `served`, N-1 (`2025.1`) serving `n1`, and a hidden scheduled `candidate`
/// tag that imported `served` then `candidate`.
pub async fn seed_shipped(emu: &EmulatorServer, served: &str, n1: &str, candidate: &str) {
    let mut v: Value = serde_norway::from_str(&fixture(
        "odh-notebooks_jupyter-minimal-notebook_imagestream_manifest.yaml",
    ))
    .unwrap();
    v["metadata"]["namespace"] = json!("ds");
    v["spec"]["tags"][0]["from"]["name"] = json!(format!("{REPO}@{served}"));
    v["spec"]["tags"][0]["annotations"]["opendatahub.io/notebook-build-commit"] = json!("commit-a");
    v["spec"]["tags"][1]["from"]["name"] = json!(format!("{REPO}@{n1}"));
    v["spec"]["tags"][1]["annotations"]["opendatahub.io/notebook-build-commit"] =
        json!("commit-n1");
    v["spec"]["tags"].as_array_mut().unwrap().push(json!({
        "name": "candidate",
        "from": {"kind": "DockerImage", "name": format!("{REPO}:jupyter-minimal-cpu-py312-ubi9")},
        "importPolicy": {"scheduled": true}
    }));
    emu.seed(v).await;
    emu.import("ds", MINIMAL, SERVED, served).await;
    emu.import("ds", MINIMAL, "2025.1", n1).await;
    emu.import("ds", MINIMAL, "candidate", served).await;
    emu.import("ds", MINIMAL, "candidate", candidate).await;
}

/// `ds/custom-my-image`: a custom image as the dashboard creates it (one tag, no scheduled
/// import), in the gated shape before its first promotion: only the scheduled `candidate` tag,
/// which imported `candidate`. The stream's metadata is the BYON import pipeline's.
pub async fn seed_custom(emu: &EmulatorServer, candidate: &str) {
    let text = fixture("byon_import-pipeline_imagestream_created-then-patched.yaml")
        .replace("$(params.desc)", "My team's image")
        .replace("$(params.name)", "My image")
        .replace("$(params.url)", "quay.io/me/img:latest")
        .replace("$(params.creator)", "admin")
        .replace("$(context.pipelineRun.name)", "custom-my-image")
        .replace("$(context.pipelineRun.namespace)", "ds");
    let doc = serde_norway::Deserializer::from_str(&text).next().unwrap();
    let mut v: Value = serde::Deserialize::deserialize(doc).unwrap();
    v["metadata"]["labels"]["opendatahub.io/notebook-image"] = json!("true");
    v["spec"]["tags"] = json!([{
        "name": "candidate",
        "from": {"kind": "DockerImage", "name": "quay.io/me/img:latest"},
        "importPolicy": {"scheduled": true}
    }]);
    emu.seed(v).await;
    emu.import("ds", "custom-my-image", "candidate", candidate)
        .await;
}

/// The ImagePromotion `notebooks` in `ds` with `odh.enabled` and `extra` merged into its spec.
pub async fn seed_promotion(emu: &EmulatorServer, extra: Value) {
    let mut spec = json!({"candidateTag": "candidate", "odh": {"enabled": true}});
    json_patch::merge(&mut spec, &extra);
    emu.seed(json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "notebooks", "namespace": "ds"},
        "spec": spec
    }))
    .await;
}

/// The stream `name` in `ds`.
pub async fn stream(client: &kube::Client, name: &str) -> ImageStream {
    Api::<ImageStream>::namespaced(client.clone(), "ds")
        .get(name)
        .await
        .unwrap()
}
