//! End to end: the gate cannot be walked around by whoever may create runs in a gated namespace
//! (the pipeline runner of docs/security.md). Each attack of the security review (F-1 the run
//! picks its own policy, F-3 params widen it, F-8 a replayed proof and an unvalidated way back)
//! is a CustomRun against the real controller and the emulator; each ends `False` with a reason
//! naming what was missing, and the served tag is untouched. A control run beside each shows that
//! the refusal is the rule's, not a broken setup's.

use crate::support::controller::{A, B, C, Setup, VALIDATED_B, reason, served};
use crate::support::tekton::PipelineRunStandIn;
use crate::support::upstream::install_released_pipelinerun_crds;

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

/// Seeds ImagePromotion `name` in `ds` with `spec`.
async fn policy(s: &Setup, name: &str, spec: Value) {
    s.emu
        .seed(json!({
            "apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": name, "namespace": "ds"}, "spec": spec
        }))
        .await;
}

/// The platform's policy for `ds/nb`: ImagePromotion `gov` governs it and asks for proof that
/// Pipeline `imagegate-promote` validated the digest in its task `validate`.
async fn governed(s: &Setup) {
    install_released_pipelinerun_crds(s.client.clone()).await;
    policy(
        s,
        "gov",
        json!({"imageStream": "nb",
               "validation": {"pipeline": "imagegate-promote", "tasks": ["validate"]}}),
    )
    .await;
}

/// An inline spec in place of a `customRef`.
fn inline(spec: Value) -> Value {
    json!({"spec": {"customRef": null,
                    "customSpec": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "spec": spec}}})
}

/// A `customRef` naming ImagePromotion `name`.
fn named(name: &str) -> Value {
    json!({"spec": {"customRef": {"name": name}}})
}

/// Waits for each run and asserts its reason and that its message says `want`.
async fn assert_refused(s: &Setup, runs: &[(&str, &str, &str)]) {
    for (name, why, want) in runs {
        let run = s.done(name).await;
        assert_eq!(reason(&run), ("False".into(), why.to_string()), "{name}");
        let message = s.message(name).await;
        assert!(
            message.contains(want),
            "{name}: {want:?} not in {message:?}"
        );
    }
}

#[tokio::test]
async fn a_run_that_names_no_imagepromotion_or_another_is_held_to_the_governing_one() {
    let s = Setup::new().await;
    governed(&s).await;
    // `lax` names no stream, so it governs every stream of ds too; `elsewhere` governs another.
    policy(&s, "lax", json!({"validation": {"required": false}})).await;
    policy(
        &s,
        "elsewhere",
        json!({"imageStream": "other", "validation": {"required": false}}),
    )
    .await;
    let before = s.served_tag().await;
    s.create_run("inline", VALIDATED_B, inline(json!({}))).await;
    // promotion_run's customRef names no ImagePromotion.
    s.create_run("unnamed", VALIDATED_B, json!({})).await;
    s.create_run("lax", VALIDATED_B, named("lax")).await;
    s.create_run("elsewhere", VALIDATED_B, named("elsewhere"))
        .await;
    let unproven = "ImagePromotion \"gov\" governs nb and asks for proof";
    assert_refused(
        &s,
        &[
            ("inline", "Unverified", unproven),
            ("unnamed", "Unverified", unproven),
            ("lax", "Unverified", unproven),
            (
                "elsewhere",
                "ParamOverridesPolicy",
                "param \"imagestream\" is \"nb\", but ImagePromotion \"elsewhere\" promotes ImageStream \"other\"",
            ),
        ],
    )
    .await;
    s.assert_served_untouched(&before).await;
}

#[tokio::test]
async fn params_never_widen_the_imagepromotion_that_sets_them() {
    let s = Setup::new().await;
    policy(
        &s,
        "pinned",
        json!({"imageStream": "nb", "candidateTag": "candidate", "servedTag": "latest"}),
    )
    .await;
    let before = s.served_tag().await;
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
        VALIDATED_B.iter().chain(extra).copied().collect()
    };
    s.create_run(
        "nightly",
        &with(&[("candidate-tag", "nightly")]),
        named("pinned"),
    )
    .await;
    s.create_run(
        "stable",
        &with(&[("served-tag", "stable")]),
        named("pinned"),
    )
    .await;
    s.create_run(
        "inline-nightly",
        VALIDATED_B,
        inline(json!({"candidateTag": "nightly"})),
    )
    .await;
    s.create_run(
        "allow",
        &with(&[("allow-rolled-back", "true")]),
        named("pinned"),
    )
    .await;
    assert_refused(
        &s,
        &[
            (
                "nightly",
                "ParamOverridesPolicy",
                "param \"candidate-tag\" is \"nightly\", but ImagePromotion \"pinned\" sets \"candidate\"",
            ),
            (
                "stable",
                "ParamOverridesPolicy",
                "param \"served-tag\" is \"stable\", but ImagePromotion \"pinned\" sets \"latest\"",
            ),
            (
                "inline-nightly",
                "ParamOverridesPolicy",
                "the inline spec's candidateTag is \"nightly\", but ImagePromotion \"pinned\" sets \"candidate\"",
            ),
            (
                "allow",
                "ParamOverridesPolicy",
                "param \"allow-rolled-back\" counts only where no ImagePromotion governs the stream; ImagePromotion \"pinned\" does not set allowRolledBack",
            ),
        ],
    )
    .await;
    s.assert_served_untouched(&before).await;
    // The same run within the policy promotes.
    s.create_run("within", VALIDATED_B, named("pinned")).await;
    assert_eq!(
        reason(&s.done("within").await),
        ("True".into(), "Promoted".into())
    );
}

#[tokio::test]
async fn the_review_asks_for_every_governing_imagepromotion_by_name() {
    let s = Setup::new().await;
    policy(&s, "gov", json!({"imageStream": "nb"})).await;
    policy(&s, "sandbox", json!({"imageStream": "sandbox"})).await;
    // `dev` may promote through `sandbox` only, `pipeline` through `gov` only.
    for (sa, imagepromotion) in [("dev", "sandbox"), ("pipeline", "gov")] {
        s.emu
            .seed_str(&format!(
                r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: promote-{imagepromotion}, namespace: ds}}
rules:
- apiGroups: [imagegate.dev]
  resources: [imagepromotions]
  resourceNames: [{imagepromotion}]
  verbs: [promote]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: promote-{imagepromotion}, namespace: ds}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: promote-{imagepromotion}}}
subjects:
- {{kind: ServiceAccount, name: {sa}, namespace: ds}}
"#
            ))
            .await;
    }
    let before = s.served_tag().await;
    let as_sa = |sa: &str, mut extra: Value| {
        json_patch::merge(&mut extra, &json!({"spec": {"serviceAccountName": sa}}));
        extra
    };
    s.create_run("dev-inline", VALIDATED_B, as_sa("dev", inline(json!({}))))
        .await;
    s.create_run("dev-sandbox", VALIDATED_B, as_sa("dev", named("sandbox")))
        .await;
    assert_refused(
        &s,
        &[
            (
                "dev-inline",
                "Forbidden",
                "for ImagePromotion \"gov\" in namespace \"ds\" (it governs ImageStream \"nb\")",
            ),
            (
                "dev-sandbox",
                "ParamOverridesPolicy",
                "but ImagePromotion \"sandbox\" promotes ImageStream \"sandbox\"",
            ),
        ],
    )
    .await;
    s.assert_served_untouched(&before).await;
    // The review names `gov`, which `pipeline` holds the verb on: its inline run is judged by
    // gov (no proof asked) and promotes.
    s.create_run(
        "pipeline-inline",
        VALIDATED_B,
        as_sa("pipeline", inline(json!({}))),
    )
    .await;
    let run = s.done("pipeline-inline").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
}

/// A promote CustomRun of B through `gov`, made as the pipeline controller makes the child of
/// `pr` (an owner reference with its uid), or with only `labels` when `pr` is None.
async fn promote_child(s: &Setup, name: &str, pr: Option<&PipelineRunStandIn>, labels: Value) {
    let mut extra = named("gov");
    json_patch::merge(&mut extra, &json!({"metadata": {"labels": labels}}));
    if let Some(pr) = pr {
        json_patch::merge(&mut extra, &pr.child_metadata("promote"));
    }
    s.create_run(name, VALIDATED_B, extra).await;
}

/// Whether run `name` is still going (not done) after `seconds`.
async fn still_running_after(s: &Setup, name: &str, seconds: u64) -> bool {
    tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
    !s.runs().get(name).await.unwrap().is_done()
}

#[tokio::test]
async fn a_proof_comes_only_from_the_runs_own_running_pipelinerun() {
    let s = Setup::new().await;
    governed(&s).await;
    let image = format!(
        "{}@{B}",
        s.stream().await.status.unwrap().docker_image_repository
    );
    let before = s.served_tag().await;
    // A PipelineRun that once validated B and is over.
    let mut old = PipelineRunStandIn::create(&s.client, "ds", "old", "imagegate-promote").await;
    old.task_run("validate", Some(&image), true).await;
    old.finish(true).await;
    promote_child(
        &s,
        "label-only",
        None,
        json!({"tekton.dev/pipelineRun": "old"}),
    )
    .await;
    promote_child(&s, "replayed", Some(&old), json!({})).await;
    // A running PipelineRun that validated B but never created this run.
    let mut running =
        PipelineRunStandIn::create(&s.client, "ds", "running", "imagegate-promote").await;
    running.task_run("validate", Some(&image), true).await;
    promote_child(&s, "unlisted", Some(&running), json!({})).await;
    assert!(
        still_running_after(&s, "unlisted", 2).await,
        "a run its PipelineRun has not listed waits"
    );
    running.finish(false).await;
    assert_refused(
        &s,
        &[
            ("label-only", "Unverified", "belongs to no PipelineRun"),
            (
                "replayed",
                "Unverified",
                "PipelineRun \"old\" has finished; only the running PipelineRun that created a CustomRun proves it",
            ),
            (
                "unlisted",
                "Unverified",
                "PipelineRun \"running\" has finished; only the running PipelineRun that created a CustomRun proves it",
            ),
        ],
    )
    .await;
    s.assert_served_untouched(&before).await;

    // The genuine child: listed a moment after it was created, as Tekton lists it.
    let mut real = PipelineRunStandIn::create(&s.client, "ds", "real", "imagegate-promote").await;
    real.task_run("validate", Some(&image), true).await;
    promote_child(&s, "real-promote", Some(&real), json!({})).await;
    assert!(still_running_after(&s, "real-promote", 1).await);
    real.list_custom_run("real-promote", "promote").await;
    let run = s.done("real-promote").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
}

/// A rollback run of `nb`, to `digest` when given.
async fn rollback(s: &Setup, name: &str, digest: Option<&str>) -> (String, String) {
    let mut params = vec![("imagestream", "nb"), ("action", "rollback")];
    params.extend(digest.map(|d| ("digest", d)));
    s.create_run(name, &params, json!({})).await;
    reason(&s.done(name).await)
}

/// What `oc tag nb@<digest> nb:latest` by a namespace editor writes.
async fn tag_by_hand(s: &Setup, digest: &str) {
    let streams: kube::Api<imagegate::api::ImageStream> =
        kube::Api::namespaced(s.client.clone(), "ds");
    let tag = json!({"spec": {"tags": [{"name": "latest", "from": {"kind": "ImageStreamImage", "name": format!("nb@{digest}")}}]}});
    streams
        .patch("nb", &PatchParams::default(), &Patch::Strategic(tag))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_rollback_returns_only_to_a_digest_the_gate_served_and_never_to_one_rolled_back() {
    let s = Setup::new().await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    assert_eq!(rollback(&s, "back-to-a", None).await.1, "RolledBack");
    assert_eq!(s.stream().await.current_digest("latest"), Some(A));

    // B was rolled back: a rollback that names it does not serve it again.
    assert_eq!(
        rollback(&s, "forward-to-b", Some(B)).await,
        ("False".into(), "DigestRolledBack".into())
    );
    // C was served once, by hand, never by the gate: the served tag's history is no way back.
    s.emu.import("ds", "nb", "candidate", C).await;
    tag_by_hand(&s, C).await;
    // The tamper check reports the move (its one write) before the tag goes back by hand.
    within_10s("the move to C reported", || async {
        let (_, ann) = served(&s.stream().await);
        ann.get("imagegate.dev/tampered-digest") == Some(&format!("nb@{C}"))
    })
    .await;
    tag_by_hand(&s, A).await;
    assert!(
        s.stream()
            .await
            .history("latest")
            .iter()
            .any(|e| e.digest() == Some(C))
    );
    let writes = s.writes("imagestreams").await.len();
    assert_eq!(
        rollback(&s, "to-c", Some(C)).await,
        ("False".into(), "NotServedByGate".into())
    );
    let message = s.message("to-c").await;
    assert!(
        message.contains(&format!("{C} was never served by the gate"))
            && message.contains(&format!("latest keeps {A}")),
        "{message}"
    );
    assert_eq!(
        s.writes("imagestreams").await.len(),
        writes,
        "nothing written"
    );
    let (from, _) = served(&s.stream().await);
    assert_eq!(from, format!("nb@{A}"));
}

/// Makes the Image of `digest` an OCI index of two platforms, as the real image API records a
/// candidate imported with `importMode: PreserveOriginal`
/// (tests/fixtures/real-openshift_ml_isimage-index.json): sub-manifests, no config metadata.
async fn make_index(s: &Setup, digest: &str) {
    let images: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
        s.client.clone(),
        &kube::api::ApiResource {
            group: "image.openshift.io".into(),
            version: "v1".into(),
            api_version: "image.openshift.io/v1".into(),
            kind: "Image".into(),
            plural: "images".into(),
        },
    );
    let sub = |arch: &str, d: char| {
        json!({"architecture": arch, "os": "linux", "digest": format!("sha256:{}", d.to_string().repeat(64)),
               "manifestSize": 401, "mediaType": "application/vnd.oci.image.manifest.v1+json"})
    };
    let index = json!({
        "dockerImageManifestMediaType": "application/vnd.oci.image.index.v1+json",
        "dockerImageManifests": [sub("amd64", 'e'), sub("arm64", 'f')],
        "dockerImageMetadata": null,
    });
    images
        .patch(digest, &PatchParams::default(), &Patch::Merge(index))
        .await
        .unwrap();
}

#[tokio::test]
async fn an_image_index_is_refused_at_begin_and_the_served_tag_keeps_its_image() {
    let s = Setup::new().await;
    make_index(&s, B).await;
    let before = s.served_tag().await;
    s.create_run(
        "begin-b",
        &[("imagestream", "nb"), ("digest", B), ("action", "begin")],
        json!({}),
    )
    .await;
    assert_refused(
        &s,
        &[(
            "begin-b",
            "UnvalidatedPlatforms",
            "is an image index of 2 platforms (linux/amd64, linux/arm64); a validation runs on one of them",
        )],
    )
    .await;
    let after = s.served_tag().await;
    assert_eq!(after.from, before.from, "the served tag keeps its image");
    let (_, annotations) = served(&s.stream().await);
    assert_eq!(annotations["imagegate.dev/phase"], "UpdateFailed");
    // A promote of it, validated or not, is refused the same way.
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_refused(&s, &[("promote-b", "UnvalidatedPlatforms", "linux/arm64")]).await;
    assert_eq!(s.stream().await.current_digest("latest"), Some(A));
}

/// The value of the metric line `name` (exactly, with its labels) on the controller's `/metrics`.
async fn metric(s: &Setup, name: &str) -> Option<String> {
    let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", s.admin))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")).map(str::to_string))
}

/// The `Tampered` Events on ImageStream `nb`.
async fn tamper_events(s: &Setup) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(s.client.clone(), "ds");
    let list = events.list(&Default::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("Tampered")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("nb")
        })
        .filter_map(|e| e.note)
        .collect()
}

/// Waits up to 10 s (the issue's bound on noticing) for `check`.
async fn within_10s<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    crate::support::within(what, std::time::Duration::from_secs(10), check).await;
}

#[tokio::test]
async fn a_served_tag_moved_by_hand_is_reported_within_seconds_and_put_back_where_the_policy_says_so()
 {
    let s = Setup::new().await;
    s.create_run("promote-b", VALIDATED_B, json!({})).await;
    assert_eq!(reason(&s.done("promote-b").await).1, "Promoted");
    crate::support::wait_ready(s.admin).await;
    assert_eq!(
        metric(&s, "imagegate_controller_tampered_tags")
            .await
            .as_deref(),
        Some("0")
    );
    // An editor's `oc tag` serves C, which no validation proved.
    s.emu.import("ds", "nb", "candidate", C).await;
    tag_by_hand(&s, C).await;
    within_10s("the served tag reported Tampered", || async {
        let (_, ann) = served(&s.stream().await);
        ann.get("imagegate.dev/phase").map(String::as_str) == Some("Tampered")
    })
    .await;
    let (from, ann) = served(&s.stream().await);
    assert_eq!(
        from,
        format!("nb@{C}"),
        "reported, not moved (no policy says Revert)"
    );
    assert_eq!(ann["imagegate.dev/tampered-digest"], format!("nb@{C}"));
    assert!(
        ann["imagegate.dev/message"].starts_with(&format!(
            "nb:latest was moved to nb@{C} outside the gate (the gate served {B})"
        )),
        "{ann:?}"
    );
    within_10s("the gauge and the counter", || async {
        metric(&s, "imagegate_controller_tampered_tags")
            .await
            .as_deref()
            == Some("1")
            && metric(
                &s,
                "imagegate_controller_tampers_total{action=\"reported\"}",
            )
            .await
            .as_deref()
                == Some("1")
    })
    .await;
    within_10s("a Tampered Event on nb", || async {
        !tamper_events(&s).await.is_empty()
    })
    .await;

    // The platform asks for Revert: the next move is put back to what the gate served.
    policy(
        &s,
        "gov",
        json!({"imageStream": "nb", "onTamper": "Revert"}),
    )
    .await;
    tag_by_hand(&s, A).await;
    within_10s("the served tag put back to B", || async {
        served(&s.stream().await).0 == format!("nb@{B}")
    })
    .await;
    within_10s("the reverted counter and the gauge at 0", || async {
        metric(
            &s,
            "imagegate_controller_tampers_total{action=\"reverted\"}",
        )
        .await
        .as_deref()
            == Some("1")
            && metric(&s, "imagegate_controller_tampered_tags")
                .await
                .as_deref()
                == Some("0")
    })
    .await;
    assert_eq!(s.stream().await.current_digest("latest"), Some(B));
}

/// What Tekton records as `status.taskSpec` for a run of the shipped smoke-test Task
/// (`tekton/200`) on `image`: its spec with `$(params.image)` substituted. `edit` changes it
/// first, as an edited Task would.
fn recorded_smoke_test(image: &str, edit: impl FnOnce(&mut Value)) -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tekton/200-task-smoke-test.yaml"
    ))
    .unwrap();
    let task: Value = serde_norway::from_str(&text).unwrap();
    let mut spec: Value =
        serde_json::from_str(&task["spec"].to_string().replace("$(params.image)", image)).unwrap();
    edit(&mut spec);
    spec
}

#[tokio::test]
async fn a_pinned_proof_holds_only_for_the_content_that_was_pinned() {
    let s = Setup::new().await;
    install_released_pipelinerun_crds(s.client.clone()).await;
    let image = format!(
        "{}@{B}",
        s.stream().await.status.unwrap().docker_image_repository
    );
    let pin =
        imagegate::controller::proof::pin::of_spec(&recorded_smoke_test(&image, |_| {}), &image);
    policy(
        &s,
        "gov",
        json!({"imageStream": "nb", "validation": {
            "pipeline": "imagegate-promote", "tasks": ["validate"], "pins": {"validate": pin}
        }}),
    )
    .await;
    let before = s.served_tag().await;
    // The three forgeries of F-2: another command, a TaskRun made again with a trivial spec, and
    // a TaskRun whose content Tekton never recorded.
    let forged: [(&str, Option<Value>, &str); 3] = [
        (
            "command",
            Some(recorded_smoke_test(&image, |spec| {
                spec["steps"][0]["env"][0]["value"] = json!("true");
            })),
            "not the pinned",
        ),
        (
            "remade",
            Some(json!({"steps": [{"name": "x", "image": image, "script": "exit 0"}]})),
            "not the pinned",
        ),
        (
            "unrecorded",
            None,
            "cannot be held to its pin: Tekton recorded no taskSpec",
        ),
    ];
    for (name, spec, _) in &forged {
        let mut pr = PipelineRunStandIn::create(&s.client, "ds", name, "imagegate-promote").await;
        pr.task_run_that_ran("validate", Some(&image), true, spec.clone())
            .await;
        promote_child(&s, &format!("{name}-promote"), Some(&pr), json!({})).await;
        pr.list_custom_run(&format!("{name}-promote"), "promote")
            .await;
    }
    // The pinned Task itself, run with its environment overridden: a pod template's `env` comes
    // after the step's own in the container, so the later `SMOKE_TEST` wins and the pinned step
    // runs `true`. Whoever may create a PipelineRun sets it (`taskRunTemplate.podTemplate`).
    let mut pr =
        PipelineRunStandIn::create(&s.client, "ds", "environment", "imagegate-promote").await;
    pr.task_run_as(
        "validate",
        Some(&image),
        true,
        Some(recorded_smoke_test(&image, |_| {})),
        json!({"podTemplate": {"env": [{"name": "SMOKE_TEST", "value": "true"}]}}),
    )
    .await;
    promote_child(&s, "environment-promote", Some(&pr), json!({})).await;
    pr.list_custom_run("environment-promote", "promote").await;
    let mut refusals: Vec<(String, &str, &str)> = forged
        .iter()
        .map(|(name, _, want)| (format!("{name}-promote"), "Unverified", *want))
        .collect();
    refusals.push((
        "environment-promote".into(),
        "Unverified",
        "its pod template sets environment variables (SMOKE_TEST)",
    ));
    let refusals: Vec<(&str, &str, &str)> = refusals
        .iter()
        .map(|(n, r, w)| (n.as_str(), *r, *w))
        .collect();
    assert_refused(&s, &refusals).await;
    s.assert_served_untouched(&before).await;

    // What was pinned, run again on this candidate: proof.
    let mut pr = PipelineRunStandIn::create(&s.client, "ds", "pinned", "imagegate-promote").await;
    pr.task_run_that_ran(
        "validate",
        Some(&image),
        true,
        Some(recorded_smoke_test(&image, |_| {})),
    )
    .await;
    // `imagegate pin` prints the same pin from what the run recorded.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    s.emu.write_kubeconfig(&kubeconfig, "admin");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_imagegate"))
        .args(["pin", "ds/pinned"])
        .env("KUBECONFIG", &kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("validation:\n  pins:\n    validate: {pin}\n")
    );
    promote_child(&s, "pinned-promote", Some(&pr), json!({})).await;
    pr.list_custom_run("pinned-promote", "promote").await;
    let run = s.done("pinned-promote").await;
    assert_eq!(
        reason(&run),
        ("True".into(), "Promoted".into()),
        "{:?}",
        run.status
    );
}
