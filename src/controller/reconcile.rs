//! The reconciler, in the fixed order of Tekton's custom tasks: not ours -> done -> cancelled
//! -> timed out -> start -> validate input -> work. The decisions are pure
//! ([`super::decide`], [`super::status`]); this file does the I/O around them: at most one
//! status write to start, one ImageStream write, one status write to finish.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use tracing::{info, warn};

use crate::api::{CustomRun, CustomRunStatus, ImageStream, ImageStreamImage};

use super::checks::ImageFacts;
use super::crd::{ImagePromotion, ImagePromotionSpec};
use super::decide::{Ask, Decision, decide};
use super::metrics::Metrics;
use super::params::{self, SpecSource};
use super::status::{self, Outcome, Target, reason};

/// A clock, injected so that timeouts can be tested.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// What every reconcile shares.
pub struct Context {
    /// The API client.
    pub client: kube::Client,
    /// Publishes Kubernetes Events on transitions.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Metrics,
    /// Now.
    pub clock: Clock,
    /// The resourceVersion of the last status this controller wrote, per CustomRun uid, so a
    /// reconcile of a cached copy older than our own write is skipped (the watch event of the
    /// write triggers the next one) instead of ending in a refused write.
    pub last_written: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl Context {
    /// Whether `run` is a cached copy older than a status this controller already wrote.
    fn is_stale(&self, run: &CustomRun) -> bool {
        let (Some(uid), Some(rv)) = (
            run.metadata.uid.as_ref(),
            run.metadata.resource_version.as_ref(),
        ) else {
            return false;
        };
        let written = self.last_written.lock().unwrap_or_else(|p| p.into_inner());
        // resourceVersions are opaque; when they are not integers, never skip.
        match (
            written.get(uid).and_then(|w| w.parse::<u64>().ok()),
            rv.parse::<u64>().ok(),
        ) {
            (Some(w), Some(r)) => r < w,
            _ => false,
        }
    }

    fn forget(&self, run: &CustomRun) {
        if let Some(uid) = &run.metadata.uid {
            self.last_written
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(uid);
        }
    }

    fn remember(&self, run: &CustomRun) {
        if let (Some(uid), Some(rv)) = (&run.metadata.uid, &run.metadata.resource_version) {
            self.last_written
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(uid.clone(), rv.clone());
        }
    }
}

/// A reconcile that could not finish; retried with backoff by the error policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the ImagePromotion named by `customRef.name`.
    #[error("reading ImagePromotion {name}: {source}")]
    ReadSpec {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the ImageStream.
    #[error("reading ImageStream {name}: {source}")]
    ReadImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading the candidate image's metadata.
    #[error("reading ImageStreamImage {name}: {source}")]
    ReadImage {
        /// `{is}@{digest}`.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the served tag.
    #[error("patching ImageStream {name}: {source}")]
    PatchImageStream {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The ImageStream changed under every attempt to write it.
    #[error("ImageStream {name} changed during each of {attempts} attempts to write it")]
    Contended {
        /// Its name.
        name: String,
        /// How many attempts.
        attempts: usize,
    },
    /// Writing the CustomRun's status.
    #[error("writing the status of CustomRun {name}: {source}")]
    WriteStatus {
        /// Its name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
}

impl Error {
    /// A fixed label for metrics (never the error's text).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ReadSpec { .. } => "read_spec",
            Error::ReadImageStream { .. } => "read_imagestream",
            Error::ReadImage { .. } => "read_image",
            Error::PatchImageStream { .. } => "patch_imagestream",
            Error::Contended { .. } => "contended",
            Error::WriteStatus { .. } => "write_status",
        }
    }
}

fn api_status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// How many times a write conflicting with a concurrent change is re-decided in one reconcile.
const WRITE_ATTEMPTS: usize = 5;

/// Reconciles one CustomRun.
pub async fn reconcile(run: Arc<CustomRun>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    if !params::is_ours(&run) || ctx.is_stale(&run) {
        return Ok(Requeue::await_change());
    }
    if run.is_done() {
        ctx.forget(&run);
        return Ok(Requeue::await_change());
    }
    let timer = ctx.metrics.reconcile_duration.start_timer();
    let result = reconcile_ours(&run, &ctx).await;
    drop(timer);
    result
}

async fn reconcile_ours(run: &CustomRun, ctx: &Context) -> Result<Requeue, Error> {
    let now = (ctx.clock)();
    if run.is_cancelled() {
        let message = run.spec.status_message.clone().unwrap_or_default();
        let outcome = Outcome::failed(reason::CANCELLED, message);
        return finish(run, ctx, landed_or(run, ctx, outcome).await, now).await;
    }
    if run.has_started() {
        match deadline(run) {
            Err(message) => {
                let outcome = Outcome::failed(reason::INVALID_PARAMS, message);
                return finish(run, ctx, outcome, now).await;
            }
            Ok(Some(deadline)) if now >= deadline => {
                let outcome = Outcome::failed(
                    reason::TIMED_OUT,
                    format!(
                        "the attempt did not finish within its timeout ({})",
                        run.spec.timeout.as_deref().unwrap_or("1h0m0s, the default")
                    ),
                );
                return finish(run, ctx, landed_or(run, ctx, outcome).await, now).await;
            }
            _ => {}
        }
    }
    // Validate the input before the first write, so a bad run ends in one write.
    let request = match read_request(run, ctx).await {
        Ok(Ok(r)) => r,
        Ok(Err(outcome)) => return finish(run, ctx, outcome, now).await,
        Err(e) => {
            // Start the clock anyway, so that a run the API keeps failing times out.
            if !run.has_started() {
                write_status(run, ctx, status::pending(run, now)).await?;
            }
            return Err(e);
        }
    };
    let target = Target::recorded(run).unwrap_or_else(|| Target::of(&request));
    let run = if run.has_started() && Target::recorded(run).is_some() {
        run.clone()
    } else {
        let desired = status::started(run, &target, now);
        let written = write_status(run, ctx, desired).await?;
        publish(
            ctx,
            &written,
            EventType::Normal,
            reason::STARTED,
            status_message(&written),
        )
        .await;
        written
    };
    let outcome = work(&run, ctx, &request, &target).await?;
    finish(&run, ctx, outcome, (ctx.clock)()).await
}

/// When the current attempt times out (public for the error policy, which retries no later
/// than that): `startTime + spec.timeout` (nil = 60 minutes, 0 = never).
pub fn deadline(run: &CustomRun) -> Result<Option<Timestamp>, String> {
    let timeout = run.timeout().map_err(|e| {
        format!(
            "spec.timeout {:?}: {e}",
            run.spec.timeout.as_deref().unwrap_or("")
        )
    })?;
    let (Some(timeout), Some(start)) = (
        timeout,
        run.status.as_ref().and_then(|s| s.start_time.as_ref()),
    ) else {
        return Ok(None);
    };
    let span = k8s_openapi::jiff::SignedDuration::try_from(timeout).map_err(|e| e.to_string())?;
    Ok(start.0.checked_add(span).ok())
}

/// The outcome of the run's own write if it already landed on the served tag (read back
/// from the ImageStream), else `fallback`. A cancelled or timed-out run whose promotion was
/// written must not report that nothing happened.
async fn landed_or(run: &CustomRun, ctx: &Context, fallback: Outcome) -> Outcome {
    let Some(target) = Target::recorded(run) else {
        return fallback;
    };
    let streams: Api<ImageStream> =
        Api::namespaced(ctx.client.clone(), &run.namespace().unwrap_or_default());
    let Ok(stream) = streams.get(&target.imagestream).await else {
        return fallback;
    };
    let name = run.name_any();
    let checks = Default::default();
    let ask = Ask {
        target: &target,
        run_name: &name,
        validation_status: "",
        validation_failed: false,
        checks: &checks,
    };
    super::decide::landed(&ask, &stream).unwrap_or(fallback)
}

/// Reads the params and the ImagePromotion spec. The outer error is an API failure (retried),
/// the inner one a run that cannot proceed (terminal).
async fn read_request(
    run: &CustomRun,
    ctx: &Context,
) -> Result<Result<params::Request, Outcome>, Error> {
    let ns = run.namespace().unwrap_or_default();
    let spec = match params::spec_source(run) {
        Err(m) => return Ok(Err(Outcome::failed(reason::INVALID_PARAMS, m))),
        Ok(SpecSource::Defaults) => ImagePromotionSpec::default(),
        Ok(SpecSource::Inline(spec)) => *spec,
        Ok(SpecSource::Named(name)) => {
            let api: Api<ImagePromotion> = Api::namespaced(ctx.client.clone(), &ns);
            match api.get(&name).await {
                Ok(p) => p.spec,
                Err(e) if api_status(&e) == Some(404) => {
                    return Ok(Err(Outcome::failed(
                        reason::INVALID_PARAMS,
                        format!(
                            "customRef names ImagePromotion {name:?}, which does not exist in namespace {ns:?}"
                        ),
                    )));
                }
                Err(source) => return Err(Error::ReadSpec { name, source }),
            }
        }
    };
    Ok(params::parse(run, &spec).map_err(|m| Outcome::failed(reason::INVALID_PARAMS, m)))
}

/// Reads the stream (and the candidate image when checks need it), decides, and makes the
/// one write; a conflicting concurrent write makes it read and decide again.
async fn work(
    run: &CustomRun,
    ctx: &Context,
    request: &params::Request,
    target: &Target,
) -> Result<Outcome, Error> {
    let ns = run.namespace().unwrap_or_default();
    let streams: Api<ImageStream> = Api::namespaced(ctx.client.clone(), &ns);
    let run_name = run.name_any();
    let ask = Ask {
        target,
        run_name: &run_name,
        validation_status: &request.validation_status,
        validation_failed: request.validation_failed(),
        checks: &request.checks,
    };
    let mut facts: Option<ImageFacts> = None;
    for _ in 0..WRITE_ATTEMPTS {
        let stream = match streams.get(&target.imagestream).await {
            Ok(s) => s,
            Err(e) if api_status(&e) == Some(404) => {
                return Ok(Outcome::failed(
                    reason::IMAGESTREAM_NOT_FOUND,
                    format!(
                        "ImageStream {:?} does not exist in namespace {ns:?}",
                        target.imagestream
                    ),
                ));
            }
            Err(source) => {
                return Err(Error::ReadImageStream {
                    name: target.imagestream.clone(),
                    source,
                });
            }
        };
        let mut decision = decide(&ask, &stream, facts.as_ref(), chrono_now(ctx));
        // The checks need the candidate image's metadata: fetch it once, decide again.
        if let Decision::NeedImage { digest, reference } = &decision
            && facts.is_none()
        {
            let name = format!("{}@{digest}", target.imagestream);
            let images: Api<ImageStreamImage> = Api::namespaced(ctx.client.clone(), &ns);
            match images.get(&name).await {
                Ok(isimage) => facts = Some(ImageFacts::from_image(reference, &isimage.image)),
                Err(e) if api_status(&e) == Some(404) => {
                    return Ok(Outcome::failed(
                        reason::VALIDATION_FAILED,
                        format!(
                            "the metadata of {name} cannot be read (the image is not in the stream's history, or was pruned)"
                        ),
                    ));
                }
                Err(source) => return Err(Error::ReadImage { name, source }),
            }
            decision = decide(&ask, &stream, facts.as_ref(), chrono_now(ctx));
        }
        match decision {
            Decision::Final(outcome) => return Ok(outcome),
            Decision::NeedImage { digest, .. } => {
                // decide() asks only when it has no facts, and it was just given them.
                return Ok(Outcome::failed(
                    reason::VALIDATION_FAILED,
                    format!("the metadata of {digest} could not be used for the checks"),
                ));
            }
            Decision::Write { patch, outcome } => {
                match streams
                    .patch(
                        &target.imagestream,
                        &PatchParams::default(),
                        &Patch::Strategic(&patch),
                    )
                    .await
                {
                    Ok(_) => {
                        ctx.metrics.imagestream_writes.inc();
                        info!(
                            namespace = %ns,
                            imagestream = %target.imagestream,
                            tag = %target.served_tag,
                            digest = %outcome.promoted_digest,
                            customrun = %run_name,
                            reason = outcome.reason,
                            "served tag written"
                        );
                        return Ok(outcome);
                    }
                    // Someone else wrote the stream since we read it: read and decide again.
                    Err(e) if api_status(&e) == Some(409) => continue,
                    Err(e) if api_status(&e) == Some(422) => {
                        return Ok(Outcome::failed(
                            reason::INVALID_PARAMS,
                            format!(
                                "the API server refused the change of {}:{}: {}",
                                target.imagestream,
                                target.served_tag,
                                api_message(&e)
                            ),
                        ));
                    }
                    Err(source) => {
                        return Err(Error::PatchImageStream {
                            name: target.imagestream.clone(),
                            source,
                        });
                    }
                }
            }
        }
    }
    Err(Error::Contended {
        name: target.imagestream.clone(),
        attempts: WRITE_ATTEMPTS,
    })
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

fn chrono_now(ctx: &Context) -> chrono::DateTime<chrono::Utc> {
    let now = (ctx.clock)();
    chrono::DateTime::from_timestamp(now.as_second(), now.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// Ends an attempt: a retry while retries remain, else the final status with its results.
async fn finish(
    run: &CustomRun,
    ctx: &Context,
    outcome: Outcome,
    now: Timestamp,
) -> Result<Requeue, Error> {
    if status::should_retry(run, &outcome) {
        let desired = status::retrying(run, &outcome, now);
        let written = write_status(run, ctx, desired).await?;
        publish(
            ctx,
            &written,
            EventType::Warning,
            reason::RETRYING,
            status_message(&written),
        )
        .await;
        return Ok(Requeue::requeue(Duration::from_millis(100)));
    }
    let desired = status::finished(run, &outcome, now);
    let written = write_status(run, ctx, desired).await?;
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
    Ok(Requeue::await_change())
}

fn status_message(run: &CustomRun) -> String {
    run.succeeded_condition()
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// Writes a status through the status subresource, conditional on the run's resourceVersion
/// (a concurrent writer, e.g. a second replica, makes it fail and the run is reconciled
/// again), and only when it differs from the current one beyond timestamps.
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
    ctx.remember(&written);
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
