//! What the ledger tells: why a validation ended without a verdict (its PipelineRun read), the
//! verdict event, the Warning Event on the stream, and the gauges of candidates without one.

use kube::api::Api;
use kube::runtime::events::{Event, EventType};
use tracing::{info, warn};

use super::{Entry, Key, Ledger, get};
use crate::api::{CustomRun, PipelineRun};
use crate::controller::verdict::event::{Kind, Verdict};

impl Ledger {
    /// Why the validation whose `begin` CustomRun is `run` ended without a verdict (None: its
    /// PipelineRun still runs).
    pub(super) async fn lost(&self, ns: &str, run: &str) -> Result<Option<String>, kube::Error> {
        if run.is_empty() {
            return Ok(Some("the served tag names no begin run".into()));
        }
        let runs: Api<CustomRun> = Api::namespaced(self.client.clone(), ns);
        let Some(begin) = get(&runs, run).await? else {
            return Ok(Some(format!("its begin CustomRun {run} is gone")));
        };
        let Some((name, uid)) = begin.pipeline_run() else {
            return Ok(Some(format!(
                "its begin CustomRun {run} belongs to no PipelineRun"
            )));
        };
        let prs: Api<PipelineRun> = Api::namespaced(self.client.clone(), ns);
        match get(&prs, &name).await? {
            Some(pr) if pr.metadata.uid.as_deref() == Some(uid.as_str()) => {
                if !pr.is_done() {
                    return Ok(None);
                }
                let why = (pr.status.iter())
                    .flat_map(|s| &s.conditions)
                    .find(|c| c.type_ == "Succeeded")
                    .and_then(|c| c.reason.clone())
                    .unwrap_or_else(|| "no reason".into());
                Ok(Some(format!(
                    "its PipelineRun {name} ended ({why}) without promoting or rejecting it"
                )))
            }
            _ => Ok(Some(format!("its PipelineRun {name} is gone"))),
        }
    }

    /// Sends the ledger's verdict on `key`'s candidate `digest`, where verdicts are sent.
    pub(super) fn verdict(&self, key: &Key, kind: Kind, digest: &str, reason: &str, note: &str) {
        let (Some(verdicts), Some(tags)) = (&self.verdicts, self.tags(key)) else {
            return;
        };
        let uid = (self.streams.get(key))
            .and_then(|(r, _)| r.uid.clone())
            .unwrap_or_default();
        verdicts.send(Verdict {
            kind,
            namespace: key.0.clone(),
            imagestream: key.1.clone(),
            served_tag: tags.served,
            digest: digest.to_string(),
            served_digest: String::new(),
            previous_digest: String::new(),
            reason: reason.to_string(),
            message: note.to_string(),
            customrun: None,
            key: uid,
            time: chrono::Utc::now(),
        });
    }

    pub(super) async fn publish(&self, key: &Key, reason: &str, note: String) {
        let Some((reference, _)) = self.streams.get(key) else {
            return;
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Ledger".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, reference).await {
            warn!(namespace = %key.0, imagestream = %key.1, error = %e, "cannot publish a Kubernetes Event");
        } else {
            info!(namespace = %key.0, imagestream = %key.1, reason, "published");
        }
    }

    pub(super) fn gauges(&self) {
        let count =
            |f: &dyn Fn(&Entry) -> bool| self.entries.values().filter(|e| f(e)).count() as i64;
        self.metrics
            .without_verdict
            .set(count(&|e| e.paged.is_some()));
        self.metrics
            .import_failing
            .set(count(&|e| e.judged.import_failing.is_some()));
        self.metrics
            .update_failed
            .set(count(&|e| e.judged.update_failed));
    }
}
