//! The real `imagegate controller` binary against the emulator, for the end-to-end tests of the
//! controller: the stream `ds/nb` (candidate imported A then B, `latest` on A), the ImagePromotion
//! CRD, the controller as the user `controller`, and the helpers that read what a run did.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use imagegate::api::{CustomRun, ImageStream};
use imagegate_emulator::control::Fault;
use kube::api::{Api, PostParams};
use serde_json::Value;

use super::{EmulatorServer, Process, free_port};

/// A digest: the served tag's at the start.
pub const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// A digest: the candidate's at the start.
pub const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// A digest no tag has at the start.
pub const C: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

/// The params of a promotion of B that the pipeline validated.
pub const VALIDATED_B: &[(&str, &str)] = &[
    ("imagestream", "nb"),
    ("digest", B),
    ("validation-status", "Succeeded"),
];

/// An emulator with imagegate's CRD, the stream `ds/nb` and the real controller running.
pub struct Setup {
    /// The emulator.
    pub emu: EmulatorServer,
    /// An admin client.
    pub client: kube::Client,
    kubeconfig: PathBuf,
    controller: Option<Process>,
    /// The controller's admin port.
    pub admin: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Setup {
    /// An emulator with the ImagePromotion CRD and `ds/nb`: candidate imported A then B,
    /// latest promoted to A.
    pub async fn new() -> Setup {
        let emu = EmulatorServer::start().await;
        // The Lease lives where config/ installs the controller.
        emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: imagegate-system\n")
            .await;
        let crd = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/300-imagepromotion-crd.yaml"
        ))
        .unwrap();
        emu.seed_str(&crd).await;
        emu.seed_promotion_stream("ds", A, B).await;
        // The runs' service account may promote in ds, as tekton/ grants its pipeline's.
        seed_promoter_role(&emu).await;
        grant_promote(&emu, "ds", "default").await;
        let client = emu.client();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig, "controller");
        let mut s = Setup {
            emu,
            client,
            kubeconfig,
            controller: None,
            admin: free_port(),
            _dir: dir,
        };
        s.start();
        s
    }

    /// Starts the controller (again).
    pub fn start(&mut self) {
        match &mut self.controller {
            Some(c) => c.restart(),
            None => self.controller = Some(self.spawn_controller(self.admin, &[])),
        }
    }

    pub fn spawn_controller(&self, admin: u16, extra: &[&str]) -> Process {
        let mut command = Command::new(env!("CARGO_BIN_EXE_imagegate"));
        command
            .args(["--log-format", "json", "controller", "--admin-addr"])
            .arg(format!("127.0.0.1:{admin}"))
            .args(extra)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info");
        Process::start(
            format!("imagegate controller (admin port {admin})"),
            command,
        )
    }

    /// kill -9; the log stays for a failure message.
    pub fn stop(&mut self) {
        if let Some(c) = &mut self.controller {
            c.kill();
        }
    }

    /// Keeps runs busy: every read of an ImageStream fails with `status` until the faults are
    /// cleared.
    pub async fn fail_stream_reads(&self, status: u16) {
        self.emu
            .inject_fault(Fault {
                verb: Some("get".into()),
                resource: Some("imagestreams".into()),
                count: 10_000,
                status: Some(status),
                ..Default::default()
            })
            .await;
    }

    pub fn runs(&self) -> Api<CustomRun> {
        Api::namespaced(self.client.clone(), "ds")
    }

    pub async fn create_run(&self, name: &str, params: &[(&str, &str)], extra: Value) -> CustomRun {
        self.runs()
            .create(
                &PostParams::default(),
                &crate::support::promotion_run(name, params, &extra),
            )
            .await
            .unwrap()
    }

    /// Waits until the run has started (its `startTime` is written).
    pub async fn started(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.runs().get(name).await.unwrap().has_started() {
            assert!(Instant::now() < deadline, "{name} never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the run is done and returns it.
    pub async fn done(&self, name: &str) -> CustomRun {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let run = self.runs().get(name).await.unwrap();
            if run.is_done() {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "{name} never finished: {:?}",
                run.status
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn stream(&self) -> ImageStream {
        Api::<ImageStream>::namespaced(self.client.clone(), "ds")
            .get("nb")
            .await
            .unwrap()
    }

    /// Requests the controller made that changed something.
    pub async fn writes(&self, resource: &str) -> Vec<imagegate_emulator::control::RequestRecord> {
        self.emu
            .mutating_requests()
            .await
            .into_iter()
            .filter(|r| r.user == "controller" && r.resource == resource)
            .collect()
    }
}

/// The ClusterRole `imagegate-promoter` of `config/`.
pub fn promoter_role() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/204-clusterrole-promoter.yaml"
    ))
    .unwrap()
}

/// Seeds the ClusterRole `imagegate-promoter` of `config/`.
pub async fn seed_promoter_role(emu: &EmulatorServer) {
    emu.seed_str(&promoter_role()).await;
}

/// Binds the ClusterRole `imagegate-promoter` to the service account `ns/sa` in `ns` (a
/// RoleBinding named `promoter-<sa>`), as `tekton/310-pipeline-rbac.yaml` does.
pub async fn grant_promote(emu: &EmulatorServer, ns: &str, sa: &str) {
    emu.seed(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("promoter-{sa}"), "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "imagegate-promoter"},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]
    }))
    .await;
}

/// The run's final condition: (status, reason).
pub fn reason(run: &CustomRun) -> (String, String) {
    let c = run.succeeded_condition().unwrap();
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

/// The value of the run's result `name`.
pub fn result(run: &CustomRun, name: &str) -> String {
    run.status
        .as_ref()
        .unwrap()
        .results
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no result {name}"))
        .value
        .clone()
}

/// The served tag `latest`: its `from` name and its annotations.
pub fn served(is: &ImageStream) -> (String, std::collections::BTreeMap<String, String>) {
    let tag = is.spec_tag("latest").unwrap();
    (
        tag.from.as_ref().unwrap().name.clone().unwrap(),
        tag.annotations.clone().unwrap_or_default(),
    )
}

impl Setup {
    /// The served tag `latest` as it is now (to compare after a refused run).
    pub async fn served_tag(&self) -> imagegate::api::TagReference {
        self.stream()
            .await
            .spec_tag("latest")
            .cloned()
            .expect("ds/nb has a served tag")
    }

    /// Fails unless the served tag is exactly `before` and the controller wrote no ImageStream.
    pub async fn assert_served_untouched(&self, before: &imagegate::api::TagReference) {
        assert_eq!(
            &self.served_tag().await,
            before,
            "the served tag is untouched"
        );
        assert!(
            self.writes("imagestreams").await.is_empty(),
            "the controller wrote no ImageStream"
        );
    }

    /// The run's condition message.
    pub async fn message(&self, name: &str) -> String {
        self.done(name)
            .await
            .succeeded_condition()
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    }
}
