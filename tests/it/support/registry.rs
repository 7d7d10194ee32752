//! A real OCI registry (CNCF Distribution's `registry`, built from its Go module by
//! `scripts/realcluster bin registry`) and the real `cosign` (`scripts/realcluster bin cosign`),
//! both found on PATH as scripts/test puts them there: images are pushed over the registry API
//! (with `oci-client`) and signed the way a publisher signs them. A missing binary fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::free_port;
use super::process::Process;

/// A registry on 127.0.0.1 over plain HTTP, with its storage in a temporary directory.
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// What pushes and cosign authenticate with, where the registry asks.
    auth: RegistryAuth,
    _process: Process,
    _dir: tempfile::TempDir,
}

pub fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{program} is not on PATH: scripts/test puts it there \
                 (PATH=\"$(scripts/realcluster bin {program}):$PATH\")"
            )
        })
}

impl Registry {
    /// Starts a registry and waits until it answers `/v2/`.
    pub async fn start() -> Registry {
        Self::start_with(None).await
    }

    /// Starts a registry that answers only `user` with `password` (htpasswd, bcrypt), as a
    /// private registry does: anonymous requests get 401 with a Basic challenge.
    pub async fn start_with_basic_auth(user: &str, password: &str) -> Registry {
        Self::start_with(Some((user, password))).await
    }

    /// Starts a registry that asks for a Bearer token from `tokens` (the Docker registry token
    /// flow): anonymous requests get 401 with a Bearer challenge naming its realm; `user` with
    /// `password` gets a token there.
    pub async fn start_with_token_auth(
        tokens: &super::token_server::TokenServer,
        user: &str,
        password: &str,
    ) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, tokens.jwks().to_string()).unwrap();
        let auth = format!(
            "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    jwks: {}\n",
            tokens.realm,
            super::token_server::SERVICE,
            super::token_server::ISSUER,
            jwks.display()
        );
        let mut registry = Self::start_in(dir, Some(auth)).await;
        registry.auth = RegistryAuth::Basic(user.into(), password.into());
        registry
    }

    /// Starts a registry that sends its notifications (every push, pull and delete) to `url`
    /// with `Authorization: Bearer <token>`, as a registry's `notifications.endpoints` does.
    pub async fn start_with_notifications(url: &str, token: &str) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let notify = format!(
            "notifications:\n  endpoints:\n  - name: imagegate\n    url: {url}\n    headers:\n      Authorization: [\"Bearer {token}\"]\n    timeout: 2s\n    threshold: 3\n    backoff: 1s\n"
        );
        Self::start_in(dir, Some(notify)).await
    }

    async fn start_with(basic: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let auth = basic.map(|(user, password)| {
            let htpasswd = dir.path().join("htpasswd");
            let hash = bcrypt::hash(password, 4).unwrap();
            std::fs::write(&htpasswd, format!("{user}:{hash}\n")).unwrap();
            format!(
                "auth:\n  htpasswd:\n    realm: imagegate-test\n    path: {}\n",
                htpasswd.display()
            )
        });
        let mut registry = Self::start_in(dir, auth).await;
        if let Some((user, password)) = basic {
            registry.auth = RegistryAuth::Basic(user.into(), password.into());
        }
        registry
    }

    /// Starts a registry keeping its storage in `dir`, with `auth` (its config's `auth:`
    /// section) if given; it pushes anonymously until the caller says otherwise.
    async fn start_in(dir: tempfile::TempDir, auth: Option<String>) -> Registry {
        let port = free_port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        let mut yaml = format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\nlog:\n  level: warn\n",
            dir.path().join("data").display()
        );
        if let Some(auth) = auth {
            yaml.push_str(&auth);
        }
        std::fs::write(&config, yaml).unwrap();
        let mut command = Command::new(on_path("registry"));
        command.arg("serve").arg(&config);
        let process = Process::start(format!("registry {host}"), command);
        let deadline = Instant::now() + Duration::from_secs(20);
        let http = reqwest::Client::new();
        loop {
            let up = http.get(format!("http://{host}/v2/")).send().await;
            // 401: up, and asking for credentials.
            if up.is_ok_and(|r| r.status().is_success() || r.status() == 401) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not answer /v2/ within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Registry {
            host,
            auth: RegistryAuth::Anonymous,
            _process: process,
            _dir: dir,
        }
    }

    fn client() -> Client {
        Client::new(ClientConfig {
            protocol: ClientProtocol::Http,
            ..ClientConfig::default()
        })
    }

    /// A strategic-merge patch of an ImageStream whose `candidate` tag then follows
    /// `<repo>:latest` here, imported on schedule over plain HTTP (`insecure`).
    pub fn candidate_follows(&self, repo: &str) -> serde_json::Value {
        serde_json::json!({"spec": {"tags": [{"name": "candidate",
            "from": {"kind": "DockerImage", "name": format!("{}/{repo}:latest", self.host)},
            "importPolicy": {"scheduled": true, "insecure": true}}]}})
    }

    /// Pushes a one-layer image whose config carries `label` under `repo:tag` and returns its
    /// manifest digest.
    pub async fn push(&self, repo: &str, tag: &str, label: &str) -> String {
        let reference: Reference = format!("{}/{repo}:{tag}", self.host).parse().unwrap();
        let layer = ImageLayer::oci_v1(format!("layer of {label}").into_bytes(), None);
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Labels": {"build": label}},
            "rootfs": {"type": "layers", "diff_ids": []}
        });
        let config = Config::oci_v1(serde_json::to_vec(&config).unwrap(), None);
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let pushed = Self::client()
            .push(&reference, &[layer], config, &self.auth, Some(manifest))
            .await
            .unwrap();
        let digest = pushed.manifest_url.rsplit('/').next().unwrap().to_string();
        assert!(digest.starts_with("sha256:"), "{}", pushed.manifest_url);
        digest
    }

    /// The raw manifest of `repo:tag_or_digest`, and its media type.
    pub async fn manifest(&self, repo: &str, reference: &str) -> (Vec<u8>, String) {
        let r = reqwest::Client::new()
            .get(format!("http://{}/v2/{repo}/manifests/{reference}", self.host))
            .header(
                "Accept",
                "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json",
            )
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "GET manifest {reference}: {}",
            r.status()
        );
        let media = r.headers()["content-type"].to_str().unwrap().to_string();
        (r.bytes().await.unwrap().to_vec(), media)
    }

    /// Puts a raw manifest under `repo:tag`.
    pub async fn put_manifest(&self, repo: &str, tag: &str, body: Vec<u8>, media: &str) {
        let r = reqwest::Client::new()
            .put(format!("http://{}/v2/{repo}/manifests/{tag}", self.host))
            .header("Content-Type", media)
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "PUT manifest {tag}: {}",
            r.status()
        );
    }

    /// The blob `digest` of `repo`.
    pub async fn blob(&self, repo: &str, digest: &str) -> Vec<u8> {
        let r = reqwest::Client::new()
            .get(format!("http://{}/v2/{repo}/blobs/{digest}", self.host))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET blob {digest}: {}", r.status());
        r.bytes().await.unwrap().to_vec()
    }

    /// Uploads `data` as a blob of `repo` (monolithic), returning its digest.
    pub async fn put_blob(&self, repo: &str, data: Vec<u8>) -> String {
        use sha2::Digest as _;
        let digest = format!("sha256:{:x}", sha2::Sha256::digest(&data));
        let http = reqwest::Client::new();
        let started = http
            .post(format!("http://{}/v2/{repo}/blobs/uploads/", self.host))
            .send()
            .await
            .unwrap();
        assert_eq!(started.status(), 202, "blob upload start");
        let location = started.headers()["location"].to_str().unwrap().to_string();
        let url = if location.starts_with("http") {
            location
        } else {
            format!("http://{}{location}", self.host)
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        let put = http
            .put(format!("{url}{sep}digest={digest}"))
            .header("Content-Type", "application/octet-stream")
            .body(data)
            .send()
            .await
            .unwrap();
        assert!(put.status().is_success(), "blob upload: {}", put.status());
        digest
    }

    /// The tags of `repo`.
    pub async fn tags(&self, repo: &str) -> Vec<String> {
        let r: serde_json::Value = reqwest::Client::new()
            .get(format!("http://{}/v2/{repo}/tags/list", self.host))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        serde_json::from_value(r["tags"].clone()).unwrap_or_default()
    }
}

/// A cosign key pair in a temporary directory, made by `cosign generate-key-pair` (no password).
pub struct Cosign {
    dir: tempfile::TempDir,
}

impl Cosign {
    pub fn generate() -> Cosign {
        let dir = tempfile::tempdir().unwrap();
        let out = Self::command(dir.path())
            .arg("generate-key-pair")
            .output()
            .unwrap();
        assert!(out.status.success(), "cosign generate-key-pair: {out:?}");
        Cosign { dir }
    }

    fn command(dir: &Path) -> Command {
        let mut command = Command::new(on_path("cosign"));
        command
            .current_dir(dir)
            .env("COSIGN_PASSWORD", "")
            // Offline: cosign's TUF cache stays in the test's directory.
            .env("TUF_ROOT", dir.join("tuf"))
            .env("HOME", dir);
        command
    }

    /// The public key, PEM.
    pub fn public_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("cosign.pub")).unwrap()
    }

    /// Signs `image` with the simple-signing format, logging in to its registry as `user`.
    pub fn sign_as(&self, image: &str, user: &str, password: &str) {
        let out = Self::command(self.dir.path())
            .args([
                "sign",
                "--key",
                "cosign.key",
                "--new-bundle-format=false",
                "--use-signing-config=false",
                "--tlog-upload=false",
                "--allow-http-registry",
                "--registry-username",
                user,
                "--registry-password",
                password,
                "--yes",
                image,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "cosign sign {image}: {out:?}");
    }

    /// Signs `image` as cosign 3 does by default: a Sigstore bundle (DSSE over an in-toto
    /// statement) attached as an OCI 1.1 referrer (the referrers tag `sha256-<hex>`, since the
    /// distribution registry has no referrers API), with a signing config that names no
    /// transparency log (offline).
    pub fn sign_bundle(&self, image: &str) {
        let dir = self.dir.path();
        if !dir.join("signing-config.json").exists() {
            let out = Self::command(dir)
                .args(["signing-config", "create", "--out", "signing-config.json"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "cosign signing-config create: {out:?}"
            );
        }
        let out = Self::command(dir)
            .args([
                "sign",
                "--key",
                "cosign.key",
                "--signing-config",
                "signing-config.json",
                "--allow-http-registry",
                "--yes",
                image,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "cosign sign {image}: {out:?}");
    }

    /// Signs `image` (`host/repo@sha256:...`) as cosign 2 did and cosign 3 still does on request:
    /// a simple-signing payload under the `sha256-<hex>.sig` tag, no transparency log.
    pub fn sign(&self, image: &str) {
        let out = Self::command(self.dir.path())
            .args([
                "sign",
                "--key",
                "cosign.key",
                "--new-bundle-format=false",
                "--use-signing-config=false",
                "--tlog-upload=false",
                "--allow-http-registry",
                "--yes",
                image,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "cosign sign {image}: {out:?}");
    }
}
