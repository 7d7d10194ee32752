//! The names of the checkpoint's shards: a [`Prefix`] of the hash space names a leaf
//! (`{prefix}-h{bits}`).

use super::MAX_DEPTH;

/// A range of the hash space: the hashes whose top `depth` bits are `bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix {
    pub(super) depth: u8,
    pub(super) bits: u64,
}

impl Prefix {
    /// The whole hash space.
    pub(crate) const ROOT: Prefix = Prefix { depth: 0, bits: 0 };

    /// The range of depth `depth` that holds `hash`.
    pub(crate) fn of(hash: u64, depth: u8) -> Prefix {
        let bits = if depth == 0 {
            0
        } else {
            hash >> (64 - u32::from(depth))
        };
        Prefix { depth, bits }
    }

    /// How many bits it fixes.
    pub(crate) fn depth(self) -> u8 {
        self.depth
    }

    /// Whether `hash` is in the range.
    pub(crate) fn covers(self, hash: u64) -> bool {
        Prefix::of(hash, self.depth) == self
    }

    /// Whether `other` is this range or inside it.
    pub(crate) fn contains(self, other: Prefix) -> bool {
        other.depth >= self.depth && other.ancestor(self.depth) == self
    }

    /// Whether the two ranges share a hash.
    #[cfg(test)]
    pub(crate) fn overlaps(self, other: Prefix) -> bool {
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
    pub(crate) fn children(self) -> [Prefix; 2] {
        let child = |b| Prefix {
            depth: self.depth + 1,
            bits: self.bits << 1 | b,
        };
        [child(0), child(1)]
    }

    /// The range this is a half of.
    pub(crate) fn parent(self) -> Option<Prefix> {
        (self.depth > 0).then(|| self.ancestor(self.depth - 1))
    }

    /// The other half of the parent.
    pub(crate) fn sibling(self) -> Option<Prefix> {
        (self.depth > 0).then_some(Prefix {
            depth: self.depth,
            bits: self.bits ^ 1,
        })
    }

    /// The shard name's suffix: `h` and the bits, most significant first.
    pub(crate) fn suffix(self) -> String {
        let mut s = String::with_capacity(1 + usize::from(self.depth));
        s.push('h');
        for i in (0..self.depth).rev() {
            s.push(if self.bits >> i & 1 == 1 { '1' } else { '0' });
        }
        s
    }

    /// The range a name suffix (`h0110`) stands for.
    pub(crate) fn parse(suffix: &str) -> Option<Prefix> {
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

impl Prefix {
    /// The name of this leaf's ConfigMap.
    pub(crate) fn shard_name(self, prefix: &str) -> String {
        format!("{prefix}-{}", self.suffix())
    }

    /// The leaf a ConfigMap named `name` holds, if it is a shard under `prefix`.
    pub(crate) fn of_shard(prefix: &str, name: &str) -> Option<Prefix> {
        let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
        Prefix::parse(rest)
    }
}
