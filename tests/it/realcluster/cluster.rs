//! A control plane from `scripts/realcluster up` (etcd, kube-apiserver, and the image API
//! aggregated from `imagegate-emulator --serve-image-api-only`), stopped on drop, and what the
//! tests do with it: kubectl as admin, SubjectAccessReviews, ServiceAccount tokens from the
//! TokenRequest API, the audit log, a restart of kube-apiserver.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::support::EmulatorServer;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ServiceAccount user `config/` runs the source as.
pub const SOURCE_SA: &str = "system:serviceaccount:imagegate-system:imagegate-source";
/// The ServiceAccount user `config/` runs the controller as.
pub const CONTROLLER_SA: &str = "system:serviceaccount:imagegate-system:imagegate-controller";

/// A control plane started by `scripts/realcluster up`, stopped (`down`) on drop.
pub struct ControlPlane {
    /// The admin kubeconfig `up` printed.
    pub kubeconfig: PathBuf,
    /// When kube-apiserver was down or starting ([`ControlPlane::restart_apiserver`]).
    restarts: std::sync::Mutex<Vec<(DateTime<Utc>, DateTime<Utc>)>>,
}

/// The `imagegate-emulator` binary the workspace built beside this test binary
/// (`target/debug/deps/it-*` → `target/debug/imagegate-emulator`).
pub(crate) fn emulator_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary is in target/<profile>/deps")
        .join("imagegate-emulator");
    assert!(
        bin.exists(),
        "{} is missing: build the workspace (`cargo build --workspace`; scripts/test and \
         `cargo nextest run --workspace` do)",
        bin.display()
    );
    bin
}

impl ControlPlane {
    /// `scripts/realcluster up` with this workspace's emulator; fails the test if it fails.
    pub fn up() -> ControlPlane {
        let out = Command::new(Path::new(ROOT).join("scripts/realcluster"))
            .arg("up")
            .env("IMAGEGATE_ETCD_UNSAFE_NO_FSYNC", "1")
            .env("IMAGEGATE_EMULATOR", emulator_binary())
            .output()
            .expect("scripts/realcluster runs");
        assert!(
            out.status.success(),
            "scripts/realcluster up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
        ControlPlane {
            kubeconfig: PathBuf::from(path),
            restarts: Default::default(),
        }
    }

    /// The directory `up` made (pki/, logs/, env).
    pub fn dir(&self) -> &Path {
        self.kubeconfig.parent().unwrap()
    }

    /// A value `up` recorded in its `env` file (ports, PIDs).
    pub fn env(&self, key: &str) -> String {
        let text = std::fs::read_to_string(self.dir().join("env")).unwrap();
        text.lines()
            .rev()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("{key} is not in the control plane's env"))
            .to_string()
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(ROOT)
            .args(args)
            .output()
            .expect("kubectl is on PATH (scripts/test builds the pinned one)")
    }

    /// Runs kubectl and fails the test with its output if it fails; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Applies a file's text given on stdin (server-side); the output, and whether it worked.
    pub fn apply_text(&self, text: &str) -> (bool, String) {
        self.pipe(&["apply", "--server-side", "-f", "-"], text)
    }

    /// kubectl with `text` on stdin; whether it worked, and its output.
    pub fn pipe(&self, args: &[&str], text: &str) -> (bool, String) {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(ROOT)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    pub fn established(&self, crd: &str) {
        self.ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=60s",
        ]);
    }

    /// What the API server says `user` may do: a SubjectAccessReview, for `verb` on
    /// `group/resource[/subresource]` in namespace `ns` (empty: all), of the object `name` (empty: any).
    pub fn can(&self, user: &str, verb: &str, resource: &str, ns: &str, name: &str) -> bool {
        let (group, resource) = resource.split_once('/').unwrap_or(("", resource));
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "resourceAttributes": {
                "verb": verb, "group": group, "resource": resource, "subresource": subresource,
                "namespace": ns, "name": name,
            }},
        });
        let (ok, out) = self.pipe(
            &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
            &review.to_string(),
        );
        assert!(ok, "the SubjectAccessReview failed: {out}");
        out.trim() == "true"
    }

    /// The API server's URL.
    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.env("APISERVER_PORT"))
    }

    /// The control plane's CA (it signs the API server's and the image API's certificates).
    pub fn ca_file(&self) -> PathBuf {
        self.dir().join("pki/ca.crt")
    }

    /// `kubectl get --raw path` with only `token` (no client certificate) as the credential.
    pub fn get_raw_as(&self, token: &str, path: &str) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", "/dev/null")
            .args([
                "get",
                "--raw",
                path,
                "--server",
                &self.server(),
                "--token",
                token,
            ])
            .arg(format!(
                "--certificate-authority={}",
                self.ca_file().display()
            ))
            .output()
            .unwrap()
    }

    /// A token for the ServiceAccount `ns/name` from the TokenRequest API.
    pub fn token(&self, ns: &str, name: &str) -> String {
        self.ok(&["create", "token", name, "-n", ns, "--duration=2h"])
            .trim()
            .to_string()
    }

    /// Writes a kubeconfig at `path` that reaches the API server as the ServiceAccount
    /// `imagegate-system/<name>` with a TokenRequest token, as a pod's mounted token would.
    pub fn service_account_kubeconfig(&self, name: &str, path: &Path) {
        let ca = std::fs::read(self.ca_file()).unwrap();
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: realcluster\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
             users:\n- name: {name}\n  user:\n    token: {token}\n\
             contexts:\n- name: {name}\n  context:\n    cluster: realcluster\n    user: {name}\n    namespace: imagegate-system\n\
             current-context: {name}\n",
            server = self.server(),
            token = self.token("imagegate-system", name),
        );
        std::fs::write(path, text).unwrap();
    }

    /// A kube client as admin (the `system:masters` certificate).
    pub async fn client(&self) -> kube::Client {
        imagegate::runtime::tls::install_crypto_provider();
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// The aggregated image API: its control API directly, the API through the real server.
    pub async fn image_api(&self) -> EmulatorServer {
        EmulatorServer::behind_api_server(
            format!("https://127.0.0.1:{}", self.env("IMAGE_API_PORT")),
            &std::fs::read(self.ca_file()).unwrap(),
            self.kubeconfig.clone(),
            self.client().await,
        )
    }

    /// `config/` (namespace, ServiceAccounts, RBAC, the ImagePromotion CRD; its Deployments are
    /// stored but never run, there is no kubelet) and Tekton's CustomRun CRD, established.
    pub fn install(&self) {
        self.ok(&["apply", "--server-side", "-k", "config/"]);
        self.customrun_crd();
    }

    /// Opts `ns` in, as `kubectl apply -k tekton/` does with its 330: the controller may write
    /// there.
    pub fn onboard(&self, ns: &str) {
        let (ok, out) = self.apply_text(&crate::support::rbac::onboarding(ns));
        assert!(ok, "{out}");
    }

    /// The namespace-scoped install: `config/` with the component `config/namespaced/`, from an
    /// overlay written as that component's comment says to write one, after the namespace
    /// `notebooks` its RoleBindings go to; and Tekton's CustomRun CRD, established.
    pub fn install_namespaced(&self) {
        self.ok(&["create", "namespace", "notebooks"]);
        let overlay = tempfile::tempdir().unwrap();
        // Kustomize takes no absolute path to a base: the way up from the overlay, then down.
        let up = "../".repeat(overlay.path().components().count() - 1);
        let root = format!("{up}{}", ROOT.trim_start_matches('/'));
        std::fs::write(
            overlay.path().join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
                 resources: [{root}/config]\ncomponents: [{root}/config/namespaced]\n"
            ),
        )
        .unwrap();
        self.ok(&[
            "apply",
            "--server-side",
            "-k",
            &overlay.path().to_string_lossy(),
        ]);
        self.customrun_crd();
    }

    /// Tekton's CustomRun CRD; both CRDs established.
    fn customrun_crd(&self) {
        self.ok(&[
            "apply",
            "--server-side",
            "-f",
            &crate::support::upstream::TEKTON_PIPELINE
                .dir()
                .join(crate::support::upstream::CUSTOMRUN_CRD)
                .to_string_lossy(),
        ]);
        self.established("imagepromotions.imagegate.dev");
        self.established("customruns.tekton.dev");
    }

    /// Every event of the audit log (the requests of ServiceAccounts, `up`'s audit policy).
    pub fn audit(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir().join("logs/audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Fails unless `user` made requests and none of them was refused with 403, naming each
    /// refused request. A kube-apiserver that is starting refuses requests until its RBAC caches
    /// are filled, before `/readyz` says it is ready: refusals received while it restarted
    /// ([`ControlPlane::restart_apiserver`]) are not the roles' doing, and are left out. Returns
    /// how many were left out.
    pub fn assert_never_forbidden(&self, user: &str) -> usize {
        let events = self.audit();
        let mine: Vec<&Value> = events
            .iter()
            .filter(|e| e["user"]["username"] == user)
            .collect();
        assert!(!mine.is_empty(), "the audit log has no request of {user}");
        let restarts = self.restarts.lock().unwrap().clone();
        let while_restarting = |e: &Value| {
            let at = e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&Utc));
            at.is_some_and(|at| restarts.iter().any(|(from, to)| *from <= at && at <= *to))
        };
        let (starting, refused): (Vec<&Value>, Vec<&Value>) = mine
            .iter()
            .copied()
            .filter(|e| e["responseStatus"]["code"] == 403)
            .partition(|e| while_restarting(e));
        let refused: Vec<String> = refused
            .iter()
            .map(|e| {
                format!(
                    "{} {} at {}: {}",
                    e["verb"],
                    e["requestURI"],
                    e["requestReceivedTimestamp"],
                    e["responseStatus"]["message"]
                )
            })
            .collect();
        assert!(
            refused.is_empty(),
            "{} of {} requests of {user} were refused (403):\n{}",
            refused.len(),
            mine.len(),
            refused.join("\n")
        );
        starting.len()
    }

    /// Stops kube-apiserver (every watch through it ends) and starts it again. With
    /// `compact_etcd`, while it is down, etcd's revision moves on and is compacted, so a watch
    /// resumed from any resourceVersion of before finds it too old: `410 Expired`.
    pub fn restart_apiserver(&self, compact_etcd: bool) {
        let mut cmd = Command::new(Path::new(ROOT).join("scripts/realcluster"));
        cmd.args(["restart", "kube-apiserver"]).arg(self.dir());
        if compact_etcd {
            cmd.arg("--compact-etcd");
        }
        let from = Utc::now();
        let out = cmd.output().expect("scripts/realcluster runs");
        assert!(
            out.status.success(),
            "scripts/realcluster restart failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.restarts.lock().unwrap().push((from, Utc::now()));
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = Command::new(Path::new(ROOT).join("scripts/realcluster"))
            .arg("down")
            .arg(&self.kubeconfig)
            .output();
    }
}
