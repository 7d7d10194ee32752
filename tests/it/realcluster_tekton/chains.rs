//! The signed record of the validation (issue 32) with the real Tekton Chains (v0.26.0, its
//! `in-toto` format in its `tekton` storage, its key made by `up --tekton`) signing the TaskRuns
//! of the real Tekton Pipelines controller, and `imagegate controller` as its ServiceAccount
//! reading Chains' public key from a ConfigMap of `imagegate-system`:
//! - a validation Chains signed: promoted, the `checks` result naming the key;
//! - the runner marks the `validate` TaskRun `chains.tekton.dev/signed` while it runs: the real
//!   Chains skips it, and `promote` refuses the unsigned TaskRun;
//! - the runner copies the record Chains signed for B's validation onto a TaskRun that validated
//!   C (under that TaskRun's own uid): the signature is Chains' own, the record names B, and
//!   `promote` refuses it.
//!
//! In the test group of the other real-Tekton tests that run `imagegate controller`.

use serde_json::{Value, json};

use super::cluster::{Kubectl, cluster, condition, finished, succeeded};
use super::contract::{block_on, controller, image_api};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const NS: &str = "tekton-chains-proof";

fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// The proof asks for Chains' record of `validate`, signed by the key in ConfigMap chains-keys.
const PROMOTION: &str = r#"
apiVersion: imagegate.dev/v1alpha1
kind: ImagePromotion
metadata: {name: notebooks}
spec:
  candidateTag: candidate
  servedTag: latest
  validation:
    pipeline: imagegate-promote
    tasks: [validate]
    chains:
      keys:
      - name: chains
        configMapKeyRef: {name: chains-keys, key: cosign.pub}
"#;

/// begin -> validate (the shipped smoke test on begin's `image`) -> promote.
const PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: imagegate-promote}
spec:
  params:
  - {name: imagestream, type: string}
  - {name: digest, type: string}
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
"#;

/// The label of these PipelineRuns (Tekton copies it to their pods) a held validation selects.
const HOLD: &str = "imagegate.test/run";

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

/// A kwok Stage, weighted over the shipped one, that keeps the `validate` pod of PipelineRun
/// `run` Running for `seconds`: time for the runner to write on its TaskRun.
fn hold_validate(k: &Kubectl, run: &str, seconds: u64) {
    let shipped =
        std::fs::read_to_string(format!("{ROOT}/realcluster/kwok/tekton-step-stage.yaml")).unwrap();
    let mut stage: Value = serde_norway::from_str(&shipped).unwrap();
    stage["metadata"] = json!({"name": format!("hold-validate-{run}")});
    stage["spec"]["weight"] = json!(1);
    stage["spec"]["delay"] = json!({"durationMilliseconds": seconds * 1000});
    let labels = &mut stage["spec"]["selector"]["matchLabels"];
    labels[HOLD] = json!(run);
    labels["tekton.dev/pipelineTask"] = json!("validate");
    k.create(NS, &stage.to_string());
}

fn install(k: &Kubectl) {
    k.ok(&["apply", "--server-side", "-k", &format!("{ROOT}/config")]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/imagepromotions.imagegate.dev",
    ]);
    k.namespace(NS);
    k.create(
        NS,
        &std::fs::read_to_string(format!("{ROOT}/tekton/330-controller-rbac.yaml")).unwrap(),
    );
    k.create(NS, PROMOTION);
    k.create(
        NS,
        &std::fs::read_to_string(format!("{ROOT}/tekton/200-task-smoke-test.yaml")).unwrap(),
    );
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
    // Chains' public key, where the platform keeps it: the controller's own namespace.
    let key = cluster().dir.join("chains/cosign.pub");
    k.ok(&[
        "create",
        "configmap",
        "chains-keys",
        "-n",
        "imagegate-system",
        &format!("--from-file=cosign.pub={}", key.display()),
    ]);
    k.ok(&[
        "wait",
        "--for=condition=Available",
        "--timeout=60s",
        "apiservice/v1.image.openshift.io",
    ]);
}

/// What `nb`'s served tag serves.
fn served(k: &Kubectl) -> String {
    let stream = k.get(NS, "imagestream/nb").expect("nb is served");
    (stream["status"]["tags"].as_array())
        .and_then(|t| t.iter().find(|t| t["tag"] == "latest"))
        .and_then(|t| t["items"][0]["image"].as_str())
        .unwrap_or("")
        .to_string()
}

/// `promote` of PipelineRun `run` ends `Unverified` saying `why`.
fn unverified(k: &Kubectl, run: &str, why: &str) {
    let promote = k.wait(NS, &format!("customrun/{run}-promote"), 120, finished);
    let done = condition(&promote, "Succeeded").unwrap();
    assert_eq!(done["reason"], "Unverified", "{promote:#}");
    assert!(
        done["message"].as_str().unwrap().contains(why),
        "{why:?} not said: {promote:#}"
    );
}

/// The annotation Chains keeps its signature of TaskRun `uid` in.
fn signature_key(uid: &str) -> String {
    format!("chains.tekton.dev/signature-taskrun-{uid}")
}

#[test]
fn only_the_record_the_real_chains_signed_for_this_validation_of_this_candidate_proves_it() {
    let c = cluster();
    let k = c.kubectl();
    install(&k);
    let emu = image_api();
    block_on(emu.seed_promotion_stream(NS, &digest('a'), &digest('b')));
    let dir = tempfile::tempdir().unwrap();
    let (_controller, _) = controller(dir.path());

    // Chains signs the validation of B; promote waits for the record if it must, then promotes.
    k.create(NS, &pipelinerun("signed", &digest('b')));
    let run = k.wait(NS, "pipelinerun/signed", 120, finished);
    assert_eq!(succeeded(&run), Some("True"), "{run:#}");
    let promote = k.get(NS, "customrun/signed-promote").unwrap();
    assert_eq!(
        condition(&promote, "Succeeded").unwrap()["reason"],
        "Promoted"
    );
    let checks = (promote["status"]["results"]
        .as_array()
        .into_iter()
        .flatten())
    .find(|r| r["name"] == "checks")
    .and_then(|r| r["value"].as_str())
    .unwrap_or_default()
    .to_string();
    let checks: Value = serde_json::from_str(&checks).unwrap();
    assert_eq!(checks[0]["name"], "chains", "{checks}");
    assert!(
        checks[0]["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"(TaskRun "signed-validate") by "chains""#),
        "{checks}"
    );
    assert_eq!(served(&k), digest('b'));
    let signed = k.get(NS, "taskrun/signed-validate").unwrap();
    let signed_uid = signed["metadata"]["uid"].as_str().unwrap().to_string();
    let record = signed["metadata"]["annotations"][signature_key(&signed_uid)]
        .as_str()
        .expect("Chains signed the TaskRun")
        .to_string();

    // The runner marks the TaskRun signed while it runs: the real Chains skips it.
    block_on(emu.import(NS, "nb", "candidate", &digest('c')));
    hold_validate(&k, "marked", 10);
    k.create(NS, &pipelinerun("marked", &digest('c')));
    k.wait(NS, "taskrun/marked-validate", 60, |_| true);
    k.ok(&[
        "annotate",
        "-n",
        NS,
        "taskrun/marked-validate",
        "chains.tekton.dev/signed=true",
    ]);
    unverified(
        &k,
        "marked",
        "carries no signature for its own uid: Chains could not make its record",
    );
    let marked = k.get(NS, "taskrun/marked-validate").unwrap();
    assert_eq!(
        succeeded(&marked),
        Some("True"),
        "it did validate: {marked:#}"
    );
    let uid = marked["metadata"]["uid"].as_str().unwrap();
    assert!(
        marked["metadata"]["annotations"][signature_key(uid)].is_null(),
        "the real Chains skipped the marked TaskRun: {marked:#}"
    );
    assert_eq!(served(&k), digest('b'), "the served tag stays");

    // The runner copies B's record, signed by the real Chains, onto the TaskRun validating D,
    // under that TaskRun's own uid (and marks it, so Chains leaves it alone).
    block_on(emu.import(NS, "nb", "candidate", &digest('d')));
    hold_validate(&k, "copied", 10);
    k.create(NS, &pipelinerun("copied", &digest('d')));
    let copied = k.wait(NS, "taskrun/copied-validate", 60, |_| true);
    let uid = copied["metadata"]["uid"].as_str().unwrap();
    k.ok(&[
        "annotate",
        "-n",
        NS,
        "taskrun/copied-validate",
        "chains.tekton.dev/signed=true",
        &format!("{}={record}", signature_key(uid)),
    ]);
    unverified(&k, "copied", "its Chains record validated");
    let promote = k.get(NS, "customrun/copied-promote").unwrap();
    let message = condition(&promote, "Succeeded").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains(&format!("@{}\", not {}", digest('b'), digest('d'))),
        "{message}"
    );
    assert_eq!(served(&k), digest('b'), "the served tag stays");
}
