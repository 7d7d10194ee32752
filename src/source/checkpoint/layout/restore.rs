//! Reading a checkpoint back ([`restore`]): each stream from the shard with the highest epoch
//! that covers its hash; the [`Coverage`] of the shards read tells a lost stream from a new
//! one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Layout, Leaf, MAX_DEPTH, MAX_EPOCH, Prefix};
use crate::source::checkpoint::entry::{self, StreamKey, place};
use crate::source::state::StreamState;

/// The hash of the stream an entry is about.
pub(super) fn hash_of_entry(data_key: &str, value: &str) -> Option<u64> {
    match entry::key_of_data_key(data_key) {
        Some(key) if !data_key.starts_with('_') => Some(place(&key)),
        _ => entry::decode(data_key, value)
            .ok()
            .map(|(key, _)| place(&key)),
    }
}

/// A shard as read from the cluster: a leaf of the trie, with its epoch.
#[derive(Debug)]
pub struct Found {
    /// The range it holds.
    pub prefix: Prefix,
    /// Its epoch (None: the annotation is missing or unreadable).
    pub epoch: Option<u64>,
    /// Its entries.
    pub data: BTreeMap<String, String>,
}

/// Which hashes the shards read hold: a stream outside them was lost with its shard, one inside
/// them and not recorded is new.
#[derive(Debug, Default)]
pub struct Coverage {
    leaves: BTreeSet<Prefix>,
}

impl Coverage {
    /// Whether the shards read hold whatever was recorded about `key`.
    pub(crate) fn covers(&self, key: &StreamKey) -> bool {
        let hash = place(key);
        (0..=MAX_DEPTH)
            .map(|d| Prefix::of(hash, d))
            .any(|p| self.leaves.contains(&p))
    }

    /// Coverage of one shard holding every stream (for tests).
    #[cfg(test)]
    pub fn everything() -> Coverage {
        Coverage {
            leaves: [Prefix::of(0, 0)].into(),
        }
    }

    /// Whether no shard at all was read.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
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
    let read = Read::sort(found);
    let mut out = Restored::default();
    out.coverage.leaves = read.leaves.keys().copied().collect();
    let (mut layout, clean) = read.kept_leaves(&mut out, marker);
    fill_gaps(&mut layout, &clean, &out.states);
    let states = &out.states;
    out.unreadable.retain(|k| !states.contains_key(k));
    out.layout = layout;
    out
}

/// The shards read.
struct Read {
    /// Each leaf's epoch and data.
    leaves: BTreeMap<Prefix, (u64, BTreeMap<String, String>)>,
    max_depth: u8,
}

impl Read {
    fn sort(found: Vec<Found>) -> Read {
        let mut leaves = BTreeMap::new();
        for f in found {
            // A leaf without its epoch (or with one past MAX_EPOCH) is taken as the oldest.
            let epoch = f.epoch.filter(|e| *e <= MAX_EPOCH);
            leaves.insert(f.prefix, (epoch.unwrap_or(1).max(1), f.data));
        }
        let max_depth = leaves.keys().map(|p| p.depth()).max().unwrap_or(0);
        Read { leaves, max_depth }
    }

    /// The leaves no leaf with a higher epoch overlaps. Linear in the leaves (times the depth,
    /// at most 40): for each range, the highest epoch of a leaf inside it is found by passing
    /// each leaf's epoch up to its ancestors once; a leaf is overlapped by a newer ancestor or by
    /// a newer leaf inside it. (Comparing every pair was quadratic: a checkpoint of many shards
    /// took minutes to read, F-9.)
    fn unoverlapped(&self) -> BTreeSet<Prefix> {
        let mut below: HashMap<Prefix, u64> = HashMap::new();
        for (p, (e, _)) in &self.leaves {
            let mut up = p.parent();
            while let Some(a) = up {
                let max = below.entry(a).or_insert(0);
                *max = (*max).max(*e);
                up = a.parent();
            }
        }
        (self.leaves.iter())
            .filter(|(p, (e, _))| {
                let newer_inside = below.get(p).is_some_and(|m| m > e);
                let mut up = p.parent();
                let mut newer_around = false;
                while let Some(a) = up {
                    newer_around |= self.leaves.get(&a).is_some_and(|(f, _)| f > e);
                    up = a.parent();
                }
                !newer_inside && !newer_around
            })
            .map(|(p, _)| *p)
            .collect()
    }

    /// The newest leaf read that covers `hash`, and its epoch.
    fn newest(&self, hash: u64) -> Option<(Prefix, u64)> {
        (0..=self.max_depth)
            .map(|d| Prefix::of(hash, d))
            .filter_map(|p| self.leaves.get(&p).map(|(e, _)| (p, *e)))
            .max_by_key(|(p, e)| (*e, p.depth()))
    }

    /// The leaves no leaf with a higher epoch overlaps, kept as the layout's leaves (with the
    /// entries that are not theirs marked for removal); every other shard read is obsolete.
    /// Each stream's state comes from the newest leaf covering it.
    fn kept_leaves(&self, out: &mut Restored, marker: bool) -> (Layout, BTreeSet<Prefix>) {
        let clean = self.unoverlapped();
        let next_epoch = self
            .leaves
            .values()
            .map(|(e, _)| *e)
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        let mut layout = Layout {
            leaves: BTreeMap::new(),
            max_depth: 0,
            obsolete: BTreeSet::new(),
            next_epoch,
            changes: 0,
            marker,
        };
        for (prefix, (epoch, data)) in &self.leaves {
            let keep = clean.contains(prefix);
            if !keep {
                layout.obsolete.insert(*prefix);
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
                        let ours = prefix.covers(hash)
                            && self.newest(hash).map(|(p, _)| p) == Some(*prefix);
                        if ours {
                            out.states.insert(key, state);
                        }
                        ours
                    }
                    Err(reason) => {
                        unreadable(out, dk, &reason, *prefix);
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
                layout.leaves.insert(*prefix, Box::new(leaf));
            }
        }
        (layout, clean)
    }
}

/// The rest of the hash space (what no kept leaf covers) gets new leaves, with a new epoch,
/// filled from the states read.
fn fill_gaps(
    layout: &mut Layout,
    clean: &BTreeSet<Prefix>,
    states: &HashMap<StreamKey, StreamState>,
) {
    let epoch = layout.next_epoch;
    layout.next_epoch = layout.next_epoch.saturating_add(1);
    let mut fresh = Vec::new();
    gaps(Prefix::ROOT, clean, &mut fresh);
    for p in &fresh {
        layout.leaves.insert(*p, Box::new(Leaf::new(epoch)));
    }
    layout.max_depth = layout.leaves.keys().map(|p| p.depth()).max().unwrap_or(0);
    if fresh.is_empty() {
        return;
    }
    for (key, state) in states {
        let at = layout.leaf_of(place(key));
        if let Some(leaf) = layout.leaves.get_mut(&at).filter(|l| !l.written) {
            let dk = entry::data_key(key);
            let value = entry::encode(key, &dk, state);
            leaf.insert_clean(dk, value);
        }
    }
}

fn unreadable(out: &mut Restored, data_key: &str, reason: &str, shard: Prefix) {
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
mod tests {
    use super::*;

    /// The rule as first written: a leaf is clean when no other leaf that overlaps it has a
    /// higher epoch (every pair compared).
    fn quadratic(read: &Read) -> BTreeSet<Prefix> {
        (read.leaves.iter())
            .filter(|(p, (e, _))| {
                !read
                    .leaves
                    .iter()
                    .any(|(q, (f, _))| q != *p && q.overlaps(**p) && f > e)
            })
            .map(|(p, _)| *p)
            .collect()
    }

    #[test]
    fn the_linear_rule_keeps_exactly_the_leaves_the_pairwise_rule_keeps() {
        // Layouts of 1 to 60 leaves at depths up to 6 with epochs 1 to 4, from a fixed LCG:
        // splits, merges and leftovers of every kind.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            x >> 33
        };
        for round in 0..300 {
            let n = 1 + (round % 60);
            let mut leaves = BTreeMap::new();
            for _ in 0..n {
                let depth = (next() % 7) as u8;
                let hash = next() << 31 ^ next();
                let epoch = 1 + next() % 4;
                leaves.insert(Prefix::of(hash, depth), (epoch, BTreeMap::new()));
            }
            let max_depth = leaves.keys().map(|p| p.depth()).max().unwrap_or(0);
            let read = Read { leaves, max_depth };
            assert_eq!(read.unoverlapped(), quadratic(&read), "round {round}");
        }
    }
}
