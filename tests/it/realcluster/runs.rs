//! What the controller's scenarios share on the real tier: a control plane with `config/`
//! installed and the image API behind it, the controller running as its ServiceAccount, and
//! CustomRuns created and awaited through the real API server.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use imagegate::api::{CustomRun, ImageStream};
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::cluster::{CONTROLLER_SA, ControlPlane};
use crate::support::{EmulatorServer, Process, free_port};

/// Digests the scenarios use (`sha256:` and 64 times the letter).
pub fn digest(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// A control plane with `config/` and the CustomRun CRD, the image API behind it, and a
/// ServiceAccount kubeconfig for the controller.
pub struct Cluster {
    pub cp: ControlPlane,
    pub emu: EmulatorServer,
    pub client: kube::Client,
    pub controller_kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Cluster::start_with(ControlPlane::install).await
    }

    /// [`Cluster::start`], with `install` instead of `config/`.
    pub async fn start_with(install: impl FnOnce(&ControlPlane)) -> Cluster {
        let cp = ControlPlane::up();
        install(&cp);
        let emu = cp.image_api().await;
        let client = cp.client().await;
        let dir = tempfile::tempdir().unwrap();
        let controller_kubeconfig = dir.path().join("controller.kubeconfig");
        cp.service_account_kubeconfig("imagegate-controller", &controller_kubeconfig);
        Cluster {
            cp,
            emu,
            client,
            controller_kubeconfig,
            _dir: dir,
        }
    }

    /// A namespace on the real server with `nb` in the image API: candidate imported `served`
    /// then `candidate`, latest on `served` (set through the real server, as `oc tag` would);
    /// the runs' account `default` may promote (config/'s ClusterRole, bound as tekton/ binds
    /// it to its pipeline's account); the namespace opted in (tekton/330).
    pub async fn promotion_namespace(&self, ns: &str, served: &str, candidate: &str) {
        self.cp.ok(&["create", "namespace", ns]);
        self.promotion_stream(ns, served, candidate).await;
    }

    /// [`Cluster::promotion_namespace`] in a namespace that exists.
    pub async fn promotion_stream(&self, ns: &str, served: &str, candidate: &str) {
        self.cp.onboard(ns);
        self.cp.ok(&[
            "create",
            "rolebinding",
            "promoter",
            "-n",
            ns,
            "--clusterrole=imagegate-promoter",
            &format!("--serviceaccount={ns}:default"),
        ]);
        self.emu.seed_promotion_stream(ns, served, candidate).await;
    }

    /// `imagegate controller` as its ServiceAccount, on a free admin port.
    pub fn controller(&self, extra: &[&str]) -> (Process, u16) {
        let admin = free_port();
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["--log-format", "json", "controller", "--admin-addr"])
            .arg(format!("127.0.0.1:{admin}"))
            .args(extra)
            .env("KUBECONFIG", &self.controller_kubeconfig)
            .env("RUST_LOG", "info");
        let process = Process::start(
            format!("imagegate controller (admin port {admin})"),
            command,
        );
        (process, admin)
    }

    pub fn runs(&self, ns: &str) -> Api<CustomRun> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn create_run(&self, ns: &str, name: &str, params: &[(&str, &str)], extra: Value) {
        let mut run = crate::support::promotion_run(name, params, &extra);
        run.metadata.namespace = Some(ns.to_string());
        self.runs(ns)
            .create(&PostParams::default(), &run)
            .await
            .unwrap();
    }

    /// Waits until the run has started (its `startTime` is written).
    pub async fn started(&self, ns: &str, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.runs(ns).get(name).await.unwrap().has_started() {
            assert!(Instant::now() < deadline, "{ns}/{name} never started");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the run is done and returns it.
    pub async fn done(&self, ns: &str, name: &str) -> CustomRun {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let run = self.runs(ns).get(name).await.unwrap();
            if run.is_done() {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "{ns}/{name} never finished: {:?}",
                run.status
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `ns/nb`, read through the real server.
    pub async fn stream(&self, ns: &str) -> ImageStream {
        Api::<ImageStream>::namespaced(self.client.clone(), ns)
            .get("nb")
            .await
            .unwrap()
    }

    /// The ImageStream writes the controller's ServiceAccount made in `ns`, as the image API
    /// logged them (the user is the one the front proxy named).
    pub async fn stream_writes(&self, ns: &str) -> usize {
        self.emu
            .mutating_requests()
            .await
            .iter()
            .filter(|r| {
                r.user == CONTROLLER_SA && r.resource == "imagestreams" && r.namespace == ns
            })
            .count()
    }
}
