//! The custom task: every reference to `imagegate.dev` (a Pipeline's `taskRef` or inline
//! `taskSpec`, a CustomRun's `customRef`) names the kind and version the controller runs and the
//! generated CRD serves, and the params a pipeline task passes are ones the controller accepts.
//! The last is asked of the controller: the CustomRun Tekton would create goes through
//! `imagegate::controller::params::parse`, the function that decides `InvalidParams` in
//! production, over the ImagePromotion's spec read as the controller reads it.

use imagegate::api::CustomRun;
use imagegate::controller::crd::ImagePromotionSpec;
use imagegate::controller::{params, proof, status};
use serde_json::{Value, json};

use super::check::{Checker, list};
use super::model::{Doc, at, items};

/// The group of the custom task's references.
pub const CUSTOM_GROUP: &str = "imagegate.dev/";

impl Checker<'_> {
    /// A reference to the custom task (`taskRef` or an inline `taskSpec` at `path`) with the
    /// params it passes: the kind and version the controller runs and the CRD serves, the named
    /// ImagePromotion, and the params as the controller's own parser reads them.
    #[allow(clippy::too_many_arguments)]
    pub fn custom_task(
        &mut self,
        doc: &Doc,
        path: &str,
        reference: &Value,
        name: Option<&str>,
        passed: &Value,
        params_path: &str,
        inline_spec: &Value,
    ) {
        let api_version = reference["apiVersion"].as_str().unwrap_or_default();
        let kind = reference["kind"].as_str().unwrap_or_default();
        if !api_version.starts_with(CUSTOM_GROUP) {
            return;
        }
        self.custom_kind_served(doc, path, api_version, kind);
        let mut spec = if inline_spec.is_object() {
            inline_spec.clone()
        } else {
            json!({})
        };
        if let Some(name) = name {
            match self.find(kind, name, None) {
                Some(target) => spec = target.spec().clone(),
                None => {
                    let msg = format!(
                        "{kind} '{name}' is not defined in the manifests; the run would fail with InvalidParams"
                    );
                    self.r.error(doc, &at(path, "name"), msg);
                }
            }
        }
        let spec: ImagePromotionSpec = match serde_json::from_value(spec) {
            Ok(s) => s,
            Err(e) => {
                let msg = format!("the {kind} spec is not one the controller reads: {e}");
                self.r.error(doc, path, msg);
                return;
            }
        };
        let run = customrun_of(self.ns(doc).unwrap_or("default"), reference, passed);
        if let Err(e) = params::parse(&run, &spec) {
            let msg = format!("the controller would end the run with InvalidParams: {e}");
            self.r.error(doc, params_path, msg);
        }
    }

    /// A reference to `imagegate.dev` names the kind and version the controller runs and the
    /// generated CRD serves (each reference reported once).
    fn custom_kind_served(&mut self, doc: &Doc, path: &str, api_version: &str, kind: &str) {
        if !self
            .custom_checked
            .insert((doc.file.clone(), doc.index, path.to_string()))
        {
            return;
        }
        let (want_version, want_kind) = self.code.custom_task;
        if (api_version, kind) != (want_version, want_kind) {
            let msg = format!(
                "custom task {api_version} {kind}: the controller runs only {want_version} {want_kind}"
            );
            self.r.error(doc, path, msg);
        }
        let crd_kind = self.code.crd["spec"]["names"]["kind"]
            .as_str()
            .unwrap_or_default();
        let version = api_version.rsplit('/').next().unwrap_or_default();
        let served = self.code.served_versions();
        if kind == crd_kind && !served.iter().any(|v| v == version) {
            let msg = format!(
                "the ImagePromotion CRD (imagegate crds) does not serve {kind} {version} (it serves {})",
                list(&served)
            );
            self.r.error(doc, path, msg);
        }
    }

    /// An ImagePromotion's proof of validation (`spec.validation.pipeline` and `tasks`) names a
    /// Pipeline of the manifests, and each required task is a task of it that validates the
    /// `image` result of an ImagePromotion task (`$(tasks.begin.results.image)`): otherwise no run
    /// could prove anything, or the image validated would not be the digest promoted.
    pub fn proof_of_validation(&mut self, doc: &Doc) {
        let v = &doc.spec()["validation"];
        let Some(name) = v["pipeline"].as_str() else {
            return;
        };
        let ns = self.ns(doc).map(str::to_string);
        let Some(pipeline) = self.find("Pipeline", name, ns.as_deref()) else {
            let msg = format!(
                "Pipeline '{name}' is not defined in the manifests; no run could prove a validation"
            );
            self.r.error(doc, "spec.validation.pipeline", msg);
            return;
        };
        let spec = pipeline.spec();
        let tasks: Vec<&Value> = ["tasks", "finally"]
            .iter()
            .flat_map(|s| items(&spec[*s]))
            .collect();
        let custom: Vec<&str> = tasks
            .iter()
            .filter(|t| {
                t["taskRef"]["apiVersion"]
                    .as_str()
                    .is_some_and(|a| a.starts_with(CUSTOM_GROUP))
            })
            .filter_map(|t| t["name"].as_str())
            .collect();
        for (i, required) in items(&v["tasks"]).iter().enumerate() {
            let required = required.as_str().unwrap_or_default();
            let path = format!("spec.validation.tasks[{i}]");
            let Some(task) = tasks.iter().find(|t| t["name"] == required) else {
                let names: Vec<&str> = tasks.iter().filter_map(|t| t["name"].as_str()).collect();
                let msg = format!(
                    "'{required}' is not a task of Pipeline '{name}' (it has {})",
                    list(&names)
                );
                self.r.error(doc, &path, msg);
                continue;
            };
            let image = items(&task["params"])
                .iter()
                .find(|p| p["name"] == proof::IMAGE_PARAM)
                .and_then(|p| p["value"].as_str())
                .unwrap_or_default();
            let bound = custom
                .iter()
                .any(|c| image == format!("$(tasks.{c}.results.{})", status::results::IMAGE));
            if !bound {
                let msg = format!(
                    "task '{required}' of Pipeline '{name}' validates image {image:?}, not the \
                     image result of an ImagePromotion task (e.g. $(tasks.begin.results.image)), \
                     so what it validates is not bound to the digest promoted"
                );
                self.r.error(doc, &path, msg);
            }
        }
    }

    /// Every `taskRef`/`customRef` to `imagegate.dev`, wherever it is (a CustomRun too).
    pub fn custom_refs_anywhere(&mut self, doc: &Doc) {
        let mut found = Vec::new();
        custom_refs(&doc.obj, String::new(), &mut found);
        for (path, api_version, kind) in found {
            self.custom_kind_served(doc, &path, &api_version, &kind);
        }
    }
}

fn custom_refs(node: &Value, path: String, out: &mut Vec<(String, String, String)>) {
    match node {
        Value::Object(o) => {
            for (k, v) in o {
                let p = at(&path, k);
                let version = v["apiVersion"].as_str().unwrap_or_default();
                if (k == "taskRef" || k == "customRef") && version.starts_with(CUSTOM_GROUP) {
                    let kind = v["kind"].as_str().unwrap_or_default();
                    out.push((p.clone(), version.to_string(), kind.to_string()));
                }
                custom_refs(v, p, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                custom_refs(v, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The CustomRun Tekton creates for a pipeline task that references the custom task, in
/// namespace `ns`. A value Tekton fills in at run time (`$(...)`) becomes one valid for its
/// param, so that only what is fixed in the manifest is judged.
fn customrun_of(ns: &str, reference: &Value, passed: &Value) -> CustomRun {
    let run_params: Vec<Value> = items(passed)
        .iter()
        .map(|p| {
            let name = p["name"].as_str().unwrap_or_default();
            let value = match &p["value"] {
                Value::String(s) if s.contains("$(") => Value::String(stand_in(name)),
                v => v.clone(),
            };
            json!({"name": name, "value": value})
        })
        .collect();
    let custom_ref = json!({
        "apiVersion": reference["apiVersion"], "kind": reference["kind"], "name": reference["name"],
    });
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": "manifest-check", "namespace": ns},
        "spec": {"customRef": custom_ref, "params": run_params}
    }))
    .expect("a CustomRun")
}

/// A value valid for `param`, for one Tekton substitutes at run time.
fn stand_in(param: &str) -> String {
    use params::names;
    match param {
        names::DIGEST => format!("sha256:{}", "0".repeat(64)),
        names::CANDIDATE_TAG => "run-time-candidate".into(),
        names::SERVED_TAG => "run-time-served".into(),
        names::ACTION => params::Action::Promote.as_str().into(),
        names::VALIDATION_STATUS => String::new(),
        names::ALLOW_ROLLED_BACK => "false".into(),
        _ => "run-time-value".into(),
    }
}
