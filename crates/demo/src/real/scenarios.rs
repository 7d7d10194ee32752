//! The real demo's scenarios: the first six of `imagegate demo` (crates/demo/src/scenarios.rs), then
//! the Knative route ([`super::knative`]), the re-drive ([`super::redrive`]) and the publisher's
//! signature ([`super::signature`]), each
//! started the way a user would start it on a cluster (a scheduled import of the candidate, or a
//! PipelineRun created with kubectl), the rest done by the real programs, and the end compared
//! with what the scenario expects. Each is timed end to end, with imagegate's share read from the
//! programs' own metrics.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use serde_json::{Value, json};

use super::observe::{finished, run_for, succeeded, task_of};
use super::stages;
use super::{NAMESPACE, World};
use crate::digest;
use crate::scenarios::{self, Expect};
use crate::timeline::short_digest;

/// How long a scenario may take on a busy machine before the demo gives up on it.
const LIMIT: Duration = Duration::from_secs(120);

/// One scenario's time: end to end, and what the source (from the watch event to the
/// EventListener's 2xx) and the controller (inside its reconciles) spent of it.
pub struct Timing {
    /// The scenario's number.
    pub number: usize,
    /// Import (or `kubectl create`) to the last PipelineRun's end.
    pub total: Duration,
    /// `imagegate_source_delivery_latency_seconds`, summed over the scenario's deliveries.
    pub source: f64,
    /// `imagegate_controller_reconcile_duration_seconds`, summed over the scenario's reconciles.
    pub controller: f64,
}

/// Plays the scenarios; what each stream must end with, and each scenario's time.
pub async fn play(w: &mut World) -> anyhow::Result<(Vec<Expect>, Vec<Timing>)> {
    let mut expect = Vec::new();
    let mut timings = Vec::new();

    w.timeline
        .heading("1. A new build of jupyter-minimal-notebook passes validation and is promoted");
    let minimal_new = digest('3');
    let t = w.timed(1).await?;
    let run = w
        .promote("jupyter-minimal-notebook", &minimal_new, false)
        .await?;
    timings.push(w.done_timing(t).await?);
    want_task(w, &run, "promote", "True")?;
    expect.push(Expect::new(
        "jupyter-minimal-notebook",
        minimal_new,
        "Promoted",
    ));
    validation_runs_powerless(w, &run).await?;

    w.timeline.heading(
        "2. A new build of jupyter-datascience-notebook runs as root: the nonRootUser check fails, \
         users keep the old image",
    );
    let t = w.timed(2).await?;
    let run = w
        .promote("jupyter-datascience-notebook", &digest('4'), true)
        .await?;
    timings.push(w.done_timing(t).await?);
    // begin marks the tag Validating; the checks run at promote, after the smoke test.
    want_task(w, &run, "promote", "False")?;
    expect.push(Expect::new(
        "jupyter-datascience-notebook",
        digest('2'),
        "UpdateFailed",
    ));

    w.timeline.heading(
        "3. A new build of jupyter-trustyai-notebook fails the smoke test: the pipeline rejects it; \
         a hand-made run claiming it passed is refused",
    );
    let trusty_new = digest('9');
    // The smoke test of this build exits 127, as `jupyter: command not found` would.
    w.apply_stage(stages::fail(&trusty_new, 127)?).await?;
    let t = w.timed(3).await?;
    let run = w
        .promote("jupyter-trustyai-notebook", &trusty_new, false)
        .await?;
    timings.push(w.done_timing(t).await?);
    want_task(w, &run, "validate", "False")?;
    // A reject run ends False (Rejected) by design: the rejection is its outcome.
    want_task(w, &run, "reject", "False")?;
    expect.push(Expect::new(
        "jupyter-trustyai-notebook",
        digest('8'),
        "UpdateFailed",
    ));
    walk_around(w, "jupyter-trustyai-notebook", &trusty_new).await?;

    w.timeline.heading(
        "4. jupyter-pytorch-notebook's candidate moves faster than validation: the older \
         build, validated first, is promoted all the same (the served tag never waits on a \
         candidate that keeps moving), then the newer one",
    );
    let stream = "jupyter-pytorch-notebook";
    let (older, newer) = (digest('6'), digest('7'));
    w.apply_stage(stages::hold(&older)?).await?;
    w.apply_stage(stages::hold(&newer)?).await?;
    let t = w.timed(4).await?;
    w.import(stream, &older, false).await?;
    let older_run = w.held_validation(stream, &older).await?;
    w.import(stream, &newer, false).await?;
    let newer_run = w.held_validation(stream, &newer).await?;
    w.release(&older_run).await?;
    let older_done = w.run_done(&older_run).await?;
    w.release(&newer_run).await?;
    let newer_done = w.run_done(&newer_run).await?;
    timings.push(w.done_timing(t).await?);
    want_task(w, &older_done, "promote", "True")?;
    want_task(w, &newer_done, "promote", "True")?;
    expect.push(Expect::new(stream, newer, "Promoted"));

    w.timeline.heading(
        "5. A platform engineer rolls jupyter-minimal-notebook back (tekton/500-rollback-pipelinerun.yaml)",
    );
    let t = w.timed(5).await?;
    let file = w.root.join("tekton/500-rollback-pipelinerun.yaml");
    let created = w
        .cluster
        .kubectl(&[
            "create",
            "-n",
            NAMESPACE,
            "-f",
            &file.to_string_lossy(),
            "-o",
            "name",
        ])
        .await?;
    let name = created
        .trim()
        .trim_start_matches("pipelinerun.tekton.dev/")
        .to_string();
    w.timeline.line(
        "kubectl",
        format!("create -f tekton/500-rollback-pipelinerun.yaml -> PipelineRun {name}"),
    );
    w.run_done(&name).await?;
    timings.push(w.done_timing(t).await?);
    if let Some(e) = expect.iter_mut().find(|e| e.is("jupyter-minimal-notebook")) {
        *e = Expect::new("jupyter-minimal-notebook", digest('1'), "RolledBack");
    }

    let t = w.timed(6).await?;
    forbidden(w).await?;
    timings.push(w.done_timing(t).await?);

    validations_ran_one_content(w)?;
    timings.push(super::knative::play(w, &mut expect).await?);
    timings.push(super::redrive::play(w, &mut expect).await?);
    timings.push(super::signature::play(&mut *w, &mut expect).await?);
    timings.push(super::push::play(&mut *w, &mut expect).await?);
    timings.push(super::scheduled::play(&mut *w, &mut expect).await?);
    Ok((expect, timings))
}

/// The pod that ran the candidate in PipelineRun `run` (its `validate` task) ran as
/// `imagegate-validation` with no service-account token, while the run's `promote` CustomRun
/// carried `imagegate-pipeline`: the candidate never holds the promoter's power.
async fn validation_runs_powerless(w: &World, run: &Value) -> anyhow::Result<()> {
    let name = run["metadata"]["name"].as_str().unwrap_or("");
    let selector = format!("tekton.dev/pipelineRun={name},tekton.dev/pipelineTask=validate");
    let pods = w
        .cluster
        .kubectl(&[
            "get", "pods", "-n", NAMESPACE, "-l", &selector, "-o", "json",
        ])
        .await?;
    let pods: Value = serde_json::from_str(&pods)?;
    let pod = pods["items"]
        .get(0)
        .ok_or_else(|| anyhow!("no pod of {name}'s validate task"))?;
    let spec = &pod["spec"];
    let tokens = spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| {
            v["projected"]["sources"]
                .as_array()
                .is_some_and(|s| s.iter().any(|p| p.get("serviceAccountToken").is_some()))
        })
        .count();
    if spec["serviceAccountName"] != "imagegate-validation"
        || spec["automountServiceAccountToken"] != false
        || tokens != 0
    {
        bail!(
            "{name}'s validate pod should run as imagegate-validation with no token: \
             serviceAccountName {}, automountServiceAccountToken {}, {tokens} token volume(s)",
            spec["serviceAccountName"],
            spec["automountServiceAccountToken"]
        );
    }
    let promote = w
        .observer
        .find("CustomRun", |c| task_of(c, name, "promote"))
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("{name} made no promote CustomRun"))?;
    if promote["spec"]["serviceAccountName"] != "imagegate-pipeline" {
        bail!("{name}'s promote should carry imagegate-pipeline: {promote:#}");
    }
    w.timeline.line(
        "kubectl",
        format!(
            "{name}: the validate pod ran as imagegate-validation with no service-account token; \
             promote carried imagegate-pipeline"
        ),
    );
    Ok(())
}

/// Every `validate` TaskRun the real Tekton ran in scenarios 1 to 6, each on another candidate,
/// recorded one content: the same pin ([`imagegate::controller::proof::pin`]), which the
/// timeline prints (what `imagegate pin` prints for any of these runs). With
/// `IMAGEGATE_REALDEMO_DUMP_TASKSPEC` set to a path, the first recorded spec is written there.
fn validations_ran_one_content(w: &World) -> anyhow::Result<()> {
    let runs = w.observer.find("TaskRun", |t| {
        t["metadata"]["labels"]["tekton.dev/pipelineTask"] == "validate"
    });
    let mut pins = std::collections::BTreeMap::new();
    for run in &runs {
        let run: imagegate::api::TaskRun = serde_json::from_value(run.clone())?;
        let name = run.metadata.name.clone().unwrap_or_default();
        let pin = imagegate::controller::proof::pin::of_task_run(&run)
            .map_err(|why| anyhow!("TaskRun {name}: {why}"))?;
        if let (Ok(path), Some(spec)) = (
            std::env::var("IMAGEGATE_REALDEMO_DUMP_TASKSPEC"),
            run.status.as_ref().and_then(|s| s.task_spec.as_ref()),
        ) {
            std::fs::write(path, serde_json::to_string_pretty(spec)?)?;
        }
        pins.insert(name, pin);
    }
    let distinct: std::collections::BTreeSet<&String> = pins.values().collect();
    if runs.len() < 2 || distinct.len() != 1 {
        bail!("the validate TaskRuns should have run one content, found {pins:?}");
    }
    w.timeline.line(
        "kubectl",
        format!(
            "the {} validate TaskRuns, each on another candidate, ran one content: pin {}",
            runs.len(),
            distinct
                .into_iter()
                .next()
                .map(String::as_str)
                .unwrap_or("")
        ),
    );
    Ok(())
}

/// 3, after the rejection: the hand-made inline run of [`scenarios::walk_around_run`], created
/// with kubectl as the pipeline's service account (`tekton/420`'s `taskRunTemplate`).
async fn walk_around(w: &World, stream: &str, digest: &str) -> anyhow::Result<()> {
    let account = "imagegate-pipeline";
    let run = scenarios::walk_around_run(stream, digest, account);
    w.cluster
        .kubectl_in(&["create", "-n", NAMESPACE, "-f", "-"], &run.to_string())
        .await?;
    w.timeline.line(
        "kubectl",
        scenarios::walk_around_line(stream, digest, account),
    );
    let name = scenarios::WALK_AROUND;
    let done = w
        .observer
        .wait(
            &format!("the end of CustomRun {name}"),
            "CustomRun",
            LIMIT,
            |c| c["metadata"]["name"] == name && finished(c),
        )
        .await?;
    let (_, reason, message) = succeeded(&done).unwrap_or(("", "", ""));
    w.timeline.line(
        "controller",
        format!("{name}: FAILED ({reason}): {message}"),
    );
    scenarios::walk_around_refused(reason, message)
}

/// 6: the promote Pipeline started by hand without the TriggerTemplate's `taskRunTemplate` runs
/// as the namespace's `default` account, which may not promote: `begin` ends Forbidden.
async fn forbidden(w: &World) -> anyhow::Result<()> {
    w.timeline.heading(
        "6. Someone starts the pipeline by hand for jupyter-datascience-notebook's root build, \
         as the namespace's default service account: it may not promote, nothing moves",
    );
    let by_hand = json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"generateName": "by-hand-"},
        "spec": {
            "pipelineRef": {"name": "imagegate-promote"},
            "params": [
                {"name": "imagestream", "value": format!("{NAMESPACE}/jupyter-datascience-notebook")},
                {"name": "digest", "value": digest('4')},
            ],
        },
    });
    let created = w
        .cluster
        .kubectl_in(
            &["create", "-n", NAMESPACE, "-f", "-", "-o", "name"],
            &by_hand.to_string(),
        )
        .await?;
    let name = created
        .trim()
        .trim_start_matches("pipelinerun.tekton.dev/")
        .to_string();
    w.timeline.line(
        "kubectl",
        format!("create PipelineRun {name} of imagegate-promote, with no serviceAccountName: it runs as `default`"),
    );
    let run = w.run_done(&name).await?;
    let begin = w
        .observer
        .find("CustomRun", |c| task_of(c, &name, "begin"))
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the run by hand made no begin CustomRun: {run:#}"))?;
    match succeeded(&begin) {
        Some(("False", "Forbidden", _)) => Ok(()),
        other => bail!("the run by hand should have ended Forbidden at begin, not {other:?}"),
    }
}

/// Fails unless `task` of the finished PipelineRun `run` ended with `status`.
pub(super) fn want_task(w: &World, run: &Value, task: &str, status: &str) -> anyhow::Result<()> {
    let name = run["metadata"]["name"].as_str().unwrap_or("");
    let ended = w
        .observer
        .find("CustomRun", |c| task_of(c, name, task))
        .into_iter()
        .chain(w.observer.find("TaskRun", |t| task_of(t, name, task)))
        .next();
    match ended.as_ref().and_then(|o| succeeded(o)) {
        Some((s, _, _)) if s == status => Ok(()),
        other => bail!("{name}: {task} should have ended {status}, not {other:?}"),
    }
}

impl World {
    /// A scheduled import of `digest` into the candidate tag, then the PipelineRun it starts, to
    /// its end.
    pub(super) async fn promote(
        &self,
        stream: &str,
        digest: &str,
        root: bool,
    ) -> anyhow::Result<Value> {
        self.import(stream, digest, root).await?;
        let run = self.triggered(stream, digest).await?;
        self.run_done(&run).await
    }

    /// The name of the PipelineRun the EventListener made for `digest` of `stream`.
    pub(super) async fn triggered(&self, stream: &str, digest: &str) -> anyhow::Result<String> {
        let is = format!("{NAMESPACE}/{stream}");
        let run = self
            .observer
            .wait(
                &format!("a PipelineRun for {is}@{}", short_digest(digest)),
                "PipelineRun",
                LIMIT,
                |r| run_for(r, &is, digest),
            )
            .await?;
        Ok(run["metadata"]["name"].as_str().unwrap_or("").to_string())
    }

    /// Waits until PipelineRun `name` has finished.
    pub(super) async fn run_done(&self, name: &str) -> anyhow::Result<Value> {
        self.observer
            .wait(
                &format!("the end of PipelineRun {name}"),
                "PipelineRun",
                LIMIT,
                |r| r["metadata"]["name"] == name && finished(r),
            )
            .await
    }

    /// Waits until the run for `digest` has its validation pod Running under a hold Stage; the
    /// run's name.
    async fn held_validation(&self, stream: &str, digest: &str) -> anyhow::Result<String> {
        let run = self.triggered(stream, digest).await?;
        let taskrun = self
            .observer
            .wait(
                &format!("the validate TaskRun of {run}"),
                "TaskRun",
                LIMIT,
                |t| task_of(t, &run, "validate") && t["status"]["podName"].is_string(),
            )
            .await?;
        let pod = taskrun["status"]["podName"]
            .as_str()
            .unwrap_or("")
            .to_string();
        super::cluster::until(&format!("pod {pod} Running"), LIMIT, || async {
            let phase = self
                .cluster
                .kubectl(&[
                    "get",
                    "pod",
                    "-n",
                    NAMESPACE,
                    &pod,
                    "-o",
                    "jsonpath={.status.phase}",
                ])
                .await?;
            Ok((phase == "Running").then_some(()))
        })
        .await?;
        self.timeline.line(
            "kwok",
            format!("holds pod {pod} of {run} validate Running (the smoke test is still running)"),
        );
        Ok(run)
    }

    /// Releases the held validation of PipelineRun `run`: kwok then ends its pod.
    async fn release(&self, run: &str) -> anyhow::Result<()> {
        let taskrun = self
            .observer
            .find("TaskRun", |t| task_of(t, run, "validate"))
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("{run} has no validate TaskRun"))?;
        let pod = taskrun["status"]["podName"].as_str().unwrap_or("");
        self.cluster
            .kubectl(&[
                "annotate",
                "pod",
                "-n",
                NAMESPACE,
                pod,
                &format!("{}=true", stages::RELEASE),
            ])
            .await?;
        self.timeline.line(
            "kwok",
            format!("releases pod {pod}: the smoke test ends (exit 0)"),
        );
        Ok(())
    }

    /// Starts timing scenario `number`.
    pub(super) async fn timed(&self, number: usize) -> anyhow::Result<(usize, Instant, f64, f64)> {
        let (source, controller) = self.spent().await?;
        Ok((number, Instant::now(), source, controller))
    }

    /// Ends timing a scenario.
    pub(super) async fn done_timing(
        &self,
        t: (usize, Instant, f64, f64),
    ) -> anyhow::Result<Timing> {
        let total = t.1.elapsed();
        let (source, controller) = self.spent().await?;
        Ok(Timing {
            number: t.0,
            total,
            source: source - t.2,
            controller: controller - t.3,
        })
    }
}
