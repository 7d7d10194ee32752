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
//! the higher epoch is the newer: [`restore`] takes each stream from the shard with the highest
//! epoch that covers its hash. A crash anywhere in a split, a merge or a migration leaves either
//! the old shard (older state: a change is sent again) or the new one, never neither.
//!
//! **Earlier versions** wrote a fixed number of shards, `{prefix}-NN`, by
//! `fnv1a64("{namespace}/{name}") % N`. They are read as epoch 0 (older than any leaf) and
//! become obsolete: their streams are written into leaves, and they are deleted after that.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::entry::{self, StreamKey, place};
use crate::source::state::StreamState;

/// A leaf splits when its keys and values take more than this many bytes.
pub const SPLIT_ABOVE: usize = 512 * 1024;
/// Two sibling leaves merge when together they take less than this.
pub const MERGE_BELOW: usize = 160 * 1024;
/// The largest shard written: room below the API server's 1 MiB ConfigMap limit for the
/// object's metadata. Only a leaf of one oversized entry can reach it.
pub const MAX_SHARD_BYTES: usize = 900 * 1024;
/// The deepest leaf: 2^40 shards is beyond any cluster, and names stay short.
const MAX_DEPTH: u8 = 40;

/// A range of the hash space: the hashes whose top `depth` bits are `bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    depth: u8,
    bits: u64,
}

impl Prefix {
    /// The whole hash space.
    pub const ROOT: Prefix = Prefix { depth: 0, bits: 0 };

    /// The range of depth `depth` that holds `hash`.
    pub fn of(hash: u64, depth: u8) -> Prefix {
        let bits = if depth == 0 {
            0
        } else {
            hash >> (64 - u32::from(depth))
        };
        Prefix { depth, bits }
    }

    /// How many bits it fixes.
    pub fn depth(self) -> u8 {
        self.depth
    }

    /// Whether `hash` is in the range.
    pub fn covers(self, hash: u64) -> bool {
        Prefix::of(hash, self.depth) == self
    }

    /// Whether `other` is this range or inside it.
    pub fn contains(self, other: Prefix) -> bool {
        other.depth >= self.depth && other.ancestor(self.depth) == self
    }

    /// Whether the two ranges share a hash.
    pub fn overlaps(self, other: Prefix) -> bool {
        self.contains(other) || other.contains(self)
    }

    /// The range of depth `depth` (at most this one's) that contains this one.
    fn ancestor(self, depth: u8) -> Prefix {
        let bits = if depth == 0 {
            0
        } else {
            self.bits >> (self.depth - depth)
        };
        Prefix { depth, bits }
    }

    /// The two halves.
    pub fn children(self) -> [Prefix; 2] {
        let child = |b| Prefix {
            depth: self.depth + 1,
            bits: self.bits << 1 | b,
        };
        [child(0), child(1)]
    }

    /// The range this is a half of.
    pub fn parent(self) -> Option<Prefix> {
        (self.depth > 0).then(|| self.ancestor(self.depth - 1))
    }

    /// The other half of the parent.
    pub fn sibling(self) -> Option<Prefix> {
        (self.depth > 0).then_some(Prefix {
            depth: self.depth,
            bits: self.bits ^ 1,
        })
    }

    /// The shard name's suffix: `h` and the bits, most significant first.
    pub fn suffix(self) -> String {
        let mut s = String::with_capacity(1 + usize::from(self.depth));
        s.push('h');
        for i in (0..self.depth).rev() {
            s.push(if self.bits >> i & 1 == 1 { '1' } else { '0' });
        }
        s
    }

    /// The range a name suffix (`h0110`) stands for.
    pub fn parse(suffix: &str) -> Option<Prefix> {
        let bits = suffix.strip_prefix('h')?;
        if bits.len() > usize::from(MAX_DEPTH) || !bits.bytes().all(|b| b == b'0' || b == b'1') {
            return None;
        }
        let value = bits.bytes().fold(0u64, |v, b| v << 1 | u64::from(b - b'0'));
        Some(Prefix {
            depth: bits.len() as u8,
            bits: value,
        })
    }
}

/// A ConfigMap of the checkpoint, by what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShardId {
    /// A leaf (or a former leaf) of the trie: `{prefix}-h{bits}`.
    Leaf(Prefix),
    /// A shard of the fixed layout of earlier versions: `{prefix}-{index:02}`.
    Legacy(u32),
}

impl ShardId {
    /// The ConfigMap's name.
    pub fn name(self, prefix: &str) -> String {
        match self {
            ShardId::Leaf(p) => format!("{prefix}-{}", p.suffix()),
            ShardId::Legacy(i) => format!("{prefix}-{i:02}"),
        }
    }

    /// What a ConfigMap named `name` is, if it is a shard under `prefix`.
    pub fn parse(prefix: &str, name: &str) -> Option<ShardId> {
        let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
        if rest.len() >= 2 && rest.bytes().all(|b| b.is_ascii_digit()) {
            return rest.parse().ok().map(ShardId::Legacy);
        }
        Prefix::parse(rest).map(ShardId::Leaf)
    }
}

/// One leaf as it will be once its pending changes are written.
#[derive(Debug, Default)]
pub struct Leaf {
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
    pub fn pending(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        (self.dirty.keys()).map(|k| (k.as_str(), self.data.get(k).map(String::as_str)))
    }
}

/// What a flush has to do, in this order: the writes, then (once every leaf is written) the
/// deletions and the marker.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    /// Leaves to write whole (new, or never written).
    pub whole: Vec<Prefix>,
    /// Leaves to patch with their changed keys.
    pub patch: Vec<Prefix>,
}

/// Every leaf, and what is left to clean up.
#[derive(Debug)]
pub struct Layout {
    leaves: BTreeMap<Prefix, Leaf>,
    /// The deepest leaf's depth (a lookup tries each depth up to it).
    max_depth: u8,
    /// Shards in the cluster whose streams now live in leaves: deleted once every leaf is
    /// written. A name that is a leaf again is overwritten by the leaf's whole write instead.
    obsolete: BTreeSet<ShardId>,
    next_epoch: u64,
    /// Numbers every change (a write made from a snapshot clears only what it carried).
    changes: u64,
    /// The marker that tells a restart from a first start exists.
    pub marker: bool,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            leaves: BTreeMap::from([(Prefix::ROOT, Leaf::new(1))]),
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
    pub fn set(&mut self, key: &StreamKey, value: Option<String>) -> bool {
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
    pub fn get(&self, key: &StreamKey) -> Option<&str> {
        let leaf = self.leaves.get(&self.leaf_of(place(key)))?;
        leaf.data.get(&entry::data_key(key)).map(String::as_str)
    }

    /// A leaf.
    pub fn leaf(&self, prefix: Prefix) -> Option<&Leaf> {
        self.leaves.get(&prefix)
    }

    /// The number of the last change made.
    pub fn change_number(&self) -> u64 {
        self.changes
    }

    /// How many leaves (ConfigMaps, once written) there are.
    pub fn shard_count(&self) -> usize {
        self.leaves.len()
    }

    /// The bytes of every entry.
    pub fn bytes(&self) -> usize {
        self.leaves.values().map(|l| l.bytes).sum()
    }

    /// How many entries are waiting to be written (a leaf never written counts whole).
    pub fn pending(&self) -> usize {
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
    pub fn oldest_pending(&self) -> Option<u64> {
        (self.leaves.values())
            .filter_map(|l| l.dirty.values().min().copied())
            .min()
    }

    /// Whether every leaf's ConfigMap holds its content (so obsolete shards may go).
    pub fn all_written(&self) -> bool {
        self.leaves.values().all(|l| l.written)
    }

    /// The obsolete shards that may be deleted now: none until every leaf is written.
    pub fn deletable(&self) -> Vec<ShardId> {
        if !self.all_written() {
            return Vec::new();
        }
        (self.obsolete.iter())
            .filter(|id| !matches!(id, ShardId::Leaf(p) if self.leaves.contains_key(p)))
            .copied()
            .collect()
    }

    /// Splits the leaves that grew too large and merges siblings that became small.
    pub fn rebalance(&mut self) {
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
        self.next_epoch += 1;
        e
    }

    fn retire(&mut self, prefix: Prefix, leaf: &Leaf) {
        if leaf.written {
            self.obsolete.insert(ShardId::Leaf(prefix));
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
        self.leaves.insert(halves[0], a);
        self.leaves.insert(halves[1], b);
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
            .insert(a.parent().unwrap_or(Prefix::ROOT), parent);
    }

    /// What the next flush writes.
    pub fn plan(&self) -> Plan {
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
    pub fn written(&mut self, prefix: Prefix, epoch: u64, upto: u64, whole: bool) {
        let Some(leaf) = self.leaves.get_mut(&prefix).filter(|l| l.epoch == epoch) else {
            return;
        };
        leaf.dirty.retain(|_, change| *change > upto);
        if whole {
            leaf.written = true;
            self.obsolete.remove(&ShardId::Leaf(prefix));
        }
    }

    /// A leaf's ConfigMap is gone (deleted by hand, or with its namespace): its next write is a
    /// whole one, and the marker is written again after it (it may be gone too).
    pub fn lost(&mut self, prefix: Prefix) {
        if let Some(leaf) = self.leaves.get_mut(&prefix) {
            leaf.written = false;
        }
        self.marker = false;
    }

    /// An obsolete shard was deleted (or was already gone).
    pub fn deleted(&mut self, id: ShardId) {
        self.obsolete.remove(&id);
    }
}

/// The hash of the stream an entry is about.
fn hash_of_entry(data_key: &str, value: &str) -> Option<u64> {
    match entry::key_of_data_key(data_key) {
        Some(key) if !data_key.starts_with('_') => Some(place(&key)),
        _ => entry::decode(data_key, value)
            .ok()
            .map(|(key, _)| place(&key)),
    }
}

/// A shard as read from the cluster.
#[derive(Debug)]
pub enum Found {
    /// A leaf of the trie, with its epoch (None: the annotation is missing or unreadable).
    Leaf {
        prefix: Prefix,
        epoch: Option<u64>,
        data: BTreeMap<String, String>,
    },
    /// A shard of the fixed layout, with the shard count it was written for.
    Legacy {
        index: u32,
        written_for: Option<u32>,
        data: BTreeMap<String, String>,
    },
}

/// Which hashes the shards read hold: a stream outside them was lost with its shard, one inside
/// them and not recorded is new.
#[derive(Debug, Default)]
pub struct Coverage {
    leaves: BTreeSet<Prefix>,
    /// The fixed layout's shard count and the indexes present.
    legacy: Option<(u32, BTreeSet<u32>)>,
}

impl Coverage {
    /// Whether the shards read hold whatever was recorded about `key`.
    pub fn covers(&self, key: &StreamKey) -> bool {
        let hash = place(key);
        let in_leaf = (0..=MAX_DEPTH)
            .map(|d| Prefix::of(hash, d))
            .any(|p| self.leaves.contains(&p));
        in_leaf
            || (self.legacy.as_ref())
                .is_some_and(|(n, present)| present.contains(&entry::legacy_shard_of(key, *n)))
    }

    /// Coverage of one shard holding every stream (for tests).
    #[cfg(test)]
    pub fn everything() -> Coverage {
        Coverage {
            leaves: [Prefix::of(0, 0)].into(),
            legacy: None,
        }
    }

    /// Whether any shard of the fixed layout was read.
    pub fn has_legacy(&self) -> bool {
        self.legacy.is_some()
    }

    /// Whether no shard at all was read.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty() && self.legacy.is_none()
    }
}

/// What a checkpoint read back holds.
#[derive(Debug, Default)]
pub struct Restored {
    /// The layout to go on writing (leaves kept where they are clean, new leaves elsewhere).
    pub layout: Layout,
    /// The recorded state of every stream.
    pub states: HashMap<StreamKey, StreamState>,
    /// Which hashes were read.
    pub coverage: Coverage,
    /// Streams whose entry was there but could not be read.
    pub unreadable: BTreeSet<StreamKey>,
}

/// Reads the shards back (see the module docs): each stream from the shard with the highest
/// epoch covering its hash; the shards no newer one overlaps stay leaves, the rest of the hash
/// space gets new leaves, every other shard becomes obsolete.
pub fn restore(found: Vec<Found>, marker: bool) -> Restored {
    let mut leaves: BTreeMap<Prefix, (u64, BTreeMap<String, String>)> = BTreeMap::new();
    let mut legacy: BTreeMap<u32, (Option<u32>, BTreeMap<String, String>)> = BTreeMap::new();
    for f in found {
        match f {
            // A leaf without its epoch is taken as the oldest leaf, still newer than the fixed layout.
            Found::Leaf {
                prefix,
                epoch,
                data,
            } => {
                leaves.insert(prefix, (epoch.unwrap_or(1).max(1), data));
            }
            Found::Legacy {
                index,
                written_for,
                data,
            } => {
                legacy.insert(index, (written_for, data));
            }
        }
    }
    let max_depth = leaves.keys().map(|p| p.depth).max().unwrap_or(0);
    // The epoch of the newest leaf read that covers `hash`.
    let newest = |hash: u64| -> Option<(Prefix, u64)> {
        (0..=max_depth)
            .map(|d| Prefix::of(hash, d))
            .filter_map(|p| leaves.get(&p).map(|(e, _)| (p, *e)))
            .max_by_key(|(p, e)| (*e, p.depth))
    };
    let legacy_count = legacy_shard_count(&legacy);
    let mut out = Restored::default();
    out.coverage.leaves = leaves.keys().copied().collect();
    if !legacy.is_empty() {
        out.coverage.legacy = Some((legacy_count, legacy.keys().copied().collect()));
    }

    // The legacy entries, where no leaf covers them; a stream in two legacy shards (a shard
    // count change interrupted) is taken from the shard its count puts it in.
    for (index, (_, data)) in &legacy {
        for (dk, value) in data {
            match entry::decode(dk, value) {
                Ok((key, state)) => {
                    if newest(place(&key)).is_some() {
                        continue;
                    }
                    let home = entry::legacy_shard_of(&key, legacy_count) == *index;
                    if home || !out.states.contains_key(&key) {
                        out.states.insert(key, state);
                    }
                }
                Err(reason) => unreadable(&mut out, dk, &reason, ShardId::Legacy(*index)),
            }
        }
    }

    // A leaf is kept when no leaf read with a higher epoch overlaps it.
    let clean: BTreeSet<Prefix> = (leaves.iter())
        .filter(|(p, (e, _))| {
            !leaves
                .iter()
                .any(|(q, (f, _))| q != *p && q.overlaps(**p) && f > e)
        })
        .map(|(p, _)| *p)
        .collect();
    let next_epoch = leaves.values().map(|(e, _)| *e).max().unwrap_or(0) + 1;
    let mut layout = Layout {
        leaves: BTreeMap::new(),
        max_depth: 0,
        obsolete: BTreeSet::new(),
        next_epoch: next_epoch + 1,
        changes: 0,
        marker,
    };
    layout
        .obsolete
        .extend(legacy.keys().map(|i| ShardId::Legacy(*i)));
    for (prefix, (epoch, data)) in leaves.iter() {
        let keep = clean.contains(prefix);
        if !keep {
            layout.obsolete.insert(ShardId::Leaf(*prefix));
        }
        let mut leaf = Leaf {
            epoch: *epoch,
            written: true,
            ..Leaf::default()
        };
        for (dk, value) in data {
            let taken = match entry::decode(dk, value) {
                Ok((key, state)) => {
                    let hash = place(&key);
                    let ours = prefix.covers(hash) && newest(hash).map(|(p, _)| p) == Some(*prefix);
                    if ours {
                        out.states.insert(key, state);
                    }
                    ours
                }
                Err(reason) => {
                    unreadable(&mut out, dk, &reason, ShardId::Leaf(*prefix));
                    false
                }
            };
            if keep && taken {
                leaf.insert_clean(dk.clone(), value.clone());
            } else if keep {
                // Unreadable, or not this leaf's: removed from it by the next write.
                layout.changes += 1;
                leaf.dirty.insert(dk.clone(), layout.changes);
            }
        }
        if keep {
            layout.leaves.insert(*prefix, leaf);
        }
    }
    // The rest of the hash space gets new leaves, filled from the states.
    let mut fresh = Vec::new();
    gaps(Prefix::ROOT, &clean, &mut fresh);
    for p in &fresh {
        layout.leaves.insert(*p, Leaf::new(next_epoch));
    }
    layout.max_depth = layout.leaves.keys().map(|p| p.depth).max().unwrap_or(0);
    if !fresh.is_empty() {
        for (key, state) in &out.states {
            let at = layout.leaf_of(place(key));
            if let Some(leaf) = layout.leaves.get_mut(&at).filter(|l| !l.written) {
                let dk = entry::data_key(key);
                let value = entry::encode(key, &dk, state);
                leaf.insert_clean(dk, value);
            }
        }
    }
    let states = &out.states;
    out.unreadable.retain(|k| !states.contains_key(k));
    out.layout = layout;
    out
}

/// The shard count most legacy shards were written for (the highest index + 1 if none says).
fn legacy_shard_count(legacy: &BTreeMap<u32, (Option<u32>, BTreeMap<String, String>)>) -> u32 {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for (n, _) in legacy.values() {
        if let Some(n) = n {
            *counts.entry(*n).or_default() += 1;
        }
    }
    (counts
        .into_iter()
        .max_by_key(|(n, c)| (*c, *n))
        .map(|(n, _)| n))
    .or_else(|| legacy.keys().max().map(|i| i + 1))
    .unwrap_or(1)
}

fn unreadable(out: &mut Restored, data_key: &str, reason: &str, shard: ShardId) {
    tracing::warn!(?shard, key = %data_key, %reason, "an unreadable checkpoint entry: its stream's current tags are sent again");
    if let Some(key) = entry::key_of_data_key(data_key).filter(|_| !data_key.starts_with('_')) {
        out.unreadable.insert(key);
    }
}

/// The largest ranges inside `p` that no range of `clean` overlaps.
fn gaps(p: Prefix, clean: &BTreeSet<Prefix>, out: &mut Vec<Prefix>) {
    if clean.contains(&p) {
        return;
    }
    if !clean.iter().any(|q| p.contains(*q)) {
        out.push(p);
        return;
    }
    for child in p.children() {
        gaps(child, clean, out);
    }
}

#[cfg(test)]
mod tests;
