//! The cluster `scripts/realcluster up --tekton DIR` started, as the real demo reaches it: kubectl
//! as admin (`DIR/admin.kubeconfig`), a kube client as admin, a kubeconfig per ServiceAccount
//! with a TokenRequest token (what a pod would mount), and the image API's control endpoint (the
//! aggregated `imagegate-emulator`, reached directly over HTTPS with the cluster's CA), where a
//! scheduled import is simulated.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::Value;

/// The cluster of `up --tekton DIR`.
pub struct Cluster {
    /// Where `up` keeps everything (`logs/`, `env`, `pki/`).
    pub dir: PathBuf,
    /// The admin kubeconfig (`system:masters`).
    pub kubeconfig: PathBuf,
    http: reqwest::Client,
    image_api: String,
}

/// The value of `key` in the `env` file `up` writes (`KEY=VALUE` lines, the last one wins).
pub fn env_value(env: &str, key: &str) -> Option<String> {
    env.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v.to_string())
        .next_back()
}

impl Cluster {
    /// The cluster in `dir`, which must be ready.
    pub fn open(dir: &Path) -> anyhow::Result<Cluster> {
        let env = std::fs::read_to_string(dir.join("env")).with_context(|| {
            format!(
                "{} is not a cluster of `scripts/realcluster up --tekton` (no env file)",
                dir.display()
            )
        })?;
        let port = env_value(&env, "IMAGE_API_PORT")
            .ok_or_else(|| anyhow!("{}/env names no IMAGE_API_PORT", dir.display()))?;
        let ca = std::fs::read(dir.join("pki/ca.crt")).context("the cluster's CA")?;
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
            .timeout(Duration::from_secs(30))
            .build()?;
        Ok(Cluster {
            dir: dir.to_path_buf(),
            kubeconfig: dir.join("admin.kubeconfig"),
            http,
            image_api: format!("https://127.0.0.1:{port}"),
        })
    }

    /// kubectl as admin with `args` and `stdin`; its stdout, or an error with its output.
    pub async fn kubectl_in(&self, args: &[&str], stdin: &str) -> anyhow::Result<String> {
        kubectl(&self.kubeconfig, args, stdin).await
    }

    /// kubectl as admin with `args`.
    pub async fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        self.kubectl_in(args, "").await
    }

    /// A kube client as admin.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        client_from(&self.kubeconfig).await
    }

    /// Writes a kubeconfig for ServiceAccount `ns/sa` to `path`, with a token from the
    /// TokenRequest API (as a pod's projected token would be), and returns `path`.
    pub async fn kubeconfig_of(&self, ns: &str, sa: &str, path: &Path) -> anyhow::Result<()> {
        let token = self
            .kubectl(&["create", "token", "-n", ns, sa, "--duration=2h"])
            .await?;
        let server = self
            .kubectl(&[
                "config",
                "view",
                "--minify",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ])
            .await?;
        let ca = std::fs::read(self.dir.join("pki/ca.crt"))?;
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: realcluster\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\n\
             users:\n- name: {sa}\n  user:\n    token: {token}\n\
             contexts:\n- name: {sa}\n  context:\n    cluster: realcluster\n    user: {sa}\n    namespace: {ns}\n\
             current-context: {sa}\n",
            server = server.trim(),
            token = token.trim(),
        );
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    /// A call to the image API's control endpoint (`/_emulator/v1/<path>`).
    pub async fn image_api(&self, path: &str, body: String) -> anyhow::Result<Value> {
        let url = format!(
            "{}{}{path}",
            self.image_api,
            imagegate_emulator::control::PREFIX
        );
        let resp = self
            .http
            .post(&url)
            .body(body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let code = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if !code.is_success() {
            bail!("POST {url}: {code} {v}");
        }
        Ok(v)
    }

    /// The last lines of a component's log in `logs/` (for an error's message).
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join("logs").join(format!("{name}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

/// kubectl with `kubeconfig`, `args` and `stdin`.
pub async fn kubectl(kubeconfig: &Path, args: &[&str], stdin: &str) -> anyhow::Result<String> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("kubectl")
        .env("KUBECONFIG", kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("kubectl is not on PATH (scripts/realcluster demo puts the pinned one there)")?;
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).await?;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .map_err(|_| anyhow!("kubectl {args:?} did not finish within 60 s"))??;
    if !out.status.success() {
        bail!(
            "kubectl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A kube client from a kubeconfig file.
pub async fn client_from(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    imagegate::runtime::tls::install_crypto_provider();
    let config = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Polls `check` every 200 ms until it yields a value; fails naming `what` after `limit`.
pub async fn until<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            bail!("{what} did not happen within {} s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_value_of_a_key_in_the_env_file_wins() {
        let env = "ETCD_PORT=1\nIMAGE_API_PORT=2\nIMAGE_API_PORT=3\n";
        assert_eq!(env_value(env, "IMAGE_API_PORT").as_deref(), Some("3"));
        assert_eq!(env_value(env, "NOPE"), None);
    }
}
