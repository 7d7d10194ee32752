//! The operator CLI through the real API server: `imagegate import` posts an ImageStreamImport
//! that kube-apiserver proxies to the aggregated image API, and `promote` and `status` go through
//! the real CustomRun and ImagePromotion CRDs, the controller deciding as its ServiceAccount.

use serde_json::json;

use super::runs::{Cluster, digest};

async fn imagegate(c: &Cluster, args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .args(args)
        .env("KUBECONFIG", &c.cp.kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .await
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn import_then_promote_by_hand_through_the_real_api_server() {
    let c = Cluster::start().await;
    let (a, b, cc) = (digest('a'), digest('b'), digest('c'));
    c.promotion_namespace("ops", &a, &b).await;
    let (_controller, admin) = c.controller(&[]);
    crate::support::wait_ready(admin).await;

    // Upstream moved on to C since the last scheduled import found B.
    c.emu
        .upstream("quay.io/org/nb:latest", json!({"digest": cc}))
        .await;
    let (code, stdout, stderr) = imagegate(&c, &["import", "ops/nb"]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!("ops/nb:candidate: imported {cc} (was {b})\n")
    );
    assert_eq!(
        c.stream("ops").await.current_digest("candidate"),
        Some(cc.as_str())
    );

    let (code, stdout, stderr) = imagegate(
        &c,
        &[
            "promote",
            "ops/nb",
            "--validation-status",
            "Succeeded",
            "--service-account",
            "default",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("latest promoted from {a} to {cc}")),
        "{stdout}{stderr}"
    );
    assert_eq!(
        c.stream("ops").await.current_digest("latest"),
        Some(cc.as_str())
    );

    let (code, stdout, stderr) = imagegate(&c, &["status", "-n", "ops", "-o", "json"]).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["items"][0]["phase"], "Promoted");
    assert_eq!(v["items"][0]["lastRun"]["reason"], "Promoted");
}
