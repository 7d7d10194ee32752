//! What the multi-tenant end-to-end tests share: an emulator that serves our CRD, Knative's
//! released Broker CRD and Tekton Triggers' released EventListener CRD (from Go's module cache),
//! three team namespaces and the adapter's own; sinks that are real CloudEvents receivers, a
//! Broker's or EventListener's status address pointing at one; and the real `imagegate source
//! --multi-tenant` binary as a child process, logged in as the ServiceAccount `config/` runs it
//! as.
//!
//! A `v1/Service` sink resolves to its cluster-local URL (`http://NAME.NS.svc.cluster.local`),
//! which no test machine resolves. The adapter is started with `HTTP_PROXY` pointing at a test
//! sink (`World::cluster`), as a pod behind an egress proxy would be: every event to a
//! cluster-local name arrives there with its `Host` header, so a test sees which Service the
//! adapter addressed. `NO_PROXY` keeps the emulator and the local sinks direct.

use std::process::Command;
use std::time::Duration;

use imagegate::adapter::crd::status::condition;
use imagegate::adapter::crd::{ImageStreamSource, ImageStreamSourceStatus};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::support::mt;
use crate::support::sink::Sink;
use crate::support::{EmulatorServer, Process, free_port};

/// The ServiceAccount user `config/` runs the multi-tenant adapter as.
pub const ADAPTER_USER: &str =
    "system:serviceaccount:imagegate-system:imagegate-source-multi-tenant";

/// How long a test waits for the adapter: longer than its 30 s resync (the safety net; the
/// tests that a sink object's change is followed at once assert their own, shorter, bound).
pub const WAIT: Duration = Duration::from_secs(45);

/// The digest number `n` (`sha256:000…n`).
pub fn digest(n: u64) -> String {
    format!("sha256:{n:064x}")
}

/// An extension attribute of `e` as text.
pub fn ext(e: &cloudevents::Event, name: &str) -> Option<String> {
    e.extension(name).map(|v| v.to_string())
}

/// `(namespace, imagestream, digest)` of each event, in mode imagestreamtag.
pub fn changes(events: &[cloudevents::Event]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            (
                ext(e, "namespace").unwrap_or_default(),
                ext(e, "imagestream").unwrap_or_default(),
                ext(e, "imagedigest").unwrap_or_default(),
            )
        })
        .collect()
}

/// The emulated cluster of a test.
pub struct World {
    /// The emulator.
    pub emu: EmulatorServer,
    /// Where the adapter's kubeconfig is written.
    pub dir: tempfile::TempDir,
    /// The cluster network: every request to a cluster-local name arrives here.
    pub cluster: Sink,
    next: std::sync::atomic::AtomicU64,
}

impl World {
    /// Namespaces `ds` and `ml` (team=a), `ops` (team=b) and `imagegate-system`; the three
    /// CRDs; the service account `<ns>/watcher` of each team namespace allowed to read
    /// ImageStreams in its own namespace.
    pub async fn start() -> World {
        let emu = EmulatorServer::start().await;
        for (ns, team) in [
            ("ds", "a"),
            ("ml", "a"),
            ("ops", "b"),
            ("imagegate-system", "platform"),
        ] {
            emu.seed(json!({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": ns, "labels": {"team": team}}}))
                .await;
        }
        mt::install_source_crd(&emu).await;
        mt::install_sink_crds(&emu).await;
        let world = World {
            emu,
            dir: tempfile::tempdir().unwrap(),
            cluster: Sink::start().await,
            next: std::sync::atomic::AtomicU64::new(1),
        };
        for ns in ["ds", "ml", "ops"] {
            world
                .grant(ns, "watcher", ns, &["get", "list", "watch"])
                .await;
        }
        world
    }

    /// A fresh digest, never used before in this test.
    pub fn fresh(&self) -> String {
        digest(self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// Lets the service account `sa_ns/sa` do `verbs` on ImageStreams in `ns`.
    pub async fn grant(&self, sa_ns: &str, sa: &str, ns: &str, verbs: &[&str]) {
        let name = format!("read-streams-{sa_ns}-{sa}");
        self.emu
            .seed(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": ns},
                "rules": [{"apiGroups": ["image.openshift.io"], "resources": ["imagestreams"], "verbs": verbs}]
            }))
            .await;
        self.emu
            .seed(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": ns},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]
            }))
            .await;
    }

    /// The ImageStream `ns/name` with a scheduled tag `candidate`, imported once.
    pub async fn stream(&self, ns: &str, name: &str) {
        self.emu
            .seed(json!({
                "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"tags": [{"name": "candidate",
                                   "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:latest")},
                                   "importPolicy": {"scheduled": true}}]}
            }))
            .await;
        self.emu.import(ns, name, "candidate", &self.fresh()).await;
    }

    /// A new import into `ns/name:candidate`; its digest.
    pub async fn change(&self, ns: &str, name: &str) -> String {
        let d = self.fresh();
        self.emu.import(ns, name, "candidate", &d).await;
        d
    }

    /// Creates (or updates) `kind` `ns/name` and writes `status` as its controller would.
    #[allow(clippy::too_many_arguments)]
    pub async fn addressable(
        &self,
        api_version: &str,
        kind: &str,
        plural: &str,
        ns: &str,
        name: &str,
        spec: Value,
        status: Value,
    ) {
        let (group, version) = api_version.split_once('/').unwrap();
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(self.emu.client(), ns, &resource);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec
        }))
        .unwrap();
        if api.get_opt(name).await.unwrap().is_none() {
            api.create(&PostParams::default(), &object).await.unwrap();
        }
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap();
    }

    /// The Broker `ns/name`, Ready, its address `url`.
    pub async fn broker(&self, ns: &str, name: &str, url: &str) {
        self.addressable(
            "eventing.knative.dev/v1",
            "Broker",
            "brokers",
            ns,
            name,
            json!({}),
            json!({"address": {"name": "http", "url": url}, "addresses": [{"name": "http", "url": url}],
                   "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .await;
    }

    /// Deletes the Broker `ns/name`.
    pub async fn delete_broker(&self, ns: &str, name: &str) {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("eventing.knative.dev", "v1", "Broker"),
            "brokers",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(self.emu.client(), ns, &resource);
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }

    /// The EventListener `ns/name`, its address `url`.
    pub async fn listener(&self, ns: &str, name: &str, url: &str) {
        self.addressable(
            "triggers.tekton.dev/v1beta1",
            "EventListener",
            "eventlisteners",
            ns,
            name,
            json!({"serviceAccountName": "imagegate-triggers", "triggers": []}),
            json!({"address": {"url": url}, "configuration": {"generatedName": format!("el-{name}")}}),
        )
        .await;
    }

    /// The core Service `ns/name` (port 80).
    pub async fn service(&self, ns: &str, name: &str) {
        self.emu
            .seed(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
                         "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}))
            .await;
    }

    /// Creates the ImageStreamSource `ns/name` with `spec` (the service account `watcher`
    /// unless it names one).
    pub async fn source(&self, ns: &str, name: &str, mut spec: Value) {
        spec.as_object_mut()
            .unwrap()
            .entry("serviceAccountName")
            .or_insert(json!("watcher"));
        let api: Api<ImageStreamSource> = Api::namespaced(self.emu.client(), ns);
        let source = ImageStreamSource::new(name, serde_json::from_value(spec).unwrap());
        api.create(&PostParams::default(), &source).await.unwrap();
    }

    /// Deletes the ImageStreamSource `ns/name`.
    pub async fn delete_source(&self, ns: &str, name: &str) {
        let api: Api<ImageStreamSource> = Api::namespaced(self.emu.client(), ns);
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }

    /// The uid of the ImageStreamSource `ns/name`.
    pub async fn source_uid(&self, ns: &str, name: &str) -> String {
        let api: Api<ImageStreamSource> = Api::namespaced(self.emu.client(), ns);
        api.get(name).await.unwrap().metadata.uid.unwrap()
    }

    /// The status of `ns/name` as last written.
    pub async fn status(&self, ns: &str, name: &str) -> ImageStreamSourceStatus {
        let api: Api<ImageStreamSource> = Api::namespaced(self.emu.client(), ns);
        api.get(name).await.unwrap().status.unwrap_or_default()
    }

    /// Waits until `ns/name`'s `Ready` has `status` and `reason`; its status then.
    pub async fn wait_ready(
        &self,
        adapter: &Adapter,
        ns: &str,
        name: &str,
        status: &str,
        reason: &str,
    ) -> ImageStreamSourceStatus {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let s = self.status(ns, name).await;
            if cond(&s, condition::READY).is_some_and(|c| c.0 == status && c.1 == reason) {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{ns}/{name} never became Ready={status} ({reason}): {s:?}\nthe adapter logged:\n{}",
                adapter.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The checkpoint ConfigMaps of the source `ns/name`, by their labels, in the adapter's
    /// namespace.
    pub async fn checkpoints(&self, ns: &str, name: &str) -> Vec<ConfigMap> {
        mt::checkpoint_of(&self.emu, ns, name).await
    }

    /// Imports into `ns/warm` until every sink received an event about it, then waits until no
    /// more arrive for half a second: from then on, every source behind `sinks` is live, and a
    /// change is a change (not part of the state a first start records silently).
    pub async fn prime(&self, ns: &str, sinks: &[&Sink]) {
        let about_warm = |s: &Sink| {
            s.accepted().iter().any(|e| {
                ext(e, "namespace").as_deref() == Some(ns)
                    && (ext(e, "imagestream").as_deref() == Some("warm")
                        || ext(e, "name").as_deref() == Some("warm"))
            })
        };
        let deadline = std::time::Instant::now() + WAIT;
        while !sinks.iter().all(|s| about_warm(s)) {
            assert!(
                std::time::Instant::now() < deadline,
                "the sources behind {:?} never delivered a change of {ns}/warm",
                sinks.iter().map(|s| &s.url).collect::<Vec<_>>()
            );
            self.change(ns, "warm").await;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        quiet(sinks).await;
    }
}

/// Waits until none of `sinks` received anything for 500 ms.
pub async fn quiet(sinks: &[&Sink]) {
    let count = || sinks.iter().map(|s| s.received().len()).sum::<usize>();
    let mut last = count();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = count();
        if now == last {
            return;
        }
        last = now;
    }
}

/// `(status, reason, message)` of the condition `ty`.
pub fn cond(s: &ImageStreamSourceStatus, ty: &str) -> Option<(String, String, String)> {
    s.conditions.iter().find(|c| c.r#type == ty).map(|c| {
        (
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

/// A running `imagegate source --multi-tenant` (killed on drop; its log printed if the test
/// fails).
pub struct Adapter {
    process: Process,
    /// Its admin port.
    pub admin: u16,
}

impl Adapter {
    /// Starts the adapter as [`ADAPTER_USER`], its Lease and state in `imagegate-system`, with
    /// `extra` arguments.
    pub fn start(world: &World, extra: &[&str]) -> Adapter {
        Adapter::replica(
            world,
            ADAPTER_USER,
            "imagegate-source-multi-tenant-0",
            extra,
        )
    }

    /// Starts one replica: the pod `pod` (its identity in the Lease), logged in as `user`.
    pub fn replica(world: &World, user: &str, pod: &str, extra: &[&str]) -> Adapter {
        let kubeconfig = world.dir.path().join(format!("kubeconfig-{pod}"));
        world.emu.write_kubeconfig(&kubeconfig, user);
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args([
                "source",
                "--multi-tenant",
                "--pod-namespace",
                "imagegate-system",
                "--pod-name",
                pod,
            ])
            .args(extra)
            // The tests' sinks listen on this machine's loopback, which a tenant's sink may not
            // name unless the operator allows it.
            .args(["--allow-sink-host", "127.0.0.1"])
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .envs(proxy_env(world));
        Adapter {
            process: Process::start(
                format!("imagegate source --multi-tenant ({pod}, admin port {admin})"),
                command,
            ),
            admin,
        }
    }

    /// The adapter as `config/multi-tenant/400-deployment.yaml` runs it: the container's
    /// args and env (the downward API resolved for the pod `imagegate-source-multi-tenant-0` in
    /// the Deployment's namespace), the admin server on a free port, logged in as
    /// [`ADAPTER_USER`], behind the test's cluster network as [`Adapter::start`].
    pub fn from_deployment(world: &World) -> Adapter {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/multi-tenant/400-deployment.yaml"
        );
        let text = std::fs::read_to_string(file).unwrap();
        let deployment: Value = serde_norway::Deserializer::from_str(&text)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .find(|v: &Value| v["kind"] == "Deployment")
            .expect("403 has a Deployment");
        let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<&str> = (container["args"].as_array().unwrap().iter())
            .map(|a| a.as_str().unwrap())
            .collect();
        let kubeconfig = world.dir.path().join("adapter-kubeconfig");
        world.emu.write_kubeconfig(&kubeconfig, ADAPTER_USER);
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(args)
            .args(["--allow-sink-host", "127.0.0.1"])
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .env_clear();
        for e in container["env"].as_array().unwrap() {
            let key = e["name"].as_str().unwrap();
            let value = match (
                &e["value"],
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
            ) {
                (Value::String(v), _) => v.clone(),
                (_, Some("metadata.namespace")) => namespace.to_string(),
                (_, Some("metadata.name")) => "imagegate-source-multi-tenant-0".to_string(),
                (_, Some("spec.serviceAccountName")) => "imagegate-source-multi-tenant".to_string(),
                _ => panic!("403: env {key} comes from something this test cannot resolve"),
            };
            command.env(key, value);
        }
        command
            .env("KUBECONFIG", &kubeconfig)
            .envs(proxy_env(world));
        Adapter {
            process: Process::start(
                "imagegate source --multi-tenant (config/multi-tenant/400)",
                command,
            ),
            admin,
        }
    }

    /// Waits until /readyz answers 200.
    pub async fn ready(&self) {
        crate::support::wait_ready(self.admin).await;
    }

    /// A graceful stop (SIGTERM).
    pub async fn stop(&mut self) {
        self.process.stop(Duration::from_secs(20)).await;
    }

    /// `kill -9`: no flush, no release of the Lease.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts it again after [`Adapter::stop`] or [`Adapter::kill`].
    pub fn restart(&mut self) {
        self.process.restart();
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// The value of the unlabelled series `name` on its `/metrics` (None: not exported).
    pub async fn gauge(&self, name: &str) -> Option<f64> {
        let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", self.admin))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let prefix = format!("{name} ");
        (text.lines())
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
    }
}

/// The environment that sends every request to a cluster-local name through `world.cluster`.
fn proxy_env(world: &World) -> Vec<(&'static str, String)> {
    let proxy = world.cluster.url.trim_end_matches('/').to_string();
    let direct = "127.0.0.1,localhost".to_string();
    vec![
        ("HTTP_PROXY", proxy.clone()),
        ("http_proxy", proxy),
        ("NO_PROXY", direct.clone()),
        ("no_proxy", direct),
    ]
}

/// Waits until `sink` accepted `n` events; fails with the adapter's log otherwise.
pub async fn accepted(adapter: &Adapter, sink: &Sink, n: usize) -> Vec<cloudevents::Event> {
    let mut got = Vec::new();
    let found = tokio::time::timeout(WAIT, async {
        loop {
            got = sink.accepted();
            if got.len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "only {} of {n} events reached {}: {:?}\nthe adapter logged:\n{}",
        got.len(),
        sink.url,
        changes(&got),
        adapter.log()
    );
    got
}

/// Waits until `check` holds, failing with the adapter's log after [`WAIT`].
pub async fn until<F, Fut>(adapter: &Adapter, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + WAIT;
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; the adapter logged:\n{}",
            adapter.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
