//! Benchmark of `imagegate source` on the emulator with 10,000 ImageStreams x 3 tags: events/s
//! delivered to a local sink, latency from the watch event to the sink's 2xx (paced changes;
//! the watch event is timed by a TCP proxy between the source and the emulator as it hands the
//! event to the source), RSS, and time to catch up after a restart. Beside them, measured in
//! the same run, a bare HTTP POST round trip of an event of the same shape to the same sink:
//! back to back from this process and from a second process, and paced like the changes from a
//! second process (the like-for-like floor). Not a test.
//!
//! `cargo bench --bench source` (STREAMS=10000 by default).

mod common;

use common::{Killed, cpu_seconds, digest, ms, percentile, rss_kib, streams_yaml};
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
use imagegate_emulator::{Config, Emulator};

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

/// Changes made one at a time, 10 ms apart, for the latency; the paced floor posts as many.
const PACED: usize = 1000;
/// Bare POSTs of the throughput floor, 64 at once as the source delivers.
const THROUGHPUT_POSTS: usize = 20_000;

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

/// A bare POST of a binary-mode event shaped like the source's (the same headers, a body of
/// the same size), built with plain reqwest: no SDK, no watch, nothing but the round trip.
fn floor_request(http: &reqwest::Client, sink: &str, k: usize) -> reqwest::RequestBuilder {
    http.post(sink)
        .header("ce-specversion", "1.0")
        .header("ce-id", format!("{k:040x}"))
        .header("ce-type", "dev.imagegate.imagestreamtag.updated")
        .header(
            "ce-source",
            "/apis/image.openshift.io/v1/namespaces/bench/imagestreams/nb-0",
        )
        .header("ce-subject", "nb-0:t0")
        .header("ce-time", "2026-12-01T10:00:00Z")
        .header(
            "ce-dataschema",
            "https://imagegate.dev/schemas/v1alpha1/imagestreamtag-updated.json",
        )
        .header("ce-namespace", "bench")
        .header("ce-imagestream", "nb-0")
        .header("ce-imagetag", "t0")
        .header("ce-imagedigest", format!("bare-{k}"))
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"created":"2026-12-01T10:00:00Z","digest":"{d}","dockerImageReference":"quay.io/org/nb-0@{d}","generation":2,"imageStream":"nb-0","imageStreamUID":"{u}","namespace":"bench","previousDigest":"{d}","tag":"t0"}}"#,
            d = digest(k, 0, 9),
            u = "5d0f6a52-4b7e-4c1a-9d36-0c2f1e7a8b90",
        ))
}

/// The second-process floor: run by this same bench binary re-executed with
/// `BENCH_POSTER=<sink>`, on a one-thread runtime like the source's, with one reqwest client.
/// Posts `BENCH_POSTER_N` events one at a time, `BENCH_POSTER_INTERVAL_MS` apart (0: back to
/// back), and prints each round trip in seconds. With `BENCH_POSTER_CONCURRENCY` above 1, that
/// many posters share the client, as the source's deliveries do, and it prints only the time
/// all `BENCH_POSTER_N` took: the throughput floor.
fn poster(sink: &str) {
    let env = |k: &str| -> usize {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} is not set to a number"))
    };
    let n = env("BENCH_POSTER_N");
    let interval = Duration::from_millis(env("BENCH_POSTER_INTERVAL_MS") as u64);
    let offset = env("BENCH_POSTER_OFFSET");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let concurrency = std::env::var("BENCH_POSTER_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1);
    if concurrency > 1 {
        return rt.block_on(throughput(sink, n, concurrency, offset));
    }
    rt.block_on(async {
        let http = reqwest::Client::new();
        for k in offset..offset + n {
            let t = Instant::now();
            let r = floor_request(&http, sink, k).send().await.unwrap();
            let took = t.elapsed().as_secs_f64();
            assert_eq!(r.status(), 202);
            println!("{took}");
            if !interval.is_zero() {
                tokio::time::sleep(interval).await;
            }
        }
    });
}

/// `n` bare POSTs by `concurrency` posters sharing one client on this thread; prints the time
/// all took and the CPU time this process used, in seconds.
async fn throughput(sink: &str, n: usize, concurrency: usize, offset: usize) {
    let http = reqwest::Client::new();
    let next = std::rc::Rc::new(std::cell::Cell::new(offset));
    let t = Instant::now();
    let posters = (0..concurrency).map(|_| {
        let (http, next) = (http.clone(), next.clone());
        async move {
            loop {
                let k = next.get();
                if k >= offset + n {
                    break;
                }
                next.set(k + 1);
                let r = floor_request(&http, sink, k).send().await.unwrap();
                assert_eq!(r.status(), 202);
            }
        }
    });
    futures::future::join_all(posters).await;
    let cpu = cpu_seconds(std::process::id());
    println!("{} {cpu}", t.elapsed().as_secs_f64());
}

/// The throughput floor: `n` bare POSTs from a second process, `concurrency` at once (as the
/// source delivers), on a one-thread runtime; events per second, and the poster's CPU seconds
/// per POST.
async fn throughput_floor(sink: &str, n: usize, concurrency: usize, offset: usize) -> (f64, f64) {
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("BENCH_POSTER", sink)
        .env("BENCH_POSTER_N", n.to_string())
        .env("BENCH_POSTER_INTERVAL_MS", "0")
        .env("BENCH_POSTER_OFFSET", offset.to_string())
        .env("BENCH_POSTER_CONCURRENCY", concurrency.to_string())
        .stderr(Stdio::inherit())
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "the throughput floor's second process failed"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut numbers = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    let (Some(Some(took)), Some(Some(cpu))) = (numbers.next(), numbers.next()) else {
        panic!("the throughput floor prints its time and CPU, not {text:?}");
    };
    (n as f64 / took, cpu / n as f64)
}

/// Runs [`poster`] in a second process and returns its sorted round trips.
async fn second_process_floor(sink: &str, n: usize, interval_ms: u64, offset: usize) -> Vec<f64> {
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("BENCH_POSTER", sink)
        .env("BENCH_POSTER_N", n.to_string())
        .env("BENCH_POSTER_INTERVAL_MS", interval_ms.to_string())
        .env("BENCH_POSTER_OFFSET", offset.to_string())
        .stderr(Stdio::inherit())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "the floor's second process failed");
    let mut times: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(times.len(), n, "the floor's second process posted fewer");
    times.sort_by(f64::total_cmp);
    times
}

/// When the watch event of a change reached the source: the moment a TCP proxy between the
/// source and the emulator handed the source the first bytes naming the change's digest.
#[derive(Default)]
struct Marks {
    /// The digest awaited now (None: nothing is stamped, the proxy only copies).
    want: Option<Vec<u8>>,
    at: HashMap<String, Instant>,
}

/// Starts the proxy in front of `upstream`; returns its address.
async fn watch_proxy(upstream: SocketAddr, marks: Arc<Mutex<Marks>>) -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut client_r, mut client_w) = client.into_split();
            let (mut server_r, mut server_w) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut client_r, &mut server_w).await;
                let _ = server_w.shutdown().await;
            });
            let marks = marks.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                // The end of the previous read, so that a digest split across reads is found.
                let mut window: Vec<u8> = Vec::new();
                loop {
                    let got = match server_r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(got) => got,
                    };
                    // Noted, and recorded, before the write: the source cannot have the bytes
                    // any earlier, and the bench cannot see the change arrive before its mark.
                    let now = Instant::now();
                    {
                        let mut m = marks.lock().unwrap();
                        match m.want.clone() {
                            None => window.clear(),
                            Some(want) => {
                                window.extend_from_slice(&buf[..got]);
                                if window.windows(want.len()).any(|w| w == want.as_slice()) {
                                    let key = String::from_utf8_lossy(&want).into_owned();
                                    m.at.entry(key).or_insert(now);
                                }
                                let keep = window.len().saturating_sub(want.len());
                                window.drain(..keep);
                            }
                        }
                    }
                    if client_w.write_all(&buf[..got]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Waits until the sink has seen every key; the moment the last arrived. Fails, naming what it
/// waited for, once a minute passes with no new key (a source that stalls, or never sends).
///
/// Each poll only looks past the keys already found (they arrive about in order), so that the
/// wait does not take a core from the source and the sink at 100,000 keys.
async fn wait_for(seen: &Seen, keys: &[String], what: &str) -> Instant {
    let mut found = 0;
    let mut sink_count = 0;
    let mut progress = Instant::now();
    loop {
        {
            let s = seen.lock().unwrap();
            while found < keys.len() && s.contains_key(&keys[found]) {
                found += 1;
            }
            if found == keys.len() {
                return keys.iter().map(|k| s[k]).max().unwrap_or_else(Instant::now);
            }
            if s.len() > sink_count {
                (sink_count, progress) = (s.len(), Instant::now());
            }
            if progress.elapsed() >= Duration::from_secs(60) {
                let arrived = keys.iter().filter(|k| s.contains_key(*k)).count();
                panic!(
                    "{what}: no new event for 60 s; {arrived} of {} arrived, the first missing is {:?}",
                    keys.len(),
                    keys[found]
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The checkpoint's ConfigMaps in `namespace`, measured: shards, bytes, and bytes per stream
/// split into its key, its uid and its tags.
async fn checkpoint_size(client: kube::Client, namespace: &str) -> (usize, usize, String) {
    use k8s_openapi::api::core::v1::ConfigMap;
    let list = kube::Api::<ConfigMap>::namespaced(client, namespace)
        .list(
            &kube::api::ListParams::default()
                .labels("app.kubernetes.io/component=source-checkpoint"),
        )
        .await
        .unwrap();
    let (mut shards, mut bytes, mut streams, mut keys, mut uids, mut tags, mut tag_bytes) =
        (0, 0, 0, 0, 0, 0, 0);
    for cm in &list.items {
        let Some(data) = &cm.data else { continue };
        if !cm
            .metadata
            .name
            .as_deref()
            .unwrap_or_default()
            .contains("-h")
        {
            continue; // the marker
        }
        shards += 1;
        for (k, v) in data {
            streams += 1;
            keys += k.len();
            bytes += k.len() + v.len();
            let mut parts = v.split(';');
            uids += parts.next().unwrap_or_default().len();
            for t in parts {
                tags += 1;
                tag_bytes += t.len() + 1;
            }
        }
    }
    let per = |x: usize, n: usize| x as f64 / n.max(1) as f64;
    let detail = format!(
        "{:.0} bytes per stream: key {:.0}, uid {:.0}, {:.1} tags of {:.0} bytes",
        per(bytes, streams),
        per(keys, streams),
        per(uids, streams),
        per(tags, streams),
        per(tag_bytes, tags)
    );
    (shards, bytes, detail)
}

/// Starts the release source; its log (level `warn`) goes to `$SOURCE_LOG` (appended) when set.
/// `$SOURCE_ENV` (`NAME=value`, space-separated) is added to its environment only, for trying
/// a runtime setting (e.g. `GLIBC_TUNABLES=...`) on the source without changing the bench's.
fn spawn_source(kubeconfig: &std::path::Path, sink: &str, admin: u16) -> Child {
    let log = std::env::var_os("SOURCE_LOG").map(|path| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        Stdio::from(file.expect("SOURCE_LOG can be opened"))
    });
    // `BENCH_SOURCE_BIN`: another build's binary, to measure it beside this one in the same run.
    Command::new(
        std::env::var("BENCH_SOURCE_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_imagegate").to_string()),
    )
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
    .envs(
        std::env::var("SOURCE_ENV")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pair| pair.split_once('=')),
    )
    .stdout(Stdio::null())
    .stderr(log.unwrap_or_else(Stdio::null))
    .spawn()
    .unwrap()
}

fn main() {
    imagegate::runtime::tls::install_crypto_provider();
    if let Ok(sink) = std::env::var("BENCH_POSTER") {
        return poster(&sink);
    }
    common::run(bench());
}

async fn bench() {
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

    // The floors: a bare POST of an event like the source's, one at a time. Back to back from
    // this process; then from a second process with a one-thread runtime like the source's,
    // back to back and paced like the changes below (one every 10 ms: between two, the client,
    // the sink and the CPUs go idle, as they do between the changes).
    let http = reqwest::Client::new();
    let mut bare = Vec::new();
    for k in 0..2000 {
        let t = Instant::now();
        let r = floor_request(&http, &sink, k).send().await.unwrap();
        assert_eq!(r.status(), 202);
        bare.push(t.elapsed().as_secs_f64());
    }
    bare.sort_by(f64::total_cmp);
    let bare_second = second_process_floor(&sink, 2000, 0, 10_000).await;
    let bare_paced = second_process_floor(&sink, PACED, 10, 20_000).await;
    let (floor_rate, floor_cpu) = throughput_floor(&sink, THROUGHPUT_POSTS, 64, 30_000).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "source").unwrap();
    // The first run reaches the emulator through the proxy that stamps when a watch event
    // reaches the source; the run after the restart connects directly.
    let marks: Arc<Mutex<Marks>> = Arc::default();
    let proxy = watch_proxy(emu.addr(), marks.clone()).await;
    let proxied = dir.path().join("kubeconfig-proxied");
    std::fs::write(
        &proxied,
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .replace(&emu.url(), &format!("http://{proxy}")),
    )
    .unwrap();
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t_start = Instant::now();
    let mut source = Killed::new(spawn_source(&proxied, &sink, admin));
    let pid = source.pid();
    common::wait_ready(admin).await;
    let t_ready = t_start.elapsed();
    let rss_idle = rss_kib(pid, "VmRSS:");

    // The watch opens right after the first list; let it settle before the first change.
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Paced: one import every 10 ms. Latency from the import, and from the moment the proxy
    // handed the change's watch event to the source, to the sink's receipt (its 2xx follows).
    let mut paced = Vec::new();
    let mut from_watch = Vec::new();
    for i in 0..PACED {
        let d = digest(i, 0, 1);
        marks.lock().unwrap().want = Some(d.clone().into_bytes());
        let t = Instant::now();
        emu.import("bench", &format!("nb-{}", i % n), "t0", Some(&d))
            .unwrap();
        let got = wait_for(&seen, std::slice::from_ref(&d), "a paced change").await;
        paced.push(got.duration_since(t).as_secs_f64());
        let reached = marks.lock().unwrap().at.get(&d).copied();
        match reached {
            Some(w) => from_watch.push(got.saturating_duration_since(w).as_secs_f64()),
            None => panic!("the proxy never saw the watch event of {d}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    marks.lock().unwrap().want = None;
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
    let last = wait_for(&seen, &keys, "the burst").await;
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
    let bench_cpu = cpu_seconds(std::process::id());
    let t_restart = Instant::now();
    let mut source = Killed::new(spawn_source(&kubeconfig, &sink, admin));
    let pid2 = source.pid();
    // For a profiler to attach to the catch-up (`perf record -p`): the source's pid.
    if let Some(path) = std::env::var_os("BENCH_CATCHUP_PID_FILE") {
        std::fs::write(path, pid2.to_string()).expect("BENCH_CATCHUP_PID_FILE can be written");
    }
    let last = wait_for(&seen, &missed, "the catch-up after a restart").await;
    let catch_up = last.duration_since(t_restart).as_secs_f64();
    let source_cpu = cpu_seconds(pid2);
    let bench_cpu = cpu_seconds(std::process::id()) - bench_cpu;
    let rss_peak2 = rss_kib(pid2, "VmHWM:");
    source.term();

    let total_events = PACED + n * 3;
    common::report_header(
        "imagegate source benchmark",
        &format!(
            "{n} ImageStreams x 3 tags; emulator and sink in the bench process, the source a separate release binary"
        ),
    );
    let row = |what: &str, sorted: &[f64]| {
        println!(
            "| {what}, p50 / p99 | {} / {} |",
            ms(percentile(sorted, 0.5)),
            ms(percentile(sorted, 0.99))
        )
    };
    row(
        "bare POST round trip, back to back, from the bench process",
        &bare,
    );
    row(
        "bare POST round trip, back to back, from a second process",
        &bare_second,
    );
    row(
        &format!("bare POST round trip, {PACED} paced 10 ms apart, from a second process"),
        &bare_paced,
    );
    println!(
        "| start to ready (first list of {n} streams recorded) | {:.2} s |",
        t_ready.as_secs_f64()
    );
    row(
        &format!("paced ({PACED} imports, 10 ms apart): import to sink receipt"),
        &paced,
    );
    row(
        "paced: watch event handed to the source to sink receipt",
        &from_watch,
    );
    let p50 = percentile(&from_watch, 0.5);
    println!(
        "| watch-to-sink p50 / paced bare POST p50 (like for like: the target) | {:.2}x |",
        p50 / percentile(&bare_paced, 0.5)
    );
    println!(
        "| watch-to-sink p50 / back-to-back bare POST p50, second process / bench process | {:.2}x / {:.2}x |",
        p50 / percentile(&bare_second, 0.5),
        p50 / percentile(&bare, 0.5)
    );
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
        "| catch-up rate / throughput floor ({THROUGHPUT_POSTS} bare POSTs, 64 at once, from a second process) | {:.0} / {floor_rate:.0} events/s ({:.2}x) |",
        n as f64 / catch_up,
        n as f64 / catch_up / floor_rate
    );
    println!(
        "| catch-up: CPU of the source / of the bench process (emulator, sink) | {source_cpu:.2} s / {bench_cpu:.2} s ({:.0} / {:.0} µs per change; a bare POST of the floor: {:.0} µs) |",
        source_cpu * 1e6 / n as f64,
        bench_cpu * 1e6 / n as f64,
        floor_cpu * 1e6
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
    println!(
        "| bench process (emulator and sink) RSS peak | {} MiB |",
        rss_kib(std::process::id(), "VmHWM:") / 1024
    );
    let (shards, bytes, detail) = checkpoint_size(emu.client().unwrap(), "default").await;
    println!(
        "| checkpoint after the catch-up: ConfigMaps / bytes | {shards} / {:.1} MB ({detail}) |",
        bytes as f64 / 1e6
    );
    let bare_posts = bare.len() + bare_second.len() + bare_paced.len() + THROUGHPUT_POSTS;
    println!(
        "| events seen by the sink | {} of {} (+ {} bare) |",
        seen.lock().unwrap().len() - bare_posts,
        total_events + n,
        bare_posts
    );
    emu.shutdown().await;
}
