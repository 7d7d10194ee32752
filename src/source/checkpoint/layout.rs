//! The checkpoint's layout: which ConfigMap holds which streams, how the set of ConfigMaps grows
//! and shrinks with the state, and how a set left by a crash is read back. Pure: no I/O.
//!
//! **Leaves.** A stream's [`place`] is a 64-bit hash. The ConfigMaps cover the hash space as the
//! leaves of a binary trie: the shard of [`Prefix`] `p` holds the streams whose hash starts with
//! `p`'s bits, and is named `{prefix}-h{bits}` (`-h` alone for the whole space). The leaves cover
//! every hash exactly once. A leaf that grows past [`SPLIT_ABOVE`] bytes splits into its two
//! children; two sibling leaves that hold less than [`MERGE_BELOW`] together merge into their
//! parent. So the number of ConfigMaps follows the size of the state, and no shard comes near
//! the 1 MiB a ConfigMap may hold (only a single stream's entry larger than [`SPLIT_ABOVE`]
//! cannot be split, and it is refused past [`MAX_SHARD_BYTES`]).
//!
//! **Epochs.** Every leaf made by a split or a merge is written whole (one create, or one JSON
//! patch replacing the data of a stale ConfigMap of the same name) with a new epoch, higher
//! than every epoch before it; changes then go to it alone. The shards it replaces become
//! *obsolete* and are deleted only once every leaf is written. So at every moment the shards
//! in the cluster hold every stream, and where two of them cover the same hash, the one with
//! the higher epoch is the newer: [`restore()`] takes each stream from the shard with the highest
//! epoch that covers its hash. A crash anywhere in a split or a merge leaves either the old
//! shard (older state: a change is sent again) or the new one, never neither.

use std::collections::{BTreeMap, BTreeSet};

use super::entry::{self, StreamKey, place};

mod names;
mod restore;

pub use self::names::Prefix;
use self::restore::hash_of_entry;
pub use self::restore::{Coverage, Found, Restored, restore};

/// A leaf splits when its keys and values take more than this many bytes.
pub const SPLIT_ABOVE: usize = 512 * 1024;
/// Two sibling leaves merge when together they take less than this.
pub const MERGE_BELOW: usize = 160 * 1024;
/// The largest shard written: room below the API server's 1 MiB ConfigMap limit for the
/// object's metadata. Only a leaf of one oversized entry can reach it.
pub const MAX_SHARD_BYTES: usize = 900 * 1024;
/// The deepest leaf: 2^40 shards is beyond any cluster, and names stay short.
const MAX_DEPTH: u8 = 40;

/// One leaf as it will be once its pending changes are written.
#[derive(Debug, Default)]
pub(crate) struct Leaf {
    /// When it was made (see the module docs).
    pub epoch: u64,
    /// Its ConfigMap holds its whole content (as of a write; `dirty` is what came after).
    pub written: bool,
    /// Every entry, pending changes applied: data key -> value.
    pub data: BTreeMap<String, String>,
    /// The bytes of `data`'s keys and values.
    pub bytes: usize,
    /// The keys changed since the last write, each with the number of its last change. The
    /// value to write is the one in `data` (none: remove the key).
    pub dirty: BTreeMap<String, u64>,
}

impl Leaf {
    fn new(epoch: u64) -> Leaf {
        Leaf {
            epoch,
            ..Leaf::default()
        }
    }

    fn insert_clean(&mut self, key: String, value: String) {
        self.bytes += key.len() + value.len();
        if let Some(old) = self.data.insert(key.clone(), value) {
            self.bytes -= key.len() + old.len();
        }
    }

    /// The changes not yet written: each key with its value (None: remove the key).
    pub(crate) fn pending(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        (self.dirty.keys()).map(|k| (k.as_str(), self.data.get(k).map(String::as_str)))
    }
}

/// What a flush has to do, in this order: the writes, then (once every leaf is written) the
/// deletions and the marker.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Leaves to write whole (new, or never written).
    pub whole: Vec<Prefix>,
    /// Leaves to patch with their changed keys.
    pub patch: Vec<Prefix>,
}

/// Every leaf, and what is left to clean up.
/// The largest epoch a shard may carry. Epochs count splits and merges from 1, so a real one stays
/// far below this; a larger one (a hand-written or forged annotation) is read as missing, so that
/// it neither overflows the next epoch nor outranks every shard written after it.
pub(crate) const MAX_EPOCH: u64 = 1 << 53;

#[derive(Debug)]
pub struct Layout {
    // Boxed: most sources have one leaf, and a B-tree node holds room for eleven.
    leaves: BTreeMap<Prefix, Box<Leaf>>,
    /// The deepest leaf's depth (a lookup tries each depth up to it).
    max_depth: u8,
    /// Shards in the cluster whose streams now live in leaves: deleted once every leaf is
    /// written. A name that is a leaf again is overwritten by the leaf's whole write instead.
    obsolete: BTreeSet<Prefix>,
    next_epoch: u64,
    /// Numbers every change (a write made from a snapshot clears only what it carried).
    changes: u64,
    /// The marker that tells a restart from a first start exists.
    pub marker: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            leaves: BTreeMap::from([(Prefix::ROOT, Box::new(Leaf::new(1)))]),
            max_depth: 0,
            obsolete: BTreeSet::new(),
            next_epoch: 2,
            changes: 0,
            marker: false,
        }
    }
}

impl Layout {
    /// The leaf whose range holds `hash`.
    fn leaf_of(&self, hash: u64) -> Prefix {
        (0..=self.max_depth)
            .map(|d| Prefix::of(hash, d))
            .find(|p| self.leaves.contains_key(p))
            .unwrap_or(Prefix::ROOT)
    }

    /// Sets (or, with None, removes) a stream's entry; false if that changes nothing.
    pub(crate) fn set(&mut self, key: &StreamKey, value: Option<String>) -> bool {
        let data_key = entry::data_key(key);
        let at = self.leaf_of(place(key));
        self.changes += 1;
        let change = self.changes;
        let leaf = self.leaves.entry(at).or_default();
        if leaf.data.get(&data_key) == value.as_ref() {
            return false;
        }
        let old = match value {
            Some(v) => {
                leaf.bytes += data_key.len() + v.len();
                leaf.data.insert(data_key.clone(), v)
            }
            None => leaf.data.remove(&data_key),
        };
        leaf.bytes -= old.map_or(0, |v| data_key.len() + v.len());
        leaf.dirty.insert(data_key, change);
        true
    }

    /// A stream's entry value.
    pub(crate) fn get(&self, key: &StreamKey) -> Option<&str> {
        let leaf = self.leaves.get(&self.leaf_of(place(key)))?;
        leaf.data.get(&entry::data_key(key)).map(String::as_str)
    }

    /// A leaf.
    pub(crate) fn leaf(&self, prefix: Prefix) -> Option<&Leaf> {
        self.leaves.get(&prefix).map(|l| &**l)
    }

    /// The number of the last change made.
    pub(crate) fn change_number(&self) -> u64 {
        self.changes
    }

    /// How many leaves (ConfigMaps, once written) there are.
    pub(crate) fn shard_count(&self) -> usize {
        self.leaves.len()
    }

    /// The bytes of every entry.
    pub(crate) fn bytes(&self) -> usize {
        self.leaves.values().map(|l| l.bytes).sum()
    }

    /// How many entries are waiting to be written (a leaf never written counts whole).
    pub(crate) fn pending(&self) -> usize {
        (self.leaves.values())
            .map(|l| {
                if l.written {
                    l.dirty.len()
                } else {
                    l.data.len().max(1)
                }
            })
            .sum()
    }

    /// The number of the oldest change not yet written, if any is pending.
    pub(crate) fn oldest_pending(&self) -> Option<u64> {
        (self.leaves.values())
            .filter_map(|l| l.dirty.values().min().copied())
            .min()
    }

    /// Whether every leaf's ConfigMap holds its content (so obsolete shards may go).
    pub(crate) fn all_written(&self) -> bool {
        self.leaves.values().all(|l| l.written)
    }

    /// The obsolete shards that may be deleted now: none until every leaf is written.
    pub(crate) fn deletable(&self) -> Vec<Prefix> {
        if !self.all_written() {
            return Vec::new();
        }
        (self.obsolete.iter())
            .filter(|p| !self.leaves.contains_key(p))
            .copied()
            .collect()
    }

    /// Splits the leaves that grew too large and merges siblings that became small.
    pub(crate) fn rebalance(&mut self) {
        let mut work: Vec<Prefix> = self.leaves.keys().copied().collect();
        while let Some(p) = work.pop() {
            let splittable = self
                .leaves
                .get(&p)
                .is_some_and(|l| l.bytes > SPLIT_ABOVE && l.data.len() > 1 && p.depth < MAX_DEPTH);
            if splittable {
                work.extend(self.split(p));
            }
        }
        loop {
            let pair = (self.leaves.keys().copied())
                .filter(|p| p.bits & 1 == 0)
                .find_map(|p| {
                    let sibling = p.sibling()?;
                    let together = self.leaves[&p].bytes + self.leaves.get(&sibling)?.bytes;
                    (together < MERGE_BELOW).then_some((p, sibling))
                });
            match pair {
                Some((a, b)) => self.merge(a, b),
                None => break,
            }
        }
        self.max_depth = self.leaves.keys().map(|p| p.depth).max().unwrap_or(0);
    }

    fn take_epoch(&mut self) -> u64 {
        let e = self.next_epoch;
        self.next_epoch = self.next_epoch.saturating_add(1);
        e
    }

    fn retire(&mut self, prefix: Prefix, leaf: &Leaf) {
        if leaf.written {
            self.obsolete.insert(prefix);
        }
    }

    fn split(&mut self, p: Prefix) -> [Prefix; 2] {
        let leaf = self.leaves.remove(&p).unwrap_or_default();
        self.retire(p, &leaf);
        let epoch = self.take_epoch();
        let halves = p.children();
        let mut parts = [Leaf::new(epoch), Leaf::new(epoch)];
        for (k, v) in leaf.data {
            let hash = hash_of_entry(&k, &v).unwrap_or(0);
            let half = usize::from(!halves[0].covers(hash));
            parts[half].insert_clean(k, v);
        }
        let [a, b] = parts;
        self.leaves.insert(halves[0], Box::new(a));
        self.leaves.insert(halves[1], Box::new(b));
        self.max_depth = self.max_depth.max(p.depth + 1);
        halves
    }

    fn merge(&mut self, a: Prefix, b: Prefix) {
        let (Some(left), Some(right)) = (self.leaves.remove(&a), self.leaves.remove(&b)) else {
            return;
        };
        self.retire(a, &left);
        self.retire(b, &right);
        let mut parent = Leaf::new(self.take_epoch());
        for (k, v) in left.data.into_iter().chain(right.data) {
            parent.insert_clean(k, v);
        }
        self.leaves
            .insert(a.parent().unwrap_or(Prefix::ROOT), Box::new(parent));
    }

    /// What the next flush writes.
    pub(crate) fn plan(&self) -> Plan {
        let mut plan = Plan {
            whole: Vec::new(),
            patch: Vec::new(),
        };
        for (p, leaf) in &self.leaves {
            if !leaf.written {
                plan.whole.push(*p);
            } else if !leaf.dirty.is_empty() {
                plan.patch.push(*p);
            }
        }
        plan
    }

    /// A leaf was written: whole (its ConfigMap now holds exactly its content) or patched,
    /// with the changes up to number `upto`; later ones stay pending. A leaf that is no longer
    /// there (it cannot be: the leaves change only in a flush) is ignored.
    pub(crate) fn written(&mut self, prefix: Prefix, epoch: u64, upto: u64, whole: bool) {
        let Some(leaf) = self.leaves.get_mut(&prefix).filter(|l| l.epoch == epoch) else {
            return;
        };
        leaf.dirty.retain(|_, change| *change > upto);
        if leaf.dirty.is_empty() {
            // Free the emptied node: a leaf is clean most of its life, in every source.
            leaf.dirty = BTreeMap::new();
        }
        if whole {
            leaf.written = true;
            self.obsolete.remove(&prefix);
        }
    }

    /// A leaf's ConfigMap is gone (deleted by hand, or with its namespace): its next write is a
    /// whole one, and the marker is written again after it (it may be gone too).
    pub(crate) fn lost(&mut self, prefix: Prefix) {
        if let Some(leaf) = self.leaves.get_mut(&prefix) {
            leaf.written = false;
        }
        self.marker = false;
    }

    /// An obsolete shard was deleted (or was already gone).
    pub(crate) fn deleted(&mut self, shard: Prefix) {
        self.obsolete.remove(&shard);
    }
}

#[cfg(test)]
mod tests;
