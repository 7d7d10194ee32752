//! End to end: the refusals that keep the gate closed, each with the real `imagegate controller`
//! against the emulator. Every refusal is a terminal `Succeeded=False` with its reason and a
//! message, and the served tag is untouched: no ImageStream write at all.

use crate::support::controller::{A, B, Setup, VALIDATED_B, grant_promote, reason, result, served};
use crate::support::rbac;
use crate::support::tekton::PipelineRunStandIn;
use crate::support::upstream::install_released_pipelinerun_crds;

use imagegate::api::ImageStream;
use serde_json::json;

#[tokio::test]
async fn a_promotion_without_validation_status_is_refused_and_the_served_tag_untouched() {
    let s = Setup::new().await;
    let before = s.served_tag().await;
    s.create_run(
        "promote-b",
        &[("imagestream", "nb"), ("digest", B)],
        json!({}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("False".into(), "ValidationRequired".into()));
    let message = s.message("promote-b").await;
    assert!(message.contains("validation-status"), "{message}");
    assert_eq!(result(&run, "promoted-digest"), "");
    s.assert_served_untouched(&before).await;
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn an_image_promotion_that_opts_out_of_the_validation_status_promotes_without_one() {
    let s = Setup::new().await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "unsafe", "namespace": "ds"},
            "spec": {"validation": {"required": false}}
        }))
        .await;
    s.create_run(
        "promote-b",
        &[("imagestream", "nb"), ("digest", B)],
        json!({"spec": {"customRef": {"name": "unsafe"}}}),
    )
    .await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn begin_returns_the_candidate_by_digest_as_the_stream_resolves_it() {
    let s = Setup::new().await;
    s.create_run(
        "begin-b",
        &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        json!({}),
    )
    .await;
    let run = s.done("begin-b").await;
    assert_eq!(reason(&run), ("True".into(), "Validating".into()));
    let repository = s.stream().await.status.unwrap().docker_image_repository;
    assert!(repository.ends_with("/ds/nb"), "{repository}");
    assert_eq!(result(&run, "image"), format!("{repository}@{B}"));
    // The promotion of what was validated carries the same image.
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    let run = s.done("promote-b").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(result(&run, "image"), format!("{repository}@{B}"));
    assert_eq!(result(&run, "previous-digest"), A);
    assert_eq!(served(&s.stream().await).0, format!("nb@{B}"));
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_run_from_a_service_account_without_promote_is_forbidden_whatever_its_action() {
    let s = Setup::new().await;
    let before = s.served_tag().await;
    let intruder = json!({"spec": {"serviceAccountName": "intruder"}});
    let runs: [(&str, &[(&str, &str)]); 4] = [
        (
            "begin-b",
            &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        ),
        ("promote-b", VALIDATED_B),
        (
            "reject-b",
            &[("imagestream", "nb"), ("digest", B), ("action", "reject")],
        ),
        ("rollback", &[("imagestream", "nb"), ("action", "rollback")]),
    ];
    for (name, params) in runs {
        s.create_run(name, params, intruder.clone()).await;
    }
    for (name, _) in runs {
        let run = s.done(name).await;
        assert_eq!(reason(&run), ("False".into(), "Forbidden".into()), "{name}");
        let message = s.message(name).await;
        assert!(
            message.starts_with("service account \"ds/intruder\" may not promote")
                && message.contains("the verb \"promote\" on imagepromotions.imagegate.dev"),
            "{name}: {message}"
        );
    }
    s.assert_served_untouched(&before).await;
    rbac::assert_config_allows(&s.emu, "controller").await;

    // Granted the permission, the same account promotes.
    grant_promote(&s.emu, "ds", "intruder").await;
    s.create_run("promote-b-granted", VALIDATED_B, intruder)
        .await;
    let run = s.done("promote-b-granted").await;
    assert_eq!(reason(&run), ("True".into(), "Promoted".into()));
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
}

#[tokio::test]
async fn promote_on_one_imagepromotion_does_not_cover_a_stream_another_governs() {
    let s = Setup::new().await;
    let before = s.served_tag().await;
    for (name, stream) in [("notebooks", "nb"), ("other", "other-nb")] {
        s.emu
            .seed(json!({
                "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
                "metadata": {"name": name, "namespace": "ds"}, "spec": {"imageStream": stream}
            }))
            .await;
    }
    // A Role with resourceNames: `pipeline` may promote through ImagePromotion notebooks only.
    s.emu
        .seed_str(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: promote-notebooks, namespace: ds}
rules:
- apiGroups: [imagegate.dev]
  resources: [imagepromotions]
  resourceNames: [notebooks]
  verbs: [promote]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: promote-notebooks, namespace: ds}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: promote-notebooks}
subjects:
- {kind: ServiceAccount, name: pipeline, namespace: ds}
"#,
        )
        .await;
    let other_stream: Vec<(&str, &str)> = VALIDATED_B
        .iter()
        .map(|(n, v)| {
            if *n == "imagestream" {
                (*n, "other-nb")
            } else {
                (*n, *v)
            }
        })
        .collect();
    let as_pipeline = |custom: serde_json::Value| json!({"spec": {"serviceAccountName": "pipeline", "customRef": custom}});
    s.create_run(
        "other",
        &other_stream,
        as_pipeline(json!({"name": "other"})),
    )
    .await;
    s.create_run(
        "inline",
        &other_stream,
        json!({"spec": {"serviceAccountName": "pipeline", "customRef": null,
                        "customSpec": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "spec": {}}}}),
    )
    .await;
    for name in ["other", "inline"] {
        assert_eq!(
            reason(&s.done(name).await),
            ("False".into(), "Forbidden".into()),
            "{name}"
        );
        let message = s.message(name).await;
        assert!(
            message.contains(
                "for ImagePromotion \"other\" in namespace \"ds\" (it governs ImageStream \"other-nb\")"
            ),
            "{name}: {message}"
        );
    }
    s.assert_served_untouched(&before).await;
    s.create_run(
        "notebooks",
        VALIDATED_B,
        as_pipeline(json!({"name": "notebooks"})),
    )
    .await;
    assert_eq!(
        reason(&s.done("notebooks").await),
        ("True".into(), "Promoted".into())
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

/// Proof of validation: the ImagePromotion `notebooks` names the Pipeline `imagegate-promote` and
/// its task `validate`, and Tekton's PipelineRun and TaskRun CRDs are served.
async fn with_proof(s: &Setup) {
    install_released_pipelinerun_crds(s.client.clone()).await;
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "notebooks", "namespace": "ds"},
            "spec": {"validation": {"pipeline": "imagegate-promote", "tasks": ["validate"]}}
        }))
        .await;
}

/// The candidate B by digest, as begin reports it.
async fn image_of_b(s: &Setup) -> String {
    let repository = s.stream().await.status.unwrap().docker_image_repository;
    format!("{repository}@{B}")
}

/// A promote CustomRun of B through `notebooks`, created and listed as the pipeline controller
/// creates and lists it for `pr` (None: a CustomRun that belongs to no PipelineRun).
async fn promote_in(s: &Setup, name: &str, pr: Option<&mut PipelineRunStandIn>) {
    let mut extra = json!({"spec": {"customRef": {"name": "notebooks"}}});
    if let Some(pr) = &pr {
        json_patch::merge(&mut extra, &pr.child_metadata("promote"));
    }
    s.create_run(name, VALIDATED_B, extra).await;
    if let Some(pr) = pr {
        pr.list_custom_run(name, "promote").await;
    }
}

#[tokio::test]
async fn a_promotion_its_pipelinerun_proves_validated_is_promoted() {
    let s = Setup::new().await;
    with_proof(&s).await;
    let image = image_of_b(&s).await;
    let mut pr = PipelineRunStandIn::create(&s.client, "ds", "run-b", "imagegate-promote").await;
    pr.task_run("validate", Some(&image), true).await;
    promote_in(&s, "run-b-promote", Some(&mut pr)).await;
    let run = s.done("run-b-promote").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_promotion_nothing_proves_validated_is_unverified_and_the_served_tag_untouched() {
    let s = Setup::new().await;
    with_proof(&s).await;
    let before = s.served_tag().await;
    let image = image_of_b(&s).await;
    let other_image = image.replace(B, A);
    let mut cases: Vec<(&str, Option<PipelineRunStandIn>, String)> = Vec::new();
    let mut other_digest =
        PipelineRunStandIn::create(&s.client, "ds", "other-digest", "imagegate-promote").await;
    other_digest
        .task_run("validate", Some(&other_image), true)
        .await;
    cases.push((
        "other-digest",
        Some(other_digest),
        format!("validated {other_image:?}, not {B}"),
    ));
    let mut failed =
        PipelineRunStandIn::create(&s.client, "ds", "failed", "imagegate-promote").await;
    failed.task_run("validate", Some(&image), false).await;
    cases.push(("failed", Some(failed), "did not succeed (Failed".into()));
    let skipped = PipelineRunStandIn::create(&s.client, "ds", "skipped", "imagegate-promote").await;
    cases.push((
        "skipped",
        Some(skipped),
        "task \"validate\" has no TaskRun in PipelineRun \"skipped\"".into(),
    ));
    let mut hand_made = PipelineRunStandIn::create(&s.client, "ds", "hand-made", "my-own").await;
    hand_made.task_run("validate", Some(&image), true).await;
    cases.push((
        "hand-made",
        Some(hand_made),
        "runs Pipeline \"my-own\", not \"imagegate-promote\"".into(),
    ));
    cases.push(("orphan", None, "belongs to no PipelineRun".into()));
    for (name, pr, _) in &mut cases {
        promote_in(&s, &format!("{name}-promote"), pr.as_mut()).await;
    }
    for (name, _, want) in &cases {
        let run_name = format!("{name}-promote");
        let run = s.done(&run_name).await;
        assert_eq!(
            reason(&run),
            ("False".into(), "Unverified".into()),
            "{name}"
        );
        let message = s.message(&run_name).await;
        assert!(
            message.starts_with(&format!("nothing proves that {B} was validated: ")),
            "{name}: {message}"
        );
        assert!(
            message.contains(want.as_str()),
            "{name}: {want:?} not in {message:?}"
        );
    }
    s.assert_served_untouched(&before).await;
    rbac::assert_config_allows(&s.emu, "controller").await;
}

/// Promotes B (the pipeline validated it) with run `name`, and checks it.
async fn promote_b(s: &Setup, name: &str, extra: &[(&str, &str)]) -> (String, String) {
    let params: Vec<(&str, &str)> = VALIDATED_B.iter().chain(extra).copied().collect();
    s.create_run(name, &params, json!({})).await;
    reason(&s.done(name).await)
}

#[tokio::test]
async fn a_rolled_back_digest_is_refused_then_promoted_again_only_with_the_param() {
    let s = Setup::new().await;
    assert_eq!(promote_b(&s, "promote-b", &[]).await.1, "Promoted");
    s.create_run(
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    assert_eq!(reason(&s.done("rollback").await).1, "RolledBack");
    let (_, ann) = served(&s.stream().await);
    assert_eq!(ann["imagegate.dev/rolled-back-digests"], B);

    // The pipeline of B runs again: refused, nothing written.
    let before = s.served_tag().await;
    let writes = s.writes("imagestreams").await.len();
    assert_eq!(
        promote_b(&s, "promote-b-again", &[]).await,
        ("False".into(), "DigestRolledBack".into())
    );
    let message = s.message("promote-b-again").await;
    assert!(
        message.contains("allow-rolled-back") && message.contains(&format!("latest keeps {A}")),
        "{message}"
    );
    assert_eq!(s.served_tag().await, before, "the served tag is untouched");
    assert_eq!(s.writes("imagestreams").await.len(), writes);

    // Promoted on purpose, it is served again and no longer listed.
    assert_eq!(
        promote_b(&s, "promote-b-anyway", &[("allow-rolled-back", "true")]).await,
        ("True".into(), "Promoted".into())
    );
    let is = s.stream().await;
    assert_eq!(is.current_digest("latest"), Some(B));
    assert!(
        !served(&is)
            .1
            .contains_key("imagegate.dev/rolled-back-digests")
    );
    rbac::assert_config_allows(&s.emu, "controller").await;
}

#[tokio::test]
async fn a_rollback_after_the_history_was_pruned_returns_through_the_previous_tag() {
    let s = Setup::new().await;
    assert_eq!(promote_b(&s, "promote-b", &[]).await.1, "Promoted");
    let is = s.stream().await;
    let previous = is.spec_tag("latest-previous").expect("the previous tag");
    assert_eq!(
        previous.annotations.as_ref().unwrap()["hidden"],
        "true",
        "hidden from UIs"
    );
    assert_eq!(
        previous.from.as_ref().unwrap().name.as_deref(),
        Some(&*format!("nb@{A}"))
    );
    assert_eq!(is.current_digest("latest-previous"), Some(A));

    // `oc adm prune images` keeps few revisions: every tag keeps only its current image, so A
    // is left only where the previous tag pins it.
    let streams: kube::Api<ImageStream> = kube::Api::namespaced(s.client.clone(), "ds");
    let mut pruned = s.stream().await;
    for tag in &mut pruned.status.as_mut().unwrap().tags {
        if let Some(items) = tag.items.as_mut() {
            items.truncate(1);
        }
    }
    streams
        .replace_status("nb", &kube::api::PostParams::default(), &pruned)
        .await
        .unwrap();
    let is = s.stream().await;
    assert_eq!(is.history("latest").len(), 1);
    assert!(
        is.history("candidate")
            .iter()
            .all(|e| e.digest() != Some(A))
    );

    s.create_run(
        "rollback",
        &[("imagestream", "nb"), ("action", "rollback")],
        json!({}),
    )
    .await;
    let run = s.done("rollback").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "RolledBack".into()),
        "{:?}",
        run.status
    );
    assert_eq!(result(&run, "promoted-digest"), A);
    assert_eq!(s.stream().await.current_digest("latest"), Some(A));
    rbac::assert_config_allows(&s.emu, "controller").await;
}
