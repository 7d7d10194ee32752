//! `imagegate source` on the real API server, as its ServiceAccount with a TokenRequest token
//! and the RBAC of `config/`: its ImageStream watch goes through kube-apiserver's aggregator to
//! the image API, its checkpoint and Lease are the real server's. The restart catch-up, dropped
//! watches and a 410 on the image API's side, and a kube-apiserver restart under the watch.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use super::cluster::{ControlPlane, SOURCE_SA};
use super::runs::digest;
use crate::support::sink::Sink;
use crate::support::source::Source;

fn digests(sink: &Sink) -> Vec<String> {
    sink.accepted()
        .iter()
        .map(|e| {
            e.extension("imagedigest")
                .map(|v| v.to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// Waits for `n` accepted events, lets a duplicate show up if one would, and returns the digests.
async fn delivered(sink: &Sink, n: usize) -> Vec<String> {
    sink.wait_accepted(n).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    digests(sink)
}

#[tokio::test]
async fn the_source_catches_up_and_survives_dropped_watches_410s_and_an_api_server_restart() {
    let cp = ControlPlane::up();
    cp.install();
    let emu = cp.image_api().await;
    cp.ok(&["create", "namespace", "ds"]);
    emu.seed(json!({
        "apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
        "metadata": {"name": "nb", "namespace": "ds"},
        "spec": {"tags": [{"name": "candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/nb:latest"}, "importPolicy": {"scheduled": true}}]}
    }))
    .await;
    let d: Vec<String> = "abcdef01".chars().map(digest).collect();
    emu.import("ds", "nb", "candidate", &d[0]).await;
    let sink = Sink::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("source.kubeconfig");
    cp.service_account_kubeconfig("imagegate-source", &kubeconfig);
    let mut src = Source::with_kubeconfig(&kubeconfig, &sink.url, &[]);
    src.ready().await;

    emu.import("ds", "nb", "candidate", &d[1]).await;
    assert_eq!(delivered(&sink, 1).await, d[1..2]);

    // The restart catch-up: changes made while it was down, oldest first, each once.
    src.stop().await;
    emu.import("ds", "nb", "candidate", &d[2]).await;
    emu.import("ds", "nb", "candidate", &d[3]).await;
    src.start();
    src.ready().await;
    assert_eq!(delivered(&sink, 3).await, d[1..4]);

    // The image API ends its watches, then expires every older resourceVersion (the watch
    // resumed through the aggregator gets the emulator's 410, and the source re-lists).
    emu.import("ds", "nb", "candidate", &d[4]).await;
    emu.drop_watches().await;
    emu.import("ds", "nb", "candidate", &d[5]).await;
    emu.compact().await;
    emu.drop_watches().await;
    emu.import("ds", "nb", "candidate", &d[6]).await;
    assert_eq!(delivered(&sink, 6).await, d[1..7]);

    // kube-apiserver restarts: the proxied watch ends with it, and the source watches again.
    cp.restart_apiserver(true);
    emu.import("ds", "nb", "candidate", &d[7]).await;
    assert_eq!(delivered(&sink, 7).await, d[1..8]);
    src.stop().await;

    // The checkpoint is the real server's ConfigMap.
    let cms: Api<ConfigMap> = Api::namespaced(cp.client().await, "imagegate-system");
    let checkpoint = cms.get("imagegate-source-checkpoint-h").await.unwrap();
    let holds_last = checkpoint.data.unwrap_or_default().values().any(|v| {
        imagegate::source::checkpoint::decode_state(v).is_some_and(|s| {
            s.tags
                .iter()
                .any(|(_, t)| t.digest.as_ref().is_some_and(|x| x.is(&d[7])))
        })
    });
    assert!(holds_last, "the checkpoint holds the last digest delivered");
    cp.assert_never_forbidden(SOURCE_SA);
}
