//! Tekton Chains' signed record of a validating TaskRun (`spec.validation.chains`): the proof
//! reads what Chains' `tekton` storage writes on the TaskRun, and holds the record, not the
//! TaskRun's editable fields, to the validation the promotion needs.
//!
//! Chains signs a TaskRun once it is done, with its `in-toto` (`slsa/v1`) format: a DSSE
//! envelope (payload type `application/vnd.in-toto+json`) around an in-toto statement whose
//! predicate is SLSA provenance v0.2, stored base64-encoded in the annotation
//! `chains.tekton.dev/signature-taskrun-<uid>` (and `chains.tekton.dev/signed: "true"`). A
//! record counts when:
//! - the envelope is signed by one of the platform's Chains keys (the DSSE pre-authentication
//!   encoding, verified by `sigstore`'s `CosignVerificationKey`), under the TaskRun's own uid;
//! - its `invocation.parameters.image` names the candidate digest;
//! - its `invocation.environment.labels` name this PipelineRun (`tekton.dev/pipelineRunUID`)
//!   and this pipeline task (`tekton.dev/pipelineTask`), so a record copied from another run
//!   proves nothing;
//! - its `buildConfig.steps` are exactly the steps of the TaskRun's recorded spec (name, script
//!   or command, args, in order), the spec the pin ([`super::pin`]) holds: what Chains saw run
//!   is what was pinned.
//!
//! Chains signs after the TaskRun finished, so a record not there yet is waited for
//! ([`Lack::NotYet`]); a TaskRun Chains marked `failed`, or marked signed with no record under its
//! uid, is refused: Chains marks a TaskRun signed even when it could not make its record (a step
//! with no image digest, say), and skips one already marked, so whoever sets the mark while the
//! TaskRun runs keeps Chains from signing it.
//! Pure: the keys were read by [`super::read`].

use base64::Engine as _;
use serde_json::Value;
use sigstore::crypto::{CosignVerificationKey, Signature};

use crate::api::{TaskRun, digest_from_reference};
use crate::controller::dsse::{IN_TOTO, pae};
use crate::controller::params::signature::public_key;

use super::IMAGE_PARAM;

/// The annotation Chains sets once it handled a TaskRun (`true`, or `failed`).
pub(crate) const SIGNED: &str = "chains.tekton.dev/signed";
/// The predicate of Chains' `in-toto` / `slsa/v1` format.
const SLSA_V02: &str = "https://slsa.dev/provenance/v0.2";
/// The label Tekton gives the TaskRuns of a PipelineRun: its uid.
const PIPELINE_RUN_UID: &str = "tekton.dev/pipelineRunUID";
/// The label Tekton gives the TaskRuns of a PipelineRun: their pipeline task.
const PIPELINE_TASK: &str = "tekton.dev/pipelineTask";

/// The annotation that holds Chains' signature of the TaskRun with `uid`.
pub(crate) fn signature_annotation(uid: &str) -> String {
    format!("chains.tekton.dev/signature-taskrun-{uid}")
}

/// Why a TaskRun's record does not count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lack {
    /// Chains has not signed it yet: waited for.
    NotYet(String),
    /// It never will, or what it signed proves nothing.
    Refused(String),
}

/// Where the record must lead: the PipelineRun, the pipeline task and the candidate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expected<'a> {
    /// The PipelineRun's uid.
    pub pipeline_run_uid: &'a str,
    /// The pipeline task.
    pub task: &'a str,
    /// The candidate digest.
    pub digest: &'a str,
}

/// The name of the key that signed `run`'s record, if the record holds for `want`; `keys` are
/// the platform's Chains keys by name, each its PEM or why it could not be read.
pub(crate) fn verify(
    run: &TaskRun,
    keys: &[(String, Result<String, String>)],
    want: Expected,
) -> Result<String, Lack> {
    let uid = run.metadata.uid.as_deref().unwrap_or_default();
    let annotations = run.metadata.annotations.clone().unwrap_or_default();
    let mark = annotations.get(SIGNED).map(String::as_str);
    let Some(signed) = annotations.get(&signature_annotation(uid)) else {
        return Err(match mark {
            Some("failed") => Lack::Refused("Tekton Chains failed to sign it".into()),
            Some(_) => Lack::Refused(format!(
                "it is marked {SIGNED} but carries no signature for its own uid: Chains could \
                 not make its record (its log says why), or whoever set the mark kept Chains \
                 from signing it (Chains skips a TaskRun marked signed)"
            )),
            None => Lack::NotYet("Tekton Chains has not signed it yet".into()),
        });
    };
    let refused = |why: String| Lack::Refused(format!("its Chains record {why}"));
    let envelope = Envelope::parse(signed).map_err(refused)?;
    let matched = envelope.signed_by(keys).map_err(refused)?;
    let statement: Value = serde_json::from_slice(&envelope.payload)
        .map_err(|e| refused(format!("is not an in-toto statement ({e})")))?;
    names(&statement, run, want).map_err(refused)?;
    Ok(matched)
}

/// A DSSE envelope, decoded.
struct Envelope {
    payload_type: String,
    payload: Vec<u8>,
    signatures: Vec<Vec<u8>>,
}

impl Envelope {
    /// The envelope in an annotation's value (base64 of its JSON).
    fn parse(annotation: &str) -> Result<Envelope, String> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let json = b64
            .decode(annotation.trim())
            .map_err(|e| format!("is not base64 ({e})"))?;
        let envelope: Value =
            serde_json::from_slice(&json).map_err(|e| format!("is not a DSSE envelope ({e})"))?;
        let payload_type = envelope["payloadType"].as_str().unwrap_or_default();
        if payload_type != IN_TOTO {
            return Err(format!(
                "has payload type {payload_type:?}, not {IN_TOTO} (imagegate reads Chains' \
                 in-toto format)"
            ));
        }
        let payload = b64
            .decode(envelope["payload"].as_str().unwrap_or_default())
            .map_err(|e| format!("has a payload that is not base64 ({e})"))?;
        let signatures = (envelope["signatures"].as_array().into_iter().flatten())
            .filter_map(|s| b64.decode(s["sig"].as_str()?).ok())
            .collect();
        Ok(Envelope {
            payload_type: payload_type.to_string(),
            payload,
            signatures,
        })
    }

    /// The name of the first usable key one of the signatures verifies with.
    fn signed_by(&self, keys: &[(String, Result<String, String>)]) -> Result<String, String> {
        let pae = pae(&self.payload_type, &self.payload);
        let mut unusable = Vec::new();
        for (name, pem) in keys {
            let key: Result<CosignVerificationKey, String> =
                pem.clone().and_then(|pem| public_key(&pem));
            match key {
                Ok(key) => {
                    let by =
                        |sig: &Vec<u8>| key.verify_signature(Signature::Raw(sig), &pae).is_ok();
                    if self.signatures.iter().any(by) {
                        return Ok(name.clone());
                    }
                }
                Err(why) => unusable.push(format!("{name:?}: {why}")),
            }
        }
        let tried: Vec<&str> = keys.iter().map(|(n, _)| n.as_str()).collect();
        let mut why = format!(
            "is signed by none of the Chains keys ({})",
            tried.join(", ")
        );
        if !unusable.is_empty() {
            why += &format!("; unusable: {}", unusable.join("; "));
        }
        Err(why)
    }
}

/// Whether the provenance names the candidate, the PipelineRun, the task and the recorded steps.
fn names(statement: &Value, run: &TaskRun, want: Expected) -> Result<(), String> {
    let predicate_type = statement["predicateType"].as_str().unwrap_or_default();
    if predicate_type != SLSA_V02 {
        return Err(format!(
            "has predicate {predicate_type:?}, not {SLSA_V02} (Chains' in-toto/slsa/v1 format)"
        ));
    }
    let predicate = &statement["predicate"];
    let invocation = &predicate["invocation"];
    match invocation["parameters"][IMAGE_PARAM].as_str() {
        Some(image) if digest_from_reference(image) == Some(want.digest) => {}
        Some(image) => return Err(format!("validated {image:?}, not {}", want.digest)),
        None => return Err(format!("has no {IMAGE_PARAM:?} param")),
    }
    let labels = &invocation["environment"]["labels"];
    if labels[PIPELINE_RUN_UID] != want.pipeline_run_uid {
        return Err(format!(
            "belongs to another PipelineRun ({PIPELINE_RUN_UID} {})",
            labels[PIPELINE_RUN_UID]
        ));
    }
    if labels[PIPELINE_TASK] != want.task {
        return Err(format!(
            "belongs to another pipeline task ({PIPELINE_TASK} {})",
            labels[PIPELINE_TASK]
        ));
    }
    same_steps(&predicate["buildConfig"]["steps"], run)
}

/// Whether the signed steps are the recorded spec's, in order: name, script (or command) and
/// args.
fn same_steps(signed: &Value, run: &TaskRun) -> Result<(), String> {
    let spec = run.status.as_ref().and_then(|s| s.task_spec.as_ref());
    let recorded = (spec.and_then(|s| s["steps"].as_array()))
        .cloned()
        .unwrap_or_default();
    let signed = signed.as_array().cloned().unwrap_or_default();
    if signed.len() != recorded.len() {
        return Err(format!(
            "names {} steps, the TaskRun's recorded spec {}",
            signed.len(),
            recorded.len()
        ));
    }
    for (got, step) in signed.iter().zip(&recorded) {
        let name = step["name"].as_str().unwrap_or_default();
        let script = step["script"].as_str().unwrap_or_default();
        let entry_point = if script.is_empty() {
            let command = step["command"].as_array().cloned().unwrap_or_default();
            let words: Vec<&str> = command.iter().filter_map(Value::as_str).collect();
            words.join(" ")
        } else {
            script.to_string()
        };
        let args = match &step["args"] {
            Value::Array(a) if !a.is_empty() => Value::Array(a.clone()),
            _ => Value::Null,
        };
        let got_args = match &got["arguments"] {
            Value::Array(a) if a.is_empty() => Value::Null,
            other => other.clone(),
        };
        if got["environment"]["container"] != name
            || got["entryPoint"] != entry_point.as_str()
            || got_args != args
        {
            return Err(format!(
                "ran step {} otherwise than the TaskRun's recorded spec says (not the content \
                 the pin holds)",
                got["environment"]["container"]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
