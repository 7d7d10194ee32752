//! `promote`, `rollback` and `reject` by hand: each creates the CustomRun a pipeline task would,
//! the real controller decides, and the command reports the verdict and exits by it.

use imagegate::api::CustomRun;
use kube::api::{Api, ListParams};
use serde_json::json;

use std::time::Duration;

use imagegate_emulator::control::Fault;

use super::{OPERATOR, Ops};
use crate::support::controller::{A, B};
use crate::support::eventually;

async fn runs(o: &Ops) -> Vec<CustomRun> {
    Api::<CustomRun>::namespaced(o.s.client.clone(), "ds")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

#[tokio::test]
async fn promote_with_the_operators_evidence_creates_the_run_and_reports_the_promotion() {
    let o = Ops::new().await;
    // The controller's write fails until the command has seen the run start, so that the
    // progress line is there to read (API errors are retried inside the attempt).
    o.emu()
        .inject_fault(Fault {
            verb: Some("patch".into()),
            resource: Some("imagestreams".into()),
            count: 10_000,
            status: Some(500),
            ..Default::default()
        })
        .await;
    let release = async {
        eventually("the run started", || async {
            runs(&o).await.iter().any(CustomRun::has_started)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        o.emu().clear_faults().await;
    };
    let (out, ()) = tokio::join!(
        o.run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded"
        ]),
        release
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stderr.contains("customrun/imagegate-promote-nb-"),
        "{out}"
    );
    assert!(
        out.stderr.contains(": Started: promote nb:latest in ds"),
        "a progress line: {out}"
    );
    assert!(
        out.stdout
            .contains(&format!(": Promoted: latest promoted from {A} to {B}")),
        "{out}"
    );
    assert!(
        out.stdout.contains(&format!(
            "  promoted-digest: {B}\n  previous-digest: {A}\n  phase: Promoted\n"
        )),
        "{out}"
    );

    let is = o.stream("ds", "nb").await;
    assert_eq!(is.current_digest("latest"), Some(B));
    // The run is the pipeline's task: customRef, params, the pipeline's service account.
    let run = runs(&o).await.pop().unwrap();
    assert_eq!(
        run.spec.service_account_name.as_deref(),
        Some("imagegate-pipeline")
    );
    assert_eq!(run.spec.timeout.as_deref(), Some("5m0s"));
    assert_eq!(run.param_str("digest"), Some(B));
    assert_eq!(run.param_str("validation-status"), Some("Succeeded"));
    // The CLI wrote no ImageStream: the controller did, after its checks.
    o.assert_operator_only_created("customruns").await;
}

#[tokio::test]
async fn promote_without_evidence_is_refused_by_the_controller_and_exits_3() {
    let o = Ops::new().await;
    let before = o.s.served_tag().await;
    let out = o.run(&["promote", "ds/nb"]).await;
    assert_eq!(out.code, Some(3), "{out}");
    assert!(
        out.stderr.contains("note: no --validation-status given"),
        "{out}"
    );
    assert!(
        out.stderr
            .contains("ended ValidationRequired: promote needs the validation-status param"),
        "{out}"
    );
    assert!(
        out.stderr
            .contains("hint: promote needs validation evidence"),
        "{out}"
    );
    assert_eq!(
        runs(&o).await[0].param_str("validation-status"),
        None,
        "no evidence is invented"
    );
    o.s.assert_served_untouched(&before).await;
}

#[tokio::test]
async fn promote_under_an_image_promotion_that_requires_proof_is_refused_even_with_evidence() {
    let o = Ops::new().await;
    o.emu()
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "notebooks", "namespace": "ds"},
            "spec": {"validation": {"pipeline": "imagegate-promote", "tasks": ["validate"]}}
        }))
        .await;
    let before = o.s.served_tag().await;
    let out = o
        .run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
        ])
        .await;
    assert_eq!(out.code, Some(3), "{out}");
    assert!(
        out.stderr
            .contains("asks for proof that Pipeline \"imagegate-promote\" validated"),
        "{out}"
    );
    assert!(
        out.stderr.contains("ended Unverified: nothing proves that"),
        "{out}"
    );
    let run = runs(&o).await.pop().unwrap();
    assert_eq!(
        run.spec.custom_ref.unwrap().name.as_deref(),
        Some("notebooks"),
        "the namespace's only ImagePromotion"
    );
    o.s.assert_served_untouched(&before).await;
}

#[tokio::test]
async fn a_service_account_that_may_not_promote_is_refused_with_a_hint() {
    let o = Ops::new().await;
    let out = o
        .run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
            "--service-account",
            "nobody",
        ])
        .await;
    assert_eq!(out.code, Some(3), "{out}");
    assert!(
        out.stderr
            .contains("ended Forbidden: service account \"ds/nobody\" may not promote"),
        "{out}"
    );
    assert!(
        out.stderr
            .contains("hint: bind the ClusterRole imagegate-promoter"),
        "{out}"
    );
    assert_eq!(o.stream("ds", "nb").await.current_digest("latest"), Some(A));
}

#[tokio::test]
async fn rollback_after_a_promotion_returns_to_the_previous_digest() {
    let o = Ops::new().await;
    let promoted = o
        .run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
        ])
        .await;
    assert_eq!(promoted.code, Some(0), "{promoted}");
    let out = o.run(&["rollback", "nb", "-n", "ds"]).await;
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout
            .contains(&format!(": RolledBack: latest rolled back from {B} to {A}")),
        "{out}"
    );
    assert!(out.stdout.contains("  phase: RolledBack\n"), "{out}");
    assert_eq!(o.stream("ds", "nb").await.current_digest("latest"), Some(A));
    o.assert_operator_only_created("customruns").await;
}

#[tokio::test]
async fn reject_marks_the_candidate_failed_and_counts_as_done() {
    let o = Ops::new().await;
    let out = o.run(&["reject", "nb", "-n", "ds"]).await;
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stdout.contains(&format!(
            ": Rejected: validation of {B} failed (validation-status \"Failed\"); latest keeps {A}"
        )),
        "{out}"
    );
    let is = o.stream("ds", "nb").await;
    let tag = is.spec_tag("latest").unwrap();
    assert_eq!(
        tag.annotations.as_ref().unwrap()["imagegate.dev/phase"],
        "UpdateFailed"
    );
    assert_eq!(is.current_digest("latest"), Some(A), "the image is kept");
}

#[tokio::test]
async fn no_wait_creates_the_run_and_returns_its_name() {
    let mut o = Ops::new().await;
    o.s.stop();
    let out = o
        .run(&[
            "promote",
            "nb",
            "-n",
            "ds",
            "--validation-status",
            "Succeeded",
            "--no-wait",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out}");
    let run = runs(&o).await.pop().unwrap();
    assert_eq!(
        out.stdout,
        format!("customrun/{} created\n", run.metadata.name.unwrap())
    );
    assert!(o.operator_writes().await.iter().all(|w| w.user == OPERATOR));
}

#[tokio::test]
async fn a_run_nobody_answers_times_out_with_a_clear_error() {
    let mut o = Ops::new().await;
    o.s.stop();
    let out = o
        .run(&["rollback", "nb", "-n", "ds", "--timeout", "1s"])
        .await;
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr
            .contains("did not finish within 6s; no controller has reported on it"),
        "{out}"
    );
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_created() {
    let o = Ops::new().await;
    for (args, want) in [
        (
            &["promote", "nb", "--digest", "sha256:XYZ"][..],
            "is not an image digest",
        ),
        (
            &["promote", "ds/nb", "-n", "other"][..],
            "\"ds/nb\" names namespace \"ds\", but -n says \"other\"",
        ),
        (
            &["rollback", "absent", "-n", "ds"][..],
            "ImageStream \"absent\" does not exist in namespace \"ds\"",
        ),
        (
            &["reject", "nb", "-n", "ds", "--timeout", "soon"][..],
            "invalid duration \"soon\"",
        ),
    ] {
        let out = o.run(args).await;
        assert!(matches!(out.code, Some(1) | Some(2)), "{args:?}: {out}");
        assert!(out.stderr.contains(want), "{args:?}: {out}");
    }
    assert!(runs(&o).await.is_empty());
}
