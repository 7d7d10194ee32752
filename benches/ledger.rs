//! Benchmark of the controller's ledger (`src/controller/ledger.rs`) at scale: the API requests
//! it costs while nothing happens, per candidate that gets its verdict, and per candidate it
//! pages, with STREAMS (default 10,000) ImageStreams governed by one ImagePromotion, against the
//! emulator. The floor it is held to: the requests of the same controller with no governed
//! stream (no ImagePromotion) in the same run. Not a test: it prints a report for BENCHMARKS.md.
//!
//! `cargo bench --bench ledger` (`STREAMS=10000`, `CANDIDATES=100`).

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Killed, env_usize, rss_kib};
use imagegate_emulator::control::RequestRecord;
use imagegate_emulator::{Config, Emulator};

const GRACE: u64 = 5;

fn digest(i: usize, which: char) -> String {
    format!("sha256:{}{:016x}", which.to_string().repeat(48), i)
}

/// `nb-<i>` in `bench`: its candidate serves what its served tag serves (settled).
fn stream_yaml(i: usize) -> String {
    let a = digest(i, 'a');
    format!(
        r#"apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {{name: nb-{i}, namespace: bench, generation: 2}}
spec:
  tags:
  - {{name: candidate, from: {{kind: DockerImage, name: "quay.io/org/nb-{i}:latest"}}, importPolicy: {{scheduled: true}}, generation: 2}}
  - {{name: latest, annotations: {{imagegate.dev/phase: Promoted, imagegate.dev/served-digest: "{a}"}}, from: {{kind: ImageStreamImage, name: "nb-{i}@{a}"}}, generation: 2}}
status:
  tags:
  - tag: candidate
    items:
    - {{created: "2026-11-29T00:00:00Z", dockerImageReference: "quay.io/org/nb-{i}@{a}", image: "{a}", generation: 2}}
  - tag: latest
    items:
    - {{created: "2026-11-29T01:00:00Z", dockerImageReference: "quay.io/org/nb-{i}@{a}", image: "{a}", generation: 2}}
"#
    )
}

fn controller(kubeconfig: &std::path::Path) -> (Killed, u16) {
    let admin = common::free_port();
    let process = Killed::new(
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["controller", "--admin-addr", &format!("127.0.0.1:{admin}")])
            .args(["--verdict-grace", &GRACE.to_string()])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    (process, admin)
}

/// The controller's requests in the log, by `verb resource`.
fn summary(requests: &[RequestRecord]) -> (usize, String) {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for r in requests.iter().filter(|r| r.user == "controller") {
        *by.entry(format!("{} {}", r.verb, r.resource)).or_default() += 1;
    }
    let total = by.values().sum();
    let text = by
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    (total, text)
}

/// Requests of one phase: the log cleared, `phase` run, the log read after `settle`.
async fn phase<F: std::future::Future<Output = ()>>(
    emu: &Emulator,
    settle: Duration,
    phase: F,
) -> (usize, String) {
    emu.clear_requests();
    phase.await;
    tokio::time::sleep(settle).await;
    summary(&emu.requests())
}

fn main() {
    common::run(bench());
}

async fn bench() {
    let streams = env_usize("STREAMS", 10_000);
    let candidates = env_usize("CANDIDATES", 100).min(streams / 2);
    let emu = Emulator::start(Config::default()).await.unwrap();
    emu.seed_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/300-imagepromotion-crd.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    emu.seed_str("apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n")
        .unwrap();
    let seeded = Instant::now();
    let all: String = (0..streams).map(|i| stream_yaml(i) + "---\n").collect();
    emu.seed_str(&all).unwrap();
    eprintln!("seeded {streams} ImageStreams in {:?}", seeded.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "controller").unwrap();

    // The floor: no stream governed, a minute of nothing.
    let (mut floor, admin) = controller(&kubeconfig);
    common::wait_ready(admin).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (floor_idle, floor_text) = phase(&emu, Duration::from_secs(60), async {}).await;
    floor.term();
    drop(floor);

    // Governed: every stream, by one ImagePromotion.
    emu.seed_str(
        "apiVersion: imagegate.dev/v1alpha1\nkind: ImagePromotion\nmetadata: {name: gov, namespace: bench}\nspec: {}\n",
    )
    .unwrap();
    emu.clear_requests();
    let started = Instant::now();
    let (gate, admin) = controller(&kubeconfig);
    common::wait_ready(admin).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (start_n, start_text) = summary(&emu.requests());
    let start_took = started.elapsed();
    let (idle_n, idle_text) = phase(&emu, Duration::from_secs(60), async {}).await;

    // Candidates that get their verdict: imported, then served (as a promotion writes it).
    let client = emu.client().unwrap();
    let api: kube::Api<imagegate::api::ImageStream> = kube::Api::namespaced(client, "bench");
    let (verdict_n, verdict_text) = phase(
        &emu,
        Duration::from_secs(GRACE + 15),
        async {
            for i in 0..candidates {
                let b = digest(i, 'b');
                emu.import("bench", &format!("nb-{i}"), "candidate", Some(&b))
                    .unwrap();
                let patch = serde_json::json!({"spec": {"tags": [{"name": "latest",
                    "annotations": {"imagegate.dev/phase": "Promoted", "imagegate.dev/served-digest": b},
                    "from": {"kind": "ImageStreamImage", "name": format!("nb-{i}@{b}")}}]}});
                api.patch(
                    &format!("nb-{i}"),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(&patch),
                )
                .await
                .unwrap();
            }
        },
    )
    .await;

    // Candidates nobody validates: each paged once the grace period has passed.
    let paged_from = Instant::now();
    let (paged_n, paged_text) = phase(&emu, Duration::from_secs(GRACE + 15), async {
        for i in candidates..2 * candidates {
            emu.import(
                "bench",
                &format!("nb-{i}"),
                "candidate",
                Some(&digest(i, 'c')),
            )
            .unwrap();
        }
    })
    .await;
    let paged_took = paged_from.elapsed();
    let gauge = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("imagegate_controller_candidates_without_verdict ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    let rss = (rss_kib(gate.pid(), "VmRSS:"), rss_kib(gate.pid(), "VmHWM:"));

    println!("\n== the ledger at {streams} governed ImageStreams (grace {GRACE} s)");
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| floor: the controller, no stream governed, requests in a minute of nothing | {floor_idle} ({floor_text}) |"
    );
    println!(
        "| start, to ready and 5 s more ({:.1} s): requests | {start_n} ({start_text}) |",
        start_took.as_secs_f64()
    );
    println!("| governed: requests in a minute of nothing | {idle_n} ({idle_text}) |");
    println!(
        "| {candidates} candidates that got their verdict: requests of the controller | {verdict_n} ({verdict_text}) |"
    );
    println!(
        "| {candidates} candidates nobody validated: requests of the controller | {paged_n} ({paged_text}) |"
    );
    println!(
        "| paged, by the gauge, {:.0} s after the imports | {gauge} of {candidates} |",
        paged_took.as_secs_f64()
    );
    println!(
        "| controller RSS now / peak | {} / {} MiB |",
        rss.0 / 1024,
        rss.1 / 1024
    );
}
