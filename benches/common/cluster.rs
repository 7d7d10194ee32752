//! The real control plane the real-tier benchmarks run on: `scripts/realcluster up`
//! (kube-apiserver and etcd on loopback, the image API aggregated from the emulator), stopped
//! (`down`) on drop; kubectl as admin, TokenRequest kubeconfigs for ServiceAccounts, the image
//! API's control API (seed, import, compact, drop watches, faults) and the audit log.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A control plane from `scripts/realcluster up`, stopped (`down`) on drop.
pub struct Cluster {
    kubeconfig: PathBuf,
}

impl Cluster {
    /// Starts one. The image API is `IMAGEGATE_EMULATOR`, else the workspace's release build
    /// when there is one (else `scripts/realcluster` builds the debug one).
    pub fn up() -> Cluster {
        Self::up_with(&[], &[])
    }

    /// Starts one with `up`'s `args` (`--tekton`) and `env` added.
    pub fn up_with(args: &[&str], env: &[(&str, &str)]) -> Cluster {
        let mut cmd = Command::new(Path::new(ROOT).join("scripts/realcluster"));
        cmd.arg("up").args(args).envs(env.iter().copied());
        let release = Path::new(ROOT).join("target/release/imagegate-emulator");
        if std::env::var_os("IMAGEGATE_EMULATOR").is_none() && release.exists() {
            cmd.env("IMAGEGATE_EMULATOR", &release);
        }
        let out = cmd.output().expect("scripts/realcluster runs");
        assert!(
            out.status.success(),
            "scripts/realcluster up failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Cluster { kubeconfig }
    }

    /// The directory `up` keeps everything in.
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

    /// kubectl as admin; its stdout. Panics with its output when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_stdin(args, "")
    }

    /// kubectl as admin with `stdin` on its standard input (`apply -f -`); its stdout.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> String {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(ROOT)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl is on PATH (scripts/realcluster bin kubectl)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A kubeconfig (written to `file` in the cluster's directory) for ServiceAccount
    /// `ns/name`, with a TokenRequest token.
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str, file: &str) -> PathBuf {
        let token = self.kubectl(&["create", "token", name, "-n", ns, "--duration=2h"]);
        let mut config: Value = serde_json::from_str(
            &self.kubectl(&["config", "view", "--raw", "--minify", "-o", "json"]),
        )
        .unwrap();
        config["users"][0]["user"] = serde_json::json!({"token": token.trim()});
        let path = self.dir().join(file);
        std::fs::write(&path, config.to_string()).unwrap();
        path
    }

    /// A kube client as admin.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// A call to the image API's control API (`/_emulator/v1/{path}`); panics unless 2xx.
    pub async fn control(&self, method: reqwest::Method, path: &str, body: Option<String>) {
        let ca = std::fs::read(self.dir().join("pki/ca.crt")).unwrap();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        let url = format!(
            "https://127.0.0.1:{}/_emulator/v1/{path}",
            self.env("IMAGE_API_PORT")
        );
        let mut req = http.request(method, url);
        if let Some(b) = body {
            req = req.body(b);
        }
        let resp = req.send().await.unwrap();
        let code = resp.status();
        assert!(
            code.is_success(),
            "control {path}: {code} {}",
            resp.text().await.unwrap_or_default()
        );
    }

    /// Stores ImageStreams (YAML) in the image API through its control API.
    pub async fn seed(&self, yaml: String) {
        self.control(reqwest::Method::POST, "seed", Some(yaml))
            .await;
    }

    /// A scheduled import of `digest` into `ns/is:tag`.
    pub async fn import(&self, ns: &str, is: &str, tag: &str, digest: &str) {
        let body = serde_json::json!({"tag": tag, "digest": digest}).to_string();
        let path = format!("namespaces/{ns}/imagestreams/{is}/import");
        self.control(reqwest::Method::POST, &path, Some(body)).await;
    }

    /// The audit log's events from byte `from` on.
    pub fn audit_since(&self, from: u64) -> Vec<Value> {
        let text = std::fs::read(self.dir().join("logs/audit.log")).unwrap_or_default();
        let tail = text.get(from as usize..).unwrap_or_default();
        String::from_utf8_lossy(tail)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The audit log's length now, for [`Cluster::audit_since`].
    pub fn audit_len(&self) -> u64 {
        std::fs::metadata(self.dir().join("logs/audit.log")).map_or(0, |m| m.len())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(Path::new(ROOT).join("scripts/realcluster"))
            .arg("down")
            .arg(&self.kubeconfig)
            .output();
    }
}
