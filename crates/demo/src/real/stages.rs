//! How a scenario decides what the smoke test does with a digest on the real cluster, where no
//! container runs: kwok plays the kubelet and `realcluster/kwok/tekton-step-stage.yaml` ends every
//! Tekton step pod (exit 0 unless the step's env says otherwise). `tekton/` is applied unchanged,
//! so the smoke-test step's env cannot carry the decision; the pod carries the candidate's digest
//! instead, in the annotation `imagegate.dev/digest` that the shipped TriggerTemplate puts on the
//! PipelineRun and Tekton copies to its TaskRuns and their pods.
//!
//! A scenario adds a Stage of its own for one digest, derived here from the shipped Stage (one
//! template for both): [`fail`] ends the pod with a non-zero exit code; [`hold`] leaves it Running
//! until the demo annotates the pod with [`RELEASE`], then the shipped Stage ends it. kwok picks
//! among the Stages that match a pod by weight, and never one of weight 0 while one of a higher
//! weight matches (pkg/utils/lifecycle `Lifecycle.Match` in kwok v0.8.0): the shipped Stage has
//! none, these have 1.

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

/// The shipped Stage for Tekton's step pods.
pub const SHIPPED: &str = include_str!("../../../../realcluster/kwok/tekton-step-stage.yaml");

/// The pod annotation that releases a held validation.
pub const RELEASE: &str = "realcluster.imagegate.dev/release";

/// The annotation Tekton copies from the shipped TriggerTemplate's PipelineRun to the pods.
const DIGEST: &str = "imagegate.dev/digest";

/// What the shipped template sets a container's exit code to before reading the step's env.
const DEFAULT_CODE: &str = "{{ $code := \"0\" }}";
const DEFAULT_FAILED: &str = "{{ $failed := false }}";

fn shipped() -> anyhow::Result<Value> {
    let stage: Value = serde_norway::from_str(SHIPPED)
        .map_err(|e| anyhow!("realcluster/kwok/tekton-step-stage.yaml: {e}"))?;
    if stage["kind"] != "Stage" || !stage["spec"]["selector"]["matchExpressions"].is_array() {
        bail!("realcluster/kwok/tekton-step-stage.yaml is not the Stage with matchExpressions");
    }
    Ok(stage)
}

/// The shipped Stage renamed, weighted 1 and narrowed to the pods of `digest`'s runs.
fn for_digest(name: &str, digest: &str) -> anyhow::Result<Value> {
    let mut stage = shipped()?;
    stage["metadata"] = json!({"name": name});
    stage["spec"]["weight"] = json!(1);
    let exprs = stage["spec"]["selector"]["matchExpressions"]
        .as_array_mut()
        .ok_or_else(|| anyhow!("the shipped Stage has no matchExpressions"))?;
    exprs.push(json!({
        "key": format!(".metadata.annotations[\"{DIGEST}\"]"),
        "operator": "In",
        "values": [digest],
    }));
    Ok(stage)
}

/// The Stage name for a digest: `imagegate-demo-<what>-<first 12 hex>`.
fn name(what: &str, digest: &str) -> String {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    format!("imagegate-demo-{what}-{}", &hex[..hex.len().min(12)])
}

/// A Stage that ends every container of `digest`'s step pods with exit code `code` (the pod
/// Failed), as a command that is not found would.
pub fn fail(digest: &str, code: u8) -> anyhow::Result<Value> {
    if code == 0 {
        bail!("a failing step needs a non-zero exit code");
    }
    let mut stage = for_digest(&name("fail", digest), digest)?;
    let template = stage["spec"]["next"]["statusTemplate"]
        .as_str()
        .ok_or_else(|| anyhow!("the shipped Stage has no statusTemplate"))?;
    if !template.contains(DEFAULT_CODE) || !template.contains(DEFAULT_FAILED) {
        bail!(
            "the shipped Stage's template no longer starts from `{DEFAULT_CODE}` and `{DEFAULT_FAILED}`"
        );
    }
    let template = template
        .replace(DEFAULT_CODE, &format!("{{{{ $code := \"{code}\" }}}}"))
        .replace(DEFAULT_FAILED, "{{ $failed := true }}");
    stage["spec"]["next"]["statusTemplate"] = Value::String(template);
    Ok(stage)
}

/// A Stage that holds `digest`'s step pods Running (ten minutes, far past any scenario) until the
/// pod carries [`RELEASE`]; then only the shipped Stage matches and ends it.
pub fn hold(digest: &str) -> anyhow::Result<Value> {
    let mut stage = for_digest(&name("hold", digest), digest)?;
    stage["spec"]["delay"] = json!({"durationMilliseconds": 600_000});
    stage["spec"]["selector"]["matchExpressions"]
        .as_array_mut()
        .ok_or_else(|| anyhow!("the shipped Stage has no matchExpressions"))?
        .push(json!({
            "key": format!(".metadata.annotations[\"{RELEASE}\"]"),
            "operator": "DoesNotExist",
        }));
    Ok(stage)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:9999999999999999999999999999999999999999999999999999999999999999";

    fn exprs(stage: &Value) -> Vec<String> {
        stage["spec"]["selector"]["matchExpressions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| format!("{} {}", e["key"].as_str().unwrap(), e["operator"]))
            .collect()
    }

    #[test]
    fn a_failing_stage_is_the_shipped_one_for_one_digest_with_its_exit_code() {
        let stage = fail(D, 127).unwrap();
        assert_eq!(
            stage["metadata"]["name"],
            "imagegate-demo-fail-999999999999"
        );
        assert_eq!(stage["spec"]["weight"], 1);
        let shipped = shipped().unwrap();
        assert_eq!(stage["spec"]["resourceRef"], shipped["spec"]["resourceRef"]);
        assert_eq!(
            stage["spec"]["selector"]["matchLabels"],
            shipped["spec"]["selector"]["matchLabels"]
        );
        let last = stage["spec"]["selector"]["matchExpressions"]
            .as_array()
            .unwrap()
            .last()
            .unwrap();
        assert_eq!(
            last["key"],
            ".metadata.annotations[\"imagegate.dev/digest\"]"
        );
        assert_eq!(last["values"], json!([D]));
        let t = stage["spec"]["next"]["statusTemplate"].as_str().unwrap();
        assert!(t.contains("{{ $code := \"127\" }}"), "{t}");
        assert!(t.contains("{{ $failed := true }}"), "{t}");
        assert!(!t.contains(DEFAULT_CODE));
        assert!(fail(D, 0).is_err());
    }

    #[test]
    fn a_held_stage_waits_and_lets_go_once_the_pod_is_released() {
        let stage = hold(D).unwrap();
        assert_eq!(
            stage["metadata"]["name"],
            "imagegate-demo-hold-999999999999"
        );
        assert_eq!(stage["spec"]["delay"]["durationMilliseconds"], 600_000);
        assert_eq!(
            exprs(&stage).last().unwrap(),
            ".metadata.annotations[\"realcluster.imagegate.dev/release\"] \"DoesNotExist\""
        );
        // It ends the pod as the shipped Stage does when the delay runs out.
        assert_eq!(stage["spec"]["next"], shipped().unwrap()["spec"]["next"]);
    }
}
