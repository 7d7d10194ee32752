//! The pin of what a validation TaskRun ran: a digest of the Task's spec as Tekton recorded it
//! for that run (`status.taskSpec`), so that an ImagePromotion can require the content that must
//! have validated, not only the names (`spec.validation.pins`).
//!
//! Tekton records `status.taskSpec` after it resolved the Task (from the namespace or a
//! resolver), applied its defaults and substituted the run's params (pkg/reconciler/taskrun
//! `prepare` and `reconcile`). So the recorded spec binds the Task's steps, scripts, images and
//! every param value the run was given: an edited Task, a different command, a TaskRun made
//! again with a trivial `taskSpec`, all record another spec. The one param that changes on every
//! run by design is `image` (the candidate, which the proof checks on its own), so its value is
//! put back as `$(params.image)` before hashing; any other param that varies per run changes
//! the pin, and the run is not proof (fail closed).
//!
//! The digest is SHA-256 over the canonical JSON of the result (object keys sorted, no spaces),
//! written `sha256:<64 hex>`: the same on every machine for the same recorded spec. A Tekton
//! upgrade that records defaults differently changes it: pin again (`imagegate pin`).

use serde_json::Value;

use crate::api::TaskRun;

use super::IMAGE_PARAM;

/// The placeholder the `image` param's value is put back as.
pub(crate) const IMAGE_PLACEHOLDER: &str = "$(params.image)";

/// The pin of what `run` ran, or why it has none.
pub fn of_task_run(run: &TaskRun) -> Result<String, String> {
    let spec = run
        .status
        .as_ref()
        .and_then(|s| s.task_spec.as_ref())
        .ok_or("Tekton recorded no taskSpec for it")?;
    let image = run.param_str(IMAGE_PARAM).unwrap_or_default();
    Ok(of_spec(spec, image))
}

/// The pin of a recorded task spec whose `image` param was `image`.
pub fn of_spec(spec: &Value, image: &str) -> String {
    let mut spec = spec.clone();
    if !image.is_empty() {
        put_back(&mut spec, image);
    }
    let mut text = String::new();
    canonical(&spec, &mut text);
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Replaces `value` in every string of `v` by [`IMAGE_PLACEHOLDER`].
fn put_back(v: &mut Value, value: &str) {
    match v {
        Value::String(s) if s.contains(value) => *s = s.replace(value, IMAGE_PLACEHOLDER),
        Value::Array(items) => items.iter_mut().for_each(|i| put_back(i, value)),
        Value::Object(fields) => fields.values_mut().for_each(|f| put_back(f, value)),
        _ => {}
    }
}

/// Writes `v` as JSON with its object keys sorted and no whitespace.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&fields[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded(image: &str, command: &str) -> Value {
        json!({
            "params": [{"name": "image", "type": "string"}],
            "steps": [{
                "name": "smoke-test", "image": image,
                "env": [{"name": "SMOKE_TEST", "value": command}],
                "command": ["/bin/sh", "-c"], "args": ["set -eu\nsh -c \"$SMOKE_TEST\""]
            }]
        })
    }

    const D1: &str =
        "r/ns/nb@sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str =
        "r/ns/nb@sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn the_same_task_on_another_candidate_has_the_same_pin() {
        let one = of_spec(&recorded(D1, "jupyter lab --version"), D1);
        assert_eq!(one, of_spec(&recorded(D2, "jupyter lab --version"), D2));
        assert!(one.starts_with("sha256:") && one.len() == 71, "{one}");
    }

    #[test]
    fn another_command_or_step_is_another_pin() {
        let pinned = of_spec(&recorded(D1, "jupyter lab --version"), D1);
        assert_ne!(pinned, of_spec(&recorded(D1, "true"), D1));
        let mut trivial = recorded(D1, "jupyter lab --version");
        trivial["steps"][0]["args"] = json!(["exit 0"]);
        assert_ne!(pinned, of_spec(&trivial, D1));
    }

    #[test]
    fn the_canonical_form_sorts_keys_and_keeps_arrays_in_order() {
        let mut out = String::new();
        canonical(
            &json!({"b": [2, 1], "a": {"d": "x\"y", "c": null}}),
            &mut out,
        );
        assert_eq!(out, r#"{"a":{"c":null,"d":"x\"y"},"b":[2,1]}"#);
    }
}
