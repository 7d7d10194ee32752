//! Restarts and re-lists of the multi-tenant adapter: the changes made while it was down reach
//! every source exactly once (from each source's own checkpoint), and a re-list after an expired
//! resourceVersion (410) sends only what changed.

use std::collections::BTreeSet;

use serde_json::json;

use super::harness::{Adapter, World, accepted, changes, quiet};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

type Change = (String, String, String);

fn set(got: &[Change]) -> BTreeSet<Change> {
    got.iter().cloned().collect()
}

#[tokio::test]
async fn changes_made_while_the_adapter_was_down_reach_every_source_exactly_once() {
    let world = World::start().await;
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    let sinks: Vec<Sink> = futures::future::join_all((0..3).map(|_| Sink::start())).await;
    for ns in ["ds", "ml"] {
        for is in ["nb", "other", "warm"] {
            world.stream(ns, is).await;
        }
    }
    let scopes: [&[&str]; 3] = [&["ds"], &["ds", "ml"], &["ml"]];
    for (i, (nss, sink)) in scopes.iter().zip(&sinks).enumerate() {
        world
            .source(
                "ds",
                &format!("s{i}"),
                json!({"sink": {"uri": sink.url}, "namespaces": nss}),
            )
            .await;
    }
    let mut adapter = Adapter::start(&world, &["--leader-elect"]);
    for i in 0..3 {
        world
            .wait_ready(&adapter, "ds", &format!("s{i}"), "True", reason::READY)
            .await;
    }
    world.prime("ds", &[&sinks[0], &sinks[1]]).await;
    world.prime("ml", &[&sinks[1], &sinks[2]]).await;
    // One change each before the stop, delivered and checkpointed.
    let before: Vec<usize> = sinks.iter().map(|s| s.accepted().len()).collect();
    let mut made: Vec<Change> = Vec::new();
    for ns in ["ds", "ml"] {
        made.push((ns.into(), "nb".into(), world.change(ns, "nb").await));
    }
    for (i, (nss, sink)) in scopes.iter().zip(&sinks).enumerate() {
        let mine = made.iter().filter(|c| nss.contains(&c.0.as_str())).count();
        let _ = accepted(&adapter, sink, before[i] + mine).await;
    }
    let refs: Vec<&Sink> = sinks.iter().collect();
    quiet(&refs).await;
    adapter.stop().await;
    let stopped: Vec<usize> = sinks.iter().map(|s| s.accepted().len()).collect();

    // While it is down: one change to each of four streams.
    let mut meanwhile: Vec<Change> = Vec::new();
    for (ns, is) in [("ds", "nb"), ("ds", "other"), ("ml", "nb"), ("ml", "other")] {
        meanwhile.push((ns.into(), is.into(), world.change(ns, is).await));
    }
    adapter.restart();
    adapter.ready().await;
    for (i, (nss, sink)) in scopes.iter().zip(&sinks).enumerate() {
        let want: BTreeSet<Change> = meanwhile
            .iter()
            .filter(|c| nss.contains(&c.0.as_str()))
            .cloned()
            .collect();
        let _ = accepted(&adapter, sink, stopped[i] + want.len()).await;
        quiet(&refs).await;
        let got = changes(&sink.accepted()[stopped[i]..]);
        assert_eq!(
            got.len(),
            want.len(),
            "s{i}: each change once, nothing resent: {got:?}"
        );
        assert_eq!(set(&got), want, "s{i}: exactly the changes made while down");
    }

    // A re-list after an expired resourceVersion: only what changed meanwhile.
    let relisted: Vec<usize> = sinks.iter().map(|s| s.accepted().len()).collect();
    world.emu.compact().await;
    world.emu.drop_watches().await;
    let d = world.change("ml", "other").await;
    for (i, sink) in sinks.iter().enumerate().skip(1) {
        let _ = accepted(&adapter, sink, relisted[i] + 1).await;
    }
    quiet(&refs).await;
    assert_eq!(
        sinks[0].accepted().len(),
        relisted[0],
        "s0 does not watch ml"
    );
    for (i, sink) in sinks.iter().enumerate().skip(1) {
        assert_eq!(
            changes(&sink.accepted()[relisted[i]..]),
            [("ml".into(), "other".into(), d.clone())],
            "s{i}: the re-list sends the one change"
        );
    }
}
