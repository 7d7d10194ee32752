//! `tekton.dev/v1` PipelineRun and TaskRun: what the controller reads as the proof that a
//! promotion's candidate was validated. A CustomRun the pipeline controller creates is owned by
//! its PipelineRun (an owner reference and the `tekton.dev/pipelineRun` label); the PipelineRun
//! names the Pipeline it runs and lists its children (`status.childReferences`); each child
//! TaskRun carries its resolved params and its `Succeeded` condition. Only those fields are
//! modelled; shapes follow tektoncd/pipeline `pkg/apis/pipeline/v1/pipelinerun_types.go` and
//! `taskrun_types.go`.

use kube::CustomResource;
use serde::{Deserialize, Serialize};

use super::customrun::{Condition, Param, tekton};
use super::null_as_default;

/// Spec of a PipelineRun; the derive generates [`PipelineRun`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "PipelineRun",
    plural = "pipelineruns",
    namespaced,
    status = "PipelineRunStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRunSpec {
    /// The Pipeline it runs, when it runs one by reference (not an inline `pipelineSpec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_ref: Option<PipelineRef>,
}

/// `spec.pipelineRef`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRef {
    /// The Pipeline's name, in the PipelineRun's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A remote resolver (`git`, `bundles`, ...) instead of a Pipeline of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<String>,
    /// The resolver's params (`name`, `namespace`, `kind`, `bundle`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
}

/// `status` of a PipelineRun, written by the pipeline controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PipelineRunStatus {
    /// Conditions; `Succeeded` says whether the whole run is done.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// The TaskRuns and CustomRuns it created, by pipeline task.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub child_references: Vec<ChildReference>,
}

/// `status.childReferences[]` (Tekton's `ChildStatusReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ChildReference {
    /// `tekton.dev/v1` for a TaskRun, `tekton.dev/v1beta1` for a CustomRun.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// `TaskRun` or `CustomRun`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The child's name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// The pipeline task it runs.
    #[serde(default, deserialize_with = "null_as_default")]
    pub pipeline_task_name: String,
}

impl PipelineRun {
    /// The name of the Pipeline it runs by reference: `pipelineRef.name`, or the `name` param
    /// of the `cluster` resolver (a Pipeline of the PipelineRun's own namespace) or the
    /// `bundles` resolver (a Pipeline in an OCI bundle, pinned by the bundle's reference). None:
    /// an inline spec, another resolver (`git`, `hub`: no Pipeline name), or a `cluster`
    /// reference to another namespace.
    pub fn pipeline_name(&self) -> Option<&str> {
        let r = self.spec.pipeline_ref.as_ref()?;
        let param = |name: &str| {
            r.params
                .iter()
                .find(|p| p.name == name)
                .and_then(|p| p.value.as_str())
                .filter(|v| !v.is_empty())
        };
        match r.resolver.as_deref() {
            None => r.name.as_deref().filter(|n| !n.is_empty()),
            Some("cluster") => {
                let own = self.metadata.namespace.as_deref();
                let ns = param("namespace");
                let pipeline = param("kind").is_none_or(|k| k == "pipeline");
                (pipeline && (ns.is_none() || ns == own))
                    .then(|| param("name"))
                    .flatten()
            }
            Some("bundles") => param("name"),
            Some(_) => None,
        }
    }

    /// Whether it has finished (its `Succeeded` condition is `True` or `False`).
    pub(crate) fn is_done(&self) -> bool {
        self.status
            .iter()
            .flat_map(|s| &s.conditions)
            .any(|c| c.type_ == tekton::SUCCEEDED && (c.is_true() || c.is_false()))
    }

    /// Whether it lists the CustomRun `name` among its children (`status.childReferences`).
    pub(crate) fn lists_custom_run(&self, name: &str) -> bool {
        self.status
            .iter()
            .flat_map(|s| &s.child_references)
            .any(|c| c.kind.as_deref() == Some("CustomRun") && c.name == name)
    }

    /// The names of the TaskRuns it created for pipeline task `task`.
    pub fn task_runs_of(&self, task: &str) -> Vec<&str> {
        self.status
            .iter()
            .flat_map(|s| &s.child_references)
            .filter(|c| c.kind.as_deref() == Some("TaskRun") && c.pipeline_task_name == task)
            .map(|c| c.name.as_str())
            .collect()
    }
}

/// Spec of a TaskRun; the derive generates [`TaskRun`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "tekton.dev",
    version = "v1",
    kind = "TaskRun",
    plural = "taskruns",
    namespaced,
    status = "TaskRunStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunSpec {
    /// Its params, after `$(...)` substitution by the pipeline controller.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub params: Vec<Param>,
    /// The pod template the run was made with (`spec.podTemplate`, from the PipelineRun's
    /// `taskRunTemplate` or `taskRunSpecs`): read for what it does to the steps' environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<serde_json::Value>,
}

/// `status` of a TaskRun.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunStatus {
    /// The Task's spec as the pipeline controller ran it (`status.taskSpec`): resolved, with
    /// its defaults and the run's params substituted. What a pin of the proof binds
    /// ([`crate::controller::proof::pin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_spec: Option<serde_json::Value>,
    /// Conditions; `Succeeded=True` once every step exited 0.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
}

impl TaskRun {
    /// The `Succeeded` condition, once reported.
    pub fn succeeded_condition(&self) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == tekton::SUCCEEDED)
    }

    /// The value of param `name` if it is a string.
    pub fn param_str(&self, name: &str) -> Option<&str> {
        self.spec
            .params
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.value.as_str())
    }

    /// The names of the environment variables its pod template sets (`spec.podTemplate.env`).
    /// Tekton appends them after each step's own `env`, and in a container the later of two
    /// variables of one name wins: they override what the Task sets, without changing the
    /// `status.taskSpec` it records. A name that is not a string is listed as `?`.
    pub(crate) fn pod_template_env(&self) -> Vec<String> {
        let env = self
            .spec
            .pod_template
            .as_ref()
            .and_then(|t| t.get("env"))
            .and_then(serde_json::Value::as_array);
        env.into_iter()
            .flatten()
            .map(|e| {
                e.get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?")
                    .to_string()
            })
            .collect()
    }

    /// Whether the owner reference that controls it is the PipelineRun with `uid`.
    pub fn is_controlled_by(&self, uid: &str) -> bool {
        self.metadata.owner_references.iter().flatten().any(|o| {
            o.kind == "PipelineRun" && o.controller == Some(true) && !uid.is_empty() && o.uid == uid
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pipeline_by_name_counts_and_an_inline_spec_or_a_resolver_does_not() {
        let pr = |spec: serde_json::Value| -> PipelineRun {
            serde_json::from_value(json!({"metadata": {"name": "pr"}, "spec": spec})).unwrap()
        };
        assert_eq!(
            pr(json!({"pipelineRef": {"name": "imagegate-promote"}})).pipeline_name(),
            Some("imagegate-promote")
        );
        assert_eq!(
            pr(json!({"pipelineSpec": {"tasks": []}})).pipeline_name(),
            None
        );
        assert_eq!(
            pr(json!({"pipelineRef": {"name": "imagegate-promote", "resolver": "git"}}))
                .pipeline_name(),
            None
        );
    }

    #[test]
    fn a_pipeline_the_cluster_or_bundles_resolver_names_counts_by_that_name() {
        let pr = |r: serde_json::Value| -> PipelineRun {
            serde_json::from_value(json!({"metadata": {"name": "pr", "namespace": "ds"},
                                          "spec": {"pipelineRef": r}}))
            .unwrap()
        };
        let param = |n: &str, v: &str| json!({"name": n, "value": v});
        let cluster =
            |params: Vec<serde_json::Value>| pr(json!({"resolver": "cluster", "params": params}));
        assert_eq!(
            cluster(vec![
                param("kind", "pipeline"),
                param("name", "p"),
                param("namespace", "ds")
            ])
            .pipeline_name(),
            Some("p")
        );
        assert_eq!(cluster(vec![param("name", "p")]).pipeline_name(), Some("p"));
        assert_eq!(
            cluster(vec![param("name", "p"), param("namespace", "other")]).pipeline_name(),
            None,
            "another namespace's Pipeline of that name"
        );
        assert_eq!(
            cluster(vec![param("kind", "task"), param("name", "p")]).pipeline_name(),
            None
        );
        let bundle = pr(json!({"resolver": "bundles", "params": [
            param("bundle", "registry/pipelines@sha256:aa"), param("name", "p"), param("kind", "pipeline")
        ]}));
        assert_eq!(bundle.pipeline_name(), Some("p"));
        let git = pr(json!({"resolver": "git", "params": [param("pathInRepo", "p.yaml")]}));
        assert_eq!(git.pipeline_name(), None);
    }

    #[test]
    fn only_taskruns_of_the_task_are_its_children() {
        let pr: PipelineRun = serde_json::from_value(json!({
            "metadata": {"name": "pr"},
            "spec": {"pipelineRef": {"name": "p"}},
            "status": {"childReferences": [
                {"kind": "CustomRun", "name": "pr-begin", "pipelineTaskName": "begin"},
                {"kind": "TaskRun", "name": "pr-validate", "pipelineTaskName": "validate"},
                {"kind": "TaskRun", "name": "pr-scan", "pipelineTaskName": "scan"},
            ]}
        }))
        .unwrap();
        assert_eq!(pr.task_runs_of("validate"), ["pr-validate"]);
        assert!(pr.task_runs_of("begin").is_empty());
    }
}
