//! How the watch decodes a CustomRun ([`Watched`]): another custom task's params and status are
//! skipped as they are read, never allocated, so that a tenant's runs with megabytes of params
//! cost the controller the bytes of one page of a list in flight, not their decoded copies
//! (security review F-10). A run of this custom task is decoded whole: the spec's keys are kept as
//! read and handed to [`CustomRunSpec`]'s own `Deserialize`, so no list of its fields is written
//! twice.
//!
//! Whose run it is shows in `spec.customRef` and `spec.customSpec`, which come before
//! `spec.params`, and `spec` before `status`: the API server serves a custom resource as an
//! unstructured object, whose keys Go's `encoding/json` writes sorted (and so does the emulator's
//! `serde_json`, without `preserve_order`). A run whose keys come in another order is decoded
//! whole where the order leaves the question open, and one whose `customRef` or `customSpec`
//! comes after params already skipped is refused with an error, never decoded short.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::api::customrun::{CustomTaskRef, EmbeddedCustomRunSpec};
use crate::api::{CustomRun, CustomRunSpec, CustomRunStatus};
use crate::controller::params::{API_VERSION, KIND};

/// A CustomRun as the watch decodes it (module docs).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Watched(pub CustomRun);

impl Resource for Watched {
    type DynamicType = ();
    type Scope = <CustomRun as Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        CustomRun::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        CustomRun::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        CustomRun::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        CustomRun::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.0.metadata
    }
}

/// Whether `custom_ref` and `custom_spec` name this custom task (`CustomRun::is_for`).
fn ours(custom_ref: Option<&CustomTaskRef>, custom_spec: Option<&EmbeddedCustomRunSpec>) -> bool {
    let mut probe = CustomRun::new("", CustomRunSpec::default());
    probe.spec.custom_ref = custom_ref.cloned();
    probe.spec.custom_spec = custom_spec.map(|s| EmbeddedCustomRunSpec {
        api_version: s.api_version.clone(),
        kind: s.kind.clone(),
        spec: serde_json::Value::Null,
    });
    crate::controller::params::is_ours(&probe)
}

impl<'de> Deserialize<'de> for Watched {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RunVisitor)
    }
}

struct RunVisitor;

impl<'de> Visitor<'de> for RunVisitor {
    type Value = Watched;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a CustomRun")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Watched, A::Error> {
        let mut metadata = ObjectMeta::default();
        let mut spec: Option<Spec> = None;
        let mut status: Option<CustomRunStatus> = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "metadata" => metadata = map.next_value()?,
                "spec" => spec = Some(map.next_value()?),
                // Another task's status, once its spec said so: skipped.
                "status" if spec.as_ref().is_some_and(|s| !s.ours) => {
                    map.next_value::<IgnoredAny>()?;
                }
                "status" => status = map.next_value::<Option<CustomRunStatus>>()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let spec = spec.unwrap_or_default();
        let mut run = CustomRun::new("", spec.spec);
        run.metadata = metadata;
        run.status = if spec.ours { status } else { None };
        Ok(Watched(run))
    }
}

/// `spec`, and whether it names this custom task.
#[derive(Default)]
struct Spec {
    spec: CustomRunSpec,
    ours: bool,
}

impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SpecVisitor)
    }
}

/// Whether a `customRef` or `customSpec` as read (`{apiVersion, kind, ...}`) names this task.
fn names_ours(reference: Option<&serde_json::Value>) -> bool {
    let field = |name: &str| reference.and_then(|r| r.get(name)).and_then(|v| v.as_str());
    field("apiVersion") == Some(API_VERSION) && field("kind") == Some(KIND)
}

struct SpecVisitor;

impl<'de> Visitor<'de> for SpecVisitor {
    type Value = Spec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a CustomRun spec")
    }

    /// Every key is kept as read, but another task's `params` and `workspaces`, once whose run it
    /// is is known; [`CustomRunSpec`]'s own `Deserialize` then reads what was kept, so a field it
    /// gains is never dropped here.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Spec, A::Error> {
        let mut kept = serde_json::Map::new();
        // The keys so far came in ascending order; a key that could still make the run ours
        // came after one skipped.
        let (mut ascending, mut last) = (true, String::new());
        let mut skipped = false;
        while let Some(key) = map.next_key::<String>()? {
            ascending &= key > last;
            last.clone_from(&key);
            // Past customRef and customSpec in sorted keys, one of them seen: whose run it is
            // is known. (With neither, the params are kept: a run of no custom task, or keys
            // out of order.)
            let (by_ref, by_spec) = (kept.get("customRef"), kept.get("customSpec"));
            let named = by_ref.is_some() || by_spec.is_some();
            let decided = ascending && named && key.as_str() > "customSpec";
            let foreign = decided && !names_ours(by_ref) && !names_ours(by_spec);
            match key.as_str() {
                "customRef" | "customSpec" if skipped => {
                    return Err(de::Error::custom(
                        "the CustomRun's spec.customRef or spec.customSpec comes after its params \
                         (keys out of the API server's order): not decoded",
                    ));
                }
                "params" | "workspaces" if foreign => {
                    map.next_value::<IgnoredAny>()?;
                    skipped = true;
                }
                _ => {
                    let value = map.next_value::<serde_json::Value>()?;
                    kept.insert(key, value);
                }
            }
        }
        let spec = CustomRunSpec::deserialize(serde_json::Value::Object(kept))
            .map_err(de::Error::custom)?;
        let ours = ours(spec.custom_ref.as_ref(), spec.custom_spec.as_ref());
        Ok(Spec { spec, ours })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(custom_ref: serde_json::Value) -> serde_json::Value {
        json!({
            "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
            "metadata": {"name": "r", "namespace": "ds", "uid": "u", "resourceVersion": "7"},
            "spec": {"customRef": custom_ref,
                     "params": [{"name": "imageStream", "value": "nb"}],
                     "serviceAccountName": "runner", "timeout": "1h0m0s"},
            "status": {"conditions": [{"type": "Succeeded", "status": "Unknown"}]}
        })
    }

    fn ours_ref() -> serde_json::Value {
        json!({"apiVersion": crate::controller::params::API_VERSION, "kind": crate::controller::params::KIND})
    }

    #[test]
    fn a_run_of_this_task_decodes_as_customrun_does() {
        let text = run(ours_ref()).to_string();
        let watched: Watched = serde_json::from_str(&text).unwrap();
        let whole: CustomRun = serde_json::from_str(&text).unwrap();
        assert_eq!(watched.0, whole);
        assert_eq!(watched.0.spec.params.len(), 1);
        assert!(watched.0.status.is_some());
    }

    #[test]
    fn every_field_of_a_run_of_this_task_is_kept() {
        let mut text = run(ours_ref());
        text["spec"]["status"] = json!("RunCancelled");
        text["spec"]["statusMessage"] = json!("cancelled");
        text["spec"]["retries"] = json!(2);
        text["spec"]["workspaces"] = json!([{"name": "w", "emptyDir": {}}]);
        text["spec"]["customSpec"] = json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "spec": {"servedTag": "latest"}});
        let text = text.to_string();
        let watched: Watched = serde_json::from_str(&text).unwrap();
        let whole: CustomRun = serde_json::from_str(&text).unwrap();
        assert_eq!(watched.0, whole);
        assert_eq!(watched.0.spec.workspaces.len(), 1);
    }

    #[test]
    fn another_tasks_params_and_status_are_skipped() {
        let other = json!({"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait"});
        let watched: Watched = serde_json::from_str(&run(other).to_string()).unwrap();
        assert!(watched.0.spec.params.is_empty(), "params skipped");
        assert_eq!(watched.0.status, None, "status skipped");
        assert_eq!(watched.0.metadata.uid.as_deref(), Some("u"));
        assert_eq!(
            watched.0.spec.service_account_name.as_deref(),
            Some("runner")
        );
    }

    #[test]
    fn keys_out_of_order_are_decoded_whole_or_refused_never_short() {
        // params before customRef: whose run it is is not known yet, so they are decoded.
        let text = format!(
            r#"{{"spec": {{"params": [{{"name": "imageStream", "value": "nb"}}], "customRef": {}}}, "metadata": {{"name": "r"}}}}"#,
            ours_ref()
        );
        let watched: Watched = serde_json::from_str(&text).unwrap();
        assert_eq!(watched.0.spec.params.len(), 1);
        // A foreign customRef, params skipped, then a customSpec of this task: refused.
        let text = format!(
            r#"{{"spec": {{"customRef": {{"apiVersion": "x/v1", "kind": "Wait"}}, "params": [], "customSpec": {}}}}}"#,
            ours_ref()
        );
        assert!(serde_json::from_str::<Watched>(&text).is_err());
        // A status before the spec: decoded, then dropped for another task's run.
        let text = r#"{"status": {"conditions": []}, "spec": {"customRef": {"apiVersion": "x/v1", "kind": "Wait"}}}"#;
        let watched: Watched = serde_json::from_str(text).unwrap();
        assert_eq!(watched.0.status, None);
    }

    #[test]
    fn null_params_and_workspaces_are_empty() {
        let text = format!(
            r#"{{"spec": {{"customRef": {}, "params": null, "workspaces": null}}}}"#,
            ours_ref()
        );
        let watched: Watched = serde_json::from_str(&text).unwrap();
        assert!(watched.0.spec.params.is_empty() && watched.0.spec.workspaces.is_empty());
    }
}
