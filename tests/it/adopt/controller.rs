//! The controller's side of adoption: the drift gauge and the Warning Event on a stream that lost
//! its candidate tag, and an adopted stream through `begin` and `promote`.

use std::process::Command;

use imagegate::api::ImageStream;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use crate::support::controller::{A, B, Setup, reason};
use crate::support::{eventually, free_port, rbac, wait_ready};

/// `imagegate adopt` as the emulator's admin.
fn adopt(s: &Setup, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .arg("adopt")
        .args(args)
        .env("KUBECONFIG", &s.emu.kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// `ds/plain`: one `latest` tag imported on a schedule from quay.io/org/plain:latest, on A.
async fn seed_plain(s: &Setup) {
    s.emu
        .seed(json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "plain", "namespace": "ds"},
            "spec": {"tags": [{"name": "latest", "from": {"kind": "DockerImage", "name": "quay.io/org/plain:latest"},
                               "importPolicy": {"scheduled": true}}]}}))
        .await;
    s.emu.import("ds", "plain", "latest", A).await;
    let out = adopt(s, &["ds/plain"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn gauge(admin: u16, drift: &str) -> Option<String> {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let series = format!("imagegate_controller_streams_drifted{{drift=\"{drift}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .map(str::to_string)
}

#[tokio::test]
async fn the_controller_counts_and_announces_a_stream_that_lost_its_candidate() {
    let mut s = Setup::new().await;
    s.stop();
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--drift-check-interval", "1"]);
    wait_ready(admin).await;
    seed_plain(&s).await;
    eventually("the gauge at 0", || async {
        gauge(admin, "candidate_missing").await.as_deref() == Some("0")
    })
    .await;

    let api = Api::<ImageStream>::namespaced(s.client.clone(), "ds");
    let mut is = api.get("plain").await.unwrap();
    is.spec.tags.retain(|t| t.name != "candidate");
    api.replace("plain", &PostParams::default(), &is)
        .await
        .unwrap();
    eventually("the gauge at 1", || async {
        gauge(admin, "candidate_missing").await.as_deref() == Some("1")
    })
    .await;
    let events = Api::<Event>::namespaced(s.client.clone(), "ds");
    let drift_event = || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("CandidateTagMissing")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("plain")
        })
    };
    eventually("a CandidateTagMissing Event on ds/plain", || async {
        drift_event().await.is_some()
    })
    .await;
    let found = drift_event().await;
    let event = found.unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.regarding.unwrap().kind.as_deref(),
        Some("ImageStream")
    );
    assert!(
        event
            .note
            .unwrap()
            .ends_with("restore it with: imagegate adopt ds/plain"),
    );

    let out = adopt(&s, &["ds/plain"]);
    assert!(out.status.success());
    eventually("the gauge back at 0", || async {
        gauge(admin, "candidate_missing").await.as_deref() == Some("0")
    })
    .await;
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn an_adopted_stream_goes_through_begin_and_promote() {
    let s = Setup::new().await;
    seed_plain(&s).await;
    // The scheduled import of the candidate finds B upstream.
    s.emu.import("ds", "plain", "candidate", B).await;
    let begin = [("imagestream", "plain"), ("digest", B), ("action", "begin")];
    s.create_run("begin-b", &begin, json!({})).await;
    assert_eq!(
        reason(&s.done("begin-b").await),
        ("True".into(), "Validating".into())
    );
    let promote = [
        ("imagestream", "plain"),
        ("digest", B),
        ("validation-status", "Succeeded"),
    ];
    s.create_run("promote-b", &promote, json!({})).await;
    assert_eq!(
        reason(&s.done("promote-b").await),
        ("True".into(), "Promoted".into())
    );
    let is = Api::<ImageStream>::namespaced(s.client.clone(), "ds")
        .get("plain")
        .await
        .unwrap();
    assert_eq!(is.current_digest("latest"), Some(B));
    assert_eq!(is.current_digest("latest-previous"), Some(A));
    let again = adopt(&s, &["ds/plain"]);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("already adopted"),
        "a promotion keeps the gated shape: {}",
        String::from_utf8_lossy(&again.stdout)
    );
    assert!(adopt(&s, &["--check", "-n", "ds"]).status.success());
}

/// `imagegate status` as the emulator's admin.
fn status(s: &Setup, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .arg("status")
        .args(args)
        .env("KUBECONFIG", &s.emu.kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_hand_made_candidate_the_dashboard_would_offer_is_reported_everywhere() {
    // Issue 34: gated by hand (a candidate tag added, an ImagePromotion, no adopt), the
    // candidate not hidden: the dashboard offers it as soon as it imports, before begin marks it.
    let mut s = Setup::new().await;
    s.stop();
    s.emu
        .seed(json!({"apiVersion": "image.openshift.io/v1", "kind": "ImageStream",
            "metadata": {"name": "hand", "namespace": "ds",
                         "labels": {"opendatahub.io/notebook-image": "true"}},
            "spec": {"tags": [
                {"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("hand@{A}")}},
                {"name": "latest-candidate", "from": {"kind": "DockerImage", "name": "quay.io/org/hand:latest"},
                 "importPolicy": {"scheduled": true}}]}}))
        .await;
    s.emu
        .seed(json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "hand", "namespace": "ds"},
            "spec": {"imageStream": "hand", "candidateTag": "latest-candidate", "servedTag": "latest",
                     "odh": {"enabled": true}}}))
        .await;
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--drift-check-interval", "1"]);
    wait_ready(admin).await;
    eventually("the gauge at 1", || async {
        gauge(admin, "candidate_offered").await.as_deref() == Some("1")
    })
    .await;
    let events = Api::<Event>::namespaced(s.client.clone(), "ds");
    eventually("a CandidateTagOffered Event on ds/hand", || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items.iter().any(|e| {
            e.reason.as_deref() == Some("CandidateTagOffered")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("hand")
        })
    })
    .await;
    let check = adopt(&s, &["--check", "-n", "ds"]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("ds/hand: CandidateTagOffered: the candidate tag \"latest-candidate\" (ImagePromotion hand governs the stream)"),
        "{stdout}"
    );
    let shown = status(&s, &["-n", "ds"]);
    let table = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.status.code(), Some(3), "{table}");
    assert!(table.contains("[CandidateTagOffered]"), "{table}");

    // The repair it prints, run as printed with the real kubectl: in shape everywhere.
    let repair = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ds/hand: repair it with: "))
        .unwrap_or_else(|| panic!("no repair line in:\n{stdout}"));
    assert!(
        !stdout.contains("imagegate adopt ds/hand"),
        "adopt leaves a hand-made stream alone:\n{stdout}"
    );
    let ran = Command::new("sh")
        .args(["-c", repair])
        .env("KUBECONFIG", &s.emu.kubeconfig)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{repair}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let is = Api::<ImageStream>::namespaced(s.client.clone(), "ds")
        .get("hand")
        .await
        .unwrap();
    let candidate = is.spec_tag("latest-candidate").unwrap();
    assert_eq!(
        candidate.annotations.as_ref().unwrap()["opendatahub.io/image-tag-outdated"],
        "true"
    );
    assert_eq!(
        candidate.import_policy.as_ref().map(|p| p.scheduled),
        Some(true),
        "the rest kept"
    );
    assert_eq!(is.spec.tags.len(), 2, "no tag lost");
    eventually("the gauge back at 0", || async {
        gauge(admin, "candidate_offered").await.as_deref() == Some("0")
    })
    .await;
    let check = adopt(&s, &["--check", "-n", "ds"]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    assert_eq!(status(&s, &["-n", "ds"]).status.code(), Some(0));
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn the_check_reads_a_governed_namespace_a_page_at_a_time_and_keeps_only_what_drifted() {
    // A namespace-wide ImagePromotion gates every stream with its candidate tag: the check lists
    // the whole namespace, which may hold many streams, so it pages (500 a page) and keeps only
    // the drifted ones (a tenant's namespace of streams must not be read whole into memory).
    let s = Setup::new().await;
    let mut docs = String::new();
    for i in 0..1_100 {
        let labels = if i == 7 {
            r#"{"opendatahub.io/notebook-image": "true"}"#
        } else {
            "{}"
        };
        docs.push_str(&format!(
            "---\n{{\"apiVersion\": \"image.openshift.io/v1\", \"kind\": \"ImageStream\", \
             \"metadata\": {{\"name\": \"s{i:04}\", \"namespace\": \"many\", \"labels\": {labels}}}, \
             \"spec\": {{\"tags\": [{{\"name\": \"candidate\", \"from\": {{\"kind\": \"DockerImage\", \
             \"name\": \"quay.io/org/s:1\"}}, \"importPolicy\": {{\"scheduled\": true}}}}]}}}}\n"
        ));
    }
    s.emu
        .seed_str("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: many\n")
        .await;
    s.emu.seed_str(&docs).await;
    s.emu
        .seed(
            json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "all", "namespace": "many"}, "spec": {}}),
        )
        .await;
    let check = adopt(&s, &["--check", "-n", "many"]);
    let stdout = String::from_utf8_lossy(&check.stdout);
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("many/s0007: CandidateTagOffered: "),
        "only the listed stream whose candidate is offered: {stdout}"
    );
    assert!(
        stderr.contains("1 of 1100 adopted or governed ImageStreams drifted"),
        "{stderr}"
    );
    let lists: Vec<String> = s
        .emu
        .requests()
        .await
        .into_iter()
        .filter(|r| r.verb == "list" && r.resource == "imagestreams" && r.namespace == "many")
        // The command's (the controller runs beside it under its own user).
        .filter(|r| r.user == "admin" && !r.query.contains("labelSelector"))
        .map(|r| r.query)
        .collect();
    assert_eq!(lists.len(), 3, "three pages: {lists:?}");
    assert!(lists.iter().all(|q| q.contains("limit=500")), "{lists:?}");
    assert!(
        lists[1..].iter().all(|q| q.contains("continue=")),
        "{lists:?}"
    );
}
