//! Scenario 10: a push starts validation in seconds (issue 33). The stream
//! `jupyter-pushed-notebook` follows a real OCI registry (CNCF Distribution's, started here on
//! loopback) whose notifications go to `imagegate receiver` (run as its own ServiceAccount with
//! `config/receiver`'s RBAC); the image API imports from that registry for real. The publisher
//! pushes a build: the registry tells the receiver, the receiver asks for an import now (an
//! ImageStreamImport through the real kube-apiserver), the image API reads the registry, the
//! source reports the new candidate, and the pipeline validates and promotes it, without a
//! scheduled import or an `imagegate import` by hand.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;

use super::programs::Program;
use super::scenarios::{Timing, want_task};
use super::{NAMESPACE, World};
use crate::scenarios::Expect;
use crate::timeline::short_digest;

const STREAM: &str = "jupyter-pushed-notebook";
const REPO: &str = "opendatahub/pushed-notebook";

/// A program of this scenario, stopped when dropped.
pub(super) struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The distribution registry on a free loopback port, its storage in `dir`, sending its
/// notifications to `notify` (a URL and the receiver's secret), or none.
pub(super) async fn registry(
    dir: &Path,
    notify: Option<(&str, &str)>,
) -> anyhow::Result<(Child, String)> {
    let host = format!("127.0.0.1:{}", free_port()?);
    let config = dir.join("registry.yml");
    let notifications = notify.map_or(String::new(), |(url, token)| {
        format!(
            "notifications:\n  endpoints:\n  - name: imagegate\n    url: {url}\n    headers:\n      Authorization: [\"Bearer {token}\"]\n    timeout: 2s\n    threshold: 3\n    backoff: 1s\n"
        )
    });
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nlog:\n  level: warn\n{notifications}",
            dir.join("registry").display()
        ),
    )?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let program = std::env::split_paths(&path)
        .map(|d| d.join("registry"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("registry is not on PATH (scripts/realcluster demo builds it)"))?;
    let child = std::process::Command::new(program)
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the registry")?;
    let child = Child(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("http://{host}/v2/")).await.is_err() {
        if Instant::now() > deadline {
            bail!("the registry did not answer on {host} within 20 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((child, host))
}

/// Pushes build `label` of stream `name` as `host/repo:latest`, a notebook image as the
/// platform's checks want it (non-root, amd64, built now); its digest.
pub(super) async fn push(
    host: &str,
    repo: &str,
    name: &str,
    label: &str,
) -> anyhow::Result<String> {
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: Reference = format!("{host}/{repo}:latest").parse()?;
    let layer = ImageLayer::oci_v1(format!("the {label} build").into_bytes(), None);
    let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let config = json!({"architecture": "amd64", "os": "linux", "created": created,
        "config": {"User": "1001", "Labels": {"build": label, "io.k8s.display-name": name,
                                               "vendor": "Open Data Hub"}},
        "rootfs": {"type": "layers", "diff_ids": []}});
    let config = Config::oci_v1(serde_json::to_vec(&config)?, None);
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    let pushed = client
        .push(
            &reference,
            &[layer],
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await?;
    Ok(pushed
        .manifest_url
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string())
}

/// Stream `name`: its candidate follows the publisher's registry (plain HTTP: `insecure`;
/// `scheduled` or not), and `latest` serves build `served`.
pub(super) fn stream(name: &str, host: &str, repo: &str, served: &str, scheduled: bool) -> String {
    let reference = format!("{host}/{repo}@{served}");
    json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": name, "namespace": NAMESPACE,
            "annotations": {"openshift.io/image.dockerRepositoryCheck": "2026-12-01T08:00:00Z"}},
        "spec": {"lookupPolicy": {"local": true}, "tags": [
            {"name": "candidate", "annotations": {"imagegate.dev/role": "candidate"},
             "from": {"kind": "DockerImage", "name": format!("{host}/{repo}:latest")},
             "generation": 1,
             "importPolicy": {"insecure": true, "scheduled": scheduled, "importMode": "Legacy"},
             "referencePolicy": {"type": "Local"}},
            {"name": "latest",
             "from": {"kind": "ImageStreamImage", "name": format!("{name}@{served}")},
             "generation": 1,
             "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Local"}}]},
        "status": {"tags": [
            {"tag": "candidate", "items": [{"created": "2026-12-01T08:00:00Z",
                "dockerImageReference": reference, "generation": 1, "image": served}]},
            {"tag": "latest", "items": [{"created": "2026-12-01T08:05:00Z",
                "dockerImageReference": reference, "generation": 1, "image": served}]}]}
    })
    .to_string()
}

pub(super) async fn play(w: &mut World, expect: &mut Vec<Expect>) -> anyhow::Result<Timing> {
    w.timeline.heading(
        "10. jupyter-pushed-notebook's publisher pushes a build: its registry notifies imagegate \
         receiver, which has it imported at once; validated and promoted with no scheduled import",
    );
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let notify = format!("http://127.0.0.1:{port}/v1/distribution");
    let (_registry, host) = registry(dir.path(), Some((&notify, &token))).await?;
    // The image API reads this registry for real from now on (it started before it).
    w.cluster
        .image_api("registries", json!({"host": host}).to_string())
        .await?;
    let rbac = w.root.join("config/receiver/200-rbac.yaml");
    w.cluster
        .kubectl(&["apply", "--server-side", "-f", &rbac.to_string_lossy()])
        .await?;
    let secret = dir.path().join("distribution");
    std::fs::write(&secret, &token)?;
    let receiver = Program::start(
        "receiver",
        &w.cluster,
        &w.imagegate,
        "imagegate-receiver",
        &[
            "receiver",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--distribution-secret-file",
            &secret.to_string_lossy(),
        ],
    )
    .await?;
    let first = push(&host, REPO, STREAM, "first").await?;
    w.cluster
        .image_api("seed", stream(STREAM, &host, REPO, &first, false))
        .await?;
    let allowed = super::signature::allow_registry(w, &host).await?;
    w.timeline.line(
        "registry",
        format!(
            "the publisher's registry at {host} notifies imagegate receiver (config/receiver); \
             {STREAM}:latest serves {}; notebooks' allowedRegistries adds {allowed}",
            short_digest(&first)
        ),
    );

    let t = w.timed(10).await?;
    let second = push(&host, REPO, STREAM, "second").await?;
    let pushed = Instant::now();
    w.timeline.line(
        "registry",
        format!(
            "pushed {} as {REPO}:latest; nobody imports it by hand",
            short_digest(&second)
        ),
    );
    let run = w.triggered(STREAM, &second).await?;
    w.timeline.line(
        "receiver",
        format!(
            "the push reached PipelineRun {run} in {:.1} s (notification, import now, event)",
            pushed.elapsed().as_secs_f64()
        ),
    );
    let done = w.run_done(&run).await?;
    want_task(w, &done, "promote", "True")?;
    expect.push(Expect::new(STREAM, second, "Promoted"));
    receiver.stop().await?;
    w.done_timing(t).await
}
