//! End to end: the operator commands (`imagegate status|promote|rollback|reject|import`, and the
//! same as `kubectl imagegate ...`) as a platform engineer runs them, against the emulator with
//! the real controller deciding every run. Each test reads the command's output and exit status,
//! and what it did to the cluster (the request log: the CLI creates CustomRuns and
//! ImageStreamImports, never writes an ImageStream).
//!
//! - [`status`]: several streams in every phase, every output format, the exit status.
//! - [`runs`]: promote, rollback, reject creating the CustomRun and waiting for the verdict;
//!   refused promotions (no evidence, proof required, no permission).
//! - [`import`]: the candidate imported now through an ImageStreamImport.
//! - [`plugin`]: the binary as `kubectl-imagegate`, run by the real kubectl.

mod import;
mod plugin;
mod runs;
mod status;

use std::path::{Path, PathBuf};

use imagegate::api::ImageStream;
use imagegate_emulator::control::RequestRecord;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::EmulatorServer;
use crate::support::controller::{Setup, grant_promote};

/// The user the CLI runs as (the token names it in the request log).
pub const OPERATOR: &str = "operator";

/// What a command printed and how it exited.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl From<std::process::Output> for Output {
    fn from(o: std::process::Output) -> Output {
        Output {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// The real controller on the emulator (`ds/nb`: latest on A, candidate B), a kubeconfig for
/// the operator, and the pipeline's service account allowed to promote in `ds`.
pub struct Ops {
    pub s: Setup,
    pub kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ops {
    pub async fn new() -> Ops {
        let s = Setup::new().await;
        grant_promote(&s.emu, "ds", "imagegate-pipeline").await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        s.emu.write_kubeconfig(&kubeconfig, OPERATOR);
        Ops {
            s,
            kubeconfig,
            _dir: dir,
        }
    }

    /// Runs `imagegate <args>` as the operator.
    pub async fn run(&self, args: &[&str]) -> Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env_remove("RUST_LOG")
            .output()
            .await
            .expect("the binary runs")
            .into()
    }

    pub fn emu(&self) -> &EmulatorServer {
        &self.s.emu
    }

    pub async fn stream(&self, ns: &str, name: &str) -> ImageStream {
        Api::<ImageStream>::namespaced(self.s.client.clone(), ns)
            .get(name)
            .await
            .unwrap()
    }

    /// The state-changing requests the operator made.
    pub async fn operator_writes(&self) -> Vec<RequestRecord> {
        self.emu()
            .mutating_requests()
            .await
            .into_iter()
            .filter(|r| r.user == OPERATOR)
            .collect()
    }

    /// Fails unless every write of the operator was the creation of a `resource` object.
    pub async fn assert_operator_only_created(&self, resource: &str) {
        let writes = self.operator_writes().await;
        assert!(!writes.is_empty(), "the operator wrote nothing");
        for w in &writes {
            assert_eq!(
                (w.verb.as_str(), w.resource.as_str()),
                ("create", resource),
                "the CLI only creates {resource}: {writes:?}"
            );
        }
    }
}

/// `ns/name` as `ds/nb` is: a scheduled `candidate` tag (from `quay.io/org/<name>:latest`)
/// imported `served` then `candidate`, and `latest` pointing at `served` (by `oc tag`).
pub async fn seed_gated_stream(
    emu: &EmulatorServer,
    ns: &str,
    name: &str,
    served: &str,
    candidate: &str,
) {
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": format!("quay.io/org/{name}:latest")}, "importPolicy": {"scheduled": true}}]}
    }))
    .await;
    emu.import(ns, name, "candidate", served).await;
    Api::<ImageStream>::namespaced(emu.client(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"tags": [{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("{name}@{served}")}}]}})),
        )
        .await
        .unwrap();
    emu.import(ns, name, "candidate", candidate).await;
}

/// A kubeconfig like `base` (the emulator's: user entry `admin`, its token naming the operator)
/// with a second context `ds-context` whose namespace is `ds`.
pub fn with_ds_context(base: &Path, to: &Path) {
    let text = std::fs::read_to_string(base).unwrap().replace(
        "contexts:\n",
        "contexts:\n- name: ds-context\n  context:\n    cluster: imagegate-emulator\n    user: admin\n    namespace: ds\n",
    );
    std::fs::write(to, text).unwrap();
}
