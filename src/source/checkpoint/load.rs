//! Reading the checkpoint at a start ([`Checkpoint::load`]): every shard, one per page, held to
//! the cap; [`layout::restore`] resolves what a crash mid-split left, and [`Loaded`] says, per
//! stream, what the start does with it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

use super::health::Persistence;
use super::layout::{self, Found, Prefix};
use super::{
    Checkpoint, CheckpointConfig, CheckpointError, CheckpointOwner, EPOCH_ANNOTATION, StreamKey,
};
use crate::source::state::StreamState;

/// What a start knows from the checkpoint it read.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The delivered state of every stream recorded.
    pub states: HashMap<StreamKey, StreamState>,
    /// Nothing was ever checkpointed here: the first list is a baseline (or `--emit-existing`).
    pub first_start: bool,
    pub(super) coverage: layout::Coverage,
    pub(super) unreadable: BTreeSet<StreamKey>,
}

impl Loaded {
    /// For a stream with no recorded state: whether a record of it was lost (its shard is
    /// gone, or its entry could not be read) on a start that is not the first. Its current
    /// tags are then sent again; otherwise it is new, and its whole history is sent.
    pub fn lost(&self, key: &StreamKey) -> bool {
        !self.first_start && (self.unreadable.contains(key) || !self.coverage.covers(key))
    }
}

#[cfg(test)]
impl Loaded {
    /// What a start reads after a complete checkpoint holding `states`, of which the entries
    /// of `unreadable` could not be read (lost).
    pub fn restart(
        states: HashMap<StreamKey, StreamState>,
        unreadable: BTreeSet<StreamKey>,
    ) -> Loaded {
        Loaded {
            states,
            first_start: false,
            coverage: layout::Coverage::everything(),
            unreadable,
        }
    }

    /// What a first start reads: nothing.
    pub fn first() -> Loaded {
        Loaded {
            first_start: true,
            ..Loaded::default()
        }
    }
}

impl Checkpoint {
    /// Reads every shard and the marker (all ConfigMaps with the labels and prefix).
    pub async fn load(
        client: kube::Client,
        cfg: CheckpointConfig,
    ) -> Result<(Checkpoint, Loaded), CheckpointError> {
        Checkpoint::load_owned(client, cfg, None).await
    }

    /// [`Checkpoint::load`] of the checkpoint `owner` owns (None: the single source's): only
    /// its ConfigMaps are read, and those it writes carry its labels.
    pub async fn load_owned(
        client: kube::Client,
        cfg: CheckpointConfig,
        owner: Option<CheckpointOwner>,
    ) -> Result<(Checkpoint, Loaded), CheckpointError> {
        let api = Api::<ConfigMap>::namespaced(client.clone(), &cfg.namespace);
        let selector = CheckpointOwner::labels(owner.as_ref())
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        // One shard per page: the whole checkpoint in one response, held as text and parsed
        // at once, would be the source's peak memory.
        let mut found = Vec::new();
        let mut marker = false;
        // ConfigMaps and bytes read, held to the cap as they come.
        let mut read = (0usize, 0usize);
        let mut params = ListParams::default().labels(&selector).limit(1);
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|source| CheckpointError::Load {
                    namespace: cfg.namespace.clone(),
                    source,
                })?;
            for cm in page.items {
                read.0 += 1;
                read.1 += data_bytes(&cm);
                if let Some(cap) = cfg.cap.filter(|cap| !cap.holds(read.0, read.1)) {
                    return Err(CheckpointError::TooLarge {
                        shards: read.0,
                        bytes: read.1,
                        cap,
                    });
                }
                let name = cm.metadata.name.as_deref().unwrap_or_default();
                marker |= name == cfg.prefix;
                if let Some(f) = found_shard(&cfg.prefix, cm) {
                    found.push(f);
                }
            }
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        let shards_read = found.len();
        let restored = layout::restore(found, marker);
        let mut layout = restored.layout;
        layout.rebalance();
        let first_start = !marker;
        let lost_everything = marker && restored.coverage.is_empty();
        tracing::info!(
            namespace = %cfg.namespace,
            streams = restored.states.len(),
            shards_read,
            shards = layout.shard_count(),
            first_start,
            unreadable = restored.unreadable.len(),
            "checkpoint loaded"
        );
        if lost_everything {
            tracing::error!(namespace = %cfg.namespace, "the checkpoint's marker is there but none of its shards: every stream's current tags are sent again");
        }
        let checkpoint = Checkpoint {
            api,
            client,
            cfg,
            owner,
            layout: Mutex::new(layout),
            persistence: Mutex::new(Persistence::new(Instant::now())),
            flushing: tokio::sync::Mutex::new(()),
            written: std::sync::atomic::AtomicU64::new(0),
            fence: crate::runtime::leader::Fence::default(),
        };
        let loaded = Loaded {
            states: restored.states,
            first_start,
            coverage: restored.coverage,
            unreadable: restored.unreadable,
        };
        Ok((checkpoint, loaded))
    }
}

/// The bytes of a ConfigMap's entries: keys and values.
pub fn data_bytes(cm: &ConfigMap) -> usize {
    (cm.data.iter().flatten())
        .map(|(k, v)| k.len() + v.len())
        .sum()
}

/// A listed ConfigMap as a shard, if it is one.
pub(crate) fn found_shard(prefix: &str, cm: ConfigMap) -> Option<Found> {
    let prefix = Prefix::of_shard(prefix, cm.metadata.name.as_deref()?)?;
    let epoch = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EPOCH_ANNOTATION)?.parse().ok());
    Some(Found {
        prefix,
        epoch,
        data: cm.data.unwrap_or_default(),
    })
}
