//! `imagegate source --multi-tenant` as a separate process, and the emulator set up for it:
//! the ImageStreamSource CRD, namespaces, and service accounts allowed to read ImageStreams.

use std::process::Command;
use std::time::Duration;

use cloudevents::AttributesReader;
use imagegate::adapter::crd::{self, ImageStreamSource};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use super::sink::Sink;
use super::upstream::{KNATIVE_EVENTING, TEKTON_TRIGGERS};
use super::{EmulatorServer, Process, free_port};

/// A running multi-tenant adapter (killed on drop; its log printed if the test fails).
pub struct Adapter {
    process: Process,
    /// Its admin port.
    pub admin: u16,
}

impl Adapter {
    /// Starts the adapter as the emulator's admin, with `extra` flags.
    pub fn start(emu: &EmulatorServer, extra: &[&str]) -> Adapter {
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["source", "--multi-tenant"])
            .args(extra)
            // The tests' sinks listen on this machine's loopback, which a tenant's sink may not
            // name unless the operator allows it.
            .args(["--allow-sink-host", "127.0.0.1"])
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .env("KUBECONFIG", &emu.kubeconfig)
            .env("RUST_LOG", "info");
        Adapter {
            process: Process::start(
                format!("imagegate source --multi-tenant ({admin})"),
                command,
            ),
            admin,
        }
    }

    /// Waits until /readyz says the sources were listed.
    pub async fn ready(&self) {
        super::wait_ready(self.admin).await;
    }

    /// A graceful stop (SIGTERM): every source's checkpoint is flushed.
    pub async fn stop(&mut self) {
        self.process.stop(Duration::from_secs(20)).await;
    }

    /// Starts it again after [`Adapter::stop`].
    pub fn restart(&mut self) {
        self.process.restart();
    }

    /// Its `/metrics`.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.admin))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// The CustomResourceDefinitions of the emulated API.
fn crds(emu: &EmulatorServer) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    Api::all_with(emu.client(), &resource)
}

/// Installs our ImageStreamSource CRD, as `imagegate crds` generates it.
pub async fn install_source_crd(emu: &EmulatorServer) {
    let ours: DynamicObject =
        serde_json::from_value(serde_json::to_value(crd::crd()).unwrap()).unwrap();
    crds(emu)
        .create(&PostParams::default(), &ours)
        .await
        .unwrap();
}

/// Installs the sink kinds' released CRDs from the module cache: Knative's Broker and Tekton
/// Triggers' EventListener.
pub async fn install_sink_crds(emu: &EmulatorServer) {
    for (what, text) in [
        (
            "Broker",
            KNATIVE_EVENTING.read("config/core/resources/broker.yaml"),
        ),
        (
            "EventListener",
            TEKTON_TRIGGERS.read("config/300-eventlistener.yaml"),
        ),
    ] {
        let crd: DynamicObject = serde_norway::from_str(&text)
            .unwrap_or_else(|e| panic!("the released {what} CRD: {e}"));
        crds(emu)
            .create(&PostParams::default(), &crd)
            .await
            .unwrap_or_else(|e| panic!("the emulator creates the {what} CRD: {e}"));
    }
}

/// Installs the ImageStreamSource CRD and the namespaces `namespaces`.
pub async fn setup(emu: &EmulatorServer, namespaces: &[&str]) {
    install_source_crd(emu).await;
    // The adapter's own namespace (config/100), where the checkpoints live.
    for ns in namespaces.iter().chain(&["imagegate-system"]) {
        emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .await;
    }
}

/// Lets the service account `sa_ns/default` get, list and watch ImageStreams in `ns`.
pub async fn grant_read(emu: &EmulatorServer, sa_ns: &str, ns: &str) {
    emu.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{sa_ns}-reads-streams"), "namespace": ns},
        "rules": [{"apiGroups": ["image.openshift.io"], "resources": ["imagestreams"], "verbs": ["get", "list", "watch"]}]
    }))
    .await;
    emu.seed(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{sa_ns}-reads-streams"), "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{sa_ns}-reads-streams")},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": sa_ns}]
    }))
    .await;
}

/// The checkpoint ConfigMaps of the source `ns/name`: in the adapter's namespace
/// (`imagegate-system`), never the tenant's, found by their labels.
pub async fn checkpoint_of(emu: &EmulatorServer, ns: &str, name: &str) -> Vec<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(emu.client(), "imagegate-system");
    let selector = format!(
        "sources.imagegate.dev/namespace={ns},sources.imagegate.dev/imagestreamsource={name}"
    );
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

/// Waits until the source `ns/name` has listed its streams and written its checkpoint's
/// marker: from then on it delivers every change.
pub async fn serving(emu: &EmulatorServer, ns: &str, name: &str) {
    let marker = format!("{ns}.{name}-imagegate-checkpoint");
    super::eventually(
        &format!("{ns}/{name} writes its checkpoint marker"),
        || async {
            checkpoint_of(emu, ns, name)
                .await
                .iter()
                .any(|cm| cm.metadata.name.as_deref() == Some(marker.as_str()))
        },
    )
    .await;
}

pub const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
pub const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
pub const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// Namespaces `ds` and `ml`, each with the stream `nb` (candidate at A); the default service
/// accounts of both may read both.
pub async fn cluster() -> EmulatorServer {
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
pub async fn source(emu: &EmulatorServer, ns: &str, name: &str, sink: &str, spec: Value) {
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
pub fn subjects(sink: &Sink) -> Vec<String> {
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
pub async fn exactly(sink: &Sink, want: &[&str]) {
    sink.wait_accepted(want.len()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(subjects(sink), want);
}

/// The data of `e`, as JSON.
pub fn data(e: &cloudevents::Event) -> Value {
    match e.data() {
        Some(cloudevents::Data::Json(v)) => v.clone(),
        Some(cloudevents::Data::Binary(b)) => serde_json::from_slice(b).unwrap(),
        Some(cloudevents::Data::String(s)) => serde_json::from_str(s).unwrap(),
        None => Value::Null,
    }
}

/// `status.deliveries.delivered` of the source `ns/name`.
pub async fn delivered(emu: &EmulatorServer, ns: &str, name: &str) -> i64 {
    let api: Api<ImageStreamSource> = Api::namespaced(emu.client(), ns);
    let s = api.get(name).await.unwrap();
    s.status
        .and_then(|s| s.deliveries)
        .map_or(0, |d| d.delivered)
}
