//! Benchmark of `imagegate controller` against the emulator: how long 1,000 ImagePromotion
//! CustomRuns take to reach a final status, create-to-final latency, API writes per run and
//! RSS, beside the bare round trip of the API calls one promotion needs, measured in the same
//! run. Not a test: it prints a report (the numbers go into BENCHMARKS.md).
//!
//! `cargo bench --bench controller` (RUNS=1000 by default; `RUNS=200` for a quick look).
//! `API=real` runs the same against a real kube-apiserver and etcd ([`real`]).
//! `FOREIGN=N FOREIGN_KIB=K` seeds N CustomRuns of another custom task, K KiB of params each.
//! `BENCH_CONTROLLER_BIN=<program>` runs that program (given the controller's args) instead of
//! the release binary: a heap profiler's wrapper around a `system-alloc` build, for instance
//! (the RSS read is then the wrapper's).

mod common;
#[path = "controller/real.rs"]
mod real;

use common::{Killed, ms, percentile, rss_kib};
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use imagegate::api::{CustomRun, ImageStream};
use imagegate_emulator::{Config, Emulator};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

fn digest(i: usize, which: char) -> String {
    let hex = format!("{i:016x}");
    format!("sha256:{}{}", which.to_string().repeat(48), hex)
}

fn stream_yaml(i: usize) -> String {
    let (a, b) = (digest(i, 'a'), digest(i, 'b'));
    format!(
        r#"apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {{name: nb-{i}, namespace: bench, generation: 3}}
spec:
  tags:
  - {{name: candidate, from: {{kind: DockerImage, name: "quay.io/org/nb-{i}:latest"}}, importPolicy: {{scheduled: true}}, generation: 3}}
  - {{name: latest, from: {{kind: ImageStreamImage, name: "nb-{i}@{a}"}}, generation: 2}}
status:
  tags:
  - tag: candidate
    items:
    - {{created: "2026-11-30T00:00:00Z", dockerImageReference: "quay.io/org/nb-{i}@{b}", image: "{b}", generation: 3}}
    - {{created: "2026-11-29T00:00:00Z", dockerImageReference: "quay.io/org/nb-{i}@{a}", image: "{a}", generation: 2}}
  - tag: latest
    items:
    - {{created: "2026-11-29T01:00:00Z", dockerImageReference: "quay.io/org/nb-{i}@{a}", image: "{a}", generation: 2}}
"#
    )
}

fn run_body(name: &str, i: usize) -> CustomRun {
    serde_json::from_value(json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"customRef": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion"},
                 "params": [{"name": "imagestream", "value": format!("nb-{i}")},
                            {"name": "digest", "value": digest(i, 'b')},
                            {"name": "validation-status", "value": "Succeeded"}]}
    }))
    .unwrap()
}

/// The ImageStream of the floor, `floor/nb-0`.
fn floor_stream_yaml() -> String {
    stream_yaml(0).replace("namespace: bench", "namespace: floor")
}

/// The permission to promote (config/'s ClusterRole) for the runs' service account `default`
/// in `ns`, as tekton/ grants its pipeline's.
fn grant_promote(emu: &Emulator, ns: &str) {
    emu.seed_str(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: promoter, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-promoter}}\n\
         subjects:\n- {{kind: ServiceAccount, name: default, namespace: {ns}}}\n"
    ))
    .unwrap();
}

/// The review the controller asks before a promotion.
fn review() -> SubjectAccessReview {
    serde_json::from_value(json!({"spec": {
        "user": "system:serviceaccount:floor:default",
        "resourceAttributes": {"namespace": "floor", "verb": "promote", "group": "imagegate.dev", "resource": "imagepromotions"}
    }}))
    .unwrap()
}

/// The floor: the API calls one promotion needs, made back to back by a plain client on
/// objects set aside for it (may the run's account promote, start status, read the stream,
/// patch the served tag, final status; [`floor_stream_yaml`] seeded, the account `default` of
/// `floor` granted promote). Returns the per-promotion durations, sorted.
async fn floor(client: &kube::Client, samples: usize) -> Vec<f64> {
    let runs: Api<CustomRun> = Api::namespaced(client.clone(), "floor");
    let streams: Api<ImageStream> = Api::namespaced(client.clone(), "floor");
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let mut run = runs
        .create(&PostParams::default(), &{
            let mut r = run_body("floor", 0);
            r.metadata.namespace = Some("floor".into());
            r
        })
        .await
        .unwrap();
    let mut out = Vec::with_capacity(samples);
    for n in 0..samples {
        let to = if n % 2 == 0 {
            digest(0, 'b')
        } else {
            digest(0, 'a')
        };
        let t0 = Instant::now();
        let answered = reviews
            .create(&PostParams::default(), &review())
            .await
            .unwrap();
        assert!(answered.status.is_some_and(|s| s.allowed));
        let mut started = run.clone();
        started.status = Some(serde_json::from_value(json!({"startTime": "2026-12-01T00:00:00Z",
            "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Started", "message": format!("{n}")}]})).unwrap());
        run = runs
            .replace_status("floor", &PostParams::default(), &started)
            .await
            .unwrap();
        let is = streams.get("nb-0").await.unwrap();
        let patch = json!({"metadata": {"resourceVersion": is.metadata.resource_version},
            "spec": {"tags": [{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb-0@{to}")},
                               "annotations": {"imagegate.dev/phase": "Promoted", "imagegate.dev/message": format!("{n}")}}]}});
        streams
            .patch("nb-0", &PatchParams::default(), &Patch::Strategic(&patch))
            .await
            .unwrap();
        let mut done = run.clone();
        done.status = Some(serde_json::from_value(json!({"startTime": "2026-12-01T00:00:00Z", "completionTime": "2026-12-01T00:00:01Z",
            "conditions": [{"type": "Succeeded", "status": "True", "reason": "Promoted", "message": format!("{n}")}],
            "results": [{"name": "phase", "value": "Promoted"}]})).unwrap());
        run = runs
            .replace_status("floor", &PostParams::default(), &done)
            .await
            .unwrap();
        out.push(t0.elapsed().as_secs_f64());
    }
    out.sort_by(f64::total_cmp);
    out
}

/// Records when each run is first seen done.
fn watch_done(client: kube::Client) -> Arc<Mutex<HashMap<String, Instant>>> {
    let done: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let sink = done.clone();
    let runs: Api<CustomRun> = Api::namespaced(client, "bench");
    tokio::spawn(async move {
        let mut events = watcher(runs, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(ev) = events.next().await {
            if let Ok(run) = ev
                && run.is_done()
            {
                let now = Instant::now();
                let name = run.metadata.name.clone().unwrap_or_default();
                sink.lock().unwrap().entry(name).or_insert(now);
            }
        }
    });
    done
}

async fn wait_all(done: &Arc<Mutex<HashMap<String, Instant>>>, prefix: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let count = done
            .lock()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with(prefix))
            .count();
        if count >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {count}/{n} {prefix} runs finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The create-to-final latencies of the paced and the burst runs, sorted, and the burst's times.
struct Phases {
    paced: Vec<f64>,
    burst: Vec<f64>,
    /// When the last burst run was created, and when all were final, from the first create.
    t_created: Duration,
    t_all: Duration,
}

/// Creates `paced_n` runs one every 20 ms (so that the latency is not queueing), then `runs_n`
/// as fast as one client can, and times each from its create until the watch sees it final.
async fn run_phases(client: &kube::Client, runs_n: usize, paced_n: usize) -> Phases {
    let done = watch_done(client.clone());
    let runs: Api<CustomRun> = Api::namespaced(client.clone(), "bench");
    let mut created = HashMap::new();
    for i in 0..paced_n {
        let name = format!("paced-{i}");
        created.insert(name.clone(), Instant::now());
        runs.create(&PostParams::default(), &run_body(&name, runs_n + i))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_all(&done, "paced-", paced_n).await;
    let latencies = |created: &HashMap<String, Instant>| -> Vec<f64> {
        let d = done.lock().unwrap();
        let mut v: Vec<f64> = created
            .iter()
            .map(|(n, t)| (d[n].duration_since(*t)).as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let paced = latencies(&created);

    let t_burst = Instant::now();
    let mut created = HashMap::new();
    for i in 0..runs_n {
        let name = format!("burst-{i}");
        created.insert(name.clone(), Instant::now());
        runs.create(&PostParams::default(), &run_body(&name, i))
            .await
            .unwrap();
    }
    let t_created = t_burst.elapsed();
    wait_all(&done, "burst-", runs_n).await;
    let t_all = t_burst.elapsed();
    Phases {
        paced,
        burst: latencies(&created),
        t_created,
        t_all,
    }
}

/// How many runs of `bench` ended `Promoted`.
async fn promoted(client: &kube::Client) -> usize {
    let runs: Api<CustomRun> = Api::namespaced(client.clone(), "bench");
    let list = runs.list(&Default::default()).await.unwrap();
    list.items
        .iter()
        .filter(|r| r.succeeded_condition().and_then(|c| c.reason.as_deref()) == Some("Promoted"))
        .count()
}

/// The report's lines about latency, common to both targets.
fn report_phases(floor: &[f64], p: &Phases, runs_n: usize, paced_n: usize) {
    let floor_p50 = percentile(floor, 0.5);
    println!(
        "| floor: bare API round trips of one promotion (start status, get stream, patch stream, final status), p50 / p99 | {} / {} |",
        ms(floor_p50),
        ms(percentile(floor, 0.99))
    );
    println!(
        "| paced ({paced_n} runs, one per 20 ms): create-to-final p50 / p99 | {} / {} |",
        ms(percentile(&p.paced, 0.5)),
        ms(percentile(&p.paced, 0.99))
    );
    println!(
        "| paced p50 / floor p50 | {:.2}x |",
        percentile(&p.paced, 0.5) / floor_p50
    );
    println!(
        "| burst: {runs_n} runs created in | {:.2} s |",
        p.t_created.as_secs_f64()
    );
    println!(
        "| burst: all {runs_n} final after | {:.2} s ({:.0} runs/s) |",
        p.t_all.as_secs_f64(),
        runs_n as f64 / p.t_all.as_secs_f64()
    );
    println!(
        "| burst: create-to-final p50 / p99 | {} / {} |",
        ms(percentile(&p.burst, 0.5)),
        ms(percentile(&p.burst, 0.99))
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    imagegate::runtime::tls::install_crypto_provider();
    let runs_n: usize = std::env::var("RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let paced_n = runs_n.min(300);
    if std::env::var("API").as_deref() == Ok("real") {
        real::run(runs_n, paced_n).await;
        return;
    }
    // Without the emulator's image import controllers: the bench seeds each stream's history
    // itself, and their first imports of 1,300 never-checked streams would write the streams
    // under the floor's and the controller's conditional writes (409s that measure the emulator).
    let config = Config {
        imports: imagegate_emulator::Imports {
            enabled: false,
            ..Default::default()
        },
        ..Config::default()
    };
    let emu = Emulator::start(config).await.unwrap();
    emu.seed_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/300-imagepromotion-crd.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let t_seed = Instant::now();
    // FOREIGN runs of another custom task in the cluster, FOREIGN_KIB of params each (issue 30:
    // 10,000 of 100 KiB): what the controller's watch lists and must not keep.
    let foreign: usize = std::env::var("FOREIGN")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let foreign_kib: usize = std::env::var("FOREIGN_KIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    if foreign > 0 {
        emu.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "others"}}))
            .unwrap();
        let blob = "p".repeat(foreign_kib * 1024);
        for i in 0..foreign {
            emu.seed(json!({
                "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
                "metadata": {"name": format!("wait-{i}"), "namespace": "others"},
                "spec": {"customRef": {"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait"},
                         "params": [{"name": "blob", "value": blob}]}
            }))
            .unwrap();
        }
        eprintln!("seeded {foreign} foreign CustomRuns of {foreign_kib} KiB");
    }
    emu.seed_str(&all_streams(runs_n + paced_n)).unwrap();
    emu.seed_str(&floor_stream_yaml()).unwrap();
    emu.seed_str(include_str!("../config/204-clusterrole-promoter.yaml"))
        .unwrap();
    grant_promote(&emu, "bench");
    grant_promote(&emu, "floor");
    eprintln!(
        "seeded {} ImageStreams in {:?}",
        runs_n + paced_n,
        t_seed.elapsed()
    );
    let client = emu.client().unwrap();
    let floor = floor(&client, 200).await;

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig, "controller").unwrap();
    let controller = Controller::start(&kubeconfig).await;
    emu.clear_requests();
    let phases = run_phases(&client, runs_n, paced_n).await;
    let rss = controller.rss();

    let total_runs = (paced_n + runs_n) as f64;
    let writes = emu.mutating_requests();
    let ok = |r: &&imagegate_emulator::control::RequestRecord| (200..300).contains(&r.code);
    let by = |res: &str| {
        writes
            .iter()
            .filter(|r| r.user == "controller" && r.resource == res)
            .filter(ok)
            .count() as f64
    };
    let refused: Vec<String> = writes
        .iter()
        .filter(|r| r.user == "controller" && !(200..300).contains(&r.code))
        .map(|r| format!("{} {} {}", r.verb, r.resource, r.code))
        .collect();
    let (is_w, cr_w, ev_w) = (by("imagestreams"), by("customruns"), by("events"));
    let promoted = promoted(&client).await;

    common::report_header(
        "imagegate controller benchmark",
        "emulator in the bench process, controller a separate release binary",
    );
    println!("| foreign CustomRuns in the cluster | {foreign} of {foreign_kib} KiB params each |");
    println!("| runs promoted | {promoted} of {} |", paced_n + runs_n);
    report_phases(&floor, &phases, runs_n, paced_n);
    report_writes(total_runs, (is_w, cr_w, ev_w), &refused);
    rss.report();
    drop(controller);
    emu.shutdown().await;
}

/// The ImageStreams of the paced and the burst runs, `bench/nb-<i>`.
fn all_streams(n: usize) -> String {
    (0..n).map(|i| format!("---\n{}", stream_yaml(i))).collect()
}

/// The report's lines about writes: ImageStream, CustomRun status and Event writes per run,
/// and the refused ones.
fn report_writes(total_runs: f64, (is_w, cr_w, ev_w): (f64, f64, f64), refused: &[String]) {
    println!(
        "| API writes per run: ImageStream + CustomRun status | {:.2} ({:.2} + {:.2}) |",
        (is_w + cr_w) / total_runs,
        is_w / total_runs,
        cr_w / total_runs
    );
    println!(
        "| Kubernetes Event writes per run | {:.2} |",
        ev_w / total_runs
    );
    println!("| refused writes (conflicts) | {} |", refused.len());
    if !refused.is_empty() {
        eprintln!("refused: {:?}", &refused[..refused.len().min(10)]);
    }
}

/// The release `imagegate controller` under measurement, a separate process.
struct Controller {
    process: Killed,
    rss_idle: u64,
}

/// The controller's resident set: idle (ready, before any run), peak and at the end, in KiB.
struct Rss(u64, u64, u64);

impl Rss {
    fn report(&self) {
        println!(
            "| controller RSS idle / peak / end | {} / {} / {} MiB |",
            self.0 / 1024,
            self.1 / 1024,
            self.2 / 1024
        );
    }
}

impl Controller {
    /// Starts the controller with `kubeconfig` and waits until it is ready.
    async fn start(kubeconfig: &std::path::Path) -> Controller {
        let admin = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let process = Killed::new(
            Command::new(
                std::env::var("BENCH_CONTROLLER_BIN")
                    .unwrap_or_else(|_| env!("CARGO_BIN_EXE_imagegate").to_string()),
            )
            .args(["controller", "--admin-addr", &format!("127.0.0.1:{admin}")])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        );
        common::wait_ready(admin).await;
        let rss_idle = rss_kib(process.pid(), "VmRSS:");
        Controller { process, rss_idle }
    }

    fn pid(&self) -> u32 {
        self.process.pid()
    }

    fn rss(&self) -> Rss {
        let pid = self.pid();
        Rss(
            self.rss_idle,
            rss_kib(pid, "VmHWM:"),
            rss_kib(pid, "VmRSS:"),
        )
    }
}
