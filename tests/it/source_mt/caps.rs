//! A source whose checkpoint is past the platform's cap (`--max-checkpoint-bytes-per-source`):
//! the adapter reads it no further than the cap, does not serve that source, and says why in
//! its status (`Ready=False`, `CheckpointTooLarge`), while the other source is served. Once the
//! tenant re-creates the source (its checkpoint goes with the old one), it is served again.

use serde_json::json;

use super::harness::{ADAPTER_USER, Adapter, World, accepted, changes};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

/// The cap the adapter runs with here, and what the seeded checkpoint holds.
const CAP: usize = 65_536;
const HELD: usize = 100_000;

#[tokio::test]
async fn a_source_past_its_checkpoint_cap_is_not_served_alone_and_is_read_no_further() {
    let world = World::start().await;
    let (big, small) = (Sink::start().await, Sink::start().await);
    for ns in ["ds", "ml"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "warm").await;
    }
    world
        .source("ds", "big", json!({"sink": {"uri": big.url}}))
        .await;
    world
        .source("ml", "small", json!({"sink": {"uri": small.url}}))
        .await;
    // big's checkpoint, as a run that served far more streams left it: three ConfigMaps of
    // 100 kB each, each past the cap on its own.
    let uid = world.source_uid("ds", "big").await;
    for name in ["", "-h0", "-h1"] {
        world
            .emu
            .seed(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("ds.big-imagegate-checkpoint{name}"),
                             "namespace": "imagegate-system",
                             "labels": {"app.kubernetes.io/name": "imagegate",
                                        "app.kubernetes.io/managed-by": "imagegate",
                                        "app.kubernetes.io/component": "imagestreamsource-checkpoint",
                                        "sources.imagegate.dev/namespace": "ds",
                                        "sources.imagegate.dev/imagestreamsource": "big",
                                        "sources.imagegate.dev/uid": uid}},
                "data": {"format": "2", "padding": "x".repeat(HELD)}
            }))
            .await;
    }
    assert_eq!(world.checkpoints("ds", "big").await.len(), 3, "seeded");
    let cap = CAP.to_string();
    let adapter = Adapter::start(&world, &["--max-checkpoint-bytes-per-source", &cap]);
    let status = world
        .wait_ready(&adapter, "ds", "big", "False", reason::CHECKPOINT_TOO_LARGE)
        .await;
    let message = status.conditions[0].message.clone().unwrap_or_default();
    assert!(
        message.contains("--max-checkpoint-bytes-per-source")
            && message.contains("re-create the source"),
        "the status says what to do: {message}"
    );
    // The other tenant is served.
    world
        .wait_ready(&adapter, "ml", "small", "True", reason::READY)
        .await;
    world.prime("ml", &[&small]).await;
    let n = small.accepted().len();
    let d = world.change("ml", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &small, n + 1).await[n..]),
        [("ml".into(), "nb".into(), d)]
    );
    // big's checkpoint was read one ConfigMap at a time, and no further than the one past the
    // cap; and not read again on a timer.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let pages = |reqs: &[imagegate_emulator::control::RequestRecord]| {
        reqs.iter()
            .filter(|r| {
                r.user == ADAPTER_USER
                    && r.resource == "configmaps"
                    && r.verb == "list"
                    && r.query.contains("imagestreamsource%3Dbig")
            })
            .count()
    };
    assert_eq!(
        pages(&world.emu.requests().await),
        1,
        "one page of one ConfigMap, then it stopped"
    );
    assert!(big.received().is_empty(), "big sends nothing");

    // Re-created, it starts afresh and is served.
    world.delete_source("ds", "big").await;
    world
        .source("ds", "big", json!({"sink": {"uri": big.url}}))
        .await;
    world
        .wait_ready(&adapter, "ds", "big", "True", reason::READY)
        .await;
    world.prime("ds", &[&big]).await;
}

#[tokio::test]
async fn a_source_whose_checkpoint_grows_past_the_cap_while_served_stops_alone_and_says_why() {
    let world = World::start().await;
    let (big, small) = (Sink::start().await, Sink::start().await);
    // 800 streams in ds: their checkpoint entries (about 100 bytes each) pass 64 KiB once
    // recorded.
    for i in 0..800 {
        world.stream("ds", &format!("nb-{i}")).await;
    }
    for ns in ["ds", "ml"] {
        world.stream(ns, "warm").await;
    }
    world.stream("ml", "nb").await;
    world
        .source("ds", "big", json!({"sink": {"uri": big.url}}))
        .await;
    world
        .source("ml", "small", json!({"sink": {"uri": small.url}}))
        .await;
    let cap = CAP.to_string();
    let adapter = Adapter::start(&world, &["--max-checkpoint-bytes-per-source", &cap]);
    world
        .wait_ready(&adapter, "ml", "small", "True", reason::READY)
        .await;
    // Its first start recorded every stream; the next change finds the checkpoint past the cap.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(45);
    loop {
        world.change("ds", "nb-1").await;
        let s = world.status("ds", "big").await;
        if s.conditions.first().and_then(|c| c.reason.as_deref())
            == Some(reason::CHECKPOINT_TOO_LARGE)
        {
            break;
        }
        if std::time::Instant::now() >= deadline {
            let held: usize = (world.checkpoints("ds", "big").await.iter())
                .map(imagegate::source::checkpoint::data_bytes)
                .sum();
            panic!(
                "ds/big never said CheckpointTooLarge (its checkpoint holds {held} bytes): {s:?}\n{}",
                adapter.log()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        adapter
            .log()
            .contains("past its cap: it takes no more changes")
    );
    // The other tenant is served.
    world.prime("ml", &[&small]).await;
    let n = small.accepted().len();
    let d = world.change("ml", "nb").await;
    assert_eq!(
        changes(&accepted(&adapter, &small, n + 1).await[n..]),
        [("ml".into(), "nb".into(), d)]
    );
}
