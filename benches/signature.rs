//! What a signature policy adds to a promotion (issue 32): the same promotions, one at a time,
//! create to final, with no policy, with a policy met by cosign's `.sig` tag (simple signing),
//! with one met by cosign 3's default bundle (a referrer), and with a keyless one met by a bundle
//! from a private Sigstore (the real Fulcio, Rekor v2 and timestamp authority, as the keyless tests
//! start them), all in one run against the emulator (in the bench process) and a real registry
//! (CNCF Distribution) the candidates are pushed to and signed in by the real cosign; and the
//! registry requests each promotion makes, counted in the registry's own log. Not a test: it
//! prints a report (the numbers go into BENCHMARKS.md).
//!
//! `PATH="$(scripts/realcluster bin registry cosign fulcio rekor-server timestamp-server):$PATH"
//! cargo bench --bench signature` (RUNS=40 per phase by default).

mod common;

// The keyless tests' private Sigstore (tests/it/support/sigstore.rs), included by path with what
// it uses from its parent: `free_port`, `process::Process`, `registry::on_path`.
use common::free_port;
// Only what the Sigstore uses of them is used here.
#[allow(dead_code)]
#[path = "../tests/it/support/process.rs"]
mod process;
mod registry {
    pub use crate::on_path;
}
#[path = "../tests/it/support/sigstore.rs"]
mod sigstore;

use common::{Killed, ms, percentile, sorted};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use imagegate::api::CustomRun;
use imagegate_emulator::{Config, Emulator};
use kube::api::{Api, PostParams};
use oci_client::client::{ClientConfig, ClientProtocol, Config as ImageConfig, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use serde_json::json;

const REPO: &str = "bench/app";

pub fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH (scripts/realcluster bin {program})"))
}

/// The registry on loopback, logging every request to `log`.
struct Registry {
    host: String,
    log: PathBuf,
    _process: Killed,
}

impl Registry {
    async fn start(dir: &Path) -> Registry {
        let host = format!("127.0.0.1:{}", common::free_port());
        let config = dir.join("registry.yml");
        let data = dir.join("registry");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nlog:\n  level: info\n  formatter: json\n",
                data.display()
            ),
        )
        .unwrap();
        let log = dir.join("registry.log");
        let out = std::fs::File::create(&log).unwrap();
        let process = Killed::new(
            Command::new(on_path("registry"))
                .arg("serve")
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(out)
                .spawn()
                .unwrap(),
        );
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !(http.get(format!("http://{host}/v2/")).send().await)
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "the registry never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Registry {
            host,
            log,
            _process: process,
        }
    }

    /// The requests the registry has answered so far (its "response completed" lines): method,
    /// path with digests and upload ids cut to their kind, and status.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("response completed"))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap_or_default();
                let uri = v["http.request.uri"].as_str().unwrap_or_default();
                let path = uri.split('?').next().unwrap_or_default();
                let shape: Vec<&str> = (path.split('/'))
                    .map(|p| match p {
                        p if p.starts_with("sha256:") => "<digest>",
                        p if p.starts_with("sha256-") && p.ends_with(".sig") => "<digest>.sig",
                        p if p.starts_with("sha256-") => "<referrers tag>",
                        p => p,
                    })
                    .collect();
                format!(
                    "{} {} {}",
                    v["http.request.method"].as_str().unwrap_or_default(),
                    shape.join("/"),
                    v["http.response.status"]
                )
            })
            .collect()
    }

    async fn push(&self, label: &str) -> String {
        let client = oci_client::Client::new(ClientConfig {
            protocol: ClientProtocol::Http,
            ..ClientConfig::default()
        });
        let reference: oci_client::Reference =
            format!("{}/{REPO}:{label}", self.host).parse().unwrap();
        let layer = ImageLayer::oci_v1(label.as_bytes().to_vec(), None);
        let config = json!({"architecture": "amd64", "os": "linux", "config": {},
            "rootfs": {"type": "layers", "diff_ids": []}});
        let config = ImageConfig::oci_v1(serde_json::to_vec(&config).unwrap(), None);
        let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
        let pushed = client
            .push(
                &reference,
                &[layer],
                config,
                &RegistryAuth::Anonymous,
                Some(manifest),
            )
            .await
            .unwrap();
        pushed.manifest_url.rsplit('/').next().unwrap().to_string()
    }
}

fn cosign(dir: &Path, args: &[&str]) {
    let out = Command::new(on_path("cosign"))
        .current_dir(dir)
        .env("COSIGN_PASSWORD", "")
        .env("TUF_ROOT", dir.join("tuf"))
        .env("HOME", dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "cosign {args:?}: {out:?}");
}

/// The phases: a namespace each, with its candidates signed as the phase says.
#[derive(Clone, Copy, PartialEq)]
enum Phase {
    NoPolicy,
    SigTag,
    Bundle,
    Keyless,
}

impl Phase {
    fn namespace(self) -> &'static str {
        match self {
            Phase::NoPolicy => "plain",
            Phase::SigTag => "sigtag",
            Phase::Bundle => "bundle",
            Phase::Keyless => "keyless",
        }
    }
}

fn main() {
    common::run(bench());
}

async fn bench() {
    let runs = common::env_usize("RUNS", 40);
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(dir.path()).await;
    cosign(dir.path(), &["generate-key-pair"]);
    cosign(
        dir.path(),
        &["signing-config", "create", "--out", "signing-config.json"],
    );
    let public_key = std::fs::read_to_string(dir.path().join("cosign.pub")).unwrap();
    let sigstore = sigstore::Sigstore::start().await;

    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str(include_str!("../config/300-imagepromotion-crd.yaml"))
        .unwrap();
    emu.seed_str(include_str!("../config/204-clusterrole-promoter.yaml"))
        .unwrap();
    let phases = [
        Phase::NoPolicy,
        Phase::SigTag,
        Phase::Bundle,
        Phase::Keyless,
    ];
    let served = registry.push("served").await;
    let t_setup = Instant::now();
    for phase in phases {
        let ns = phase.namespace();
        emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
        emu.seed_str(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: promoter, namespace: {ns}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-promoter}}\n\
             subjects:\n- {{kind: ServiceAccount, name: default, namespace: {ns}}}\n"
        ))
        .unwrap();
        if phase == Phase::Keyless {
            emu.seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "sigstore-root", "namespace": "imagegate-system"},
                "data": {"trusted_root.json": sigstore.trusted_root}}))
                .unwrap();
            emu.seed(json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
                "metadata": {"name": "signed", "namespace": ns},
                "spec": {"signature": {"keyless": {
                    "trustedRoot": {"configMapKeyRef": {"name": "sigstore-root", "key": "trusted_root.json"}},
                    "identities": [{"name": "release", "issuer": sigstore.issuer,
                        "subject": "release@example.com"}]}}}}))
                .unwrap();
        } else if phase != Phase::NoPolicy {
            emu.seed(
                json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
                "metadata": {"name": "signed", "namespace": ns},
                "spec": {"signature": {"keys": [{"name": "publisher", "publicKey": public_key}]}}}),
            )
            .unwrap();
        }
    }
    // One stream per run, its candidate pushed (and signed where the phase asks) beforehand.
    let mut candidates = Vec::new();
    for phase in phases {
        let ns = phase.namespace();
        for i in 0..runs {
            let digest = registry.push(&format!("{ns}-{i}")).await;
            let image = format!("{}/{REPO}@{digest}", registry.host);
            match phase {
                Phase::NoPolicy => {}
                Phase::SigTag => cosign(
                    dir.path(),
                    &[
                        "sign",
                        "--key",
                        "cosign.key",
                        "--new-bundle-format=false",
                        "--use-signing-config=false",
                        "--tlog-upload=false",
                        "--allow-http-registry",
                        "--yes",
                        &image,
                    ],
                ),
                Phase::Bundle => cosign(
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
                ),
                Phase::Keyless => sigstore.sign(&image, "release@example.com"),
            }
            let name = format!("nb-{i}");
            emu.seed(json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"tags": [
                    {"name": "candidate", "from": {"kind": "DockerImage", "name": format!("{}/{REPO}:latest", registry.host)},
                     "importPolicy": {"scheduled": true, "insecure": true}},
                    {"name": "latest", "from": {"kind": "DockerImage", "name": format!("{}/{REPO}@{served}", registry.host)}}
                ]}}))
                .unwrap();
            emu.import(ns, &name, "latest", Some(&served)).unwrap();
            emu.import(ns, &name, "candidate", Some(&digest)).unwrap();
            candidates.push((phase, name, digest));
        }
    }
    eprintln!(
        "pushed, signed and seeded {} candidates in {:?}",
        candidates.len(),
        t_setup.elapsed()
    );

    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "controller").unwrap();
    let admin = common::free_port();
    let _controller = Killed::new(
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["controller", "--admin-addr", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_ready(admin).await;
    let client = emu.client().unwrap();

    // The phases interleaved, run by run, so that a drift of the machine weighs on each alike.
    let mut latencies: Vec<Vec<f64>> = vec![Vec::new(); phases.len()];
    let mut requests = vec![0usize; phases.len()];
    let mut one: Vec<Vec<String>> = vec![Vec::new(); phases.len()];
    for i in 0..runs {
        for (p, phase) in phases.iter().enumerate() {
            let (_, name, digest) = &candidates[p * runs + i];
            let ns = phase.namespace();
            let before = registry.requests().len();
            let took = promote(&client, ns, name, digest).await;
            // The registry logs a request as it answers it: give the last line a moment.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let all = registry.requests();
            requests[p] += all.len() - before;
            if i == 0 {
                one[p] = all[before..].to_vec();
            }
            latencies[p].push(took);
        }
    }

    common::report_header(
        "imagegate signature policy benchmark",
        "emulator in the bench process, controller a separate release binary, CNCF Distribution registry on loopback, candidates signed by cosign 3.1.3 (keyless: with Fulcio 1.8.8, Rekor v2 2.3.0, timestamp authority 2.1.3); runs one at a time, the four phases interleaved",
    );
    println!("| promotions per phase | {runs} |");
    let base = percentile(&sorted(&latencies[0]), 0.5);
    for (p, phase) in phases.iter().enumerate() {
        let s = sorted(&latencies[p]);
        let what = match phase {
            Phase::NoPolicy => "no signature policy",
            Phase::SigTag => "policy met by the .sig tag (simple signing)",
            Phase::Bundle => "policy met by a cosign 3 bundle (referrer)",
            Phase::Keyless => "keyless policy met by a cosign 3 keyless bundle",
        };
        println!(
            "| {what}: create-to-final p50 / p99 | {} / {} ({:.2}x the p50 without a policy) |",
            ms(percentile(&s, 0.5)),
            ms(percentile(&s, 0.99)),
            percentile(&s, 0.5) / base
        );
        println!(
            "| {what}: registry requests per promotion | {:.1} |",
            requests[p] as f64 / runs as f64
        );
    }
    for (p, phase) in phases.iter().enumerate().skip(1) {
        println!();
        println!(
            "The registry requests of the first promotion with {}:",
            phase.namespace()
        );
        println!();
        for r in &one[p] {
            println!("    {r}");
        }
    }
    emu.shutdown().await;
}

/// Creates a promote run for `digest` on `ns/name` and waits until it is final; the seconds it
/// took. A run that does not end Promoted stops the benchmark.
async fn promote(client: &kube::Client, ns: &str, name: &str, digest: &str) -> f64 {
    let runs: Api<CustomRun> = Api::namespaced(client.clone(), ns);
    let run: CustomRun = serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": format!("promote-{name}"), "namespace": ns},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                 "params": [{"name": "imagestream", "value": name},
                            {"name": "digest", "value": digest},
                            {"name": "validation-status", "value": "Succeeded"}]}
    }))
    .unwrap();
    let start = Instant::now();
    runs.create(&PostParams::default(), &run).await.unwrap();
    let run_name = format!("promote-{name}");
    common::promoted_since(&runs, &run_name, start).await
}
