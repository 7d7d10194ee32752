//! What Tekton's pipeline controller writes, for the tests of the proof of validation: a
//! PipelineRun of a Pipeline, its child TaskRuns (owned by it, with their resolved params and
//! their `Succeeded` condition, listed in its `status.childReferences`), and the owner reference
//! and labels it puts on the CustomRuns it creates. Written as admin through the API, against
//! Tekton's released CRDs ([`super::upstream::install_released_pipelinerun_crds`]).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "tekton.dev".into(),
        version: "v1".into(),
        api_version: "tekton.dev/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// A PipelineRun in a namespace, as the pipeline controller records it.
pub struct PipelineRunStandIn {
    client: kube::Client,
    namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    children: Vec<Value>,
}

impl PipelineRunStandIn {
    /// Creates PipelineRun `name` of Pipeline `pipeline` (by reference).
    pub async fn create(
        client: &kube::Client,
        ns: &str,
        name: &str,
        pipeline: &str,
    ) -> PipelineRunStandIn {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), ns, &resource("PipelineRun", "pipelineruns"));
        let body: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"pipelineRef": {"name": pipeline}}
        }))
        .unwrap();
        let created = api.create(&PostParams::default(), &body).await.unwrap();
        PipelineRunStandIn {
            client: client.clone(),
            namespace: ns.into(),
            name: name.into(),
            uid: created.metadata.uid.unwrap(),
            children: Vec::new(),
        }
    }

    /// The owner reference and labels the pipeline controller puts on a child of `task`, as a
    /// JSON merge patch of the child's body.
    pub fn child_metadata(&self, task: &str) -> Value {
        json!({"metadata": {
            "labels": {"tekton.dev/pipelineRun": self.name, "tekton.dev/pipelineRunUID": self.uid,
                "tekton.dev/pipelineTask": task},
            "ownerReferences": [{
                "apiVersion": "tekton.dev/v1", "kind": "PipelineRun", "name": self.name,
                "uid": self.uid, "controller": true, "blockOwnerDeletion": true
            }]
        }})
    }

    /// Lists the CustomRun `name` of pipeline task `task` among the PipelineRun's children, as
    /// the pipeline controller does right after it creates it.
    pub async fn list_custom_run(&mut self, name: &str, task: &str) {
        self.children.push(json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun", "name": name, "pipelineTaskName": task
        }));
        self.write_children().await;
    }

    /// Ends the PipelineRun: its `Succeeded` condition is `True` or `False`.
    pub async fn finish(&self, succeeded: bool) {
        let (status, reason) = if succeeded {
            ("True", "Succeeded")
        } else {
            ("False", "Failed")
        };
        let condition = json!({"status": {"conditions": [{
            "type": "Succeeded", "status": status, "reason": reason, "message": "Tasks Completed: 3"
        }], "completionTime": "2026-12-01T00:00:00Z"}});
        self.pipeline_runs()
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(&condition),
            )
            .await
            .unwrap();
    }

    fn pipeline_runs(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &resource("PipelineRun", "pipelineruns"),
        )
    }

    async fn write_children(&self) {
        let children = json!({"status": {"childReferences": self.children}});
        self.pipeline_runs()
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(&children),
            )
            .await
            .unwrap();
    }

    /// Creates the TaskRun `<pr>-<task>` of pipeline task `task` with the param `image`
    /// (None: no such param), finished with `Succeeded` = `succeeded`, and lists it among the
    /// PipelineRun's children. Returns its name.
    pub async fn task_run(&mut self, task: &str, image: Option<&str>, succeeded: bool) -> String {
        self.task_run_that_ran(task, image, succeeded, None).await
    }

    /// [`PipelineRunStandIn::task_run`], with the `status.taskSpec` Tekton records for what it
    /// ran (the Task's spec with the run's params substituted).
    pub async fn task_run_that_ran(
        &mut self,
        task: &str,
        image: Option<&str>,
        succeeded: bool,
        task_spec: Option<Value>,
    ) -> String {
        self.task_run_as(task, image, succeeded, task_spec, json!({}))
            .await
    }

    /// [`PipelineRunStandIn::task_run_that_ran`] with `run_spec` merged into the TaskRun's
    /// `spec` (a pod template, a service account: how the run was made).
    pub async fn task_run_as(
        &mut self,
        task: &str,
        image: Option<&str>,
        succeeded: bool,
        task_spec: Option<Value>,
        run_spec: Value,
    ) -> String {
        let name = format!("{}-{task}", self.name);
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &resource("TaskRun", "taskruns"),
        );
        let params: Vec<Value> = image
            .map(|i| json!({"name": "image", "value": i}))
            .into_iter()
            .collect();
        let mut body = json!({
            "apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"params": params, "taskRef": {"kind": "Task", "name": "imagegate-smoke-test"}}
        });
        json_patch::merge(&mut body, &self.child_metadata(task));
        json_patch::merge(&mut body["spec"], &run_spec);
        let body: DynamicObject = serde_json::from_value(body).unwrap();
        api.create(&PostParams::default(), &body).await.unwrap();
        let (status, reason) = if succeeded {
            ("True", "Succeeded")
        } else {
            ("False", "Failed")
        };
        let mut condition = json!({"status": {"podName": format!("{name}-pod"), "conditions": [{
            "type": "Succeeded", "status": status, "reason": reason,
            "message": if succeeded { "All Steps have completed executing" } else { "\"step-smoke-test\" exited with code 1" }
        }]}});
        if let Some(spec) = task_spec {
            condition["status"]["taskSpec"] = spec;
        }
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&condition))
            .await
            .unwrap();
        self.children.push(json!({
            "apiVersion": "tekton.dev/v1", "kind": "TaskRun", "name": name, "pipelineTaskName": task
        }));
        self.write_children().await;
        name
    }
}
