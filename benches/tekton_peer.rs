//! `imagegate controller` beside a peer custom task on real Tekton Pipelines (v1.15.0,
//! `scripts/realcluster up --tekton`): the same PipelineRuns, alternating, through two Pipelines of
//! one shape: `begin` (a custom task) -> `validate` (the shipped smoke-test Task; its pod is bound
//! by kube-scheduler to kwok's Node and ended by kwok) -> `finally` `promote` (a custom task).
//!
//! - **imagegate**: `tekton/` as shipped (Pipeline `imagegate-promote`, ImagePromotion
//!   `notebooks`), `imagegate controller` as its ServiceAccount with `config/`'s RBAC; each run
//!   promotes a new candidate (an import through the image API first), checks, proof and all.
//! - **peer**: the same Pipeline with both custom tasks a Knative-style custom task that does
//!   nothing (`realcluster/tekton-peer`, a `wait.testing.tekton.dev/v1beta1` `Wait` with no wait,
//!   on Tekton's generated CustomRun reconciler and knative.dev/pkg, as Tekton's own custom tasks
//!   are written), as its own ServiceAccount.
//!
//! Measured by one watch of the namespace, per side: each CustomRun from when the watch first
//! sees it to when it sees it final, and each PipelineRun from its create to final; p50 and p99;
//! each controller's CPU seconds and peak RSS over the runs. Not a test: nothing is asserted
//! about time, but every run must end Succeeded (imagegate's having promoted its digest), or the
//! numbers would measure something else.
//!
//! `scripts/realcluster bench-tekton-peer` (builds what it needs). `RUNS` (default 30) runs per
//! side, one at a time; `CONTROLLER_LOG=<file>` keeps imagegate's debug log.

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    Cluster, Killed, cpu_seconds, env_usize, free_port, ms, percentile, report_header, rss_kib,
};
use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

const NS: &str = "notebooks";
const STREAM: &str = "jupyter-minimal-notebook";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Where the peer runs (its Leases, its `SYSTEM_NAMESPACE`).
const PEER_NS: &str = "imagegate-peer";

/// The shipped Pipeline's shape with the peer's custom task in both custom tasks' places. The
/// `validate` task and its account are the same; its image is a param, not `begin`'s result
/// (the peer returns none).
const PEER_PIPELINE: &str = r#"
apiVersion: tekton.dev/v1
kind: Pipeline
metadata: {name: peer-promote}
spec:
  params:
  - {name: image, type: string}
  tasks:
  - name: begin
    taskRef: {apiVersion: wait.testing.tekton.dev/v1beta1, kind: Wait}
    timeout: 2m
    params: [{name: duration, value: 0s}]
  - name: validate
    runAfter: [begin]
    taskRef: {kind: Task, name: imagegate-smoke-test}
    timeout: 20m
    params: [{name: image, value: $(params.image)}]
  finally:
  - name: promote
    when: [{input: $(tasks.validate.status), operator: in, values: ["Succeeded"]}]
    taskRef: {apiVersion: wait.testing.tekton.dev/v1beta1, kind: Wait}
    timeout: 5m
    params: [{name: duration, value: 0s}]
"#;

/// The peer's account: what its controller reads and writes (CustomRuns and their status, Events),
/// and its Leases and ConfigMaps in its own namespace (knative.dev/pkg's leader election and
/// logging configuration), as a custom task's release would grant.
const PEER_RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: wait-task, namespace: imagegate-peer}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: imagegate-peer-wait-task}
rules:
- apiGroups: [tekton.dev]
  resources: [customruns]
  verbs: [get, list, watch, update, patch]
- apiGroups: [tekton.dev]
  resources: [customruns/status]
  verbs: [get, update, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: imagegate-peer-wait-task}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: imagegate-peer-wait-task}
subjects: [{kind: ServiceAccount, name: wait-task, namespace: imagegate-peer}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: wait-task, namespace: imagegate-peer}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: wait-task, namespace: imagegate-peer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: wait-task}
subjects: [{kind: ServiceAccount, name: wait-task, namespace: imagegate-peer}]
"#;

fn main() {
    common::run(bench());
}

/// The two sides.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Side {
    Imagegate,
    Peer,
}

impl Side {
    fn of(name: &str) -> Side {
        if name.starts_with("peer-") {
            Side::Peer
        } else {
            Side::Imagegate
        }
    }

    fn label(self) -> &'static str {
        match self {
            Side::Imagegate => "imagegate",
            Side::Peer => "peer (no-op custom task)",
        }
    }
}

/// What the watch saw of one run: when it first saw it, when it saw it final, and how it ended
/// (its Succeeded condition's `status/reason`).
#[derive(Default, Clone)]
struct Seen {
    first: Option<Instant>,
    last: Option<Instant>,
    reason: String,
    object: Value,
}

type Book = Arc<Mutex<HashMap<String, Seen>>>;

/// Watches `plural` of the tekton.dev group in NS into `book`.
fn watch(client: kube::Client, version: &str, kind: &str, plural: &str, book: Book) {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client,
        NS,
        &ApiResource {
            group: "tekton.dev".into(),
            version: version.into(),
            api_version: format!("tekton.dev/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        },
    );
    tokio::spawn(async move {
        // With a backoff: once the cluster is stopped at the end, a watch that failed at once,
        // again and again, would never yield, and the runtime could not stop its task.
        let mut w = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(e) = w.next().await {
            let (watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = (match e {
                Ok(e) => e,
                Err(_) => continue,
            }) else {
                continue;
            };
            let now = Instant::now();
            let name = o.metadata.name.clone().unwrap_or_default();
            let done = o.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Succeeded" && c["status"] != "Unknown")
                .map(|c| {
                    format!(
                        "{}/{}",
                        c["status"].as_str().unwrap_or_default(),
                        c["reason"].as_str().unwrap_or_default()
                    )
                });
            let mut book = book.lock().unwrap();
            let seen = book.entry(name).or_default();
            seen.first.get_or_insert(now);
            if let (Some(reason), None) = (done, seen.last) {
                seen.last = Some(now);
                seen.reason = reason;
                seen.object = o.data.clone();
            }
        }
    });
}

fn pipelinerun(name: &str, side: Side, digest: &str) -> String {
    let mut run = json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": name},
        "spec": {
            "taskRunTemplate": {"serviceAccountName": "imagegate-pipeline"},
            "taskRunSpecs": [{"pipelineTaskName": "validate", "serviceAccountName": "imagegate-validation",
                "podTemplate": {"automountServiceAccountToken": false}}],
            "timeouts": {"pipeline": "1h"},
        },
    });
    run["spec"]["pipelineRef"]["name"] = json!(match side {
        Side::Imagegate => "imagegate-promote",
        Side::Peer => "peer-promote",
    });
    run["spec"]["params"] = match side {
        Side::Imagegate => json!([
            {"name": "imagestream", "value": format!("{NS}/{STREAM}")},
            {"name": "digest", "value": digest},
        ]),
        Side::Peer => {
            json!([{"name": "image", "value": format!("quay.io/modh/odh-minimal-notebook-container@{digest}")}])
        }
    };
    if side == Side::Imagegate {
        run["metadata"]["annotations"] = json!({
            "imagegate.dev/imagestream": format!("{NS}/{STREAM}"),
            "imagegate.dev/digest": digest,
        });
    }
    run.to_string()
}

async fn bench() {
    let runs = env_usize("RUNS", 30);
    let t_up = Instant::now();
    let cluster = Cluster::up_with(&["--tekton"], &[]);
    let root = |p: &str| format!("{ROOT}/{p}");
    cluster.kubectl(&["apply", "--server-side", "-k", &root("config")]);
    cluster.kubectl(&[
        "wait",
        "--for=condition=Established",
        "crd/imagepromotions.imagegate.dev",
    ]);
    cluster.kubectl(&["create", "namespace", NS]);
    let seed = std::fs::read_to_string(root("examples/notebook-imagestreams.yaml")).unwrap();
    let streams: Vec<&str> = seed
        .split("\n---")
        .filter(|doc| doc.contains("apiVersion: image.openshift.io/"))
        .collect();
    cluster.seed(streams.join("\n---")).await;
    cluster.kubectl(&["apply", "--server-side", "-k", &root("tekton")]);
    cluster.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], PEER_PIPELINE);
    cluster.kubectl(&["create", "namespace", PEER_NS]);
    cluster.kubectl_stdin(&["apply", "-f", "-"], PEER_RBAC);

    // imagegate controller as its ServiceAccount, the peer as its own.
    let kubeconfig = cluster.service_account_kubeconfig(
        "imagegate-system",
        "imagegate-controller",
        "controller.kubeconfig",
    );
    let admin = free_port();
    // CONTROLLER_LOG=<file>: the controller's debug log there (else its warnings, with the
    // cluster's logs, which go when it stops).
    let log = std::env::var_os("CONTROLLER_LOG").map(std::path::PathBuf::from);
    let default_log = cluster.dir().join("logs/imagegate-controller.log");
    let imagegate = Killed::new(
        Command::new(env!("CARGO_BIN_EXE_imagegate"))
            .args(["--log-format", "json", "controller", "--admin-addr"])
            .arg(format!("127.0.0.1:{admin}"))
            .env("KUBECONFIG", &kubeconfig)
            .env(
                "RUST_LOG",
                if log.is_some() {
                    "info,imagegate=debug"
                } else {
                    "warn"
                },
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log.as_deref().unwrap_or(&default_log)).unwrap())
            .spawn()
            .unwrap(),
    );
    common::wait_ready(admin).await;
    let peer_kubeconfig =
        cluster.service_account_kubeconfig(PEER_NS, "wait-task", "peer.kubeconfig");
    let peer_log = std::fs::File::create(cluster.dir().join("logs/peer-wait-task.log")).unwrap();
    let peer = Killed::new(
        Command::new("tekton-peer-wait-task")
            .arg(format!("--kubeconfig={}", peer_kubeconfig.display()))
            .env("SYSTEM_NAMESPACE", PEER_NS)
            .env("METRICS_DOMAIN", "imagegate.dev/peer")
            .env("PROBES_PORT", free_port().to_string())
            .env("PROFILING_PORT", free_port().to_string())
            .env("METRICS_PROMETHEUS_PORT", free_port().to_string())
            .stdout(peer_log.try_clone().unwrap())
            .stderr(peer_log)
            .spawn()
            .expect("tekton-peer-wait-task is on PATH (scripts/realcluster bench-tekton-peer)"),
    );
    // Leading (knative.dev/pkg's leader election: a Lease in its namespace, taken once its
    // informers have synced) before anything is counted, so that its start is not counted as the
    // runs'. (sharedmain serves no readiness probe of its own.)
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let holders = cluster.kubectl(&[
            "get",
            "leases",
            "-n",
            PEER_NS,
            "-o",
            "jsonpath={.items[*].spec.holderIdentity}",
        ]);
        if !holders.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the peer custom task was not leading in 90 s (its log: logs/peer-wait-task.log)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "cluster, Tekton and both controllers up in {:?}",
        t_up.elapsed()
    );

    let client = cluster.client().await;
    let customruns: Book = Default::default();
    let pipelineruns: Book = Default::default();
    watch(
        client.clone(),
        "v1beta1",
        "CustomRun",
        "customruns",
        customruns.clone(),
    );
    watch(
        client,
        "v1",
        "PipelineRun",
        "pipelineruns",
        pipelineruns.clone(),
    );

    let cpu0 = (cpu_seconds(imagegate.pid()), cpu_seconds(peer.pid()));
    let audit0 = cluster.audit_len();
    let mut created: HashMap<String, Instant> = HashMap::new();
    for i in 0..runs * 2 {
        // Alternate which side goes first, so neither always follows the other.
        let side = if (i % 2 == 0) == (i / 2 % 2 == 0) {
            Side::Imagegate
        } else {
            Side::Peer
        };
        let digest = format!("sha256:{:064x}", 0xbe00 + i);
        let name = match side {
            Side::Imagegate => format!("ig-{i}"),
            Side::Peer => format!("peer-{i}"),
        };
        if side == Side::Imagegate {
            cluster
                .control(
                    reqwest::Method::POST,
                    &format!("namespaces/{NS}/imagestreams/{STREAM}/import"),
                    Some(
                        json!({"tag": "candidate", "digest": digest,
                            "dockerImageMetadata": {"Config": {"User": "1001"}}})
                        .to_string(),
                    ),
                )
                .await;
        }
        created.insert(name.clone(), Instant::now());
        cluster.kubectl_stdin(
            &["create", "-n", NS, "-f", "-"],
            &pipelinerun(&name, side, &digest),
        );
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(s) = pipelineruns.lock().unwrap().get(&name)
                && s.last.is_some()
            {
                // True/Succeeded, or True/Completed when a task was skipped (`reject`).
                assert!(
                    s.reason.starts_with("True/"),
                    "PipelineRun {name} ended {}: {:#}",
                    s.reason,
                    s.object["status"]
                );
                if side == Side::Imagegate {
                    let promoted = s.object["status"]["results"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .find(|r| r["name"] == "promoted-digest")
                        .map(|r| r["value"].clone());
                    assert_eq!(
                        promoted,
                        Some(json!(digest)),
                        "{name}: {:#}",
                        s.object["status"]
                    );
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "PipelineRun {name} not final in 120 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The finally task's CustomRun may be seen final just after the PipelineRun: wait for it.
        let promote = format!("{name}-promote");
        while customruns
            .lock()
            .unwrap()
            .get(&promote)
            .is_none_or(|s| s.last.is_none())
        {
            assert!(Instant::now() < deadline, "CustomRun {promote} not final");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu = (
        cpu_seconds(imagegate.pid()) - cpu0.0,
        cpu_seconds(peer.pid()) - cpu0.1,
    );
    let rss = (
        rss_kib(imagegate.pid(), "VmHWM:"),
        rss_kib(peer.pid(), "VmHWM:"),
    );

    // Each controller's requests over the runs, from the API server's audit log: reads and
    // writes per PipelineRun, by resource.
    let mut requests: HashMap<(&str, bool), HashMap<String, usize>> = HashMap::new();
    for e in cluster.audit_since(audit0) {
        let user = e["user"]["username"].as_str().unwrap_or_default();
        let who = match user {
            "system:serviceaccount:imagegate-system:imagegate-controller" => "imagegate",
            "system:serviceaccount:imagegate-peer:wait-task" => "peer",
            _ => continue,
        };
        let verb = e["verb"].as_str().unwrap_or_default();
        let write = !matches!(verb, "get" | "list" | "watch");
        let what = match e["objectRef"]["subresource"].as_str() {
            Some(sub) => format!(
                "{}/{sub}",
                e["objectRef"]["resource"].as_str().unwrap_or("?")
            ),
            None => e["objectRef"]["resource"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
        };
        *requests
            .entry((who, write))
            .or_default()
            .entry(format!("{verb} {what}"))
            .or_default() += 1;
    }
    report_header(
        "imagegate controller beside a no-op custom task on real Tekton",
        &format!(
            "real Tekton Pipelines v1.15.0, kube-apiserver and etcd on loopback, kwok's Node; \
             {runs} PipelineRuns a side, one at a time, alternating; begin -> validate (the \
             smoke-test pod, ended by kwok) -> finally promote"
        ),
    );
    let customruns = customruns.lock().unwrap().clone();
    let pipelineruns = pipelineruns.lock().unwrap().clone();
    let mut p50 = HashMap::new();
    for side in [Side::Imagegate, Side::Peer] {
        for task in ["begin", "promote"] {
            let mut v: Vec<f64> = customruns
                .iter()
                .filter(|(n, s)| {
                    Side::of(n) == side && n.ends_with(&format!("-{task}")) && s.last.is_some()
                })
                .map(|(_, s)| {
                    s.last
                        .unwrap()
                        .duration_since(s.first.unwrap())
                        .as_secs_f64()
                })
                .collect();
            assert_eq!(
                v.len(),
                runs,
                "{side:?} {task}: {} CustomRuns seen final",
                v.len()
            );
            v.sort_by(f64::total_cmp);
            println!(
                "| {}: CustomRun `{task}` seen to final, p50 / p99 | {} / {} |",
                side.label(),
                ms(percentile(&v, 0.5)),
                ms(percentile(&v, 0.99))
            );
        }
        let mut v: Vec<f64> = pipelineruns
            .iter()
            .filter(|(n, s)| Side::of(n) == side && s.last.is_some())
            .map(|(n, s)| s.last.unwrap().duration_since(created[n]).as_secs_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        p50.insert(side, percentile(&v, 0.5));
        println!(
            "| {}: PipelineRun create to final, p50 / p99 | {} / {} |",
            side.label(),
            ms(percentile(&v, 0.5)),
            ms(percentile(&v, 0.99))
        );
    }
    println!(
        "| PipelineRun p50, imagegate / peer | {:.2}x |",
        p50[&Side::Imagegate] / p50[&Side::Peer]
    );
    println!(
        "| controller CPU over the runs, imagegate / peer | {:.2} / {:.2} s |",
        cpu.0, cpu.1
    );
    for who in ["imagegate", "peer"] {
        for write in [false, true] {
            let by = requests.remove(&(who, write)).unwrap_or_default();
            let total: usize = by.values().sum();
            let mut by: Vec<_> = by.into_iter().collect();
            by.sort();
            let list: Vec<String> = by
                .iter()
                .map(|(what, n)| format!("{what} {:.2}", *n as f64 / runs as f64))
                .collect();
            println!(
                "| {who}: API {} per PipelineRun | {:.2} ({}) |",
                if write { "writes" } else { "reads" },
                total as f64 / runs as f64,
                list.join(", ")
            );
        }
    }
    println!(
        "| controller peak RSS, imagegate / peer | {} / {} MiB |",
        rss.0 / 1024,
        rss.1 / 1024
    );
}
