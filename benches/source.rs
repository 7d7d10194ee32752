//! Benchmark of `imagegate source` on the emulator with 10,000 ImageStreams x 3 tags: events/s
//! delivered to a local sink, latency from the change to the sink's 2xx (paced, and from the
//! source's own histogram), RSS, and time to catch up after a restart; beside them, measured in
//! the same run, a bare HTTP POST round trip of the same event to the same sink. Not a test.
//!
//! `cargo bench --bench source` (STREAMS=10000 by default).

mod common;

use common::{Killed, ms, percentile, rss_kib};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use imagegate::emulator::{Config, Emulator};

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

async fn receive(State(seen): State<Seen>, headers: HeaderMap, _body: Bytes) -> StatusCode {
    // The digest extension identifies the change; binary mode puts it in a header.
    let key = headers
        .get("ce-imagedigest")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    seen.lock().unwrap().entry(key).or_insert_with(Instant::now);
    StatusCode::ACCEPTED
}

/// `n` bare POSTs of a binary-mode event from a curl process, one at a time over one kept-alive
/// connection: each transfer's `time_total` in seconds. None when curl is not installed.
async fn curl_floor(sink: &str, n: usize) -> Option<Vec<f64>> {
    let mut config = String::new();
    for k in 0..n {
        if k > 0 {
            config.push_str("next\n");
        }
        config.push_str(&format!(
            "url = \"{sink}\"\nrequest = \"POST\"\noutput = \"/dev/null\"\nwrite-out = \"%{{time_total}}\\n\"\n\
             header = \"ce-specversion: 1.0\"\nheader = \"ce-id: {k:040x}\"\n\
             header = \"ce-type: dev.imagegate.imagestreamtag.updated\"\n\
             header = \"ce-source: /apis/image.openshift.io/v1/namespaces/bench/imagestreams/nb-0\"\n\
             header = \"ce-imagedigest: curl-{k}\"\nheader = \"content-type: application/json\"\n\
             data = \"{{\\\"namespace\\\":\\\"bench\\\",\\\"imageStream\\\":\\\"nb-0\\\",\\\"tag\\\":\\\"t0\\\",\\\"digest\\\":\\\"sha256:0\\\"}}\"\n"
        ));
    }
    let dir = tempfile::tempdir().ok()?;
    let path = dir.path().join("curl.config");
    std::fs::write(&path, config).ok()?;
    let out = tokio::process::Command::new("curl")
        .arg("--silent")
        .arg("--config")
        .arg(&path)
        .output()
        .await
        .ok()?;
    if !out.status.success() {
        eprintln!("curl failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let mut times: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    if times.len() != n {
        eprintln!("curl reported {} of {n} transfers", times.len());
        return None;
    }
    times.sort_by(f64::total_cmp);
    Some(times)
}

fn digest(i: usize, tag: usize, round: usize) -> String {
    format!("sha256:{round:08x}{tag:08x}{}{i:016x}", "0".repeat(32))
}

fn streams_yaml(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        out.push_str(&format!(
            "---\napiVersion: image.openshift.io/v1\nkind: ImageStream\nmetadata: {{name: nb-{i}, namespace: bench}}\nspec:\n  tags:\n"
        ));
        for t in 0..3 {
            out.push_str(&format!(
                "  - {{name: t{t}, from: {{kind: DockerImage, name: \"quay.io/org/nb-{i}:t{t}\"}}}}\n"
            ));
        }
        out.push_str("status:\n  tags:\n");
        for t in 0..3 {
            let d = digest(i, t, 0);
            out.push_str(&format!(
                "  - tag: t{t}\n    items:\n    - {{created: \"2026-11-30T00:00:00Z\", dockerImageReference: \"quay.io/org/nb-{i}@{d}\", image: \"{d}\", generation: 1}}\n"
            ));
        }
    }
    out
}

async fn wait_for(seen: &Seen, keys: &[String]) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        {
            let s = seen.lock().unwrap();
            if keys.iter().all(|k| s.contains_key(k)) {
                return keys.iter().map(|k| s[k]).max().unwrap_or_else(Instant::now);
            }
        }
        assert!(Instant::now() < deadline, "events missing");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn spawn_source(kubeconfig: &std::path::Path, sink: &str, admin: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .args([
            "source",
            "--sink",
            sink,
            "--checkpoint-namespace",
            "default",
        ])
        .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    imagegate::tls::install_crypto_provider();
    let n: usize = std::env::var("STREAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let emu = Emulator::start(Config {
        retained_events: 200_000,
        ..Config::default()
    })
    .await
    .unwrap();
    let t = Instant::now();
    emu.seed_str(&streams_yaml(n)).unwrap();
    eprintln!("seeded {n} ImageStreams x 3 tags in {:?}", t.elapsed());

    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/", post(receive))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let sink = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });

    // The floor: a bare POST of a binary-mode event like the source's, one at a time.
    let http = reqwest::Client::new();
    let mut bare = Vec::new();
    for k in 0..2000 {
        let t = Instant::now();
        let r = http
            .post(&sink)
            .header("ce-specversion", "1.0")
            .header("ce-id", format!("{k:040x}"))
            .header("ce-type", "dev.imagegate.imagestreamtag.updated")
            .header(
                "ce-source",
                "/apis/image.openshift.io/v1/namespaces/bench/imagestreams/nb-0",
            )
            .header("ce-imagedigest", format!("bare-{k}"))
            .header("content-type", "application/json")
            .body(r#"{"namespace":"bench","imageStream":"nb-0","tag":"t0","digest":"sha256:0"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        bare.push(t.elapsed().as_secs_f64());
    }
    bare.sort_by(f64::total_cmp);
    // The same floor from a second process (curl, keep-alive over one connection): the source is
    // a process of its own too, so its path crosses the process boundary the in-process floor
    // does not. Reported beside the in-process floor, not instead of it.
    let bare_curl = curl_floor(&sink, 2000).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "source").unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t_start = Instant::now();
    let mut source = Killed::new(spawn_source(&kubeconfig, &sink, admin));
    let pid = source.pid();
    common::wait_ready(admin).await;
    let t_ready = t_start.elapsed();
    let rss_idle = rss_kib(pid, "VmRSS:");

    // The bench watches too, to time when the watch event that shows a change arrives (the
    // source gets the same event from the same broadcast at the same moment).
    let watched: Seen = Arc::default();
    {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            emu.client().unwrap(),
            "bench",
            &kube::api::ApiResource::erase::<imagegate::api::ImageStream>(&()),
        );
        let watched = watched.clone();
        tokio::spawn(async move {
            let mut s = watcher(api, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(obj)) = s.next().await {
                let now = Instant::now();
                if let Some(tags) = obj.data.pointer("/status/tags").and_then(|t| t.as_array()) {
                    let mut w = watched.lock().unwrap();
                    for t in tags {
                        if let Some(d) = t.pointer("/items/0/image").and_then(|d| d.as_str()) {
                            w.entry(d.to_string()).or_insert(now);
                        }
                    }
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // Paced: one import every 10 ms, latency from the write to the sink's receipt.
    let mut paced = Vec::new();
    let mut from_watch = Vec::new();
    for i in 0..300 {
        let d = digest(i, 0, 1);
        let t = Instant::now();
        emu.import("bench", &format!("nb-{i}"), "t0", Some(&d))
            .unwrap();
        let got = wait_for(&seen, std::slice::from_ref(&d)).await;
        paced.push(got.duration_since(t).as_secs_f64());
        if let Some(w) = watched.lock().unwrap().get(&d) {
            from_watch.push(got.saturating_duration_since(*w).as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    paced.sort_by(f64::total_cmp);
    from_watch.sort_by(f64::total_cmp);

    // Burst: every tag of every stream imported back to back.
    let mut keys = Vec::with_capacity(n * 3);
    let t_burst = Instant::now();
    for i in 0..n {
        for tag in 0..3 {
            let d = digest(i, tag, 2);
            emu.import("bench", &format!("nb-{i}"), &format!("t{tag}"), Some(&d))
                .unwrap();
            keys.push(d);
        }
    }
    let t_written = t_burst.elapsed();
    let last = wait_for(&seen, &keys).await;
    let burst = last.duration_since(t_burst).as_secs_f64();
    let rss_peak = rss_kib(pid, "VmHWM:");
    let metrics = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();

    // Catch-up: stop, one import per stream while down, start, time until all arrived.
    source.term();
    let mut missed = Vec::with_capacity(n);
    for i in 0..n {
        let d = digest(i, 1, 3);
        emu.import("bench", &format!("nb-{i}"), "t1", Some(&d))
            .unwrap();
        missed.push(d);
    }
    let t_restart = Instant::now();
    let mut source = Killed::new(spawn_source(&kubeconfig, &sink, admin));
    let pid2 = source.pid();
    let last = wait_for(&seen, &missed).await;
    let catch_up = last.duration_since(t_restart).as_secs_f64();
    let rss_peak2 = rss_kib(pid2, "VmHWM:");
    source.term();

    let total_events = 300 + n * 3;
    common::report_header(
        "imagegate source benchmark",
        &format!(
            "{n} ImageStreams x 3 tags; emulator and sink in the bench process, the source a separate release binary"
        ),
    );
    println!(
        "| bare POST round trip to the sink, p50 / p99 | {} / {} |",
        ms(percentile(&bare, 0.5)),
        ms(percentile(&bare, 0.99))
    );
    match &bare_curl {
        Some(c) => println!(
            "| bare POST round trip from a second process (curl), p50 / p99 | {} / {} |",
            ms(percentile(c, 0.5)),
            ms(percentile(c, 0.99))
        ),
        None => println!("| bare POST round trip from a second process (curl) | curl not found |"),
    }
    println!(
        "| start to ready (first list of {n} streams recorded) | {:.2} s |",
        t_ready.as_secs_f64()
    );
    println!(
        "| paced (300 imports, 10 ms apart): write to sink receipt p50 / p99 | {} / {} |",
        ms(percentile(&paced, 0.5)),
        ms(percentile(&paced, 0.99))
    );
    println!(
        "| paced: watch event to sink receipt p50 / p99 | {} / {} |",
        ms(percentile(&from_watch, 0.5)),
        ms(percentile(&from_watch, 0.99))
    );
    println!(
        "| paced watch-to-sink p50 / bare POST p50 | {:.2}x |",
        percentile(&from_watch, 0.5) / percentile(&bare, 0.5)
    );
    if let Some(c) = &bare_curl {
        println!(
            "| paced watch-to-sink p50 / bare POST from a second process p50 | {:.2}x |",
            percentile(&from_watch, 0.5) / percentile(c, 0.5)
        );
    }
    println!(
        "| burst: {} imports written in | {:.2} s |",
        n * 3,
        t_written.as_secs_f64()
    );
    println!(
        "| burst: all {} events delivered after | {:.2} s ({:.0} events/s) |",
        n * 3,
        burst,
        (n * 3) as f64 / burst
    );
    println!(
        "| catch-up after a restart: {n} changes made while down, delivered after | {:.2} s |",
        catch_up
    );
    println!(
        "| source RSS idle / peak (burst) / peak (catch-up run) | {} / {} / {} MiB |",
        rss_idle / 1024,
        rss_peak / 1024,
        rss_peak2 / 1024
    );
    let line = |name: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_string()
    };
    println!(
        "| source's delivery_latency_seconds count / sum | {} / {} |",
        line("imagegate_source_delivery_latency_seconds_count"),
        line("imagegate_source_delivery_latency_seconds_sum")
    );
    let bare_posts = 2000 + bare_curl.as_ref().map_or(0, Vec::len);
    println!(
        "| events seen by the sink | {} of {} (+ {} bare) |",
        seen.lock().unwrap().len() - bare_posts,
        total_events + n,
        bare_posts
    );
    emu.shutdown().await;
}
