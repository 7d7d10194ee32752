//! Where a source's events go, and from where: they wait while its sink does not resolve and
//! flow once it does; a namespace its service account may not read sends it nothing.

use std::time::Duration;

use imagegate::adapter::crd::ImageStreamSource;
use imagegate::adapter::crd::status::condition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

use crate::support::mt::{Adapter, B, C, cluster, exactly, grant_read, serving, source};
use crate::support::sink::Sink;
use crate::support::upstream::KNATIVE_EVENTING;
use crate::support::{EmulatorServer, eventually};

async fn condition_of(emu: &EmulatorServer, ns: &str, name: &str, ty: &str) -> Option<String> {
    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), ns);
    let s = api.get(name).await.ok()?;
    s.status?
        .conditions
        .into_iter()
        .find(|c| c.r#type == ty)
        .map(|c| format!("{} {}", c.status, c.reason.unwrap_or_default()))
}

/// The Broker `ds/default`, addressed at `url`.
async fn broker(emu: &EmulatorServer, url: &str) {
    let brokers = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("eventing.knative.dev", "v1", "Broker"),
        "brokers",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(emu.client(), "ds", &brokers);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "metadata": {"name": "default"}, "spec": {}
    }))
    .unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    let status = json!({"status": {"address": {"name": "http", "url": url},
        "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status("default", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

async fn install_broker_crd(emu: &EmulatorServer) {
    let crds = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let api: Api<DynamicObject> = Api::all_with(emu.client(), &crds);
    let text = KNATIVE_EVENTING.read("config/core/resources/broker.yaml");
    let crd: DynamicObject = serde_norway::from_str(&text).expect("the released Broker CRD");
    api.create(&PostParams::default(), &crd).await.unwrap();
}

#[tokio::test]
async fn events_wait_while_the_sink_does_not_resolve_and_flow_once_it_does() {
    let emu = cluster().await;
    install_broker_crd(&emu).await;
    let sink = Sink::start().await;
    let to_broker = json!({"sink": {"uri": null, "ref": {"apiVersion": "eventing.knative.dev/v1", "kind": "Broker", "name": "default"}}});
    source(&emu, "ds", "team", "http://unused", to_broker).await;
    let adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "team").await;
    eventually("SinkProvided=False SinkNotFound", || async {
        condition_of(&emu, "ds", "team", condition::SINK_PROVIDED)
            .await
            .as_deref()
            == Some("False SinkNotFound")
    })
    .await;
    emu.import("ds", "nb", "candidate", B).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(sink.received().is_empty());

    // The Broker appears: the sink watch has the source observed at once (not at the resync,
    // every 30 s): the change that waited arrives, once.
    let created = std::time::Instant::now();
    broker(&emu, &sink.url).await;
    sink.wait_accepted(1).await;
    assert!(
        created.elapsed() < Duration::from_secs(5),
        "the Broker's creation was seen after {:?}: not by the sink watch",
        created.elapsed()
    );
    exactly(&sink, &["ds/nb:candidate"]).await;
    assert_eq!(
        condition_of(&emu, "ds", "team", condition::READY)
            .await
            .as_deref(),
        Some("True Ready")
    );

    // A change of the spec restarts the source's flow with it: the next event carries the
    // override.
    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), "ds");
    let bump = json!({"spec": {"ceOverrides": {"extensions": {"team": "ds"}}}});
    api.patch("team", &PatchParams::default(), &Patch::Merge(&bump))
        .await
        .unwrap();
    eventually("the new generation observed", || async {
        let s = api.get("team").await.unwrap();
        s.status.and_then(|s| s.observed_generation) == s.metadata.generation
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    emu.import("ds", "nb", "candidate", C).await;
    sink.wait_accepted(2).await;
    let e = &sink.accepted()[1];
    assert_eq!(
        e.extension("team").map(|v| v.to_string()).as_deref(),
        Some("ds")
    );
}

#[tokio::test]
async fn a_namespace_the_service_account_may_not_read_sends_nothing() {
    let emu = cluster().await;
    emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ops"}}))
        .await;
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ops"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}}]}
    }))
    .await;
    // ml's account may read ds, ml and ops; ds's account may not read ops.
    grant_read(&emu, "ml", "ops").await;
    let (denied, allowed) = (Sink::start().await, Sink::start().await);
    let two = json!({"namespaces": ["ds", "ops"]});
    source(&emu, "ds", "limited", &denied.url, two).await;
    source(
        &emu,
        "ml",
        "full",
        &allowed.url,
        json!({"namespaces": ["ds", "ops"]}),
    )
    .await;
    let adapter = Adapter::start(&emu, &[]);
    adapter.ready().await;
    serving(&emu, "ds", "limited").await;
    serving(&emu, "ml", "full").await;
    eventually("SufficientPermissions=False", || async {
        condition_of(&emu, "ds", "limited", condition::SUFFICIENT_PERMISSIONS)
            .await
            .as_deref()
            == Some("False InsufficientPermissions")
    })
    .await;
    emu.import("ops", "nb", "candidate", B).await;
    emu.import("ds", "nb", "candidate", C).await;
    exactly(&allowed, &["ds/nb:candidate", "ops/nb:candidate"]).await;
    exactly(&denied, &["ds/nb:candidate"]).await;
    // Two namespace sets ([ds] for the limited source, [ds, ops] for the other), one watch of
    // every namespace; the limited source never listed ops.
    assert!(
        adapter
            .metrics()
            .await
            .contains("imagegate_source_multi_tenant_watches 1")
    );
    let lists_of_ops = emu
        .requests()
        .await
        .into_iter()
        .filter(|r| r.resource == "imagestreams" && r.verb == "list" && r.namespace == "ops")
        .count();
    assert_eq!(
        lists_of_ops, 1,
        "only the source allowed to read ops lists it"
    );
}
