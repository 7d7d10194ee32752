//! The multi-tenant adapter's core guarantees: each source gets exactly its changes, once,
//! from watches shared by namespace set; sources come and go without a restart (a deleted
//! one's checkpoint goes with it); a restart delivers what changed meanwhile, once.

use std::time::Duration;

use cloudevents::AttributesReader;
use imagegate::source::crd::ImageStreamSource;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::support::mt::{Adapter, checkpoint_of, grant_read, serving, setup};
use crate::support::sink::Sink;
use crate::support::{EmulatorServer, eventually};

const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// Namespaces `ds` and `ml`, each with the stream `nb` (candidate at A); the default service
/// accounts of both may read both.
async fn cluster() -> EmulatorServer {
    let emu = EmulatorServer::start().await;
    setup(&emu, &["ds", "ml"]).await;
    for ns in ["ds", "ml"] {
        emu.seed(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": ns},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}}]}
        }))
        .await;
        emu.import(ns, "nb", "candidate", A).await;
        for reader in ["ds", "ml"] {
            grant_read(&emu, reader, ns).await;
        }
    }
    emu
}

/// Creates the source `ns/name` sending to `sink`, with `spec` merged in.
async fn source(emu: &EmulatorServer, ns: &str, name: &str, sink: &str, spec: Value) {
    let mut object = json!({
        "apiVersion": "sources.imagegate.dev/v1alpha1", "kind": "ImageStreamSource",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"sink": {"uri": sink}}
    });
    json_patch::merge(&mut object["spec"], &spec);
    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

/// The subjects (`namespace/stream:tag`) of what `sink` accepted, sorted.
fn subjects(sink: &Sink) -> Vec<String> {
    let mut out: Vec<String> = sink
        .accepted()
        .iter()
        .map(|e| {
            let ns = e.source().to_string();
            let ns = ns.split('/').nth(5).unwrap_or_default().to_owned();
            format!("{ns}/{}", e.subject().unwrap_or_default())
        })
        .collect();
    out.sort();
    out
}

/// Waits until `sink` holds `want`, then a little longer to see that nothing more comes.
async fn exactly(sink: &Sink, want: &[&str]) {
    sink.wait_accepted(want.len()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(subjects(sink), want);
}

fn data(e: &cloudevents::Event) -> Value {
    match e.data() {
        Some(cloudevents::Data::Json(v)) => v.clone(),
        Some(cloudevents::Data::Binary(b)) => serde_json::from_slice(b).unwrap(),
        Some(cloudevents::Data::String(s)) => serde_json::from_str(s).unwrap(),
        None => Value::Null,
    }
}

async fn delivered(emu: &EmulatorServer, ns: &str, name: &str) -> i64 {
    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), ns);
    let s = api.get(name).await.unwrap();
    s.status
        .and_then(|s| s.deliveries)
        .map_or(0, |d| d.delivered)
}

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

    let metrics = adapter.metrics().await;
    assert!(
        metrics.contains("imagegate_source_multi_tenant_watches 2"),
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
    let marker = checkpoint_of(&emu, "ds", "both").await;
    let owner = &marker[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ImageStreamSource", "both", Some(true))
    );
    assert_eq!(
        marker[0].metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
        "imagegate"
    );
}

#[tokio::test]
async fn a_source_added_while_running_delivers_and_a_deleted_one_stops_and_loses_its_checkpoint() {
    let emu = cluster().await;
    let (first, later) = (Sink::start().await, Sink::start().await);
    source(&emu, "ds", "first", &first.url, json!({})).await;
    let adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "first").await;

    // Same namespace: it joins the running watch, and starts as a first start.
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
