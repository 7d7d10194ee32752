//! The checkpoint's writes: each shard as a whole ConfigMap or a merge patch of its changed
//! keys, the marker, the deletion of replaced shards; each retried a few times when the API
//! server may take it on a second try. The answers (whole shards) are drained, never parsed.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use serde_json::value::RawValue;

use super::health::FailureKind;
use super::layout::Prefix;
use super::{
    Checkpoint, CheckpointError, EPOCH_ANNOTATION, FORMAT_KEY, MAX_SHARD_BYTES, WRITE_ATTEMPTS,
};
use crate::api::status_code as code;

/// What a leaf's write sends, and what it stands for.
struct LeafBody {
    /// The leaf's epoch.
    epoch: u64,
    /// The change number the body carries changes up to.
    upto: u64,
    /// The whole shard's bytes: what the API server stores for this write.
    bytes: usize,
    /// The whole ConfigMap, or the merge patch of the leaf's changes.
    body: Box<RawValue>,
}

impl Checkpoint {
    /// Writes one leaf: whole, or as a merge patch of its changes (whole if it turns out gone).
    pub(super) async fn write_leaf(
        &self,
        prefix: Prefix,
        whole: bool,
    ) -> Result<(), CheckpointError> {
        let name = prefix.shard_name(&self.cfg.prefix);
        let mut whole = whole;
        loop {
            let Some(LeafBody {
                epoch,
                upto,
                bytes,
                body,
            }) = self.leaf_body(prefix, &name, whole)?
            else {
                return Ok(());
            };
            let result = self
                .retrying(|| async {
                    if whole {
                        self.write_whole(&name, &body).await
                    } else {
                        self.patch(&name, Patch::Merge(&body)).await
                    }
                })
                .await;
            match result {
                Ok(()) => {
                    self.layout().written(prefix, epoch, upto, whole);
                    // The API server stored (and answered with) the whole shard.
                    self.written
                        .fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
                    return Ok(());
                }
                // Deleted by hand: written whole again, right away.
                Err(e) if !whole && code(&e) == Some(404) => {
                    self.layout().lost(prefix);
                    whole = true;
                }
                Err(source) => {
                    let kind = FailureKind::of_status(code(&source), whole);
                    return Err(CheckpointError::Write {
                        verb: if whole { "writing" } else { "patching" },
                        namespace: self.cfg.namespace.clone(),
                        name,
                        kind,
                        source: Box::new(source),
                    });
                }
            }
        }
    }

    /// A leaf's epoch, the change number its body carries, and the body: the whole ConfigMap,
    /// or the merge patch of its changes. None: nothing (left) to write.
    fn leaf_body(
        &self,
        prefix: Prefix,
        name: &str,
        whole: bool,
    ) -> Result<Option<LeafBody>, CheckpointError> {
        let layout = self.layout();
        let Some(leaf) = layout.leaf(prefix) else {
            return Ok(None);
        };
        if leaf.bytes > MAX_SHARD_BYTES {
            return Err(CheckpointError::ShardTooLarge {
                name: name.to_string(),
                bytes: leaf.bytes,
                limit: MAX_SHARD_BYTES,
            });
        }
        let meta = json!({
            "labels": self.labels(),
            "annotations": {EPOCH_ANNOTATION: leaf.epoch.to_string()},
        });
        let body = if whole {
            let data: BTreeMap<&str, &str> = leaf
                .data
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let mut metadata = self.metadata(name);
            metadata["annotations"] = meta["annotations"].clone();
            serde_json::value::to_raw_value(&json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata,
                "data": data,
            }))
        } else {
            let changes: BTreeMap<&str, Option<&str>> = leaf.pending().collect();
            serde_json::value::to_raw_value(&json!({"metadata": meta, "data": changes}))
        };
        let body = body.unwrap_or_else(|_| RawValue::NULL.to_owned());
        Ok(Some(LeafBody {
            epoch: leaf.epoch,
            upto: layout.change_number(),
            bytes: leaf.bytes,
            body,
        }))
    }

    /// A whole shard: created, or, where a stale ConfigMap of that name is left, its labels,
    /// annotations and data replaced in one JSON patch (a write either holds all of it or none).
    async fn write_whole(&self, name: &str, body: &RawValue) -> Result<(), kube::Error> {
        match self.create(body.get().as_bytes().to_vec()).await {
            Err(e) if code(&e) == Some(409) => {
                let whole: serde_json::Value =
                    serde_json::from_str(body.get()).map_err(kube::Error::SerdeError)?;
                let ops = json!([
                    {"op": "add", "path": "/metadata/labels", "value": whole["metadata"]["labels"]},
                    {"op": "add", "path": "/metadata/annotations", "value": whole["metadata"]["annotations"]},
                    {"op": "add", "path": "/data", "value": whole["data"]},
                ]);
                let patch: json_patch::Patch =
                    serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
                self.patch(name, Patch::<()>::Json(patch)).await
            }
            other => other,
        }
    }

    /// The marker: written once the first complete checkpoint is, so that a later start can
    /// tell a lost checkpoint from a first start.
    pub(super) async fn write_marker(&self) -> Result<(), CheckpointError> {
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": self.metadata(&self.cfg.prefix),
            "data": {
                FORMAT_KEY: "2",
                "written": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                "about": "imagegate source: the checkpoint exists. Without this ConfigMap the next start is taken for a first start, which sends nothing for the streams that exist then.",
            },
        });
        let result = self
            .retrying(|| async {
                match self.create(body.to_string().into_bytes()).await {
                    Err(e) if code(&e) == Some(409) => Ok(()),
                    other => other,
                }
            })
            .await;
        match result {
            Ok(()) => {
                self.layout().marker = true;
                tracing::info!(namespace = %self.cfg.namespace, name = %self.cfg.prefix, "checkpoint marker written");
                Ok(())
            }
            Err(source) => Err(CheckpointError::Write {
                verb: "creating",
                namespace: self.cfg.namespace.clone(),
                name: self.cfg.prefix.clone(),
                kind: FailureKind::of_status(code(&source), true),
                source: Box::new(source),
            }),
        }
    }

    /// Deletes a shard a split or a merge replaced.
    pub(super) async fn delete_shard(&self, shard: Prefix) -> Result<(), CheckpointError> {
        let name = shard.shard_name(&self.cfg.prefix);
        let result = self
            .retrying(|| async {
                let params = DeleteParams::default();
                match self.through_fence(self.api.delete(&name, &params)).await {
                    Err(e) if code(&e) == Some(404) => Ok(()),
                    other => other.map(drop),
                }
            })
            .await;
        match result {
            Ok(()) => {
                tracing::debug!(shard = %name, "deleted a replaced checkpoint shard");
                self.layout().deleted(shard);
                Ok(())
            }
            Err(source) => Err(CheckpointError::Write {
                verb: "deleting",
                namespace: self.cfg.namespace.clone(),
                name,
                kind: FailureKind::of_status(code(&source), false),
                source: Box::new(source),
            }),
        }
    }

    /// Runs `op` until it succeeds, fails for good, or has been tried [`WRITE_ATTEMPTS`]
    /// times, waiting 200 ms, 400 ms, 800 ms between tries.
    async fn retrying<F, Fut>(&self, op: F) -> Result<(), kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), kube::Error>>,
    {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_factor(2.0)
            .with_max_delay(Duration::from_secs(5))
            .with_max_times(WRITE_ATTEMPTS as usize - 1);
        let mut attempt = 0u32;
        op.retry(backoff)
            .when(retriable)
            .notify(|error, wait| {
                attempt += 1;
                let wait_ms = wait.as_millis() as u64;
                tracing::debug!(attempt, %error, wait_ms, "checkpoint write failed; retrying")
            })
            .await
    }

    async fn create(&self, body: Vec<u8>) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(self.api.resource_url());
        let mut req = request
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("create");
        self.send(req).await
    }

    async fn patch<P: serde::Serialize>(
        &self,
        name: &str,
        patch: Patch<P>,
    ) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(self.api.resource_url());
        let mut req = request
            .patch(name, &PatchParams::default(), &patch)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("patch");
        self.send(req).await
    }

    /// Sends a write through the fence; its answer (the whole shard) is read and dropped as it
    /// arrives, never held or parsed: nothing in it is needed.
    async fn send(&self, req: http::Request<Vec<u8>>) -> Result<(), kube::Error> {
        self.through_fence(async {
            let answer = self.client.request_stream(req).await?;
            futures::io::copy(answer, &mut futures::io::sink())
                .await
                .map(drop)
                .map_err(kube::Error::ReadEvents)
        })
        .await
    }

    /// Runs one write only while the Lease fences it open, and abandons it if it has not landed
    /// by the time another replica could take the Lease ([`crate::runtime::leader::fence`]). A fenced
    /// write is a 412 (never retried: this process no longer leads), an abandoned one a 504
    /// (retried, through the fence again).
    async fn through_fence<T>(
        &self,
        write: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        let refused = |message: String, reason: &str, code: u16| {
            kube::Error::Api(
                kube::core::Status::failure(&message, reason)
                    .with_code(code)
                    .boxed(),
            )
        };
        match self.fence.deadline() {
            Err(fenced) => {
                tracing::warn!(namespace = %self.cfg.namespace, error = %fenced, "checkpoint write not made");
                Err(refused(fenced.to_string(), "Fenced", 412))
            }
            Ok(None) => write.await,
            Ok(Some(deadline)) => tokio::time::timeout_at(deadline, write)
                .await
                .unwrap_or_else(|_| {
                    Err(refused(
                        "the checkpoint write did not land before the Lease could pass to another \
                         replica; abandoned"
                            .into(),
                        "Timeout",
                        504,
                    ))
                }),
        }
    }
}

/// Conflicts (a create that raced), throttling, server errors and transport errors may pass;
/// anything else (forbidden, invalid) will not by retrying now.
fn retriable(e: &kube::Error) -> bool {
    code(e).is_none_or(|c| c == 409 || c == 429 || c >= 500)
}
