//! A tenant past its bound (`--max-queued-per-source`): its sink refuses everything while its
//! streams keep changing. Its events not yet delivered stay at the bound instead of growing with
//! the changes; the other tenant delivers meanwhile; once the sink recovers, the source lists
//! its namespaces and every change made meanwhile arrives, each once, the intermediate imports
//! of a stream changed twice included.

use serde_json::json;

use super::harness::{Adapter, World, accepted, changes, quiet, until};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

const DEPTH: &str = "imagegate_source_queue_depth";
const SHEDDING: &str = "imagegate_source_multi_tenant_sources_shedding";
const SHEDS: &str = "imagegate_source_multi_tenant_sheds_total";

/// The bound the adapter runs with here.
const BOUND: usize = 8;
/// Streams of the noisy tenant, each changed while its sink refuses.
const STREAMS: usize = 30;

#[tokio::test]
async fn a_source_past_its_bound_stays_there_and_catches_up_without_losing_a_change() {
    let world = World::start().await;
    let (steady, refusing) = (Sink::start().await, Sink::start().await);
    for i in 0..STREAMS {
        world.stream("ml", &format!("nb{i}")).await;
    }
    for (ns, is) in [("ml", "warm"), ("ds", "warm"), ("ds", "nb")] {
        world.stream(ns, is).await;
    }
    world
        .source("ds", "steady", json!({"sink": {"uri": steady.url}}))
        .await;
    world
        .source("ml", "noisy", json!({"sink": {"uri": refusing.url}}))
        .await;
    let bound = BOUND.to_string();
    let adapter = Adapter::start(&world, &["--max-queued-per-source", &bound]);
    adapter.ready().await;
    for (ns, name) in [("ds", "steady"), ("ml", "noisy")] {
        world
            .wait_ready(&adapter, ns, name, "True", reason::READY)
            .await;
    }
    world.prime("ds", &[&steady]).await;
    world.prime("ml", &[&refusing]).await;
    let before = (steady.accepted().len(), refusing.accepted().len());

    // The noisy tenant's sink refuses; each of its streams changes, the first five twice.
    refusing.always(Some(503));
    let mut want = Vec::new();
    let mut deepest = 0.0f64;
    for i in 0..STREAMS {
        let is = format!("nb{i}");
        want.push(("ml".to_string(), is.clone(), world.change("ml", &is).await));
        deepest = deepest.max(adapter.gauge(DEPTH).await.unwrap_or_default());
    }
    until(&adapter, "the noisy source to shed", || async {
        adapter.gauge(SHEDDING).await == Some(1.0)
    })
    .await;
    for i in 0..5 {
        let is = format!("nb{i}");
        want.push(("ml".to_string(), is.clone(), world.change("ml", &is).await));
    }
    // The other tenant delivers meanwhile.
    let d = world.change("ds", "nb").await;
    let got = accepted(&adapter, &steady, before.0 + 1).await;
    assert_eq!(changes(&got[before.0..]), [("ds".into(), "nb".into(), d)]);
    for _ in 0..10 {
        deepest = deepest.max(adapter.gauge(DEPTH).await.unwrap_or_default());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        deepest <= BOUND as f64,
        "the noisy source held {deepest} events, past its bound of {BOUND}"
    );
    assert!(
        adapter.gauge(SHEDS).await.is_some_and(|n| n >= 1.0),
        "the shed is counted"
    );

    // The sink recovers: every change arrives, each once, and the source takes changes again.
    refusing.always(None);
    accepted(&adapter, &refusing, before.1 + want.len()).await;
    quiet(&[&refusing]).await;
    let mut got = changes(&refusing.accepted()[before.1..]);
    got.sort();
    want.sort();
    assert_eq!(got, want, "every change once, none lost, none twice");
    until(&adapter, "the shed to end", || async {
        adapter.gauge(SHEDDING).await == Some(0.0) && adapter.gauge(DEPTH).await == Some(0.0)
    })
    .await;
    let later = world.change("ml", "nb7").await;
    let got = accepted(&adapter, &refusing, before.1 + want.len() + 1).await;
    assert_eq!(
        changes(&got[before.1 + want.len()..]),
        [("ml".into(), "nb7".into(), later)]
    );
    assert!(
        adapter.log().contains("past its bound"),
        "the shed is logged"
    );
}
