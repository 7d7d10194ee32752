//! What the integration tests share. Here: the API emulator for the end-to-end tests, on a
//! thread and a runtime of its own and reached only over HTTP (the real binaries under test talk
//! to it through a kubeconfig, and the tests drive it over its control API exactly as another
//! program, or a user with curl, would), and small waiting helpers. Beside it: the programs as
//! child processes whose log is printed when a test fails ([`process`]), `imagegate source` as a
//! Deployment runs it ([`source`]), a CloudEvents sink ([`sink`]), the RBAC checker ([`rbac`]), the
//! released upstream manifests from Go's module cache ([`upstream`]), the controller under test
//! ([`controller`]) and what Tekton's pipeline controller writes ([`tekton`]).

pub mod chains;
pub mod controller;
pub mod mt;
pub mod odh;
pub mod process;
pub mod rbac;
pub mod registry;
pub mod sigstore;
pub mod sink;
pub mod source;
pub mod tekton;
pub mod token_server;
pub mod upstream;

pub use process::Process;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use imagegate_emulator::control::{Fault, RequestRecord};
use imagegate_emulator::{Config, Emulator};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A free TCP port on 127.0.0.1 (for the admin servers of the programs under test).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `check` every 50 ms until it holds; fails naming `what` after 30 s.
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    within(what, Duration::from_secs(30), check).await;
}

/// Waits until `check` holds, failing the test after `limit` (a bound the test asserts).
pub async fn within<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `GET 127.0.0.1:{admin}/readyz` answers 200 (a program's first list is done).
pub async fn wait_ready(admin: u16) {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    if let Err(e) =
        imagegate_demo::ready::admin_ready(addr, std::time::Duration::from_secs(60)).await
    {
        panic!("the program on admin port {admin} never became ready: {e}");
    }
}

/// A running emulator, stopped on drop. Its own thread and multi-threaded runtime keep it
/// serving whatever the test's runtime is doing, as a separate server would.
///
/// Or, from [`EmulatorServer::behind_api_server`], the image API a real kube-apiserver
/// aggregates (`scripts/realcluster up`): its control API reached directly over HTTPS, the API
/// itself only through the real server.
pub struct EmulatorServer {
    /// The server URL.
    pub url: String,
    /// A kubeconfig for the user `admin`.
    pub kubeconfig: PathBuf,
    http: reqwest::Client,
    /// The admin client of the real API server, for an image API behind one.
    api_server: Option<kube::Client>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for EmulatorServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl EmulatorServer {
    /// Starts the emulator and writes its kubeconfig.
    pub async fn start() -> EmulatorServer {
        Self::start_with(Config::default()).await
    }

    /// Starts the emulator configured by `config` and writes its kubeconfig.
    pub async fn start_with(config: Config) -> EmulatorServer {
        imagegate::runtime::tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let (ready, started) = oneshot::channel::<String>();
        let (stop, stopped) = oneshot::channel::<()>();
        let written = kubeconfig.clone();
        let thread = std::thread::Builder::new()
            .name("emulator".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .expect("the emulator's runtime starts");
                runtime.block_on(async move {
                    let emu = Emulator::start(config).await.expect("the emulator listens");
                    emu.write_kubeconfig(&written, "admin")
                        .expect("the emulator writes its kubeconfig");
                    let _ = ready.send(emu.url());
                    let _ = stopped.await;
                    emu.shutdown().await;
                });
            })
            .expect("the emulator's thread starts");
        let url = tokio::time::timeout(Duration::from_secs(20), started)
            .await
            .expect("the emulator never started")
            .expect("the emulator's thread ended before it served");
        let server = EmulatorServer {
            url,
            kubeconfig,
            http: reqwest::Client::new(),
            api_server: None,
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        };
        // CustomRuns are pruned and validated by Tekton's own schema, as on a cluster.
        upstream::install_released_customrun_crd(server.client()).await;
        server
    }

    /// The image API served by `imagegate-emulator --serve-image-api-only` at `url` (HTTPS,
    /// its certificate signed by the CA `ca_pem`), aggregated by the real API server that
    /// `kubeconfig` and `admin` (its admin client) reach. Seeding and imports go to the control
    /// API directly; [`EmulatorServer::client`] is the real server's admin client.
    pub fn behind_api_server(
        url: String,
        ca_pem: &[u8],
        kubeconfig: PathBuf,
        admin: kube::Client,
    ) -> EmulatorServer {
        imagegate::runtime::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).unwrap())
            .build()
            .unwrap();
        EmulatorServer {
            url,
            kubeconfig,
            http,
            api_server: Some(admin),
            stop: None,
            thread: None,
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A kube client authenticated as `user` (the token `user:<name>` names it in the log).
    pub fn client_as(&self, user: &str) -> kube::Client {
        imagegate::runtime::tls::install_crypto_provider();
        let mut config = kube::Config::new(self.url.parse().unwrap());
        config.auth_info.token = Some(format!("user:{user}").into());
        kube::Client::try_from(config).unwrap()
    }

    /// A kube client as `admin` (behind an API server: the API server's admin client).
    pub fn client(&self) -> kube::Client {
        match &self.api_server {
            Some(c) => c.clone(),
            None => self.client_as("admin"),
        }
    }

    /// Writes a kubeconfig for `user` (what a program under test is given).
    pub fn write_kubeconfig(&self, path: &Path, user: &str) {
        let text = std::fs::read_to_string(&self.kubeconfig)
            .unwrap()
            .replace("user:admin", &format!("user:{user}"));
        std::fs::write(path, text).unwrap();
    }

    async fn control(&self, method: reqwest::Method, path: &str, body: Option<String>) -> Value {
        let mut req = self
            .http
            .request(method, format!("{}/_emulator/v1/{path}", self.url));
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.unwrap();
        let code = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        assert!(code.is_success(), "control {path}: {code} {v}");
        v
    }

    /// Stores YAML/JSON objects.
    pub async fn seed_str(&self, text: &str) {
        self.control(reqwest::Method::POST, "seed", Some(text.to_string()))
            .await;
    }

    /// Stores one object.
    pub async fn seed(&self, obj: Value) {
        self.seed_str(&obj.to_string()).await;
    }

    /// `ns/nb` as a promotion finds it: a scheduled `candidate` tag (from
    /// `quay.io/org/nb:latest`) imported `served` then `candidate`, and the served tag `latest`
    /// pointing at `served`, set by the admin as a user would (`oc tag`).
    pub async fn seed_promotion_stream(&self, ns: &str, served: &str, candidate: &str) {
        self.seed(json!({
            "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "nb", "namespace": ns},
            "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "importPolicy": {"scheduled": true}}]}
        }))
        .await;
        self.import(ns, "nb", "candidate", served).await;
        let streams: kube::Api<imagegate::api::ImageStream> =
            kube::Api::namespaced(self.client(), ns);
        streams
            .patch(
                "nb",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Strategic(json!({"spec": {"tags": [{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{served}")}}]}})),
            )
            .await
            .unwrap();
        self.import(ns, "nb", "candidate", candidate).await;
    }

    /// A scheduled import of `digest` into `ns/is:tag`.
    pub async fn import(&self, ns: &str, is: &str, tag: &str, digest: &str) {
        let body = json!({"tag": tag, "digest": digest}).to_string();
        self.control(
            reqwest::Method::POST,
            &format!("namespaces/{ns}/imagestreams/{is}/import"),
            Some(body),
        )
        .await;
    }

    /// What the upstream registry serves for the pull spec `image` from now on (the emulator's
    /// `POST registry`): `answer` is `{"digest": ...}` or `{"failure": {"reason": ...}}`.
    pub async fn upstream(&self, image: &str, answer: Value) {
        let mut body = json!({ "image": image });
        json_patch::merge(&mut body, &answer);
        self.control(reqwest::Method::POST, "registry", Some(body.to_string()))
            .await;
    }

    /// From now on the emulator's imports read `host` over the registry v2 API (its
    /// `POST registries`; `insecure`: over plain HTTP whatever the tag says).
    pub async fn add_registry(&self, host: &str, insecure: bool) {
        let body = json!({ "host": host, "insecure": insecure }).to_string();
        self.control(reqwest::Method::POST, "registries", Some(body))
            .await;
    }

    /// A failed scheduled import.
    pub async fn import_failure(&self, ns: &str, is: &str, tag: &str, reason: &str) {
        let body = json!({"tag": tag, "reason": reason}).to_string();
        self.control(
            reqwest::Method::POST,
            &format!("namespaces/{ns}/imagestreams/{is}/importfailure"),
            Some(body),
        )
        .await;
    }

    /// Expires every older resourceVersion.
    pub async fn compact(&self) {
        self.control(reqwest::Method::POST, "compact", None).await;
    }

    /// Ends every open watch.
    pub async fn drop_watches(&self) {
        self.control(reqwest::Method::POST, "drop-watches", None)
            .await;
    }

    /// Merges `metadata` into an Image's dockerImageMetadata.
    pub async fn set_image_metadata(&self, digest: &str, metadata: Value) {
        self.control(
            reqwest::Method::PUT,
            &format!("images/{digest}/metadata"),
            Some(metadata.to_string()),
        )
        .await;
    }

    /// Makes the next matching requests fail or wait.
    pub async fn inject_fault(&self, fault: Fault) {
        self.control(
            reqwest::Method::POST,
            "faults",
            Some(serde_json::to_string(&fault).unwrap()),
        )
        .await;
    }

    /// Removes every fault.
    pub async fn clear_faults(&self) {
        self.control(reqwest::Method::DELETE, "faults", None).await;
    }

    /// The request log.
    pub async fn requests(&self) -> Vec<RequestRecord> {
        let v = self.control(reqwest::Method::GET, "requests", None).await;
        serde_json::from_value(v["items"].clone()).unwrap()
    }

    /// The requests that could change state.
    pub async fn mutating_requests(&self) -> Vec<RequestRecord> {
        let v = self
            .control(reqwest::Method::GET, "requests?mutating=true", None)
            .await;
        serde_json::from_value(v["items"].clone()).unwrap()
    }
}

/// A CustomRun of the ImagePromotion custom task in namespace `ds` with string `params`, and
/// `extra` applied to it as a JSON merge patch (RFC 7386; e.g. `{"spec": {"retries": 2}}`).
pub fn promotion_run(
    name: &str,
    params: &[(&str, &str)],
    extra: &Value,
) -> imagegate::api::CustomRun {
    let params: Vec<Value> = params
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    let mut body = json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": "ds"},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                 "params": params, "serviceAccountName": "default"}
    });
    json_patch::merge(&mut body, extra);
    serde_json::from_value(body).expect("a valid CustomRun")
}

/// Who holds the Lease `name` in `imagegate-system` (None: nobody, or no Lease yet).
pub async fn lease_holder(client: &kube::Client, name: &str) -> Option<String> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), "imagegate-system");
    leases
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty())
}
