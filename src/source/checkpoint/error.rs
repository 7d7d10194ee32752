//! What can go wrong reading or writing the checkpoint, and what the operator can do about it.

use std::time::Duration;

use super::config::Cap;
use super::health::FailureKind;
use crate::api::status_code as code;

/// Reading or writing the checkpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Listing the shards failed.
    #[error("listing the checkpoint ConfigMaps in {namespace} failed: {source}")]
    Load {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    /// Writing (creating, patching or deleting) a ConfigMap failed after the retries.
    #[error("{verb} checkpoint ConfigMap {namespace}/{name} failed: {source}")]
    Write {
        verb: &'static str,
        namespace: String,
        name: String,
        kind: FailureKind,
        #[source]
        source: Box<kube::Error>,
    },
    /// At start, the checkpoint cannot be written at all: its namespace is missing, or RBAC or
    /// admission refuses the marker ([`Checkpoint::probe`](super::Checkpoint::probe)).
    #[error("the checkpoint cannot be written: {remedy} (the API server says: {said})")]
    Unwritable {
        remedy: String,
        /// The API server's message (not a `#[source]`: the error is one line).
        said: String,
        /// The HTTP status.
        status: Option<u16>,
    },
    /// A flush did not finish in time (the API server is slow or answers 429/503).
    #[error("the checkpoint flush did not finish within {0:?}")]
    Timeout(Duration),
    /// The checkpoint holds more than its [`Cap`]: it was read no further.
    #[error(
        "the checkpoint holds more than its cap of {} ConfigMaps and {} bytes (read so far: {shards} ConfigMaps, {bytes} bytes)", cap.shards, cap.bytes
    )]
    TooLarge {
        /// ConfigMaps read when it stopped.
        shards: usize,
        /// Bytes read when it stopped.
        bytes: usize,
        /// The cap.
        cap: Cap,
    },
    /// A shard of one entry is too large to write; it stays pending.
    #[error(
        "checkpoint shard {name} would hold {bytes} bytes, over the limit of {limit}, and cannot be split: it holds one ImageStream"
    )]
    ShardTooLarge {
        name: String,
        bytes: usize,
        limit: usize,
    },
}

impl CheckpointError {
    /// What the operator can do about it.
    pub fn failure(&self) -> FailureKind {
        match self {
            CheckpointError::Load { source, .. } => FailureKind::of_status(code(source), false),
            CheckpointError::Write { kind, .. } => *kind,
            CheckpointError::ShardTooLarge { .. } | CheckpointError::TooLarge { .. } => {
                FailureKind::TooLarge
            }
            CheckpointError::Timeout(_) => FailureKind::Unavailable,
            CheckpointError::Unwritable { status, .. } => FailureKind::of_status(*status, true),
        }
    }
}
