//! Scenario 11: a push that nobody announces reaches validation through OpenShift's scheduled
//! import (issue 33), beside scenario 10's notification. The stream `jupyter-scheduled-notebook`
//! follows a real OCI registry (CNCF Distribution's, on loopback) that notifies no one; its
//! candidate has `importPolicy.scheduled`. The publisher pushes a build; the image API's
//! scheduled import controller, set through its control API to every few seconds for this
//! scenario (OpenShift's default is every 15 minutes), reads the registry and imports it; the
//! source reports the new candidate, and the pipeline validates and promotes it.

use std::time::{Duration, Instant};

use serde_json::json;

use super::World;
use super::push::{push, registry, stream};
use super::scenarios::{Timing, want_task};
use crate::scenarios::Expect;
use crate::timeline::short_digest;

const STREAM: &str = "jupyter-scheduled-notebook";
const REPO: &str = "opendatahub/scheduled-notebook";
/// The scheduled import's interval during this scenario, in seconds.
const INTERVAL: u64 = 3;
/// OpenShift's, restored after it.
const OPENSHIFT_INTERVAL: u64 = 900;

pub(super) async fn play(w: &mut World, expect: &mut Vec<Expect>) -> anyhow::Result<Timing> {
    w.timeline.heading(
        "11. jupyter-scheduled-notebook's publisher pushes a build to a registry that notifies \
         no one: the scheduled import finds it (every 3 s here; OpenShift's every 15 minutes); \
         validated and promoted",
    );
    let dir = tempfile::tempdir()?;
    let (_registry, host) = registry(dir.path(), None).await?;
    w.cluster
        .image_api("registries", json!({"host": host}).to_string())
        .await?;
    let first = push(&host, REPO, STREAM, "first").await?;
    w.cluster
        .image_api("seed", stream(STREAM, &host, REPO, &first, true))
        .await?;
    let allowed = super::signature::allow_registry(w, &host).await?;
    w.timeline.line(
        "registry",
        format!(
            "the publisher's registry at {host} sends no notifications; {STREAM}:candidate is \
             imported on schedule; {STREAM}:latest serves {}; notebooks' allowedRegistries adds \
             {allowed}",
            short_digest(&first)
        ),
    );

    let t = w.timed(11).await?;
    let schedule = |seconds: u64| json!({"scheduledIntervalSeconds": seconds}).to_string();
    w.cluster.image_api("imports", schedule(INTERVAL)).await?;
    let second = push(&host, REPO, STREAM, "second").await?;
    let pushed = Instant::now();
    w.timeline.line(
        "registry",
        format!(
            "pushed {} as {REPO}:latest; no notification, nobody imports it by hand",
            short_digest(&second)
        ),
    );
    let run = w.triggered(STREAM, &second).await;
    // OpenShift's interval again, whatever happened: the other scenarios' streams are left to it.
    w.cluster
        .image_api("imports", schedule(OPENSHIFT_INTERVAL))
        .await?;
    let run = run?;
    let took = pushed.elapsed();
    w.timeline.line(
        "schedule",
        format!(
            "the scheduled import found the push; PipelineRun {run} {:.1} s after it (the \
             interval: {INTERVAL} s; a notification took scenario 10 well under one)",
            took.as_secs_f64()
        ),
    );
    if took > Duration::from_secs(INTERVAL * 10) {
        anyhow::bail!(
            "the scheduled import took {:.1} s, with an interval of {INTERVAL} s",
            took.as_secs_f64()
        );
    }
    let done = w.run_done(&run).await?;
    want_task(w, &done, "promote", "True")?;
    expect.push(Expect::new(STREAM, second, "Promoted"));
    w.done_timing(t).await
}
