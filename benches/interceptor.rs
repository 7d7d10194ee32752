//! What the imagegate interceptor adds to an event's way to its PipelineRun, measured on real
//! Tekton Triggers (v0.37, `scripts/realcluster up --tekton` with `IMAGEGATE_BIN`): the same
//! events, in the same run, to two EventListeners of one namespace: `bare`, the CEL filter and a
//! binding that reads the event's body (what tekton/ shipped before the interceptor), and
//! `imagegate`, the shipped tekton/430 (the CEL filter, then ClusterInterceptor `imagegate`, the
//! binding reading what it passed on). Measured per event: from the POST to the PipelineRun seen
//! by a watch (both sides share the sink, the API server and the watch, so the difference is the
//! interceptor's: a TLS request, one ImageStream get, one ImagePromotion list), p50 and p99; and
//! the interceptor's own request duration (its histogram's mean). Not a test: nothing is asserted
//! about time.
//!
//! `cargo bench --bench interceptor` with the real components on PATH (docs/testing.md).
//! `EVENTS` (default 100) events per listener, 50 ms apart.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Cluster, env_usize, ms, percentile, report_header};
use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::json;

const NS: &str = "bench-interceptor";
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The EventListener as tekton/ shipped it before the interceptor: the CEL filter, a binding
/// that reads the body, the PipelineRun named after the event's id.
const BARE: &str = r#"
apiVersion: triggers.tekton.dev/v1beta1
kind: TriggerBinding
metadata: {name: bare}
spec:
  params:
  - {name: run-id, value: $(header.Ce-Id)}
  - {name: namespace, value: $(body.namespace)}
  - {name: imagestream, value: $(body.imageStream)}
  - {name: candidate-tag, value: $(body.tag)}
  - {name: digest, value: $(body.digest)}
---
apiVersion: triggers.tekton.dev/v1beta1
kind: EventListener
metadata: {name: bare}
spec:
  serviceAccountName: imagegate-eventlistener
  triggers:
  - name: bare
    interceptors:
    - ref: {name: cel, kind: ClusterInterceptor}
      params:
      - name: filter
        value: "header.match('ce-specversion', '1.0') && header.match('ce-type', 'dev.imagegate.imagestreamtag.updated')"
    bindings: [{ref: bare}]
    template: {ref: imagegate-promote}
"#;

fn main() {
    common::run(bench());
}

fn digest(i: usize) -> String {
    format!("sha256:{i:064x}")
}

async fn bench() {
    let events = env_usize("EVENTS", 100);
    let t_up = Instant::now();
    let cluster = Cluster::up_with(
        &["--tekton"],
        &[("IMAGEGATE_BIN", env!("CARGO_BIN_EXE_imagegate"))],
    );
    cluster.kubectl(&["create", "namespace", NS]);
    // tekton/'s listener objects and ImagePromotion, in NS.
    for file in [
        "100-imagepromotion.yaml",
        "410-triggerbinding.yaml",
        "420-triggertemplate.yaml",
        "430-eventlistener.yaml",
    ] {
        cluster.kubectl(&["apply", "-n", NS, "-f", &format!("{ROOT}/tekton/{file}")]);
    }
    let rbac = std::fs::read_to_string(format!("{ROOT}/tekton/400-eventlistener-rbac.yaml"))
        .unwrap()
        .replace("namespace: notebooks", &format!("namespace: {NS}"))
        .replace(
            "imagegate-eventlistener-notebooks",
            &format!("imagegate-eventlistener-{NS}"),
        );
    cluster.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], &rbac);
    cluster.kubectl_stdin(&["apply", "-n", NS, "-f", "-"], BARE);
    cluster
        .seed(
            json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
                "metadata": {"name": "nb", "namespace": NS},
                "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}}]}})
            .to_string(),
        )
        .await;
    let url = |el: &str| -> String {
        for _ in 0..200 {
            let u = cluster.kubectl(&[
                "get",
                "eventlistener",
                el,
                "-n",
                NS,
                "-o",
                "jsonpath={.status.address.url}",
            ]);
            if !u.trim().is_empty() {
                return u.trim().to_string();
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("EventListener {el} got no address");
    };
    let urls = [("bare", url("bare")), ("imagegate", url("imagegate"))];
    eprintln!(
        "cluster, Tekton and both listeners up in {:?}",
        t_up.elapsed()
    );

    // Every PipelineRun of NS as the watch first sees it, by its digest and listener.
    let client = cluster.client().await;
    let prs: Api<DynamicObject> = Api::namespaced_with(
        client,
        NS,
        &ApiResource {
            group: "tekton.dev".into(),
            version: "v1".into(),
            api_version: "tekton.dev/v1".into(),
            kind: "PipelineRun".into(),
            plural: "pipelineruns".into(),
        },
    );
    let seen: std::sync::Arc<std::sync::Mutex<HashMap<String, Instant>>> = Default::default();
    tokio::spawn({
        let seen = seen.clone();
        async move {
            let mut w = watcher(prs, watcher::Config::default()).boxed();
            while let Some(Ok(e)) = w.next().await {
                if let watcher::Event::Apply(o) | watcher::Event::InitApply(o) = e {
                    let a = o.metadata.annotations.unwrap_or_default();
                    let key = format!(
                        "{}/{}",
                        a.get("imagegate.dev/digest").cloned().unwrap_or_default(),
                        if a.contains_key("imagegate.dev/event-id")
                            && !a["imagegate.dev/event-id"].is_empty()
                        {
                            "imagegate"
                        } else {
                            "bare"
                        }
                    );
                    seen.lock().unwrap().entry(key).or_insert_with(Instant::now);
                }
            }
        }
    });

    let http = reqwest::Client::new();
    let mut latency: HashMap<&str, Vec<f64>> = HashMap::new();
    let admin = cluster.env("IMAGEGATE_INTERCEPTOR_ADMIN_PORT");
    let histogram = || async {
        let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let get = |name: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
                .unwrap_or(0.0)
        };
        (
            get("imagegate_interceptor_duration_seconds_sum"),
            get("imagegate_interceptor_duration_seconds_count"),
        )
    };
    let before = histogram().await;
    for i in 1..=events {
        let d = digest(i);
        cluster.import(NS, "nb", "candidate", &d).await;
        // Alternate which listener is asked first, so neither always goes second.
        let order: Vec<&(&str, String)> = if i % 2 == 0 {
            urls.iter().collect()
        } else {
            urls.iter().rev().collect()
        };
        for (name, url) in order {
            let body =
                json!({"namespace": NS, "imageStream": "nb", "tag": "candidate", "digest": d});
            let sent = Instant::now();
            let status = http
                .post(url)
                .header("ce-specversion", "1.0")
                .header(
                    "ce-id",
                    format!("{:040x}", i * 2 + usize::from(*name == "imagegate")),
                )
                .header("ce-type", "dev.imagegate.imagestreamtag.updated")
                .header("ce-source", "/bench")
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap()
                .status();
            assert!(status.is_success(), "{name}: {status}");
            let key = format!("{d}/{name}");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(at) = seen.lock().unwrap().get(&key) {
                    latency
                        .entry(name)
                        .or_default()
                        .push(at.duration_since(sent).as_secs_f64());
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "no PipelineRun for {key} in 30 s"
                );
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = histogram().await;

    report_header(
        "The interceptor: an event's way to its PipelineRun, with and without it",
        &format!(
            "real Tekton Triggers v0.37.0 sink and kube-apiserver on loopback, {events} events to each \
             EventListener, alternating, 50 ms apart; from the POST to the PipelineRun seen by a watch"
        ),
    );
    let mut p = HashMap::new();
    for name in ["bare", "imagegate"] {
        let mut v = latency.remove(name).unwrap_or_default();
        v.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&v, 0.5), percentile(&v, 0.99));
        println!("| `{name}`: event to PipelineRun, p50 | {} |", ms(p50));
        println!("| `{name}`: event to PipelineRun, p99 | {} |", ms(p99));
        p.insert(name, (p50, p99));
    }
    println!(
        "| added by the interceptor, p50 / p99 | {} / {} |",
        ms(p["imagegate"].0 - p["bare"].0),
        ms(p["imagegate"].1 - p["bare"].1)
    );
    let (sum, count) = (after.0 - before.0, after.1 - before.1);
    println!(
        "| the interceptor's own request, mean ({count} requests) | {} |",
        ms(if count > 0.0 { sum / count } else { f64::NAN })
    );
}
