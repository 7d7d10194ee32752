//! The record's verification against envelopes signed here with a fresh P-256 key, in the shape
//! Tekton Chains writes (`tests/it/realcluster_tekton/chains.rs` holds it to the real Chains).

use base64::Engine as _;
use serde_json::{Value, json};
use sigstore::crypto::SigningScheme;

use super::*;

const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const PR_UID: &str = "pr-uid-1";
const TR_UID: &str = "tr-uid-1";

struct Key {
    signer: sigstore::crypto::SigStoreSigner,
    pem: String,
}

fn key() -> Key {
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .unwrap();
    let pem = signer
        .to_sigstore_keypair()
        .unwrap()
        .public_key_to_pem()
        .unwrap();
    Key { signer, pem }
}

fn keys(named: &[(&str, &Key)]) -> Vec<(String, Result<String, String>)> {
    (named.iter())
        .map(|(n, k)| (n.to_string(), Ok(k.pem.clone())))
        .collect()
}

/// The recorded spec of the TaskRun: two steps, a script and a command with args.
fn task_spec() -> Value {
    json!({"params": [{"name": "image", "type": "string"}], "steps": [
        {"name": "smoke", "image": "registry/tools@sha256:1111", "script": format!("run registry/ds/nb@{B}")},
        {"name": "report", "image": "registry/tools@sha256:1111", "command": ["/bin/echo", "-n"], "args": ["done"]},
    ]})
}

/// The statement Chains' slsa/v1 format makes of that TaskRun.
fn statement(image: &str, pr_uid: &str, task: &str) -> Value {
    json!({
        "_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://slsa.dev/provenance/v0.2",
        "subject": null,
        "predicate": {
            "builder": {"id": "https://tekton.dev/chains/v2"},
            "buildType": "tekton.dev/v1/TaskRun",
            "invocation": {
                "configSource": {},
                "parameters": {"image": image},
                "environment": {"labels": {
                    "tekton.dev/pipelineRun": "pr", "tekton.dev/pipelineRunUID": pr_uid,
                    "tekton.dev/pipelineTask": task, "tekton.dev/task": "imagegate-smoke-test"}}
            },
            "buildConfig": {"steps": [
                {"entryPoint": format!("run registry/ds/nb@{B}"), "arguments": null,
                 "environment": {"container": "smoke", "image": "oci://registry/tools@sha256:1111"}, "annotations": null},
                {"entryPoint": "/bin/echo -n", "arguments": ["done"],
                 "environment": {"container": "report", "image": "oci://registry/tools@sha256:1111"}, "annotations": null},
            ]},
            "metadata": {"completeness": {"parameters": false, "environment": false, "materials": false}},
            "materials": []
        }
    })
}

/// The annotation's value: base64 of the DSSE envelope of `statement`, signed by `key`.
fn envelope(statement: &Value, key: &Key) -> String {
    let payload = serde_json::to_vec(statement).unwrap();
    let sig = key.signer.sign(&pae(IN_TOTO, &payload)).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let envelope = json!({"payloadType": IN_TOTO, "payload": b64.encode(&payload),
        "signatures": [{"keyid": "SHA256:x", "sig": b64.encode(sig)}]});
    b64.encode(serde_json::to_vec(&envelope).unwrap())
}

fn task_run(annotations: Value) -> TaskRun {
    serde_json::from_value(json!({
        "metadata": {"name": "pr-validate", "uid": TR_UID, "annotations": annotations},
        "spec": {"params": [{"name": "image", "value": format!("registry/ds/nb@{B}")}]},
        "status": {"taskSpec": task_spec(), "conditions": [{"type": "Succeeded", "status": "True"}]}
    }))
    .unwrap()
}

fn signed(statement: &Value, key: &Key) -> TaskRun {
    task_run(json!({
        SIGNED: "true",
        signature_annotation(TR_UID): envelope(statement, key),
    }))
}

fn want() -> Expected<'static> {
    Expected {
        pipeline_run_uid: PR_UID,
        task: "validate",
        digest: B,
    }
}

fn refused(got: Result<String, Lack>) -> String {
    match got {
        Err(Lack::Refused(why)) => why,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_record_chains_signed_for_this_run_names_the_key() {
    let platform = key();
    let run = signed(
        &statement(&format!("r/nb@{B}"), PR_UID, "validate"),
        &platform,
    );
    let got = verify(
        &run,
        &keys(&[("old", &key()), ("chains", &platform)]),
        want(),
    );
    assert_eq!(got, Ok("chains".into()));
}

#[test]
fn no_record_yet_is_waited_for_and_a_mark_without_one_is_refused() {
    let platform = keys(&[("chains", &key())]);
    assert!(matches!(
        verify(&task_run(json!({})), &platform, want()),
        Err(Lack::NotYet(_))
    ));
    let why = refused(verify(
        &task_run(json!({SIGNED: "true"})),
        &platform,
        want(),
    ));
    assert!(why.contains("kept Chains from signing it"), "{why}");
    let why = refused(verify(
        &task_run(json!({SIGNED: "failed"})),
        &platform,
        want(),
    ));
    assert!(why.contains("failed to sign"), "{why}");
}

#[test]
fn a_record_signed_by_another_key_proves_nothing() {
    let attacker = key();
    let run = signed(
        &statement(&format!("r/nb@{B}"), PR_UID, "validate"),
        &attacker,
    );
    let why = refused(verify(&run, &keys(&[("chains", &key())]), want()));
    assert!(
        why.contains("signed by none of the Chains keys (chains)"),
        "{why}"
    );
}

#[test]
fn a_record_of_another_digest_run_or_task_proves_nothing() {
    let platform = key();
    let trusted = keys(&[("chains", &platform)]);
    let cases = [
        (
            statement(&format!("r/nb@{C}"), PR_UID, "validate"),
            "not sha256:bbbb",
        ),
        (
            statement("r/nb:latest", PR_UID, "validate"),
            "validated \"r/nb:latest\"",
        ),
        (
            statement(&format!("r/nb@{B}"), "other-uid", "validate"),
            "another PipelineRun",
        ),
        (
            statement(&format!("r/nb@{B}"), PR_UID, "scan"),
            "another pipeline task",
        ),
    ];
    for (statement, want_why) in cases {
        let why = refused(verify(&signed(&statement, &platform), &trusted, want()));
        assert!(why.contains(want_why), "{want_why:?} not in {why:?}");
    }
}

#[test]
fn steps_other_than_the_recorded_spec_prove_nothing() {
    let platform = key();
    let trusted = keys(&[("chains", &platform)]);
    let mut other = statement(&format!("r/nb@{B}"), PR_UID, "validate");
    other["predicate"]["buildConfig"]["steps"][1]["arguments"] = json!(["skipped"]);
    let why = refused(verify(&signed(&other, &platform), &trusted, want()));
    assert!(why.contains("ran step \"report\" otherwise"), "{why}");
    let mut fewer = statement(&format!("r/nb@{B}"), PR_UID, "validate");
    fewer["predicate"]["buildConfig"]["steps"] = json!([]);
    let why = refused(verify(&signed(&fewer, &platform), &trusted, want()));
    assert!(
        why.contains("names 0 steps, the TaskRun's recorded spec 2"),
        "{why}"
    );
}

#[test]
fn a_record_copied_from_another_taskrun_or_edited_proves_nothing() {
    let platform = key();
    let trusted = keys(&[("chains", &platform)]);
    let good = statement(&format!("r/nb@{B}"), PR_UID, "validate");
    // Under the uid of the TaskRun it was made for, not this one's.
    let copied = task_run(json!({SIGNED: "true",
        signature_annotation("another-uid"): envelope(&good, &platform)}));
    let why = refused(verify(&copied, &trusted, want()));
    assert!(why.contains("no signature for its own uid"), "{why}");
    // The statement changed after signing, the signature kept.
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut envelope: Value = serde_json::from_slice(
        &b64.decode(envelope(
            &statement(&format!("r/nb@{C}"), PR_UID, "validate"),
            &platform,
        ))
        .unwrap(),
    )
    .unwrap();
    envelope["payload"] = json!(b64.encode(serde_json::to_vec(&good).unwrap()));
    let edited = task_run(json!({SIGNED: "true",
        signature_annotation(TR_UID): b64.encode(serde_json::to_vec(&envelope).unwrap())}));
    let why = refused(verify(&edited, &trusted, want()));
    assert!(why.contains("signed by none"), "{why}");
}

#[test]
fn a_record_not_in_chains_in_toto_format_is_refused_with_what_it_is() {
    let platform = key();
    let trusted = keys(&[("chains", &platform)]);
    let mut v1 = statement(&format!("r/nb@{B}"), PR_UID, "validate");
    v1["predicateType"] = json!("https://slsa.dev/provenance/v1");
    let why = refused(verify(&signed(&v1, &platform), &trusted, want()));
    assert!(
        why.contains("has predicate \"https://slsa.dev/provenance/v1\""),
        "{why}"
    );
    for garbage in ["not base64!", "bm90IGpzb24="] {
        let run = task_run(json!({SIGNED: "true", signature_annotation(TR_UID): garbage}));
        let why = refused(verify(&run, &trusted, want()));
        assert!(why.starts_with("its Chains record is not"), "{why}");
    }
}

#[test]
fn an_unusable_key_is_named_and_another_still_counts() {
    let platform = key();
    let run = signed(
        &statement(&format!("r/nb@{B}"), PR_UID, "validate"),
        &platform,
    );
    let mut trusted = vec![(
        "gone".to_string(),
        Err("ConfigMap chains-keys does not exist in namespace imagegate-system".to_string()),
    )];
    let why = refused(verify(&run, &trusted, want()));
    assert!(
        why.contains("unusable: \"gone\": ConfigMap chains-keys"),
        "{why}"
    );
    trusted.extend(keys(&[("chains", &platform)]));
    assert_eq!(verify(&run, &trusted, want()), Ok("chains".into()));
}

/// What the real Tekton Chains v0.26.0 wrote on a real Tekton v1.15.0 TaskRun (tests/data/chains/).
fn recorded() -> (TaskRun, crate::controller::proof::Keys) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/chains/");
    let text =
        std::fs::read_to_string(format!("{dir}taskrun-signed-by-chains-v0.26.0.json")).unwrap();
    let pem = std::fs::read_to_string(format!("{dir}chains-cosign.pub")).unwrap();
    (
        serde_json::from_str(&text).unwrap(),
        vec![("chains".to_string(), Ok(pem))],
    )
}

#[test]
fn the_record_the_real_chains_wrote_holds_for_its_own_run_and_no_other() {
    let (run, trusted) = recorded();
    let labels = run.metadata.labels.clone().unwrap();
    let pr_uid = labels["tekton.dev/pipelineRunUID"].clone();
    let want = Expected {
        pipeline_run_uid: &pr_uid,
        task: "validate",
        digest: B,
    };
    assert_eq!(verify(&run, &trusted, want), Ok("chains".into()));
    // Another candidate, another PipelineRun, another key: each refused.
    let other = Expected { digest: C, ..want };
    assert!(refused(verify(&run, &trusted, other)).contains("not sha256:cccc"));
    let elsewhere = Expected {
        pipeline_run_uid: "another",
        ..want
    };
    assert!(refused(verify(&run, &trusted, elsewhere)).contains("another PipelineRun"));
    let stranger = keys(&[("chains", &key())]);
    assert!(refused(verify(&run, &stranger, want)).contains("signed by none"));
    // The recorded spec edited after Chains signed: its steps no longer match the record.
    let mut edited = run.clone();
    let spec = edited.status.as_mut().unwrap().task_spec.as_mut().unwrap();
    spec["steps"][0]["command"] = json!(["/bin/true"]);
    assert!(refused(verify(&edited, &trusted, want)).contains("ran step \"smoke-test\" otherwise"));
}
