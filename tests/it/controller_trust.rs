//! End to end: the refusals that keep the gate closed, each with the real `imagegate controller`
//! against the emulator. Every refusal is a terminal `Succeeded=False` with its reason and a
//! message, and the served tag is untouched: no ImageStream write at all.

use crate::support::controller::{A, B, Setup, VALIDATED_B, grant_promote, reason, result, served};
use crate::support::rbac;

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
async fn promote_on_one_imagepromotion_does_not_cover_another_or_an_inline_spec() {
    let s = Setup::new().await;
    let before = s.served_tag().await;
    for name in ["notebooks", "other"] {
        s.emu
            .seed(json!({
                "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
                "metadata": {"name": name, "namespace": "ds"}, "spec": {}
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
    let as_pipeline = |custom: serde_json::Value| json!({"spec": {"serviceAccountName": "pipeline", "customRef": custom}});
    s.create_run("other", VALIDATED_B, as_pipeline(json!({"name": "other"})))
        .await;
    s.create_run(
        "inline",
        VALIDATED_B,
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
    }
    assert!(
        s.message("inline")
            .await
            .contains("every ImagePromotion of namespace \"ds\"")
    );
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
