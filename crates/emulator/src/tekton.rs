//! The emulator's own definition of Tekton's CustomRun resource, which it serves from the start as
//! a cluster with Tekton installed does.
//!
//! It stands in for Tekton's released CRD (tektoncd/pipeline `config/300-crds/300-customrun.yaml`),
//! which this repository does not copy: the demo runs on a machine with only Rust, so the emulator
//! cannot read the release from Go's module cache. It serves what that CRD serves (`tekton.dev`,
//! version `v1beta1`, kind `CustomRun`, namespaced, with a status subresource), but its schema
//! keeps every field instead of pruning to Tekton's. Tests that need Tekton's real schema create
//! the released CRD through the API, which replaces this one exactly as an update of a CRD does
//! on a real server.

use serde_json::{Value, json};

/// The `metadata.name` of the CustomRun CRD.
pub const CUSTOMRUN_CRD_NAME: &str = "customruns.tekton.dev";

/// The CustomResourceDefinition the emulator serves CustomRuns with until a test replaces it.
pub fn customrun_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": CUSTOMRUN_CRD_NAME,
            "labels": {"app.kubernetes.io/part-of": "tekton-pipelines"}
        },
        "spec": {
            "group": "tekton.dev",
            "scope": "Namespaced",
            "names": {
                "kind": "CustomRun",
                "plural": "customruns",
                "singular": "customrun",
                "categories": ["tekton", "tekton-pipelines"]
            },
            "versions": [{
                "name": "v1beta1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true
                }},
                "subresources": {"status": {}}
            }]
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
    fn the_stand_in_keeps_fields_tekton_would_prune() {
        let schema = customrun_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone();
        let mut run = json!({"apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
                             "metadata": {"name": "r"}, "spec": {"bogus": 1}});
        assert!(crate::schema::prune(&schema, &mut run).is_empty());
        assert_eq!(run["spec"]["bogus"], 1);
    }
}
