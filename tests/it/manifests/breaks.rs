//! Where the broken-manifest cases ([`super::cases`]) break things: finders of the parts of the
//! real manifests a case changes. Each panics naming what it did not find, so a case whose
//! manifests no longer have the thing to break fails instead of passing unchanged.

use serde_json::Value;

use super::model::Manifests;

pub const DEPLOYMENT_WITH_TYPO: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: c, image: i, imagePullPolcy: Always}]
";

pub const CUSTOMRUN_WRONG_VERSION: &str = "apiVersion: tekton.dev/v1beta1
kind: CustomRun
metadata: {name: x}
spec:
  customRef: {apiVersion: imagegate.dev/v1beta1, kind: ImagePromotion}
";

/// An ImageStreamSource to a Broker, with `extra` lines appended to its spec.
pub fn image_stream_source(extra: &str) -> String {
    format!(
        "apiVersion: sources.imagegate.dev/v1alpha1
kind: ImageStreamSource
metadata: {{name: team-a, namespace: ds}}
spec:
  sink:
    ref: {{apiVersion: eventing.knative.dev/v1, kind: Broker, name: default}}
{extra}"
    )
}

pub fn pipeline(m: &mut Manifests) -> &mut Value {
    &mut m.first_mut("Pipeline", "")["spec"]
}

pub fn pipeline_task<'m>(
    m: &'m mut Manifests,
    section: &str,
    pick: fn(&Value) -> bool,
) -> &'m mut Value {
    pipeline(m)[section]
        .as_array_mut()
        .and_then(|tasks| tasks.iter_mut().find(|t| pick(t)))
        .unwrap_or_else(|| panic!("no such pipeline task in {section}"))
}

/// A pipeline task that runs the ImagePromotion custom task.
pub fn custom(t: &Value) -> bool {
    t["taskRef"]["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("imagegate.dev/"))
}

/// A pipeline task that references a Task by name.
pub fn task_ref(t: &Value) -> bool {
    t["taskRef"].is_object() && !custom(t)
}

pub fn with_run_after(t: &Value) -> bool {
    t.get("runAfter").is_some()
}

pub fn param<'v>(list: &'v mut Value, name: &str) -> &'v mut Value {
    list.as_array_mut()
        .and_then(|ps| ps.iter_mut().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no param {name}"))
}

pub fn drop_param(list: &mut Value, name: &str) {
    let ps = list.as_array_mut().expect("a param list");
    let before = ps.len();
    ps.retain(|p| p["name"] != name);
    assert!(ps.len() < before, "no param {name} to drop");
}

pub fn push(list: &mut Value, item: Value) {
    list.as_array_mut().expect("a list").push(item);
}

/// The spec of the TriggerTemplate's PipelineRun.
pub fn templated_run(m: &mut Manifests) -> &mut Value {
    m.first_mut("TriggerTemplate", "")["spec"]["resourcetemplates"]
        .as_array_mut()
        .and_then(|rts| rts.iter_mut().find(|rt| rt["kind"] == "PipelineRun"))
        .map(|rt| &mut rt["spec"])
        .expect("a PipelineRun in the TriggerTemplate")
}

pub fn binding_param<'m>(m: &'m mut Manifests, reading: &str) -> &'m mut Value {
    m.first_mut("TriggerBinding", "")["spec"]["params"]
        .as_array_mut()
        .and_then(|ps| {
            ps.iter_mut()
                .find(|p| p["value"].as_str().is_some_and(|v| v.contains(reading)))
        })
        .unwrap_or_else(|| panic!("no TriggerBinding param reading {reading}"))
}

/// The EventListener's CEL filter expression.
pub fn cel(m: &mut Manifests) -> &mut Value {
    let el = m.first_mut("EventListener", "");
    let trig = el["spec"]["triggers"].as_array_mut().expect("triggers");
    trig.iter_mut()
        .flat_map(|t| t["interceptors"].as_array_mut().into_iter().flatten())
        .flat_map(|ic| ic["params"].as_array_mut().into_iter().flatten())
        .find(|p| p["name"] == "filter")
        .map(|p| &mut p["value"])
        .expect("a CEL filter")
}

pub fn edit_cel(m: &mut Manifests, edit: impl Fn(&str) -> String) {
    let f = cel(m);
    let new = edit(f.as_str().expect("a CEL string"));
    *f = Value::String(new);
}

pub fn knative_trigger(m: &mut Manifests) -> &mut Value {
    &mut m.first_mut("Trigger", "knative/")["spec"]
}

pub fn source_container(m: &mut Manifests) -> &mut Value {
    &mut m.first_mut("ContainerSource", "")["spec"]["template"]["spec"]["containers"][0]
}
