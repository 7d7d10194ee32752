//! End to end: the refusals that keep the gate closed, each with the real `imagegate controller`
//! against the emulator. Every refusal is a terminal `Succeeded=False` with its reason and a
//! message, and the served tag is untouched: no ImageStream write at all.

use crate::support::controller::{A, B, Setup, VALIDATED_B, reason, result, served};
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
