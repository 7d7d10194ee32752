//! The layout's rules: ranges and names, growing and shrinking, what a flush writes, and what a
//! start reads back from every state a crash can leave.

use super::*;
use crate::source::state::StreamState;
use crate::source::state::TagState;

const D: &str = "sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

fn state(uid: &str) -> StreamState {
    let mut s = StreamState {
        uid: uid.into(),
        ..StreamState::default()
    };
    for tag in ["latest", "stable", "v1.2.3"] {
        s.tags.insert(
            tag,
            TagState {
                digest: Some(D.into()),
                generation: 3,
                failure_generation: None,
            },
        );
    }
    s
}

/// `n` streams whose hash lies in `range`.
fn streams_in(range: Prefix, n: usize) -> Vec<StreamKey> {
    (0..)
        .map(|i| ("team".to_string(), format!("nb-{i}")))
        .filter(|k| range.covers(place(k)))
        .take(n)
        .collect()
}

fn value(key: &StreamKey, uid: &str) -> String {
    entry::encode(key, &entry::data_key(key), &state(uid))
}

fn data(entries: &[(&StreamKey, &str)]) -> BTreeMap<String, String> {
    (entries.iter())
        .map(|(k, uid)| (entry::data_key(k), value(k, uid)))
        .collect()
}

fn p(bits: &str) -> Prefix {
    Prefix::parse(&format!("h{bits}")).unwrap()
}

/// The leaves cover every hash exactly once.
fn assert_partition(layout: &Layout) {
    let mut covered = 0u128;
    let prefixes: Vec<Prefix> = layout.leaves.keys().copied().collect();
    for (i, a) in prefixes.iter().enumerate() {
        covered += 1u128 << (64 - u32::from(a.depth));
        for b in &prefixes[i + 1..] {
            assert!(!a.overlaps(*b), "{a:?} overlaps {b:?}");
        }
    }
    assert_eq!(covered, 1u128 << 64, "the leaves do not cover the space");
}

#[test]
fn a_prefix_is_the_top_bits_of_the_hash_and_names_its_shard() {
    let h = 0b1011u64 << 60;
    assert_eq!(Prefix::of(h, 0), Prefix::ROOT);
    assert_eq!(Prefix::of(h, 3), p("101"));
    assert!(p("101").covers(h) && !p("100").covers(h));
    assert!(p("1").contains(p("101")) && !p("101").contains(p("1")));
    assert!(p("10").overlaps(p("1")) && !p("10").overlaps(p("11")));
    assert_eq!(p("10").children(), [p("100"), p("101")]);
    assert_eq!(p("101").parent(), Some(p("10")));
    assert_eq!(p("101").sibling(), Some(p("100")));
    assert_eq!(Prefix::ROOT.parent(), None);
    assert_eq!(p("0110").suffix(), "h0110");
    assert_eq!(Prefix::ROOT.suffix(), "h");
    assert_eq!(Prefix::parse("h"), Some(Prefix::ROOT));
    for bad in ["", "x01", "h012", &format!("h{}", "0".repeat(41))] {
        assert_eq!(Prefix::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn shard_names_tell_leaves_from_other_configmaps_and_the_marker() {
    let pre = "imagegate-source-checkpoint";
    assert_eq!(
        Prefix::of_shard(pre, "imagegate-source-checkpoint-h"),
        Some(Prefix::ROOT)
    );
    assert_eq!(
        Prefix::of_shard(pre, "imagegate-source-checkpoint-h01"),
        Some(p("01"))
    );
    for other in [
        pre,
        "imagegate-source-checkpoint-07",
        "imagegate-source-checkpoint-7",
        "imagegate-source-checkpoint-hx",
        "other-h",
        "imagegate-source-checkpoint-marker",
    ] {
        assert_eq!(Prefix::of_shard(pre, other), None, "{other}");
    }
    assert_eq!(p("01").shard_name(pre), "imagegate-source-checkpoint-h01");
}

#[test]
fn the_layout_grows_by_splitting_and_every_stream_stays_where_it_is_found() {
    let mut layout = Layout::default();
    let keys = streams_in(Prefix::ROOT, 12_000);
    for (i, k) in keys.iter().enumerate() {
        layout.set(k, Some(value(k, &format!("uid-{i}"))));
    }
    let total = layout.bytes();
    assert!(total > 3 * SPLIT_ABOVE, "{total}");
    layout.rebalance();
    assert_partition(&layout);
    assert!(layout.shard_count() >= 4, "{}", layout.shard_count());
    for leaf in layout.leaves.values() {
        assert!(
            leaf.bytes <= SPLIT_ABOVE && leaf.bytes > MERGE_BELOW / 4,
            "{}",
            leaf.bytes
        );
        assert!(!leaf.written);
    }
    assert_eq!(layout.bytes(), total);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(layout.get(k), Some(value(k, &format!("uid-{i}")).as_str()));
    }
    // Nothing was written yet, so nothing is obsolete.
    assert!(layout.obsolete.is_empty());
}

#[test]
fn a_written_leaf_that_splits_is_deleted_only_after_every_new_leaf_is_written() {
    let mut layout = Layout::default();
    let plan = layout.plan();
    assert_eq!(plan.whole, vec![Prefix::ROOT]);
    let epoch = layout.leaves[&Prefix::ROOT].epoch;
    layout.written(Prefix::ROOT, epoch, layout.change_number(), true);
    assert!(layout.all_written());
    for (i, k) in streams_in(Prefix::ROOT, 4000).iter().enumerate() {
        layout.set(k, Some(value(k, &format!("uid-{i}"))));
    }
    layout.rebalance();
    let new: Vec<Prefix> = layout.leaves.keys().copied().collect();
    assert!(new.len() >= 2);
    assert!(layout.leaves.values().all(|l| l.epoch > epoch));
    assert_eq!(layout.obsolete, BTreeSet::from([Prefix::ROOT]));
    assert_eq!(layout.plan().whole, new);
    assert!(layout.plan().patch.is_empty());
    assert!(layout.deletable().is_empty());
    let upto = layout.change_number();
    for q in &new[1..] {
        let e = layout.leaves[q].epoch;
        layout.written(*q, e, upto, true);
    }
    assert!(layout.deletable().is_empty(), "one leaf is not written yet");
    let e = layout.leaves[&new[0]].epoch;
    layout.written(new[0], e, upto, true);
    assert_eq!(layout.deletable(), vec![Prefix::ROOT]);
    layout.deleted(Prefix::ROOT);
    assert!(layout.deletable().is_empty());
}

#[test]
fn the_layout_shrinks_by_merging_when_streams_go_away() {
    let mut layout = Layout::default();
    let keys = streams_in(Prefix::ROOT, 6000);
    for (i, k) in keys.iter().enumerate() {
        layout.set(k, Some(value(k, &format!("uid-{i}"))));
    }
    layout.rebalance();
    let grown = layout.shard_count();
    let upto = layout.change_number();
    let leaves: Vec<(Prefix, u64)> = layout.leaves.iter().map(|(p, l)| (*p, l.epoch)).collect();
    for (q, e) in &leaves {
        layout.written(*q, *e, upto, true);
    }
    for k in &keys[50..] {
        layout.set(k, None);
    }
    layout.rebalance();
    assert_partition(&layout);
    assert_eq!(layout.shard_count(), 1, "from {grown}");
    assert_eq!(layout.obsolete.len(), grown);
    for k in &keys[..50] {
        assert!(layout.get(k).is_some());
    }
    for k in &keys[50..] {
        assert!(layout.get(k).is_none());
    }
}

#[test]
fn a_write_clears_only_the_changes_it_carried() {
    let mut layout = Layout::default();
    let e = layout.leaves[&Prefix::ROOT].epoch;
    layout.written(Prefix::ROOT, e, 0, true);
    let keys = streams_in(Prefix::ROOT, 2);
    layout.set(&keys[0], Some(value(&keys[0], "a")));
    let upto = layout.change_number();
    layout.set(&keys[1], Some(value(&keys[1], "b")));
    assert_eq!(layout.plan().patch, vec![Prefix::ROOT]);
    assert_eq!(layout.oldest_pending(), Some(upto));
    layout.written(Prefix::ROOT, e, upto, false);
    let pending: Vec<_> = layout.leaves[&Prefix::ROOT]
        .pending()
        .map(|(k, _)| k.to_string())
        .collect();
    assert_eq!(pending, vec![entry::data_key(&keys[1])]);
    // A write for another epoch (a leaf since replaced) changes nothing.
    layout.written(Prefix::ROOT, e + 7, u64::MAX, false);
    assert_eq!(layout.pending(), 1);
    // Setting the same value again is no change.
    assert!(!layout.set(&keys[1], Some(value(&keys[1], "b"))));
}

#[test]
fn restoring_clean_leaves_keeps_them_and_fills_the_rest_of_the_space() {
    let a = streams_in(p("0"), 3);
    let b = streams_in(p("1"), 2);
    let found = vec![Found {
        prefix: p("0"),
        epoch: Some(4),
        data: data(&[(&a[0], "a0"), (&a[1], "a1"), (&a[2], "a2")]),
    }];
    let r = restore(found, true);
    assert_eq!(r.states.len(), 3);
    assert_eq!(r.states[&a[1]].uid, "a1");
    assert_partition(&r.layout);
    assert!(r.layout.leaves[&p("0")].written);
    assert!(!r.layout.leaves[&p("1")].written, "the gap gets a new leaf");
    assert!(r.layout.leaves[&p("1")].epoch > 4);
    assert!(r.coverage.covers(&a[0]));
    assert!(!r.coverage.covers(&b[0]), "its shard is gone: lost");
    assert!(r.layout.obsolete.is_empty());
}

#[test]
fn an_interrupted_split_reads_each_half_from_the_newest_shard_that_covers_it() {
    let left = streams_in(p("0"), 2);
    let right = streams_in(p("1"), 2);
    // P (epoch 1) was split; its left half (epoch 2) was written, the right one was not. The
    // left half has news: left[0] changed, left[1] was deleted.
    let parent = data(&[
        (&left[0], "old"),
        (&left[1], "old"),
        (&right[0], "r0"),
        (&right[1], "r1"),
    ]);
    let found = vec![
        Found {
            prefix: Prefix::ROOT,
            epoch: Some(1),
            data: parent,
        },
        Found {
            prefix: p("0"),
            epoch: Some(2),
            data: data(&[(&left[0], "new")]),
        },
    ];
    let r = restore(found, true);
    assert_eq!(r.states[&left[0]].uid, "new");
    assert!(
        !r.states.contains_key(&left[1]),
        "deleted in the newer shard"
    );
    assert_eq!(r.states[&right[0]].uid, "r0");
    assert_eq!(r.states[&right[1]].uid, "r1");
    assert_partition(&r.layout);
    assert!(r.layout.leaves[&p("0")].written);
    let fresh = &r.layout.leaves[&p("1")];
    assert!(!fresh.written && fresh.data.len() == 2);
    assert_eq!(r.layout.obsolete, BTreeSet::from([Prefix::ROOT]));
    assert!(r.coverage.covers(&right[0]));
}

#[test]
fn an_interrupted_merge_reads_from_the_merged_shard() {
    let left = streams_in(p("0"), 1);
    let right = streams_in(p("1"), 1);
    let found = vec![
        Found {
            prefix: p("0"),
            epoch: Some(2),
            data: data(&[(&left[0], "stale")]),
        },
        Found {
            prefix: p("1"),
            epoch: Some(2),
            data: data(&[(&right[0], "stale")]),
        },
        Found {
            prefix: Prefix::ROOT,
            epoch: Some(3),
            data: data(&[(&left[0], "merged")]),
        },
    ];
    let r = restore(found, true);
    assert_eq!(r.states[&left[0]].uid, "merged");
    assert!(!r.states.contains_key(&right[0]), "removed after the merge");
    assert_eq!(r.layout.shard_count(), 1);
    assert!(r.layout.leaves[&Prefix::ROOT].written);
    assert_eq!(r.layout.obsolete, BTreeSet::from([p("0"), p("1")]));
}

#[test]
fn unreadable_and_misplaced_entries_are_reported_and_removed() {
    let left = streams_in(p("0"), 2);
    let right = streams_in(p("1"), 1);
    let mut entries = data(&[(&left[0], "ok"), (&right[0], "misplaced")]);
    entries.insert(entry::data_key(&left[1]), "u;broken".into());
    let found = vec![
        Found {
            prefix: p("0"),
            epoch: Some(1),
            data: entries,
        },
        Found {
            prefix: p("1"),
            epoch: Some(1),
            data: BTreeMap::new(),
        },
    ];
    let r = restore(found, true);
    assert_eq!(r.states.len(), 1);
    assert_eq!(r.unreadable, BTreeSet::from([left[1].clone()]));
    let leaf = &r.layout.leaves[&p("0")];
    assert_eq!(leaf.data.len(), 1);
    let removed: BTreeSet<&str> = leaf
        .pending()
        .map(|(k, v)| {
            assert!(v.is_none());
            k
        })
        .collect();
    assert_eq!(
        removed,
        BTreeSet::from([
            entry::data_key(&left[1]).as_str(),
            entry::data_key(&right[0]).as_str()
        ])
    );
}

#[test]
fn nothing_read_is_one_empty_leaf_to_write() {
    let r = restore(Vec::new(), false);
    assert!(r.coverage.is_empty() && r.states.is_empty());
    assert_eq!(r.layout.plan().whole, vec![Prefix::ROOT]);
}

#[test]
fn an_epoch_past_the_bound_is_unreadable_and_outranks_no_later_shard() {
    // A shard annotated with the largest epoch (anyone who may write the checkpoint's
    // ConfigMaps: a tenant of the multi-tenant adapter, in their own namespace) overflowed the
    // next epoch (a panic with overflow checks on, a wrap to 0 in release, after which it
    // outranked every shard written later). Past MAX_EPOCH an epoch reads as missing: the
    // oldest leaf.
    let a = streams_in(p("0"), 1);
    let found = vec![
        Found {
            prefix: Prefix::ROOT,
            epoch: Some(u64::MAX),
            data: data(&[(&a[0], "forged")]),
        },
        Found {
            prefix: p("0"),
            epoch: Some(3),
            data: data(&[(&a[0], "real")]),
        },
    ];
    let r = restore(found, true);
    assert_eq!(r.states[&a[0]].uid, "real", "the newer real shard wins");
    assert!(r.layout.leaves.values().all(|l| l.epoch <= MAX_EPOCH));
    let next = r.layout.leaves.values().map(|l| l.epoch).max().unwrap();
    assert!(
        next > 3 && next < 100,
        "epochs go on from the real ones: {next}"
    );
    assert_partition(&r.layout);
}
