//! Many tenants in one adapter: a source whose service account may not read one of its
//! namespaces; two sources on overlapping namespaces, each getting exactly its own changes once;
//! a source deleted mid-stream (its sink hears nothing more, its checkpoint goes, the others go
//! on); and the feed: one ImageStream watch of every namespace, each source listing its own.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use super::harness::{ADAPTER_USER, Adapter, World, accepted, changes, cond, quiet, until};
use crate::support::sink::Sink;
use imagegate::adapter::crd::status::{condition, reason};

#[tokio::test]
async fn a_source_not_permitted_in_one_namespace_says_where_and_gets_nothing_from_it() {
    let world = World::start().await;
    let (team_a, own) = (Sink::start().await, Sink::start().await);
    // ds/watcher reads ds, and may only get (not list or watch) in ml.
    world.grant("ds", "watcher", "ml", &["get"]).await;
    for ns in ["ds", "ml"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "warm").await;
    }
    world
        .source(
            "ds",
            "team-a",
            json!({"sink": {"uri": team_a.url}, "namespaceSelector": {"matchLabels": {"team": "a"}}}),
        )
        .await;
    world
        .source("ds", "own", json!({"sink": {"uri": own.url}}))
        .await;
    let adapter = Adapter::start(&world, &[]);
    let status = world
        .wait_ready(
            &adapter,
            "ds",
            "team-a",
            "False",
            reason::INSUFFICIENT_PERMISSIONS,
        )
        .await;
    assert_eq!(
        cond(&status, condition::SUFFICIENT_PERMISSIONS).unwrap(),
        (
            "False".into(),
            reason::INSUFFICIENT_PERMISSIONS.into(),
            // ml was found by the selector: counted, not named (F-7: the status names no
            // namespace the tenant may not read).
            "service account \"ds/watcher\" (system:serviceaccount:ds:watcher) may not read \
             imagestreams.image.openshift.io: it lacks a verb in 1 namespace its \
             namespaceSelector selects (not named here: the adapter's log names them for the \
             platform); grant it get, list and watch on imagestreams (image.openshift.io) there, \
             for example with a RoleBinding per namespace, or select fewer namespaces"
                .into()
        )
    );
    until(&adapter, "the log names ml for the platform", || async {
        adapter
            .log()
            .lines()
            .any(|l| l.contains("namespaceSelector selects") && l.contains("ml"))
    })
    .await;
    assert_eq!(
        cond(&status, condition::SINK_PROVIDED).unwrap().0,
        "True",
        "the sink still resolved"
    );
    world
        .wait_ready(&adapter, "ds", "own", "True", reason::READY)
        .await;
    // Served where its account may read (ds), never where it may not (ml).
    world.prime("ds", &[&own, &team_a]).await;
    let (t0, o0) = (team_a.accepted().len(), own.accepted().len());
    let d = world.change("ml", "nb").await;
    let e = world.change("ds", "nb").await;
    let _ = accepted(&adapter, &team_a, t0 + 1).await;
    let _ = accepted(&adapter, &own, o0 + 1).await;
    quiet(&[&team_a, &own]).await;
    assert_eq!(
        changes(&team_a.accepted()[t0..]),
        [("ds".into(), "nb".into(), e.clone())],
        "the change in ds, and not the one in ml ({d})"
    );
    assert!(
        !changes(&team_a.accepted())
            .iter()
            .any(|(ns, _, _)| ns == "ml"),
        "nothing from ml, ever"
    );
    assert_eq!(
        changes(&own.accepted()[o0..]),
        [("ds".into(), "nb".into(), e)]
    );
}

#[tokio::test]
async fn two_sources_on_overlapping_namespaces_each_get_exactly_their_changes_once() {
    let world = World::start().await;
    let (wide, narrow) = (Sink::start().await, Sink::start().await);
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    world
        .grant("ds", "watcher", "ops", &["get", "list", "watch"])
        .await;
    for ns in ["ds", "ml", "ops"] {
        world.stream(ns, "nb").await;
        world.stream(ns, "other").await;
    }
    world.stream("ml", "warm").await;
    // wide: ds and ml; narrow: ml and ops, and only ImageStream nb.
    world
        .source(
            "ds",
            "wide",
            json!({"sink": {"uri": wide.url}, "namespaces": ["ds", "ml"]}),
        )
        .await;
    world
        .source(
            "ds",
            "narrow",
            json!({"sink": {"uri": narrow.url}, "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml", "ops"]}]}}),
        )
        .await;
    let adapter = Adapter::start(&world, &[]);
    for name in ["wide", "narrow"] {
        world
            .wait_ready(&adapter, "ds", name, "True", reason::READY)
            .await;
    }
    world.prime("ml", &[&wide, &narrow]).await;
    let (w0, n0) = (wide.accepted().len(), narrow.accepted().len());

    let mut made = Vec::new();
    for _ in 0..3 {
        for ns in ["ds", "ml", "ops"] {
            for is in ["nb", "other"] {
                made.push((ns.to_string(), is.to_string(), world.change(ns, is).await));
            }
        }
    }
    let want = |nss: &[&str]| -> BTreeSet<(String, String, String)> {
        made.iter()
            .filter(|(ns, _, _)| nss.contains(&ns.as_str()))
            .cloned()
            .collect()
    };
    let (want_wide, want_narrow) = (want(&["ds", "ml"]), want(&["ml", "ops"]));
    let _ = accepted(&adapter, &wide, w0 + want_wide.len()).await;
    let _ = accepted(&adapter, &narrow, n0 + want_narrow.len()).await;
    quiet(&[&wide, &narrow]).await;
    for (sink, start, want) in [(&wide, w0, want_wide), (&narrow, n0, want_narrow)] {
        let got = changes(&sink.accepted()[start..]);
        let unique: BTreeSet<_> = got.iter().cloned().collect();
        assert_eq!(
            unique.len(),
            got.len(),
            "{}: a change twice: {got:?}",
            sink.url
        );
        assert_eq!(unique, want, "{}: exactly its own changes", sink.url);
    }
}

#[tokio::test]
async fn a_source_deleted_mid_stream_stops_its_checkpoint_goes_and_the_others_go_on() {
    let world = World::start().await;
    let (leaving, staying) = (Sink::start().await, Sink::start().await);
    world.stream("ds", "nb").await;
    world.stream("ds", "warm").await;
    world
        .source("ds", "leaving", json!({"sink": {"uri": leaving.url}}))
        .await;
    world
        .source("ds", "staying", json!({"sink": {"uri": staying.url}}))
        .await;
    let adapter = Adapter::start(&world, &[]);
    for name in ["leaving", "staying"] {
        world
            .wait_ready(&adapter, "ds", name, "True", reason::READY)
            .await;
    }
    world.prime("ds", &[&leaving, &staying]).await;
    until(&adapter, "the checkpoint of ds/leaving", || async {
        !world.checkpoints("ds", "leaving").await.is_empty()
    })
    .await;
    let uid = world.source_uid("ds", "leaving").await;
    for cm in world.checkpoints("ds", "leaving").await {
        let meta = &cm.metadata;
        assert!(
            meta.name
                .as_deref()
                .unwrap()
                .starts_with("ds.leaving-imagegate-checkpoint"),
            "{meta:?}"
        );
        // In the adapter's namespace, never the tenant's: the tenant can neither make nor edit
        // it (F-9), and the adapter needs no ConfigMap right in the tenant's namespace (F-6).
        assert_eq!(meta.namespace.as_deref(), Some("imagegate-system"));
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["app.kubernetes.io/managed-by"], "imagegate");
        assert_eq!(
            labels["app.kubernetes.io/component"],
            "imagestreamsource-checkpoint"
        );
        assert_eq!(labels["sources.imagegate.dev/uid"], uid);
        assert!(
            meta.owner_references.is_none(),
            "an owner must share the namespace"
        );
    }
    assert!(
        Api::<ConfigMap>::namespaced(world.emu.client(), "ds")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing written in the tenant's namespace"
    );

    // A stream of changes; the source is deleted in the middle of it.
    let (l0, s0) = (leaving.accepted().len(), staying.accepted().len());
    let mut made = Vec::new();
    for i in 0..10 {
        if i == 5 {
            world.delete_source("ds", "leaving").await;
            until(&adapter, "the checkpoint of ds/leaving deleted", || async {
                world.checkpoints("ds", "leaving").await.is_empty()
            })
            .await;
        }
        made.push(world.change("ds", "nb").await);
    }
    let _ = accepted(&adapter, &staying, s0 + made.len()).await;
    quiet(&[&leaving, &staying]).await;
    let after: Vec<String> = changes(&leaving.accepted()[l0..])
        .into_iter()
        .map(|(_, _, d)| d)
        .collect();
    assert!(
        after.iter().all(|d| made[..5].contains(d)),
        "nothing made after the delete reached the deleted source's sink: {after:?}"
    );
    let got: Vec<String> = changes(&staying.accepted()[s0..])
        .into_iter()
        .map(|(_, _, d)| d)
        .collect();
    assert_eq!(
        got, made,
        "the other source got every change once, in order"
    );
    assert!(world.checkpoints("ds", "leaving").await.is_empty());
    assert!(!world.checkpoints("ds", "staying").await.is_empty());
}

#[tokio::test]
async fn one_imagestream_watch_of_every_namespace_serves_all_and_each_source_lists_its_own() {
    let world = World::start().await;
    world
        .grant("ds", "watcher", "ml", &["get", "list", "watch"])
        .await;
    world.stream("ds", "warm").await;
    world.stream("ml", "warm").await;
    let sinks: Vec<Sink> = futures::future::join_all((0..6).map(|_| Sink::start())).await;
    // Three namespace sets: {ds} three times (s0, s1, s2), {ml} twice (s3 by name, s4 by
    // selector), {ds, ml} once (s5).
    let specs = [
        json!({}),
        json!({"namespaces": ["ds"]}),
        json!({"selector": {"matchLabels": {"app": "x"}}}),
        json!({"namespaces": ["ml"]}),
        json!({"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml"]}]}}),
        json!({"namespaces": ["ds", "ml"]}),
    ];
    for (i, (mut spec, sink)) in specs.into_iter().zip(&sinks).enumerate() {
        spec["sink"] = json!({"uri": sink.url});
        world.source("ds", &format!("s{i}"), spec).await;
    }
    let adapter = Adapter::start(&world, &[]);
    for i in 0..6 {
        world
            .wait_ready(&adapter, "ds", &format!("s{i}"), "True", reason::READY)
            .await;
    }
    let unlabelled: Vec<&Sink> = sinks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, s)| s)
        .collect();
    world
        .prime("ds", &[unlabelled[0], unlabelled[1], unlabelled[4]])
        .await;
    world
        .prime("ml", &[unlabelled[2], unlabelled[3], unlabelled[4]])
        .await;

    let asked = |verb: &'static str| {
        let emu = &world.emu;
        async move {
            emu.requests()
                .await
                .into_iter()
                .filter(|r| {
                    r.user == ADAPTER_USER && r.resource == "imagestreams" && r.verb == verb
                })
                .map(|r| (r.namespace, r.query))
                .collect::<Vec<(String, String)>>()
        }
    };
    let watches = asked("watch").await;
    // One watch, of every namespace, for the six sources and their three namespace sets.
    assert_eq!(
        watches
            .iter()
            .map(|(ns, _)| ns.as_str())
            .collect::<Vec<_>>(),
        [""],
        "one watch of every namespace, not one per source or per namespace set: {watches:#?}"
    );
    assert!(
        !watches[0].1.contains("labelSelector"),
        "the ImageStream selector is applied per source, not in the shared watch: {watches:#?}"
    );
    // The watch starts from the version of a list of one stream (it never reads them all);
    // each source lists its own namespaces, once: ds by s0, s1, s2 and s5, ml by s3, s4, s5.
    let lists = asked("list").await;
    let on = |ns: &str| lists.iter().filter(|(n, _)| n == ns).count();
    assert_eq!((on(""), on("ds"), on("ml")), (1, 4, 3), "{lists:#?}");
    let (_, everywhere) = lists.iter().find(|(n, _)| n.is_empty()).unwrap();
    assert!(everywhere.contains("limit=1"), "{everywhere}");
}
