//! The multi-tenant adapter's backlog gauges on `/metrics`: the events not yet delivered summed
//! over the sources, the sources with a backlog, and the longest stall, rising while one
//! tenant's sink refuses everything (the other tenant delivering meanwhile) and back to 0 once
//! it recovers and its events are through, each once.

use serde_json::json;

use super::harness::{Adapter, World, accepted, changes, quiet, until};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

const DEPTH: &str = "imagegate_source_queue_depth";
const BACKLOGGED: &str = "imagegate_source_multi_tenant_sources_backlogged";
const STALLED: &str = "imagegate_source_multi_tenant_backlog_stalled_seconds";

#[tokio::test]
async fn the_backlog_gauges_rise_while_a_tenant_sink_refuses_and_fall_once_it_recovers() {
    let world = World::start().await;
    let (steady, refusing) = (Sink::start().await, Sink::start().await);
    for ns in ["ds", "ml"] {
        for is in ["nb", "other", "warm"] {
            world.stream(ns, is).await;
        }
    }
    world
        .source("ds", "steady", json!({"sink": {"uri": steady.url}}))
        .await;
    world
        .source("ml", "stuck", json!({"sink": {"uri": refusing.url}}))
        .await;
    let adapter = Adapter::start(&world, &[]);
    adapter.ready().await;
    for (ns, name) in [("ds", "steady"), ("ml", "stuck")] {
        world
            .wait_ready(&adapter, ns, name, "True", reason::READY)
            .await;
    }
    world.prime("ds", &[&steady]).await;
    world.prime("ml", &[&refusing]).await;
    until(&adapter, "an empty backlog after the warm-up", || async {
        adapter.gauge(DEPTH).await == Some(0.0) && adapter.gauge(STALLED).await == Some(0.0)
    })
    .await;

    // ml's sink refuses everything: its two events wait, and their wait grows.
    refusing.always(Some(503));
    let before = (steady.accepted().len(), refusing.accepted().len());
    let m1 = world.change("ml", "nb").await;
    let m2 = world.change("ml", "other").await;
    until(&adapter, "two events waiting, for one source", || async {
        adapter.gauge(DEPTH).await == Some(2.0) && adapter.gauge(BACKLOGGED).await == Some(1.0)
    })
    .await;
    until(&adapter, "the stall to pass 2 s", || async {
        adapter.gauge(STALLED).await.is_some_and(|s| s >= 2.0)
    })
    .await;
    // The other tenant delivers meanwhile; the stall does not restart for it.
    let stalled = adapter.gauge(STALLED).await.unwrap();
    let d1 = world.change("ds", "nb").await;
    let got = accepted(&adapter, &steady, before.0 + 1).await;
    assert_eq!(changes(&got[before.0..]), [("ds".into(), "nb".into(), d1)]);
    until(&adapter, "the stall to grow on", || async {
        adapter.gauge(STALLED).await.is_some_and(|s| s > stalled)
    })
    .await;
    assert_eq!(adapter.gauge(DEPTH).await, Some(2.0));
    assert!(
        refusing.received().len() > 2,
        "the sink was tried, and refused"
    );

    // It recovers: both events go through, once each, and the gauges fall back to 0.
    refusing.always(None);
    let got = accepted(&adapter, &refusing, before.1 + 2).await;
    quiet(&[&refusing]).await;
    let mut got = changes(&got[before.1..]);
    got.sort();
    let mut want = vec![
        ("ml".into(), "nb".into(), m1),
        ("ml".into(), "other".into(), m2),
    ];
    want.sort();
    assert_eq!(got, want);
    assert_eq!(refusing.accepted().len(), before.1 + 2, "each once");
    until(&adapter, "the backlog gauges back at 0", || async {
        adapter.gauge(DEPTH).await == Some(0.0)
            && adapter.gauge(BACKLOGGED).await == Some(0.0)
            && adapter.gauge(STALLED).await == Some(0.0)
    })
    .await;
}
