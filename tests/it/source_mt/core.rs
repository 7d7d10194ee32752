//! The multi-tenant adapter's core guarantees: each source gets exactly its changes, once,
//! from one watch of every namespace, each source taking its own namespaces; sources come and go without a restart (a deleted
//! one's checkpoint goes with it); a restart delivers what changed meanwhile, once.

use imagegate::adapter::crd::ImageStreamSource;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use crate::support::eventually;
use crate::support::mt::{
    Adapter, B, C, checkpoint_of, cluster, data, delivered, exactly, serving, source,
};
use crate::support::sink::Sink;

#[tokio::test]
async fn two_sources_on_overlapping_namespaces_each_get_exactly_their_changes_once() {
    let emu = cluster().await;
    let (both, own) = (Sink::start().await, Sink::start().await);
    source(
        &emu,
        "ds",
        "both",
        &both.url,
        json!({"namespaces": ["ds", "ml"]}),
    )
    .await;
    source(&emu, "ml", "own", &own.url, json!({})).await;
    let adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "both").await;
    serving(&emu, "ml", "own").await;
    assert!(
        both.accepted().is_empty() && own.accepted().is_empty(),
        "a first start sends nothing"
    );

    emu.import("ds", "nb", "candidate", B).await;
    emu.import("ml", "nb", "candidate", C).await;
    exactly(&both, &["ds/nb:candidate", "ml/nb:candidate"]).await;
    exactly(&own, &["ml/nb:candidate"]).await;

    // Two namespace sets, one watch of every namespace.
    let metrics = adapter.metrics().await;
    assert!(
        metrics.contains("imagegate_source_multi_tenant_watches 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("imagegate_source_multi_tenant_sources{ready=\"True\"} 2"),
        "{metrics}"
    );
    eventually("the counters reach the statuses", || async {
        delivered(&emu, "ds", "both").await == 2 && delivered(&emu, "ml", "own").await == 1
    })
    .await;
    // Each source's checkpoint, in the adapter's namespace, labelled with the source.
    for (ns, name) in [("ds", "both"), ("ml", "own")] {
        let shards = checkpoint_of(&emu, ns, name).await;
        assert!(!shards.is_empty(), "{ns}/{name} has a checkpoint");
        for cm in shards {
            assert_eq!(cm.metadata.namespace.as_deref(), Some("imagegate-system"));
            let labels = cm.metadata.labels.unwrap();
            assert_eq!(labels["app.kubernetes.io/managed-by"], "imagegate");
            assert_eq!(labels["sources.imagegate.dev/namespace"], ns);
        }
    }
}

#[tokio::test]
async fn a_source_added_while_running_delivers_and_a_deleted_one_stops_and_loses_its_checkpoint() {
    let emu = cluster().await;
    let (first, later) = (Sink::start().await, Sink::start().await);
    source(&emu, "ds", "first", &first.url, json!({})).await;
    let adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "first").await;

    // It joins the running watch (listing its namespace), and starts as a first start.
    source(
        &emu,
        "ds",
        "later",
        &later.url,
        json!({"tags": ["candidate"]}),
    )
    .await;
    serving(&emu, "ds", "later").await;
    emu.import("ds", "nb", "candidate", B).await;
    exactly(&first, &["ds/nb:candidate"]).await;
    exactly(&later, &["ds/nb:candidate"]).await;
    assert!(
        adapter
            .metrics()
            .await
            .contains("imagegate_source_multi_tenant_watches 1")
    );

    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), "ds");
    api.delete("later", &DeleteParams::default()).await.unwrap();
    eventually("the deleted source's checkpoint is gone", || async {
        checkpoint_of(&emu, "ds", "later").await.is_empty()
    })
    .await;
    emu.import("ds", "nb", "candidate", C).await;
    exactly(&first, &["ds/nb:candidate", "ds/nb:candidate"]).await;
    assert_eq!(later.accepted().len(), 1, "nothing after its deletion");
    assert!(!checkpoint_of(&emu, "ds", "first").await.is_empty());
}

#[tokio::test]
async fn a_restart_delivers_the_changes_made_meanwhile_to_every_source_once() {
    let emu = cluster().await;
    let (both, own) = (Sink::start().await, Sink::start().await);
    source(
        &emu,
        "ds",
        "both",
        &both.url,
        json!({"namespaces": ["ds", "ml"]}),
    )
    .await;
    source(&emu, "ml", "own", &own.url, json!({})).await;
    let mut adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "both").await;
    serving(&emu, "ml", "own").await;
    emu.import("ml", "nb", "candidate", B).await;
    exactly(&both, &["ml/nb:candidate"]).await;
    exactly(&own, &["ml/nb:candidate"]).await;

    adapter.stop().await;
    emu.import("ds", "nb", "candidate", B).await;
    emu.import("ml", "nb", "candidate", C).await;
    adapter.restart();
    adapter.ready().await;
    exactly(
        &both,
        &["ds/nb:candidate", "ml/nb:candidate", "ml/nb:candidate"],
    )
    .await;
    exactly(&own, &["ml/nb:candidate", "ml/nb:candidate"]).await;
    let digests: Vec<Value> = own
        .accepted()
        .iter()
        .map(|e| data(e)["digest"].clone())
        .collect();
    assert_eq!(digests, [json!(B), json!(C)], "{}", adapter.log());
}

#[test]
fn the_single_source_flags_are_refused_with_multi_tenant() {
    for flags in [
        &["--sink", "http://x"][..],
        &["--namespace", "ds"],
        &["--mode", "resource"],
        &["--checkpoint-prefix", "x"],
        &["--dead-letter-sink", "http://x"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["source", "--multi-tenant"])
            .args(flags)
            .env_remove("K_SINK")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        let flag = flags[0];
        assert!(
            stderr.contains(&format!(
                "the argument '--multi-tenant' cannot be used with '{flag}"
            )),
            "{flags:?}: {stderr}"
        );
    }
}

#[test]
fn without_multi_tenant_a_sink_is_still_required() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .arg("source")
        .env_remove("K_SINK")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--sink (or K_SINK) is required"),
        "{stderr}"
    );
}
