//! `API=real cargo bench --bench controller`: the controller benchmark against a real
//! kube-apiserver and etcd from `scripts/realcluster up` (etcd syncing every write to disk, as
//! a cluster's does), the image API aggregated from the emulator (`IMAGEGATE_EMULATOR`, else
//! the workspace's release build when there is one), the controller as its ServiceAccount with
//! a TokenRequest token and `config/`'s RBAC. The floor, the paced and the burst runs are the
//! emulator's ([`super::run_phases`]). What the emulator's request log gives there comes from
//! kube-apiserver's audit log here: the controller's writes, and how long the server took over
//! each of its requests; and the share of the time each process spent is their CPU time over the
//! runs (`/proc/<pid>/stat`).

use serde_json::Value;

use super::Controller;
use super::common::{self, Cluster};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SA: &str = "system:serviceaccount:imagegate-system:imagegate-controller";

/// CPU time of a process so far (user + system), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5): 12 and 13 after the name and state.
    (ticks(11) + ticks(12)) / 100.0
}

/// What the audit log says about the controller's requests over the runs.
struct Audited {
    /// Successful writes by resource (`customruns/status`, `imagestreams`, `events`).
    writes: std::collections::HashMap<String, f64>,
    refused: Vec<String>,
    /// The server's own time over every request of the controller, in seconds.
    server_seconds: f64,
    requests: usize,
}

fn audited(events: &[Value]) -> Audited {
    let mut a = Audited {
        writes: Default::default(),
        refused: Vec::new(),
        server_seconds: 0.0,
        requests: 0,
    };
    for e in events.iter().filter(|e| e["user"]["username"] == SA) {
        let time = |k: &str| {
            e[k].as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        };
        let verb = e["verb"].as_str().unwrap_or_default();
        if let (Some(from), Some(to)) = (time("requestReceivedTimestamp"), time("stageTimestamp"))
            && verb != "watch"
        {
            a.server_seconds += (to - from).num_microseconds().unwrap_or(0) as f64 / 1e6;
            a.requests += 1;
        }
        if !matches!(verb, "create" | "update" | "patch" | "delete") {
            continue;
        }
        let mut resource = e["objectRef"]["resource"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(sub) = e["objectRef"]["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
        if (200..300).contains(&code) {
            *a.writes.entry(resource).or_default() += 1.0;
        } else {
            a.refused.push(format!("{verb} {resource} {code}"));
        }
    }
    a
}

/// Tekton's released CustomRun CRD, in Go's module cache (`scripts/realcluster manifests`
/// downloads the pinned release once).
fn customrun_crd() -> String {
    let out = std::process::Command::new(format!("{ROOT}/scripts/realcluster"))
        .args(["manifests", "tekton-pipeline"])
        .output()
        .expect("scripts/realcluster runs");
    assert!(
        out.status.success(),
        "scripts/realcluster manifests tekton-pipeline failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    format!("{dir}/config/300-crds/300-customrun.yaml")
}

/// The benchmark on the real control plane; prints its report.
pub async fn run(runs_n: usize, paced_n: usize) {
    let t_up = std::time::Instant::now();
    let cluster = Cluster::up();
    cluster.kubectl(&["apply", "--server-side", "-k", "config/"]);
    cluster.kubectl(&["apply", "--server-side", "-f", &customrun_crd()]);
    for crd in ["customruns.tekton.dev", "imagepromotions.imagegate.dev"] {
        cluster.kubectl(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=60s",
        ]);
    }
    cluster.kubectl(&["create", "namespace", "bench"]);
    cluster.kubectl(&["create", "namespace", "floor"]);
    // The runs' account `default` may promote, as tekton/ grants its pipeline's account, and
    // the namespace is opted in to the controller's writes (tekton/330).
    for ns in ["bench", "floor"] {
        cluster.kubectl(&["create", "serviceaccount", "default", "-n", ns]);
        cluster.kubectl(&["apply", "-n", ns, "-f", "tekton/330-controller-rbac.yaml"]);
        cluster.kubectl(&[
            "create",
            "rolebinding",
            "promoter",
            "-n",
            ns,
            "--clusterrole=imagegate-promoter",
            &format!("--serviceaccount={ns}:default"),
        ]);
    }
    cluster.seed(super::all_streams(runs_n + paced_n)).await;
    cluster.seed(super::floor_stream_yaml()).await;
    eprintln!("control plane up and seeded in {:?}", t_up.elapsed());
    let client = cluster.client().await;
    let floor = super::floor(&client, 200).await;

    let controller = Controller::start(&cluster.service_account_kubeconfig(
        "imagegate-system",
        "imagegate-controller",
        "controller.kubeconfig",
    ))
    .await;
    let pids = [
        ("imagegate controller", controller.pid()),
        (
            "kube-apiserver",
            cluster.env("APISERVER_PID").parse().unwrap(),
        ),
        ("etcd", cluster.env("ETCD_PID").parse().unwrap()),
        (
            "image API (emulator)",
            cluster.env("IMAGE_API_PID").parse().unwrap(),
        ),
    ];
    let cpu0: Vec<f64> = pids.iter().map(|(_, p)| cpu_seconds(*p)).collect();
    let audit_from = cluster.audit_len();
    let phases = super::run_phases(&client, runs_n, paced_n).await;
    let cpu: Vec<f64> = pids
        .iter()
        .zip(&cpu0)
        .map(|((_, p), c0)| cpu_seconds(*p) - c0)
        .collect();
    let rss = controller.rss();
    // The audit log is written as requests complete; the last status writes are in it by now.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let a = audited(&cluster.audit_since(audit_from));
    let promoted = super::promoted(&client).await;

    let total_runs = (paced_n + runs_n) as f64;
    common::report_header(
        "imagegate controller benchmark, real API server",
        "kube-apiserver v1.35.4 and etcd v3.6.16 (fsync on) on loopback, the image API aggregated from the emulator, the controller a separate release binary as its ServiceAccount",
    );
    println!("| runs promoted | {promoted} of {} |", paced_n + runs_n);
    super::report_phases(&floor, &phases, runs_n, paced_n);
    let w = |r: &str| a.writes.get(r).copied().unwrap_or(0.0);
    super::report_writes(
        total_runs,
        (w("imagestreams"), w("customruns/status"), w("events")),
        &a.refused,
    );
    println!(
        "| the controller's requests (watches left out): per run / kube-apiserver's own time per request, mean | {:.2} / {} |",
        a.requests as f64 / total_runs,
        common::ms(a.server_seconds / a.requests.max(1) as f64)
    );
    let total: f64 = cpu.iter().sum();
    for ((name, _), c) in pids.iter().zip(&cpu) {
        println!(
            "| CPU over the runs: {name} | {c:.1} s ({:.0} %) |",
            100.0 * c / total.max(f64::EPSILON)
        );
    }
    rss.report();
    drop(controller);
    drop(cluster);
}
