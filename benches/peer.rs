//! The peer, measured: Knative Eventing's ApiServerSource receive adapter against `imagegate
//! source`, in the same run, on the real-cluster tier (`scripts/realcluster up`: kube-apiserver
//! and etcd, the image API aggregated behind them). Both watch the same ImageStreams (namespace
//! `bench`, `STREAMS` streams x 3 tags) as their own ServiceAccounts and post to the same sink;
//! every import is a change both should deliver. Measured: import-to-sink and watch-to-sink
//! p50/p99 of paced changes, RSS, the watches each opens (from the audit log), and what each
//! delivers, loses and duplicates across a restart of both programs and across a 410 (their
//! watches end while changes are made, the image API compacts, and the resumed watches get
//! `410 Gone`). Then the arithmetic for 1,000 sources. Not a test: nothing is asserted about
//! time.
//!
//! `scripts/realcluster bench-peer` (builds the adapter, puts the real components on PATH, runs
//! this with the release profile). `STREAMS` (default 10), `PACED` (default 300).

mod common;
#[path = "peer/phases.rs"]
mod phases;
#[path = "peer/programs.rs"]
mod programs;
#[path = "peer/report.rs"]
mod report;
#[path = "peer/sink.rs"]
mod sink;

use std::time::{Duration, Instant};

use common::{Cluster, env_usize, free_port, streams_yaml};
use programs::Program;

/// The namespace both programs watch (the one `streams_yaml` seeds).
pub const NS: &str = "bench";

/// The adapter's identity: what an ApiServerSource's `serviceAccountName` must be granted
/// (get, list, watch of the watched resource in its namespaces, as the reconciler's
/// SubjectAccessReviews check).
const ADAPTER_RBAC: &str = r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: peer-adapter, namespace: bench}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: peer-adapter, namespace: bench}
rules:
- {apiGroups: [image.openshift.io], resources: [imagestreams], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: peer-adapter, namespace: bench}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: peer-adapter}
subjects:
- {kind: ServiceAccount, name: peer-adapter, namespace: bench}
"#;

fn main() {
    common::run(bench());
}

async fn bench() {
    let streams = env_usize("STREAMS", 10);
    let paced = env_usize("PACED", 300);
    let t_up = Instant::now();
    let cluster = Cluster::up();
    cluster.kubectl(&["apply", "--server-side", "-k", "config/"]);
    cluster.kubectl(&["create", "namespace", NS]);
    cluster.kubectl_stdin(&["apply", "--server-side", "-f", "-"], ADAPTER_RBAC);
    // One stream more than measured: the bench's probes (is each program delivering?) change
    // only that one.
    cluster.seed(streams_yaml(streams + 1)).await;
    eprintln!("control plane up and seeded in {:?}", t_up.elapsed());

    let (sink_url, log) = sink::start().await;
    let logs = cluster.dir().join("logs");
    let adapter_kc = cluster.service_account_kubeconfig(NS, "peer-adapter", "adapter.kubeconfig");
    let source_kc = cluster.service_account_kubeconfig(
        "imagegate-system",
        "imagegate-source",
        "source.kubeconfig",
    );
    let admins = [free_port(), free_port()];
    let programs = [
        Program::adapter(&adapter_kc, NS, &sink_url, &logs.join("adapter.log")),
        Program::imagegate(
            "imagegate-resource",
            "resource",
            &source_kc,
            NS,
            &sink_url,
            admins[0],
            &logs.join("imagegate-resource.log"),
        ),
        Program::imagegate(
            "imagegate",
            "imagestreamtag",
            &source_kc,
            NS,
            &sink_url,
            admins[1],
            &logs.join("imagegate-imagestreamtag.log"),
        ),
    ];
    let audit_from = cluster.audit_len();
    let mut b = phases::Bench::new(&cluster, log, programs, streams, admins);
    let start = b.start_all().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = b.rss();
    let latency = b.paced(paced).await;
    let after_paced = b.rss();
    let restart = b.restart().await;
    let gone = b.gone().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let audit = cluster.audit_since(audit_from);
    let r = report::Report {
        streams,
        start,
        idle,
        after_paced,
        latency,
        restart,
        gone,
        watches: report::watches(&audit),
        adds: b.adds(),
    };
    b.stop_all();
    r.print();
    eprintln!("programs' logs: {}", logs.display());
    if std::env::var_os("IMAGEGATE_BENCH_KEEP").is_some() {
        eprintln!("keeping the cluster: {}", cluster.dir().display());
        std::mem::forget(cluster);
    }
}
