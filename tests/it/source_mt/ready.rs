//! `Ready` means delivering: a source reports `Ready=True` only once the first list of its
//! namespaces is recorded, so a change made after `Ready` is a change, sent, and not part of
//! the state a first start records silently.

use serde_json::json;

use super::harness::{Adapter, World, accepted, cond, ext};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::{condition, reason};
use imagegate_emulator::control::Fault;

#[tokio::test]
async fn a_change_made_right_after_ready_is_sent_even_when_the_first_list_is_slow() {
    let world = World::start().await;
    world.stream("ds", "nb").await;
    let adapter = Adapter::start(&world, &[]);
    adapter.ready().await;
    // The source's own list of its namespace takes 2 s (a busy API server).
    world
        .emu
        .inject_fault(Fault {
            verb: Some("list".into()),
            resource: Some("imagestreams".into()),
            path_contains: Some("/namespaces/ds/".into()),
            count: 1,
            delay_ms: Some(2000),
            ..Fault::default()
        })
        .await;
    let sink = Sink::start().await;
    world
        .source("ds", "slow", json!({"sink": {"uri": sink.url}}))
        .await;
    // Until the list is recorded it says so.
    let listing = world
        .wait_ready(&adapter, "ds", "slow", "Unknown", reason::LISTING)
        .await;
    assert!(
        cond(&listing, condition::READY)
            .unwrap()
            .2
            .contains("listing"),
        "{listing:?}"
    );
    world
        .wait_ready(&adapter, "ds", "slow", "True", reason::READY)
        .await;
    let digest = world.change("ds", "nb").await;
    let got = accepted(&adapter, &sink, 1).await;
    assert_eq!(ext(&got[0], "namespace").as_deref(), Some("ds"));
    let data: serde_json::Value = match got[0].data() {
        Some(cloudevents::Data::Json(v)) => v.clone(),
        Some(cloudevents::Data::Binary(b)) => serde_json::from_slice(b).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(data["digest"], digest.as_str(), "{data}");
}
