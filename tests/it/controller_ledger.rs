//! The ledger, end to end against the real controller and the emulator: a governed stream's
//! candidate that no validation began for (its PipelineRun never created, as when Tekton
//! Triggers answers 202 and creates nothing), and a validation whose PipelineRun was deleted
//! before `promote` or `reject`, are each paged (a Warning Event on the ImageStream, and
//! `imagegate_controller_candidates_without_verdict`) once the grace period has passed; a
//! validation that begins clears the page.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;

use crate::support::controller::{B, Setup};
use crate::support::tekton::PipelineRunStandIn;
use crate::support::upstream::install_released_pipelinerun_crds;
use crate::support::{free_port, wait_ready, within};

/// The notes of the Events of `reason` on ImageStream `nb`.
async fn events(s: &Setup, reason: &str) -> Vec<String> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(s.client.clone(), "ds");
    let list = events.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nb")
        })
        .filter_map(|e| e.note)
        .collect()
}

async fn gauge(admin: u16) -> Option<String> {
    let text = reqwest::get(format!("http://127.0.0.1:{admin}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("imagegate_controller_candidates_without_verdict ")
            .map(str::to_string)
    })
}

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_candidate_nobody_validates_and_a_validation_that_lost_its_pipelinerun_are_paged() {
    let mut s = Setup::new().await;
    install_released_pipelinerun_crds(s.client.clone()).await;
    s.stop();
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--verdict-grace", "2"]);
    wait_ready(admin).await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "gov", "namespace": "ds"}, "spec": {"imageStream": "nb"}
        }))
        .await;

    // B was imported into the candidate tag, and no PipelineRun was ever created for it.
    within("the candidate without a verdict is paged", WAIT, || async {
        events(&s, "CandidateWithoutVerdict")
            .await
            .iter()
            .any(|n| n.contains(B) && n.contains("no validation begin"))
    })
    .await;
    assert_eq!(gauge(admin).await.as_deref(), Some("1"));

    // Its validation begins: the page clears.
    let pr = PipelineRunStandIn::create(&s.client, "ds", "pr-b", "imagegate-promote").await;
    let mut begin = json!({"spec": {"customRef": {"name": "gov"}}});
    json_patch::merge(&mut begin, &pr.child_metadata("begin"));
    s.create_run(
        "pr-b-begin",
        &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        begin,
    )
    .await;
    s.done("pr-b-begin").await;
    within("a validation that began clears the page", WAIT, || async {
        gauge(admin).await.as_deref() == Some("0")
    })
    .await;

    // Its PipelineRun is deleted before promote or reject: the validation is lost, and paged.
    let prs: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        "ds",
        &crate::support::tekton::resource("PipelineRun", "pipelineruns"),
    );
    prs.delete("pr-b", &DeleteParams::default()).await.unwrap();
    within("the lost validation is paged", WAIT, || async {
        events(&s, "ValidationLost")
            .await
            .iter()
            .any(|n| n.contains(B) && n.contains("its PipelineRun pr-b is gone"))
    })
    .await;
    assert_eq!(gauge(admin).await.as_deref(), Some("1"));
    assert_eq!(
        events(&s, "CandidateWithoutVerdict").await.len(),
        1,
        "each page once"
    );
}

/// Re-drive, as `tekton/100` asks for it: the candidate no PipelineRun was created for is made
/// again from the shipped TriggerTemplate (`tekton/420`), under a name keyed by the install's run
/// key from the candidate and the attempt, a grace period apart; when no attempt begins a validation, the
/// served tag is marked `UpdateFailed` with the reason, and keeps its image.
#[tokio::test]
async fn a_candidate_with_no_verdict_is_re_driven_then_marked_update_failed() {
    use imagegate::runkey::{Candidate, RunKey};

    let mut s = Setup::new().await;
    // The run key `imagegate interceptor` makes at start.
    let key_bytes = [5u8; 32];
    s.emu
        .seed(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "imagegate-run-key", "namespace": "imagegate-system"},
            "data": {"key": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, key_bytes)}
        }))
        .await;
    let key = RunKey::from_bytes(&key_bytes).unwrap();
    let since = imagegate::runkey::since(
        s.stream()
            .await
            .status_tag("candidate")
            .and_then(|t| t.current())
            .and_then(|i| i.created.as_ref()),
    );
    install_released_pipelinerun_crds(s.client.clone()).await;
    s.emu
        .seed_str(
            &crate::support::upstream::TEKTON_TRIGGERS.read("config/300-triggertemplate.yaml"),
        )
        .await;
    let mut template: serde_json::Value = serde_norway::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tekton/420-triggertemplate.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    template["metadata"]["namespace"] = json!("ds");
    s.emu.seed(template).await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "gov", "namespace": "ds"},
            "spec": {"imageStream": "nb", "redrive": {"triggerTemplate": "imagegate-promote", "attempts": 2}}
        }))
        .await;
    s.stop();
    let admin = free_port();
    let _controller = s.spawn_controller(admin, &["--verdict-grace", "2"]);
    wait_ready(admin).await;

    let prs: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        "ds",
        &crate::support::tekton::resource("PipelineRun", "pipelineruns"),
    );
    let name = |attempt| {
        let id = key.redrive_id(
            &Candidate {
                namespace: "ds",
                imagestream: "nb",
                tag: "candidate",
                digest: B,
                since: &since,
            },
            attempt,
        );
        format!("imagegate-{id}")
    };
    for attempt in [1, 2] {
        within(&format!("re-drive {attempt}"), WAIT, || async {
            prs.get_opt(&name(attempt)).await.unwrap().is_some()
        })
        .await;
        let run = prs.get(&name(attempt)).await.unwrap();
        let params = &run.data["spec"]["params"];
        assert!(
            params
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "digest" && p["value"] == B),
            "{params}"
        );
    }
    // One Event (a series: Kubernetes counts the repeats of one reason on one object), whose
    // note is the first attempt's.
    assert!(
        events(&s, "CandidateWithoutVerdict")
            .await
            .iter()
            .any(|n| n.contains("re-driven (attempt 1 of 2)")),
        "{:?}",
        events(&s, "CandidateWithoutVerdict").await
    );
    // Neither began a validation (nothing runs them here): the served tag is marked.
    within("the served tag is marked UpdateFailed", WAIT, || async {
        let is = s.stream().await;
        let ann = is
            .spec_tag("latest")
            .unwrap()
            .annotations
            .clone()
            .unwrap_or_default();
        ann.get("imagegate.dev/phase").map(String::as_str) == Some("UpdateFailed")
            && ann
                .get("imagegate.dev/candidate-digest")
                .map(String::as_str)
                == Some(B)
            && ann
                .get("imagegate.dev/message")
                .is_some_and(|m| m.contains("after 2 re-drives"))
    })
    .await;
    assert_eq!(
        s.stream().await.current_digest("latest"),
        Some(crate::support::controller::A)
    );
    assert_eq!(
        prs.list(&Default::default()).await.unwrap().items.len(),
        2,
        "two attempts, no more"
    );
}
