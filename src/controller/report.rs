//! How a run reports: the statuses [`super::status`] computes, written through the `/status`
//! subresource conditional on the run's resourceVersion (a concurrent writer, e.g. a second
//! replica, makes it fail and the run is reconciled again) and only when they differ beyond
//! timestamps, each transition with its Kubernetes Event.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use crate::api::{CustomRun, CustomRunStatus};

use super::context::Context;
use super::error::Error;
use super::status::{self, Outcome, Target, reason};

/// Records the start of an attempt (`Started`, with its target); the run as written.
pub(crate) async fn started(
    run: &CustomRun,
    ctx: &Context,
    target: &Target,
    now: Timestamp,
) -> Result<CustomRun, Error> {
    let written = write_status(run, ctx, status::started(run, target, now)).await?;
    let message = status_message(&written);
    publish(ctx, &written, EventType::Normal, reason::STARTED, message).await;
    Ok(written)
}

/// Starts the attempt's clock for a run whose input could not be read yet, so that a run the
/// API keeps failing times out.
pub(crate) async fn pending(run: &CustomRun, ctx: &Context, now: Timestamp) -> Result<(), Error> {
    write_status(run, ctx, status::pending(run, now)).await?;
    Ok(())
}

/// Ends an attempt: a retry while retries remain, else the final status with its results.
pub(crate) async fn finish(
    run: &CustomRun,
    ctx: &Context,
    outcome: Outcome,
    now: Timestamp,
) -> Result<Action, Error> {
    if status::should_retry(run, &outcome) {
        let written = write_status(run, ctx, status::retrying(run, &outcome, now)).await?;
        let message = status_message(&written);
        publish(ctx, &written, EventType::Warning, reason::RETRYING, message).await;
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    let mut desired = status::finished(run, &outcome, now);
    // The verdict event goes out once the status that holds the verdict is written, marked
    // in that same write so that a restart finds it undelivered (super::verdict).
    let verdict = ctx.verdicts.as_ref().and_then(|_| {
        let mut finished = run.clone();
        finished.status = Some(desired.clone());
        super::verdict::of_run::verdict(&finished)
    });
    if let Some(v) = &verdict {
        if !desired.extra_fields.is_object() {
            desired.extra_fields = serde_json::json!({});
        }
        desired.extra_fields[super::verdict::FIELD] = super::verdict::Verdicts::mark(v);
    }
    let written = write_status(run, ctx, desired).await?;
    if let (Some(verdicts), Some(_)) = (&ctx.verdicts, &verdict) {
        verdicts.send_run(&written);
    }
    ctx.metrics.observe_outcome(&outcome);
    let kind = if outcome.succeeded {
        EventType::Normal
    } else {
        EventType::Warning
    };
    info!(
        namespace = %run.namespace().unwrap_or_default(),
        customrun = %run.name_any(),
        reason = outcome.reason,
        succeeded = outcome.succeeded,
        "CustomRun finished: {}",
        outcome.message
    );
    publish(ctx, &written, kind, outcome.reason, outcome.message.clone()).await;
    Ok(Action::await_change())
}

fn status_message(run: &CustomRun) -> String {
    run.succeeded_condition()
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// Writes `desired` unless the status already says it (timestamps aside); the run as written.
async fn write_status(
    run: &CustomRun,
    ctx: &Context,
    desired: CustomRunStatus,
) -> Result<CustomRun, Error> {
    if run
        .status
        .as_ref()
        .is_some_and(|s| status::same_ignoring_timestamps(s, &desired))
    {
        return Ok(run.clone());
    }
    let api: Api<CustomRun> =
        Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let mut next = run.clone();
    next.status = Some(desired);
    next.metadata.managed_fields = None;
    let written = api
        .replace_status(&run.name_any(), &PostParams::default(), &next)
        .await
        .map_err(|source| Error::WriteStatus {
            name: run.name_any(),
            source,
        })?;
    ctx.metrics.status_writes.inc();
    ctx.runs.wrote(run);
    Ok(written)
}

async fn publish(ctx: &Context, run: &CustomRun, kind: EventType, reason: &str, note: String) {
    let event = Event {
        type_: kind,
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    // Events are for humans; failing to publish one must not fail the run.
    if let Err(e) = ctx.recorder.publish(&event, &run.object_ref(&())).await {
        warn!(customrun = %run.name_any(), error = %e, "cannot publish a Kubernetes Event");
    }
}
