//! Scenario 9: a publisher signs its builds (issue 32). The stream `jupyter-signed-notebook`
//! follows a real OCI registry (CNCF Distribution's, started here on loopback) where its
//! publisher pushes builds and signs them with the real cosign (cosign 3's default: a Sigstore
//! bundle as an OCI referrer, no transparency log); an ImagePromotion of the platform's requires
//! the publisher's key. An unsigned build is refused at `begin`, before anything validates it
//! (`SignatureMissing`: the served tag keeps its image, marked `UpdateFailed`); the next build,
//! signed, is validated and promoted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde_json::json;

use super::scenarios::{Timing, want_task};
use super::{NAMESPACE, World};
use crate::scenarios::Expect;
use crate::timeline::short_digest;

const STREAM: &str = "jupyter-signed-notebook";
const REPO: &str = "opendatahub/signed-notebook";
const POLICY: &str = "publisher-signed";

/// A program of this scenario, stopped when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A program on PATH (`scripts/realcluster demo` puts the registry and cosign there).
fn on_path(program: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("{program} is not on PATH (scripts/realcluster demo builds it)"))
}

/// The distribution registry on a free loopback port, its storage in `dir`.
async fn registry(dir: &Path) -> anyhow::Result<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let host = format!("127.0.0.1:{port}");
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nlog:\n  level: warn\n",
            dir.join("registry").display()
        ),
    )?;
    let child = std::process::Command::new(on_path("registry")?)
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

/// Pushes a one-layer build `label` as `host/REPO:latest`; its digest.
async fn push(host: &str, label: &str) -> anyhow::Result<String> {
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: Reference = format!("{host}/{REPO}:latest").parse()?;
    let layer = ImageLayer::oci_v1(format!("the {label} build").into_bytes(), None);
    let config = json!({"architecture": "amd64", "os": "linux",
        "config": {"User": "1001", "Labels": {"build": label}},
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

/// Runs cosign in `dir` (its key, its signing config, its TUF cache: offline).
fn cosign(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new(on_path("cosign")?)
        .args(args)
        .current_dir(dir)
        .env("COSIGN_PASSWORD", "")
        .env("TUF_ROOT", dir.join("tuf"))
        .env("HOME", dir)
        .output()
        .context("running cosign")?;
    if !out.status.success() {
        bail!(
            "cosign {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The stream: its candidate follows the publisher's registry (plain HTTP: `insecure`), and
/// `latest` serves the signed build `served`.
fn stream(host: &str, served: &str) -> String {
    let reference = format!("{host}/{REPO}@{served}");
    json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": STREAM, "namespace": NAMESPACE,
            "labels": {"opendatahub.io/notebook-image": "true"},
            "annotations": {"opendatahub.io/notebook-image-name": "Jupyter | Signed | CPU | Python 3.12",
                "opendatahub.io/notebook-image-order": "9"}},
        "spec": {"lookupPolicy": {"local": true}, "tags": [
            {"name": "candidate", "annotations": {"imagegate.dev/role": "candidate"},
             "from": {"kind": "DockerImage", "name": format!("{host}/{REPO}:latest")},
             "importPolicy": {"scheduled": true, "insecure": true, "importMode": "Legacy"},
             "referencePolicy": {"type": "Local"}},
            {"name": "latest",
             "from": {"kind": "ImageStreamImage", "name": format!("{STREAM}@{served}")},
             "importPolicy": {"importMode": "Legacy"}, "referencePolicy": {"type": "Local"}}]},
        "status": {"tags": [
            {"tag": "candidate", "items": [{"created": "2026-12-01T08:00:00Z",
                "dockerImageReference": reference, "generation": 1, "image": served}]},
            {"tag": "latest", "items": [{"created": "2026-12-01T08:05:00Z",
                "dockerImageReference": reference, "generation": 1, "image": served}]}]}
    })
    .to_string()
}

/// The platform's policy for the stream (the publisher's key), and the promoter's right to
/// promote through it (`tekton/310` grants it on `notebooks` only).
fn policy(public_key: &str) -> String {
    let promotion = json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": POLICY, "namespace": NAMESPACE},
        "spec": {"imageStream": STREAM,
            "signature": {"keys": [{"name": "publisher", "publicKey": public_key}]}}});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{POLICY}-promoter"), "namespace": NAMESPACE},
        "rules": [{"apiGroups": ["imagegate.dev"], "resources": ["imagepromotions"],
            "resourceNames": [POLICY], "verbs": ["promote"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{POLICY}-promoter"), "namespace": NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
            "name": format!("{POLICY}-promoter")},
        "subjects": [{"kind": "ServiceAccount", "name": "imagegate-pipeline", "namespace": NAMESPACE}]});
    json!({"apiVersion": "v1", "kind": "List", "items": [promotion, role, binding]}).to_string()
}

/// The shipped ImagePromotion `notebooks` (`tekton/100`) governs every stream of the namespace
/// and allows only its organisation's registries: the platform adds the publisher's.
pub(super) async fn allow_registry(w: &World, host: &str) -> anyhow::Result<String> {
    let current = w
        .cluster
        .kubectl(&[
            "get",
            "imagepromotion",
            "-n",
            NAMESPACE,
            "notebooks",
            "-o",
            "jsonpath={.spec.checks.allowedRegistries}",
        ])
        .await?;
    let mut allowed: Vec<String> = serde_json::from_str(current.trim()).unwrap_or_default();
    let publisher = format!("{host}/opendatahub");
    allowed.push(publisher.clone());
    let patch = json!({"spec": {"checks": {"allowedRegistries": allowed}}}).to_string();
    w.cluster
        .kubectl(&[
            "patch",
            "imagepromotion",
            "-n",
            NAMESPACE,
            "notebooks",
            "--type=merge",
            "-p",
            &patch,
        ])
        .await?;
    Ok(publisher)
}

pub(super) async fn play(w: &mut World, expect: &mut Vec<Expect>) -> anyhow::Result<Timing> {
    w.timeline.heading(
        "9. jupyter-signed-notebook's publisher signs its builds with cosign in its own registry: \
         an unsigned build is refused before it is validated, users keep the signed build; the \
         next, signed, is promoted",
    );
    let dir = tempfile::tempdir()?;
    let (_registry, host) = registry(dir.path()).await?;
    cosign(dir.path(), &["generate-key-pair"])?;
    cosign(
        dir.path(),
        &["signing-config", "create", "--out", "signing-config.json"],
    )?;
    let sign = |digest: &str| {
        let image = format!("{host}/{REPO}@{digest}");
        cosign(
            dir.path(),
            &[
                "sign",
                "--key",
                "cosign.key",
                "--signing-config",
                "signing-config.json",
                "--allow-http-registry",
                "--yes",
                &image,
            ],
        )
    };
    let first = push(&host, "first").await?;
    sign(&first)?;
    w.cluster.image_api("seed", stream(&host, &first)).await?;
    let public_key = std::fs::read_to_string(dir.path().join("cosign.pub"))?;
    w.cluster
        .kubectl_in(&["apply", "--server-side", "-f", "-"], &policy(&public_key))
        .await?;
    let allowed = allow_registry(w, &host).await?;
    // A workbench started from the build served now, as for the seeded streams.
    let streams: kube::Api<imagegate::api::ImageStream> =
        kube::Api::namespaced(w.admin.clone(), NAMESPACE);
    let seeded = streams.get(STREAM).await?;
    w.workbenches
        .extend(crate::dashboard::started(&[seeded], "latest"));
    w.timeline.line(
        "registry",
        format!(
            "the publisher's registry at {host}; {STREAM}:latest serves its signed build {}; \
             ImagePromotion {POLICY} requires its cosign key; notebooks' allowedRegistries adds \
             {allowed}",
            short_digest(&first)
        ),
    );

    let t = w.timed(9).await?;
    let unsigned = push(&host, "unsigned").await?;
    w.timeline.line(
        "registry",
        format!("pushed {} (not signed)", short_digest(&unsigned)),
    );
    let run = w.promote(STREAM, &unsigned, false).await?;
    want_task(w, &run, "begin", "False")?;
    let signed = push(&host, "signed").await?;
    sign(&signed)?;
    w.timeline.line(
        "registry",
        format!(
            "pushed {} and signed it (cosign sign --key)",
            short_digest(&signed)
        ),
    );
    let run = w.promote(STREAM, &signed, false).await?;
    want_task(w, &run, "promote", "True")?;
    expect.push(Expect::new(STREAM, signed, "Promoted"));
    w.done_timing(t).await
}
