//! The checkpoint against the emulator over HTTP, through its public interface: loading,
//! flushing, growing and shrinking, crashes mid-split, lost shards and refused writes. (Under
//! `tests/`, not `src/`: an emulator-backed suite is an integration test.)

use std::sync::Arc;
use std::time::Duration;

use imagegate::runtime::admin::Health;
use imagegate::source::checkpoint::*;
use imagegate::source::metrics::Metrics;
use imagegate::source::state::{StreamState, TagState, TagStates};
use imagegate_emulator::control::Fault;
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use prometheus_client::registry::Registry;
use serde_json::json;
use std::collections::BTreeMap;
use std::collections::{BTreeSet, HashMap};

const NS: &str = "imagegate";
const PRE: &str = "imagegate-source-checkpoint";

fn state(uid: &str, tags: &[(&str, &str, i64)]) -> StreamState {
    StreamState {
        uid: uid.into(),
        tags: tags
            .iter()
            .map(|(t, d, g)| {
                let tag = TagState {
                    digest: Some(format!("sha256:{}", d.repeat(64 / d.len())).into()),
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

async fn emulator() -> Emulator {
    let mut config = Config::default();
    config.namespaces.push(NS.into());
    Emulator::start(config).await.unwrap()
}

async fn load(emu: &Emulator) -> (Checkpoint, Loaded) {
    Checkpoint::load(emu.client().unwrap(), CheckpointConfig::new(NS))
        .await
        .unwrap()
}

fn api(emu: &Emulator) -> Api<ConfigMap> {
    Api::<ConfigMap>::namespaced(emu.client().unwrap(), NS)
}

/// The checkpoint ConfigMaps in the cluster, by name.
async fn stored(emu: &Emulator) -> BTreeMap<String, ConfigMap> {
    let list = api(emu).list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .map(|cm| (cm.metadata.name.clone().unwrap(), cm))
        .collect()
}

fn requests(emu: &Emulator, verb: &str) -> Vec<String> {
    emu.mutating_requests()
        .into_iter()
        .filter(|r| r.resource == "configmaps" && r.verb == verb)
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

async fn record_all(cp: &Checkpoint, all: &[(StreamKey, StreamState)]) {
    for (k, s) in all {
        cp.record(k.clone(), Some(s.clone()));
    }
}

fn as_map(all: &[(StreamKey, StreamState)]) -> HashMap<StreamKey, StreamState> {
    all.iter().cloned().collect()
}

/// Every later ConfigMap `verb` request is answered with `status`.
fn refuse(emu: &Emulator, verb: &str, status: u16) {
    emu.inject_fault(Fault {
        verb: Some(verb.into()),
        resource: Some("configmaps".into()),
        count: 1000,
        status: Some(status),
        ..Fault::default()
    });
}

/// An emulator and a checkpoint that has recorded and flushed `n` streams.
async fn flushed(n: usize) -> (Emulator, Checkpoint, Vec<(StreamKey, StreamState)>) {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    let all = streams(n);
    record_all(&cp, &all).await;
    cp.flush().await.unwrap();
    (emu, cp, all)
}

/// The shards' names, without the marker.
async fn shard_names(emu: &Emulator) -> Vec<String> {
    stored(emu).await.into_keys().filter(|n| n != PRE).collect()
}

#[tokio::test]
async fn a_first_start_writes_one_empty_shard_then_the_marker() {
    let emu = emulator().await;
    let (cp, loaded) = load(&emu).await;
    assert!(loaded.first_start);
    assert!(loaded.states.is_empty());
    assert!(
        !loaded.lost(&key("ns", "x")),
        "nothing is lost on a first start"
    );
    assert!(cp.not_ready().unwrap().contains("not yet been written"));
    assert!(cp.flush().await.unwrap());
    let cms = stored(&emu).await;
    assert_eq!(
        cms.keys().collect::<Vec<_>>(),
        [PRE, "imagegate-source-checkpoint-h"]
    );
    let shard = &cms["imagegate-source-checkpoint-h"];
    let labels = shard.metadata.labels.clone().unwrap();
    assert_eq!(labels["app.kubernetes.io/component"], "source-checkpoint");
    assert_eq!(cms[PRE].data.clone().unwrap()[FORMAT_KEY], "2");
    // Nothing to remember is not a first start, and nothing is lost.
    let (_, loaded) = load(&emu).await;
    assert!(!loaded.first_start);
    assert!(!loaded.lost(&key("ns", "x")));
    emu.shutdown().await;
}

#[tokio::test]
async fn recorded_states_survive_a_restart() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    let all = streams(50);
    record_all(&cp, &all).await;
    assert!(cp.pending() >= 50);
    cp.flush().await.unwrap();
    assert_eq!(cp.pending(), 0);
    drop(cp);
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states, as_map(&all));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_flush_sends_only_the_changed_keys() {
    let (emu, cp, all) = flushed(40).await;
    // Another key, changed behind the checkpoint's back: a patch carrying the whole shard
    // would overwrite it.
    let shard = "imagegate-source-checkpoint-h";
    let (changed, _) = &all[0];
    let neighbour = &all[5].0;
    let marker = json!({ "data": { data_key(neighbour): "marker" } });
    api(&emu)
        .patch(shard, &PatchParams::default(), &Patch::Merge(&marker))
        .await
        .unwrap();
    emu.clear_requests();

    cp.record(changed.clone(), Some(state("uid-0", &[("latest", "d", 4)])));
    cp.record(all[1].0.clone(), Some(all[1].1.clone())); // unchanged: nothing to write
    assert_eq!(cp.pending(), 1);
    cp.flush().await.unwrap();
    assert_eq!(requests(&emu, "patch"), [shard]);
    let data = stored(&emu).await[shard].data.clone().unwrap();
    assert_eq!(data[&data_key(neighbour)], "marker");
    assert_eq!(
        decode_state(&data[&data_key(changed)]),
        Some(state("uid-0", &[("latest", "d", 4)]))
    );
    // Nothing changed: nothing sent.
    emu.clear_requests();
    cp.flush().await.unwrap();
    assert!(emu.mutating_requests().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn forgetting_a_stream_removes_its_key() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    let (a, b) = (key("ns", "a"), key("ns", "b"));
    cp.record(a.clone(), Some(state("ua", &[("latest", "a", 1)])));
    cp.record(b.clone(), Some(state("ub", &[("latest", "b", 1)])));
    cp.flush().await.unwrap();
    cp.record(a.clone(), None);
    assert_eq!(cp.pending(), 1);
    cp.flush().await.unwrap();
    let keys: Vec<String> = stored(&emu)
        .await
        .into_iter()
        .filter(|(n, _)| n != PRE)
        .flat_map(|(_, cm)| cm.data.unwrap_or_default().into_keys())
        .collect();
    assert_eq!(keys, ["ns_b"]);
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states.into_keys().collect::<Vec<_>>(), [b]);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_failed_flush_keeps_the_changes_and_a_later_flush_writes_them() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    cp.flush().await.unwrap();
    emu.clear_requests();
    refuse(&emu, "patch", 500);
    let k = key("ns", "app");
    cp.record(k.clone(), Some(state("u", &[("latest", "a", 1)])));
    let err = cp.flush().await.unwrap_err();
    assert!(matches!(err, CheckpointError::Write { .. }), "{err}");
    assert_eq!(err.failure(), FailureKind::Unavailable);
    assert_eq!(cp.pending(), 1);
    assert_eq!(requests(&emu, "patch").len(), WRITE_ATTEMPTS as usize);

    emu.clear_faults();
    cp.flush().await.unwrap();
    assert_eq!(cp.pending(), 0);
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states[&k], state("u", &[("latest", "a", 1)]));
    emu.shutdown().await;
}

#[tokio::test]
async fn forbidden_writes_say_so_and_are_not_retried_within_a_flush() {
    let emu = emulator().await;
    refuse(&emu, "create", 403);
    let (cp, _) = load(&emu).await;
    let err = cp.flush().await.unwrap_err();
    assert_eq!(err.failure(), FailureKind::Forbidden, "{err}");
    assert_eq!(requests(&emu, "create").len(), 1);
    assert!(stored(&emu).await.is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn a_shard_deleted_by_hand_while_running_is_recreated_whole() {
    let (emu, cp, _) = flushed(5).await;
    api(&emu)
        .delete("imagegate-source-checkpoint-h", &DeleteParams::default())
        .await
        .unwrap();
    cp.record(key("ns", "new"), Some(state("n", &[("latest", "a", 1)])));
    cp.flush().await.unwrap();
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states.len(), 6);
    emu.shutdown().await;
}

#[tokio::test]
async fn the_checkpoint_splits_as_it_grows_and_merges_as_it_shrinks() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    cp.flush().await.unwrap();
    let all = streams(12_000);
    record_all(&cp, &all).await;
    assert!(cp.flush().await.unwrap());
    let cms = stored(&emu).await;
    let shards: Vec<&ConfigMap> = cms
        .iter()
        .filter(|(n, _)| *n != PRE)
        .map(|(_, c)| c)
        .collect();
    assert!(shards.len() >= 4, "{} shards", shards.len());
    assert!(
        !cms.contains_key("imagegate-source-checkpoint-h"),
        "the first shard was replaced"
    );
    let mut held = 0;
    for cm in &shards {
        let data = cm.data.clone().unwrap_or_default();
        let bytes: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(bytes <= SPLIT_ABOVE, "{:?}: {bytes}", cm.metadata.name);
        let epoch = &cm.metadata.annotations.clone().unwrap()[EPOCH_ANNOTATION];
        assert!(epoch.parse::<u64>().unwrap() >= 2);
        held += data.len();
    }
    assert_eq!(held, all.len(), "every stream once");
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states, as_map(&all));

    for (k, _) in &all[20..] {
        cp.record(k.clone(), None);
    }
    assert!(cp.flush().await.unwrap());
    assert_eq!(shard_names(&emu).await, ["imagegate-source-checkpoint-h"]);
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states, as_map(&all[..20]));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_split_interrupted_before_its_cleanup_loses_nothing() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    cp.flush().await.unwrap();
    // Deleting the replaced shard fails: it stays beside the new ones, as after a crash.
    refuse(&emu, "delete", 500);
    let all = streams(8000);
    record_all(&cp, &all).await;
    assert!(cp.flush().await.is_err());
    let mut newer = all.clone();
    newer[0].1 = state("changed", &[("latest", "f", 9)]);
    cp.record(newer[0].0.clone(), Some(newer[0].1.clone()));
    cp.record(newer[1].0.clone(), None);
    newer.remove(1);
    let _ = cp.flush().await;
    drop(cp);
    assert!(
        stored(&emu)
            .await
            .contains_key("imagegate-source-checkpoint-h")
    );
    let (cp, loaded) = load(&emu).await;
    assert_eq!(
        loaded.states,
        as_map(&newer),
        "each stream from the newest shard"
    );
    emu.clear_faults();
    cp.flush().await.unwrap();
    assert!(
        !stored(&emu)
            .await
            .contains_key("imagegate-source-checkpoint-h")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_split_interrupted_before_every_new_shard_exists_reads_the_rest_from_the_old_one() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    let all = streams(8000);
    record_all(&cp, &all[..10]).await;
    cp.flush().await.unwrap();
    // The creates of the split fail, as if the source died before them.
    record_all(&cp, &all).await;
    refuse(&emu, "create", 500);
    assert!(cp.flush().await.is_err());
    drop(cp);
    emu.clear_faults();
    let (_, loaded) = load(&emu).await;
    // The old shard holds the first ten; the rest were never written: they come again as new.
    assert_eq!(loaded.states, as_map(&all[..10]));
    assert!(!loaded.first_start);
    assert!(
        !loaded.lost(&all[100].0),
        "covered by the old shard: a new stream"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_stale_configmap_with_a_shards_name_is_overwritten_whole() {
    let emu = emulator().await;
    let stale = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "imagegate-source-checkpoint-h", "namespace": NS},
        "data": {"ns_ghost": "u;latest=,1", "junk": "x"},
    });
    api(&emu)
        .create(
            &PostParams::default(),
            &serde_json::from_value(stale).unwrap(),
        )
        .await
        .unwrap();
    let (cp, loaded) = load(&emu).await;
    assert!(
        loaded.first_start,
        "not labelled as the checkpoint: not read"
    );
    let all = streams(30);
    record_all(&cp, &all).await;
    emu.clear_requests();
    cp.flush().await.unwrap();
    assert_eq!(
        requests(&emu, "create"),
        ["", ""],
        "the shard (refused: it exists), the marker"
    );
    assert_eq!(requests(&emu, "patch"), ["imagegate-source-checkpoint-h"]);
    let cm = &stored(&emu).await["imagegate-source-checkpoint-h"];
    let data = cm.data.clone().unwrap_or_default();
    assert_eq!(
        data.len(),
        30,
        "{:?}",
        data.keys().take(3).collect::<Vec<_>>()
    );
    assert_eq!(
        cm.metadata.labels.clone().unwrap()["app.kubernetes.io/component"],
        "source-checkpoint"
    );
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states, as_map(&all));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_shard_lost_while_down_makes_exactly_its_streams_lost() {
    let (emu, cp, all) = flushed(8000).await;
    drop(cp);
    let names = shard_names(&emu).await;
    let gone = &names[1];
    let held: BTreeSet<String> = stored(&emu).await[gone]
        .data
        .clone()
        .unwrap()
        .into_keys()
        .collect();
    api(&emu)
        .delete(gone, &DeleteParams::default())
        .await
        .unwrap();
    let (_, loaded) = load(&emu).await;
    assert!(!loaded.first_start);
    for (k, _) in &all {
        let lost = held.contains(&data_key(k));
        assert_eq!(loaded.lost(k), lost, "{k:?}");
        assert_eq!(loaded.states.contains_key(k), !lost);
    }
    assert!(!loaded.lost(&key("new", "stream")) || held.contains(&data_key(&key("new", "stream"))));

    // Every shard gone, the marker left: everything is lost, nothing is a first start.
    for name in shard_names(&emu).await {
        api(&emu)
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let (_, loaded) = load(&emu).await;
    assert!(!loaded.first_start && loaded.states.is_empty());
    assert!(all.iter().all(|(k, _)| loaded.lost(k)));
    emu.shutdown().await;
}

#[tokio::test]
async fn an_unreadable_entry_makes_its_stream_lost() {
    let (emu, _, all) = flushed(3).await;
    let broken = json!({ "data": { data_key(&all[1].0): "u;broken" } });
    api(&emu)
        .patch(
            "imagegate-source-checkpoint-h",
            &PatchParams::default(),
            &Patch::Merge(&broken),
        )
        .await
        .unwrap();
    let (cp, loaded) = load(&emu).await;
    assert!(loaded.lost(&all[1].0));
    assert!(!loaded.lost(&all[0].0) && loaded.states.contains_key(&all[0].0));
    cp.flush().await.unwrap();
    let data = stored(&emu).await["imagegate-source-checkpoint-h"]
        .data
        .clone()
        .unwrap();
    assert!(
        !data.contains_key(&data_key(&all[1].0)),
        "removed by the next flush"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_stream_too_large_for_a_shard_is_refused_and_kept_pending() {
    let emu = emulator().await;
    let (cp, _) = load(&emu).await;
    cp.flush().await.unwrap();
    let names: Vec<String> = (0..20_000).map(|t| format!("tag-{t:05}")).collect();
    let tags: Vec<(&str, &str, i64)> = names.iter().map(|t| (t.as_str(), "e", 1)).collect();
    cp.record(key("ns", "big"), Some(state("u", &tags)));
    emu.clear_requests();
    let err = cp.flush().await.unwrap_err();
    assert!(
        matches!(err, CheckpointError::ShardTooLarge { bytes, .. } if bytes > MAX_SHARD_BYTES),
        "{err}"
    );
    assert_eq!(err.failure(), FailureKind::TooLarge);
    assert!(cp.pending() >= 1);
    assert!(requests(&emu, "create").is_empty() && requests(&emu, "patch").is_empty());
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
    let (cp, _) = load(&emu).await;
    for k in &keys {
        cp.record(k.clone(), Some(s.clone()));
    }
    for k in &keys {
        assert_eq!(cp.get(k).as_ref(), Some(&s), "{k:?}");
    }
    cp.flush().await.unwrap();
    let (_, loaded) = load(&emu).await;
    let expected: HashMap<_, _> = keys.iter().map(|k| (k.clone(), s.clone())).collect();
    assert_eq!(loaded.states, expected);
    for cm in stored(&emu).await.into_values() {
        for dk in cm.data.unwrap_or_default().keys() {
            assert!(dk.len() <= 253, "{dk}");
        }
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn run_flushes_on_shutdown_and_reports_health() {
    let emu = emulator().await;
    let slow = CheckpointConfig {
        flush_interval: Duration::from_secs(3600),
        ..CheckpointConfig::new(NS)
    };
    let (cp, _) = Checkpoint::load(emu.client().unwrap(), slow).await.unwrap();
    let cp = Arc::new(cp);
    let metrics = Metrics::register(&mut Registry::default());
    let health = Health::new();
    health.set_ready(true);
    health.set_condition("checkpoint", cp.not_ready());
    assert!(!health.is_ready());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(cp.clone().run(metrics.clone(), health.clone(), async {
        let _ = stopped.await;
    }));
    // The first flush is at once.
    for _ in 0..100 {
        if health.is_ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(health.is_ready(), "{:?}", health.reason());
    let k = key("ns", "app");
    cp.record(k.clone(), Some(state("u", &[("latest", "a", 1)])));
    stop.send(()).unwrap();
    task.await.unwrap();
    assert_eq!(cp.pending(), 0);
    assert_eq!(metrics.checkpoint_shards.get(), 1);
    assert!(metrics.checkpoint_bytes.get() > 0);
    // The shard was written whole at first, and again with the change: each time, all of it.
    let shard = metrics.checkpoint_bytes.get() as u64;
    assert!(
        metrics.checkpoint_written_bytes.get() >= shard,
        "{}",
        metrics.checkpoint_written_bytes.get()
    );
    let (_, loaded) = load(&emu).await;
    assert_eq!(loaded.states[&k], state("u", &[("latest", "a", 1)]));
    emu.shutdown().await;
}
