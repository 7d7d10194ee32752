//! The start-up check of the checkpoint: before anything is delivered, a dry-run create of the
//! marker ConfigMap shows whether the checkpoint can be written at all. A namespace that does
//! not exist, a refusal by RBAC or by admission is permanent and ends the source at once, naming
//! what to fix, instead of surfacing at the first flush (or the last one, at shutdown, when the
//! changes it held would be sent again). A 409 (the marker is there) means writable; an API
//! server in trouble is left to the flushes, which retry and report it.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;

use super::health::FailureKind;
use super::{Checkpoint, CheckpointError, code};

impl Checkpoint {
    /// Whether the checkpoint can be written: Err for a permanent refusal, Ok otherwise.
    pub(crate) async fn probe(&self) -> Result<(), CheckpointError> {
        let marker: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": self.metadata(&self.cfg.prefix),
        }))
        .expect("a ConfigMap");
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let Err(source) = self.api.create(&dry_run, &marker).await else {
            return Ok(());
        };
        let status = code(&source);
        match FailureKind::of_status(status, true) {
            _ if status == Some(409) => Ok(()),
            FailureKind::Unavailable | FailureKind::TooLarge => {
                tracing::warn!(namespace = %self.cfg.namespace, error = %source, "could not check that the checkpoint can be written; the flushes will retry");
                Ok(())
            }
            kind => Err(CheckpointError::Unwritable {
                remedy: kind.remedy(&self.cfg.namespace),
                said: match &source {
                    kube::Error::Api(s) => s.message.clone(),
                    other => other.to_string(),
                },
                status,
            }),
        }
    }
}
