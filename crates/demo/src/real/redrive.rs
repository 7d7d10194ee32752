//! Scenario 8: Tekton Triggers takes a change but cannot create its PipelineRun (a ResourceQuota
//! of zero PipelineRuns in the namespace; the listener answers 202 all the same, so the source
//! acknowledges it). Nothing else would ever validate that candidate: the controller's ledger
//! sees no validation begin within its grace period and makes the PipelineRun again from the
//! TriggerTemplate (`tekton/100`'s `redrive`, `tekton/320`'s Role) once the quota is lifted; the
//! candidate is validated and promoted without a new import.

use std::time::Duration;

use anyhow::{anyhow, bail};
use imagegate::api::ImageStream;
use kube::Api;

use super::observe::run_for;
use super::scenarios::{Timing, want_task};
use super::{NAMESPACE, World};
use crate::digest;
use crate::scenarios::Expect;

const LIMIT: Duration = Duration::from_secs(120);
const STREAM: &str = "jupyter-pytorch-notebook";
const QUOTA: &str = "no-pipelineruns";
/// What the source's delivery latency histogram sums to: it grows with each 2xx of the sink.
const DELIVERED: &str = "imagegate_source_delivery_latency_seconds";

pub(super) async fn play(w: &World, expect: &mut [Expect]) -> anyhow::Result<Timing> {
    w.timeline.heading(
        "8. Tekton Triggers takes a change of jupyter-pytorch-notebook but cannot create its \
         PipelineRun (a ResourceQuota of zero PipelineRuns): the controller re-drives it once the \
         quota is lifted, and the build is promoted without a new import",
    );
    let t = w.timed(8).await?;
    let d = digest('c');
    w.cluster
        .kubectl(&[
            "create",
            "quota",
            QUOTA,
            "-n",
            NAMESPACE,
            "--hard=count/pipelineruns.tekton.dev=0",
        ])
        .await?;
    // Quota admission enforces what the quota's status says (`status.hard`, `status.used`),
    // which kube-controller-manager's quota controller writes; this cluster runs none, so the
    // status is written as it would write it. Admission sees the quota through its informer:
    // wait until a PipelineRun is refused (a dry run, which creates nothing).
    let status = serde_json::json!({"status": {
        "hard": {"count/pipelineruns.tekton.dev": "0"},
        "used": {"count/pipelineruns.tekton.dev": "0"},
    }})
    .to_string();
    w.cluster
        .kubectl(&[
            "patch",
            "resourcequota",
            QUOTA,
            "-n",
            NAMESPACE,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ])
        .await?;
    let probe = serde_json::json!({
        "apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
        "metadata": {"name": "quota-probe"},
        "spec": {"pipelineRef": {"name": "imagegate-promote"}},
    })
    .to_string();
    let refusal = super::cluster::until("the quota to refuse PipelineRuns", LIMIT, || async {
        let created = w
            .cluster
            .kubectl_in(
                &["create", "--dry-run=server", "-n", NAMESPACE, "-f", "-"],
                &probe,
            )
            .await;
        Ok(created
            .err()
            .map(|e| e.to_string())
            .filter(|e| e.contains("quota")))
    })
    .await?;
    w.timeline.line(
        "kubectl",
        format!(
            "create quota {QUOTA} --hard=count/pipelineruns.tekton.dev=0: PipelineRuns are refused ({})",
            refusal.lines().rev().find(|l| l.contains("quota")).unwrap_or("").trim()
        ),
    );
    let before = w.source.histogram_sum(DELIVERED).await?;
    w.import(STREAM, &d, false).await?;
    super::cluster::until("the listener to take the change", LIMIT, || async {
        Ok((w.source.histogram_sum(DELIVERED).await? > before).then_some(()))
    })
    .await?;
    w.timeline.line(
        "listener",
        "answered 2xx, and the source acknowledged the change; the quota refused its PipelineRun",
    );
    let is = format!("{NAMESPACE}/{STREAM}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    if !w
        .observer
        .find("PipelineRun", |r| run_for(r, &is, &d))
        .is_empty()
    {
        bail!("a PipelineRun was created for {d} in spite of the quota");
    }
    w.cluster
        .kubectl(&["delete", "quota", QUOTA, "-n", NAMESPACE])
        .await?;
    w.timeline
        .line("kubectl", format!("delete quota {QUOTA} (no new import)"));
    let run = w
        .observer
        .wait(
            &format!("a PipelineRun for {is} re-driven by the controller"),
            "PipelineRun",
            LIMIT,
            |r| run_for(r, &is, &d),
        )
        .await?;
    let name = run["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The controller's first re-drive's name, keyed by the install's run key (which only the
    // platform's admin, the interceptor and the controller can read).
    let client = w.cluster.client().await?;
    let key = imagegate::runkey::read(
        client.clone(),
        "imagegate-system",
        imagegate::runkey::DEFAULT_SECRET,
    )
    .await
    .map_err(|e| anyhow!(e))?
    .ok_or_else(|| anyhow!("there is no run key"))?;
    let stream = Api::<ImageStream>::namespaced(client, NAMESPACE)
        .get(STREAM)
        .await?;
    let since = stream
        .status_tag("candidate")
        .and_then(|t| t.current())
        .map(|i| imagegate::runkey::since(i.created.as_ref()))
        .unwrap_or_default();
    let redriven = format!(
        "imagegate-{}",
        key.redrive_id(
            &imagegate::runkey::Candidate {
                namespace: NAMESPACE,
                imagestream: STREAM,
                tag: "candidate",
                digest: &d,
                since: &since,
            },
            1
        )
    );
    if name != redriven {
        return Err(anyhow!(
            "the PipelineRun for {d} should be the controller's re-drive {redriven}, not {name}"
        ));
    }
    let done = w.run_done(&name).await?;
    want_task(w, &done, "promote", "True")?;
    if let Some(e) = expect.iter_mut().find(|e| e.is(STREAM)) {
        *e = Expect::new(STREAM, d, "Promoted");
    }
    w.done_timing(t).await
}
