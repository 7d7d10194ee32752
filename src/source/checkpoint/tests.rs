//! Tests of the checkpoint: the pure layout (hash, keys, entries, restoring and moving shards)
//! with plain tests, and loading and flushing against the emulator over HTTP.

use super::*;
use crate::emulator::control::Fault;
use crate::emulator::{Config, Emulator};
use crate::source::change::{TagState, TagStates};
use serde_json::json;

const NS: &str = "imagegate";

fn state(uid: &str, tags: &[(&str, &str, i64)]) -> StreamState {
    StreamState {
        uid: uid.into(),
        tags: tags
            .iter()
            .map(|(t, d, g)| {
                let tag = TagState {
                    digest: Some(format!("sha256:{}", d.repeat(64 / d.len()))),
                    generation: *g,
                    failure_generation: None,
                };
                (t.to_string(), tag)
            })
            .collect(),
    }
}

fn key(ns: &str, name: &str) -> StreamKey {
    (ns.into(), name.into())
}

fn cfg(shards: u32) -> CheckpointConfig {
    CheckpointConfig {
        shards,
        ..CheckpointConfig::new(NS)
    }
}

async fn emulator() -> Emulator {
    let mut config = Config::default();
    config.namespaces.push(NS.into());
    Emulator::start(config).await.unwrap()
}

async fn load(
    emu: &Emulator,
    shards: u32,
) -> (Checkpoint, Option<HashMap<StreamKey, StreamState>>) {
    Checkpoint::load(emu.client().unwrap(), cfg(shards))
        .await
        .unwrap()
}

/// The checkpoint ConfigMaps in the cluster, by name.
async fn stored(emu: &Emulator) -> BTreeMap<String, ConfigMap> {
    let api = Api::<ConfigMap>::namespaced(emu.client().unwrap(), NS);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .map(|cm| (cm.metadata.name.clone().unwrap(), cm))
        .collect()
}

fn patches(emu: &Emulator) -> Vec<String> {
    emu.mutating_requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps" && r.verb == "patch")
        .map(|r| r.name)
        .collect()
}

fn streams(n: usize) -> Vec<(StreamKey, StreamState)> {
    (0..n)
        .map(|i| {
            let k = key(&format!("team-{}", i % 37), &format!("app-{i}"));
            let s = state(
                &format!("uid-{i}"),
                &[("latest", "a", 3), ("v1.2.3", "b", 1), ("stable", "c", 2)],
            );
            (k, s)
        })
        .collect()
}

#[test]
fn the_shard_of_a_stream_is_a_stable_fnv_hash() {
    // FNV-1a 64 reference values, so the layout never depends on the Rust version.
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    let k = key("team-a", "app");
    assert_eq!(shard_of(&k, 16), (fnv1a64(b"team-a/app") % 16) as u32);
    assert_eq!(shard_of(&k, 1), 0);
    assert_eq!(
        shard_name("imagegate-source-checkpoint", 7),
        "imagegate-source-checkpoint-07"
    );
    assert_eq!(shard_name("p", 123), "p-123");
}

#[test]
fn only_the_prefix_followed_by_a_shard_number_is_a_shard() {
    let p = "imagegate-source-checkpoint";
    assert_eq!(shard_index(p, "imagegate-source-checkpoint-07"), Some(7));
    assert_eq!(shard_index(p, "imagegate-source-checkpoint-123"), Some(123));
    assert_eq!(shard_index(p, "imagegate-source-checkpoint-7"), None);
    assert_eq!(shard_index(p, "imagegate-source-checkpoint-x7"), None);
    assert_eq!(shard_index(p, "imagegate-source-checkpoint-old-07"), None);
    assert_eq!(shard_index(p, "other-07"), None);
}

#[test]
fn entries_are_compact_json_keyed_by_namespace_and_name() {
    let s = StreamState {
        uid: "u1".into(),
        tags: TagStates::from([(
            "latest",
            TagState {
                digest: Some("sha256:ab".into()),
                generation: 2,
                failure_generation: Some(3),
            },
        )]),
    };
    let k = key("ns", "my_app.v2");
    assert_eq!(data_key(&k), "ns_my_app.v2");
    let v = encode(&k, &data_key(&k), &s).unwrap();
    assert_eq!(
        v,
        r#"{"u":"u1","t":{"latest":{"d":"sha256:ab","g":2,"f":3}}}"#
    );
    assert_eq!(decode("ns_my_app.v2", &v).unwrap(), (k, s));
}

#[test]
fn a_name_too_long_for_a_key_is_hashed_and_carried_in_the_value() {
    let ns = "n".repeat(63);
    let name = format!("{}_x", "a".repeat(189));
    let k = key(&ns, &name);
    let dk = data_key(&k);
    assert!(dk.starts_with('_') && dk.len() == 17, "{dk}");
    let s = state("u", &[("latest", "a", 1)]);
    let v = encode(&k, &data_key(&k), &s).unwrap();
    assert_eq!(decode(&dk, &v).unwrap(), (k, s));
    // 253 characters still fit.
    let k = key(&ns, &"b".repeat(189));
    assert_eq!(data_key(&k).len(), 253);
}

#[test]
fn ten_thousand_streams_of_three_tags_fit_sixteen_shards_with_room_to_spare() {
    let k = key("payments-prod", "checkout-service");
    let s = state(
        "3f2b8c1e-5d4a-4e7b-9c2d-1a2b3c4d5e6f",
        &[("latest", "a", 12), ("v1.2.3", "b", 3), ("stable", "c", 7)],
    );
    let entry = data_key(&k).len() + encode(&k, &data_key(&k), &s).unwrap().len();
    assert!((300..400).contains(&entry), "{entry} bytes");
    let per_shard = entry * 10_000 / 16;
    assert!(
        per_shard < 250 * 1024 && per_shard * 3 < MAX_SHARD_BYTES,
        "{per_shard}"
    );
}

#[test]
fn unreadable_entries_are_refused() {
    assert!(decode("ns_a", "not json").is_err());
    assert!(decode("nounderscore", r#"{"u":"x"}"#).is_err());
    assert!(decode("_abc", r#"{"u":"x"}"#).is_err());
    assert!(decode("ns_a", r#"{"t":{}}"#).is_err());
}

#[test]
fn a_merge_patch_carries_only_the_changes_and_the_shard_count() {
    let body = |changes: &[(&'static str, Option<&'static str>)]| {
        let text = patch_body(16, changes.iter().copied()).unwrap();
        serde_json::from_str::<Value>(text.get()).unwrap()
    };
    assert_eq!(
        body(&[("ns_a", Some("{}")), ("ns_b", None)]),
        json!({
            "metadata": {
                "labels": {
                    "app.kubernetes.io/name": "imagegate",
                    "app.kubernetes.io/component": "source-checkpoint",
                },
                "annotations": { "imagegate.dev/checkpoint-shards": "16" },
            },
            "data": { "ns_a": "{}", "ns_b": null },
        })
    );
    assert!(body(&[]).get("data").is_none());
}

#[test]
fn a_change_recorded_while_its_shard_is_written_stays_pending() {
    let mut shard = Shard::default();
    assert!(shard.set("ns_a".into(), Some("1".into())));
    assert!(shard.set("ns_b".into(), Some("2".into())));
    assert!(!shard.set("ns_b".into(), Some("2".into())), "no change");
    let upto = shard.changes;
    assert!(shard.set("ns_a".into(), Some("3".into())));
    shard.written(upto);
    let pending: Vec<_> = shard.pending().collect();
    assert_eq!(pending, [("ns_a", Some("3"))]);
    assert!(shard.set("ns_a".into(), None));
    let pending: Vec<_> = shard.pending().collect();
    assert_eq!(pending, [("ns_a", None)]);
    assert_eq!(shard.bytes, "ns_b".len() + 1);
}

#[test]
fn a_copy_left_by_an_interrupted_move_loses_to_the_one_in_its_home_shard() {
    let k = key("ns", "app");
    let dk = data_key(&k);
    let home = shard_of(&k, 4);
    let away = (home + 1) % 4;
    let old = encode(&k, &data_key(&k), &state("u", &[("latest", "a", 1)])).unwrap();
    let new = encode(&k, &data_key(&k), &state("u", &[("latest", "b", 2)])).unwrap();
    let found = vec![
        (away, Some(8), BTreeMap::from([(dk.clone(), old)])),
        (home, Some(4), BTreeMap::from([(dk.clone(), new.clone())])),
    ];
    let (mut layout, states) = Layout::restore(4, found);
    assert_eq!(states[&k], state("u", &[("latest", "b", 2)]));
    assert!(layout.by_index[&home].dirty.is_empty());
    // The home copy is in place, so the stale one is removed by the first flush.
    assert!(layout.release_moves());
    let pending: Vec<_> = layout.by_index[&away].pending().collect();
    assert_eq!(pending, [(dk.as_str(), None)]);
    assert!(layout.moves.is_empty());
}

#[test]
fn a_moved_entry_leaves_its_old_shard_only_after_its_new_one_is_written() {
    let k = key("ns", "app");
    let dk = data_key(&k);
    let (home, old) = (shard_of(&k, 3), 7);
    let v = encode(&k, &data_key(&k), &state("u", &[("latest", "a", 1)])).unwrap();
    let (mut layout, _) = Layout::restore(
        3,
        vec![(old, Some(8), BTreeMap::from([(dk.clone(), v.clone())]))],
    );
    let pending: Vec<_> = layout.by_index[&home].pending().collect();
    assert_eq!(pending, [(dk.as_str(), Some(v.as_str()))]);
    assert!(!layout.release_moves(), "the new home is not written yet");
    assert!(layout.by_index[&old].dirty.is_empty());
    layout.by_index.get_mut(&home).unwrap().dirty.clear();
    assert!(layout.release_moves());
    let pending: Vec<_> = layout.by_index[&old].pending().collect();
    assert_eq!(pending, [(dk.as_str(), None)]);
}

#[tokio::test]
async fn a_first_start_finds_no_checkpoint_and_the_first_flush_creates_every_shard() {
    let emu = emulator().await;
    let (cp, states) = load(&emu, 4).await;
    assert!(states.is_none());
    assert_eq!(cp.flush().await.unwrap(), 4);
    let cms = stored(&emu).await;
    assert_eq!(
        cms.keys().collect::<Vec<_>>(),
        [0, 1, 2, 3]
            .map(|i| shard_name("imagegate-source-checkpoint", i))
            .iter()
            .collect::<Vec<_>>()
    );
    let labels = cms
        .values()
        .next()
        .unwrap()
        .metadata
        .labels
        .clone()
        .unwrap();
    assert_eq!(labels["app.kubernetes.io/component"], "source-checkpoint");
    // Nothing to remember is not a first start.
    let (_, states) = load(&emu, 4).await;
    assert_eq!(states, Some(HashMap::new()));
    emu.shutdown().await;
}

#[tokio::test]
async fn recorded_states_survive_a_restart() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 16).await;
    let all = streams(50);
    for (k, s) in &all {
        cp.record(k.clone(), Some(s.clone()));
    }
    assert_eq!(cp.pending(), 50);
    cp.flush().await.unwrap();
    assert_eq!(cp.pending(), 0);
    drop(cp);
    let (_, states) = load(&emu, 16).await;
    assert_eq!(states.unwrap(), all.into_iter().collect::<HashMap<_, _>>());
    emu.shutdown().await;
}

#[tokio::test]
async fn a_flush_sends_only_the_changed_keys_of_the_changed_shards() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 16).await;
    let all = streams(40);
    for (k, s) in &all {
        cp.record(k.clone(), Some(s.clone()));
    }
    cp.flush().await.unwrap();
    // Another key of the same shard, changed behind the checkpoint's back: a patch carrying
    // the whole shard would overwrite it.
    let (changed, _) = &all[0];
    let shard = shard_name("imagegate-source-checkpoint", shard_of(changed, 16));
    let neighbour = all
        .iter()
        .map(|(k, _)| k)
        .find(|k| *k != changed && shard_of(k, 16) == shard_of(changed, 16))
        .unwrap();
    let api = Api::<ConfigMap>::namespaced(emu.client().unwrap(), NS);
    let marker = json!({ "data": { data_key(neighbour): "marker" } });
    api.patch(&shard, &PatchParams::default(), &Patch::Merge(&marker))
        .await
        .unwrap();
    emu.clear_requests();

    cp.record(changed.clone(), Some(state("uid-0", &[("latest", "d", 4)])));
    cp.record(all[1].0.clone(), Some(all[1].1.clone())); // unchanged: nothing to write
    assert_eq!(cp.pending(), 1);
    assert_eq!(cp.flush().await.unwrap(), 1);
    assert_eq!(patches(&emu), [shard.as_str()]);
    let data = stored(&emu).await[&shard].data.clone().unwrap();
    assert_eq!(data[&data_key(neighbour)], "marker");
    assert_eq!(
        decode(&data_key(changed), &data[&data_key(changed)])
            .unwrap()
            .1,
        state("uid-0", &[("latest", "d", 4)])
    );
    // Nothing changed: nothing sent.
    emu.clear_requests();
    assert_eq!(cp.flush().await.unwrap(), 0);
    assert!(emu.mutating_requests().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn forgetting_a_stream_removes_its_key() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 2).await;
    let (a, b) = (key("ns", "a"), key("ns", "b"));
    cp.record(a.clone(), Some(state("ua", &[("latest", "a", 1)])));
    cp.record(b.clone(), Some(state("ub", &[("latest", "b", 1)])));
    cp.flush().await.unwrap();
    cp.record(a.clone(), None);
    assert_eq!(cp.pending(), 1);
    cp.flush().await.unwrap();
    let keys: Vec<String> = stored(&emu)
        .await
        .into_values()
        .flat_map(|cm| cm.data.unwrap_or_default().into_keys())
        .collect();
    assert_eq!(keys, ["ns_b"]);
    let (_, states) = load(&emu, 2).await;
    assert_eq!(states.unwrap().into_keys().collect::<Vec<_>>(), [b]);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_failed_flush_keeps_the_changes_and_a_later_flush_writes_them() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 4).await;
    cp.flush().await.unwrap();
    emu.clear_requests();
    emu.inject_fault(Fault {
        verb: Some("patch".into()),
        resource: Some("configmaps".into()),
        count: 1000,
        status: Some(500),
        ..Fault::default()
    });
    let k = key("ns", "app");
    cp.record(k.clone(), Some(state("u", &[("latest", "a", 1)])));
    let err = cp.flush().await.unwrap_err();
    assert!(matches!(err, CheckpointError::Write { .. }), "{err}");
    assert_eq!(err.kind(), "write");
    assert_eq!(cp.pending(), 1);
    assert_eq!(patches(&emu).len(), WRITE_ATTEMPTS as usize);

    emu.clear_faults();
    assert_eq!(cp.flush().await.unwrap(), 1);
    assert_eq!(cp.pending(), 0);
    let (_, states) = load(&emu, 4).await;
    assert_eq!(states.unwrap()[&k], state("u", &[("latest", "a", 1)]));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_shard_that_lost_its_annotations_is_still_read_and_relabelled() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 1).await;
    let k = key("ns", "app");
    cp.record(k.clone(), Some(state("u", &[("latest", "a", 1)])));
    cp.flush().await.unwrap();
    let api = Api::<ConfigMap>::namespaced(emu.client().unwrap(), NS);
    let strip = json!({ "metadata": { "annotations": null } });
    let name = "imagegate-source-checkpoint-00";
    api.patch(name, &PatchParams::default(), &Patch::Merge(&strip))
        .await
        .unwrap();
    let (cp, states) = load(&emu, 1).await;
    assert_eq!(states.unwrap()[&k], state("u", &[("latest", "a", 1)]));
    assert_eq!(cp.flush().await.unwrap(), 1);
    let annotations = stored(&emu).await[name]
        .metadata
        .annotations
        .clone()
        .unwrap();
    assert_eq!(annotations[SHARDS_ANNOTATION], "1");
    emu.shutdown().await;
}

#[tokio::test]
async fn a_shard_deleted_by_hand_is_recreated_whole() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 1).await;
    let all = streams(5);
    for (k, s) in &all {
        cp.record(k.clone(), Some(s.clone()));
    }
    cp.flush().await.unwrap();
    let api = Api::<ConfigMap>::namespaced(emu.client().unwrap(), NS);
    api.delete("imagegate-source-checkpoint-00", &DeleteParams::default())
        .await
        .unwrap();
    cp.record(key("ns", "new"), Some(state("n", &[("latest", "a", 1)])));
    cp.flush().await.unwrap();
    let (_, states) = load(&emu, 1).await;
    assert_eq!(states.unwrap().len(), 6);
    emu.shutdown().await;
}

#[tokio::test]
async fn two_thousand_streams_spread_evenly_over_the_shards_and_stay_small() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 16).await;
    let all = streams(2000);
    for (k, s) in &all {
        cp.record(k.clone(), Some(s.clone()));
    }
    assert_eq!(cp.flush().await.unwrap(), 16);
    let cms = stored(&emu).await;
    assert_eq!(cms.len(), 16);
    for (name, cm) in &cms {
        let data = cm.data.clone().unwrap();
        // 125 on average; a uniform hash stays well within half to double.
        assert!((62..=250).contains(&data.len()), "{name}: {}", data.len());
        let bytes: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        // ~3 tags x ~100 bytes per stream: a small fraction of the limit.
        assert!(bytes < MAX_SHARD_BYTES / 10, "{name}: {bytes} bytes");
    }
    let (_, states) = load(&emu, 16).await;
    assert_eq!(states.unwrap().len(), 2000);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_shard_over_the_size_limit_is_refused_and_kept_pending() {
    let emu = emulator().await;
    let (cp, _) = load(&emu, 1).await;
    cp.flush().await.unwrap();
    let tags: Vec<(String, String, i64)> = (0..100)
        .map(|t| (format!("tag-{t}"), "e".into(), 1))
        .collect();
    let tags: Vec<(&str, &str, i64)> = tags
        .iter()
        .map(|(t, d, g)| (t.as_str(), d.as_str(), *g))
        .collect();
    for i in 0..100 {
        cp.record(key("ns", &format!("big-{i}")), Some(state("u", &tags)));
    }
    emu.clear_requests();
    let err = cp.flush().await.unwrap_err();
    assert!(
        matches!(err, CheckpointError::ShardTooLarge { bytes, .. } if bytes > MAX_SHARD_BYTES),
        "{err}"
    );
    assert!(err.to_string().contains("raise --checkpoint-shards"));
    assert_eq!(cp.pending(), 100);
    assert!(emu.mutating_requests().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn changing_the_shard_count_keeps_every_stream() {
    let emu = emulator().await;
    let all: HashMap<_, _> = streams(300).into_iter().collect();
    let (cp, _) = load(&emu, 16).await;
    for (k, s) in &all {
        cp.record(k.clone(), Some(s.clone()));
    }
    cp.flush().await.unwrap();
    drop(cp);

    for shards in [5, 32, 16] {
        let (cp, states) = load(&emu, shards).await;
        assert_eq!(states.as_ref(), Some(&all), "reading for {shards} shards");
        cp.flush().await.unwrap();
        assert_eq!(cp.pending(), 0);
        let cms = stored(&emu).await;
        assert_eq!(
            cms.len(),
            shards as usize,
            "only the shards of the new count remain"
        );
        let mut seen = 0;
        for (name, cm) in &cms {
            let annotations = cm.metadata.annotations.clone().unwrap();
            assert_eq!(annotations[SHARDS_ANNOTATION], shards.to_string());
            let index = shard_index("imagegate-source-checkpoint", name).unwrap();
            for (dk, v) in cm.data.clone().unwrap_or_default() {
                let (k, _) = decode(&dk, &v).unwrap();
                assert_eq!(shard_of(&k, shards), index, "{dk} is in its home shard");
                seen += 1;
            }
        }
        assert_eq!(seen, all.len(), "every stream once");
        let (_, states) = load(&emu, shards).await;
        assert_eq!(states.as_ref(), Some(&all));
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn unusual_but_valid_names_round_trip() {
    let emu = emulator().await;
    let long_ns = "n".repeat(63);
    let keys = [
        key("a", "b"),
        key("ns", "my_image"),
        key("ns", "a__b.c-d"),
        key("ns", "x_y_z"),
        key("0-9", "1.2.3"),
        key(&long_ns, &"a".repeat(189)), // exactly 253: a plain key
        key(&long_ns, &"b".repeat(191)), // 255: a hashed key
        key(&long_ns, &format!("{}_c", "c".repeat(189))),
    ];
    let s = StreamState {
        uid: "0f7c-αβ".into(),
        tags: TagStates::from([
            ("v1.2.3_rc-1", TagState::default()),
            (
                "Latest",
                TagState {
                    digest: None,
                    generation: 0,
                    failure_generation: Some(7),
                },
            ),
        ]),
    };
    let (cp, _) = load(&emu, 3).await;
    for k in &keys {
        cp.record(k.clone(), Some(s.clone()));
    }
    for k in &keys {
        assert_eq!(cp.get(k).as_ref(), Some(&s), "{k:?}");
    }
    cp.flush().await.unwrap();
    let (_, states) = load(&emu, 3).await;
    let expected: HashMap<_, _> = keys.iter().map(|k| (k.clone(), s.clone())).collect();
    assert_eq!(states.unwrap(), expected);
    for cm in stored(&emu).await.into_values() {
        for dk in cm.data.unwrap_or_default().keys() {
            assert!(dk.len() <= 253, "{dk}");
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn run_flushes_on_shutdown() {
    let emu = emulator().await;
    let slow = CheckpointConfig {
        flush_interval: Duration::from_secs(3600),
        ..cfg(4)
    };
    let (cp, _) = Checkpoint::load(emu.client().unwrap(), slow).await.unwrap();
    let cp = Arc::new(cp);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cp.clone().run(async {
        let _ = stopped.await;
    }));
    let k = key("ns", "app");
    cp.record(k.clone(), Some(state("u", &[("latest", "a", 1)])));
    stop.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(cp.pending(), 0);
    let (_, states) = load(&emu, 4).await;
    assert_eq!(states.unwrap()[&k], state("u", &[("latest", "a", 1)]));
    emu.shutdown().await;
}
