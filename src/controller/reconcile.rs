//! The reconciler, in the fixed order of Tekton's custom tasks: not ours -> done -> cancelled
//! -> timed out -> start and validate input -> work. It only orders the steps and hands off:
//! [`super::params`] reads the input and [`super::policy`] judges it by every ImagePromotion
//! that governs the stream, [`super::authorize`] asks whether the run's service account
//! may promote (before the start, so that a refused run ends in one write), [`super::promote`]
//! makes the one ImageStream write and [`super::report`] writes the statuses [`super::status`]
//! computes: at most one status write to start, one ImageStream write, one status write to
//! finish. A failed reconcile goes to [`super::error::error_policy`].

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;

use crate::api::CustomRun;

use super::context::Context;
use super::crd::ImagePromotion;
use super::deadline::deadline;
use super::error::Error;
use super::params::{self, SpecSource};
use super::policy::{self, Judged, Own};
use super::runs::RunKey;
use super::status::{Outcome, Target, reason};
use super::{authorize, promote, report};
use crate::api::status_code as api_status;

/// Reconciles one CustomRun.
pub async fn reconcile(run: Arc<CustomRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    // A cached copy older than our own status write is skipped: the write's watch event
    // brings the next reconcile.
    if !params::is_ours(&run) || ctx.runs.is_stale(&run) {
        return Ok(Action::await_change());
    }
    if run.is_done() {
        ctx.runs.forget(&RunKey::of(&run));
        // A verdict written but not yet delivered (the controller stopped in between).
        if let Some(v) = &ctx.verdicts
            && super::verdict::Verdicts::pending(&run)
        {
            let _ = v.send_pending(&run);
        }
        return Ok(Action::await_change());
    }
    let _timer = ctx.metrics.reconcile_duration.start_timer();
    let result = reconcile_ours(&run, &ctx).await;
    if result.is_ok() {
        ctx.runs.succeeded(&run);
    }
    result
}

async fn reconcile_ours(run: &CustomRun, ctx: &Context) -> Result<Action, Error> {
    let now = (ctx.clock)();
    if run.is_cancelled() {
        let message = run.spec.status_message.clone().unwrap_or_default();
        let cancelled = Outcome::failed(reason::CANCELLED, message);
        let outcome = promote::promoted_else(run, ctx, cancelled).await;
        return report::finish(run, ctx, outcome, now).await;
    }
    if let Some(outcome) = timed_out(run, ctx, now).await {
        return report::finish(run, ctx, outcome, now).await;
    }
    // The input is validated before the first write, so that a bad run ends in one write.
    let judged = match read_input(run, ctx).await {
        Ok(Ok(judged)) => judged,
        Ok(Err(outcome)) => return report::finish(run, ctx, outcome, now).await,
        Err(e) => {
            // Start the clock anyway, so that a run the API keeps failing times out.
            if !run.has_started() {
                report::pending(run, ctx, now).await?;
            }
            return Err(e);
        }
    };
    if let Some(forbidden) = authorize::authorize(run, ctx, &judged).await? {
        // A write of this run that landed before its permission went is still reported.
        let outcome = promote::promoted_else(run, ctx, forbidden).await;
        return report::finish(run, ctx, outcome, now).await;
    }
    let (run, target) = match Target::recorded(run) {
        Some(target) if run.has_started() => (run.clone(), target),
        recorded => {
            let target = recorded.unwrap_or_else(|| Target::of(&judged.request));
            (report::started(run, ctx, &target, now).await?, target)
        }
    };
    let outcome = promote::promote(&run, ctx, &judged.request, &target).await?;
    report::finish(&run, ctx, outcome, (ctx.clock)()).await
}

/// The outcome of a started attempt that is past its deadline (or whose timeout does not
/// parse); `None` while it may go on.
async fn timed_out(run: &CustomRun, ctx: &Context, now: Timestamp) -> Option<Outcome> {
    if !run.has_started() {
        return None;
    }
    match deadline(run) {
        Err(message) => Some(Outcome::failed(reason::INVALID_PARAMS, message)),
        Ok(Some(deadline)) if now >= deadline => {
            let message = format!(
                "the attempt did not finish within its timeout ({})",
                run.spec.timeout.as_deref().unwrap_or("1h0m0s, the default")
            );
            let timed_out = Outcome::failed(reason::TIMED_OUT, message);
            Some(promote::promoted_else(run, ctx, timed_out).await)
        }
        Ok(_) => None,
    }
}

/// Reads the params over the ImagePromotion spec the run names or inlines, judged by every
/// ImagePromotion that governs its stream ([`policy`]). The outer error is an API failure
/// (retried), the inner one a run that cannot proceed (terminal: `InvalidParams`,
/// `ParamOverridesPolicy`, `PolicyConflict`).
async fn read_input(run: &CustomRun, ctx: &Context) -> Result<Result<Judged, Outcome>, Error> {
    let invalid = |message: String| Outcome::failed(reason::INVALID_PARAMS, message);
    let ns = run.namespace().unwrap_or_default();
    let source = match params::spec_source(run) {
        Err(message) => return Ok(Err(invalid(message))),
        Ok(source) => source,
    };
    // Every run reads them all: the policy of its stream is in them whatever it names.
    let api: Api<ImagePromotion> = Api::namespaced(ctx.client.clone(), &ns);
    let all = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // The resource is not served (its CRD was deleted, and every ImagePromotion with it):
        // nothing governs the stream. The preflight refuses to start without the CRD.
        Err(e) if api_status(&e) == Some(404) => Vec::new(),
        Err(source) => {
            return Err(Error::ReadSpec {
                namespace: ns,
                source,
            });
        }
    };
    let own = match source {
        SpecSource::Defaults => Own::Defaults,
        SpecSource::Inline(spec) => Own::Inline(*spec),
        SpecSource::Named(name) => {
            let found = all
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&*name));
            let Some(found) = found else {
                return Ok(Err(invalid(format!(
                    "customRef names ImagePromotion {name:?}, which does not exist in namespace {ns:?}"
                ))));
            };
            Own::Named(name, found.spec.clone())
        }
    };
    Ok(policy::judge(run, &own, &all).map_err(policy::Refusal::outcome))
}
