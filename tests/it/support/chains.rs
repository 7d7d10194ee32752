//! Tekton Chains' `tekton` storage, played by a test (or a benchmark): the in-toto/slsa/v1
//! statement Chains makes of a TaskRun, signed in a DSSE envelope and written in the TaskRun's
//! `chains.tekton.dev/signature-taskrun-<uid>` annotation with Chains' `signed` mark. The real
//! Chains controller signs on the real Tekton tier (`realcluster_tekton::chains`).
//!
//! It uses only kube, serde_json, base64, sigstore and the crate's DSSE encoding: the Chains
//! benchmark includes this file by path.

use base64::Engine as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use sigstore::crypto::{SigStoreSigner, SigningScheme};

const IN_TOTO: &str = "application/vnd.in-toto+json";

/// A signing key: Chains' (the platform's), or anyone else's.
pub struct Key {
    signer: SigStoreSigner,
    /// Its public half, PEM.
    pub pem: String,
}

/// A new ECDSA P-256 key, as `cosign generate-key-pair` makes for Chains.
pub fn key() -> Key {
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .unwrap();
    let pem = (signer.to_sigstore_keypair().unwrap())
        .public_key_to_pem()
        .unwrap();
    Key { signer, pem }
}

/// What Chains' slsa/v1 format records of `run`: its params, its labels and the steps of its
/// recorded spec (pkg/chains/formats/slsa/v1/taskrun, attest.Step).
pub fn provenance(run: &Value) -> Value {
    let params: serde_json::Map<String, Value> = (run["spec"]["params"].as_array().into_iter())
        .flatten()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["value"].clone()))
        .collect();
    let steps: Vec<Value> = (run["status"]["taskSpec"]["steps"].as_array().into_iter())
        .flatten()
        .map(|step| {
            let command: Vec<&str> = (step["command"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .collect();
            let entry = match step["script"].as_str() {
                Some(script) if !script.is_empty() => script.to_string(),
                _ => command.join(" "),
            };
            json!({"entryPoint": entry, "arguments": step["args"].clone(),
                "environment": {"container": step["name"], "image": "oci://"}, "annotations": null})
        })
        .collect();
    json!({"_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://slsa.dev/provenance/v0.2", "subject": null,
        "predicate": {"builder": {"id": "https://tekton.dev/chains/v2"},
            "buildType": "tekton.dev/v1/TaskRun",
            "invocation": {"configSource": {}, "parameters": params,
                "environment": {"labels": run["metadata"]["labels"]}},
            "buildConfig": {"steps": steps}, "metadata": {}, "materials": []}})
}

/// Signs `statement` as Chains does and writes it on TaskRun `name` of `task_runs` under `uid`
/// (its own, unless the caller copies a record), with Chains' `signed` mark.
pub async fn sign(
    task_runs: &Api<DynamicObject>,
    name: &str,
    uid: &str,
    statement: &Value,
    key: &Key,
) {
    let payload = serde_json::to_vec(statement).unwrap();
    let signed = imagegate::controller::dsse::pae(IN_TOTO, &payload);
    let b64 = base64::engine::general_purpose::STANDARD;
    let envelope = json!({"payloadType": IN_TOTO, "payload": b64.encode(&payload),
        "signatures": [{"keyid": "", "sig": b64.encode(key.signer.sign(&signed).unwrap())}]});
    let annotations = json!({"metadata": {"annotations": {
        "chains.tekton.dev/signed": "true",
        format!("chains.tekton.dev/signature-taskrun-{uid}"):
            b64.encode(serde_json::to_vec(&envelope).unwrap()),
    }}});
    task_runs
        .patch(name, &PatchParams::default(), &Patch::Merge(&annotations))
        .await
        .unwrap();
}

/// Reads TaskRun `name`: its uid, and the provenance Chains makes of it.
pub async fn record(task_runs: &Api<DynamicObject>, name: &str) -> (String, Value) {
    let run = task_runs.get(name).await.unwrap();
    let uid = run.metadata.uid.clone().unwrap();
    (uid, provenance(&serde_json::to_value(&run).unwrap()))
}

/// The recorded spec (`status.taskSpec`) of a validation of `image`: one step that probes it.
pub fn ran(image: &str) -> Value {
    json!({"params": [{"name": "image", "type": "string"}],
        "steps": [{"name": "smoke", "image": "registry/tools@sha256:1111", "script": format!("probe {image}")}]})
}
