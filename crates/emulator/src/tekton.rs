//! The emulator's own definitions of Tekton's CustomRun, PipelineRun and TaskRun resources. It
//! serves CustomRuns from the start, as a cluster with Tekton installed does; the PipelineRun and
//! TaskRun definitions are created by whoever needs them (the demo, whose pipeline stand-in
//! writes the PipelineRuns and TaskRuns it simulates).
//!
//! They stand in for Tekton's released CRDs (tektoncd/pipeline `config/300-crds/`), which this
//! repository does not copy: the demo runs on a machine with only Rust, so it cannot read the
//! release from Go's module cache. Each serves what the released CRD serves (`tekton.dev`, the
//! kind's versions, namespaced, with a status subresource), but its schema keeps every field
//! instead of pruning to Tekton's. Tests that need Tekton's real schema create the released CRD
//! through the API, which replaces a stand-in exactly as an update of a CRD does on a real
//! server.

use serde_json::{Value, json};

/// The `metadata.name` of the CustomRun CRD.
pub const CUSTOMRUN_CRD_NAME: &str = "customruns.tekton.dev";

/// The CustomResourceDefinition the emulator serves CustomRuns with until a test replaces it.
pub fn customrun_crd() -> Value {
    stand_in("CustomRun", &["v1beta1"], &[])
}

/// A stand-in for Tekton's PipelineRun CRD (`v1` stored, `v1beta1` served), for the demo.
pub fn pipelinerun_crd() -> Value {
    stand_in("PipelineRun", &["v1", "v1beta1"], &["pr", "prs"])
}

/// A stand-in for Tekton's TaskRun CRD (`v1` stored, `v1beta1` served), for the demo.
pub fn taskrun_crd() -> Value {
    stand_in("TaskRun", &["v1", "v1beta1"], &["tr", "trs"])
}

/// A stand-in for Tekton Triggers' ClusterInterceptor CRD (cluster-scoped, `v1alpha1`), for the
/// demo's EventListener stand-in, which resolves interceptors through it as Triggers does.
pub fn clusterinterceptor_crd() -> Value {
    let mut crd = stand_in("ClusterInterceptor", &["v1alpha1"], &["ci"]);
    crd["metadata"]["name"] = json!("clusterinterceptors.triggers.tekton.dev");
    crd["metadata"]["labels"] = json!({"app.kubernetes.io/part-of": "tekton-triggers"});
    crd["spec"]["group"] = json!("triggers.tekton.dev");
    crd["spec"]["scope"] = json!("Cluster");
    crd["spec"]["names"]["categories"] = json!(["tekton", "tekton-triggers"]);
    crd
}

/// The CRD of Tekton's `kind`, serving `versions` (the first stored) with a status subresource
/// and a schema that keeps every field.
fn stand_in(kind: &str, versions: &[&str], short_names: &[&str]) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let versions: Vec<Value> = versions
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({
                "name": name,
                "served": true,
                "storage": i == 0,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true
                }},
                "subresources": {"status": {}}
            })
        })
        .collect();
    let mut names = json!({
        "kind": kind,
        "plural": plural,
        "singular": singular,
        "categories": ["tekton", "tekton-pipelines"]
    });
    if !short_names.is_empty() {
        names["shortNames"] = json!(short_names);
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.tekton.dev"),
            "labels": {"app.kubernetes.io/part-of": "tekton-pipelines"}
        },
        "spec": {
            "group": "tekton.dev",
            "scope": "Namespaced",
            "names": names,
            "versions": versions
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::types_from_crd;

    #[test]
    fn the_stand_in_serves_namespaced_customruns_with_status_in_v1beta1() {
        let types = types_from_crd(&customrun_crd()).unwrap();
        assert_eq!(types.len(), 1);
        let t = &types[0];
        assert_eq!(
            (t.group.as_str(), t.version.as_str(), t.kind.as_str()),
            ("tekton.dev", "v1beta1", "CustomRun")
        );
        assert_eq!(t.plural, "customruns");
        assert!(t.namespaced);
        assert!(t.status_subresource);
        assert_eq!(
            t.schema.as_ref().unwrap()["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    #[test]
    fn the_pipelinerun_and_taskrun_stand_ins_serve_v1_and_v1beta1_with_status() {
        for (crd, kind, plural) in [
            (pipelinerun_crd(), "PipelineRun", "pipelineruns"),
            (taskrun_crd(), "TaskRun", "taskruns"),
        ] {
            let types = types_from_crd(&crd).unwrap();
            let versions: Vec<&str> = types.iter().map(|t| t.version.as_str()).collect();
            assert_eq!(versions, ["v1", "v1beta1"]);
            for t in &types {
                assert_eq!((t.kind.as_str(), t.plural.as_str()), (kind, plural));
                assert!(t.namespaced && t.status_subresource);
            }
            assert_eq!(crd["spec"]["versions"][0]["storage"], true);
            assert_eq!(crd["spec"]["versions"][1]["storage"], false);
        }
    }

    #[test]
    fn the_stand_in_keeps_fields_tekton_would_prune() {
        let schema = customrun_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        let mut run = json!({"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
                             "metadata": {"name": "r"}, "spec": {"bogus": 1}});
        assert!(crate::schema::prune(&schema, &mut run).is_empty());
        assert_eq!(run["spec"]["bogus"], 1);
    }
}
