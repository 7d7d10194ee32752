//! End to end: the real `imagegate controller` binary against the API emulator over HTTP,
//! driven over the emulator's control API, for every outcome a pipeline author can meet.

use crate::support::controller::{A, B, C, Setup, VALIDATED_B, reason, result, served};
use crate::support::{Process, free_port, rbac};

use std::time::{Duration, Instant};

use imagegate_emulator::control::Fault;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

#[tokio::test]
async fn a_validated_candidate_is_promoted_then_already_promoted() {
    let s = Setup::new().await;
    s.create_run(
        "promote-b",
        &[
            ("imagestream", "nb"),
            ("digest", B),
            ("validation-status", "Succeeded"),
        ],
        json!({}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(result(&run, "promoted-digest"), B);
    assert_eq!(result(&run, "previous-digest"), A);
    assert_eq!(result(&run, "phase"), "Promoted");
    assert_eq!(result(&run, "checks"), "[]");
    let is = s.stream().await;
    let (from, ann) = served(&is);
    assert_eq!(from, format!("nb@{B}"));
    assert_eq!(is.current_digest("latest"), Some(B));
    assert_eq!(ann["imagegate.dev/phase"], "Promoted");
    assert_eq!(ann["imagegate.dev/previous-digest"], A);
    assert_eq!(ann["imagegate.dev/customrun"], "promote-b");
    assert_eq!(s.writes("imagestreams").await.len(), 1);
    let status_writes = s.writes("customruns").await.len();
    assert!(
        status_writes <= 2,
        "at most three writes per run ({status_writes} status writes)"
    );

    s.create_run("promote-b-again", VALIDATED_B, json!({}))
        .await;
    let again = s.done("promote-b-again").await;
    assert_eq!(reason(&again), ("True".into(), "AlreadyPromoted".into()));
    assert_eq!(
        s.writes("imagestreams").await.len(),
        1,
        "no second write for an already served digest"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_candidate_that_moved_on_is_promoted_when_newer_than_what_is_served_and_never_backwards()
{
    let s = Setup::new().await;
    // B (validated) was imported after A (served); C came while B was validated.
    s.emu.import("ds", "nb", "candidate", C).await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert!(
        s.message("promote-b")
            .await
            .contains(&format!("has since moved on to {C}")),
        "{run:?}"
    );
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
    // A late promote of A, validated before B and older than what is served, is refused.
    s.create_run(
        "promote-a",
        &[
            ("imagestream", "nb"),
            ("digest", A),
            ("validation-status", "Succeeded"),
        ],
        json!({}),
    )
    .await;
    let run = s.done("promote-a").await;
    assert_eq!(reason(&run), ("False".into(), "CandidateMoved".into()));
    assert!(
        s.message("promote-a").await.contains("not newer than"),
        "{run:?}"
    );
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
    assert_eq!(s.writes("imagestreams").await.len(), 1, "one write: B's");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_failed_validation_status_keeps_the_served_image_and_marks_it() {
    let s = Setup::new().await;
    s.create_run(
        "promote-b",
        &[
            ("imagestream", "nb"),
            ("digest", B),
            ("validation-status", "Failed"),
        ],
        json!({}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationFailed".into()));
    let is = s.stream().await;
    let (from, ann) = served(&is);
    assert_eq!(
        from,
        format!("nb@{A}"),
        "the served tag keeps the old image"
    );
    assert_eq!(is.current_digest("latest"), Some(A));
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed");
    assert_eq!(ann["imagegate.dev/candidate-digest"], B);
    assert_eq!(result(&run, "phase"), "UpdateFailed");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_failing_check_keeps_the_served_image_and_reports_every_check() {
    let s = Setup::new().await;
    s.emu
        .set_image_metadata(
            B,
            json!({"Config": {"User": "0", "Labels": {"io.k8s.display-name": "nb"}}}),
        )
        .await;
    let promotion: Value = json!({
        "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
        "metadata": {"name": "notebooks", "namespace": "ds"},
        "spec": {"checks": {"nonRootUser": true, "requiredLabels": ["io.k8s.display-name"]}}
    });
    s.emu.seed(promotion).await;
    s.create_run(
        "promote-b",
        VALIDATED_B,
        json!({"spec": {"customRef": {"name": "notebooks"}}}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationFailed".into()));
    let checks: Vec<Value> = serde_json::from_str(&result(&run, "checks")).unwrap();
    let passed: Vec<(String, bool)> = checks
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        passed,
        vec![
            ("requiredLabels".into(), true),
            ("nonRootUser".into(), false)
        ]
    );
    let is = s.stream().await;
    assert_eq!(is.current_digest("latest"), Some(A));
    assert_eq!(served(&is).1["imagegate.dev/phase"], "UpdateFailed");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn bad_params_and_other_namespaces_are_refused_with_a_reason() {
    let s = Setup::new().await;
    s.create_run(
        "cross",
        &[("imagestream", "other/nb"), ("digest", B)],
        json!({}),
    )
    .await;
    s.create_run("no-digest", &[("imagestream", "nb")], json!({}))
        .await;
    s.create_run(
        "missing",
        &[("imagestream", "nope"), ("digest", B)],
        json!({}),
    )
    .await;
    let cross = s.done("cross").await;
    assert_eq!(reason(&cross), ("False".into(), "InvalidParams".into()));
    assert!(
        cross
            .succeeded_condition()
            .unwrap()
            .message
            .as_deref()
            .unwrap()
            .contains("own namespace")
    );
    assert!(
        !s.emu
            .requests()
            .await
            .iter()
            .any(|r| r.user == "controller" && r.namespace == "other")
    );
    assert_eq!(
        reason(&s.done("no-digest").await),
        ("False".into(), "InvalidParams".into())
    );
    assert_eq!(
        reason(&s.done("missing").await),
        ("False".into(), "ImageStreamNotFound".into())
    );
    assert!(s.writes("imagestreams").await.is_empty());
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn cancellation_ends_the_run_with_tektons_reason_and_message() {
    let s = Setup::new().await;
    // Keep the run busy: every read of the stream fails until it is cancelled.
    s.fail_stream_reads(500).await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.started("promote-b").await;
    let msg = "CustomRun cancelled as the PipelineRun it belongs to has been cancelled.";
    s.runs()
        .patch(
            "promote-b",
            &PatchParams::default(),
            &Patch::<()>::Json(
                serde_json::from_value(json!([
                    {"op": "add", "path": "/spec/status", "value": "RunCancelled"},
                    {"op": "add", "path": "/spec/statusMessage", "value": msg}
                ]))
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "CustomRunCancelled".into()));
    assert_eq!(
        run.succeeded_condition().unwrap().message.as_deref(),
        Some(msg)
    );
    assert!(s.writes("imagestreams").await.is_empty());
    assert!(
        !s.emu
            .mutating_requests()
            .await
            .iter()
            .any(|r| r.user == "controller"
                && r.resource == "customruns"
                && r.subresource.is_empty()),
        "the controller never writes the spec"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_timeout_retries_then_fails_with_every_attempt_archived() {
    let s = Setup::new().await;
    s.fail_stream_reads(500).await;
    s.create_run(
        "promote-b",
        VALIDATED_B,
        json!({"spec": {"timeout": "1s", "retries": 1}}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "CustomRunTimedOut".into()));
    let status = run.status.unwrap();
    assert_eq!(status.retries_status.len(), 1);
    assert_eq!(
        status.retries_status[0].conditions[0].reason.as_deref(),
        Some("CustomRunTimedOut")
    );
    assert_eq!(status.retries_status[0].conditions[0].status, "False");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

/// 503 is what kube-apiserver answers for an aggregated API whose server is down (the image API,
/// on OpenShift). kube's client would retry it inside the request for minutes; the controller
/// turns that off, so that its own retries keep to the run's timeout.
#[tokio::test]
async fn a_run_the_image_api_keeps_answering_503_times_out_on_time() {
    let s = Setup::new().await;
    s.fail_stream_reads(503).await;
    let started = std::time::Instant::now();
    s.create_run("promote-b", VALIDATED_B, json!({"spec": {"timeout": "1s"}}))
        .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "CustomRunTimedOut".into()));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "a 1 s timeout took {:?}",
        started.elapsed()
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn rollback_returns_the_served_tag_to_the_previous_digest() {
    let s = Setup::new().await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    s.create_run(
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    let run = s.done("rollback").await;
    assert_eq!(reason(&run), ("True".into(), "RolledBack".into()));
    assert_eq!(result(&run, "promoted-digest"), A);
    assert_eq!(result(&run, "previous-digest"), B);
    let is = s.stream().await;
    assert_eq!(is.current_digest("latest"), Some(A));
    assert_eq!(served(&is).1["imagegate.dev/phase"], "RolledBack");
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn begin_marks_the_served_tag_validating_without_hiding_it() {
    let s = Setup::new().await;
    s.create_run(
        "begin-b",
        &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        json!({}),
    )
    .await;
    let run = s.done("begin-b").await;
    assert_eq!(reason(&run), ("True".into(), "Validating".into()));
    let is = s.stream().await;
    let (from, ann) = served(&is);
    assert_eq!(from, format!("nb@{A}"));
    assert_eq!(ann["imagegate.dev/phase"], "Validating");
    assert_eq!(ann["imagegate.dev/candidate-digest"], B);
    s.create_run(
        "reject-b",
        &[
            ("imagestream", "nb"),
            ("digest", B),
            ("action", "reject"),
            ("validation-status", "Failed"),
        ],
        json!({}),
    )
    .await;
    let run = s.done("reject-b").await;
    assert_eq!(reason(&run), ("False".into(), "Rejected".into()));
    assert_eq!(
        served(&s.stream().await).1["imagegate.dev/phase"],
        "UpdateFailed"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn customruns_of_other_kinds_are_left_untouched() {
    let s = Setup::new().await;
    s.create_run("wait", &[], json!({"spec": {"customRef": {"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait"}}}))
        .await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.done("promote-b").await;
    let wait = s.runs().get("wait").await.unwrap();
    assert!(wait.status.is_none() || wait.status.unwrap().conditions.is_empty());
    assert!(
        !s.emu
            .mutating_requests()
            .await
            .iter()
            .any(|r| r.name == "wait")
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_controller_killed_mid_run_finishes_it_once_after_restart() {
    let mut s = Setup::new().await;
    // Slow the promotion write down so the test can cut the status writes off behind it.
    s.emu
        .inject_fault(Fault {
            verb: Some("patch".into()),
            resource: Some("imagestreams".into()),
            count: 1,
            delay_ms: Some(1500),
            ..Default::default()
        })
        .await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.started("promote-b").await;
    s.emu
        .inject_fault(Fault {
            verb: Some("update".into()),
            resource: Some("customruns".into()),
            count: 10_000,
            status: Some(500),
            ..Default::default()
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.stream().await.current_digest("latest") != Some(B) {
        assert!(Instant::now() < deadline, "the promotion never landed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.stop();
    assert!(
        !s.runs().get("promote-b").await.unwrap().is_done(),
        "the final status was cut off"
    );
    s.emu.clear_faults().await;
    s.start();
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(result(&run, "previous-digest"), A);
    assert_eq!(
        s.writes("imagestreams").await.len(),
        1,
        "promoted exactly once"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn events_and_metrics_report_each_run() {
    let s = Setup::new().await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    s.done("promote-b").await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(s.client.clone(), "ds");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = events.list(&Default::default()).await.unwrap();
        if list
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("Promoted"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no Promoted event: {:?}",
            list.items
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", s.admin);
    assert_eq!(
        http.get(format!("{base}/livez"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .contains(r#"imagegate_controller_runs_total{reason="Promoted",succeeded="true"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("imagegate_controller_reconcile_duration_seconds_count"),
        "{metrics}"
    );
    assert!(
        metrics.contains("imagegate_controller_imagestream_writes_total 1"),
        "{metrics}"
    );
    // The promoted digest came in through the candidate tag's import moments ago: one
    // observation, in the first bucket.
    assert!(
        metrics.contains("imagegate_controller_import_to_promotion_seconds_count 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"imagegate_controller_import_to_promotion_seconds_bucket{le="10.0"} 1"#),
        "{metrics}"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn two_replicas_elect_one_leader_and_hand_over_on_shutdown() {
    let mut s = Setup::new().await;
    s.stop();
    let mut replicas = Replicas(Vec::new());
    replicas.0 = ["replica-a", "replica-b"]
        .iter()
        .map(|id| {
            let child = s.spawn_controller(
                free_port(),
                &[
                    "--leader-elect",
                    "--lease-namespace",
                    "imagegate-system",
                    "--identity",
                    id,
                ],
            );
            (id.to_string(), child)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        if let Some(h) = crate::support::lease_holder(&s.client, "imagegate-controller").await {
            break h;
        }
        assert!(Instant::now() < deadline, "nobody took the lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");

    // A graceful stop (SIGTERM, as Kubernetes sends) releases the lease to the standby.
    let idx = replicas.0.iter().position(|(id, _)| *id == leader).unwrap();
    let (_, mut old) = replicas.0.remove(idx);
    old.stop(Duration::from_secs(60)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match crate::support::lease_holder(&s.client, "imagegate-controller").await {
            Some(h) if h != leader => break,
            _ => {}
        }
        assert!(Instant::now() < deadline, "the standby never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.create_run(
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    assert_eq!(reason(&s.done("rollback").await).1, "RolledBack");
    assert_eq!(
        s.writes("imagestreams").await.len(),
        2,
        "each run written once, by one replica"
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

/// Controller processes, killed when the test ends (with their logs printed when it fails).
struct Replicas(Vec<(String, Process)>);
