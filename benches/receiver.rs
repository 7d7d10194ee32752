//! Push to imported candidate (issue 33): the same pushes to a real registry (CNCF Distribution
//! on loopback), reaching the candidate tag through the registry's notification and
//! `imagegate receiver` (a release binary), and through the scheduled import alone (its interval
//! set short, `SCHEDULE` seconds), the two streams side by side in one run; then the receiver's
//! cost per notification (CPU time, API requests, its own handling time) over a burst of
//! notifications. The emulator (in the bench process) runs the import controllers and reads the
//! registry. Validation and promotion take the same time after either import, so they are left
//! out. Not a test: it prints a report (the numbers go into BENCHMARKS.md).
//!
//! `PATH="$(scripts/realcluster bin registry):$PATH" cargo bench --bench receiver`
//! (RUNS=20 pushes, SCHEDULE=10 s, BURST=2000 notifications by default).

mod common;

use common::{Killed, ms, percentile, sorted};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use imagegate_emulator::{Config, Emulator, Imports};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use oci_client::client::{ClientConfig, ClientProtocol, Config as ImageConfig, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use serde_json::json;

const TOKEN: &str = "bench-receiver-token-0123456789";

fn on_path(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH (scripts/realcluster bin {program})"))
}

fn streams() -> ApiResource {
    ApiResource {
        group: "image.openshift.io".into(),
        version: "v1".into(),
        api_version: "image.openshift.io/v1".into(),
        kind: "ImageStream".into(),
        plural: "imagestreams".into(),
    }
}

/// A registry on loopback that sends its notifications to `notify`.
fn registry(dir: &Path, notify: &str) -> (String, Killed) {
    let host = format!("127.0.0.1:{}", common::free_port());
    let config = dir.join("registry.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\nlog:\n  level: warn\n\
             notifications:\n  endpoints:\n  - name: imagegate\n    url: {notify}\n    headers:\n      Authorization: [\"Bearer {TOKEN}\"]\n    timeout: 2s\n    threshold: 3\n    backoff: 1s\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let process = Killed::new(
        Command::new(on_path("registry"))
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (host, process)
}

async fn push(host: &str, repo: &str, label: &str) -> String {
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    });
    let reference: oci_client::Reference = format!("{host}/{repo}:latest").parse().unwrap();
    let layer = ImageLayer::oci_v1(label.as_bytes().to_vec(), None);
    let config = json!({"architecture": "amd64", "os": "linux", "config": {"Labels": {"build": label}},
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

async fn candidate(api: &Api<DynamicObject>) -> Option<String> {
    let is = serde_json::to_value(api.get("nb").await.ok()?).ok()?;
    is["status"]["tags"]
        .as_array()?
        .iter()
        .find(|t| t["tag"] == "candidate")?["items"][0]["image"]
        .as_str()
        .map(str::to_string)
}

fn stream(from: &str, scheduled: bool) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": from},
                           "importPolicy": {"scheduled": scheduled, "insecure": true}}]}}),
    )
    .unwrap()
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn main() {
    common::run(bench());
}

async fn bench() {
    let runs = common::env_usize("RUNS", 20);
    let schedule = common::env_usize("SCHEDULE", 10) as u64;
    let burst = common::env_usize("BURST", 2000);
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let notify = format!("http://127.0.0.1:{port}/v1/distribution");
    let (host, _registry) = registry(dir.path(), &notify);
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(http.get(format!("http://{host}/v2/")).send().await)
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < deadline, "the registry never answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let emu = Emulator::start(Config {
        imports: Imports {
            scheduled_interval: Duration::from_secs(schedule),
            registries: vec![host.clone()],
            ..Imports::default()
        },
        namespaces: vec!["default".into(), "hooked".into(), "scheduled".into()],
        ..Config::default()
    })
    .await
    .unwrap();
    emu.seed_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/300-imagepromotion-crd.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    // Only `hooked` is governed: the receiver imports it on a push; `scheduled` waits for its
    // scheduled import. `hooked`'s candidate is not scheduled, so its every import is the
    // receiver's.
    emu.seed(
        json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "gov", "namespace": "hooked"}, "spec": {}}),
    )
    .unwrap();
    let client = emu.client().unwrap();
    let hooked: Api<DynamicObject> = Api::namespaced_with(client.clone(), "hooked", &streams());
    let scheduled: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "scheduled", &streams());
    let first_h = push(&host, "bench/hooked", "h0").await;
    let first_s = push(&host, "bench/sched", "s0").await;
    hooked
        .create(
            &PostParams::default(),
            &stream(&format!("{host}/bench/hooked:latest"), false),
        )
        .await
        .unwrap();
    scheduled
        .create(
            &PostParams::default(),
            &stream(&format!("{host}/bench/sched:latest"), true),
        )
        .await
        .unwrap();
    while candidate(&hooked).await.as_deref() != Some(&first_h)
        || candidate(&scheduled).await.as_deref() != Some(&first_s)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "receiver").unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, TOKEN).unwrap();
    let admin = common::free_port();
    let receiver = Killed::new(
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["receiver", "--min-interval-seconds", "1"])
            .arg("--addr")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--admin-addr")
            .arg(format!("127.0.0.1:{admin}"))
            .arg("--distribution-secret-file")
            .arg(&secret)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    common::wait_ready(admin).await;

    // Pushes: both repositories at once, then the time until each candidate has the new digest.
    let (mut by_hook, mut by_schedule) = (Vec::new(), Vec::new());
    for i in 1..=runs {
        let h = push(&host, "bench/hooked", &format!("h{i}")).await;
        let pushed_h = Instant::now();
        let s = push(&host, "bench/sched", &format!("s{i}")).await;
        let pushed_s = Instant::now();
        let (mut done_h, mut done_s) = (None, None);
        while done_h.is_none() || done_s.is_none() {
            if done_h.is_none() && candidate(&hooked).await.as_deref() == Some(&h) {
                done_h = Some(pushed_h.elapsed().as_secs_f64());
            }
            if done_s.is_none() && candidate(&scheduled).await.as_deref() == Some(&s) {
                done_s = Some(pushed_s.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        by_hook.push(done_h.unwrap());
        by_schedule.push(done_s.unwrap());
        // The next push lands at another point of the schedule.
        tokio::time::sleep(Duration::from_millis(1700)).await;
    }

    // The cost of a notification: a burst posted straight to the receiver, each naming a push
    // of a repository no governed stream imports (the worker still reads the governed streams).
    let metrics_url = format!("http://127.0.0.1:{admin}/metrics");
    let before = http
        .get(&metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let requests_before = emu.requests().len();
    let cpu_before = common::cpu_seconds(receiver.pid());
    let body = |i: usize| {
        json!({"events": [{"action": "push",
            "target": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "repository": format!("bench/other{i}"), "tag": "latest"},
            "request": {"host": host}}]})
        .to_string()
    };
    let started = Instant::now();
    for i in 0..burst {
        let r = http
            .post(&notify)
            .header("Authorization", format!("Bearer {TOKEN}"))
            .body(body(i))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    let wall = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cpu = common::cpu_seconds(receiver.pid()) - cpu_before;
    let after = http
        .get(&metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let api = emu.requests().len() - requests_before;
    let handled = |t: &str, s: &str| metric(t, s);
    let sum = "imagegate_receiver_notification_duration_seconds_sum";
    let count = "imagegate_receiver_notification_duration_seconds_count";
    let n = handled(&after, count) - handled(&before, count);
    let mean = (handled(&after, sum) - handled(&before, sum)) / n.max(1.0);
    let changed = metric(
        &after,
        "imagegate_receiver_imports_total{outcome=\"changed\"}",
    );

    common::report_header(
        "imagegate receiver benchmark",
        &format!(
            "CNCF Distribution registry on loopback sending its notifications to `imagegate receiver` (release binary, --min-interval-seconds 1); the emulator in the bench process importing from the registry, its scheduled import every {schedule} s; pushes one at a time, 1.7 s apart"
        ),
    );
    println!("| pushes per path | {runs} |");
    let (h, s) = (sorted(&by_hook), sorted(&by_schedule));
    println!(
        "| push to imported candidate, through the notification: p50 / p99 / max | {} / {} / {} |",
        ms(percentile(&h, 0.5)),
        ms(percentile(&h, 0.99)),
        ms(h[h.len() - 1])
    );
    println!(
        "| push to imported candidate, scheduled import every {schedule} s: p50 / p99 / max | {} / {} / {} |",
        ms(percentile(&s, 0.5)),
        ms(percentile(&s, 0.99)),
        ms(s[s.len() - 1])
    );
    println!("| imports the receiver made that moved the candidate | {changed} |");
    println!("| burst: notifications posted | {burst} in {} |", ms(wall));
    println!(
        "| per notification: receiver CPU | {:.1} µs |",
        cpu / burst as f64 * 1e6
    );
    println!(
        "| per notification: its handling (request to answer, mean) | {:.1} µs |",
        mean * 1e6
    );
    println!(
        "| per notification: API requests (batched by the worker) | {:.3} |",
        api as f64 / burst as f64
    );
    emu.shutdown().await;
}
