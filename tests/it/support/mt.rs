//! `imagegate source --multi-tenant` as a separate process, and the emulator set up for it:
//! the ImageStreamSource CRD, namespaces, and service accounts allowed to read ImageStreams.

use std::process::Command;
use std::time::Duration;

use imagegate::source::crd;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;

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

/// Installs the ImageStreamSource CRD and the namespaces `namespaces`.
pub async fn setup(emu: &EmulatorServer, namespaces: &[&str]) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        "customresourcedefinitions",
    );
    let crds: Api<DynamicObject> = Api::all_with(emu.client(), &resource);
    let ours: DynamicObject =
        serde_json::from_value(serde_json::to_value(crd::crd()).unwrap()).unwrap();
    crds.create(&PostParams::default(), &ours).await.unwrap();
    for ns in namespaces {
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

/// The names of the checkpoint ConfigMaps of the source `ns/name`.
pub async fn checkpoint_of(emu: &EmulatorServer, ns: &str, name: &str) -> Vec<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(emu.client(), ns);
    let selector = format!("sources.imagegate.dev/imagestreamsource={name}");
    api.list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items
}

/// Waits until the source `ns/name` has listed its streams and written its checkpoint's
/// marker: from then on it delivers every change.
pub async fn serving(emu: &EmulatorServer, ns: &str, name: &str) {
    let marker = format!("{name}-imagegate-checkpoint");
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
