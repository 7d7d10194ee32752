//! The checkpoint: what the source has delivered, kept in the cluster, so that a restart (or a
//! new pod on another node) diffs the streams against it and sends exactly what it has not sent.
//!
//! **What is stored.** One entry per ImageStream: the [`StreamState`] the receivers have been
//! told about (the stream's uid and, per tag, the digest and generation last delivered as
//! current and the generation of the last import failure delivered), as compact JSON
//! (`{"u":"<uid>","t":{"latest":{"d":"sha256:…","g":3}}}`). That is the minimum: the diff needs
//! the uid to tell a re-created stream from the old one, the generation to find the history
//! entries not yet sent (several imports while down are all sent, oldest first), the digest
//! for `previousDigest` and for a tag whose history was pruned, and the failure generation so an
//! `ImportSuccess=False` already reported is not reported again. Nothing else of the object
//! is needed, so nothing else is kept.
//!
//! **Where.** ConfigMaps in the source's own namespace, `{prefix}-{shard:02}` (by default
//! `imagegate-source-checkpoint-00` … `-15`), labelled `app.kubernetes.io/name: imagegate`,
//! `app.kubernetes.io/component: source-checkpoint`, with the shard count they were written
//! with in the annotation [`SHARDS_ANNOTATION`]. A stream lives in shard
//! `fnv1a64("{namespace}/{name}") % shards` (a hash any tool can recompute, unlike Rust's
//! `DefaultHasher`) under the data key `{namespace}_{name}` (a namespace never contains `_`,
//! so the key splits at its first `_`; a name may). The few streams whose `namespace/name`
//! is longer than 253 characters (the ConfigMap key limit; OpenShift allows 255) are keyed
//! `_{hash:016x}` and carry `"k":"{namespace}/{name}"` in the value. The source needs
//! `list`, `create`, `patch` and `delete` on ConfigMaps in its namespace.
//!
//! **How it scales.** An entry is about 80 bytes (key and uid) plus about 100 bytes per tag (a
//! sha256 digest is 71), so 10,000 streams of 3 tags are ~3.7 MB in all and ~230 KB per shard
//! with 16 shards: far below the 1 MiB a ConfigMap may hold. A shard that would grow past [`MAX_SHARD_BYTES`] (900 KiB) is
//! not written and the flush fails with [`CheckpointError::ShardTooLarge`], naming the fix
//! (more shards); its changes stay pending, so they are re-sent after a restart, never lost.
//! [`Checkpoint::record`] only changes memory; [`Checkpoint::flush`], every `flush_interval`,
//! sends one JSON merge patch per changed shard carrying only the changed keys (`null`
//! removes one), so a flush costs a few requests however many streams exist, and a merge patch
//! needs no resourceVersion, so writes never conflict. In memory each entry is held once, as
//! its compact JSON (a pending change is a key and a change number), patches are written
//! straight from it, the API server's answers (the whole shard) are not parsed, and the
//! shards are read one per page on load: the checkpoint of 10,000 streams stays a few MB. A changed shard count is handled on
//! [`Checkpoint::load`]: every shard is read whatever count it was written with, entries not
//! in their new shard are written there first and removed from the old one only after that
//! write succeeded, and shards beyond the new count are deleted once empty.
//!
//! **Crashes.** The source records a state after the sink accepted the event, and flushes
//! later, so a crash between delivery and flush loses the last `flush_interval` of records:
//! the next start diffs against the older state and sends those changes again. Delivery is
//! therefore at least once; the events carry deterministic ids (the same change always gets the
//! same id), so receivers deduplicate them. A clean shutdown ([`Checkpoint::run`]) flushes last,
//! so a clean restart re-sends nothing. A failed flush keeps its changes pending and the next
//! one retries them. The first flush creates every shard, even empty, so that a restart can
//! tell "nothing to remember" from "never started" (which is when `--emit-existing` applies).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::Value;
use serde_json::value::RawValue;

use super::change::StreamState;

/// The ImageStream a checkpoint entry is about: `(namespace, name)`.
pub type StreamKey = (String, String);

/// The annotation that records how many shards a checkpoint ConfigMap was written for.
pub const SHARDS_ANNOTATION: &str = "imagegate.dev/checkpoint-shards";
/// The largest shard written, in bytes of keys and values: room below the API server's 1 MiB
/// ConfigMap limit for the object's metadata.
pub const MAX_SHARD_BYTES: usize = 900 * 1024;
/// The longest ConfigMap data key the API server accepts.
const MAX_KEY_LEN: usize = 253;
/// Tries per shard and flush; a flush that still fails keeps its changes for the next one.
const WRITE_ATTEMPTS: u32 = 4;
/// How many shards are written at once.
const CONCURRENT_WRITES: usize = 4;
const LABELS: [(&str, &str); 2] = [
    ("app.kubernetes.io/name", "imagegate"),
    ("app.kubernetes.io/component", "source-checkpoint"),
];

/// Where the checkpoint lives and how often it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// The source's own namespace.
    pub namespace: String,
    /// The ConfigMaps' name prefix (`imagegate-source-checkpoint`).
    pub prefix: String,
    /// How many ConfigMaps the streams are spread over (16; 1 to 999).
    pub shards: u32,
    /// How often [`Checkpoint::run`] flushes (5 s).
    pub flush_interval: Duration,
}

impl CheckpointConfig {
    /// The defaults, in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        CheckpointConfig {
            namespace: namespace.into(),
            prefix: "imagegate-source-checkpoint".into(),
            shards: 16,
            flush_interval: Duration::from_secs(5),
        }
    }
}

/// Reading or writing the checkpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The shard count cannot be used.
    #[error("checkpoint shard count {0} is not between 1 and 999")]
    InvalidShardCount(u32),
    /// Listing the shards failed.
    #[error("listing the checkpoint ConfigMaps in {namespace} failed: {source}")]
    Load {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    /// Writing (patching or creating) a shard failed after the retries; its changes are kept.
    #[error("writing checkpoint shard {namespace}/{name} failed: {source}")]
    Write {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// Deleting a shard left over from a larger shard count failed.
    #[error("deleting retired checkpoint shard {namespace}/{name} failed: {source}")]
    Delete {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A shard's patch cannot be encoded (not expected: its entries are strings).
    #[error("encoding checkpoint shard {name} failed: {source}")]
    Encode {
        name: String,
        #[source]
        source: serde_json::Error,
    },
    /// A shard would outgrow a ConfigMap; it is not written and its changes are kept.
    #[error(
        "checkpoint shard {name} would hold {bytes} bytes, over the limit of {limit}; \
         raise --checkpoint-shards (its changes stay pending and are re-sent after a restart)"
    )]
    ShardTooLarge {
        name: String,
        bytes: usize,
        limit: usize,
    },
}

impl CheckpointError {
    /// A fixed name for a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            CheckpointError::InvalidShardCount(_) => "invalid_shard_count",
            CheckpointError::Load { .. } => "load",
            CheckpointError::Write { .. } => "write",
            CheckpointError::Delete { .. } => "delete",
            CheckpointError::ShardTooLarge { .. } => "shard_too_large",
            CheckpointError::Encode { .. } => "encode",
        }
    }
}

/// FNV-1a, 64 bits: stable across Rust versions, platforms and languages.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The shard a stream lives in.
pub fn shard_of(key: &StreamKey, shards: u32) -> u32 {
    (fnv1a64(format!("{}/{}", key.0, key.1).as_bytes()) % u64::from(shards)) as u32
}

/// A shard's ConfigMap name.
pub fn shard_name(prefix: &str, shard: u32) -> String {
    format!("{prefix}-{shard:02}")
}

/// The shard number of a ConfigMap named `{prefix}-{digits}`.
fn shard_index(prefix: &str, name: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_prefix('-')?;
    (digits.len() >= 2 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// A stream's data key: `{namespace}_{name}`, or `_{hash}` when that would be too long.
pub fn data_key(key: &StreamKey) -> String {
    if key.0.len() + 1 + key.1.len() <= MAX_KEY_LEN {
        format!("{}_{}", key.0, key.1)
    } else {
        format!(
            "_{:016x}",
            fnv1a64(format!("{}/{}", key.0, key.1).as_bytes())
        )
    }
}

/// A stream's entry value under `data_key`: the compact JSON of its state (with `k` for a
/// hashed data key).
fn encode(
    key: &StreamKey,
    data_key: &str,
    state: &StreamState,
) -> Result<String, serde_json::Error> {
    if data_key.starts_with('_') {
        let mut v = serde_json::to_value(state)?;
        v["k"] = Value::String(format!("{}/{}", key.0, key.1));
        serde_json::to_string(&v)
    } else {
        serde_json::to_string(state)
    }
}

/// An entry back into a stream and its state.
fn decode(data_key: &str, value: &str) -> Result<(StreamKey, StreamState), String> {
    let mut v: Value = serde_json::from_str(value).map_err(|e| e.to_string())?;
    let full = match v.as_object_mut().and_then(|o| o.remove("k")) {
        Some(Value::String(k)) => k.split_once('/').map(|(ns, n)| (ns.into(), n.into())),
        Some(_) => None,
        None => data_key
            .split_once('_')
            .map(|(ns, n)| (ns.into(), n.into())),
    };
    let key: StreamKey = full
        .filter(|(ns, n): &StreamKey| !ns.is_empty() && !n.is_empty())
        .ok_or_else(|| "no namespace and name in the key".to_string())?;
    let state = serde_json::from_value(v).map_err(|e| e.to_string())?;
    Ok((key, state))
}

/// One shard as it will be once its pending changes are written.
#[derive(Debug, Default)]
struct Shard {
    /// Every entry, pending changes applied.
    data: BTreeMap<String, String>,
    /// The bytes of `data`'s keys and values.
    bytes: usize,
    /// The keys changed and not yet written, each with the number of its last change. The
    /// value to write is the one in `data` (none: remove the key), so a change is held once.
    dirty: BTreeMap<String, u64>,
    /// How many changes were made (numbers the `dirty` entries: a write made from a snapshot
    /// clears only the entries not changed since).
    changes: u64,
    /// The labels or the shard-count annotation need writing (first start, new shard count).
    meta_dirty: bool,
}

impl Shard {
    /// Sets or removes an entry; false if that changes nothing.
    fn set(&mut self, key: String, value: Option<String>) -> bool {
        if self.data.get(&key) == value.as_ref() {
            return false;
        }
        let old = match value {
            Some(mut v) => {
                // Serialized into a growing buffer: the spare room would be kept per stream.
                v.shrink_to_fit();
                self.bytes += key.len() + v.len();
                self.data.insert(key.clone(), v)
            }
            None => self.data.remove(&key),
        };
        self.bytes -= old.map_or(0, |v| key.len() + v.len());
        self.mark_changed(key);
        true
    }

    /// Marks `key` as to be written (removed, if `data` has no value for it).
    fn mark_changed(&mut self, key: String) {
        self.changes += 1;
        self.dirty.insert(key, self.changes);
    }

    /// The changes up to number `upto` were written; the ones made since stay pending.
    fn written(&mut self, upto: u64) {
        self.dirty.retain(|_, change| *change > upto);
    }

    /// The changes not yet written: each key with its value (None: remove the key).
    fn pending(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        (self.dirty.keys()).map(|k| (k.as_str(), self.data.get(k).map(String::as_str)))
    }
}

/// Every shard, and the copies to remove from old shards once their new home is written.
#[derive(Debug, Default)]
struct Layout {
    shards: u32,
    by_index: BTreeMap<u32, Shard>,
    /// Old shard -> data key -> home shard.
    moves: BTreeMap<u32, BTreeMap<String, u32>>,
}

/// A shard as read: its number, the shard count it was written for, its data.
type Found = (u32, Option<u32>, BTreeMap<String, String>);

impl Layout {
    /// Rebuilds the layout for `shards` from the ConfigMaps read: entries out of place are
    /// scheduled to move, copies left by an interrupted move are resolved (the one in its home
    /// shard wins), unreadable entries are removed, every home shard is (re)labelled as needed.
    fn restore(shards: u32, found: Vec<Found>) -> (Layout, HashMap<StreamKey, StreamState>) {
        let mut layout = Layout {
            shards,
            ..Layout::default()
        };
        for i in 0..shards {
            layout.by_index.entry(i).or_default().meta_dirty = true;
        }
        let mut states = HashMap::new();
        let mut homes: BTreeMap<String, u32> = BTreeMap::new();
        let mut found = found;
        found.sort_by_key(|(index, _, _)| *index);
        for (index, written_for, data) in found {
            let shard = layout.by_index.entry(index).or_default();
            shard.meta_dirty = index < shards && written_for != Some(shards);
            for (dk, value) in data {
                let (key, state) = match decode(&dk, &value) {
                    Ok(entry) => entry,
                    Err(reason) => {
                        tracing::warn!(shard = index, key = %dk, %reason, "removing an unreadable checkpoint entry");
                        shard.mark_changed(dk);
                        continue;
                    }
                };
                shard.bytes += dk.len() + value.len();
                shard.data.insert(dk.clone(), value);
                let home = shard_of(&key, shards);
                if home != index {
                    layout
                        .moves
                        .entry(index)
                        .or_default()
                        .insert(dk.clone(), home);
                }
                // A copy left by an interrupted move: the one in its home shard wins.
                let take = homes.get(&dk).is_none_or(|at| *at != home && index == home);
                if take {
                    homes.insert(dk, index);
                    states.insert(key, state);
                }
            }
        }
        for (dk, at) in homes {
            let home = layout.moves.get(&at).and_then(|m| m.get(&dk)).copied();
            if let Some(home) = home {
                let value = layout.by_index[&at].data[&dk].clone();
                layout
                    .by_index
                    .entry(home)
                    .or_default()
                    .set(dk, Some(value));
            }
        }
        (layout, states)
    }

    /// Turns the moves whose new home has been written into removals from the old shard.
    fn release_moves(&mut self) -> bool {
        let mut released = false;
        for (old, keys) in &mut self.moves {
            keys.retain(|dk, home| {
                if self
                    .by_index
                    .get(home)
                    .is_some_and(|h| h.dirty.contains_key(dk))
                {
                    return true;
                }
                if let Some(shard) = self.by_index.get_mut(old) {
                    released |= shard.set(dk.clone(), None);
                }
                false
            });
        }
        self.moves.retain(|_, keys| !keys.is_empty());
        released
    }
}

/// The labels and the shard-count annotation every shard carries.
#[derive(serde::Serialize)]
struct ShardMeta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    labels: BTreeMap<&'static str, &'static str>,
    annotations: BTreeMap<&'static str, String>,
}

impl ShardMeta<'_> {
    fn new(shards: u32) -> Self {
        ShardMeta {
            name: None,
            namespace: None,
            labels: BTreeMap::from(LABELS),
            annotations: BTreeMap::from([(SHARDS_ANNOTATION, shards.to_string())]),
        }
    }
}

/// A shard's `data`, serialized from borrowed entries.
struct Entries<'a>(Vec<(&'a str, Option<&'a str>)>);

impl serde::Serialize for Entries<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().copied())
    }
}

/// The merge patch that writes `changes` (and the labels and shard count) into a shard, as
/// JSON text: built straight from the shard's entries, so a flush holds each change once more
/// (in the text), not as a copied map and a JSON value besides.
fn patch_body<'a>(
    shards: u32,
    changes: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> Result<Box<RawValue>, serde_json::Error> {
    #[derive(serde::Serialize)]
    struct Body<'a> {
        metadata: ShardMeta<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<Entries<'a>>,
    }
    let changes: Vec<_> = changes.collect();
    serde_json::value::to_raw_value(&Body {
        metadata: ShardMeta::new(shards),
        data: (!changes.is_empty()).then_some(Entries(changes)),
    })
}

/// A whole shard as a new ConfigMap, as JSON text.
fn create_body(
    cfg: &CheckpointConfig,
    name: &str,
    shard: &Shard,
) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        api_version: &'static str,
        kind: &'static str,
        metadata: ShardMeta<'a>,
        data: Entries<'a>,
    }
    let entries = shard
        .data
        .iter()
        .map(|(k, v)| (k.as_str(), Some(v.as_str())));
    serde_json::to_vec(&Body {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: ShardMeta {
            name: Some(name),
            namespace: Some(&cfg.namespace),
            ..ShardMeta::new(cfg.shards)
        },
        data: Entries(entries.collect()),
    })
}

/// One shard to write (its patch is made when its write starts, so that only the writes in
/// flight hold one).
struct Job {
    index: u32,
    name: String,
}

/// How a shard write ended.
enum Written {
    /// Everything up to change number `upto` is written.
    Patched { upto: u64 },
    /// A shard beyond the shard count no longer exists: nothing is left to remove.
    Gone,
}

/// The delivered state of every stream, kept in memory and written to the cluster.
pub struct Checkpoint {
    api: Api<ConfigMap>,
    /// Writes go through the raw client: the API server answers each with the whole shard,
    /// which is not needed, so it is not parsed.
    client: kube::Client,
    cfg: CheckpointConfig,
    layout: Mutex<Layout>,
    /// One flush at a time.
    flushing: tokio::sync::Mutex<()>,
}

impl Checkpoint {
    /// Reads every shard (all ConfigMaps with the labels and prefix, whatever shard count they
    /// were written with). The states are None on a first start (no shard exists), so the
    /// caller knows whether `--emit-existing` applies.
    pub async fn load(
        client: kube::Client,
        cfg: CheckpointConfig,
    ) -> Result<(Checkpoint, Option<HashMap<StreamKey, StreamState>>), CheckpointError> {
        if !(1..=999).contains(&cfg.shards) {
            return Err(CheckpointError::InvalidShardCount(cfg.shards));
        }
        let api = Api::<ConfigMap>::namespaced(client.clone(), &cfg.namespace);
        let selector = LABELS.map(|(k, v)| format!("{k}={v}")).join(",");
        // One shard per page: the whole checkpoint in one response (16 x ~230 KB for 10,000
        // streams), held as text and parsed at once, would be the source's peak memory.
        let mut found: Vec<Found> = Vec::new();
        let mut params = ListParams::default().labels(&selector).limit(1);
        loop {
            let page = api
                .list(&params)
                .await
                .map_err(|source| CheckpointError::Load {
                    namespace: cfg.namespace.clone(),
                    source,
                })?;
            found.extend(page.items.into_iter().filter_map(|cm| {
                let index = shard_index(&cfg.prefix, cm.metadata.name.as_deref()?)?;
                let annotations = cm.metadata.annotations.as_ref();
                let written_for = annotations.and_then(|a| a.get(SHARDS_ANNOTATION)?.parse().ok());
                Some((index, written_for, cm.data.unwrap_or_default()))
            }));
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        let first_start = found.is_empty();
        let recounted: BTreeSet<u32> = found
            .iter()
            .filter_map(|(_, n, _)| *n)
            .filter(|n| *n != cfg.shards)
            .collect();
        let (layout, states) = Layout::restore(cfg.shards, found);
        let moving: usize = layout.moves.values().map(BTreeMap::len).sum();
        if !recounted.is_empty() || moving > 0 {
            tracing::info!(namespace = %cfg.namespace, from = ?recounted, to = cfg.shards, moving, "checkpoint shard count changed; moving entries");
        }
        tracing::info!(namespace = %cfg.namespace, streams = states.len(), first_start, "checkpoint loaded");
        let checkpoint = Checkpoint {
            api,
            client,
            cfg,
            layout: Mutex::new(layout),
            flushing: tokio::sync::Mutex::new(()),
        };
        Ok((checkpoint, (!first_start).then_some(states)))
    }

    fn layout(&self) -> MutexGuard<'_, Layout> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a stream's delivered state (None: forget the stream, after its deletion was
    /// delivered). Only in memory; the next flush writes it.
    pub fn record(&self, key: StreamKey, state: Option<StreamState>) {
        let data_key = data_key(&key);
        let value = match state
            .as_ref()
            .map(|s| encode(&key, &data_key, s))
            .transpose()
        {
            Ok(value) => value,
            Err(e) => {
                // Unreachable for a StreamState; logged rather than panicking the source.
                tracing::error!(namespace = %key.0, imagestream = %key.1, error = %e, "cannot encode a checkpoint entry");
                return;
            }
        };
        let mut layout = self.layout();
        let home = shard_of(&key, layout.shards);
        layout
            .by_index
            .entry(home)
            .or_default()
            .set(data_key, value);
    }

    /// The state recorded for a stream (delivered, written or not yet), if any. The checkpoint
    /// is the one copy of the delivered state the source keeps.
    pub fn get(&self, key: &StreamKey) -> Option<StreamState> {
        let data_key = data_key(key);
        let layout = self.layout();
        let home = shard_of(key, layout.shards);
        let value = layout.by_index.get(&home)?.data.get(&data_key)?;
        // The stream is known, so the state is parsed alone, straight from the entry's text
        // (a hashed key's `k` is ignored), not through a JSON value as `decode` must. This
        // runs on every acknowledgement.
        serde_json::from_str(value).ok()
    }

    /// How many entries are waiting to be written.
    pub fn pending(&self) -> usize {
        self.layout().by_index.values().map(|s| s.dirty.len()).sum()
    }

    /// Writes the changed shards: one merge patch per shard carrying only its changed keys,
    /// creating the ConfigMap if it is missing, each retried with backoff. Then removes the
    /// copies of moved entries and deletes emptied shards beyond the shard count. Returns how
    /// many shards were written; on error the failed changes stay pending (the other shards
    /// are still written).
    pub async fn flush(&self) -> Result<usize, CheckpointError> {
        let _one = self.flushing.lock().await;
        let mut written = BTreeSet::new();
        let mut first_error = self.write_dirty(&mut written).await;
        if self.layout().release_moves() {
            first_error = first_error.or(self.write_dirty(&mut written).await);
        }
        first_error = first_error.or(self.delete_retired(&mut written).await);
        match first_error {
            Some(e) => Err(e),
            None => Ok(written.len()),
        }
    }

    /// Flushes every `flush_interval` until `shutdown` completes, then flushes a last time so
    /// a clean restart re-sends nothing. Failed flushes are logged and retried next time.
    /// The first flush is at once (it creates the shards on a first start), so spawn this after
    /// the baseline of a first start is recorded.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(self.cfg.flush_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                _ = tick.tick() => {
                    if let Err(e) = self.flush().await {
                        tracing::warn!(error = %e, reason = e.kind(), pending = self.pending(), "checkpoint flush failed; retrying next interval");
                    }
                }
            }
        }
        match self.flush().await {
            Ok(_) => {
                tracing::info!(namespace = %self.cfg.namespace, "checkpoint flushed on shutdown")
            }
            Err(e) => {
                tracing::error!(error = %e, reason = e.kind(), pending = self.pending(), "last checkpoint flush failed; these changes will be sent again after the restart")
            }
        }
    }

    /// Writes every shard with changes; returns the first error.
    async fn write_dirty(&self, written: &mut BTreeSet<u32>) -> Option<CheckpointError> {
        let mut first_error = None;
        let jobs: Vec<Job> = {
            let layout = self.layout();
            let mut jobs = Vec::new();
            for (&index, shard) in &layout.by_index {
                if shard.dirty.is_empty() && !shard.meta_dirty {
                    continue;
                }
                let name = shard_name(&self.cfg.prefix, index);
                if shard.bytes > MAX_SHARD_BYTES {
                    let e = CheckpointError::ShardTooLarge {
                        name,
                        bytes: shard.bytes,
                        limit: MAX_SHARD_BYTES,
                    };
                    tracing::error!(error = %e, reason = e.kind(), "checkpoint shard not written");
                    first_error.get_or_insert(e);
                    continue;
                }
                jobs.push(Job { index, name });
            }
            jobs
        };
        let results: Vec<_> = futures::stream::iter(jobs)
            .map(|job| async {
                let result = self.write_shard(&job).await;
                (job, result)
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        let mut layout = self.layout();
        for (job, result) in results {
            let Some(shard) = layout.by_index.get_mut(&job.index) else {
                continue;
            };
            match result {
                Ok(Written::Patched { upto }) => {
                    shard.meta_dirty = false;
                    // A record made during the write stays pending.
                    shard.written(upto);
                    written.insert(job.index);
                }
                Ok(Written::Gone) => *shard = Shard::default(),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error
    }

    /// One shard's merge patch (or create, if it is missing), with retries.
    async fn write_shard(&self, job: &Job) -> Result<Written, CheckpointError> {
        let (body, upto) = {
            let layout = self.layout();
            let Some(shard) = layout.by_index.get(&job.index) else {
                return Ok(Written::Gone);
            };
            let body = patch_body(self.cfg.shards, shard.pending()).map_err(|source| {
                CheckpointError::Encode {
                    name: job.name.clone(),
                    source,
                }
            })?;
            (body, shard.changes)
        };
        let mut attempt = 1;
        loop {
            let result = match self.patch_shard(&job.name, &body).await {
                Err(e) if code(&e) == Some(404) && job.index >= self.cfg.shards => {
                    return Ok(Written::Gone);
                }
                Err(e) if code(&e) == Some(404) => self.create_shard(job).await,
                other => other.map(drop),
            };
            match result {
                Ok(()) => return Ok(Written::Patched { upto }),
                Err(e) if retriable(&e) && attempt < WRITE_ATTEMPTS => {
                    tracing::debug!(shard = %job.name, attempt, error = %e, "checkpoint write failed; retrying");
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Err(source) => {
                    return Err(CheckpointError::Write {
                        namespace: self.cfg.namespace.clone(),
                        name: job.name.clone(),
                        source,
                    });
                }
            }
        }
    }

    /// One merge patch.
    async fn patch_shard(&self, name: &str, body: &RawValue) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(self.api.resource_url());
        let mut req = request
            .patch(name, &PatchParams::default(), &Patch::Merge(body))
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("patch");
        self.send(req).await
    }

    /// Sends a write; its answer (the whole shard) is read and dropped as it arrives, never
    /// held or parsed: nothing in it is needed.
    async fn send(&self, req: http::Request<Vec<u8>>) -> Result<(), kube::Error> {
        let answer = self.client.request_stream(req).await?;
        futures::io::copy(answer, &mut futures::io::sink())
            .await
            .map(drop)
            .map_err(kube::Error::ReadEvents)
    }

    /// Creates a missing shard with everything it should hold (so a shard deleted by hand is
    /// restored whole); a 409 means it appeared meanwhile and the patch is retried.
    async fn create_shard(&self, job: &Job) -> Result<(), kube::Error> {
        let body = {
            let layout = self.layout();
            let empty = Shard::default();
            let shard = layout.by_index.get(&job.index).unwrap_or(&empty);
            create_body(&self.cfg, &job.name, shard).map_err(kube::Error::SerdeError)?
        };
        let request = kube::core::Request::new(self.api.resource_url());
        let mut req = request
            .create(&PostParams::default(), body)
            .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("create");
        self.send(req).await
    }

    /// Deletes the emptied shards beyond the shard count.
    async fn delete_retired(&self, written: &mut BTreeSet<u32>) -> Option<CheckpointError> {
        let retired: Vec<u32> = {
            let layout = self.layout();
            let empty =
                |i: &u32, s: &Shard| *i >= layout.shards && s.data.is_empty() && s.dirty.is_empty();
            (layout.by_index.iter())
                .filter(|(i, s)| empty(i, s) && !layout.moves.contains_key(i))
                .map(|(i, _)| *i)
                .collect()
        };
        let mut first_error = None;
        for index in retired {
            let name = shard_name(&self.cfg.prefix, index);
            match self.api.delete(&name, &DeleteParams::default()).await {
                Err(e) if code(&e) != Some(404) => {
                    first_error.get_or_insert(CheckpointError::Delete {
                        namespace: self.cfg.namespace.clone(),
                        name,
                        source: e,
                    });
                }
                _ => {
                    tracing::info!(shard = %name, "deleted a checkpoint shard beyond the shard count");
                    self.layout().by_index.remove(&index);
                    written.insert(index);
                }
            }
        }
        first_error
    }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// Conflicts (a create that raced), throttling, server errors and transport errors may pass;
/// anything else (forbidden, invalid) will not by retrying now.
fn retriable(e: &kube::Error) -> bool {
    code(e).is_none_or(|c| c == 409 || c == 429 || c >= 500)
}

/// 200 ms, 400 ms, 800 ms, … at most 5 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(100 << attempt.min(6)).min(Duration::from_secs(5))
}

#[cfg(test)]
mod tests;
