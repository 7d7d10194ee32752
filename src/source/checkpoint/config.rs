//! Where the checkpoint lives, how often it is written, and the most it may hold.

use std::time::Duration;

/// Where the checkpoint lives and how often it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// The namespace of its ConfigMaps: the program's own (`POD_NAMESPACE`).
    pub namespace: String,
    /// The ConfigMaps' name prefix (`imagegate-source-checkpoint`).
    pub prefix: String,
    /// How often [`Checkpoint::run`](super::Checkpoint::run) flushes at most (5 s).
    pub flush_interval: Duration,
    /// The bytes per second of shards the flushes may have the API server store (2 MiB/s): it
    /// stores, and answers with, every shard written whole, however few of its keys changed. A
    /// flush that wrote more waits longer before the next one ([`pause`]).
    pub write_budget: u64,
    /// The most it may hold (None: no bound, the single source's, which the platform runs for
    /// itself). The multi-tenant adapter bounds each source's: a load reads no further than
    /// the cap, and fails with [`CheckpointError::TooLarge`](super::CheckpointError::TooLarge).
    pub cap: Option<Cap>,
}

impl CheckpointConfig {
    /// The defaults, in `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        CheckpointConfig {
            namespace: namespace.into(),
            prefix: "imagegate-source-checkpoint".into(),
            flush_interval: Duration::from_secs(5),
            write_budget: DEFAULT_WRITE_BUDGET,
            cap: None,
        }
    }
}

/// The most one checkpoint may hold: its ConfigMaps, and the bytes of their entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    /// ConfigMaps (shards, the marker included).
    pub shards: usize,
    /// Bytes of entries (keys and values).
    pub bytes: usize,
}

impl Cap {
    /// Whether `shards` ConfigMaps of `bytes` are within the cap (pure).
    pub(crate) fn holds(&self, shards: usize, bytes: usize) -> bool {
        shards <= self.shards && bytes <= self.bytes
    }
}

/// [`CheckpointConfig::write_budget`]'s default: 2 MiB of shards per second.
pub const DEFAULT_WRITE_BUDGET: u64 = 2 * 1024 * 1024;
/// The longest pause between two flushes, however much the last one wrote: the most a crash
/// in a burst sends again.
pub const MAX_PAUSE: Duration = Duration::from_secs(30);

/// The pause after a flush that had the API server store `written` bytes of shards: the flush
/// interval, or longer when the write budget asks for it (at most [`MAX_PAUSE`]). In a burst,
/// when every shard changes, flushes grow further apart instead of rewriting every shard twice a
/// second; when few streams change, the interval holds.
pub fn pause(interval: Duration, written: u64, budget: u64) -> Duration {
    let needed = Duration::from_secs_f64(written as f64 / budget.max(1) as f64);
    interval.max(needed.min(MAX_PAUSE))
}
