//! `imagegate pin PIPELINERUN`: the pins of what a PipelineRun's tasks ran, as Tekton recorded
//! it ([`crate::controller::proof::pin`]), printed as the `validation.pins` block of an
//! ImagePromotion. Pin a run that validated as it should (a known-good candidate, the Tasks as
//! the platform team wrote them): the controller then holds every later run to that content.
//! Only reads.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use kube::api::Api;

use crate::api::{PipelineRun, TaskRun};
use crate::cli::ops::PinArgs;
use crate::controller::proof::pin;

use super::{Verdict, connect};

/// Reads the PipelineRun and its TaskRuns and prints their pins.
pub(crate) async fn run(args: PinArgs) -> anyhow::Result<Verdict> {
    let (client, default_ns) = connect::client(&args.kube).await?;
    let (ns, name) = match args.pipelinerun.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (
            args.kube.namespace.clone().unwrap_or(default_ns),
            args.pipelinerun.clone(),
        ),
    };
    let runs: Api<PipelineRun> = Api::namespaced(client.clone(), &ns);
    let pr = runs
        .get(&name)
        .await
        .with_context(|| format!("cannot read PipelineRun {ns}/{name}"))?;
    let task_runs: Api<TaskRun> = Api::namespaced(client, &ns);
    let mut pins = BTreeMap::new();
    for child in pr.status.iter().flat_map(|s| &s.child_references) {
        let wanted = args.tasks.is_empty() || args.tasks.contains(&child.pipeline_task_name);
        if child.kind.as_deref() != Some("TaskRun") || !wanted {
            continue;
        }
        let run = task_runs
            .get(&child.name)
            .await
            .with_context(|| format!("cannot read TaskRun {ns}/{}", child.name))?;
        let ran = pin::of_task_run(&run)
            .map_err(|why| anyhow::anyhow!("TaskRun {ns}/{}: {why}", child.name))?;
        if pins
            .insert(child.pipeline_task_name.clone(), ran.clone())
            .is_some_and(|p| p != ran)
        {
            bail!(
                "task {:?} ran two different contents in PipelineRun {ns}/{name} (a matrix?): pin \
                 one run per task",
                child.pipeline_task_name
            );
        }
    }
    if pins.is_empty() {
        bail!("PipelineRun {ns}/{name} has no TaskRun to pin (of the tasks asked)");
    }
    print!("{}", render(&pins));
    Ok(Verdict::Done)
}

/// The `validation.pins` block for `pins` (task -> pin).
pub(crate) fn render(pins: &BTreeMap<String, String>) -> String {
    let mut out = String::from("validation:\n  pins:\n");
    for (task, pin) in pins {
        out.push_str(&format!("    {task}: {pin}\n"));
    }
    out
}
