//! A control plane from `scripts/realcluster up` (etcd, kube-apiserver, and the image API
//! aggregated from `imagegate-emulator --serve-image-api-only`), stopped on drop, and what the
//! tests do with it: kubectl as admin, SubjectAccessReviews, ServiceAccount tokens from the
//! TokenRequest API.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The ServiceAccount user `config/` runs the source as.
pub const SOURCE_SA: &str = "system:serviceaccount:imagegate-system:imagegate-source";

/// A control plane started by `scripts/realcluster up`, stopped (`down`) on drop.
pub struct ControlPlane {
    /// The admin kubeconfig `up` printed.
    pub kubeconfig: PathBuf,
}

/// The `imagegate-emulator` binary the workspace built beside this test binary
/// (`target/debug/deps/it-*` → `target/debug/imagegate-emulator`).
fn emulator_binary() -> PathBuf {
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

    /// `config/` (namespace, ServiceAccounts, RBAC, the ImagePromotion CRD; its Deployments are
    /// stored but never run, there is no kubelet) and Tekton's CustomRun CRD, established.
    pub fn install(&self) {
        self.ok(&["apply", "--server-side", "-k", "config/"]);
        self.ok(&[
            "apply",
            "--server-side",
            "-f",
            "tests/crds/tekton-pipeline_300-customrun.yaml",
        ]);
        self.established("imagepromotions.imagegate.dev");
        self.established("customruns.tekton.dev");
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
