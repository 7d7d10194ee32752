//! The signed record of the validation (`spec.validation.chains`) end to end against the real
//! controller and the emulator: the test plays Tekton Chains, signing each validating TaskRun's
//! provenance as Chains' `tekton` storage writes it (the in-toto/slsa/v1 statement it makes of
//! the TaskRun, in a DSSE envelope, in `chains.tekton.dev/signature-taskrun-<uid>`), with the
//! platform's key, whose public half is in the controller's namespace. The real Chains
//! controller signs on the real Tekton tier (`realcluster_tekton::chains`).
//!
//! The pipeline runner's attacks: a TaskRun marked signed so that Chains skips it, a record
//! signed by the runner's own key, the record of another candidate's validation copied onto
//! this one; each `Unverified` with the served tag untouched, beside a run Chains signed a
//! moment after `promote` began (waited for, then promoted).

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::chains::{Key, key, ran};
use crate::support::controller::{B, C, Setup, VALIDATED_B, reason, result};
use crate::support::tekton::{PipelineRunStandIn, resource};
use crate::support::upstream::install_released_pipelinerun_crds;

fn task_runs(s: &Setup) -> Api<DynamicObject> {
    let r: ApiResource = resource("TaskRun", "taskruns");
    Api::namespaced_with(s.client.clone(), "ds", &r)
}

async fn sign(s: &Setup, name: &str, uid: &str, statement: &Value, key: &Key) {
    crate::support::chains::sign(&task_runs(s), name, uid, statement, key).await;
}

async fn record(s: &Setup, name: &str) -> (String, Value) {
    crate::support::chains::record(&task_runs(s), name).await
}

/// A PipelineRun `name` whose `validate` TaskRun validated `image` and whose `promote` child
/// asks to promote B; returns the stand-in and the TaskRun's name.
async fn validated(s: &Setup, name: &str, image: &str) -> (PipelineRunStandIn, String) {
    let mut pr = PipelineRunStandIn::create(&s.client, "ds", name, "imagegate-promote").await;
    let task_run = pr
        .task_run_that_ran("validate", Some(image), true, Some(ran(image)))
        .await;
    (pr, task_run)
}

async fn promote(s: &Setup, pr: &mut PipelineRunStandIn) -> String {
    let name = format!("{}-promote", pr.name);
    let mut extra = json!({"spec": {"customRef": {"name": "gov"}}});
    json_patch::merge(&mut extra, &pr.child_metadata("promote"));
    s.create_run(&name, VALIDATED_B, extra).await;
    pr.list_custom_run(&name, "promote").await;
    name
}

#[tokio::test]
async fn only_a_record_chains_signed_for_this_validation_of_this_candidate_proves_it() {
    let s = Setup::new().await;
    install_released_pipelinerun_crds(s.client.clone()).await;
    let (chains, runner) = (key(), key());
    s.emu
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "chains-keys", "namespace": "imagegate-system"},
            "data": {"cosign.pub": chains.pem}}))
        .await;
    s.emu
        .seed(
            json!({"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion",
            "metadata": {"name": "gov", "namespace": "ds"},
            "spec": {"imageStream": "nb", "validation": {"pipeline": "imagegate-promote",
                "tasks": ["validate"], "chains": {"keys": [{"name": "chains",
                    "configMapKeyRef": {"name": "chains-keys", "key": "cosign.pub"}}]}}}}),
        )
        .await;
    let repo = s.stream().await.status.unwrap().docker_image_repository;
    let (b, c) = (format!("{repo}@{B}"), format!("{repo}@{C}"));
    let before = s.served_tag().await;

    // The runner marks the TaskRun signed before Chains gets to it: Chains skips it.
    let (mut pr, tr) = validated(&s, "marked", &b).await;
    let mark = json!({"metadata": {"annotations": {"chains.tekton.dev/signed": "true"}}});
    task_runs(&s)
        .patch(&tr, &PatchParams::default(), &Patch::Merge(&mark))
        .await
        .unwrap();
    let marked = promote(&s, &mut pr).await;
    // The runner signs the record of their validation with their own key.
    let (mut pr, tr) = validated(&s, "own-key", &b).await;
    let (uid, statement) = record(&s, &tr).await;
    sign(&s, &tr, &uid, &statement, &runner).await;
    let own_key = promote(&s, &mut pr).await;
    // A record Chains signed for a validation of C, copied onto a TaskRun that says it
    // validated B (same annotation key: the uid of the TaskRun it is copied onto).
    let (_, of_c) = validated(&s, "of-c", &c).await;
    let (_, statement_of_c) = record(&s, &of_c).await;
    let (mut pr, tr) = validated(&s, "copied", &b).await;
    let (uid, _) = record(&s, &tr).await;
    let mut moved = statement_of_c.clone();
    // Moved to this PipelineRun's labels too, so only the digest gives it away.
    moved["predicate"]["invocation"]["environment"] =
        statement.clone()["predicate"]["invocation"]["environment"].clone();
    moved["predicate"]["invocation"]["environment"]["labels"]["tekton.dev/pipelineRunUID"] =
        json!(pr.uid);
    moved["predicate"]["invocation"]["environment"]["labels"]["tekton.dev/pipelineRun"] =
        json!(pr.name);
    sign(&s, &tr, &uid, &moved, &chains).await;
    let copied = promote(&s, &mut pr).await;
    for (run, want) in [
        (
            &marked,
            "carries no signature for its own uid: Chains could not make its record (its log says why), or whoever set the mark kept Chains from signing it",
        ),
        (&own_key, "is signed by none of the Chains keys (chains)"),
        (&copied, &format!("validated {:?}, not {B}", c)),
    ] {
        let done = s.done(run).await;
        assert_eq!(
            reason(&done),
            ("False".into(), "Unverified".into()),
            "{run}"
        );
        let message = s.message(run).await;
        assert!(message.contains(want), "{run}: {want:?} not in {message:?}");
    }
    s.assert_served_untouched(&before).await;

    // A validation Chains signs a moment after promote began: waited for, then promoted.
    let (mut pr, tr) = validated(&s, "signed", &b).await;
    let run = promote(&s, &mut pr).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(
        !s.runs().get(&run).await.unwrap().is_done(),
        "promote waits for Chains"
    );
    let (uid, statement) = record(&s, &tr).await;
    sign(&s, &tr, &uid, &statement, &chains).await;
    let done = s.done(&run).await;
    assert_eq!(
        reason(&done),
        ("True".into(), "Promoted".into()),
        "{:?}",
        done.status
    );
    // The checks result names the key the record was signed by.
    let checks: Value = serde_json::from_str(&result(&done, "checks")).unwrap();
    assert_eq!(checks[0]["name"], "chains", "{checks}");
    assert_eq!(checks[0]["passed"], true, "{checks}");
    let said = checks[0]["message"].as_str().unwrap();
    assert!(
        said.ends_with(
            r#"signed by Tekton Chains: task "validate" (TaskRun "signed-validate") by "chains""#
        ),
        "{said}"
    );
}
