//! `imagegate controller` on the real API server, as its ServiceAccount with a TokenRequest
//! token and the RBAC of `config/`: every outcome of a run, each scenario in a namespace of its
//! own under one controller; then a kill -9 between the promotion and its status, and a
//! kube-apiserver restart with etcd compacted under it (a dropped watch, then a 410).

use std::time::{Duration, Instant};

use futures::StreamExt;
use imagegate_emulator::control::Fault;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchParams};
use kube::core::WatchEvent;
use serde_json::{Value, json};

use super::cluster::CONTROLLER_SA;
use super::runs::{Cluster, digest};
use crate::support::controller::{reason, result, served};

/// Every read of `ns/nb` fails with 500 (an injected fault of the image API), so a run there
/// stays busy until it is cancelled or times out.
async fn fail_stream_reads(c: &Cluster, ns: &str) {
    c.emu
        .inject_fault(Fault {
            verb: Some("get".into()),
            path_contains: Some(format!("/namespaces/{ns}/imagestreams/")),
            count: 100_000,
            status: Some(500),
            ..Default::default()
        })
        .await;
}

async fn promotes_then_already_promoted(c: &Cluster) {
    let (ns, a, b) = ("promote", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    let params = [
        ("imagestream", "nb"),
        ("digest", b.as_str()),
        ("validation-status", "Succeeded"),
    ];
    c.create_run(ns, "promote-b", &params, json!({})).await;
    let run = c.done(ns, "promote-b").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(result(&run, "promoted-digest"), b);
    assert_eq!(result(&run, "previous-digest"), a);
    let is = c.stream(ns).await;
    let (from, ann) = served(&is);
    assert_eq!(from, format!("nb@{b}"));
    assert_eq!(is.current_digest("latest"), Some(b.as_str()));
    assert_eq!(ann["imagegate.dev/customrun"], "promote-b");
    assert_eq!(c.stream_writes(ns).await, 1);

    c.create_run(ns, "again", &validated(&b), json!({})).await;
    assert_eq!(
        reason(&c.done(ns, "again").await),
        ("True".into(), "AlreadyPromoted".into())
    );
    assert_eq!(
        c.stream_writes(ns).await,
        1,
        "no second write for a served digest"
    );
    // The Event of the promotion, as the real server stores it.
    let events: Api<Event> = Api::namespaced(c.client.clone(), ns);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| e.reason.as_deref() == Some("Promoted"))
    {
        assert!(Instant::now() < deadline, "no Promoted Event in {ns}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// B was validated while the candidate moved on to C: B is newer than what is served, so it
/// is promoted all the same; A, older than B, is then refused (never backwards).
async fn a_moved_candidate_is_promoted_when_newer_and_never_backwards(c: &Cluster) {
    let (ns, a, b) = ("moved", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    c.emu.import(ns, "nb", "candidate", &digest('c')).await;
    c.create_run(ns, "promote-b", &validated(&b), json!({}))
        .await;
    let run = c.done(ns, "promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(b.as_str())
    );
    c.create_run(ns, "promote-a", &validated(&a), json!({}))
        .await;
    let run = c.done(ns, "promote-a").await;
    assert_eq!(reason(&run), ("False".into(), "CandidateMoved".into()));
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(b.as_str())
    );
    assert_eq!(c.stream_writes(ns).await, 1);
}

async fn a_failed_validation_keeps_the_served_image(c: &Cluster) {
    let (ns, a, b) = ("failed", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    let params = [
        ("imagestream", "nb"),
        ("digest", b.as_str()),
        ("validation-status", "Failed"),
    ];
    c.create_run(ns, "promote-b", &params, json!({})).await;
    let run = c.done(ns, "promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationFailed".into()));
    let is = c.stream(ns).await;
    assert_eq!(is.current_digest("latest"), Some(a.as_str()));
    let (_, ann) = served(&is);
    assert_eq!(ann["imagegate.dev/phase"], "UpdateFailed");
    assert_eq!(ann["imagegate.dev/candidate-digest"], b);
}

async fn a_failing_check_reports_every_check(c: &Cluster) {
    // Digests of their own: an Image's metadata is cluster-scoped.
    let (ns, a, b) = ("check", digest('e'), digest('f'));
    c.promotion_namespace(ns, &a, &b).await;
    c.emu
        .set_image_metadata(
            &b,
            json!({"Config": {"User": "0", "Labels": {"io.k8s.display-name": "nb"}}}),
        )
        .await;
    let (ok, out) = c.cp.apply_text(&format!(
        "apiVersion: imagegate.dev/v1alpha1\nkind: ImagePromotion\nmetadata: {{name: notebooks, namespace: {ns}}}\n\
         spec: {{checks: {{nonRootUser: true, requiredLabels: [io.k8s.display-name]}}}}\n"
    ));
    assert!(ok, "{out}");
    let extra = json!({"spec": {"customRef": {"name": "notebooks"}}});
    c.create_run(ns, "promote-b", &validated(&b), extra).await;
    let run = c.done(ns, "promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationFailed".into()));
    let checks: Vec<Value> = serde_json::from_str(&result(&run, "checks")).unwrap();
    let passed: Vec<(&str, bool)> = checks
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["passed"].as_bool().unwrap()))
        .collect();
    assert_eq!(
        passed,
        vec![("requiredLabels", true), ("nonRootUser", false)]
    );
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(a.as_str())
    );
}

async fn rollback_returns_to_the_previous_digest(c: &Cluster) {
    let (ns, a, b) = ("rollback", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    c.create_run(ns, "promote-b", &validated(&b), json!({}))
        .await;
    assert_eq!(reason(&c.done(ns, "promote-b").await).1, "Promoted");
    c.create_run(
        ns,
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    let run = c.done(ns, "rollback").await;
    assert_eq!(reason(&run), ("True".into(), "RolledBack".into()));
    assert_eq!(result(&run, "promoted-digest"), a);
    assert_eq!(
        c.stream(ns).await.current_digest("latest"),
        Some(a.as_str())
    );
    assert_eq!(c.stream_writes(ns).await, 2);
}

async fn cancellation_ends_the_run_with_tektons_reason(c: &Cluster) {
    let (ns, a, b) = ("cancel", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    fail_stream_reads(c, ns).await;
    c.create_run(ns, "promote-b", &validated(&b), json!({}))
        .await;
    c.started(ns, "promote-b").await;
    let msg = "CustomRun cancelled as the PipelineRun it belongs to has been cancelled.";
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/spec/status", "value": "RunCancelled"},
        {"op": "add", "path": "/spec/statusMessage", "value": msg}
    ]))
    .unwrap();
    c.runs(ns)
        .patch(
            "promote-b",
            &PatchParams::default(),
            &Patch::<()>::Json(patch),
        )
        .await
        .unwrap();
    let run = c.done(ns, "promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "CustomRunCancelled".into()));
    assert_eq!(
        run.succeeded_condition().unwrap().message.as_deref(),
        Some(msg)
    );
    assert_eq!(c.stream_writes(ns).await, 0);
}

async fn a_timeout_retries_then_fails(c: &Cluster) {
    let (ns, a, b) = ("timeout", digest('a'), digest('b'));
    c.promotion_namespace(ns, &a, &b).await;
    fail_stream_reads(c, ns).await;
    let extra = json!({"spec": {"timeout": "1s", "retries": 1}});
    c.create_run(ns, "promote-b", &validated(&b), extra).await;
    let run = c.done(ns, "promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "CustomRunTimedOut".into()));
    let status = run.status.unwrap();
    assert_eq!(status.retries_status.len(), 1);
    assert_eq!(
        status.retries_status[0].conditions[0].reason.as_deref(),
        Some("CustomRunTimedOut")
    );
}

#[tokio::test]
async fn every_outcome_of_a_run_on_a_real_api_server() {
    let c = Cluster::start().await;
    let (_controller, _) = c.controller(&[]);
    tokio::join!(
        promotes_then_already_promoted(&c),
        a_moved_candidate_is_promoted_when_newer_and_never_backwards(&c),
        a_failed_validation_keeps_the_served_image(&c),
        a_failing_check_reports_every_check(&c),
        rollback_returns_to_the_previous_digest(&c),
        cancellation_ends_the_run_with_tektons_reason(&c),
        a_timeout_retries_then_fails(&c),
    );
    c.cp.assert_never_forbidden(CONTROLLER_SA);
}

/// A ValidatingAdmissionPolicy that refuses (422 Invalid, not 403) every final status of a run
/// in `ns`: the controller's promotion lands, and the status that records it cannot.
const HOLD_FINAL_STATUS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: imagegate-test-hold-final-status}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["tekton.dev"]
      apiVersions: ["*"]
      operations: ["UPDATE"]
      resources: ["customruns/status"]
  validations:
  - expression: "!(has(object.status) && has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Succeeded' && c.status != 'Unknown'))"
    message: "held by the test: a run's final status is refused"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: imagegate-test-hold-final-status}
spec:
  policyName: imagegate-test-hold-final-status
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: killed}
"#;

/// Whether the hold is in force: a final status written by the admin to a run of another
/// custom task in `killed` is refused.
fn hold_in_force(c: &Cluster) -> bool {
    let status = json!({"status": {"conditions": [{"type": "Succeeded", "status": "True", "reason": "Probe"}]}});
    let out = c.cp.kubectl(&[
        "patch",
        "customrun",
        "probe",
        "-n",
        "killed",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || text.contains("held by the test"),
        "{text}"
    );
    !out.status.success()
}

async fn wait_hold(c: &Cluster, in_force: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while hold_in_force(c) != in_force {
        assert!(
            Instant::now() < deadline,
            "the hold never became {in_force}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_kill_between_promotion_and_status_and_an_api_server_restart_promote_exactly_once() {
    let c = Cluster::start().await;
    let (a, b) = (digest('a'), digest('b'));
    c.promotion_namespace("killed", &a, &b).await;
    let probe = json!({"spec": {"customRef": {"apiVersion": "wait.testing.tekton.dev/v1beta1", "kind": "Wait"}}});
    c.create_run("killed", "probe", &[], probe).await;
    let (ok, out) = c.cp.apply_text(HOLD_FINAL_STATUS);
    assert!(ok, "{out}");
    wait_hold(&c, true).await;

    let (mut controller, admin) = c.controller(&[]);
    c.create_run("killed", "promote-b", &validated(&b), json!({}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.stream("killed").await.current_digest("latest") != Some(b.as_str()) {
        assert!(Instant::now() < deadline, "the promotion never landed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    controller.kill();
    assert!(
        !c.runs("killed").get("promote-b").await.unwrap().is_done(),
        "the final status was held"
    );
    c.cp.ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "imagegate-test-hold-final-status",
    ]);
    wait_hold(&c, false).await;
    controller.restart();
    let run = c.done("killed", "promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(
        result(&run, "previous-digest"),
        a,
        "the restart found its own write"
    );
    assert_eq!(c.stream_writes("killed").await, 1, "promoted exactly once");

    // kube-apiserver restarts under the running controller, and etcd is compacted meanwhile:
    // its CustomRun watch ends, and resuming it from where it was is too old (410).
    let runs: Api<imagegate::api::CustomRun> = Api::all(c.client.clone());
    let before = runs.list_metadata(&ListParams::default()).await.unwrap();
    let rv = before.metadata.resource_version.unwrap();
    c.cp.restart_apiserver(true);
    let client = c.cp.client().await;
    let runs: Api<imagegate::api::CustomRun> = Api::all(client);
    let mut watch = runs
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .map(|s| s.boxed());
    let expired = match &mut watch {
        Err(kube::Error::Api(e)) => e.code == 410,
        Ok(stream) => {
            matches!(stream.next().await, Some(Ok(WatchEvent::Error(e))) | Some(Err(kube::Error::Api(e))) if e.code == 410)
        }
        Err(_) => false,
    };
    assert!(
        expired,
        "a watch from resourceVersion {rv} is not 410 after the compaction"
    );
    c.promotion_namespace("after-restart", &a, &b).await;
    c.create_run("after-restart", "promote-b", &validated(&b), json!({}))
        .await;
    assert_eq!(
        reason(&c.done("after-restart", "promote-b").await).1,
        "Promoted"
    );
    assert_eq!(c.stream_writes("after-restart").await, 1);
    let ready = reqwest::get(format!("http://127.0.0.1:{admin}/readyz"))
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        200,
        "the controller stayed up through the restart"
    );
    c.cp.assert_never_forbidden(CONTROLLER_SA);
}

#[tokio::test]
async fn two_controllers_hand_over_on_a_real_lease() {
    let c = Cluster::start().await;
    let (a, b) = (digest('a'), digest('b'));
    c.promotion_namespace("leader", &a, &b).await;
    let elect = [
        "--leader-elect",
        "--lease-namespace",
        "imagegate-system",
        "--identity",
    ];
    let mut replicas: Vec<(String, crate::support::Process)> = ["replica-a", "replica-b"]
        .iter()
        .map(|id| {
            (
                id.to_string(),
                c.controller(&[&elect[..], &[id]].concat()).0,
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        if let Some(h) = crate::support::lease_holder(&c.client, "imagegate-controller").await {
            break h;
        }
        assert!(Instant::now() < deadline, "nobody took the Lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    c.create_run("leader", "promote-b", &validated(&b), json!({}))
        .await;
    assert_eq!(reason(&c.done("leader", "promote-b").await).1, "Promoted");

    // SIGTERM, as the kubelet sends: the leader releases the Lease and the standby takes it.
    let idx = replicas.iter().position(|(id, _)| *id == leader).unwrap();
    let (_, mut old) = replicas.remove(idx);
    old.stop(Duration::from_secs(60)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match crate::support::lease_holder(&c.client, "imagegate-controller").await {
            Some(h) if h != leader => break,
            _ => {}
        }
        assert!(Instant::now() < deadline, "the standby never took over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.create_run(
        "leader",
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    assert_eq!(reason(&c.done("leader", "rollback").await).1, "RolledBack");
    assert_eq!(
        c.stream_writes("leader").await,
        2,
        "each run written once, by one replica"
    );
    c.cp.assert_never_forbidden(CONTROLLER_SA);
}

/// The params of a promotion of `digest` on `nb` whose validation succeeded.
fn validated(digest: &str) -> [(&str, &str); 3] {
    [
        ("imagestream", "nb"),
        ("digest", digest),
        ("validation-status", "Succeeded"),
    ]
}
