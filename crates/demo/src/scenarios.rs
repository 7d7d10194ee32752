//! The demo's scenarios, played in turn on the [`World`]: each imports a candidate (or starts a
//! PipelineRun by hand) and says what every stream must end with, which [`check`] compares with
//! the final table.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::pipeline;
use super::tekton::str_at;
use super::{NAMESPACE, Plan, Row, World, digest, outcome_line};

/// What a scenario must end with.
pub struct Expect {
    imagestream: &'static str,
    served: String,
    phase: &'static str,
}

impl Expect {
    /// `imagestream` must end serving `served` with phase `phase`.
    pub fn new(imagestream: &'static str, served: String, phase: &'static str) -> Expect {
        Expect {
            imagestream,
            served,
            phase,
        }
    }

    /// Whether this is what `imagestream` must end with.
    pub fn is(&self, imagestream: &str) -> bool {
        self.imagestream == imagestream
    }
}

/// Plays the scenarios; what each stream must end with, and how many scenarios were played.
pub async fn play(w: &World) -> anyhow::Result<(Vec<Expect>, usize)> {
    let mut played = 0;
    let mut expect = Vec::new();

    played += 1;
    w.timeline.heading(
        "1. A new build of jupyter-minimal-notebook passes validation and is promoted \
         (the EventListener restarts during the first delivery: the source retries, same id)",
    );
    let minimal_new = digest('3');
    w.listener.fail_next(1);
    w.promote_through_the_pipeline("jupyter-minimal-notebook", &minimal_new, false)
        .await?;
    expect.push(Expect {
        imagestream: "jupyter-minimal-notebook",
        served: minimal_new.clone(),
        phase: "Promoted",
    });

    played += 1;
    w.timeline.heading(
        "2. A new build of jupyter-datascience-notebook runs as root: the nonRootUser check fails, \
         users keep the old image",
    );
    let ds_new = digest('4');
    w.promote_through_the_pipeline("jupyter-datascience-notebook", &ds_new, true)
        .await?;
    expect.push(Expect {
        imagestream: "jupyter-datascience-notebook",
        served: digest('2'),
        phase: "UpdateFailed",
    });

    played += 1;
    w.timeline.heading(
        "3. A new build of jupyter-trustyai-notebook fails the smoke test: the pipeline rejects it; \
         a hand-made run claiming it passed is refused",
    );
    let trusty_new = digest('9');
    w.smoke.plan(
        &trusty_new,
        Plan::Fail("exit 127: /bin/sh: line 1: jupyter: command not found"),
    );
    w.promote_through_the_pipeline("jupyter-trustyai-notebook", &trusty_new, false)
        .await?;
    expect.push(Expect {
        imagestream: "jupyter-trustyai-notebook",
        served: digest('8'),
        phase: "UpdateFailed",
    });
    walk_around(w, "jupyter-trustyai-notebook", &trusty_new).await?;

    played += 1;
    w.timeline.heading(
        "4. jupyter-pytorch-notebook's candidate moves faster than validation: the older \
         build, validated first, is promoted all the same (the served tag never waits on a \
         candidate that keeps moving), then the newer one",
    );
    let (older, newer) = (digest('6'), digest('7'));
    let release_older = Arc::new(Notify::new());
    let release_newer = Arc::new(Notify::new());
    w.smoke.plan(&older, Plan::PassAfter(release_older.clone()));
    w.smoke.plan(&newer, Plan::PassAfter(release_newer.clone()));
    w.import("jupyter-pytorch-notebook", &older, false)?;
    w.wait_task(&older, "begin").await?;
    w.import("jupyter-pytorch-notebook", &newer, false)?;
    w.wait_task(&newer, "begin").await?;
    release_older.notify_one();
    let run = w.wait_run("jupyter-pytorch-notebook", &older).await?;
    outcome_line(w, &run);
    release_newer.notify_one();
    let run = w.wait_run("jupyter-pytorch-notebook", &newer).await?;
    outcome_line(w, &run);
    expect.push(Expect {
        imagestream: "jupyter-pytorch-notebook",
        served: newer.clone(),
        phase: "Promoted",
    });

    played += 1;
    w.timeline.heading(
        "5. A platform engineer rolls jupyter-minimal-notebook back (tekton/500-rollback-pipelinerun.yaml)",
    );
    // The example is created as a user would: with `imagestream` set to the stream to roll back.
    let mut rollback = w.files.single("PipelineRun")?.clone();
    let params = rollback
        .pointer_mut("/spec/params")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| anyhow!("the rollback PipelineRun has no params"))?;
    params.retain(|p| p["name"] != "imagestream");
    params.push(json!({"name": "imagestream", "value": "jupyter-minimal-notebook"}));
    let name = match w.runner.start(rollback)? {
        pipeline::Created::Started(n) | pipeline::Created::AlreadyExists(n) => n,
    };
    w.timeline.line(
        "kubectl",
        format!("create -f tekton/500-rollback-pipelinerun.yaml -> PipelineRun {name}"),
    );
    let run = w
        .runner
        .wait_done("the rollback", Duration::from_secs(20), |r| r.name == name)
        .await?;
    outcome_line(w, &run);
    if let Some(e) = expect
        .iter_mut()
        .find(|e| e.imagestream == "jupyter-minimal-notebook")
    {
        e.served = digest('1');
        e.phase = "RolledBack";
    }
    played += 1;
    forbidden(w).await?;
    Ok((expect, played))
}

/// The name of the hand-made CustomRun of scenario 3 ([`walk_around_run`]).
pub const WALK_AROUND: &str = "by-hand-inline";

/// What someone who may create CustomRuns in the namespace makes to walk around the gate right
/// after a build failed validation: a CustomRun with an inline spec that asks for nothing
/// (`spec: {}`), as the pipeline's own service account, claiming the rejected `digest` of
/// `stream` succeeded. The ImagePromotion `notebooks` governs every stream of the namespace, so
/// the run is held to its proof, which no hand-made run can give: `Unverified`, nothing written.
pub fn walk_around_run(stream: &str, digest: &str, service_account: &str) -> Value {
    json!({
        "apiVersion": "tekton.dev/v1beta1", "kind": "CustomRun",
        "metadata": {"name": WALK_AROUND, "namespace": NAMESPACE},
        "spec": {
            "customSpec": {"apiVersion": "imagegate.dev/v1alpha1", "kind": "ImagePromotion", "spec": {}},
            "serviceAccountName": service_account,
            "params": [
                {"name": "imagestream", "value": stream},
                {"name": "digest", "value": digest},
                {"name": "action", "value": "promote"},
                {"name": "validation-status", "value": "Succeeded"},
            ],
        },
    })
}

/// The timeline's line for creating [`walk_around_run`].
pub fn walk_around_line(stream: &str, digest: &str, service_account: &str) -> String {
    format!(
        "create CustomRun {WALK_AROUND} as {service_account}: an inline spec that asks for nothing \
         and validation-status Succeeded, to promote {stream}@{}, which was just rejected",
        crate::timeline::short_digest(digest)
    )
}

/// Fails unless the hand-made run ended `Unverified` (the governing ImagePromotion's proof).
pub fn walk_around_refused(reason: &str, message: &str) -> anyhow::Result<()> {
    if reason == "Unverified" && message.contains("ImagePromotion \"notebooks\" governs") {
        Ok(())
    } else {
        bail!(
            "the hand-made inline run should have been refused Unverified, not {reason}: {message}"
        )
    }
}

/// 3, after the rejection: the hand-made inline run of [`walk_around_run`], created through the
/// API as kubectl would.
async fn walk_around(w: &World, stream: &str, digest: &str) -> anyhow::Result<()> {
    let template = w.files.single("TriggerTemplate")?;
    let account = str_at(
        template,
        "/spec/resourcetemplates/0/spec/taskRunTemplate/serviceAccountName",
    )?;
    let run: imagegate::api::CustomRun =
        serde_json::from_value(walk_around_run(stream, digest, account))?;
    let runs: kube::Api<imagegate::api::CustomRun> =
        kube::Api::namespaced(w.admin.clone(), NAMESPACE);
    runs.create(&kube::api::PostParams::default(), &run).await?;
    w.timeline
        .line("kubectl", walk_around_line(stream, digest, account));
    let done = kube::runtime::wait::await_condition(
        runs,
        WALK_AROUND,
        |r: Option<&imagegate::api::CustomRun>| r.is_some_and(imagegate::api::CustomRun::is_done),
    );
    let finished = tokio::time::timeout(Duration::from_secs(20), done)
        .await
        .map_err(|_| anyhow!("CustomRun {WALK_AROUND} did not finish within 20 s"))??
        .ok_or_else(|| anyhow!("CustomRun {WALK_AROUND} was deleted"))?;
    let c = finished.succeeded_condition().cloned().unwrap_or_default();
    let (reason, message) = (c.reason.unwrap_or_default(), c.message.unwrap_or_default());
    w.timeline.line(
        "controller",
        format!("{WALK_AROUND}: FAILED ({reason}): {message}"),
    );
    walk_around_refused(&reason, &message)
}

/// 6: a PipelineRun of the promote Pipeline started by hand, without the TriggerTemplate's
/// `taskRunTemplate`, runs as the namespace's `default` service account, which holds no
/// `promote`: the controller asks the API server, `begin` ends Forbidden and nothing is written
/// (jupyter-datascience-notebook keeps what scenario 2 left).
async fn forbidden(w: &World) -> anyhow::Result<()> {
    w.timeline.heading(
        "6. Someone starts the pipeline by hand for jupyter-datascience-notebook's root build, \
         as the namespace's default service account: it may not promote, nothing moves",
    );
    let template = w.files.single("TriggerTemplate")?;
    let pipeline = str_at(template, "/spec/resourcetemplates/0/spec/pipelineRef/name")?;
    let by_hand = json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"generateName": "by-hand-"},
        "spec": {
            "pipelineRef": {"name": pipeline},
            "params": [
                {"name": "imagestream", "value": format!("{NAMESPACE}/jupyter-datascience-notebook")},
                {"name": "digest", "value": digest('4')},
            ],
        },
    });
    let name = match w.runner.start(by_hand)? {
        pipeline::Created::Started(n) | pipeline::Created::AlreadyExists(n) => n,
    };
    w.timeline.line(
        "kubectl",
        format!("create PipelineRun {name} of {pipeline}, with no serviceAccountName: it runs as `default`"),
    );
    let run = w
        .runner
        .wait_done("the run by hand", Duration::from_secs(20), |r| {
            r.name == name
        })
        .await?;
    outcome_line(w, &run);
    match run.tasks.iter().find(|(t, _)| t == "begin") {
        Some((_, begin)) if begin.reason == "Forbidden" => Ok(()),
        other => bail!("the run by hand should have ended Forbidden at begin, not {other:?}"),
    }
}

/// Whether every stream ended as its scenario expects.
pub fn check(rows: &[Row], expect: &[Expect]) -> anyhow::Result<()> {
    let mut wrong = Vec::new();
    for e in expect {
        match rows.iter().find(|r| r.imagestream == e.imagestream) {
            Some(r) if r.served == e.served && r.phase == e.phase => {}
            Some(r) => wrong.push(format!(
                "{} serves {} ({}), expected {} ({})",
                e.imagestream, r.served, r.phase, e.served, e.phase
            )),
            None => wrong.push(format!("{} is gone", e.imagestream)),
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        bail!(
            "the demo ended differently than expected: {}",
            wrong.join("; ")
        )
    }
}
