//! What the ledger does about a candidate without a verdict where a governing ImagePromotion asks
//! for a re-drive: its PipelineRun made again from the TriggerTemplate ([`super::redrive`] plans
//! it, purely), under the install's run key, or, once the attempts are spent, the served tag
//! marked `UpdateFailed`. The I/O half of the re-drive, as `Ledger` methods.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};

use super::judge::Tags;
use super::{Key, Ledger, redrive};
use crate::api::{ImageStream, status_code};
use crate::controller::decide::annotation;
use crate::controller::policy::governs;
use crate::controller::status::phase;
use crate::controller::verdict::event::Kind;
use crate::runkey::RunKey;

impl Ledger {
    /// Re-drives `digest` of `key` where a governing ImagePromotion says so: its PipelineRun
    /// made again from the TriggerTemplate, or, once the attempts are spent, the served tag
    /// marked `UpdateFailed`. What was done, for the page (None: no re-drive asked for).
    pub(super) async fn redrive(
        &mut self,
        key: &Key,
        digest: &str,
        now: Timestamp,
    ) -> Option<String> {
        let (policy, redrive) = self.in_namespace(&key.0).find_map(|((_, name), p)| {
            let r = p.spec.redrive.as_ref()?;
            governs(&p.spec, &key.0, &key.1).then(|| (name.clone(), r.clone()))
        })?;
        let tags = self.tags(key)?;
        let done = self
            .entries
            .get(key)
            .and_then(|e| e.redriven.as_ref())
            .map_or(0, |r| r.1);
        if done >= redrive.attempts() {
            let why = format!(
                "no verdict for {digest} after {done} re-drives (ImagePromotion {policy:?})"
            );
            return Some(match self.mark_failed(key, &tags, digest, &why).await {
                Ok(()) => {
                    self.verdict(key, Kind::UpdateFailed, digest, "NoVerdict", &why);
                    format!("{why}: {} marked UpdateFailed", tags.served)
                }
                Err(e) => format!("{why}; marking {} UpdateFailed failed: {e}", tags.served),
            });
        }
        let attempt = done + 1;
        // The stream as it is now: the candidate may have moved on (its own event is on its
        // way), and the run id needs when the tag came to point at this one.
        let streams: Api<ImageStream> = Api::namespaced(self.client.clone(), &key.0);
        let since = match streams.get_opt(&key.1).await {
            Ok(is) => {
                let current = (is.as_ref())
                    .and_then(|is| is.status_tag(&tags.candidate))
                    .and_then(|t| t.current())
                    .filter(|item| item.digest() == Some(digest));
                match current {
                    Some(item) => crate::runkey::since(item.created.as_ref()),
                    None => {
                        return Some(format!(
                            "not re-driven: {} no longer points at it",
                            tags.candidate
                        ));
                    }
                }
            }
            Err(e) => return Some(format!("not re-driven yet: cannot read the stream: {e}")),
        };
        let run_key = match self.run_key().await {
            Ok(k) => k,
            Err(e) => return Some(format!("not re-driven: {e}")),
        };
        let run_id = run_key.redrive_id(
            &crate::runkey::Candidate {
                namespace: &key.0,
                imagestream: &key.1,
                tag: &tags.candidate,
                digest,
                since: &since,
            },
            attempt,
        );
        if let Some(e) = self.entries.get_mut(key) {
            e.redriven = Some((digest.to_string(), attempt, now));
        }
        let candidate = redrive::Candidate {
            namespace: &key.0,
            imagestream: &key.1,
            candidate_tag: &tags.candidate,
            digest,
            run_id,
        };
        let what = format!(
            "re-driven (attempt {attempt} of {}) from TriggerTemplate {:?}",
            redrive.attempts(),
            redrive.trigger_template
        );
        Some(
            match self
                .create_runs(&redrive.trigger_template, &candidate)
                .await
            {
                Ok(names) => format!("{what}: PipelineRun {}", names.join(", ")),
                Err(e) => format!("{what} failed: {e}"),
            },
        )
    }

    /// The run key, read once it exists (`imagegate interceptor` makes it).
    async fn run_key(&mut self) -> Result<RunKey, String> {
        if let Some(k) = &self.run_key {
            return Ok(k.clone());
        }
        let (ns, name) = &self.run_key_at;
        match crate::runkey::read(self.client.clone(), ns, name).await? {
            Some(k) => {
                self.run_key = Some(k.clone());
                Ok(k)
            }
            None => Err(format!(
                "there is no run key, Secret {ns}/{name} (imagegate interceptor makes it at start)"
            )),
        }
    }

    /// Creates what `template` makes for `candidate`; a PipelineRun that exists already (made
    /// by another controller's re-drive of the same attempt) counts as made.
    async fn create_runs(
        &self,
        template: &str,
        candidate: &redrive::Candidate<'_>,
    ) -> Result<Vec<String>, String> {
        let ns = candidate.namespace;
        let templates: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), ns, &trigger_templates());
        let template = match templates.get_opt(template).await {
            Ok(Some(t)) => serde_json::to_value(t).map_err(|e| e.to_string())?,
            Ok(None) => return Err(format!("TriggerTemplate {ns}/{template} does not exist")),
            Err(e) => return Err(format!("cannot read TriggerTemplate {ns}/{template}: {e}")),
        };
        let runs = redrive::render(&template, candidate)
            .map_err(|e| format!("TriggerTemplate {ns}/{}: {e}", candidate.imagestream))?;
        let mut names = Vec::new();
        for run in runs {
            let api_version = run["apiVersion"]
                .as_str()
                .unwrap_or("tekton.dev/v1")
                .to_string();
            let resource = ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(
                    "tekton.dev",
                    api_version.trim_start_matches("tekton.dev/"),
                    "PipelineRun",
                ),
                "pipelineruns",
            );
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns, &resource);
            let object: DynamicObject = serde_json::from_value(run).map_err(|e| e.to_string())?;
            match api.create(&PostParams::default(), &object).await {
                Ok(made) => names.push(made.name_any()),
                Err(e) if status_code(&e) == Some(409) => {
                    names.push(format!("{} (made already)", object.name_any()))
                }
                Err(e) => return Err(format!("creating its PipelineRun failed: {e}")),
            }
        }
        Ok(names)
    }

    /// Marks `key`'s served tag `UpdateFailed` for `digest`, conditional on the version read.
    async fn mark_failed(
        &self,
        key: &Key,
        tags: &Tags,
        digest: &str,
        why: &str,
    ) -> Result<(), kube::Error> {
        let version = self.streams.get(key).and_then(|s| s.1.clone());
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": version},
            "spec": {"tags": [{"name": tags.served, "annotations": {
                annotation::PHASE: phase::UPDATE_FAILED,
                annotation::CANDIDATE_DIGEST: digest,
                annotation::MESSAGE: why,
            }}]}
        });
        let api: Api<ImageStream> = Api::namespaced(self.client.clone(), &key.0);
        api.patch(&key.1, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .map(drop)
    }
}

/// Tekton Triggers' TriggerTemplates.
fn trigger_templates() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("triggers.tekton.dev", "v1beta1", "TriggerTemplate"),
        "triggertemplates",
    )
}
