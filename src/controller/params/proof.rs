//! The proof of validation an ImagePromotion asks for (`spec.validation`: a Pipeline, its tasks,
//! their pins and Chains' keys), validated before anything is read: pure.

use super::signature;
use super::{is_digest, is_dns_subdomain};
use crate::controller::crd::Validation as ValidationSpec;
use crate::controller::proof::Proof;

/// Who asks for a proof parsed from a spec alone ([`crate::controller::policy`] names the ImagePromotion).
pub const SPEC_ASKS: &str = "the ImagePromotion spec asks";

/// The proof an ImagePromotion asks for: a Pipeline and its tasks, both or neither; `asked_by`
/// says who asks, for the message of a proof that does not hold.
pub fn proof(v: &ValidationSpec, asked_by: &str) -> Result<Option<Proof>, String> {
    let pipeline = v.pipeline.as_deref().unwrap_or_default();
    match (pipeline.is_empty(), v.tasks.is_empty()) {
        (true, true) if v.chains.is_some() => {
            return Err(
                "validation.chains needs validation.pipeline and validation.tasks: the TaskRuns \
                 whose signed records count"
                    .into(),
            );
        }
        (true, true) => return Ok(None),
        (true, false) => {
            return Err(
                "validation.tasks needs validation.pipeline: the Pipeline whose runs count as proof"
                    .into(),
            );
        }
        (false, true) => {
            return Err(format!(
                "validation.pipeline {pipeline:?} needs validation.tasks: the pipeline tasks that \
                 must have validated the digest"
            ));
        }
        (false, false) => {}
    }
    if !is_dns_subdomain(pipeline) {
        return Err(format!(
            "validation.pipeline: {pipeline:?} is not a valid Pipeline name"
        ));
    }
    for (i, task) in v.tasks.iter().enumerate() {
        if task.len() > 63 || task.contains('.') || !is_dns_subdomain(task) {
            return Err(format!(
                "validation.tasks[{i}]: {task:?} is not a valid pipeline task name"
            ));
        }
    }
    for (task, pin) in &v.pins {
        if !v.tasks.contains(task) {
            return Err(format!(
                "validation.pins: {task:?} is not one of validation.tasks ({})",
                v.tasks.join(", ")
            ));
        }
        if !is_digest(pin) {
            return Err(format!(
                "validation.pins.{task}: {pin:?} is not a pin (sha256: and 64 hex digits; \
                 `imagegate pin pipelinerun <name>` prints them)"
            ));
        }
    }
    let mut chains = Vec::new();
    if let Some(c) = &v.chains {
        let mut problems = Vec::new();
        if c.keys.is_empty() || c.keys.len() > signature::MAX_KEYS {
            problems.push(format!(
                "validation.chains.keys: name 1 to {} of Chains' public keys",
                signature::MAX_KEYS
            ));
        } else {
            chains = signature::parse_keys(&c.keys, "validation.chains.keys", &mut problems);
        }
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
    }
    Ok(Some(Proof {
        pipeline: pipeline.to_string(),
        tasks: v.tasks.clone(),
        asked_by: asked_by.to_string(),
        pins: v.pins.clone(),
        chains,
    }))
}
