//! What the pipeline stand-in writes to the API server about a PipelineRun, as Tekton's pipeline
//! controller does: the `tekton.dev/v1` PipelineRun itself, a TaskRun for each container task it
//! runs (named `<pipelinerun>-<task>`, owned by the PipelineRun, with its resolved params and its
//! `Succeeded` condition), the owner reference and labels of each child CustomRun, the children
//! in `status.childReferences`, and the final condition. The controller reads these as the proof
//! of validation the ImagePromotion in `tekton/` asks for.

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::Context;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::pipeline::{TaskOutcome, TaskStatus};
use super::schedule::RunCondition;

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "tekton.dev".into(),
        version: "v1".into(),
        api_version: "tekton.dev/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// One PipelineRun's objects in the API server.
pub struct RunObjects {
    pipeline_runs: Api<DynamicObject>,
    task_runs: Api<DynamicObject>,
    namespace: String,
    name: String,
    uid: String,
    children: Mutex<Vec<Value>>,
}

impl RunObjects {
    /// Creates the PipelineRun `name` from its object (the TriggerTemplate's rendering, or the
    /// rollback example), in `namespace`.
    pub async fn create(
        client: &kube::Client,
        namespace: &str,
        name: &str,
        pipeline_run: &Value,
    ) -> anyhow::Result<RunObjects> {
        let pipeline_runs = Api::namespaced_with(
            client.clone(),
            namespace,
            &resource("PipelineRun", "pipelineruns"),
        );
        let mut body = pipeline_run.clone();
        body["apiVersion"] = json!("tekton.dev/v1");
        body["metadata"]["name"] = json!(name);
        body["metadata"]["namespace"] = json!(namespace);
        if let Some(m) = body["metadata"].as_object_mut() {
            m.remove("generateName");
        }
        let object: DynamicObject = serde_json::from_value(body)?;
        let created = pipeline_runs
            .create(&PostParams::default(), &object)
            .await
            .with_context(|| format!("creating PipelineRun {name}"))?;
        Ok(RunObjects {
            pipeline_runs,
            task_runs: Api::namespaced_with(
                client.clone(),
                namespace,
                &resource("TaskRun", "taskruns"),
            ),
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: created.metadata.uid.unwrap_or_default(),
            children: Mutex::new(Vec::new()),
        })
    }

    /// The labels and owner reference of a child that runs pipeline task `task`.
    pub fn child_metadata(&self, task: &str) -> Value {
        json!({
            "labels": {
                "tekton.dev/pipelineRun": self.name,
                "tekton.dev/pipelineRunUID": self.uid,
                "tekton.dev/pipelineTask": task,
                "app.kubernetes.io/managed-by": "tekton-pipelines",
            },
            "ownerReferences": [{
                "apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": self.name,
                "uid": self.uid, "controller": true, "blockOwnerDeletion": true
            }],
        })
    }

    /// Records the TaskRun of container task `task` (Task `task_ref`), which ran with `params`
    /// (the Task's spec as it ran: `ran`) and ended as `outcome`.
    pub async fn task_run(
        &self,
        task: &str,
        task_ref: &str,
        params: &BTreeMap<String, String>,
        outcome: &TaskOutcome,
        ran: Value,
    ) -> anyhow::Result<()> {
        let name = format!("{}-{task}", self.name);
        let body: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": json_merge(json!({"name": name, "namespace": self.namespace}), self.child_metadata(task)),
            "spec": {
                "params": params.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
                "taskRef": {"kind": "Task", "name": task_ref},
            },
        }))?;
        self.task_runs
            .create(&PostParams::default(), &body)
            .await
            .with_context(|| format!("creating TaskRun {name}"))?;
        let succeeded = if outcome.status == TaskStatus::Succeeded {
            "True"
        } else {
            "False"
        };
        let status = json!({"status": {"podName": format!("{name}-pod"), "conditions": [{
            "type": "Succeeded", "status": succeeded, "reason": outcome.reason, "message": outcome.message,
        }], "taskSpec": ran}});
        self.task_runs
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .with_context(|| format!("writing the status of TaskRun {name}"))?;
        self.child("tekton.dev/v1", "TaskRun", &name, task).await
    }

    /// Lists a child (a TaskRun, or a CustomRun just created) in `status.childReferences`.
    pub async fn child(
        &self,
        api_version: &str,
        kind: &str,
        name: &str,
        task: &str,
    ) -> anyhow::Result<()> {
        let children = {
            let mut children = self.children.lock().unwrap_or_else(|p| p.into_inner());
            children.push(json!({
                "apiVersion": api_version, "kind": kind, "name": name, "pipelineTaskName": task
            }));
            children.clone()
        };
        self.status(json!({"childReferences": children})).await
    }

    /// The final condition of the PipelineRun.
    pub async fn finish(&self, condition: &RunCondition) -> anyhow::Result<()> {
        let status = if condition.succeeded { "True" } else { "False" };
        self.status(json!({"conditions": [{
            "type": "Succeeded", "status": status, "reason": condition.reason, "message": condition.message,
        }]}))
        .await
    }

    async fn status(&self, status: Value) -> anyhow::Result<()> {
        let patch = json!({ "status": status });
        self.pipeline_runs
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("writing the status of PipelineRun {}", self.name))?;
        Ok(())
    }
}

/// `base` with `extra`'s keys added (one level: metadata fields).
fn json_merge(mut base: Value, extra: Value) -> Value {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
    base
}
