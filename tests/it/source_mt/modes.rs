//! The ApiServerSource modes in the multi-tenant adapter: `resource` and `reference` send
//! nothing for the streams that exist on start or at a re-list (as ApiServerSource, whose
//! store's `Replace` is a no-op), only what changes; `emitExisting` is the explicit way to have
//! the existing streams (or tags) sent, once.

use std::collections::BTreeMap;

use cloudevents::AttributesReader;
use serde_json::json;

use super::harness::{Adapter, World, accepted, ext, quiet};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::reason;

/// How many events of each `(type, subject stream)` `sink` took after the first `from`.
fn tally(sink: &Sink, from: usize) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for e in &sink.accepted()[from..] {
        let stream = ext(e, "imagestream")
            .or_else(|| ext(e, "name"))
            .unwrap_or_default();
        *out.entry((e.ty().to_string(), stream)).or_insert(0) += 1;
    }
    out
}

fn without_warm(t: BTreeMap<(String, String), usize>) -> BTreeMap<(String, String), usize> {
    t.into_iter().filter(|((_, s), _)| s != "warm").collect()
}

fn counts(pairs: &[(&str, &str, usize)]) -> BTreeMap<(String, String), usize> {
    pairs
        .iter()
        .map(|(t, s, n)| ((t.to_string(), s.to_string()), *n))
        .collect()
}

#[tokio::test]
async fn resource_and_reference_modes_send_nothing_on_start_or_relist_unless_asked() {
    let world = World::start().await;
    for is in ["nb", "other", "warm"] {
        world.stream("ds", is).await;
    }
    let names = ["resource", "reference", "resource-existing", "tag-existing"];
    let sinks: Vec<Sink> = futures::future::join_all(names.iter().map(|_| Sink::start())).await;
    let specs = [
        json!({"mode": "resource"}),
        json!({"mode": "reference"}),
        json!({"mode": "resource", "emitExisting": true}),
        json!({"emitExisting": true}),
    ];
    for ((name, mut spec), sink) in names.iter().zip(specs).zip(&sinks) {
        spec["sink"] = json!({"uri": sink.url});
        world.source("ds", name, spec).await;
    }
    let adapter = Adapter::start(&world, &[]);
    for name in names {
        world
            .wait_ready(&adapter, "ds", name, "True", reason::READY)
            .await;
    }
    let refs: Vec<&Sink> = sinks.iter().collect();
    world.prime("ds", &refs).await;

    // On start: nothing but the warm-up's updates, except what emitExisting asked for.
    let started = [
        counts(&[]),
        counts(&[]),
        counts(&[
            ("dev.knative.apiserver.resource.add", "nb", 1),
            ("dev.knative.apiserver.resource.add", "other", 1),
        ]),
        counts(&[
            ("dev.imagegate.imagestreamtag.updated", "nb", 1),
            ("dev.imagegate.imagestreamtag.updated", "other", 1),
        ]),
    ];
    for ((name, sink), want) in names.iter().zip(&sinks).zip(&started) {
        assert_eq!(&without_warm(tally(sink, 0)), want, "{name} on start");
        let adds_of_warm = tally(sink, 0)
            .into_iter()
            .filter(|((t, s), _)| s == "warm" && t.ends_with(".add"))
            .count();
        assert!(
            adds_of_warm <= usize::from(name.contains("existing")),
            "{name}: warm was added at most by emitExisting"
        );
    }

    // A re-list (410), then one change: that change only, in every mode.
    let at: Vec<usize> = sinks.iter().map(|s| s.accepted().len()).collect();
    world.emu.compact().await;
    world.emu.drop_watches().await;
    world.change("ds", "nb").await;
    for (sink, n) in sinks.iter().zip(&at) {
        let _ = accepted(&adapter, sink, n + 1).await;
    }
    quiet(&refs).await;
    let changed = [
        counts(&[("dev.knative.apiserver.resource.update", "nb", 1)]),
        counts(&[("dev.knative.apiserver.ref.update", "nb", 1)]),
        counts(&[("dev.knative.apiserver.resource.update", "nb", 1)]),
        counts(&[("dev.imagegate.imagestreamtag.updated", "nb", 1)]),
    ];
    for (((name, sink), n), want) in names.iter().zip(&sinks).zip(&at).zip(&changed) {
        assert_eq!(&tally(sink, *n), want, "{name} after the re-list");
    }
}
