//! Re-driving a candidate (pure): the PipelineRuns a TriggerTemplate makes for it, given the
//! params the EventListener's binding would (`tekton/410`), and a `run-id` of its own, keyed by
//! the install's run key ([`crate::runkey`]) from the stream, the candidate and the attempt, so
//! that the PipelineRun's name is the same for every controller that re-drives it (a second
//! create is refused AlreadyExists), never the one the interceptor gave the candidate's event,
//! and unknown to whoever cannot read the key (nobody can take it first).

use std::collections::BTreeMap;

use serde_json::Value;

/// What is re-driven.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Candidate<'a> {
    /// The stream's namespace.
    pub namespace: &'a str,
    /// The stream.
    pub imagestream: &'a str,
    /// The candidate tag.
    pub candidate_tag: &'a str,
    /// The candidate's digest.
    pub digest: &'a str,
    /// The re-drive's run id ([`crate::runkey::RunKey::redrive_id`]).
    pub run_id: String,
}

/// The PipelineRuns `template` (a TriggerTemplate object) makes for `c`; Err names what is
/// wrong with the template.
pub(crate) fn render(template: &Value, c: &Candidate) -> Result<Vec<Value>, String> {
    let given: BTreeMap<&str, String> = [
        ("run-id", c.run_id.clone()),
        ("namespace", c.namespace.to_string()),
        ("imagestream", c.imagestream.to_string()),
        ("candidate-tag", c.candidate_tag.to_string()),
        ("digest", c.digest.to_string()),
    ]
    .into_iter()
    .collect();
    let spec = &template["spec"];
    let mut values = Vec::new();
    for p in spec["params"].as_array().into_iter().flatten() {
        let Some(name) = p["name"].as_str() else {
            return Err("a param has no name".into());
        };
        let value = match (given.get(name), p["default"].as_str()) {
            (Some(v), _) => v.clone(),
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(format!(
                    "its param {name:?} is none the listener binds (run-id, namespace, \
                     imagestream, candidate-tag, digest) and has no default"
                ));
            }
        };
        values.push((format!("$(tt.params.{name})"), value));
    }
    let templates = spec["resourcetemplates"]
        .as_array()
        .filter(|t| !t.is_empty())
        .ok_or("it has no resourcetemplates")?;
    templates
        .iter()
        .map(|t| {
            let kind = t["kind"].as_str().unwrap_or_default();
            let api = t["apiVersion"].as_str().unwrap_or_default();
            if kind != "PipelineRun" || !api.starts_with("tekton.dev/") {
                return Err(format!(
                    "it makes a {api} {kind}; a re-drive creates only tekton.dev PipelineRuns"
                ));
            }
            let mut text = t.to_string();
            for (placeholder, value) in &values {
                // The value goes inside a JSON string: escaped as one.
                let escaped = Value::String(value.clone()).to_string();
                text = text.replace(placeholder, &escaped[1..escaped.len() - 1]);
            }
            let mut run: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            run["metadata"]["namespace"] = Value::String(c.namespace.to_string());
            Ok(run)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn candidate(attempt: u32) -> Candidate<'static> {
        let key = crate::runkey::RunKey::from_bytes(&[3; 32]).unwrap();
        let c = crate::runkey::Candidate {
            namespace: "notebooks",
            imagestream: "nb",
            tag: "candidate",
            digest: "sha256:bbbb",
            since: "2026-12-06T00:00:00Z",
        };
        Candidate {
            namespace: "notebooks",
            imagestream: "nb",
            candidate_tag: "candidate",
            digest: "sha256:bbbb",
            run_id: key.redrive_id(&c, attempt),
        }
    }

    fn shipped() -> Value {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tekton/420-triggertemplate.yaml"
        ))
        .unwrap();
        serde_norway::from_str(&text).unwrap()
    }

    #[test]
    fn the_shipped_template_makes_the_pipelinerun_the_listener_would_under_an_id_of_its_own() {
        let runs = render(&shipped(), &candidate(1)).unwrap();
        assert_eq!(runs.len(), 1);
        let run = &runs[0];
        let id = candidate(1).run_id;
        assert_eq!(id.len(), 40);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(run["metadata"]["name"], format!("imagegate-{id}"));
        assert_eq!(run["metadata"]["namespace"], "notebooks");
        let params = run["spec"]["params"].as_array().unwrap();
        let param = |n: &str| params.iter().find(|p| p["name"] == n).unwrap()["value"].clone();
        assert_eq!(param("imagestream"), "notebooks/nb");
        assert_eq!(param("digest"), "sha256:bbbb");
        assert_eq!(param("candidate-tag"), "candidate");
        assert!(!run.to_string().contains("$(tt.params."), "{run}");
        // Another attempt, another name; the same attempt, the same name.
        assert_ne!(candidate(2).run_id, id);
        assert_eq!(candidate(1).run_id, id);
    }

    #[test]
    fn a_template_that_cannot_be_rendered_says_why() {
        let mut t = shipped();
        t["spec"]["params"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "team"}));
        assert!(render(&t, &candidate(1)).unwrap_err().contains("\"team\""));
        let mut t = shipped();
        t["spec"]["resourcetemplates"][0]["kind"] = json!("TaskRun");
        assert!(
            render(&t, &candidate(1))
                .unwrap_err()
                .contains("only tekton.dev PipelineRuns")
        );
        let t = json!({"spec": {"params": []}});
        assert!(
            render(&t, &candidate(1))
                .unwrap_err()
                .contains("no resourcetemplates")
        );
    }

    #[test]
    fn a_value_is_escaped_inside_the_json_it_goes_into() {
        let t = json!({"spec": {"params": [{"name": "digest"}], "resourcetemplates": [
            {"apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "metadata": {"name": "x"},
             "spec": {"params": [{"name": "d", "value": "$(tt.params.digest)"}]}}]}});
        let mut c = candidate(1);
        c.digest = "a\"b";
        let runs = render(&t, &c).unwrap();
        assert_eq!(runs[0]["spec"]["params"][0]["value"], "a\"b");
    }
}
