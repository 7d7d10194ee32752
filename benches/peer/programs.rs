//! The two programs under measurement, each a separate process with its own ServiceAccount
//! identity: Knative Eventing's ApiServerSource receive adapter, configured through its own
//! environment as the ApiServerSource reconciler configures its pod
//! (`pkg/reconciler/apiserversource/resources/receive_adapter.go`, `makeEnv`; the names are
//! `pkg/adapter/v2/config.go`'s and `pkg/adapter/apiserver/adapter_injection.go`'s), and
//! `imagegate source` (release build) twice: in `--mode resource`, which sends the same event
//! types with the same data (the ImageStream) and, like the adapter, keeps no checkpoint; and in
//! its default mode (`imagestreamtag`: one event per tag change, checkpointed).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::Killed;

/// The ApiServerSource receive adapter's binary: `$KNATIVE_APISERVER_RECEIVE_ADAPTER`, else
/// `knative-apiserver-receive-adapter` on PATH (`scripts/realcluster bench-peer` sets both up).
pub fn adapter_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("KNATIVE_APISERVER_RECEIVE_ADAPTER") {
        return PathBuf::from(p);
    }
    let paths = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&paths)
        .map(|d| d.join("knative-apiserver-receive-adapter"))
        .find(|p| p.exists())
        .expect(
            "knative-apiserver-receive-adapter is on PATH \
             (scripts/realcluster build knative-apiserver-receive-adapter)",
        )
}

/// What the reconciler would put in `K_SOURCE_CONFIG` for an ApiServerSource with
/// `resources: [{apiVersion: image.openshift.io/v1, kind: ImageStream}]`, `mode: Resource`,
/// no `namespaceSelector` (the source's own namespace).
pub fn source_config(namespace: &str) -> String {
    serde_json::json!({
        "namespaces": [namespace],
        "allNamespaces": false,
        "resources": [{"gvr": {"Group": "image.openshift.io", "Version": "v1", "Resource": "imagestreams"}}],
        "mode": "Resource",
    })
    .to_string()
}

/// A program that can be stopped and started again with the same command.
pub struct Program {
    pub name: &'static str,
    command: Box<dyn Fn() -> Command + Send>,
    running: Option<Killed>,
}

impl Program {
    /// The receive adapter, watching ImageStreams in `namespace` as `kubeconfig`'s identity,
    /// posting to `sink`; its log appended to `log`.
    pub fn adapter(kubeconfig: &Path, namespace: &str, sink: &str, log: &Path) -> Program {
        let (bin, kubeconfig, ns, sink, log) = (
            adapter_binary(),
            kubeconfig.to_path_buf(),
            namespace.to_string(),
            sink.to_string(),
            log.to_path_buf(),
        );
        let command = move || {
            let mut c = Command::new(&bin);
            c.env("KUBECONFIG", &kubeconfig)
                .env("K_SINK", &sink)
                .env("K_SOURCE_CONFIG", source_config(&ns))
                .env("K_CE_OVERRIDES", r#"{"extensions":{"bench":"adapter"}}"#)
                .env("NAME", "peer")
                .env("NAMESPACE", &ns)
                .env("SYSTEM_NAMESPACE", "knative-eventing")
                .env("METRICS_DOMAIN", "knative.dev/eventing")
                .stdout(Stdio::null())
                .stderr(append(&log));
            c
        };
        Program {
            name: "adapter",
            command: Box::new(command),
            running: None,
        }
    }

    /// `imagegate source --mode {mode}`, watching `namespace` as `kubeconfig`'s identity,
    /// posting to `sink`, its events marked `bench: {name}`, its admin server on `admin`; its
    /// log appended to `log`.
    pub fn imagegate(
        name: &'static str,
        mode: &'static str,
        kubeconfig: &Path,
        namespace: &str,
        sink: &str,
        admin: u16,
        log: &Path,
    ) -> Program {
        let (kubeconfig, ns, sink, log) = (
            kubeconfig.to_path_buf(),
            namespace.to_string(),
            sink.to_string(),
            log.to_path_buf(),
        );
        let command = move || {
            let mut c = Command::new(env!("CARGO_BIN_EXE_imagegate"));
            let overrides = format!(r#"{{"extensions":{{"bench":"{name}"}}}}"#);
            c.args(["source", "--mode", mode, "--sink", &sink])
                .args(["--namespace", &ns])
                .args(["--ce-overrides", &overrides])
                .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
                .env("KUBECONFIG", &kubeconfig)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .stderr(append(&log));
            c
        };
        Program {
            name,
            command: Box::new(command),
            running: None,
        }
    }

    pub fn start(&mut self) {
        let child = (self.command)().spawn().unwrap_or_else(|e| {
            panic!("{} could not be started: {e}", self.name);
        });
        self.running = Some(Killed::new(child));
    }

    /// SIGTERM, as the kubelet stops a pod, and wait for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut k) = self.running.take() {
            k.term();
        }
    }

    pub fn pid(&self) -> u32 {
        self.running.as_ref().map_or(0, Killed::pid)
    }
}

fn append(path: &Path) -> Stdio {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the program's log can be opened");
    Stdio::from(file)
}
