//! The one write of a run: read the ImageStream (and, when the checks need it, the candidate
//! image's metadata, once), let [`super::decide`] choose, and make the write it asks for: a
//! strategic-merge patch of the served tag, conditional on the resourceVersion that was read.
//! A 409 means the stream changed since it was read, so it is read and decided again, up to
//! [`WRITE_ATTEMPTS`] times; a 422 ends the run as `InvalidParams`.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::Value;
use tracing::info;

use crate::api::{CustomRun, ImageStream, ImageStreamImage};

use super::checks::ImageFacts;
use super::context::Context;
use super::decide::{self, Ask, Decision, Fetched};
use super::error::{Error, api_message};
use super::metrics::import_to_promotion;
use super::params::Request;
use super::proof;
use super::signature;
use super::status::{Outcome, Target, reason};
use crate::api::status_code as api_status;

/// How many times a write conflicting with a concurrent change is decided again in one
/// reconcile.
pub(crate) const WRITE_ATTEMPTS: usize = 5;

/// Decides and makes the run's one write. The error is an API failure (retried); every other
/// end, a refusal by the API server included, is the outcome to report.
pub(crate) async fn promote(
    run: &CustomRun,
    ctx: &Context,
    request: &Request,
    target: &Target,
) -> Result<Outcome, Error> {
    let stream = Stream::of(run, ctx, target);
    let run_name = run.name_any();
    let ask = Ask::of(request, target, &run_name);
    let mut fetched = Fetched::default();
    for _ in 0..WRITE_ATTEMPTS {
        let is = match stream.read().await? {
            Ok(is) => is,
            Err(outcome) => return Ok(outcome),
        };
        // What the decision needs read is read once per reconcile, then it decides again.
        let decision = loop {
            match decide::decide(&ask, &is, &fetched, chrono_now(ctx)) {
                Decision::NeedImage { digest, reference } if fetched.image.is_none() => {
                    match stream.image(&digest, &reference).await? {
                        Ok(image) => fetched.image = Some(image),
                        Err(outcome) => return Ok(outcome),
                    }
                }
                Decision::NeedEvidence if fetched.evidence.is_none() => {
                    let read =
                        proof::read::read(&ctx.client, run, &request.proofs, &ctx.own_namespace)
                            .await?;
                    fetched.evidence = Some(read);
                }
                Decision::NeedSignatures {
                    ref digest,
                    ref reference,
                    insecure,
                } if fetched.signatures.is_none() => {
                    let candidate = signature::Candidate {
                        reference,
                        digest,
                        insecure,
                    };
                    let namespaces = signature::Namespaces {
                        run: &request.namespace,
                        keys: &ctx.own_namespace,
                    };
                    let read =
                        signature::read(&ctx.client, namespaces, &candidate, &request.signatures)
                            .await?;
                    fetched.signatures = Some(read);
                }
                decided => break decided,
            }
        };
        match decision {
            Decision::Final(outcome) => return Ok(outcome),
            Decision::NeedImage { digest, .. } => {
                // decide() asks only when it has no facts, and it was just given them.
                return Ok(Outcome::failed(
                    reason::VALIDATION_FAILED,
                    format!("the metadata of {digest} could not be used for the checks"),
                ));
            }
            Decision::NeedEvidence => {
                return Ok(Outcome::failed(
                    reason::UNVERIFIED,
                    "the proof of validation could not be read",
                ));
            }
            Decision::NeedSignatures { digest, .. } => {
                return Ok(Outcome::failed(
                    reason::SIGNATURE_MISSING,
                    format!("the signatures of {digest} could not be read"),
                ));
            }
            // Looked at again 25 ms later, doubling to a second (`error::not_yet_delay`), for
            // at most LISTING_GRACE after the run was created: Tekton lists a child it made
            // within its next status write, and Chains signs a TaskRun within moments of its
            // end; a run someone made by hand, or a TaskRun Chains never signs, must not keep
            // the controller polling until its PipelineRun ends.
            Decision::Wait(why) => {
                let created = run.metadata.creation_timestamp.as_ref().map(|t| t.0);
                return match still_waiting(created, (ctx.clock)(), &why) {
                    Ok(()) => Err(Error::NotYet { why }),
                    Err(message) => Ok(Outcome::failed(reason::UNVERIFIED, message)),
                };
            }
            Decision::Write { patch, outcome } => {
                // Measured from what was read before the write: the candidate's import time.
                let waited = (outcome.reason == reason::PROMOTED)
                    .then(|| {
                        import_to_promotion(
                            &is,
                            &target.candidate_tag,
                            &outcome.promoted_digest,
                            (ctx.clock)(),
                        )
                    })
                    .flatten();
                if let Some(outcome) = stream
                    .write(ctx, &run_name, &patch, outcome, waited)
                    .await?
                {
                    return Ok(outcome);
                }
            }
        }
    }
    Err(Error::Contended {
        name: target.imagestream.clone(),
        attempts: WRITE_ATTEMPTS,
    })
}

/// The outcome of the run's own write if it already landed on the served tag (read back
/// from the ImageStream), else `fallback`. A cancelled or timed-out run whose promotion was
/// written must not report that nothing happened.
pub(crate) async fn promoted_else(run: &CustomRun, ctx: &Context, fallback: Outcome) -> Outcome {
    let Some(target) = Target::recorded(run) else {
        return fallback;
    };
    let Ok(is) = Stream::of(run, ctx, &target)
        .api
        .get(&target.imagestream)
        .await
    else {
        return fallback;
    };
    let name = run.name_any();
    let checks = Vec::new();
    let ask = Ask {
        target: &target,
        run_name: &name,
        validation_status: "",
        validation: crate::controller::params::Validation::Passed,
        checks: &checks,
        proofs: &[],
        signatures: &[],
        previous_tag: "",
        allow_rolled_back: false,
        promote_as: Default::default(),
        odh: None,
    };
    decide::landed(&ask, &is).unwrap_or(fallback)
}

/// The run's ImageStream and the calls on it.
struct Stream<'a> {
    api: Api<ImageStream>,
    client: &'a kube::Client,
    namespace: String,
    target: &'a Target,
}

impl<'a> Stream<'a> {
    fn of(run: &CustomRun, ctx: &'a Context, target: &'a Target) -> Stream<'a> {
        let namespace = run.namespace().unwrap_or_default();
        Stream {
            api: Api::namespaced(ctx.client.clone(), &namespace),
            client: &ctx.client,
            namespace,
            target,
        }
    }

    /// The stream as it is now; a missing one ends the run (`ImageStreamNotFound`).
    async fn read(&self) -> Result<Result<ImageStream, Outcome>, Error> {
        let name = &self.target.imagestream;
        match self.api.get(name).await {
            Ok(is) => Ok(Ok(is)),
            Err(e) if api_status(&e) == Some(404) => Ok(Err(Outcome::failed(
                reason::IMAGESTREAM_NOT_FOUND,
                format!(
                    "ImageStream {name:?} does not exist in namespace {:?}",
                    self.namespace
                ),
            ))),
            Err(source) => Err(Error::ReadImageStream {
                name: name.clone(),
                source,
            }),
        }
    }

    /// The checks' facts about the candidate `digest` (pulled as `reference`); an image whose
    /// metadata cannot be found fails validation.
    async fn image(
        &self,
        digest: &str,
        reference: &str,
    ) -> Result<Result<ImageFacts, Outcome>, Error> {
        let name = format!("{}@{digest}", self.target.imagestream);
        let images: Api<ImageStreamImage> = Api::namespaced(self.client.clone(), &self.namespace);
        match images.get(&name).await {
            Ok(isimage) => Ok(Ok(ImageFacts::from_image(reference, &isimage.image))),
            Err(e) if api_status(&e) == Some(404) => Ok(Err(Outcome::failed(
                reason::VALIDATION_FAILED,
                format!(
                    "the metadata of {name} cannot be read (the image is not in the stream's history, or was pruned)"
                ),
            ))),
            Err(source) => Err(Error::ReadImage { name, source }),
        }
    }

    /// Applies `patch` (conditional on the resourceVersion it carries): `Some(outcome)` once
    /// written or refused for good, `None` when the stream changed since it was read.
    async fn write(
        &self,
        ctx: &Context,
        run_name: &str,
        patch: &Value,
        outcome: Outcome,
        waited: Option<f64>,
    ) -> Result<Option<Outcome>, Error> {
        let t = self.target;
        let pp = PatchParams::default();
        match self
            .api
            .patch(&t.imagestream, &pp, &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                ctx.metrics.imagestream_writes.inc();
                if let Some(seconds) = waited {
                    ctx.metrics.import_to_promotion.observe(seconds);
                }
                info!(
                    namespace = %self.namespace,
                    imagestream = %t.imagestream,
                    tag = %t.served_tag,
                    digest = %outcome.promoted_digest,
                    customrun = %run_name,
                    reason = outcome.reason,
                    "served tag written"
                );
                Ok(Some(outcome))
            }
            Err(e) if api_status(&e) == Some(409) => Ok(None),
            Err(e) if api_status(&e) == Some(422) => Ok(Some(Outcome::failed(
                reason::INVALID_PARAMS,
                format!(
                    "the API server refused the change of {}:{}: {}",
                    t.imagestream,
                    t.served_tag,
                    api_message(&e)
                ),
            ))),
            Err(source) => Err(Error::PatchImageStream {
                name: t.imagestream.clone(),
                source,
            }),
        }
    }
}

/// How long after its creation a run waits for its PipelineRun to list it, or for Tekton Chains
/// to sign the TaskRuns its proof needs signed.
pub(crate) const LISTING_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a run created at `created` may still wait for its PipelineRun to list it (`why`);
/// past [`LISTING_GRACE`] (or with no creation time), the message that ends it `Unverified`.
pub(crate) fn still_waiting(
    created: Option<k8s_openapi::jiff::Timestamp>,
    now: k8s_openapi::jiff::Timestamp,
    why: &str,
) -> Result<(), String> {
    let grace = k8s_openapi::jiff::SignedDuration::try_from(LISTING_GRACE).unwrap_or_default();
    match created.and_then(|c| c.checked_add(grace).ok()) {
        Some(until) if now < until => Ok(()),
        _ => Err(format!(
            "nothing proves the validation: {why}, {}s after the CustomRun was created",
            LISTING_GRACE.as_secs()
        )),
    }
}

/// The injected clock's now, as the checks take it.
fn chrono_now(ctx: &Context) -> chrono::DateTime<chrono::Utc> {
    let now = (ctx.clock)();
    chrono::DateTime::from_timestamp(now.as_second(), now.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    #[test]
    fn a_run_waits_for_its_listing_a_minute_from_its_creation_and_no_longer() {
        let created: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let at = |s: i64| created.checked_add(SignedDuration::from_secs(s)).unwrap();
        assert_eq!(still_waiting(Some(created), at(1), "not listed"), Ok(()));
        assert_eq!(still_waiting(Some(created), at(59), "not listed"), Ok(()));
        let gave_up = still_waiting(Some(created), at(60), "not listed").unwrap_err();
        assert!(
            gave_up.starts_with("nothing proves the validation: not listed, 60s after"),
            "{gave_up}"
        );
        assert!(
            still_waiting(None, at(1), "not listed").is_err(),
            "no creation time"
        );
    }
}
