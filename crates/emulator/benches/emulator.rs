//! Benchmark of the emulator at the source's scale: STREAMS ImageStreams x 3 tags seeded, then a
//! burst of one import per tag, as the source benchmark and the demo drive it. Reports the time
//! and the resident memory of each step, the import rate, and how long the HTTP API takes to
//! list every stream (in pages, as a reflector does) and to replay the burst to a watch. Not a
//! test.
//!
//! `cargo bench -p imagegate-emulator --bench emulator` (STREAMS=10000 by default).

// The workspace's bench helpers, shared with the product's benchmarks by path.
#[path = "../../../benches/common/shared.rs"]
mod common;

use common::{digest, rss_kib, streams_yaml};
use futures::StreamExt;
use std::time::Instant;

use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::discovery::ApiResource;

fn rss() -> (u64, u64) {
    let pid = std::process::id();
    (rss_kib(pid, "VmRSS:") / 1024, rss_kib(pid, "VmHWM:") / 1024)
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let n: usize = std::env::var("STREAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let (rss_empty, _) = rss();
    let emu = Emulator::start(Config::default()).await.unwrap();
    let text = streams_yaml(n);
    let t = Instant::now();
    emu.seed_str(&text).unwrap();
    let seeded = t.elapsed().as_secs_f64();
    drop(text);
    let (rss_seeded, _) = rss();
    eprintln!("seeded {n} streams in {seeded:.2} s, RSS {rss_seeded} MiB");

    let client = emu.client().unwrap();
    let streams = ApiResource {
        group: "image.openshift.io".into(),
        version: "v1".into(),
        api_version: "image.openshift.io/v1".into(),
        kind: "ImageStream".into(),
        plural: "imagestreams".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &streams);
    let t = Instant::now();
    let mut listed = 0;
    let mut params = ListParams::default().limit(500);
    let before_burst = loop {
        let page = api.list(&params).await.unwrap();
        listed += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => params = params.continue_token(&c),
            None => break page.metadata.resource_version.unwrap(),
        }
    };
    let list = t.elapsed().as_secs_f64();
    assert_eq!(listed, n, "the list returned {listed} of {n} streams");
    eprintln!("listed {n} streams in {list:.2} s");

    // The watch opens before the burst, from the list's resourceVersion, and counts the events.
    let watch = api
        .watch(&WatchParams::default().timeout(290), &before_burst)
        .await
        .unwrap();
    let expected = 3 * n;
    let watcher = tokio::spawn(async move {
        let mut watch = watch.boxed();
        let mut seen = 0;
        while let Some(e) = watch.next().await {
            if let Ok(WatchEvent::Modified(_)) = e {
                seen += 1;
                if seen == expected {
                    return (seen, Instant::now());
                }
            }
        }
        (seen, Instant::now())
    });

    let t_burst = Instant::now();
    for i in 0..n {
        for tag in 0..3 {
            emu.import(
                "bench",
                &format!("nb-{i}"),
                &format!("t{tag}"),
                Some(&digest(i, tag, 1)),
            )
            .unwrap();
        }
    }
    let written = t_burst.elapsed().as_secs_f64();
    let (seen, last) = watcher.await.unwrap();
    assert_eq!(seen, expected, "the watch saw {seen} of {expected} changes");
    let watched = last.duration_since(t_burst).as_secs_f64();
    let (rss_burst, peak) = rss();

    // A write that is not an import, for comparison: ConfigMaps as the source's checkpoint.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let t = Instant::now();
    for i in 0..200 {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("cm-{i}")},
            "data": {"k": "v".repeat(1000)},
        }))
        .unwrap();
        cms.create(&Default::default(), &cm).await.unwrap();
    }
    let cm_writes = 200.0 / t.elapsed().as_secs_f64();

    // A write shaped like the source's checkpoint: a ConfigMap of 2,500 entries (512 KiB, where
    // a shard splits), merge-patched with 300 changed entries at a time.
    let entry = |i: usize, round: usize| {
        format!("5d0f6a52-4b7e-4c1a-9d36-0c2f1e7a8b90;t0=B{round:043};t1=B{round:043};t2=B{i:043}")
    };
    let data: serde_json::Map<String, serde_json::Value> = (0..2500)
        .map(|i| (format!("bench.nb-{i}"), entry(i, 0).into()))
        .collect();
    let shard: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "shard"},
        "data": data,
    }))
    .unwrap();
    cms.create(&Default::default(), &shard).await.unwrap();
    let mut shard_patch = Vec::new();
    for round in 1..=20 {
        let changed: serde_json::Map<String, serde_json::Value> = (0..300)
            .map(|k| {
                let i = (round * 300 + k) % 2500;
                (format!("bench.nb-{i}"), entry(i, round).into())
            })
            .collect();
        let t = Instant::now();
        cms.patch(
            "shard",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"data": changed})),
        )
        .await
        .unwrap();
        shard_patch.push(t.elapsed().as_secs_f64());
    }
    shard_patch.sort_by(f64::total_cmp);

    common::report_header(
        "emulator benchmark",
        &format!("{n} ImageStreams x 3 tags, then one import per tag; in the bench process"),
    );
    println!("| seed {n} streams (YAML) | {seeded:.2} s |");
    println!(
        "| list {n} streams over HTTP, pages of 500 | {list:.2} s ({:.0} streams/s) |",
        n as f64 / list
    );
    println!(
        "| burst: {expected} imports written | {written:.2} s ({:.0} imports/s) |",
        expected as f64 / written
    );
    println!("| burst: the watch saw all {expected} after | {watched:.2} s |");
    println!("| ConfigMap creates over HTTP, one at a time | {cm_writes:.0}/s |");
    println!(
        "| merge patch of 300 entries into a 2,500-entry ConfigMap (a checkpoint shard), p50 / max | {} / {} |",
        common::ms(common::percentile(&shard_patch, 0.5)),
        common::ms(shard_patch[shard_patch.len() - 1])
    );
    println!(
        "| RSS empty / seeded / after the burst / peak | {rss_empty} / {rss_seeded} / {rss_burst} / {peak} MiB |"
    );
    println!(
        "| RSS per stream, seeded / after the burst | {:.1} / {:.1} KiB |",
        (rss_seeded - rss_empty) as f64 * 1024.0 / n as f64,
        (rss_burst - rss_empty) as f64 * 1024.0 / n as f64
    );
    emu.shutdown().await;
}
