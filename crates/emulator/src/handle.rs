//! The programmatic handle: start an emulator on a port, get a `kube::Client` or a kubeconfig
//! for it, seed objects, simulate imports and failures, and read what clients did.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use axum::serve::ListenerExt;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::control::{Control, Fault, RequestRecord};
use super::http::{AppState, router};
use super::imports::Imports;
use super::openshift::Settings;
use super::simulate::{ImportRequest, Imported};
use super::status::ApiError;
use super::store::DEFAULT_RETAINED_EVENTS;
use super::verbs::Cluster;
use super::window::Window;

/// How the emulator starts.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// The most events of one resource the watch window keeps.
    pub retained_events: usize,
    /// Keep every event from the first (until `retained_events`) and send bookmarks every
    /// second, as the emulator did before it held to the real servers' watch window
    /// ([`crate::window`]); off by default.
    pub lenient_watch: bool,
    /// The internal registry host name the image API reports.
    pub internal_registry: String,
    /// Namespaces that exist from the start.
    pub namespaces: Vec<String>,
    /// The image import controllers (on, with OpenShift's 900 s schedule, by default).
    pub imports: Imports,
}

impl Config {
    /// The watch window this configuration asks for.
    pub fn window(&self) -> Window {
        if self.lenient_watch {
            Window::lenient(self.retained_events)
        } else {
            Window::real(self.retained_events)
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            retained_events: DEFAULT_RETAINED_EVENTS,
            lenient_watch: false,
            internal_registry: "image-registry.openshift-image-registry.svc:5000".into(),
            namespaces: vec!["default".into(), "kube-system".into(), "kube-public".into()],
            imports: Imports::default(),
        }
    }
}

/// A running emulator. Dropping it does not stop the server; call [`Emulator::shutdown`].
pub struct Emulator {
    addr: SocketAddr,
    cluster: Arc<Cluster>,
    control: Arc<Control>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    imports: Option<JoinHandle<()>>,
}

impl Emulator {
    /// Binds the address, loads the built-in CRDs and namespaces, and serves in the background.
    pub async fn start(config: Config) -> std::io::Result<Emulator> {
        let listener = TcpListener::bind(config.addr).await?;
        Self::serve(listener, config).await
    }

    /// Serves on an already bound listener.
    async fn serve(listener: TcpListener, config: Config) -> std::io::Result<Emulator> {
        let addr = listener.local_addr()?;
        let mut cluster = Cluster::new(
            Settings {
                internal_registry: config.internal_registry.clone(),
            },
            config.window(),
        );
        cluster.imports = config.imports.clone();
        let cluster = Arc::new(cluster);
        for ns in &config.namespaces {
            cluster
                .seed_str(&format!(
                    "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n"
                ))
                .map_err(std::io::Error::other)?;
        }
        cluster
            .seed(super::tekton::customrun_crd())
            .map_err(std::io::Error::other)?;
        cluster.store.start_window();
        let imports = crate::imports::spawn(cluster.clone(), &config.imports);
        let control = Arc::new(Control::default());
        let app = router(AppState {
            cluster: cluster.clone(),
            control: control.clone(),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            // TCP_NODELAY on every connection, as Go's net package (and so kube-apiserver) sets
            // it: a watch sends many small writes on one connection, and with Nagle's algorithm
            // each waits for the client's (delayed) ACK of the one before, up to 40 ms.
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(error = %e, "emulator server stopped");
            }
        });
        Ok(Emulator {
            addr,
            cluster,
            control,
            stop: Some(stop),
            task: Some(task),
            imports,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The server URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client for the emulator, authenticated as `user`: its token is `user:<user>`,
    /// which the request log records as `user` (any other token is `admin`).
    pub fn client_as(&self, user: &str) -> kube::Result<kube::Client> {
        // Two rustls crypto providers are compiled into a workspace build (ring, and aws-lc-rs
        // through sigstore): without a process default, kube's connector panics.
        crate::aggregated::tls::install_crypto_provider();
        let uri = axum::http::Uri::builder()
            .scheme("http")
            .authority(self.addr.to_string())
            .path_and_query("/")
            .build()
            .map_err(kube::Error::HttpError)?;
        let mut config = kube::Config::new(uri);
        config.auth_info.token = Some(format!("user:{user}").into());
        kube::Client::try_from(config)
    }

    /// A kube client for the emulator as `admin`.
    pub fn client(&self) -> kube::Result<kube::Client> {
        self.client_as("admin")
    }

    /// A kubeconfig for the emulator (the token names `user` in the request log).
    fn kubeconfig_yaml(&self, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: imagegate-emulator\n  cluster:\n    server: {url}\n\
             users:\n- name: {user}\n  user:\n    token: user:{user}\n\
             contexts:\n- name: imagegate-emulator\n  context:\n    cluster: imagegate-emulator\n    user: {user}\n    namespace: default\n\
             current-context: imagegate-emulator\n",
            url = self.url()
        )
    }

    /// Writes a kubeconfig for the emulator (the token names `user` in the request log) to a file.
    ///
    /// The file appears whole: it is written beside `path` and renamed into place, so a program
    /// waiting for it never reads half of it.
    pub fn write_kubeconfig(&self, path: &Path, user: &str) -> std::io::Result<()> {
        let mut partial = path.as_os_str().to_owned();
        partial.push(format!(".{}.partial", std::process::id()));
        let partial = std::path::PathBuf::from(partial);
        std::fs::write(&partial, self.kubeconfig_yaml(user))?;
        std::fs::rename(&partial, path)
    }

    /// Seeds objects from YAML or JSON text.
    pub fn seed_str(&self, text: &str) -> Result<Vec<String>, ApiError> {
        self.cluster.seed_str(text)
    }

    /// Seeds objects from a YAML or JSON file.
    pub fn seed_file(&self, path: &Path) -> Result<Vec<String>, ApiError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ApiError::bad_request(format!("cannot read {}: {e}", path.display())))?;
        self.cluster.seed_str(&text)
    }

    /// Seeds one object.
    pub fn seed(&self, obj: Value) -> Result<String, ApiError> {
        self.cluster.seed(obj)
    }

    /// Simulates a scheduled import of `digest` (or a new random digest) into a tag.
    pub fn import(
        &self,
        ns: &str,
        is: &str,
        tag: &str,
        digest: Option<&str>,
    ) -> Result<Option<Imported>, ApiError> {
        self.cluster.import(
            ns,
            is,
            &ImportRequest {
                tag: tag.into(),
                digest: digest.map(str::to_string),
                ..Default::default()
            },
        )
    }

    /// Simulates a scheduled import with full control over the request.
    pub fn import_with(
        &self,
        ns: &str,
        is: &str,
        req: &ImportRequest,
    ) -> Result<Option<Imported>, ApiError> {
        self.cluster.import(ns, is, req)
    }

    /// Simulates a failed scheduled import.
    pub fn import_failure(
        &self,
        ns: &str,
        is: &str,
        tag: &str,
        reason: &str,
        message: Option<&str>,
    ) -> Result<Option<Value>, ApiError> {
        self.cluster.import_failure(ns, is, tag, reason, message)
    }

    /// Merges `metadata` into an Image's `dockerImageMetadata`.
    pub fn set_image_metadata(&self, digest: &str, metadata: Value) -> Result<Value, ApiError> {
        self.cluster.set_image_metadata(digest, metadata)
    }

    /// Expires every older resourceVersion (a watch from before now gets 410).
    pub fn compact(&self) -> u64 {
        self.cluster.store.compact()
    }

    /// Ends every open watch.
    pub fn drop_watches(&self) {
        self.cluster.store.drop_watches()
    }

    /// Makes the next matching requests fail or wait.
    pub fn inject_fault(&self, fault: Fault) {
        self.control.inject(fault)
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.control.clear_faults()
    }

    /// Every request served so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.control.requests()
    }

    /// The requests that could change state.
    pub fn mutating_requests(&self) -> Vec<RequestRecord> {
        self.control
            .requests()
            .into_iter()
            .filter(RequestRecord::is_mutating)
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.control.clear_requests()
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(imports) = self.imports.take() {
            imports.abort();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return;
        };
        // A graceful shutdown waits for every open response, and a watch is one until it ends:
        // keep ending watches (a client may reconnect just before the listener closes) until
        // the server is done, and give up on stragglers after a few seconds.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            self.cluster.store.drop_watches();
            tokio::select! {
                _ = &mut task => return,
                _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                task.abort();
                return;
            }
        }
    }
}
